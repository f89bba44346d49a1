// fanout perf. See perf.hpp and docs/performance.md.
#include "client/commands/perf.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "client/commands/python_cmd.hpp"
#include "client/launch/embedded.hpp"
#include "client/launch/run_settings.hpp"
#include "client/session/session.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

// The prefetch of a perf run's pools unless --prefetch says otherwise; also the most a pool
// raises its prefetch to by itself for short tasks (pool/pool.hpp, kMaxAutoPrefetch).
constexpr std::int64_t kPerfPrefetch = 256;

// An empty run(): what `--runtime python` measures. The sleep is for --sleep-ms.
constexpr const char* kNoopScript = R"PY(import os, time
_SLEEP = float(os.environ.get("FANOUT_PERF_SLEEP_MS", "0")) / 1000.0
def run(mini_batch):
    if _SLEEP:
        time.sleep(_SLEEP)
    return mini_batch
)PY";

// CPU seconds of a process from /proc/<pid>/stat (all 0 if it is gone): its own (utime +
// stime) and that of its children it has reaped (cutime + cstime).
struct ProcCpu {
  double self = 0;
  double reaped_children = 0;
};
ProcCpu proc_cpu(pid_t pid) {
  auto text = read_file(fmt::format("/proc/{}/stat", pid));
  if (!text) return {};
  auto rp = text->rfind(')');
  if (rp == std::string::npos) return {};
  // Fields after the command name start at field 3 (state); utime, stime, cutime and cstime
  // are 14 to 17.
  std::size_t pos = rp + 2;
  unsigned long long ticks[4] = {0, 0, 0, 0};
  for (int field = 3; field <= 17 && pos < text->size(); ++field) {
    auto sp = text->find(' ', pos);
    if (field >= 14) ticks[field - 14] = std::strtoull(text->c_str() + pos, nullptr, 10);
    if (sp == std::string::npos) break;
    pos = sp + 1;
  }
  const auto hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return ProcCpu{static_cast<double>(ticks[0] + ticks[1]) / hz,
                 static_cast<double>(ticks[2] + ticks[3]) / hz};
}
double proc_cpu_s(pid_t pid) { return proc_cpu(pid).self; }

// A /proc/<pid>/status value in kB ("VmHWM"), 0 if unknown.
long proc_status_kb(pid_t pid, const char* key) {
  auto text = read_file(fmt::format("/proc/{}/status", pid));
  if (!text) return 0;
  auto k = text->find(std::string(key) + ":");
  if (k == std::string::npos) return 0;
  return std::strtol(text->c_str() + k + std::strlen(key) + 1, nullptr, 10);
}

// Direct children of `pid` (the pool's workers), by scanning /proc.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const pid_t p = static_cast<pid_t>(std::atoi(e->d_name));
    if (p <= 0) continue;
    auto text = read_file(fmt::format("/proc/{}/stat", p));
    if (!text) continue;
    auto rp = text->rfind(')');
    if (rp == std::string::npos || rp + 4 >= text->size()) continue;
    // ") S <ppid> ..."
    if (std::atoi(text->c_str() + rp + 4) == pid) out.push_back(p);
  }
  ::closedir(d);
  return out;
}

double self_cpu_s() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

struct RunStats {
  std::uint64_t tasks = 0;
  double wall_s = 0;    // job accepted to its final commit
  double total_s = 0;   // job accepted to JobEnded (wall_s + the report)
  double report_s = 0;  // the logs/ report, written between the two
  // From the job's end (jobs.ended, before its final commit) to JobEnded here: what `fanout
  // run` waits for once the last result is in (docs/performance.md).
  double end_to_return_s = 0;
  double submit_s = 0;
  double cpu_client = 0, cpu_ix = 0, cpu_pools = 0, cpu_workers = 0;
  std::uint64_t succeeded = 0, failed = 0, attempts = 0, committed_succeeded = 0;
  long ix_peak_rss_kb = 0;
  bool ok = false;
  std::string error{};
  [[nodiscard]] double rate() const { return wall_s > 0 ? static_cast<double>(tasks) / wall_s : 0; }
};

