// The tuning advice. See tune.hpp; the rules and their thresholds: docs/tuning.md.
#include "fanout/report/tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "fanout/report/job_figures.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::report {

namespace {

// Overhead per mini-batch above this share of run() time is worth a larger mini-batch...
constexpr double kOverheadHigh = 0.05;
// ...which is sized to bring it down to this share.
constexpr double kOverheadTarget = 0.02;
// Idle workers at the end above this share of worker time is worth a smaller mini-batch...
constexpr double kTailHigh = 0.10;
// ...sized to bring it down to this share.
constexpr double kTailTarget = 0.05;
// An idle gap between a worker's tasks above this share of a task is worth closing.
constexpr double kGapHigh = 0.05;
// CPU seconds per wall second of run() below this: run() mostly waits (I/O, sleep, network).
constexpr double kWaitBound = 0.5;
// ... at or above this: run() is CPU-bound.
constexpr double kCpuBound = 0.8;
// A node whose workers use this share of its cores is saturated.
constexpr double kSaturated = 0.85;
// Fewer than this share of the cores in use leaves room for more workers.
constexpr double kRoomLeft = 0.7;
// A mean run() shorter than this has no usable CPU share.
constexpr double kShortestMeasurable = 0.005;

std::string ms(double s) { return fmt::format("{:.3g} ms", s * 1000); }
std::string pct(double x) { return fmt::format("{:.1f}%", x * 100); }

// "20", "1MB", "512 kb": the number and what follows it.
struct SizeSetting {
  double value = 0;
  std::string unit{};
  bool ok = false;
};
SizeSetting parse_size(const std::string& s) {
  SizeSetting r;
  char* end = nullptr;
  r.value = std::strtod(s.c_str(), &end);
  r.ok = end != s.c_str() && r.value > 0;
  r.unit = end ? std::string(end) : std::string();
  return r;
}
std::string format_size(const SizeSetting& s, double v) {
  if (s.unit.empty()) return fmt::format("{}", static_cast<std::uint64_t>(std::max(1.0, v)));
  return fmt::format("{:.3g}{}", v, s.unit);
}

std::uint64_t to_u64(const std::string& s, std::uint64_t fallback) {
  char* end = nullptr;
  const auto v = std::strtoull(s.c_str(), &end, 10);
  return end == s.c_str() ? fallback : v;
}

Recommendation no_data(std::string setting, std::string current, std::string why) {
  return {.setting = std::move(setting),
          .verdict = Verdict::NoData,
          .current = std::move(current),
          .suggested = {},
          .figure = {},
          .effect = std::move(why)};
}

Recommendation mini_batch_size(const ReportData& d, const JobFigures& f) {
  const std::string cur = d.setting("mini_batch_size", "?");
  const auto size = parse_size(cur);
  if (!size.ok) return no_data("mini_batch_size", cur, "the job's mini_batch_size is not a number");
  if (f.mean_run_s <= 0) {
    return no_data("mini_batch_size", cur, "run() took no measurable time: no overhead share");
  }
  Recommendation r{.setting = "mini_batch_size", .verdict = Verdict::Keep, .current = cur};
  r.figure = fmt::format(
      "overhead per mini-batch {} = {} of run() time {}; workers idle at the end {} on average "
      "= {} of worker time",
      ms(f.mean_overhead_s), pct(f.overhead_share), ms(f.mean_run_s), ms(f.tail_s),
      pct(f.tail_share));
  // Why: fanout's cost per mini-batch is fixed, run()'s grows with the size, so k times larger
  // mini-batches cut the overhead share k times.
  if (f.overhead_share > kOverheadHigh) {
    double k = f.overhead_share / kOverheadTarget;
    if (size.unit.empty()) k = std::ceil(size.value * k) / size.value;
    // Not so large that a worker would get fewer than two mini-batches of this input.
    const auto items = static_cast<double>(d.items_succeeded + d.items_failed);
    bool capped = false;
    if (size.unit.empty() && items > 0 && f.workers > 0) {
      const double most = std::ceil(items / (2.0 * static_cast<double>(f.workers)));
      if (size.value * k > most && most > size.value) {
        k = most / size.value;
        capped = true;
      }
    }
    r.verdict = Verdict::Change;
    r.suggested = format_size(size, size.value * k);
    const double gain = (1 + f.overhead_share) / (1 + f.overhead_share / k) - 1;
    r.effect = fmt::format(
        "overhead falls to about {} of run() time; items/s up to {} higher; about {}x fewer "
        "mini-batches, so each retry redoes {}x more work",
        pct(f.overhead_share / k), pct(gain), fmt::format("{:.3g}", k), fmt::format("{:.3g}", k));
    if (capped) {
      r.effect += fmt::format(
          "; capped so that each of the {} workers still gets two "
          "mini-batches of this job's {} items",
          f.workers, items);
    }
    if (f.tail_share > kTailHigh) {
      r.effect +=
          fmt::format("; the idle tail ({}) will grow: this job has both costs", pct(f.tail_share));
    }
    return r;
  }
  // Why: the last mini-batches run while other workers have nothing left; the tail is about a
  // mini-batch long, so k times smaller mini-batches shorten it about k times.
  if (f.tail_share > kTailHigh && size.value > 1) {
    double k = f.tail_share / kTailTarget;
    // Not so small that the overhead share crosses its own bound.
    if (f.overhead_share > 0) k = std::min(k, kOverheadHigh / f.overhead_share);
    double v = size.value / k;
    if (size.unit.empty()) v = std::floor(v);
    if (k > 1.05 && v >= 1 && v < size.value) {
      r.verdict = Verdict::Change;
      r.suggested = format_size(size, v);
      r.effect = fmt::format(
          "the idle tail shrinks from {} to about {} per worker (duration about {} shorter); "
          "overhead grows to about {} of run() time",
          ms(f.tail_s), ms(f.tail_s / k), ms(f.tail_s - f.tail_s / k), pct(f.overhead_share * k));
      return r;
    }
  }
  r.effect = "both are small: the mini-batch size is not what limits this job";
  return r;
}

std::uint32_t local_cores() { return std::max(1U, std::thread::hardware_concurrency()); }

// The local launcher runs every pool on this machine, so its pools share one set of cores; the
// job records a launcher only when it is not the local one.
bool local_launcher(const ReportData& d) { return d.setting("launcher", "local") == "local"; }

// The most workers any pool of `d` had.
std::uint64_t largest_pool(const ReportData& d) {
  std::uint64_t per_pool = 0;
  for (const auto& p : d.pools) per_pool = std::max(per_pool, p.workers);
  return per_pool;
}

// Workers per pool once the advice `w` is applied: what the other settings are sized with, so
// that the written block holds together.
std::uint64_t workers_after(const Recommendation& w, std::uint64_t per_pool) {
  return w.verdict == Verdict::Change ? to_u64(w.suggested, per_pool) : to_u64(w.current, per_pool);
}

Recommendation workers(const ReportData& d, const JobFigures& f, const TuneOptions& opt) {
  // Workers per node: the largest pool's count, as max_concurrency_per_instance sets them all.
  std::uint64_t per_pool = 0;
  for (const auto& p : d.pools) per_pool = std::max(per_pool, p.workers);
  // 0 recorded: the pools counted their workers from their devices or cores, so what they ran
  // with is what they had.
  std::string cur = d.setting("max_concurrency_per_instance", std::to_string(per_pool));
  if (cur == "0") cur = std::to_string(per_pool);
  const std::uint64_t w = to_u64(cur, per_pool);
  std::uint32_t cores = opt.cores;
  if (cores == 0) {
    const std::string here = host_name();
    const bool local =
        !d.pools.empty() &&
        std::all_of(d.pools.begin(), d.pools.end(), [&](const auto& p) { return p.node == here; });
    if (!local) return no_data("workers", cur, "the nodes' core count is unknown: give --cores N");
    cores = local_cores();
  }
  // Nodes: pools per node share its cores.
  std::vector<std::string> nodes;
  for (const auto& p : d.pools) {
    if (std::find(nodes.begin(), nodes.end(), p.node) == nodes.end()) nodes.push_back(p.node);
  }
  const double per_node = nodes.empty() ? 0 : static_cast<double>(f.workers) / nodes.size();
  const double used = nodes.empty() ? 0 : f.cores_used / static_cast<double>(nodes.size());
  // `workers` is per pool, and the pools of a node (all of them, on the local launcher) share
  // its cores: a count for the node is split between them, at least one worker each.
  const double pools_per_node =
      nodes.empty() ? 1.0 : std::max(1.0, static_cast<double>(d.pools.size()) / nodes.size());
  auto split = [&](double for_node, bool round_up) {
    const double each = for_node / pools_per_node;
    return static_cast<std::uint64_t>(std::max(1.0, round_up ? std::ceil(each) : std::floor(each)));
  };
  const std::string shared =
      pools_per_node > 1 ? fmt::format(" ({:.3g} pools share them)", pools_per_node) : "";
  Recommendation r{.setting = "workers", .verdict = Verdict::Keep, .current = cur};
  r.figure = fmt::format(
      "run() uses {:.2f} CPU seconds per second (CPU share {}); {:.3g} workers per node keep "
      "{:.2f} of {} cores busy",
      f.cpu_share, pct(f.cpu_share), per_node, used, cores);
  const double c = cores;
  // CPU time is counted in clock ticks (10 ms): a shorter run() gives no usable CPU share.
  if (f.mean_run_s < kShortestMeasurable) {
    r.verdict = Verdict::NoData;
    r.effect = fmt::format("run() is too short ({}) to measure its CPU share; at least {} needed",
                           ms(f.mean_run_s), ms(kShortestMeasurable));
    return r;
  }
  // Why each branch: more CPU-bound workers than cores only time-share the cores; workers that
  // mostly wait leave cores idle that more workers could fill; CPU-bound workers fewer than the
  // cores leave whole cores idle.
  if (per_node > c && used >= kSaturated * c && split(c, false) < w) {
    r.verdict = Verdict::Change;
    r.suggested = std::to_string(split(c, false));
    r.effect = fmt::format(
        "the cores are saturated: {} workers share {} cores{}, so each run() takes about {:.2g}x "
        "longer than alone; {} workers give the same throughput with less memory and switching",
        per_node, cores, shared, per_node / c, cores);
  } else if (f.cpu_share > 0 && f.cpu_share < kWaitBound && used < kRoomLeft * c) {
    const double n = std::min(std::ceil(c / f.cpu_share), 4 * c);
    if (split(n, true) > w) {
      r.verdict = Verdict::Change;
      r.suggested = std::to_string(split(n, true));
      r.effect = fmt::format(
          "run() waits {} of its time (I/O or sleep) and {:.2f} of {} cores are busy{}: {} "
          "workers overlap the waits, up to {:.2g}x the throughput if the data source keeps up",
          pct(1 - f.cpu_share), used, cores, shared, n, n / std::max(per_node, 1.0));
    }
  } else if (f.cpu_share >= kCpuBound && per_node < c && used < kRoomLeft * c &&
             split(c, false) > w) {
    r.verdict = Verdict::Change;
    r.suggested = std::to_string(split(c, false));
    r.effect = fmt::format(
        "run() is CPU-bound and {:.2f} of {} cores are busy{}: up to {:.2g}x the "
        "throughput with one worker per core",
        used, cores, shared, c / std::max(per_node, 1.0));
  }
  if (r.verdict == Verdict::Keep) r.effect = "the workers match the cores and how run() uses them";
  return r;
}

// `per_pool`: the workers per pool once the workers advice is applied.
Recommendation prefetch(const ReportData& d, const JobFigures& f, std::uint64_t per_pool) {
  std::uint64_t pool_prefetch = 0;
  for (const auto& p : d.pools) pool_prefetch = std::max(pool_prefetch, p.prefetch);
  const std::string cur = d.setting("prefetch", std::to_string(pool_prefetch));
  const std::uint64_t p = to_u64(cur, pool_prefetch);
  if (f.gaps == 0) return no_data("prefetch", cur, "no worker ran two tasks: no idle gap measured");
  const double task = f.mean_run_s + f.mean_overhead_s;
  if (task <= 0) return no_data("prefetch", cur, "tasks took no measurable time");
  const double share = f.mean_gap_s / task;
  Recommendation r{.setting = "prefetch", .verdict = Verdict::Keep, .current = cur};
  r.figure = fmt::format("idle gap between a worker's tasks {} = {} of a task ({}), over {} gaps",
                         ms(f.mean_gap_s), pct(share), ms(task), f.gaps);
  // Why: while a worker waits, a pool of W workers finishing a task every `task` seconds needs
  // W × gap / task tasks in hand to cover the round trip the gap measures.
  const auto needed =
      static_cast<std::uint64_t>(std::ceil(static_cast<double>(per_pool) * share)) + 1;
  if (share > kGapHigh && needed > p) {
    r.verdict = Verdict::Change;
    r.suggested = std::to_string(needed);
    r.effect = fmt::format(
        "each pool holds {} mini-batches beyond its free workers instead of {}, enough to cover "
        "the {} round trip: workers stop waiting, worker time inside run() rises from {} toward "
        "{}",
        needed, p, ms(f.mean_gap_s), pct(f.run_share),
        pct(std::min(1.0, f.run_share * (1 + share))));
  } else if (share > kGapHigh) {
    r.effect = fmt::format(
        "prefetch {} already covers a {} gap: the gap comes from elsewhere "
        "(see poll_ms)",
        p, ms(f.mean_gap_s));
  } else {
    r.effect = "the gap is small: workers rarely wait for work";
  }
  return r;
}

Recommendation poll(const ReportData& d, const JobFigures& f, const Recommendation& pre) {
  const std::string cur = d.setting("poll_ms", "10");
  const std::uint64_t poll_ms = to_u64(cur, 10);
  if (f.gaps == 0) return no_data("poll_ms", cur, "no worker ran two tasks: no idle gap measured");
  const double task = f.mean_run_s + f.mean_overhead_s;
  if (task <= 0) return no_data("poll_ms", cur, "tasks took no measurable time");
  const double share = f.mean_gap_s / task;
  const double poll_s = static_cast<double>(poll_ms) / 1000;
  Recommendation r{.setting = "poll_ms", .verdict = Verdict::Keep, .current = cur};
  r.figure = fmt::format("idle gap {} against a poll period of {} ms", ms(f.mean_gap_s), poll_ms);
  // Why: a pool sends results in batches up to poll_ms old, so with enough prefetch the gap
  // left is what polling adds; a gap far below the period is not the poll's doing.
  if (share > kGapHigh && pre.verdict == Verdict::Keep && f.mean_gap_s >= poll_s / 2 &&
      poll_ms > 1) {
    r.verdict = Verdict::Change;
    r.suggested = std::to_string(std::max<std::uint64_t>(1, poll_ms / 4));
    r.effect = fmt::format(
        "results reach the interchange sooner: the {} gap should shrink "
        "toward {}, at the cost of more wake-ups of idle pools",
        ms(f.mean_gap_s), ms(f.mean_gap_s / 4));
  } else if (share > kGapHigh && pre.verdict == Verdict::Change) {
    r.effect = "change prefetch first: a pool that runs dry sends its results at once";
  } else if (share > kGapHigh) {
    r.effect = "the gap is much longer than the poll period: polling is not its cause";
  } else {
    r.effect = "the gap is small: polling adds little";
  }
  return r;
}

// `processes`: the workers per pool once the workers advice is applied, so that the node count
// and the workers written together make the duration aimed at.
Recommendation nodes(const ReportData& d, const JobFigures& f, const TuneOptions& opt,
                     std::uint64_t processes) {
  const std::string cur =
      d.setting("instance_count", std::to_string(std::max<std::size_t>(d.pools.size(), 1)));
  const bool local = local_launcher(d);
  if (opt.target_duration_s <= 0 && !local) {
    return no_data("instance_count", cur, "give --target-duration S for a node count");
  }
  const std::uint64_t mbs = d.total_known ? d.total : d.submitted;
  if (processes == 0 || mbs == 0) return no_data("instance_count", cur, "no mini-batches measured");
  // ParallelRunStep's rule: nodes × processes = total mini-batch time / desired duration, with
  // a mini-batch's time as a worker sees it: its attempt plus the gap before the next one.
  const double per_mb = f.mean_run_s + f.mean_overhead_s + f.mean_gap_s;
  const double total_s = per_mb * static_cast<double>(mbs);
  if (local) {
    // The local launcher's pools all run here: more of them add no cores, and the workers
    // advice has already sized them for this machine.
    const std::uint64_t pools = std::max<std::uint64_t>(1, to_u64(cur, 1));
    Recommendation r{.setting = "instance_count", .verdict = Verdict::Keep, .current = cur};
    r.figure = fmt::format(
        "{} mini-batches × {} each = {:.3g} s of worker time; {} pool(s) × {} workers share "
        "this machine's cores",
        mbs, ms(per_mb), total_s, pools, processes);
    r.effect = fmt::format(
        "about {:.3g} s, plus start-up, if the cores keep up; on the local launcher more pools "
        "add no cores (the workers advice sizes them for this machine): a shorter run needs more "
        "machines (--launcher slurm)",
        total_s / static_cast<double>(pools * processes));
    return r;
  }
  const auto n = static_cast<std::uint64_t>(
      std::max(1.0, std::ceil(total_s / (opt.target_duration_s * static_cast<double>(processes)))));
  Recommendation r{.setting = "instance_count",
                   .verdict = n == to_u64(cur, 0) ? Verdict::Keep : Verdict::Change,
                   .current = cur};
  r.suggested = r.verdict == Verdict::Change ? std::to_string(n) : std::string();
  r.figure = fmt::format(
      "{} mini-batches × {} each = {:.3g} s of worker time; {} processes per "
      "node (the workers advised); target {} s",
      mbs, ms(per_mb), total_s, processes, opt.target_duration_s);
  r.effect = fmt::format("about {:.3g} s with {} node(s), plus start-up",
                         total_s / static_cast<double>(n * processes), n);
  return r;
}

}  // namespace

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::Change:
      return "change";
    case Verdict::Keep:
      return "keep";
    case Verdict::NoData:
      return "no advice";
  }
  return "?";
}

