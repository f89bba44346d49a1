// fanout status's text and JSON. See status_text.hpp.
#include "fanout/report/status_text.hpp"

#include <fmt/format.h>

#include "fanout/util/clock.hpp"
#include "fanout/util/json.hpp"

namespace fanout::report {

std::string format_status_json(const store::JobStatus& s) {
  std::string out = fmt::format(
      R"({{"id":{},"name":{},"state":{},"reason":{},"total":{},"total_known":{},"succeeded":{},)"
      R"("failed":{},"pending":{},"running":{},"items_succeeded":{},"items_failed":{},)"
      R"("attempts":{},"attempts_failed":{},"started":{:.3f},"ended":{:.3f},"elapsed_s":{:.3f},)"
      R"("minibatches_per_s":{:.3f},"items_per_s":{:.3f},"eta_s":{:.1f},"processes":{},)"
      R"("log_dir":{},"output_path":{},"pools":[)",
      s.id, json_quote(s.name), json_quote(s.state), json_quote(s.reason), s.total,
      s.total_known ? "true" : "false", s.succeeded, s.failed, s.pending, s.running,
      s.items_succeeded, s.items_failed, s.attempts, s.attempts_failed, s.started, s.ended,
      s.elapsed_s, s.minibatches_per_s, s.items_per_s, s.eta_s, s.processes, json_quote(s.log_dir),
      json_quote(s.output_path));
  for (std::size_t i = 0; i < s.pools.size(); ++i) {
    const auto& p = s.pools[i];
    if (i > 0) out += ",";
    out += fmt::format(R"({{"name":{},"node":{},"state":{},"workers":{},"attempts":{}}})",
                       json_quote(p.name), json_quote(p.node), json_quote(p.state), p.workers,
                       p.attempts);
  }
  out += R"(],"last_errors":[)";
  for (std::size_t i = 0; i < s.last_errors.size(); ++i) {
    const auto& e = s.last_errors[i];
    if (i > 0) out += ",";
    out += fmt::format(
        R"({{"minibatch":{},"attempt":{},"process":{},"status":{},"message":{},"time":{}}})",
        e.minibatch, e.attempt, json_quote(e.process), json_quote(e.status), json_quote(e.message),
        json_quote(e.time));
  }
  out += "]}\n";
  return out;
}

std::string format_status_text(const store::JobStatus& s) {
  const std::uint64_t done = s.succeeded + s.failed;
  std::string out = fmt::format("job {} ({}): {}", s.id, s.name, s.state);
  if (!s.reason.empty()) out += fmt::format(": {}", s.reason);
  out += "\n";
  const std::string total = s.total_known ? std::to_string(s.total) : fmt::format("{}+", s.total);
  out += fmt::format("  mini-batches: {}/{} done", done, total);
  if (s.total_known && s.total > 0) {
    out +=
        fmt::format(" ({:.1f}%)", 100.0 * static_cast<double>(done) / static_cast<double>(s.total));
  }
  out += fmt::format(": {} succeeded, {} failed, {} running, {} pending\n", s.succeeded, s.failed,
                     s.running, s.pending);
  out += fmt::format("  items: {} succeeded, {} failed; attempts: {} ({} failed)\n",
                     s.items_succeeded, s.items_failed, s.attempts, s.attempts_failed);
  out += fmt::format("  started {}, {} {:.1f} s; rate {:.3f} mini-batches/s, {:.3f} items/s",
                     s.started > 0 ? iso_utc(s.started) : std::string("-"),
                     s.ended > 0 ? "ran" : "running for", s.elapsed_s, s.minibatches_per_s,
                     s.items_per_s);
  if (s.eta_s >= 0) out += fmt::format("; eta {:.0f} s", s.eta_s);
  out += "\n";
  out += fmt::format("  pools: {}", s.pools.size());
  for (const auto& p : s.pools) {
    out += fmt::format("\n    {} on {}: {}, {} workers, {} attempts", p.name, p.node,
                       p.state.empty() ? "?" : p.state, p.workers, p.attempts);
  }
  out += fmt::format("\n  worker processes that ran attempts: {}\n", s.processes);
  if (!s.output_path.empty()) out += fmt::format("  output: {}\n", s.output_path);
  if (!s.log_dir.empty()) out += fmt::format("  logs: {}\n", s.log_dir);
  out += "  last errors:";
  if (s.last_errors.empty()) out += " none";
  for (const auto& e : s.last_errors) {
    out += fmt::format("\n    {} mini-batch {} try {} on {}: {}: {}", e.time, e.minibatch,
                       e.attempt, e.process.empty() ? "-" : e.process, e.status, e.message);
  }
  out += "\n";
  return out;
}

}  // namespace fanout::report
