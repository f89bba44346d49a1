// BatchLauncher: what the scheduler launchers (Slurm, Grid Engine, PBS, LSF, HTCondor) share: the
// pool jobs submitted, their states as the scheduler last reported them, one "pool jobs:" line
// whenever a state changes, replacements within --max-nodes, and the bounded release. Each
// scheduler supplies only its commands and its reading of states through the hooks below.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/launch/elastic.hpp"
#include "client/launch/launcher.hpp"
#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::client {

// What a scheduler command printed and how it ended.
struct CommandOutput {
  ExitStatus status{};
  std::string out{}, err{};
};

// Runs a scheduler command, its output captured in files of `dir` named after this process (stdin
// from `stdin_file`, else /dev/null); a command that hangs (the scheduler's server unreachable) is
// stopped after 30 s.
// A command that cannot be started ends with code 127 and the reason in `err`.
[[nodiscard]] CommandOutput run_command(const std::vector<std::string>& argv,
                                        const std::string& dir, const std::string& stdin_file = {});

// Writes a job script at `path`, executable by its owner; throws Failure when it cannot.
void write_script(const std::string& path, const std::string& text);

// Pool jobs of one fanout job, in <run_dir>/<scheduler folder>/ with job_ids (one submitted id
// a line). Not thread-safe; owned by Embedded. A subclass's destructor calls release() unless
// detached (the hooks are gone by the time this class's destructor runs).
class BatchLauncher : public Launcher {
 public:
  struct Options {
    config::LauncherSettings launch{};
    std::uint32_t nodes = 1;  // pool jobs at the start (after defaults)
    std::string job_name{};
    std::string run_dir{};
    bool quiet = false;  // no "pool jobs:" lines on stderr
  };
  // Files go to <run_dir>/<folder>/; `script` is the file submitted (named in the log), and a
  // job just submitted is in state `submitted_state` until the scheduler reports it.
  BatchLauncher(Options opts, Logger log, const std::string& folder, const std::string& script,
                std::string submitted_state);
  BatchLauncher(const BatchLauncher&) = delete;
  BatchLauncher& operator=(const BatchLauncher&) = delete;

  void start(const PoolCommand& pool, std::uint32_t blocks) override;
  std::string poll() override;
  void release() override;
  void detach() override { detached_ = true; }
  // Elastic pool jobs (docs/cluster.md, section 6): every 5 s at most, elastic::decide() on the
  // load, and its pool jobs submitted or released. Records the pool jobs (pool_jobs) either way.
  void observe(const Load& load) override;
  [[nodiscard]] std::string release_command() const override;

  // For `fanout status` and `fanout cancel` (client/launch/recorded_jobs.hpp): takes the pool
  // jobs a run recorded in job_ids and asks the scheduler once (a job it does not list has
  // ended; when it cannot be asked, every job is taken as live). False when none is recorded.
  bool adopt_recorded();
  // The jobs and their states as the "pool jobs:" line shows them ("sge job 12 r, 13 GONE").
  [[nodiscard]] std::string status_line() const { return describe(); }
  // The adopted jobs by id as submitted, with their states ("" once ended).
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> job_states() const;
  // Whether release() would cancel a job in `state`.
  [[nodiscard]] bool holds_node(const std::string& state) const { return holds(state); }

 protected:
  // Where the message that every pool job ended differs between schedulers.
  struct EndNote {
    std::string advice{};  // right after "allows no replacement" (Slurm's walltime advice)
    std::string output{};  // after "pool logs under <run_dir>/logs/sys/node/, "
  };

  [[nodiscard]] bool detached() const { return detached_; }

