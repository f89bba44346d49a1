// fanout run and fanout history. See client.hpp.
#include "client/client.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "client/embedded.hpp"
#include "client/follow.hpp"
#include "client/inputs.hpp"
#include "client/monitoring.hpp"
#include "client/progress.hpp"
#include "client/tabular.hpp"
#include "fanout/config/row_settings.hpp"
#include "fanout/net/socket.hpp"
#include "fanout/protocol/codec.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/json.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

std::atomic<int> g_interrupts{0};
void on_interrupt(int) { g_interrupts.fetch_add(1, std::memory_order_relaxed); }

// Checks, without importing it, that the entry script parses and defines run at module level.
// Exit codes of the checker: 0 ok, 3 syntax error, 4 no run, 5 unreadable.
constexpr const char* kCheckScript = R"PY(
import ast, sys
p = sys.argv[1]
try:
    src = open(p, 'rb').read()
except OSError as e:
    print(f"cannot be read: {e.strerror}"); sys.exit(5)
try:
    tree = ast.parse(src, p)
except SyntaxError as e:
    print(f"line {e.lineno}: syntax error: {e.msg}"); sys.exit(3)
names = set()
def scan(body):
    for n in body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name): names.add(t.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                names.add(a.asname or a.name.split('.')[0])
                if a.name == '*': names.add('run')
        elif isinstance(n, (ast.If, ast.Try, ast.With)):
            for field in ('body', 'orelse', 'finalbody', 'handlers'):
                for sub in getattr(n, field, []) or []:
                    scan(getattr(sub, 'body', [sub]) if isinstance(sub, ast.ExceptHandler) else [sub])
scan(tree.body)
sys.exit(0 if 'run' in names else 4)
)PY";

std::string utc_stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::string settings_json(const config::JobConfig& cfg, std::uint32_t workers) {
  std::string j = "{";
  auto kv = [&](const char* k, const std::string& v, bool quote) {
    if (j.size() > 1) j += ",";
    json_quote(j, k);
    j += ":";
    if (quote) {
      json_quote(j, v);
    } else {
      j += v;
    }
  };
  kv("mini_batch_size", cfg.mini_batch_size, true);
  kv("instance_count", std::to_string(cfg.instance_count), false);
  kv("max_concurrency_per_instance", std::to_string(workers), false);
  kv("prefetch", std::to_string(cfg.fanout.prefetch), false);
  kv("poll_ms", std::to_string(cfg.fanout.poll_ms), false);
  kv("heartbeat_period_ms", std::to_string(cfg.fanout.heartbeat_period_ms), false);
  kv("heartbeat_threshold_ms", std::to_string(cfg.fanout.heartbeat_threshold_ms), false);
  kv("max_retries", std::to_string(cfg.max_retries), false);
  kv("timeout_s", fmt::format("{}", cfg.timeout_s), false);
  kv("error_threshold", std::to_string(cfg.error_threshold), false);
  kv("mini_batch_error_threshold", std::to_string(cfg.mini_batch_error_threshold), false);
  kv("allowed_failed_percent", fmt::format("{}", cfg.allowed_failed_percent), false);
  kv("logging_level", cfg.logging_level, true);
  kv("python", cfg.fanout.python, true);
  kv("task_type", cfg.task_type, true);
  if (auto mon = monitoring_options(cfg)) {
    kv("resource_monitor_interval", fmt::format("{}", mon->resource_monitor_interval_s), false);
    kv("profiling_module", mon->profiling_module, true);
  }
  j += "}";
  return j;
}

}  // namespace

std::string default_db_path() {
  if (const char* e = std::getenv("FANOUT_DB"); e != nullptr && *e != '\0') return e;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x != nullptr && *x != '\0') {
    return std::string(x) + "/fanout/fanout.db";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.local/share/fanout/fanout.db";
}

namespace {

// Tabular input: the table must be readable, its partition keys columns, and the interpreter
// must have pandas, all before anything starts.
Expected<void> check_tabular(const config::JobConfig& cfg) {
  auto table = input_table(cfg);
  if (!table) return Unexpected{table.error()};
  if (!*table) return {};
  auto layout = check_table(cfg, **table);
  if (!layout) return Unexpected{layout.error()};
  auto probe = ChildProcess::spawn(SpawnOptions{
      .argv = {cfg.fanout.python, "-c", "import pandas"},
      .stdin_file = "null",
      .stdout_file = "/dev/null",
      .stderr_file = "/dev/null",
  });
  if (!probe) return Unexpected{probe.error()};
  if (auto st = probe->wait(); !st.success()) {
    return make_error(ErrorCode::InvalidArgument,
                      cfg.spec_path + ": inputs." + cfg.input_data +
                          ": tabular input needs pandas, and the interpreter '" +
                          cfg.fanout.python +
                          "' cannot import it (install pandas for it, e.g. apt-get install "
                          "python3-pandas, or choose another with --python / fanout.python)");
  }
  return {};
}

}  // namespace