// Runs a helper program to completion and returns the value of its "rate=" line (0 on failure).
// The probe's rate, or 0 with the reason in `why` (when given) if it could not run.
double run_probe(const std::vector<std::string>& argv, const std::string& dir, Logger& log,
                 std::string* why = nullptr) {
  const std::string out = dir + "/probe.out";
  std::error_code ec;
  fs::remove(out, ec);
  std::string reason;
  double rate = 0;
  auto child = ChildProcess::spawn(
      SpawnOptions{.argv = argv, .stdin_file = "null", .stdout_file = out, .stderr_file = out});
  if (!child) {
    reason = child.error().message;  // "cannot run <program>...: <why>"
  } else {
    auto st = child->wait();
    auto text = read_file(out);
    if (!st.success() || !text) {
      std::string tail = text ? *text : std::string();
      if (const auto nl = tail.find('\n'); nl != std::string::npos) tail.resize(nl);
      reason =
          fmt::format("{} failed ({}){}{}", argv[0], st.describe(), tail.empty() ? "" : ": ", tail);
    } else if (auto k = text->rfind("rate="); k == std::string::npos) {
      reason = fmt::format("{} printed no rate= line", argv[0]);
    } else {
      rate = std::strtod(text->c_str() + k + 5, nullptr);
    }
  }
  if (!reason.empty()) log->warn("{}", reason);
  if (why != nullptr) *why = reason;
  return rate;
}

std::string tools_dir() {
  if (const char* e = std::getenv("FANOUT_TOOLS_DIR"); e != nullptr && *e != '\0') return e;
  // Installed: PREFIX/share/fanout, or PREFIX/fanout where meson-python's wheels put meson's
  // datadir (`pip install`).
  for (const std::string& cand : {self_dir() + "/../share/fanout/tools",
                                  self_dir() + "/../fanout/tools", self_dir() + "/tools"}) {
    if (fs::exists(cand + "/mp_baseline.py")) return cand;
  }
  // A build tree: the source tree's tools/ (read from the build's meson-info, not compiled in).
  const std::string source = build_tree_source_dir();
  return source.empty() ? self_dir() + "/../share/fanout/tools" : source + "/tools";
}