  // Writes the files a pool job is submitted with.
  virtual void write_scripts(const PoolCommand& pool) = 0;
  // Submits one pool job and returns its id; throws Failure with the scheduler's message.
  [[nodiscard]] virtual std::string submit_job() = 0;
  // The states of the submitted jobs by id as submitted (a job said to have ended maps to "";
  // one left out is concluded ended only after two refreshes in a row); nullopt when the
  // scheduler could not be asked (then nothing is concluded).
  [[nodiscard]] virtual std::optional<std::map<std::string, std::string>> query_states() = 0;
  // Whether a job in `state` still holds (or will hold) a node.
  [[nodiscard]] virtual bool is_active(const std::string& state) const = 0;
  // Whether release() cancels a job in `state` and waits for it to leave; is_active by default.
  [[nodiscard]] virtual bool holds(const std::string& state) const { return is_active(state); }
  // The jobs and their states, for the "pool jobs:" line.
  [[nodiscard]] virtual std::string describe() const = 0;
  // The command that cancels `ids` (its argv[0] alone is the program release_command names).
  [[nodiscard]] virtual std::vector<std::string> cancel_command(
      const std::vector<std::string>& ids) const = 0;
  // What a failed cancel is logged as ("scancel: <error>").
  [[nodiscard]] virtual std::string cancel_label() const;
  // The scheduler's part of the message that every pool job ended; nullopt to wait a while
  // longer (so the message can say why they ended).
  [[nodiscard]] virtual std::optional<EndNote> end_note() = 0;
  // The command that asks job `id`'s pools to drain and leave (the job then ends by itself);
  // empty: none, the job is cancelled at once.
  [[nodiscard]] virtual std::vector<std::string> drain_command(const std::string& id) const {
    (void)id;
    return {};
  }
  // Whether the pool named `pool` (Register.pool_name) runs in job `id`: by default, `id`
  // appears in the name between characters that are not digits.
  [[nodiscard]] virtual bool runs_in(const std::string& pool, const std::string& id) const;

  Options o_;
  Logger log_;
  slurm::BlockPolicy policy_;
  std::string dir_, script_, ids_file_;
  std::vector<std::string> ids_{};
  std::map<std::string, std::string> states_{};  // by id as submitted

 private:
  void submit();
  // Asks the scheduler (every few seconds at most) and reports a change of states.
  void refresh(bool now);
  [[nodiscard]] std::uint32_t count(bool (BatchLauncher::*pred)(const std::string&) const) const;

  // One pool job as pool_jobs records it (docs/store.md).
  struct Record {
    double submitted = 0, started = 0, ended = 0;            // Unix seconds; 0: not yet
    std::string reason{};                                    // end_reason, once ended
    std::string last_state{};                                // as last reported while active
    bool released = false;                                   // drained by the scaling decision
    Clock::time_point cancel_at = Clock::time_point::max();  // released: cancelled then
    bool dirty = true;                                       // not written since it changed
  };
  // Notes in records_ the jobs that started or ended since the last call.
  void note_states();
  [[nodiscard]] std::string end_reason(const Record& r, const std::string& state) const;
  // poll() with elastic pool jobs: cancels released jobs that outstay their drain; the "every
  // pool job ended" message only once failed pool jobs have spent max_nodes.
  [[nodiscard]] std::string poll_elastic();
  void scale(const Load& load);
  // Unix seconds since when every pool of job `id` has been idle; 0 while one is not.
  [[nodiscard]] double idle_since(const std::string& id, const Load& load, double now) const;
  void release_one(const std::string& id);
  void cancel_one(const std::string& id);
  // Pool jobs that ended without being released (they count against max_nodes).
  [[nodiscard]] std::uint32_t spent() const;
  [[nodiscard]] std::uint32_t serving() const;  // active and not released
  [[nodiscard]] std::string all_ended(const EndNote& note) const;
  // Writes the records changed since the last call (once the job's id and store are known).
  void write_records();

  bool elastic_ = false;
  elastic::Settings es_{};
  std::map<std::string, Record> records_{};
  std::uint64_t job_id_ = 0;
  std::string db_{};
  Clock::time_point next_decision_{};
  bool record_warned_ = false;
  std::string submitted_state_;
  std::map<std::string, int> missing_{};  // refreshes in a row that did not list the job
  Clock::time_point next_refresh_{};
  std::string shown_{};
  bool detached_ = false;
  bool released_ = false;
};

}  // namespace fanout::client