Expected<void> prepare(config::JobConfig& cfg, const RunOverrides& ov) {
  if (!ov.python.empty()) cfg.fanout.python = ov.python;
  if (ov.workers > 0) cfg.fanout.workers = ov.workers;
  if (ov.prefetch >= 0) cfg.fanout.prefetch = static_cast<std::uint32_t>(ov.prefetch);
  if (ov.poll_ms >= 0) cfg.fanout.poll_ms = static_cast<std::uint32_t>(ov.poll_ms);
  if (ov.pools > 0) cfg.instance_count = ov.pools;
  if (!ov.db.empty()) cfg.fanout.db = ov.db;
  if (!ov.run_dir.empty()) cfg.fanout.run_dir = ov.run_dir;
  if (auto mon = monitoring_options(cfg); !mon) return Unexpected{mon.error()};
  if (cfg.task_type != "run_function") return {};
  const std::string script = resolve_path(cfg.code_dir, cfg.entry_script);
  auto checker = ChildProcess::spawn(SpawnOptions{
      .argv = {cfg.fanout.python, "-c", kCheckScript, script},
      .stdin_file = "null",
      .stdout_file = "",
  });
  if (!checker) return Unexpected{checker.error()};
  auto st = checker->wait();
  const std::string where = cfg.spec_path + ": task.entry_script: " + script;
  if (st.code == 127) {
    return make_error(ErrorCode::InvalidArgument, cfg.spec_path + ": fanout.python: interpreter '" +
                                                      cfg.fanout.python + "' not found");
  }
  if (st.code == 4) {
    return make_error(ErrorCode::InvalidArgument, where + ": does not define run(mini_batch)");
  }
  if (st.code == 3) {
    return make_error(ErrorCode::InvalidArgument, where + ": is not valid Python (see above)");
  }
  if (!st.success()) {
    return make_error(ErrorCode::InvalidArgument,
                      where + ": could not be checked (" + st.describe() + ")");
  }
  // parallel_run_step.settings.json beside the entry script; a `fanout:` value that differs from
  // the default wins over it.
  const std::string settings =
      (fs::path(script).parent_path() / "parallel_run_step.settings.json").string();
  auto rs = config::load_row_settings(settings);
  if (!rs) return Unexpected{rs.error()};
  if (rs->separator && cfg.fanout.row_separator == " ") cfg.fanout.row_separator = *rs->separator;
  if (rs->header && !cfg.fanout.row_header) cfg.fanout.row_header = *rs->header;
  return check_tabular(cfg);
}