// The settings recorded with a perf job (jobs.settings): the options that shape the run.
std::string perf_settings_json(const PerfOptions& o, std::uint32_t prefetch) {
  nlohmann::ordered_json j = {{"perf", true},
                              {"runtime", o.runtime},
                              {"workers", o.workers},
                              {"pools", o.pools},
                              {"prefetch", prefetch},
                              {"poll_ms", o.poll_ms},
                              {"log_level", o.log_level},
                              {"sleep_ms", o.sleep_ms},
                              {"items_per_batch", o.items_per_batch}};
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// How the measured runs' interchange listens. By default on ipc:// in a private 0700 folder,
// like `fanout run`'s embedded default: no other local user can reach it (on plaintext TCP
// loopback, anyone on the machine could submit a job there that ran as the user).
Transport measured_transport(const PerfOptions& o) {
  if (o.encrypted) return Transport::Curve;
  return o.insecure_tcp ? Transport::Tcp : Transport::Ipc;
}

// The name of a run's link, for the report.
const char* link_name(Transport t) {
  switch (t) {
    case Transport::Ipc:
      return "ipc";
    case Transport::Tcp:
      return "plaintext-tcp";
    case Transport::Curve:
      return "curve-tcp";
  }
  return "?";
}

// One measured run: a fresh store, interchange and pools in `dir`, listening as `transport`
// says. Long: set-up, the timed section and the CPU accounting share their clocks and pids.
RunStats run_once(const PerfOptions& o, const std::string& dir, Logger log, Transport transport) {
  RunStats rs;
  const std::string code = dir + "/code";
  const std::string run_dir = dir + "/run";
  (void)make_dirs(code);
  (void)make_dirs(run_dir + "/logs");
  const std::string db = dir + "/perf.db";
  if (o.runtime == "python") {
    (void)write_file_atomic(code + "/noop.py", kNoopScript);
  }
  const std::uint32_t prefetch =
      static_cast<std::uint32_t>(o.prefetch >= 0 ? o.prefetch : kPerfPrefetch);

  RunSettings settings;
  settings.pools = o.pools;
  settings.workers = o.workers;
  settings.prefetch = prefetch;
  settings.poll_ms = o.poll_ms;
  settings.log_level = o.log_level;
  settings.python = o.runtime == "python" ? o.python : "";
  settings.window = o.window;
  settings.transport = transport;
  settings.metrics_listen = o.metrics_listen;

  proto::JobSpec spec;
  spec.name = "perf";
  spec.spec_path = "(fanout perf)";
  spec.runtime = o.runtime == "python" ? "python" : "native";
  spec.code_dir = code;
  spec.entry_script = o.runtime == "python" ? "noop.py" : "builtin:noop";
  spec.python = o.python;
  if (o.sleep_ms > 0) {
    spec.args = {"--sleep-ms", std::to_string(o.sleep_ms)};
    spec.env.push_back("FANOUT_PERF_SLEEP_MS=" + std::to_string(o.sleep_ms));
  }
  spec.log_dir = run_dir + "/logs";
  spec.max_tries = 1;  // a failed attempt is a failed run: counts must be exact
  spec.input_name = "synthetic";
  spec.settings_json = perf_settings_json(o, prefetch);

  std::optional<Embedded> emb;
  try {
    emb.emplace(settings, db, run_dir, log);
  } catch (const Failure& f) {
    rs.error = f.what();
    return rs;
  }
  std::optional<Session> connected;
  try {
    connected.emplace(emb->client_endpoint(),
                      Session::Options{.rules = SessionRules{.submits = true}, .embedded = &*emb},
                      log);
  } catch (const Failure& f) {
    rs.error = f.what();
    return rs;
  }
  Session& session = *connected;
  const SessionPolicy& state = session.policy();
  if (!session.submit(spec)) {
    rs.error = state.end() == SessionEnd::NotAccepted
                   ? "the interchange did not accept the job within 30 s"
               : state.end() == SessionEnd::Rejected ? "interchange: " + state.detail()
                                                     : state.detail();
    if (state.job_id() == 0) return rs;
  }
  // The clock starts once the job is accepted: what follows is the per-mini-batch path only.
  const double cpu0 = self_cpu_s();
  const double ix_cpu0 = proc_cpu_s(emb->interchange_pid());
  double pools_cpu0 = 0;
  // Workers: the live ones now and later, plus those the pools reaped in between (their CPU
  // moves into the pool's cutime/cstime when they exit, e.g. at the job's DropJob).
  auto workers_cpu = [&] {
    double sum = 0;
    for (pid_t p : emb->pool_pids()) {
      sum += proc_cpu(p).reaped_children;
      for (pid_t w : children_of(p)) sum += proc_cpu_s(w);
    }
    return sum;
  };
  for (pid_t p : emb->pool_pids()) pools_cpu0 += proc_cpu_s(p);
  const double workers_cpu0 = workers_cpu();
  const auto t0 = Clock::now();
  const auto until =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  proto::SubmitTasks pending{state.job_id(), {}};
  const std::size_t frame_batches = 1024;
  // Synthetic mini-batches in frames of frame_batches, within the window; after an interchange
  // restart the count restarts where the interchange's left off.
  for (;;) {
    while (state.keep_going()) {
      const std::uint64_t submitted = state.submitted();
      if (o.seconds > 0 ? Clock::now() >= until : submitted >= o.tasks) break;
      if (!session.wait_for_room(frame_batches)) break;
      const std::uint64_t n = o.seconds > 0
                                  ? frame_batches
                                  : std::min<std::uint64_t>(frame_batches, o.tasks - submitted);
      pending.batches.resize(n);
      for (std::uint64_t i = 0; i < n; ++i) {
        auto& mb = pending.batches[i];
        mb.index = submitted + i;
        mb.items.resize(o.items_per_batch);
        for (std::uint32_t k = 0; k < o.items_per_batch; ++k) {
          mb.items[k] = fmt::format("item-{}-{}", mb.index, k);
        }
      }
      session.send_tasks(pending, 64 + n * (24 + o.items_per_batch * 24));
      (void)session.pump(std::chrono::milliseconds(0));
    }
    if (session.policy().take_resubmit()) continue;
    session.send_end();
    rs.submit_s = std::chrono::duration<double>(Clock::now() - t0).count();
    rs.tasks = state.submitted();
    session.follow();
    if (!session.policy().take_resubmit()) break;
  }
  const std::optional<proto::JobEnded>& ended = state.ended();
  if (!ended && rs.error.empty()) {
    rs.error =
        state.end() == SessionEnd::Rejected ? "interchange: " + state.detail() : state.detail();
  }
  rs.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double returned_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The mini-batch path ends with the job's final commit; the logs/ report written after it
  // (before JobEnded) is a per-job cost, shown on its own line.
  rs.report_s = ended ? ended->report_s : 0;
  rs.wall_s = std::max(rs.total_s - rs.report_s, 1e-9);
  // CPU is read while the processes are still up (workers exit once the pools are told).
  rs.cpu_client = self_cpu_s() - cpu0;
  rs.cpu_ix = proc_cpu_s(emb->interchange_pid()) - ix_cpu0 - (ended ? ended->report_cpu_s : 0);
  rs.ix_peak_rss_kb = proc_status_kb(emb->interchange_pid(), "VmHWM");
  for (pid_t p : emb->pool_pids()) rs.cpu_pools += proc_cpu_s(p);
  rs.cpu_pools -= pools_cpu0;
  rs.cpu_workers = workers_cpu() - workers_cpu0;
  (void)session.shutdown("perf done", emb->shutdown_token());
  emb->stop();
  if (!ended) {
    if (rs.error.empty()) rs.error = "the job did not end";
    return rs;
  }
  rs.succeeded = ended->progress.succeeded;
  rs.failed = ended->progress.failed;
  // JobEnded is sent once the job's final state is durable: read what the store committed.
  try {
    store::StoreReader reader(db);
    if (auto j = reader.job(state.job_id())) {
      rs.attempts = j->attempts;
      rs.committed_succeeded = j->succeeded;
      if (j->ended > 0) rs.end_to_return_s = returned_unix - j->ended;
    }
  } catch (const Failure& f) {
    rs.error = f.what();
    return rs;
  }
  rs.ok = rs.succeeded == rs.tasks && rs.failed == 0 && rs.attempts == rs.tasks &&
          rs.committed_succeeded == rs.tasks;
  if (!rs.ok) {
    rs.error = fmt::format(
        "counts differ: {} submitted, {} succeeded, {} failed, {} attempts committed, {} "
        "mini-batches committed as succeeded (job state {}: {})",
        rs.tasks, rs.succeeded, rs.failed, rs.attempts, rs.committed_succeeded, ended->state,
        ended->reason);
  }
  return rs;
}

std::string make_temp_dir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t != nullptr && *t != '\0' ? t : "/tmp") + "/fanout-perf-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw Failure(ErrorCode::Io, "cannot create a temporary folder " + tmpl);
  }
  return tmpl;
}

