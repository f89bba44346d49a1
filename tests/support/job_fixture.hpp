// The job fixture of the integration tests: a job's YAML written from a few fields, the entry
// scripts most tests use, the counting job of the recovery tests, starting `fanout run` (embedded
// or against a started interchange) and the one check that every expected row came exactly once.
// Builds on harness.hpp (folders, binaries, Cluster); only integration tests include it. A test
// typically: make_counting_job() / make_echo_job() (or JobSpec + job_yaml() for other keys), then
// fanout_run() (to its end) or start_run() (in the background, with a Cluster for --interchange),
// then check_rows_once() and its own store queries. The Python twin is
// tests/integration/support.py.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace fanout::test {

// `fanout run <job> --db <db> --python <python_bin()> --quiet [extra...]`, against the
// interchange at `client_ep` (`--interchange`) or on the embedded default when it is "";
// without --db when `db` is "".
std::vector<std::string> run_argv(const std::string& job, const std::string& db,
                                  const std::string& client_ep,
                                  const std::vector<std::string>& extra = {});
// run_argv() started in the background with stdout to `<stem>.out` and stderr to `<stem>.err`.
[[nodiscard]] ChildProcess start_run(const std::string& job, const std::string& db,
                                     const std::string& client_ep, const std::string& stem,
                                     const std::vector<std::string>& extra = {});

// Heartbeat flags for an interchange or pool that notices a silent peer quickly: every 200 ms,
// lost after `threshold_ms`.
std::vector<std::string> fast_beats(const std::string& threshold_ms = "2000");

// sql_int(), or `fallback` while the store cannot be read yet (before an interchange made it).
long long sql_int_or(const std::string& db, const std::string& query, long long fallback = -1);

// Whether `text` contains `what`; how many times it does (overlapping matches count).
bool has(const std::string& text, const std::string& what);
std::size_t count_of(const std::string& text, const std::string& what);

// The peak resident memory (VmHWM) of process `pid` in kB, -1 when it cannot be read.
long long peak_rss_kb(int pid);

// The 1-based number of the first line of `text` that contains `what` (0 when none), for
// checking that an error names the line of a key in a YAML the test wrote.
std::size_t line_of(const std::string& text, const std::string& what);

// The "error: ..." line of a command's stderr ("" when none).
std::string error_line(const std::string& err);

// The mini-batches of the store `db` in state succeeded (all jobs).
long long succeeded(const std::string& db);
// Whether job 1's submission is complete in the store and at least `done` of its mini-batches
// succeeded: the point where a recovery test may kill everything.
bool submitted_and_done(const std::string& db, long long done);

// Whether the pool `name` is connected, by the store (one pools row in state connected).
bool pool_connected(const std::string& db, const std::string& name);

// SIGKILLs every process in `procs`, then waits for each (10 s at most).
void kill_all(std::initializer_list<ChildProcess*> procs);

// Every expected row exactly once: `out` holds `n` lines and no line twice (for jobs whose `n`
// items each return one row of their own).
void check_rows_once(const std::string& out, std::size_t n);
// Every expected row exactly once, by name: `out` holds as many lines as `expected` and each
// expected row appears once (so nothing else appears either).
void check_rows_once(const std::string& out, const std::vector<std::string>& expected);

// Every regular file under `dir` (recursively) whose path ends with `suffix`, sorted.
std::vector<std::string> files_ending(const std::string& dir, const std::string& suffix);

// How many files under `dir` (recursively) have ".tmp" in their name: the temporaries a writer
// killed mid-way leaves.
std::size_t temporaries_under(const std::string& dir);

// The names make_files() gives its `n` files: file00000.txt, file00001.txt, ...
std::vector<std::string> file_names(unsigned n);

// The task block most jobs run: the Python run_function of ./src/score.py.
inline constexpr const char* kRunFunctionTask =
    "  type: run_function\n  code: ./src\n  entry_script: score.py\n";

// A job file from a few fields. Optional keys left empty are not written, so the product's
// defaults apply; `top` and `task_extra` are the escape hatch for any other key.
struct JobSpec {
  std::string name = "job";
  std::string data = "./data";            // inputs.files.path
  std::string input_type = "uri_folder";  // inputs.files.type
  std::string output = "./out.txt";       // outputs.<output_key>.path, rows appended; "": none
  std::string output_key = "out";
  std::string mini_batch_size = "1";
  std::optional<int> instance_count;   // resources.instance_count
  std::optional<int> concurrency = 2;  // max_concurrency_per_instance
  std::optional<int> max_retries;      // retry_settings, written when either is set
  std::optional<int> timeout_s;
  EnvList env;  // environment_variables
  // More top-level YAML, whole lines each ending in '\n' (for example "error_threshold: 5\n").
  std::string top;
  // The lines under `task:` before append_row_to (two-space indented).
  std::string task = kRunFunctionTask;
  std::string program_arguments;  // written quoted when not empty
  std::string task_extra;         // more lines under `task:`, two-space indented
};
std::string job_yaml(const JobSpec& spec);

// Entry scripts. echo_script: sleeps `nap` seconds when not "" and returns each item's file
// name as a row.
std::string echo_script(const std::string& nap = "");
// fail_on_script: as echo_script, but a mini-batch holding an item whose path contains
// `fragment` raises ValueError(`message` + the name of its first item) on every try.
std::string fail_on_script(const std::string& fragment, const std::string& nap = "",
                           const std::string& message = "cannot score ");
// The head of a script that fails some items on their first try only: `first_try(tag)` is true
// the first time it is called with `tag` in the job (a marker file in $MARKERS says so), and
// MARKERS is that folder. A script is this text followed by its own imports and run().
inline constexpr const char* kFirstTryPy = R"PY(
import os
MARKERS = os.environ["MARKERS"]
def first_try(tag):
    path = os.path.join(MARKERS, tag)
    if os.path.exists(path):
        return False
    open(path, "w").close()
    return True
)PY";
// Returns each mini-batch unchanged (its items' paths are its rows).
inline constexpr const char* kPassThroughScript = "def run(mini_batch):\n    return mini_batch\n";

// An echo job in `folder`: `files` inputs in folder/data, echo_script(nap) as
// folder/src/score.py and job_yaml(spec) as folder/job.yaml.
void make_echo_job(const std::string& folder, unsigned files, const JobSpec& spec,
                   const std::string& nap = "");

// A job in `folder` running `script` (kFirstTryPy and its own run()) over `files` inputs, one
// per mini-batch, with 3 tries of at most `timeout_s` s each; its markers go to folder/markers
// ($MARKERS, made empty), its rows to folder/out.txt.
void make_first_try_job(const std::string& folder, const std::string& name, unsigned files,
                        const std::string& script, int timeout_s);

// The counting job's spec: counting_job_yaml() as fields, for a test that changes one.
JobSpec counting_job_spec(const std::string& name, const std::string& runs, const std::string& nap);

// The counting job in `folder`: `files` inputs in folder/data, kCountingScript as
// folder/src/score.py, and folder/job.yaml (counting_job_yaml() named `name`, its runs logged
// to folder/runs.txt, each run napping `nap` s) followed by `yaml_more`. Rows go to
// folder/out.txt.
void make_counting_job(const std::string& folder, const std::string& name, unsigned files,
                       const std::string& nap, const std::string& yaml_more = "");

}  // namespace fanout::test