std::vector<Recommendation> tune(const ReportData& d, const TuneOptions& opt) {
  const JobFigures f = job_figures(d);
  if (f.measured < opt.min_attempts) {
    const std::string why =
        fmt::format("not enough data: {} successful attempts, at least {} are needed", f.measured,
                    opt.min_attempts);
    std::uint64_t per_pool = 0;
    for (const auto& p : d.pools) per_pool = std::max(per_pool, p.workers);
    return {no_data("mini_batch_size", d.setting("mini_batch_size", "?"), why),
            no_data("workers", d.setting("max_concurrency_per_instance", "?"), why),
            no_data("prefetch", d.setting("prefetch", "?"), why),
            no_data("poll_ms", d.setting("poll_ms", "?"), why),
            no_data("instance_count", d.setting("instance_count", "?"), why)};
  }
  std::vector<Recommendation> out;
  // Applied together: prefetch and the node count are sized with the workers advised.
  out.push_back(mini_batch_size(d, f));
  out.push_back(workers(d, f, opt));
  const std::uint64_t per_pool = workers_after(out.back(), largest_pool(d));
  out.push_back(prefetch(d, f, per_pool));
  out.push_back(poll(d, f, out.back()));
  out.push_back(nodes(d, f, opt, per_pool));
  for (auto& r : gpu_advice(d)) out.push_back(std::move(r));
  return out;
}

