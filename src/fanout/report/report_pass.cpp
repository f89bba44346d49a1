// The CSV side of the report's one pass. See report_pass.hpp.
#include "fanout/report/report_pass.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <utility>

#include "fanout/report/format.hpp"

namespace fanout::report {

namespace {

constexpr std::size_t kChunk = 1 << 20;

// A REAL as SQLite prints it ("%!.15g": integral values keep ".0").
std::string sql_real_text(double v) {
  std::string s = fmt::format("{:.15g}", v);
  if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
  return s;
}

void field(std::string& out, std::string_view s) {
  out += ',';
  append_csv_field(out, s);
}

void int_field(std::string& out, bool present, std::int64_t v) {
  out += ',';
  if (present) fmt::format_to(std::back_inserter(out), "{}", v);
}

// sql_round_text(x, digits) appended to out without a string of its own.
void append_round(std::string& out, double x, int digits) {
  // Below 1e15 the fixed text fits the buffer: at most 16 digits, a sign, a point and `digits`.
  if (!std::isfinite(x) || std::fabs(x) >= 1e15 || digits > 6) {
    out += sql_round_text(x, digits);
    return;
  }
  char fixed[48];
  const auto end = fmt::format_to_n(fixed, sizeof fixed - 1, "{:.{}f}", x, digits).out;
  *end = '\0';
  const std::size_t at = out.size();
  fmt::format_to(std::back_inserter(out), "{:.15g}", std::strtod(fixed, nullptr));
  if (out.find_first_of(".eEni", at) == std::string::npos) out += ".0";
}

void round_field(std::string& out, bool present, double v, int digits) {
  out += ',';
  if (present) append_round(out, v, digits);
}

// SQLite's milliseconds since the Unix epoch for `unix_seconds`, split into whole seconds and
// the milliseconds past them.
std::pair<std::int64_t, std::int64_t> sql_time_parts(double unix_seconds) {
  // SQLite: julian day in ms = (sqlite3_int64)(s * 1000 + 210866760000000 + 0.5).
  constexpr std::int64_t kEpochJdMs = 210866760000000LL;
  const auto jd_ms = static_cast<std::int64_t>(unix_seconds * 1000.0 + 210866760000000.0 + 0.5);
  const std::int64_t ms = jd_ms - kEpochJdMs;
  std::int64_t secs = ms / 1000;
  std::int64_t frac = ms % 1000;
  if (frac < 0) {
    frac += 1000;
    secs -= 1;
  }
  return {secs, frac};
}

// "YYYY-MM-DDTHH:MM:SS." of a second since the Unix epoch.
std::string sql_second_prefix(std::int64_t secs) {
  auto t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void time_field(std::string& out, const std::optional<double>& t) {
  out += ',';
  if (t) out += sql_time_text(*t);
}

}  // namespace

std::string sql_round_text(double x, int digits) {
  if (!std::isfinite(x)) return sql_real_text(x);
  const std::string fixed = fmt::format("{:.{}f}", x, digits);
  return sql_real_text(std::strtod(fixed.c_str(), nullptr));
}

std::string sql_time_text(double unix_seconds) {
  const auto [secs, frac] = sql_time_parts(unix_seconds);
  return fmt::format("{}{:03}Z", sql_second_prefix(secs), frac);
}

void ReportPass::Sums::add(const store::AttemptRow& a) {
  ++attempts;
  const bool is_ok = a.status == "RUN_DONE";
  ok += is_ok ? 1 : 0;
  failed += is_ok ? 0 : 1;
  if (a.has_items) {
    items += a.items;
    has_items = true;
  }
  if (a.has_succeeded) {
    items_ok += a.succeeded;
    has_ok = true;
  }
  if (a.has_failed) {
    items_failed += a.failed;
    has_failed = true;
  }
  if (a.has_elapsed) {
    elapsed += a.elapsed_s;
    ++n_elapsed;
  }
  if (a.has_cpu) {
    cpu += a.cpu_s;
    ++n_cpu;
  }
  if (a.has_run) {
    run += a.run_s;
    ++n_run;
  }
  if (a.has_start) {
    first_start = first_start ? std::min(*first_start, a.start) : a.start;
    if (a.has_elapsed) {
      const double end = a.start + a.elapsed_s;
      last_end = last_end ? std::max(*last_end, end) : end;
    }
  }
}

ReportPass::ReportPass(AtomicFile& processed, std::string_view processed_header,
                       std::size_t first_errors)
    : processed_(processed), first_errors_(first_errors) {
  buf_.reserve(kChunk + 65536);
  buf_ += processed_header;
  buf_ += '\n';
}

ReportPass::Process& ReportPass::process_of(const store::AttemptRow& a) {
  const ProcessKeyView view{a.has_node ? std::optional<std::string_view>(a.node) : std::nullopt,
                            a.has_pool ? std::optional<std::string_view>(a.pool) : std::nullopt,
                            a.process};
  if (auto it = processes_.find(view); it != processes_.end()) return it->second;
  ProcessKey key{a.has_node ? std::optional<std::string>(a.node) : std::nullopt,
                 a.has_pool ? std::optional<std::string>(a.pool) : std::nullopt,
                 std::string(a.process)};
  Process& p = processes_.try_emplace(std::move(key)).first->second;
  p.shown = a.pool.empty() ? std::string(a.process) : fmt::format("{}/{}", a.pool, a.process);
  // node_summary: attempts with a node. Its pools and processes follow from the key, so they
  // are added once, with the key.
  if (!a.node.empty()) {
    Node& n = nodes_[std::string(a.node)];
    if (a.has_pool) n.pools.insert(std::string(a.pool));
    n.processes.insert(fmt::format("{}/{}", a.pool, a.process));
    p.node = &n;
  }
  return p;
}

void ReportPass::append_time(double unix_seconds) {
  const auto [secs, frac] = sql_time_parts(unix_seconds);
  if (time_prefix_.empty() || secs != time_second_) {
    time_prefix_ = sql_second_prefix(secs);
    time_second_ = secs;
  }
  buf_ += time_prefix_;
  fmt::format_to(std::back_inserter(buf_), "{:03}Z", frac);
}

void ReportPass::add(const store::AttemptRow& a) {
  // processed_mini-batches.csv: the columns of view processed_minibatches.
  Process* p = a.process.empty() ? nullptr : &process_of(a);
  const std::string_view shown = p != nullptr ? std::string_view(p->shown) : std::string_view();
  fmt::format_to(std::back_inserter(buf_), "{},{}", a.minibatch_id, a.attempt);
  field(buf_, shown);
  buf_ += ',';
  if (a.has_start) append_time(a.start);
  int_field(buf_, a.has_items, a.items);
  int_field(buf_, a.has_succeeded, a.succeeded);
  int_field(buf_, a.has_failed, a.failed);
  round_field(buf_, a.has_elapsed, a.elapsed_s, 3);
  round_field(buf_, a.has_cpu, a.cpu_s, 3);
  round_field(buf_, a.has_run, a.run_s, 3);
  field(buf_, a.status);
  field(buf_, a.error_category);
  field(buf_, a.error_message);
  buf_ += ',';
  if (a.has_detail) append_csv_field(buf_, a.detail);
  buf_ += '\n';
  if (buf_.size() >= kChunk) finish_processed();

  if (a.status != "RUN_DONE" && first_failed_.size() < first_errors_) {
    first_failed_.push_back(store::FailedAttemptRow{
        static_cast<std::int64_t>(a.minibatch_id), a.attempt, std::string(a.status),
        std::string(a.error_message), std::string(shown)});
  }
  if (p == nullptr) return;
  // process_summary: by node, pool, process.
  if (a.has_pid) p->pids.insert(a.worker_pid);
  p->sums.add(a);
  if (a.device > p->device) p->device = a.device;
  if (a.cpus > p->cpus) p->cpus = a.cpus;
  p->threads = std::max(p->threads, a.threads);
  if (p->node != nullptr) p->node->sums.add(a);
}

void ReportPass::finish_processed() {
  processed_.write(buf_);
  buf_.clear();
}

std::string ReportPass::process_summary(std::string_view header) const {
  // ORDER BY node, process (the shown name); NULL nodes first.
  std::vector<const std::pair<const ProcessKey, Process>*> rows;
  rows.reserve(processes_.size());
  for (const auto& p : processes_) rows.push_back(&p);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    return std::tie(std::get<0>(a->first), a->second.shown) <
           std::tie(std::get<0>(b->first), b->second.shown);
  });
  std::string out(header);
  out += '\n';
  for (const auto* p : rows) {
    const auto& [key, proc] = *p;
    const Sums& s = proc.sums;
    if (std::get<0>(key)) append_csv_field(out, *std::get<0>(key));
    field(out, proc.shown);
    fmt::format_to(std::back_inserter(out), ",{},{},{},{}", proc.pids.size(), s.attempts, s.ok,
                   s.failed);
    int_field(out, s.has_items, s.items);
    int_field(out, s.has_ok, s.items_ok);
    int_field(out, s.has_failed, s.items_failed);
    round_field(out, s.n_elapsed > 0, s.elapsed, 3);
    round_field(out, s.n_cpu > 0, s.cpu, 3);
    round_field(out, s.n_run > 0, s.run, 3);
    round_field(out, s.n_run > 0, s.n_run > 0 ? s.run / static_cast<double>(s.n_run) : 0, 4);
    round_field(out, s.n_elapsed > 0 && s.n_run > 0, s.elapsed - s.run, 3);
    time_field(out, s.first_start);
    time_field(out, s.last_end);
    field(out, proc.device);
    field(out, proc.cpus);
    fmt::format_to(std::back_inserter(out), ",{}", proc.threads);
    out += '\n';
  }
  return out;
}

std::string ReportPass::node_summary(std::string_view header) const {
  std::string out(header);
  out += '\n';
  for (const auto& [node, n] : nodes_) {
    const Sums& s = n.sums;
    append_csv_field(out, node);
    fmt::format_to(std::back_inserter(out), ",{},{},{},{},{}", n.pools.size(), n.processes.size(),
                   s.attempts, s.ok, s.failed);
    int_field(out, s.has_items, s.items);
    int_field(out, s.has_ok, s.items_ok);
    int_field(out, s.has_failed, s.items_failed);
    round_field(out, s.n_elapsed > 0, s.elapsed, 3);
    round_field(out, s.n_cpu > 0, s.cpu, 3);
    round_field(out, s.n_run > 0, s.run, 3);
    time_field(out, s.first_start);
    time_field(out, s.last_end);
    const bool rate = s.first_start && s.last_end && *s.last_end != *s.first_start;
    round_field(out, rate,
                rate ? static_cast<double>(s.attempts) / (*s.last_end - *s.first_start) : 0, 3);
    out += '\n';
  }
  return out;
}

}  // namespace fanout::report
