// The `fanout:` block of a job file. See detail/fanout_settings.hpp.
#include "fanout/config/detail/fanout_settings.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <string_view>

#include "fanout/config/detail/launcher_settings.hpp"

namespace fanout::config::detail {

namespace {

// mem_per_worker, worker_memory_limit and max_minibatches_per_worker (docs/resources.md).
void read_memory_settings(const YamlReader& r, const Fields& f, FanoutSettings& s) {
  if (const Entry* x = f.get("mem_per_worker")) {
    const auto gib = to_double(trim(r.text(*x)));
    if (!gib || *gib <= 0 || *gib > 1e6) {
      r.fail(x->where(), "expected a number of GiB greater than 0, like 4 or 0.5 (got " +
                             quote(x->value.Scalar()) + ")");
    }
    s.mem_per_worker_gib = *gib;
  }
  if (const Entry* x = f.get("worker_memory_limit")) {
    auto bytes = parse_memory_size(r.text(*x));
    if (!bytes) r.fail(x->where(), bytes.error().message);
    s.worker_memory_limit_bytes = *bytes;
  }
  if (const Entry* x = f.get("max_minibatches_per_worker")) {
    s.max_minibatches_per_worker =
        static_cast<std::uint32_t>(r.integer(*x, 0, std::numeric_limits<std::uint32_t>::max()));
  }
}

// The placement keys (docs/resources.md), as fanout-pool's options check them.
PlacementSettings read_placement(const YamlReader& r, const Fields& f) {
  PlacementSettings s;
  if (const Entry* x = f.get("accelerators")) {
    // A list (`[0, 1]`) or one text ("0,1"), as CUDA_VISIBLE_DEVICES takes it.
    if (x->value.IsSequence()) {
      for (const auto& v : x->value) {
        s.accelerators += (s.accelerators.empty() ? "" : ",") + std::string(trim(v.Scalar()));
      }
    } else {
      s.accelerators = std::string(trim(r.text(*x)));
    }
    if (s.accelerators.empty() || s.accelerators.find_first_of(" \t\n\"'") != std::string::npos) {
      r.fail(x->where(), "expected device ids such as \"0,1,2,3\" (got " +
                             quote(x->value.IsSequence() ? s.accelerators : x->value.Scalar()) +
                             ")");
    }
  }
  if (const Entry* x = f.get("accelerator_kind")) {
    s.accelerator_kind = lower(trim(r.text(*x)));
    if (s.accelerator_kind != "cuda" && s.accelerator_kind != "rocm" &&
        s.accelerator_kind != "ze") {
      r.fail(x->where(), "expected cuda, rocm or ze (got " + quote(x->value.Scalar()) + ")");
    }
  }
  if (const Entry* x = f.get("workers_per_accelerator")) {
    s.workers_per_accelerator = static_cast<std::uint32_t>(r.integer(*x, 1, 1000));
  }
  if (const Entry* x = f.get("cores_per_worker")) {
    s.cores_per_worker = static_cast<std::uint32_t>(r.integer(*x, 1, 100000));
  }
  if (const Entry* x = f.get("cpu_affinity")) {
    s.cpu_affinity = std::string(trim(r.text(*x)));
    const std::string& a = s.cpu_affinity;
    const bool word = a == "none" || a == "block" || a == "alternating";
    const std::string_view list = a.rfind("list:", 0) == 0 ? std::string_view(a).substr(5) : a;
    const bool is_list =
        !list.empty() && list.find_first_not_of("0123456789,-:") == std::string_view::npos;
    if (!word && !is_list) {
      r.fail(x->where(),
             "expected none, block, alternating or a CPU list per worker such as "
             "\"list:0-1:2-3\" (got " +
                 quote(x->value.Scalar()) + ")");
    }
  }
  return s;
}

}  // namespace

// Long: the list of the block's keys, one per line, then one statement per key.
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
                          "init_nodes",
                          "parallelism",
                          "max_idletime",
                          "cores_per_node",
                          "exclusive",
                          "scheduler_options",
                          "worker_init",
                          "interchange_address",
                          "allow_partial",
                          "mem_per_worker",
                          "worker_memory_limit",
                          "max_minibatches_per_worker",
                          "accelerators",
                          "accelerator_kind",
                          "workers_per_accelerator",
                          "cores_per_worker",
                          "cpu_affinity",
                          "gpus_per_node",
                          "mem_per_node",
                          "metrics_listen",
                          "queue",
                          "nodes_per_block",
                          "pbs_flavor",
                          "hosts",
                          "ssh_options",
                          "pool_command",
                          "worker_start"});
  FanoutSettings s;
  s.launch = read_launcher_settings(r, f);
  s.placement = read_placement(r, f);
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
  read_memory_settings(r, f, s);
  if (const Entry* x = f.get("worker_start")) {
    s.worker_start = lower(trim(r.text(*x)));
    if (s.worker_start != "fork" && s.worker_start != "spawn") {
      r.fail(x->where(), "expected fork or spawn (got " + quote(x->value.Scalar()) + ")");
    }
  }
  return s;
}

}  // namespace fanout::config::detail