double per_mb_ms(double cpu_s, std::uint64_t n) {
  return n > 0 ? cpu_s * 1000.0 / static_cast<double>(n) : 0;
}

std::string describe(const PerfOptions& o) {
  return fmt::format(
      "runtime {}, {} pool(s) x {} workers, prefetch {}, poll {} ms, log {}, "
      "items/batch {}, sleep {} ms, link {}",
      o.runtime, o.pools, o.workers, o.prefetch >= 0 ? o.prefetch : kPerfPrefetch, o.poll_ms,
      o.log_level, o.items_per_batch, o.sleep_ms, link_name(measured_transport(o)));
}

// The transport ceiling of one run: the relay probe with as many messages in flight as the
// run's pools hold (the reference of the ratio), and with kWideWindow in flight (ZeroMQ then
// batches far more per system call than fanout's pools are ever given to).
struct Ceiling {
  std::uint64_t window = 0;
  double rate = 0;
  double wide_rate = 0;
  std::string why_not{};  // why the probe did not run (skipped, or the error), "" when it ran
};

constexpr std::uint64_t kWideWindow = 10000;

// Tasks the run's pools hold at once: each its workers plus its prefetch, which a pool raises by
// itself to kPerfPrefetch for the no-op's short tasks.
std::uint64_t in_flight(const PerfOptions& o) {
  const auto prefetch = static_cast<std::uint64_t>(std::max(o.prefetch, kPerfPrefetch));
  return static_cast<std::uint64_t>(o.pools) * (o.workers + prefetch);
}

Ceiling run_ceiling(const PerfOptions& o, const std::string& root, Logger& log) {
  const std::string relay = find_binary("FANOUT_ZMQ_RELAY_BIN", "fanout-zmq-relay", "tools");
  Ceiling c;
  c.window = in_flight(o);
  c.rate = run_probe({relay, "--tasks", "200000", "--window", std::to_string(c.window)}, root, log,
                     &c.why_not);
  if (c.rate <= 0) return c;
  c.wide_rate =
      run_probe({relay, "--tasks", "200000", "--window", std::to_string(kWideWindow)}, root, log);
  return c;
}

