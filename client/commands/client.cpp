// fanout run and fanout history. See client.hpp.
#include "client/commands/client.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>
#include <vector>

#include "client/commands/follow.hpp"
#include "client/input/inputs.hpp"
#include "client/input/tabular.hpp"
#include "client/launch/embedded.hpp"
#include "client/launch/monitoring.hpp"
#include "client/launch/run_plan.hpp"
#include "client/launch/run_settings.hpp"
#include "client/launch/slurm_launcher.hpp"
#include "client/output/job_outputs.hpp"
#include "client/output/output_check.hpp"
#include "client/session/progress.hpp"
#include "client/session/session.hpp"
#include "client/session/submission.hpp"
#include "fanout/config/batch_deployment.hpp"
#include "fanout/config/row_settings.hpp"
#include "fanout/net/security.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

std::atomic<int> g_interrupts{0};
void on_interrupt(int) { g_interrupts.fetch_add(1, std::memory_order_relaxed); }

// Checks, without importing it, that the entry script parses and defines run at module level.
// Exit codes of the checker: 0 ok, 3 syntax error, 4 no run, 5 unreadable (kCheck* below).
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

constexpr int kCheckSyntaxError = 3;
constexpr int kCheckNoRun = 4;

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
  // A table of files needs no pandas, but its paths must name files (listed again at submit).
  if (auto files = input_file_table(cfg); !files) return Unexpected{files.error()};
  auto table = input_table(cfg);
  if (!table) return Unexpected{table.error()};
  if (!*table) return {};
  auto layout = check_table(cfg, **table);
  if (!layout) return Unexpected{layout.error()};
  // Found, not imported: importing pandas costs the run about half a second of start-up, and each
  // worker imports it anyway (an install that is found but broken fails the first mini-batch).
  auto probe = ChildProcess::spawn(SpawnOptions{
      .argv = {cfg.fanout.python, "-c",
               "import importlib.util, sys; sys.exit(importlib.util.find_spec('pandas') is None)"},
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

Expected<void> EntryCheck::finish() {
  if (!checker_) return {};
  auto st = checker_->wait();
  checker_.reset();
  if (st.code == kCheckNoRun) {
    return make_error(ErrorCode::InvalidArgument, where_ + ": does not define run(mini_batch)");
  }
  if (st.code == kCheckSyntaxError) {
    return make_error(ErrorCode::InvalidArgument, where_ + ": is not valid Python (see above)");
  }
  if (!st.success()) {
    return make_error(ErrorCode::InvalidArgument,
                      where_ + ": could not be checked (" + st.describe() + ")");
  }
  return {};
}

Expected<EntryCheck> prepare_started(config::JobConfig& cfg, const RunOverrides& ov) {
  apply_overrides(cfg, ov);
  if (auto mon = monitoring_options(cfg); !mon) return Unexpected{mon.error()};
  // Before anything starts: an unwritable output is the job file's error (exit 2).
  if (auto out = check_output_writable(cfg); !out) return Unexpected{out.error()};
  if (cfg.task_type != "run_function") return EntryCheck{};
  const std::string script = resolve_path(cfg.code_dir, cfg.entry_script);
  auto checker = ChildProcess::spawn(SpawnOptions{
      .argv = {cfg.fanout.python, "-c", kCheckScript, script},
      .stdin_file = "null",
      .stdout_file = "",
  });
  if (!checker) {  // posix_spawnp found no such program
    return make_error(ErrorCode::InvalidArgument, cfg.spec_path + ": fanout.python: interpreter '" +
                                                      cfg.fanout.python +
                                                      "' not found: " + checker.error().message);
  }
  EntryCheck pending;
  pending.checker_.emplace(std::move(*checker));
  pending.where_ = cfg.spec_path + ": task.entry_script: " + script;
  // What follows is checked while the checker runs; its error, if any, comes first as it did
  // when the checker was awaited before.
  auto rest = [&]() -> Expected<void> {
    // parallel_run_step.settings.json beside the entry script; a `fanout:` value that differs
    // from the default wins over it.
    const std::string settings =
        (fs::path(script).parent_path() / "parallel_run_step.settings.json").string();
    auto rs = config::load_row_settings(settings);
    if (!rs) return Unexpected{rs.error()};
    if (rs->separator && cfg.fanout.row_separator == " ") cfg.fanout.row_separator = *rs->separator;
    if (rs->header && !cfg.fanout.row_header) cfg.fanout.row_header = *rs->header;
    return check_tabular(cfg);
  }();
  if (!rest) {
    if (auto r = pending.finish(); !r) return Unexpected{r.error()};
    return Unexpected{rest.error()};
  }
  return pending;
}

Expected<void> prepare(config::JobConfig& cfg, const RunOverrides& ov) {
  auto pending = prepare_started(cfg, ov);
  if (!pending) return Unexpected{pending.error()};
  return pending->finish();
}

namespace {

// True when the store `db` holds a job whose logs folder is `log_dir` (this run's), or cannot
// be read (then nothing is assumed): a run never submits again a job that may be there.
bool run_in_store(const std::string& db, const std::string& log_dir) {
  try {
    store::StoreReader reader(db);
    // A run's job is among the newest: only jobs submitted meanwhile can be newer.
    for (const auto& j : reader.history(256)) {
      if (j.log_dir == log_dir) return true;
    }
    return false;
  } catch (const Failure&) {
    return true;
  }
}

}  // namespace

namespace {

// Prints `e` as the command's error and returns `code`.
int fail_with(const Error& e, int code) {
  std::fprintf(stderr, "error: %s\n", e.message.c_str());
  return code;
}

// Claims the outputs: folders made, a fresh append_row file, as Azure ML provides them, on every
// route: an earlier job's file is refused unless --overwrite. The interchange refuses it too (a
// shared one may see a file this host does not); with --interchange the local store is not the
// interchange's, so only the file is looked at here. Returns kExitOk, or the exit code after
// printing why.
int claim_outputs(const config::JobConfig& cfg, const RunOverrides& ov, const RunPaths& paths) {
  if (auto r = claim_row_file(cfg, paths.shared ? std::string() : paths.db, ov.overwrite); !r) {
    return fail_with(r.error(), proto::kExitUsage);
  }
  if (auto r = make_output_folders(cfg); !r) return fail_with(r.error(), proto::kExitInfra);
  return proto::kExitOk;
}

// Makes the run's folder and the store, as the plan says. Returns kExitOk, or the exit code after
// printing why.
int make_run_dirs(const RunOverrides& ov, const RunPaths& paths) {
  if (!paths.make_folders) return proto::kExitOk;
  if (auto r = make_dirs(paths.log_dir()); !r) return fail_with(r.error(), proto::kExitInfra);
  // The run folder (logs) and the store are the owner's only (docs/security.md).
  if (auto r = net::restrict_folder(paths.run_dir, ov.share_with_group); !r) {
    return fail_with(r.error(), proto::kExitInfra);
  }
  if (auto r = net::create_private_file(paths.db, ov.share_with_group); !r) {
    return fail_with(r.error(), proto::kExitInfra);
  }
  return proto::kExitOk;
}

// What a run made before its job was submitted, so that a run refused then (its entry script
// failed the check that ran meanwhile) leaves nothing behind, as when it was refused first.
struct MadeBeforeSubmit {
  bool db_existed = true;
  std::vector<fs::path> new_dirs{};  // folders above the run folder that it made, deepest first

  explicit MadeBeforeSubmit(const RunPaths& paths) {
    if (!paths.make_folders) return;
    std::error_code ec;
    db_existed = fs::exists(paths.db, ec) || ec;
    for (fs::path d = fs::path(paths.run_dir).parent_path();
         !d.empty() && d != d.root_path() && !fs::exists(d, ec) && !ec; d = d.parent_path()) {
      new_dirs.push_back(d);
    }
  }

  // Removes the run folder (this run's own), the store when this run created it, and the folders
  // this run made above them while they are empty: another run may have started there meanwhile.
  void remove(const RunPaths& paths) const {
    if (!paths.make_folders) return;
    std::error_code ec;
    fs::remove_all(paths.run_dir, ec);
    if (!db_existed) {
      for (const char* suffix : {"", "-wal", "-shm", "-journal", ".owner"}) {
        fs::remove(paths.db + suffix, ec);
      }
    }
    for (const auto& d : new_dirs) fs::remove(d, ec);  // fails, and stays, unless empty
  }
};

// What a run works with once planned; lives for the whole run_job call.
struct RunContext {
  const config::JobConfig& cfg;
  const RunOverrides& ov;
  const RunSettings& rs;
  RunPaths& paths;
  proto::JobSpec& spec;
  ProgressPrinter& printer;
  bool allow_partial = false;
  Logger log;
  // The entry-script check still running while the interchange starts (nullptr: none).
  EntryCheck* pending = nullptr;
  const MadeBeforeSubmit* made = nullptr;
};

// The interchange of a run and the session with it. The session points into the Embedded, so
// this is never moved; the session is reset before the Embedded.
struct Connection {
  std::optional<Embedded> embedded{};
  std::optional<Session> session{};
  std::string endpoint{};
};

void on_first_connect(const RunContext& ctx, const Connection& c) {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  if (ctx.ov.quiet || ctx.paths.shared) return;
  std::fprintf(stderr, "fanout: job '%s' on %s (%s), %u %s x %s workers; logs in %s/logs\n",
               ctx.cfg.name.c_str(), c.embedded ? "a private interchange" : c.endpoint.c_str(),
               ctx.paths.db.c_str(), ctx.rs.pools,
               plan_launcher(ctx.rs) == LauncherKind::Slurm ? "Slurm pool job(s)" : "pool(s)",
               ctx.rs.workers > 0 ? std::to_string(ctx.rs.workers).c_str() : "<node's cores>",
               ctx.paths.run_dir.c_str());
}

// Stops what a run started before its job was submitted and removes what it made: the run is
// refused, as if nothing had started.
void undo_before_submit(const RunContext& ctx, Connection& c) {
  c.session.reset();  // before the Embedded it points to
  if (c.embedded) c.embedded->stop_unused();
  c.embedded.reset();
  if (ctx.made != nullptr) ctx.made->remove(ctx.paths);
}

// Awaits the entry-script check that ran while the interchange started. On its error: says it,
// undoes the start and returns kExitUsage (as prepare() failing would); else kExitOk.
int refuse_if_bad_script(const RunContext& ctx, Connection& c) {
  if (ctx.pending == nullptr) return proto::kExitOk;
  auto r = ctx.pending->finish();
  if (r) return proto::kExitOk;
  undo_before_submit(ctx, c);
  return fail_with(r.error(), proto::kExitUsage);
}

// Before the first submit of a run whose entry script was checked meanwhile: that check's
// verdict, then what prepare() used to be followed by (the outputs claimed, the job file's
// notices), in that order. Returns kExitOk, or the exit code after printing why.
int settle_before_submit(const RunContext& ctx, Connection& c) {
  if (ctx.pending == nullptr) return proto::kExitOk;
  if (int rc = refuse_if_bad_script(ctx, c); rc != proto::kExitOk) return rc;
  if (int rc = claim_outputs(ctx.cfg, ctx.ov, ctx.paths); rc != proto::kExitOk) {
    undo_before_submit(ctx, c);
    return rc;
  }
  if (!ctx.ov.quiet) {
    for (const auto& n : ctx.cfg.notices) std::fprintf(stderr, "note: %s\n", n.c_str());
  }
  return proto::kExitOk;
}

// Starts the embedded interchange (or reaches --interchange) and submits the job. The embedded
// default may attach to the store's owner; when that owner goes away before it accepts the job
// (an idle one exits), the run decides again where its job goes. Returns kExitOk once a session
// is open, else the exit code after printing why.
int connect_and_submit(const RunContext& ctx, Connection& c) {
  c.endpoint = ctx.ov.interchange;
  for (int tries = 1;; ++tries) {
    try {
      if (!ctx.paths.shared) {
        c.embedded.emplace(ctx.rs, ctx.paths.db, ctx.paths.run_dir, ctx.log);
        c.endpoint = c.embedded->client_endpoint();
      }
      if (tries == 1) {
        if (int rc = settle_before_submit(ctx, c); rc != proto::kExitOk) return rc;
      }
      c.session.emplace(
          c.endpoint,
          Session::Options{
              .rules = SessionRules{.submits = true, .allow_partial = ctx.allow_partial},
              .embedded = c.embedded ? &*c.embedded : nullptr,
              .security = ctx.ov.security,
              .printer = &ctx.printer,
              .interrupts = &g_interrupts,
              // An interchange that restarted after the job's end was committed does not
              // know it: the store does.
              // The store's path may change once a shared interchange names its own.
              .ended_in_store = [&c, paths = &ctx.paths]() -> std::optional<proto::JobEnded> {
                if (!c.session) return std::nullopt;
                return job_ended_in_store(paths->db, c.session->policy().job_id());
              },
              .interchange_gone = {},
              .halt = ctx.ov.halt},
          ctx.log);
    } catch (const Failure& f) {  // a child that cannot start; a key missing or open to others,
                                  // --insecure off loopback
      // A bad entry script is said first, as when it was checked before anything started.
      if (int rc = refuse_if_bad_script(ctx, c); rc != proto::kExitOk) return rc;
      std::fprintf(stderr, "error: %s\n", f.what());
      return proto::kExitInfra;
    }
    if (tries == 1) on_first_connect(ctx, c);
    c.session->submit(ctx.spec);
    const SessionPolicy& p = c.session->policy();
    if (!c.embedded || !c.embedded->guest() || p.job_id() != 0 ||
        !attach_again(p, AttachOutcome{.guest = true,
                                       .owner_gone = c.embedded->interchange_exited(),
                                       .job_in_store = run_in_store(ctx.paths.db, ctx.spec.log_dir),
                                       .tries = tries})) {
      return proto::kExitOk;
    }
    if (!ctx.ov.quiet) {
      std::fprintf(stderr,
                   "note: %s before it accepted this job; deciding again where it runs (try %d "
                   "of %d)\n",
                   p.detail().empty() ? "the store's owner went away" : p.detail().c_str(),
                   tries + 1, kAttachTries);
    }
    c.session.reset();      // before the Embedded it points to
    c.embedded->abandon();  // its pools, started for the owner, go too
    c.embedded.reset();
  }
}

// A shared interchange's paths once it accepted the job (an older one names none, and then ours
// stand); then the job pointer `fanout wait` follows, when this host sees the run folder.
void record_accepted(const RunContext& ctx, const Connection& c) {
  const SessionPolicy& state = c.session->policy();
  if (ctx.paths.shared && state.job_id() != 0) {
    const auto& acc = state.accepted();
    if (!acc.db_path.empty()) ctx.paths.db = acc.db_path;
    if (!acc.log_dir.empty()) {
      ctx.spec.log_dir = acc.log_dir;
      ctx.paths.run_dir = fs::path(acc.log_dir).parent_path().string();
    }
    if (!ctx.ov.quiet) {
      std::fprintf(stderr, "fanout: job %llu '%s' on %s; the interchange's store %s, logs in %s\n",
                   static_cast<unsigned long long>(state.job_id()), ctx.cfg.name.c_str(),
                   c.endpoint.c_str(), ctx.paths.db.c_str(), ctx.spec.log_dir.c_str());
    }
  }
  std::error_code ec;
  if (state.job_id() != 0 && !ctx.paths.run_dir.empty() &&
      fs::is_directory(ctx.paths.run_dir, ec)) {
    write_job_pointer(ctx.paths.run_dir, c.endpoint, state.job_id());
  }
}

// Streams the input while listing it, within the window, then follows the job to its end. After
// an interchange restart the listing starts again, skipping the mini-batches the interchange
// already has. Returns whether the input listed no mini-batch at all.
bool stream_and_follow(const config::JobConfig& cfg, Session& session,
                       const std::vector<std::string>& own) {
  std::uint64_t skip_below = 0;
  bool empty_input = false;
  while (session.policy().keep_going()) {
    auto listed = submit_input(cfg, session, skip_below, own);
    empty_input = listed && *listed == 0;
    if (auto from = session.policy().take_resubmit()) {
      skip_below = *from;
      continue;
    }
    if (!listed) {
      session.cancel(listed.error().message);
      session.policy().fail(listed.error().message);
      break;
    }
    if (!session.policy().keep_going()) break;
    session.send_end();
    session.follow();
    if (auto from = session.policy().take_resubmit()) skip_below = *from;
  }
  return empty_input;
}

// Says that the input was empty: not an error (exit 0, like any job with nothing to do), but
// said plainly.
void say_empty_input(const config::JobConfig& cfg) {
  std::string input = cfg.input_data;
  for (const auto& in : cfg.inputs) {
    if (in.name == cfg.input_data && !in.path.empty()) input += " (" + in.path + ")";
  }
  std::fprintf(stderr, "fanout: 0 mini-batches: input %s is empty; no run() was called\n",
               input.c_str());
}

// What is said and written once the session ended: the summary and reports of an ended job, how
// to follow one left running, or why it did not end and how to finish it. Returns the exit code.
int finish_run(const RunContext& ctx, Connection& c, bool empty_input) {
  const SessionPolicy& state = c.session->policy();
  const std::uint64_t job_id = state.job_id();
  const std::string& db = ctx.paths.db;
  ctx.printer.update(state.progress(), true);
  ctx.printer.finish();
  if (ctx.ov.before_summary) ctx.ov.before_summary();
  if (state.restarts() > 0) {
    std::fprintf(stderr, "fanout: reattached to job %llu after the interchange restarted\n",
                 static_cast<unsigned long long>(job_id));
  }
  if (state.ended()) ctx.printer.ended(*state.ended());
  if (empty_input && state.ended()) say_empty_input(ctx.cfg);
  const int rc = state.exit_code();
  if (state.ended()) {
    if (auto r = write_output_mltables(ctx.cfg); !r) {
      std::fprintf(stderr, "warning: %s\n", r.error().message.c_str());
    }
    // The interchange that wrote them (or failed to: a full logs folder) may not have said;
    // with the store at hand, reports that are missing are written here, or why they cannot be
    // is said.
    if (state.end() == SessionEnd::EndedInStore || !ctx.paths.shared) {
      write_missing_reports(db, job_id, ctx.spec.log_dir);
    }
    // A job that --halt success=N ended early succeeded as asked: it is quiet as one that ran
    // everything.
    const bool halted = ctx.ov.halt && !ctx.ov.halt().empty();
    if (!(ctx.ov.silent_success && (state.ended()->state == "succeeded" || halted))) {
      (void)report_ended(
          *state.ended(), summary_output(ctx.spec.output_path, recorded_settings(ctx.cfg)),
          ctx.spec.log_dir, ctx.paths.shared ? std::string() : db, ctx.allow_partial);
    }
  } else if (state.end() == SessionEnd::LeftRunning && job_id != 0) {
    std::fprintf(stderr,
                 "\nfanout: job %llu left running; follow it with: fanout wait %llu --db %s\n",
                 static_cast<unsigned long long>(job_id), static_cast<unsigned long long>(job_id),
                 db.c_str());
    if (c.embedded) c.embedded->detach();
    return rc;
  } else {
    std::string failure = state.detail();
    if (state.end() == SessionEnd::Rejected) failure = "interchange: " + failure;
    if (state.end() == SessionEnd::NotAccepted) {
      failure = "no answer from the interchange at " + c.endpoint;
    }
    std::fprintf(stderr, "error: %s\n", failure.empty() ? "the job did not end" : failure.c_str());
    if (job_id != 0) {
      // What committed is kept; resume runs the rest (docs/architecture.md, recovery table).
      std::fprintf(stderr,
                   "fanout: job %llu is unfinished; finish it with: fanout resume %llu --db %s\n",
                   static_cast<unsigned long long>(job_id), static_cast<unsigned long long>(job_id),
                   db.c_str());
    }
  }
  if (c.embedded) {
    // A store owner that other runs' jobs attached to stays until they end (docs/store.md).
    if (!c.embedded->guest() && c.session->shutdown("client done", c.embedded->shutdown_token())) {
      c.embedded->detach();
    } else {
      c.embedded->stop();
    }
  }
  return rc;
}

// A batch deployment's model sits inside AZUREML_MODEL_DIR under its own name, as in Azure ML;
// without a run folder here (a shared interchange) the folder goes beside the store. Returns
// kExitOk, or the exit code after printing why.
int lay_out_model(const config::JobConfig& cfg, const RunPaths& paths, proto::JobSpec& spec) {
  if (cfg.model_path.empty()) return proto::kExitOk;
  const std::string root =
      !paths.run_dir.empty()
          ? paths.run_dir
          : fmt::format("{}/runs/{}-model-{}", fs::path(paths.db).parent_path().string(), cfg.name,
                        ::getpid());
  auto model_dir = config::lay_out_model_dir(cfg, root + "/azureml-models");
  if (!model_dir) return fail_with(model_dir.error(), proto::kExitInfra);
  if (!model_dir->empty()) spec.env.push_back("AZUREML_MODEL_DIR=" + *model_dir);
  return proto::kExitOk;
}

}  // namespace

int run_job(const config::JobConfig& cfg, const RunOverrides& ov, Logger log) {
  return run_job(cfg, ov, std::move(log), JobFeeder{});
}

namespace {

// The error of `pending`'s check when it failed, else `rc`; `pending` is awaited.
int check_first(EntryCheck* pending, int rc) {
  if (pending == nullptr) return rc;
  if (auto r = pending->finish(); !r) return fail_with(r.error(), proto::kExitUsage);
  return rc;
}

// The run path of run_job and run_job_with_id. With `pending`, the entry-script check runs on
// while a local run's private interchange starts: its run folder and store are made first, the
// outputs claimed only once the check passed (settle_before_submit).
JobRun run_job_path(const config::JobConfig& cfg, const RunOverrides& ov, Logger log,
                    const JobFeeder& feed, EntryCheck* pending = nullptr) {
  std::error_code cwd_ec;
  RunPaths paths = plan_paths(cfg, ov,
                              RunFacts{.cwd = fs::current_path(cwd_ec).string(),
                                       .default_db = default_db_path(),
                                       .now = std::time(nullptr),
                                       .pid = static_cast<long>(::getpid())});
  RunSettings rs = run_settings(cfg, ov);
  // Only a local run overlaps the check: a batch system's pools are not started for a script
  // that may be refused, nor is a shared interchange's run folder made.
  if (pending != nullptr && (paths.shared || plan_launcher(rs) != LauncherKind::Local)) {
    if (int rc = check_first(pending, proto::kExitOk); rc != proto::kExitOk) return {rc, 0};
    pending = nullptr;
  }
  if (auto r = prepare_launcher(rs, cfg, ov); !r)
    return {fail_with(r.error(), proto::kExitUsage), 0};
  const MadeBeforeSubmit made(paths);
  if (pending == nullptr) {
    if (int rc = claim_outputs(cfg, ov, paths); rc != proto::kExitOk) return {rc, 0};
  }
  if (int rc = make_run_dirs(ov, paths); rc != proto::kExitOk) {
    if (pending != nullptr) made.remove(paths);
    return {check_first(pending, rc), 0};
  }
  proto::JobSpec spec = job_spec(cfg, paths.log_dir());
  spec.interchange_run_dir = paths.run_dir.empty();
  if (int rc = lay_out_model(cfg, paths, spec); rc != proto::kExitOk) {
    if (pending != nullptr) made.remove(paths);
    return {check_first(pending, rc), 0};
  }
  if (!ov.quiet && pending == nullptr) {
    for (const auto& n : cfg.notices) std::fprintf(stderr, "note: %s\n", n.c_str());
  }
  ProgressPrinter printer(ov.quiet  ? ProgressMode::Quiet
                          : ov.json ? ProgressMode::Json
                                    : ProgressMode::Human);
  const RunContext ctx{.cfg = cfg,
                       .ov = ov,
                       .rs = rs,
                       .paths = paths,
                       .spec = spec,
                       .printer = printer,
                       .allow_partial = ov.allow_partial || cfg.fanout.allow_partial,
                       .log = std::move(log),
                       .pending = pending,
                       .made = pending != nullptr ? &made : nullptr};
  Connection c;
  // 1. Submit the job and wait for its id. 2. Stream the input. 3. Follow the job to its end.
  if (int rc = connect_and_submit(ctx, c); rc != proto::kExitOk) {
    return {rc, c.session ? c.session->policy().job_id() : 0};
  }
  record_accepted(ctx, c);
  const bool empty_input =
      feed ? feed(*c.session, paths.db)
           : stream_and_follow(cfg, *c.session, own_paths(paths.db, paths.run_dir));
  const std::uint64_t job_id = c.session->policy().job_id();
  return {finish_run(ctx, c, empty_input), job_id};
}

}  // namespace

int run_job(const config::JobConfig& cfg, const RunOverrides& ov, Logger log,
            const JobFeeder& feed) {
  return run_job_path(cfg, ov, std::move(log), feed).exit_code;
}

int run_job(const config::JobConfig& cfg, const RunOverrides& ov, Logger log, EntryCheck pending) {
  return run_job_path(cfg, ov, std::move(log), JobFeeder{}, &pending).exit_code;
}

JobRun run_job_with_id(const config::JobConfig& cfg, const RunOverrides& ov, Logger log) {
  return run_job_path(cfg, ov, std::move(log), JobFeeder{});
}

namespace {

// One line of `fanout history`.
void print_history_row(const std::string& id, const std::string& name, const std::string& state,
                       double created, const std::string& batches, std::uint64_t items,
                       double seconds) {
  std::printf("%-6s %-24.24s %-10s %-20s %14s %10llu %9.1fs\n", id.c_str(), name.c_str(),
              state.c_str(), iso_utc(created).substr(0, 19).c_str(), batches.c_str(),
              static_cast<unsigned long long>(items), seconds);
}

// An experiment's runs as one row: its id, state, start, runs and items, and the time from its
// start to its last run's end (from the store: its runs beyond the list's limit count too).
void print_experiment_row(store::StoreReader& reader, const std::string& exp) {
  const auto row = reader.experiment(exp);
  if (!row) return;
  const double end = row->state == "running" || row->last_ended == 0 ? unix_now() : row->last_ended;
  print_history_row("exp", exp, row->state, row->created, fmt::format("{} runs", row->runs),
                    row->items_succeeded, end - row->created);
}

// The jobs of the history, newest first: `limit` rows once each experiment's runs are one row.
std::vector<store::JobSummary> history_rows(store::StoreReader& reader, std::size_t limit,
                                            const std::string& state) {
  for (std::size_t fetch = limit;; fetch *= 4) {
    auto jobs = reader.history(fetch, state);
    std::set<std::string> seen;
    std::size_t rows = 0, kept = 0;
    for (const auto& j : jobs) {
      if (rows == limit && limit != 0) break;
      ++kept;
      if (j.experiment.empty() || seen.insert(j.experiment).second) ++rows;
    }
    if (limit == 0 || rows == limit || jobs.size() < fetch) {
      jobs.resize(limit == 0 ? jobs.size() : kept);
      return jobs;
    }
  }
}

}  // namespace

int print_history(const std::string& db, std::size_t limit, const std::string& state, bool json,
                  const std::string& experiment) {
  try {
    store::StoreReader reader(db);
    auto jobs = experiment.empty() ? history_rows(reader, limit, state) : reader.history(0, state);
    if (!experiment.empty()) {
      std::erase_if(jobs, [&](const store::JobSummary& j) { return j.experiment != experiment; });
    }
    if (json) {
      auto out = nlohmann::ordered_json::array();
      for (const auto& j : jobs) {
        out.push_back(
            {{"id", j.id},
             {"name", j.name},
             {"state", j.state},
             {"reason", j.reason},
             {"created", j.created},
             // null while the job runs: it has no end yet.
             {"ended", j.ended > 0 ? nlohmann::ordered_json(j.ended) : nullptr},
             {"total", j.total},
             {"succeeded", j.succeeded},
             {"failed", j.failed},
             {"items_succeeded", j.items_succeeded},
             {"items_failed", j.items_failed},
             {"attempts", j.attempts},
             {"attempts_failed", j.attempts_failed},
             {"devices", reader.devices(j.id)},
             // The explore experiment the job was a run of; null for a job of its own.
             {"experiment", j.experiment.empty() ? nlohmann::ordered_json(nullptr)
                                                 : nlohmann::ordered_json(j.experiment)}});
      }
      const std::string text =
          out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    std::printf("%-6s %-24s %-10s %-20s %14s %10s %10s\n", "ID", "NAME", "STATE", "STARTED (UTC)",
                "MINI-BATCHES", "ITEMS", "DURATION");
    // An experiment's runs show as one row (newest first, where its newest run is), unless
    // --experiment asked for its runs.
    std::set<std::string> shown;
    for (const auto& j : jobs) {
      if (experiment.empty() && !j.experiment.empty()) {
        if (shown.insert(j.experiment).second) print_experiment_row(reader, j.experiment);
        continue;
      }
      const double end = j.ended > 0 ? j.ended : unix_now();
      print_history_row(std::to_string(j.id), j.name, j.state, j.created,
                        fmt::format("{}/{}", j.succeeded, j.total), j.items_succeeded,
                        end - j.created);
    }
    if (jobs.empty()) std::printf("(no jobs in %s)\n", db.c_str());
    if (!shown.empty()) {
      std::printf("(an experiment's runs: fanout history --experiment EXP)\n");
    }
    return 0;
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return proto::kExitUsage;
  }
}

}  // namespace fanout::client
