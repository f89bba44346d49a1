// fanout status's text and JSON. See status_text.hpp.
#include "fanout/report/status_text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fanout/util/clock.hpp"

namespace fanout::report {

std::string format_status_json(const store::JobStatus& s,
                               const std::optional<InterchangeStatus>& interchange) {
  using Json = nlohmann::ordered_json;
  Json ix = nullptr;
  if (interchange) {
    const auto& i = *interchange;
    ix = {{"state", i.state},
          {"pid", i.pid > 0 ? Json(i.pid) : Json(nullptr)},
          {"host", !i.host.empty() ? Json(i.host) : Json(nullptr)},
          {"started", i.started > 0 ? Json(i.started) : Json(nullptr)}};
  }
  auto pools = Json::array();
  for (const auto& p : s.pools) {
    pools.push_back(
        {{"name", p.name},
         {"node", p.node},
         {"state", p.state},
         {"workers", p.workers},
         {"attempts", p.attempts},
         {"devices", p.devices},
         {"heartbeat_age_s", p.heartbeat_age_s >= 0 ? Json(p.heartbeat_age_s) : Json(nullptr)}});
  }
  auto error = [](const store::JobStatus::ErrorLine& e) {
    return Json{{"minibatch", e.minibatch}, {"attempt", e.attempt}, {"process", e.process},
                {"status", e.status},       {"message", e.message}, {"time", e.time}};
  };
  auto errors = Json::array();
  for (const auto& e : s.last_errors) errors.push_back(error(e));
  const Json out = {{"id", s.id},
                    {"name", s.name},
                    {"state", s.state},
                    {"reason", s.reason},
                    {"total", s.total},
                    {"total_known", s.total_known},
                    {"succeeded", s.succeeded},
                    {"failed", s.failed},
                    {"pending", s.pending},
                    {"running", s.running},
                    {"items_succeeded", s.items_succeeded},
                    {"items_failed", s.items_failed},
                    {"attempts", s.attempts},
                    {"attempts_failed", s.attempts_failed},
                    {"started", s.started},
                    {"ended", s.ended > 0 ? Json(s.ended) : Json(nullptr)},  // null while running
                    {"elapsed_s", s.elapsed_s},
                    {"minibatches_per_s", s.minibatches_per_s},
                    {"items_per_s", s.items_per_s},
                    {"eta_s", s.eta_s},
                    {"processes", s.processes},
                    {"log_dir", s.log_dir},
                    {"output_path", s.output_path},
                    {"pools", std::move(pools)},
                    {"last_errors", std::move(errors)},
                    {"first_error", s.first_error ? error(*s.first_error) : Json(nullptr)},
                    {"interchange", std::move(ix)}};
  return out.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
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
                     s.ended > 0            ? "ran"
                     : s.state == "running" ? "running for"
                                            : "since then",
                     s.elapsed_s, s.minibatches_per_s, s.items_per_s);
  if (s.eta_s >= 0) out += fmt::format("; eta {:.0f} s", s.eta_s);
  out += "\n";
  out += fmt::format("  pools: {}", s.pools.size());
  for (const auto& p : s.pools) {
    out += fmt::format("\n    {} on {}: {}, {} workers, {} attempts", p.name, p.node,
                       p.state.empty() ? "?" : p.state, p.workers, p.attempts);
    if (!p.devices.empty()) out += fmt::format(", devices {}", p.devices);
    if (p.state == "connected" && p.heartbeat_age_s >= 0) {
      out += fmt::format(", last heartbeat {:.0f} s ago", p.heartbeat_age_s);
    }
  }
  out += fmt::format("\n  worker processes that ran attempts: {}\n", s.processes);
  if (!s.output_path.empty()) out += fmt::format("  output: {}\n", s.output_path);
  if (!s.log_dir.empty()) out += fmt::format("  logs: {}\n", s.log_dir);
  if (s.first_error) {
    const auto& e = *s.first_error;
    out +=
        fmt::format("  first error: {} mini-batch {} try {} on {}: {}: {}\n", e.time, e.minibatch,
                    e.attempt, e.process.empty() ? "-" : e.process, e.status, e.message);
  }
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