void print_run(const PerfOptions& o, const RunStats& rs, const Ceiling& ceiling, double baseline) {
  const double rate = rs.rate();
  if (o.json) {
    std::printf(
        "{\"tasks\":%llu,\"runtime\":%s,\"workers\":%u,\"pools\":%u,\"prefetch\":%lld,"
        "\"poll_ms\":%u,\"log_level\":%s,\"sleep_ms\":%u,\"items_per_batch\":%u,"
        "\"wall_s\":%.6f,\"report_s\":%.6f,\"end_to_return_s\":%.6f,\"rate\":%.1f,\"us_per_"
        "minibatch\":%.3f,"
        "\"submit_rate\":%.1f,"
        "\"cpu_ms_per_minibatch\":{\"client\":%.5f,\"interchange\":%.5f,\"pools\":%.5f,"
        "\"workers\":%.5f},\"attempts_committed\":%llu,\"succeeded\":%llu,"
        "\"interchange_peak_rss_kb\":%ld,\"ceiling_window\":%llu,\"ceiling_rate\":%.1f,"
        "\"fraction_of_ceiling\":%.4f,\"ceiling_rate_window_10000\":%.1f,"
        "\"fraction_of_ceiling_window_10000\":%.4f,"
        "\"mp_pool_rate\":%.1f,\"fraction_of_mp_pool\":%.4f,\"link\":\"%s\",\"ok\":%s}\n",
        static_cast<unsigned long long>(rs.tasks), json_quote(o.runtime).c_str(), o.workers,
        o.pools, static_cast<long long>(o.prefetch >= 0 ? o.prefetch : kPerfPrefetch), o.poll_ms,
        json_quote(o.log_level).c_str(), o.sleep_ms, o.items_per_batch, rs.wall_s, rs.report_s,
        rs.end_to_return_s, rate, rate > 0 ? 1e6 / rate : 0.0,
        rs.submit_s > 0 ? static_cast<double>(rs.tasks) / rs.submit_s : 0.0,
        per_mb_ms(rs.cpu_client, rs.tasks), per_mb_ms(rs.cpu_ix, rs.tasks),
        per_mb_ms(rs.cpu_pools, rs.tasks), per_mb_ms(rs.cpu_workers, rs.tasks),
        static_cast<unsigned long long>(rs.attempts),
        static_cast<unsigned long long>(rs.committed_succeeded), rs.ix_peak_rss_kb,
        static_cast<unsigned long long>(ceiling.window), ceiling.rate,
        ceiling.rate > 0 ? rate / ceiling.rate : 0.0, ceiling.wide_rate,
        ceiling.wide_rate > 0 ? rate / ceiling.wide_rate : 0.0, baseline,
        baseline > 0 ? rate / baseline : 0.0, link_name(measured_transport(o)),
        rs.ok ? "true" : "false");
    return;
  }
  std::printf("fanout perf: %llu mini-batches (%s)\n", static_cast<unsigned long long>(rs.tasks),
              describe(o).c_str());
  std::printf(
      "  end to end   %10.0f mini-batches/s  %8.1f us per mini-batch  (%.2f s to the final "
      "commit)\n",
      rate, rate > 0 ? 1e6 / rate : 0.0, rs.wall_s);
  std::printf(
      "  job report   written in %.2f s after the final commit, before JobEnded; job end to "
      "JobEnded %.2f s\n",
      rs.report_s, rs.end_to_return_s);
  std::printf("  submit rate  %10.0f mini-batches/s\n",
              rs.submit_s > 0 ? static_cast<double>(rs.tasks) / rs.submit_s : 0.0);
  std::printf(
      "  CPU ms per mini-batch: client %.4f  interchange %.4f  pool(s) %.4f  workers %.4f"
      "  total %.4f\n",
      per_mb_ms(rs.cpu_client, rs.tasks), per_mb_ms(rs.cpu_ix, rs.tasks),
      per_mb_ms(rs.cpu_pools, rs.tasks), per_mb_ms(rs.cpu_workers, rs.tasks),
      per_mb_ms(rs.cpu_client + rs.cpu_ix + rs.cpu_pools + rs.cpu_workers, rs.tasks));
  std::printf("  store: %llu attempts committed, %llu mini-batches succeeded: %s\n",
              static_cast<unsigned long long>(rs.attempts),
              static_cast<unsigned long long>(rs.committed_succeeded),
              rs.ok ? "complete" : "INCOMPLETE");
  std::printf("  interchange peak RSS %.1f MB\n", static_cast<double>(rs.ix_peak_rss_kb) / 1024.0);
  if (o.sleep_ms > 0) {
    const double ideal = 1000.0 / o.sleep_ms * o.workers * o.pools;
    std::printf("  ideal %.1f mini-batches/s (workers x 1000 / sleep-ms): efficiency %.1f%%\n",
                ideal, 100.0 * rate / ideal);
  }
  if (ceiling.rate > 0) {
    std::printf(
        "  ceiling (3-process ZeroMQ relay, same run, %llu in flight like fanout) %.0f msg/s: "
        "fanout = %.3f x ceiling\n",
        static_cast<unsigned long long>(ceiling.window), ceiling.rate, rate / ceiling.rate);
  } else {
    std::printf("  ceiling: not measured: %s\n", ceiling.why_not.c_str());
  }
  if (ceiling.wide_rate > 0) {
    std::printf("  the same relay with %llu in flight %.0f msg/s: fanout = %.3f x that\n",
                static_cast<unsigned long long>(kWideWindow), ceiling.wide_rate,
                rate / ceiling.wide_rate);
  }
  if (baseline > 0) {
    std::printf(
        "  multiprocessing.Pool(%u).imap_unordered(chunksize=1), same run: %.0f tasks/s: "
        "fanout = %.3f x baseline\n",
        o.workers, baseline, rate / baseline);
  }
}

