// fanout status and fanout report. See status.hpp.
#include "client/commands/status.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "client/session/liveness.hpp"

#include "client/launch/recorded_jobs.hpp"
#include "client/launch/slurm_launcher.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/report/job_report.hpp"
#include "fanout/report/status_text.hpp"
#include "fanout/store/job_status.hpp"
#include "fanout/store/report_queries.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace {

// For a job the store holds as running: whether its interchange still runs, so a dead job does
// not look alive (counts and an ETA are all the store can give). nullopt for any other job.
std::optional<InterchangeLiveness> liveness_of(const store::JobStatus& s) {
  if (s.state != "running" || s.log_dir.empty()) return std::nullopt;
  return interchange_liveness_in(std::filesystem::path(s.log_dir).parent_path().string());
}

// The same for --json (report::format_status_json).
std::optional<report::InterchangeStatus> json_liveness(
    const std::optional<InterchangeLiveness>& l) {
  if (!l) return std::nullopt;
  using State = InterchangeLiveness::State;
  return report::InterchangeStatus{.state = l->state == State::Alive  ? "alive"
                                            : l->state == State::Dead ? "dead"
                                                                      : "unknown",
                                   .pid = l->pid,
                                   .host = l->host,
                                   .started = l->started};
}

// Whether job `id` is a fanout.Executor's (python/fanout/executor.py): its entry script is the
// package's. Its calls were never written to a file, so it cannot be resumed.
bool executor_job(const std::string& db, std::uint64_t id) {
  try {
    store::ReportSource src(db);
    return std::filesystem::path(store::read_report_job(src, id).entry).filename() ==
           "fanout_executor_entry.py";
  } catch (const Failure&) {
    return false;
  }
}

std::string interchange_line(const store::JobStatus& s, const std::string& db,
                             const std::optional<InterchangeLiveness>& live) {
  if (!live) return {};
  const auto& l = *live;
  switch (l.state) {
    case InterchangeLiveness::State::Dead:
      if (executor_job(db, s.id)) {
        return fmt::format(
            "interchange: NOT RUNNING (pid {} on {} exited); the job is stalled: a "
            "fanout.Executor's job cannot be resumed (its calls were never written to a file); "
            "end it with: fanout cancel {} --db {}\n",
            l.pid, l.host, s.id, db);
      }
      return fmt::format(
          "interchange: NOT RUNNING (pid {} on {} exited); the job is stalled: finish it with: "
          "fanout resume {} --db {}\n",
          l.pid, l.host, s.id, db);
    case InterchangeLiveness::State::Alive:
      return fmt::format("interchange: running (pid {} on {})\n", l.pid, l.host);
    default:
      if (l.pid != 0) {
        return fmt::format(
            "interchange: pid {} on {} (not checked from {}; fanout wait {} shows "
            "whether it answers)\n",
            l.pid, l.host.empty() ? "an unknown host" : l.host, host_name(), s.id);
      }
      return {};
  }
}

// A job whose interchange is gone, as the store shows it without what only a live interchange
// could make true: nothing runs (its running mini-batches run again on resume), no pool is
// connected, no ETA.
store::JobStatus stalled_view(store::JobStatus s) {
  s.state = "stalled";
  s.reason = "its interchange is not running";
  s.pending += s.running;
  s.running = 0;
  s.eta_s = -1;
  for (auto& p : s.pools) {
    if (p.state == "connected") p.state = "gone with the interchange";
  }
  return s;
}

}  // namespace

int print_status(const std::string& db, std::uint64_t job_id, bool json) {
  auto s = store::read_job_status(db, job_id);
  if (!s) {
    std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
    return proto::kExitUsage;
  }
  const auto live = liveness_of(*s);
  if (json) {
    // The state stays the store's; the counts and ETA are those of a stalled job.
    store::JobStatus shown = *s;
    if (live && live->state == InterchangeLiveness::State::Dead) {
      shown = stalled_view(*s);
      shown.state = s->state;
      shown.reason = s->reason;
    }
    std::string out = report::format_status_json(shown, json_liveness(live));
    // A scheduler launcher's pool jobs as one more key; Slurm's also as slurm_jobs, as before
    // (docs/cluster.md).
    if (auto pos = out.rfind('}'); !s->log_dir.empty() && pos != std::string::npos) {
      const auto run_dir = std::filesystem::path(s->log_dir).parent_path().string();
      if (auto keys = pool_jobs_json_keys(run_dir); !keys.empty()) out.insert(pos, "," + keys);
    }
    std::fputs(out.c_str(), stdout);
  } else {
    const bool dead = live && live->state == InterchangeLiveness::State::Dead;
    // A dead interchange comes first, and nothing below claims the job is alive.
    if (dead) std::fputs(interchange_line(*s, db, live).c_str(), stdout);
    std::fputs(report::format_status_text(dead ? stalled_view(*s) : *s).c_str(), stdout);
    // A scheduler launcher's pool jobs, as the scheduler sees them now (docs/cluster.md).
    if (!s->log_dir.empty()) {
      auto line = pool_jobs_status_line(std::filesystem::path(s->log_dir).parent_path().string());
      if (!line.empty()) std::printf("pools:    %s\n", line.c_str());
    }
    if (!dead) std::fputs(interchange_line(*s, db, live).c_str(), stdout);
  }
  return 0;
}

int write_report(const std::string& db, std::uint64_t job_id, const std::string& out_dir) {
  std::string dir = out_dir;
  if (dir.empty()) {
    auto s = store::read_job_status(db, job_id);
    if (!s) {
      std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
      return proto::kExitUsage;
    }
    if (s->log_dir.empty()) {
      std::fprintf(stderr, "error: %s: job %llu has no logs folder recorded; give --out DIR\n",
                   db.c_str(), static_cast<unsigned long long>(job_id));
      return proto::kExitUsage;
    }
    dir = s->log_dir;
  }
  auto files = report::write_job_report(db, job_id, dir);
  if (!files) {
    std::fprintf(stderr, "error: %s\n", files.error().message.c_str());
    return files.error().code == ErrorCode::Io ? proto::kExitFailed : proto::kExitUsage;
  }
  std::printf("report of job %llu written to %s:\n", static_cast<unsigned long long>(job_id),
              dir.c_str());
  for (const auto& f : *files) std::printf("  %s\n", f.c_str());
  return 0;
}

}  // namespace fanout::client