std::vector<Recommendation> gpu_advice(const ReportData& d) {
  if (d.gpu_series.empty()) return {};
  const std::string cur = d.setting("workers_per_accelerator", "1");
  double sum = 0;
  std::string figure;
  for (const auto& g : d.gpu_series) {
    sum += g.mean_cpu;
    figure += fmt::format("{}{} on {} busy {:.0f}% of the job", figure.empty() ? "" : "; ",
                          g.process, g.node, g.mean_cpu);
  }
  const double mean = sum / static_cast<double>(d.gpu_series.size());
  Recommendation r{.setting = "workers_per_accelerator",
                   .verdict = mean < kGpuBusyLow ? Verdict::Change : Verdict::Keep,
                   .current = cur,
                   .figure = std::move(figure)};
  if (r.verdict == Verdict::Change) {
    r.suggested = std::to_string(2 * std::max<std::uint64_t>(1, to_u64(cur, 1)));
    r.effect = fmt::format(
        "the accelerators idle {:.0f}% of the job on average: more workers per device keep "
        "them busy while others load data (watch device memory: each worker holds its model)",
        100 - mean);
  } else {
    r.effect = fmt::format("the accelerators are busy {:.0f}% of the job on average", mean);
  }
  return {r};
}

std::string format_tune(const ReportData& d, const std::vector<Recommendation>& recs) {
  std::string out = fmt::format("job {} ({}): {}\n", d.job_id, d.name, d.state);
  std::size_t changes = 0;
  for (const auto& r : recs) {
    changes += r.verdict == Verdict::Change ? 1 : 0;
    const bool pools = r.setting == "instance_count" && local_launcher(d);
    out +=
        fmt::format("\n{}{}: {}", r.setting, pools ? " (local pools)" : "", to_string(r.verdict));
    if (r.verdict == Verdict::Change) {
      out += fmt::format(" {} -> {}", r.current, r.suggested);
    } else {
      out += fmt::format(" (now {})", r.current);
    }
    out += "\n";
    if (!r.figure.empty()) out += "  measured: " + r.figure + "\n";
    out += (r.verdict == Verdict::NoData ? "  why: " : "  effect: ") + r.effect + "\n";
  }
  const auto unadvised = static_cast<std::size_t>(std::count_if(
      recs.begin(), recs.end(), [](const auto& r) { return r.verdict == Verdict::NoData; }));
  if (changes > 0) {
    out += fmt::format("\n{} change(s), sized to be applied together (--write FILE)\n", changes);
  } else if (unadvised == 0) {
    out += "\nno change: the settings fit what this job measured\n";
  } else {
    out += fmt::format("\nno change; {} setting(s) without advice (see why above)\n", unadvised);
  }
  return out;
}