// The Curve run beside the measured one (`plain`, over `o`'s link): its rate and the ratio
// (target >= 0.85 against plaintext TCP, see docs/performance.md). Returns an exit code as
// run_perf does.
int print_curve(const PerfOptions& o, const RunStats& plain, const RunStats& curve) {
  if (!curve.error.empty() && curve.tasks == 0) {
    std::fprintf(stderr, "error: curve run: %s\n", curve.error.c_str());
    return proto::kExitInfra;
  }
  const double ratio = plain.rate() > 0 ? curve.rate() / plain.rate() : 0.0;
  if (o.json) {
    std::printf(
        "{\"curve_rate\":%.1f,\"plaintext_rate\":%.1f,\"curve_ratio\":%.4f,\"link\":\"%s\","
        "\"ok\":%s}\n",
        curve.rate(), plain.rate(), ratio, link_name(measured_transport(o)),
        curve.ok ? "true" : "false");
  } else {
    std::printf("  Curve-encrypted TCP, same run %10.0f mini-batches/s: %.3f x the %s run%s\n",
                curve.rate(), ratio, link_name(measured_transport(o)),
                o.insecure_tcp ? " (target >= 0.85)" : "");
  }
  if (!curve.ok) {
    std::fprintf(stderr, "error: curve run: %s\n", curve.error.c_str());
    return proto::kExitFailed;
  }
  return 0;
}

