// The fanout client: runs a job (embedded or against a running interchange), and reads history
// from the store. main.cpp only parses the CLI and calls these. See README.md and docs/reports.md
// for the commands.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "client/launch/run_settings.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/expected.hpp"
#include "fanout/util/log.hpp"

namespace fanout::client {

// The default store path: $FANOUT_DB, else $XDG_DATA_HOME/fanout/fanout.db, else
// ~/.local/share/fanout/fanout.db.
std::string default_db_path();

// Applies overrides and checks what only a run can check (the interpreter exists, the entry
// script defines run()). Error{InvalidArgument} naming the file on failure.
[[nodiscard]] Expected<void> prepare(config::JobConfig& cfg, const RunOverrides& ov);

// The entry-script check of prepare(), started but not awaited: `fanout run` lets it run while
// its private interchange starts, and awaits it before anything is submitted or claimed.
class EntryCheck {
 public:
  EntryCheck() = default;  // nothing to check (not a run_function job, or already checked)
  // Waits for the check: the error prepare() would have returned for the entry script, if any.
  // Later calls return success.
  [[nodiscard]] Expected<void> finish();

 private:
  friend Expected<EntryCheck> prepare_started(config::JobConfig& cfg, const RunOverrides& ov);
  std::optional<ChildProcess> checker_{};
  std::string where_{};
};

// As prepare(), with the entry-script check left running (EntryCheck::finish awaits it). An error
// returned here is the one prepare() would return: a check that fails wins over a later error.
[[nodiscard]] Expected<EntryCheck> prepare_started(config::JobConfig& cfg, const RunOverrides& ov);

// Runs a prepared job to its end. Returns the process exit code: 0 succeeded, 1 failed or
// cancelled, 3 infrastructure failure (interchange died, could not start).
int run_job(const config::JobConfig& cfg, const RunOverrides& ov, Logger log);

// As run_job, for a job prepared by prepare_started: the check's error is reported as prepare()
// would (exit 2), after whatever the run had started or made meanwhile was stopped and removed.
int run_job(const config::JobConfig& cfg, const RunOverrides& ov, Logger log, EntryCheck pending);

class Session;
// What sends a job's mini-batches instead of listing its input (`fanout executor-serve`): called
// once the job is accepted, with the session and the store's path; it sends the mini-batches and
// SubmitEnd and follows the job until the session is over. Returns whether no mini-batch was sent.
using JobFeeder = std::function<bool(Session& session, const std::string& db)>;

// As run_job, with `feed` sending the mini-batches.
int run_job(const config::JobConfig& cfg, const RunOverrides& ov, Logger log,
            const JobFeeder& feed);

// A run's exit code and the id of the job it submitted (0 when none was accepted), so that a
// caller running several jobs on one store (`fanout explore`) knows which one was its own.
struct JobRun {
  int exit_code = 0;
  std::uint64_t job_id = 0;
};

// As run_job, returning the job's id too.
JobRun run_job_with_id(const config::JobConfig& cfg, const RunOverrides& ov, Logger log);

// Prints recent jobs. Returns an exit code.
// `experiment` non-empty: only that explore experiment's runs; else each experiment's runs are one
// row (`exp`).
int print_history(const std::string& db, std::size_t limit, const std::string& state, bool json,
                  const std::string& experiment = {});

}  // namespace fanout::client