int run_job(const config::JobConfig& cfg, const RunOverrides& ov, Logger log) {
  const std::string db = cfg.fanout.db.empty() ? default_db_path() : cfg.fanout.db;
  const std::uint32_t workers = cfg.fanout.workers > 0 ? cfg.fanout.workers
                                : cfg.max_concurrency_per_instance > 0
                                    ? cfg.max_concurrency_per_instance
                                    : std::max(1u, std::thread::hardware_concurrency());
  std::string run_root = cfg.fanout.run_dir.empty() ? fs::path(db).parent_path().string() + "/runs"
                                                    : cfg.fanout.run_dir;
  const std::string run_dir =
      fmt::format("{}/{}-{}-{}", run_root, cfg.name, utc_stamp(), ::getpid());
  if (auto r = make_dirs(run_dir + "/logs"); !r) {
    std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
    return 3;
  }

  proto::JobSpec spec;
  spec.name = cfg.name;
  spec.spec_path = cfg.spec_path;
  spec.runtime = cfg.task_type == "run_function" ? "python" : cfg.task_type;
  spec.code_dir = cfg.code_dir;
  spec.entry_script = cfg.task_type == "command"  ? cfg.command
                      : cfg.task_type == "native" ? cfg.library
                                                  : cfg.entry_script;
  spec.python = cfg.fanout.python;
  spec.args = cfg.user_args;
  for (const auto& [k, v] : cfg.environment_variables) spec.env.push_back(k + "=" + v);
  spec.env.push_back("FANOUT_ROW_SEP=" + cfg.fanout.row_separator);
  spec.env.push_back(std::string("FANOUT_ROW_HEADER=") + (cfg.fanout.row_header ? "1" : "0"));
  spec.env.push_back("FANOUT_LOGGING_LEVEL=" + cfg.logging_level);
  spec.output_path = cfg.append_row_to;
  spec.log_dir = run_dir + "/logs";
  spec.max_tries = cfg.max_retries + 1;
  spec.run_timeout_s = cfg.timeout_s;
  spec.error_threshold = cfg.error_threshold;
  spec.mini_batch_error_threshold = cfg.mini_batch_error_threshold;
  spec.allowed_failed_percent = cfg.allowed_failed_percent;
  spec.settings_json = settings_json(cfg, workers);
  spec.input_name = cfg.input_data;
  spec.task_overhead_timeout_s = cfg.task_overhead_timeout_s;
  spec.first_task_creation_timeout_s = cfg.first_task_creation_timeout_s;
  spec.progress_update_timeout_s = cfg.progress_update_timeout_s;
  if (auto mon = monitoring_options(cfg)) {
    spec.resource_monitor_interval_s = mon->resource_monitor_interval_s;
    if (!mon->profiling_module.empty()) {
      spec.env.push_back("FANOUT_PROFILING_MODULE=" + mon->profiling_module);
    }
  }

  for (const auto& n : cfg.notices) std::fprintf(stderr, "note: %s\n", n.c_str());

  std::optional<Embedded> embedded;
  std::string endpoint = ov.interchange;
  try {
    if (endpoint.empty()) {
      embedded.emplace(cfg, db, run_dir, workers, std::max(1u, cfg.instance_count), ov.python, log);
      endpoint = embedded->client_endpoint();
    }
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return 3;
  }

  net::Context ctx;
  net::Socket sock(ctx, net::Socket::Kind::Dealer);
  sock.connect(endpoint);
  net::Poller poller;
  poller.add(sock);
  net::Message msg;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  if (!ov.quiet) {
    std::fprintf(stderr, "fanout: job '%s' on %s (%s), %u pool(s) x %u workers; logs in %s/logs\n",
                 cfg.name.c_str(), embedded ? "a private interchange" : endpoint.c_str(),
                 db.c_str(), cfg.instance_count, workers, run_dir.c_str());
  }
  (void)sock.send(proto::encode(proto::SubmitJob{spec}), false);

  std::uint64_t job_id = 0;
  std::uint32_t window = 0;
  std::optional<proto::JobEnded> ended;
  proto::JobProgress progress;
  ProgressPrinter printer(ov.quiet  ? ProgressMode::Quiet
                          : ov.json ? ProgressMode::Json
                                    : ProgressMode::Human);
  bool cancel_sent = false;
  bool leave_running = false;
  std::string failure;
  // Reattachment (the interchange restarted): after kProbeAfter without a frame the client sends
  // Attach{job_id}; the answer is a JobProgress from whichever interchange now serves the port.
  // A new one knows only the mini-batches it recorded, so the first answer to a probe that
  // reports fewer than were sent (or no SubmitEnd after it was sent) restarts the submission
  // from its count. A false alarm only resends mini-batches, which the interchange drops.
  constexpr auto kProbeAfter = std::chrono::seconds(2);
  auto last_heard = Clock::now();
  Clock::time_point last_probe{};
  bool probe_pending = false;
  std::uint64_t unanswered_probes = 0;         // in a row: the interchange is unreachable
  bool submit_ended = false;                   // SubmitEnd sent
  std::uint64_t submitted = 0;                 // mini-batches sent (or known to the interchange)
  std::optional<std::uint64_t> resubmit_from;  // set when the submission must restart
  std::uint64_t reattached = 0;
  std::uint64_t instance = 0;  // of the interchange that last answered

  // Handles whatever the interchange sent; returns false when the run must stop.
  auto pump = [&](std::chrono::milliseconds wait) -> bool {
    poller.wait(wait);
    while (sock.recv(msg)) {
      last_heard = Clock::now();
      auto h = proto::read_header(msg.frame);
      if (!h) continue;
      switch (h->type) {
        case proto::MsgType::JobAccepted:
          if (auto m = proto::decode<proto::JobAccepted>(msg.frame); m && job_id == 0) {
            job_id = m->job_id;
            window = std::max<std::uint32_t>(m->window, 1);
            printer.accepted(job_id, spec.name, spec.log_dir);
          }
          break;
        case proto::MsgType::JobProgress:
          if (auto m = proto::decode<proto::JobProgress>(msg.frame); m && m->job_id == job_id) {
            progress = *m;
            printer.update(progress);
            if (m->instance != 0 && instance != 0 && m->instance != instance) {
              ++reattached;
              log->warn("job {}: the interchange restarted; reattached", job_id);
            }
            if (m->instance != 0) instance = m->instance;
            if (probe_pending) {
              probe_pending = false;
              if (unanswered_probes > 0) {
                log->warn("job {}: the interchange answers again after {} unanswered probes",
                          job_id, unanswered_probes);
              }
              unanswered_probes = 0;
              const bool lost_tasks = m->submitted < submitted;
              const bool lost_end = submit_ended && m->total == 0;
              if (lost_tasks || lost_end) {
                resubmit_from = m->submitted;
                log->warn(
                    "job {}: the interchange knows {} of {} mini-batches submitted; "
                    "resubmitting from there",
                    job_id, m->submitted, submitted);
              }
            }
          }
          break;
        case proto::MsgType::JobEnded:
          if (auto m = proto::decode<proto::JobEnded>(msg.frame); m && m->job_id == job_id) {
            ended = *m;
            progress = m->progress;
          }
          break;
        case proto::MsgType::Reject:
          if (auto m = proto::decode<proto::Reject>(msg.frame)) {
            // A job the interchange does not know at all cannot be followed; anything else
            // (a SubmitTasks that reached a restarted interchange) is answered by reattaching.
            if (job_id == 0 || m->reason.rfind("Attach:", 0) == 0) {
              failure = "interchange: " + m->reason;
              return false;
            }
            last_probe = Clock::time_point{};
            last_heard = Clock::now() - kProbeAfter;
          }
          break;
        default:
          break;
      }
    }
    if (embedded) {
      if (auto dead = embedded->dead_child(); !dead.empty()) {
        failure = dead;
        return false;
      }
    }
    const auto now = Clock::now();
    if (job_id != 0 && !ended && now - last_heard >= kProbeAfter &&
        now - last_probe >= kProbeAfter) {
      last_probe = now;
      if (probe_pending) ++unanswered_probes;
      probe_pending = true;
      (void)sock.send(proto::encode(proto::Attach{job_id}));
    }
    if (g_interrupts.load() > 0 && job_id != 0 && !cancel_sent) {
      cancel_sent = true;
      std::fprintf(stderr, "\nfanout: cancelling job %llu (Ctrl-C again to leave it running)\n",
                   static_cast<unsigned long long>(job_id));
      (void)sock.send(proto::encode(proto::CancelJob{job_id, "cancelled by the user (signal)"}));
    }
    if (g_interrupts.load() > 1) {
      leave_running = true;
      failure = "interrupted";
      return false;
    }
    return !ended.has_value() && !resubmit_from.has_value();
  };

  // 1. Wait for the job id.
  auto accept_deadline = Clock::now() + std::chrono::seconds(30);
  while (job_id == 0 && failure.empty()) {
    if (!pump(std::chrono::milliseconds(100))) break;
    if (Clock::now() > accept_deadline) failure = "no answer from the interchange at " + endpoint;
  }
  if (job_id != 0) write_job_pointer(run_dir, endpoint, job_id);

  // 2. Stream the input while listing it, within the interchange's window. After an interchange
  // restart the listing starts again, skipping the mini-batches the interchange already has.
  std::uint64_t skip_below = 0;
  bool submitting = job_id != 0 && failure.empty();
  while (job_id != 0 && failure.empty() && !ended) {
    if (!submitting) {
      // 3. Follow the job to its end.
      if (!pump(std::chrono::milliseconds(200)) && resubmit_from) {
        skip_below = *resubmit_from;
        resubmit_from.reset();
        submitting = true;
      }
      continue;
    }
    submitting = false;
    submit_ended = false;
    submitted = skip_below;
    proto::SubmitTasks pending{job_id, {}};
    std::size_t pending_bytes = 0;
    bool ok = true;
    auto send_pending = [&]() {
      if (pending.batches.empty()) return;
      submitted += pending.batches.size();
      (void)sock.send(proto::encode(pending, pending_bytes + 64), false);
      pending.batches.clear();
      pending_bytes = 0;
    };
    auto listed = stream_minibatches(cfg, [&](proto::MiniBatch&& mb) {
      if (mb.index < skip_below) return true;
      for (const auto& it : mb.items) pending_bytes += it.size() + 2;
      pending_bytes += mb.detail.size();
      pending.batches.push_back(std::move(mb));
      // Backpressure: never run further ahead of the finished mini-batches than the window
      // (counting those still buffered here, which are sent before waiting).
      const bool window_full =
          submitted + pending.batches.size() >= progress.succeeded + progress.failed + window;
      if (window_full || pending.batches.size() >= 256 || pending_bytes >= (1u << 20)) {
        send_pending();
      }
      while (ok && submitted >= progress.succeeded + progress.failed + window) {
        ok = pump(std::chrono::milliseconds(50));
      }
      if (ok) ok = pump(std::chrono::milliseconds(0));
      return ok;
    });
    if (resubmit_from) {
      skip_below = *resubmit_from;
      resubmit_from.reset();
      submitting = true;
      continue;
    }
    if (!listed) {
      failure = listed.error().message;
      (void)sock.send(proto::encode(proto::CancelJob{job_id, failure}));
    } else if (ok && !ended) {
      send_pending();
      (void)sock.send(proto::encode(proto::SubmitEnd{job_id, submitted}), false);
      submit_ended = true;
    }
  }
  printer.update(progress, true);
  printer.finish();
  if (reattached > 0) {
    std::fprintf(stderr, "fanout: reattached to job %llu after the interchange restarted\n",
                 static_cast<unsigned long long>(job_id));
  }
  if (ended) printer.ended(*ended);

  int rc = 3;
  if (ended) {
    rc = report_ended(*ended, spec.output_path, spec.log_dir);
  } else if (leave_running && job_id != 0) {
    std::fprintf(stderr,
                 "\nfanout: job %llu left running; follow it with: fanout wait %llu --db %s\n",
                 static_cast<unsigned long long>(job_id), static_cast<unsigned long long>(job_id),
                 db.c_str());
    if (embedded) embedded->detach();
    return 3;
  } else {
    std::fprintf(stderr, "error: %s\n", failure.empty() ? "the job did not end" : failure.c_str());
    if (job_id != 0) {
      // What committed is kept; resume runs the rest (docs/architecture.md, recovery table).
      std::fprintf(stderr,
                   "fanout: job %llu is unfinished; finish it with: fanout resume %llu --db %s\n",
                   static_cast<unsigned long long>(job_id), static_cast<unsigned long long>(job_id),
                   db.c_str());
    }
  }
  if (embedded) {
    (void)sock.send(proto::encode(proto::Shutdown{"client done", embedded->shutdown_token()}));
    embedded->stop();
  }
  return rc;
}