int run_sweep(const PerfOptions& base, const std::string& root, Logger log) {
  struct Treatment {
    std::string factor, value;
    std::function<void(PerfOptions&)> apply;
  };
  std::vector<Treatment> ts = {
      {"baseline", "-", [](PerfOptions&) {}},
      {"prefetch", "0", [](PerfOptions& o) { o.prefetch = 0; }},
      {"prefetch", "16", [](PerfOptions& o) { o.prefetch = 16; }},
      {"prefetch", "2048", [](PerfOptions& o) { o.prefetch = 2048; }},
      {"poll-ms", "1", [](PerfOptions& o) { o.poll_ms = 1; }},
      {"poll-ms", "100", [](PerfOptions& o) { o.poll_ms = 100; }},
      {"workers", "1", [](PerfOptions& o) { o.workers = 1; }},
      {"workers", "4", [](PerfOptions& o) { o.workers = 4; }},
      {"pools", "2", [](PerfOptions& o) { o.pools = 2; }},
      {"log-level", "info", [](PerfOptions& o) { o.log_level = "info"; }},
      {"log-level", "debug", [](PerfOptions& o) { o.log_level = "debug"; }},
      {"items-per-batch", "10", [](PerfOptions& o) { o.items_per_batch = 10; }},
      {"window", "2000", [](PerfOptions& o) { o.window = 2000; }},
  };
  if (!base.json) {
    std::printf("fanout perf --sweep: %llu mini-batches per run; base: %s\n",
                static_cast<unsigned long long>(base.tasks), describe(base).c_str());
    std::printf("%-16s %-7s %12s %10s %10s %12s  %s\n", "factor", "value", "mb/s", "us/mb",
                "vs base", "cpu ms/mb", "store");
  }
  double base_rate = 0;
  int rc = 0;
  int i = 0;
  for (const auto& t : ts) {
    PerfOptions o = base;
    t.apply(o);
    const std::string dir = fmt::format("{}/sweep{:02}", root, i++);
    RunStats rs = run_once(o, dir, log, measured_transport(o));
    if (!rs.ok) rc = 1;
    if (t.factor == "baseline") base_rate = rs.rate();
    const double total_cpu = rs.cpu_client + rs.cpu_ix + rs.cpu_pools + rs.cpu_workers;
    if (base.json) {
      std::printf(
          "{\"factor\":%s,\"value\":%s,\"rate\":%.1f,\"us_per_minibatch\":%.3f,"
          "\"relative\":%.4f,\"cpu_ms_per_minibatch\":%.5f,\"ok\":%s}\n",
          json_quote(t.factor).c_str(), json_quote(t.value).c_str(), rs.rate(),
          rs.rate() > 0 ? 1e6 / rs.rate() : 0.0, base_rate > 0 ? rs.rate() / base_rate : 0.0,
          per_mb_ms(total_cpu, rs.tasks), rs.ok ? "true" : "false");
    } else {
      std::printf("%-16s %-7s %12.0f %10.1f %9.1f%% %12.4f  %s\n", t.factor.c_str(),
                  t.value.c_str(), rs.rate(), rs.rate() > 0 ? 1e6 / rs.rate() : 0.0,
                  base_rate > 0 ? 100.0 * rs.rate() / base_rate : 0.0,
                  per_mb_ms(total_cpu, rs.tasks), rs.ok ? "complete" : rs.error.c_str());
    }
    std::fflush(stdout);
  }
  return rc;
}

}  // namespace

int run_perf(const PerfOptions& opts, Logger log) {
  if (opts.runtime != "noop" && opts.runtime != "python") {
    std::fprintf(stderr, "error: --runtime: expected noop or python (got '%s')\n",
                 opts.runtime.c_str());
    return proto::kExitUsage;
  }
  if (opts.workers == 0 || opts.pools == 0 || opts.items_per_batch == 0) {
    std::fprintf(stderr, "error: --workers, --pools and --items-per-batch must be >= 1\n");
    return proto::kExitUsage;
  }
  if (opts.encrypted && opts.insecure_tcp) {
    std::fprintf(stderr, "error: --encrypted and --insecure-tcp: give one link, not both\n");
    return proto::kExitUsage;
  }
  if (opts.insecure_tcp) {
    std::fprintf(stderr,
                 "warning: --insecure-tcp: while this benchmark runs, any local user can submit "
                 "jobs to its interchange on plaintext TCP loopback, which run as you\n");
  }
  std::string root;
  try {
    root = opts.keep_dir.empty() ? make_temp_dir() : opts.keep_dir;
    (void)make_dirs(root);
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return proto::kExitInfra;
  }
  PerfOptions o = opts;
  int rc = 0;
  if (o.sweep) {
    rc = run_sweep(o, root, log);
  } else {
    // The ceiling and the baseline run first, in the same session, so ratios compare like with
    // like on a machine whose load changes.
    Ceiling ceiling{.why_not = "skipped (--no-ceiling)"};
    double baseline = 0;
    if (o.ceiling) ceiling = run_ceiling(o, root, log);
    if (o.baseline && o.runtime == "python") {
      baseline = run_probe({o.python, tools_dir() + "/mp_baseline.py", "--tasks", "50000",
                            "--workers", std::to_string(o.workers)},
                           root, log);
    }
    RunStats rs = run_once(o, root + "/run", log, measured_transport(o));
    if (!rs.error.empty() && rs.tasks == 0) {
      std::fprintf(stderr, "error: %s\n", rs.error.c_str());
      rc = 3;
    } else {
      print_run(o, rs, ceiling, baseline);
      if (!rs.ok) {
        std::fprintf(stderr, "error: %s\n", rs.error.c_str());
        rc = 1;
      }
    }
    if (o.curve && rc == 0) {
      rc = print_curve(o, rs, run_once(o, root + "/curve", log, Transport::Curve));
    }
  }
  if (opts.keep_dir.empty()) {
    std::error_code ec;
    fs::remove_all(root, ec);
  } else if (!o.json) {
    std::printf("  kept: %s\n", root.c_str());
  }
  return rc;
}

}  // namespace fanout::client
