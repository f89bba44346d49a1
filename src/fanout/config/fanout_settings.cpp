// The `fanout:` block of a job file. See detail/fanout_settings.hpp.
#include "fanout/config/detail/fanout_settings.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <string_view>

#include "fanout/config/detail/launcher_settings.hpp"

namespace fanout::config::detail {

FanoutSettings read_fanout_settings(const YamlReader& r, const Entry& e,
                                    const std::string& base_dir) {
  auto u32 = [&](const Entry& x, std::int64_t lo,
                 std::int64_t hi = std::numeric_limits<std::uint32_t>::max()) {
    return static_cast<std::uint32_t>(r.integer(x, lo, hi));
  };
  // The second line: the launcher's keys (detail/launcher_settings.hpp).
  Fields f = r.fields(e, {"prefetch",
                          "poll_ms",
                          "heartbeat_period_ms",
                          "heartbeat_threshold_ms",
                          "python",
                          "db",
                          "run_dir",
                          "log_level",
                          "workers",
                          "row_separator",
                          "row_header",
                          "priority",
                          "launcher",
                          "partition",
                          "account",
                          "qos",
                          "walltime",
                          "nodes",
                          "min_nodes",
                          "max_nodes",
                          "cores_per_node",
                          "exclusive",
                          "scheduler_options",
                          "worker_init",
                          "interchange_address",
                          "allow_partial",
                          "metrics_listen"});
  FanoutSettings s;
  s.launch = read_launcher_settings(r, f);
  if (const Entry* x = f.get("prefetch")) s.prefetch = u32(*x, 0);
  // The upper bounds are those fanout-pool and fanout-interchange accept on their command line:
  // a value they would refuse at start is refused here, at load, with its line.
  if (const Entry* x = f.get("poll_ms")) s.poll_ms = u32(*x, 1, 60000);
  if (const Entry* x = f.get("priority")) s.priority = u32(*x, 1);
  if (const Entry* x = f.get("allow_partial")) s.allow_partial = r.boolean(*x);
  if (const Entry* x = f.get("metrics_listen")) {
    s.metrics_listen = std::string(trim(r.text(*x)));
    if (s.metrics_listen.find(':') == std::string::npos) {
      r.fail(x->where(), "expected HOST:PORT (got \"" + s.metrics_listen + "\")");
    }
  }
  if (const Entry* x = f.get("heartbeat_period_ms")) s.heartbeat_period_ms = u32(*x, 1, 3600000);
  if (const Entry* x = f.get("heartbeat_threshold_ms")) {
    s.heartbeat_threshold_ms = u32(*x, 1, 86400000);
  }
  if (s.heartbeat_threshold_ms <= s.heartbeat_period_ms) {
    const Entry* x = f.get("heartbeat_threshold_ms");
    if (!x) x = f.get("heartbeat_period_ms");
    r.fail(x->where(), "expected heartbeat_threshold_ms > heartbeat_period_ms (got " +
                           std::to_string(s.heartbeat_threshold_ms) +
                           " <= " + std::to_string(s.heartbeat_period_ms) + ")");
  }
  if (const Entry* x = f.get("python")) {
    std::string p(trim(r.text(*x)));
    if (p.empty()) r.fail(x->where(), "expected an interpreter name or path (got \"\")");
    // A bare name is looked up on PATH at run time; anything with a slash is a path.
    s.python = p.find('/') == std::string::npos ? p : r.local_path(x->where(), p, base_dir);
  }
  if (const Entry* x = f.get("db")) s.db = r.local_path(*x, base_dir);
  if (const Entry* x = f.get("run_dir")) s.run_dir = r.local_path(*x, base_dir);
  if (const Entry* x = f.get("log_level")) {
    std::string l = lower(trim(r.text(*x)));
    static constexpr std::array<std::string_view, 8> kLevels = {
        "trace", "debug", "info", "warn", "warning", "error", "critical", "off"};
    if (std::find(kLevels.begin(), kLevels.end(), l) == kLevels.end()) {
      r.fail(x->where(), "expected trace, debug, info, warn, error, critical or off (got " +
                             quote(x->value.Scalar()) + ")");
    }
    s.log_level = l;
  }
  if (const Entry* x = f.get("workers")) s.workers = u32(*x, 0, 100000);
  if (const Entry* x = f.get("row_separator")) s.row_separator = r.text(*x);
  if (const Entry* x = f.get("row_header")) s.row_header = r.boolean(*x);
  return s;
}

}  // namespace fanout::config::detail