std::string tune_yaml(const ReportData& d, const std::vector<Recommendation>& recs) {
  auto value = [&](const std::string& key) {
    for (const auto& r : recs) {
      if (r.setting == key) return r.verdict == Verdict::Change ? r.suggested : r.current;
    }
    return std::string("?");
  };
  auto note = [&](const std::string& key) {
    for (const auto& r : recs) {
      if (r.setting == key && r.verdict == Verdict::Change) return "  # was " + r.current;
    }
    return std::string();
  };
  return fmt::format(
      "# Suggested by `fanout tune {}` from job {} ({}); merge into the job file.{}\n"
      "mini_batch_size: \"{}\"{}\n"
      "resources:\n"
      "  instance_count: {}{}\n"
      "fanout:\n"
      "  workers: {}{}\n"
      "  prefetch: {}{}\n"
      "  poll_ms: {}{}\n",
      d.job_id, d.job_id, d.name,
      local_launcher(d)
          ? "\n# (instance_count counts local pools here; they share this machine's cores)"
          : "",
      value("mini_batch_size"), note("mini_batch_size"), value("instance_count"),
      note("instance_count"), value("workers"), note("workers"), value("prefetch"),
      note("prefetch"), value("poll_ms"), note("poll_ms"));
}

}  // namespace fanout::report
