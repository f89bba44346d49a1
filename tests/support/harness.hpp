// Integration-test support: temporary folders, running the real binaries, waiting without bare
// sleeps, and reading the SQLite store. Paths of the binaries come from environment variables
// that tests/meson.build sets (FANOUT_BIN, FANOUT_INTERCHANGE_BIN, FANOUT_POOL_BIN).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fanout/util/child_process.hpp"

namespace fanout::test {

// A fresh folder under $TMPDIR, removed at destruction unless FANOUT_KEEP_TMP is set.
class TempDir final {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

std::string env_or(const char* name, const std::string& fallback);
std::string fanout_bin();
std::string interchange_bin();
std::string pool_bin();
// The Python interpreter for tests: $FANOUT_TEST_PYTHON, else python3.
std::string python_bin();

void write_file(const std::string& path, const std::string& text);
std::string read_text(const std::string& path);  // "" if missing
std::vector<std::string> read_lines(const std::string& path);
std::string tail(const std::string& path, std::size_t lines = 30);

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Starts `argv` with stdin from /dev/null, stdout to `out` and stderr to `err` (the same file for
// both is fine), with `env` added to this process's environment. Does not wait. Throws
// std::runtime_error, naming the program, when it cannot be started.
[[nodiscard]] ChildProcess spawn(const std::vector<std::string>& argv, const std::string& out,
                                 const std::string& err, const EnvList& env = {});

// Runs a command to completion with stdout and stderr captured to files under `dir`.
struct RunResult {
  ExitStatus status{};
  std::string out;
  std::string err;
};
RunResult run_capture(const std::vector<std::string>& argv, const std::string& dir,
                      const std::vector<std::pair<std::string, std::string>>& env = {},
                      std::chrono::seconds timeout = std::chrono::seconds(300));

// `fanout run <dir>/<job> --db <db> --python <python_bin()> --quiet [extra...]` on the embedded
// default, run to completion in `dir` (the form most integration tests use).
RunResult fanout_run(const TempDir& dir, const std::string& job, const std::string& db,
                     const std::vector<std::string>& extra = {},
                     std::chrono::seconds timeout = std::chrono::seconds(240));

// Polls `pred` every few ms until true or `timeout`; returns its last value.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

// Runs a query on a SQLite file and returns the first column of each row as text.
std::vector<std::string> sql_column(const std::string& db, const std::string& query);
// First row, first column, as an integer (-1 when there is no row).
long long sql_int(const std::string& db, const std::string& query);

// The key folder of the clusters this test process starts (tcp:// endpoints are Curve-encrypted,
// docs/security.md): $FANOUT_KEYS when set, else a folder made once (interchange, client and
// pool keys, plus a key `peer` authorised on both ports for RawDealer) and exported as
// $FANOUT_KEYS, so that every interchange, pool and client the test starts finds it.
const std::string& test_keys_dir();

// Reads "key=value" lines written by --ready-file.
std::map<std::string, std::string> read_ready_file(const std::string& path);

// A standalone interchange (and helpers to start pools) for tests that use --interchange.
struct Cluster {
  ChildProcess interchange;
  std::string client_ep;
  std::string pool_ep;
  std::string ix_log;
  std::vector<ChildProcess> pools;
  std::vector<std::string> pool_logs;
  // Starts the interchange on `db`, waiting for its ready file. Throws on failure.
  void start_interchange(const std::string& dir, const std::string& db,
                         const std::vector<std::string>& extra = {});
  // Starts a new interchange on `db` bound to the same client and pool endpoints as the last one
  // (after that one died or was killed), so that its clients and pools find it again.
  void restart_interchange(const std::string& dir, const std::string& db,
                           std::vector<std::string> extra = {});
  // Starts one pool connected to pool_ep.
  void start_pool(const std::string& dir, const std::string& name, unsigned workers,
                  const std::vector<std::string>& extra = {});
  std::string logs() const;  // tails of every log, for failure messages
};

// The entry script of the recovery tests: each run appends its file's name to the file named by
// $RUNS (so a mini-batch that ran twice shows), sleeps $NAP seconds (default 0.2) and returns
// the name as its one row.
extern const char* const kCountingScript;
// A job named `name` over ./data, one file per mini-batch, running ./src/score.py (write
// kCountingScript there) on 2 workers with 4 tries, rows into ./out.txt, RUNS=`runs`, NAP=`nap`.
// Written by job_fixture.cpp's job_yaml(); make_counting_job() writes the whole job.
std::string counting_job_yaml(const std::string& name, const std::string& runs,
                              const std::string& nap);

// Makes a folder of n small text files ("file00000.txt" ...) each holding its own name.
void make_files(const std::string& dir, unsigned n);

}  // namespace fanout::test