int print_history(const std::string& db, std::size_t limit, const std::string& state, bool json) {
  try {
    store::StoreReader reader(db);
    auto jobs = reader.history(limit, state);
    if (json) {
      std::string out = "[";
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        const auto& j = jobs[i];
        if (i > 0) out += ",";
        out += fmt::format(
            "{{\"id\":{},\"name\":{},\"state\":{},\"reason\":{},\"created\":{},\"ended\":{},"
            "\"total\":{},\"succeeded\":{},\"failed\":{},\"items_succeeded\":{},"
            "\"items_failed\":{},\"attempts\":{}}}",
            j.id, json_quote(j.name), json_quote(j.state), json_quote(j.reason), j.created, j.ended,
            j.total, j.succeeded, j.failed, j.items_succeeded, j.items_failed, j.attempts);
      }
      out += "]\n";
      std::fputs(out.c_str(), stdout);
      return 0;
    }
    std::printf("%-6s %-24s %-10s %-20s %14s %10s %10s\n", "ID", "NAME", "STATE", "STARTED (UTC)",
                "MINI-BATCHES", "ITEMS", "DURATION");
    for (const auto& j : jobs) {
      const double end = j.ended > 0 ? j.ended : unix_now();
      std::string started = iso_utc(j.created).substr(0, 19);
      std::printf("%-6llu %-24.24s %-10s %-20s %14s %10llu %9.1fs\n",
                  static_cast<unsigned long long>(j.id), j.name.c_str(), j.state.c_str(),
                  started.c_str(), fmt::format("{}/{}", j.succeeded, j.total).c_str(),
                  static_cast<unsigned long long>(j.items_succeeded), end - j.created);
    }
    if (jobs.empty()) std::printf("(no jobs in %s)\n", db.c_str());
    return 0;
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return 2;
  }
}

}  // namespace fanout::client
