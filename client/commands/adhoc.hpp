// Ad-hoc runs without a job file, as GNU parallel users work:
//   fanout run -c 'gzip -k {}' --input DIR|LIST|-      fanout run -c 'echo {1}-{2}' ::: a b ::: 1 2
// The command line becomes a command-runtime job file (written beside the store and kept, so
// `fanout resume` and the store's history work as for any job), run through the same path. Its
// rows and stderr are shown as mini-batches finish. docs/adhoc.md lists what is supported.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::client {

// One GNU parallel input source: `::: values...`, `:::: files...` (their lines), and with `+`
// (`:::+`, `::::+`) linked to the source before it (the n-th values go together) instead of
// combined with it.
struct InputSource {
  std::vector<std::string> values{};
  bool linked = false;
  // Linked by --link: the shorter source wraps around. `:::+` stops at the shorter one (as GNU
  // parallel 20221122 does).
  bool wrap = false;
};

// --halt: when to stop the job early. GNU's `soon` and `now` both stop it at once here (the
// mini-batches running are cancelled).
struct HaltRule {
  enum class On { Never, Fail, Success, Done } on = On::Never;
  std::uint64_t count = 0;  // absolute count, or
  double percent = -1;      // a percentage of the items (>= 0 when given as P%)
};

// Parses GNU's --halt value: `never`, `soon|now,fail|success|done=N|P%`, or 0, 1, 2 (never,
// soon,fail=1, now,fail=1). Error{InvalidArgument} naming --halt and the value.
[[nodiscard]] Expected<HaltRule> parse_halt(const std::string& value);

struct AdhocOptions {
  std::string command{};  // -c: the command, with GNU parallel's replacement strings
  std::string input{};    // --input: a folder (its files), a list file (its lines), or - (stdin)
  std::vector<InputSource> sources{};  // ::: and :::: (instead of --input)
  std::string output{};  // --output: the rows file; empty or "-": rows to stdout as they come
  std::string name{};    // --name: the job's name (default: adhoc-<program>)
  std::uint64_t mini_batch_size = 1;  // items per mini-batch
  int max_retries = 0;                // retry_settings.max_retries (GNU: no retries)
  std::uint32_t timeout_s = 0;        // retry_settings.timeout per mini-batch; 0: none
  std::int64_t error_threshold = -1;  // failed items allowed; -1: run everything
  std::vector<std::string> env{};     // --env NAME=VALUE
  bool quote_all = false;             // -q
  bool keep_order = false;            // -k
  bool tag = false;                   // --tag
  bool dry_run = false;               // --dry-run
  std::string joblog{};               // --joblog FILE
  std::string results{};              // --results DIR
  std::string halt{};                 // --halt
  bool overwrite = false;             // --overwrite: an --output file with rows may be replaced
  // GNU parallel's ways of putting several values in one command line, and --pipe (the argv
  // pre-pass, adhoc_argv.hpp, reads them).
  std::int64_t max_args = -1;  // -N / -n: values per command line; -1: not given
  char multi = 0;              // 'm' (-m) or 'X' (-X): as many values per line as fit; 0: neither
  std::uint32_t jobs = 0;      // -j's count, which -m and -X share the values among; 0: the cores
  std::string colsep{};        // --colsep REGEX: each line's columns are {1}..{n}
  bool pipe = false;           // --pipe: chunks of stdin to each command's stdin
  std::string block{};         // --block SIZE: a --pipe chunk's size (default 1M)
};

// What an ad-hoc run wrote: the job file to run, the rows file to stream to stdout (empty when
// --output named a file), the file the commands' stderr is appended to, and what to stop on.
struct AdhocJob {
  std::string job_file{};
  std::string rows{};       // absolute path of the rows file (the job's append_row_to)
  bool print_rows = false;  // rows go to stdout
  std::string stderr_file{};
  std::uint64_t items = 0;  // known in advance (a list or :::); 0 also for an empty input
  bool items_known = false;
  HaltRule halt{};
  std::vector<std::string> dry_run{};  // --dry-run: the command lines, in input order
  bool precomputed = false;            // -m, -X, -N: each item is its whole command line
  std::size_t sources = 1;             // values per item (::: sources, --colsep columns)
  // Where the stream starts reading the rows and stderr files (a resumed job: their ends).
  std::uint64_t rows_from = 0, stderr_from = 0;
};

// Writes the job file into `folder` (made if missing); stdin (`--input -`) and ::: values are
// first saved there as the list of items. Errors name the option at fault.
[[nodiscard]] Expected<AdhocJob> write_adhoc_job(const AdhocOptions& o, const std::string& folder);

// Shows an ad-hoc job's output as it is made, on a thread of its own: stderr lines as they are
// appended; rows as mini-batches finish (with keep_order: in input order, each mini-batch's rows
// as soon as those before it are out, read through the store), each row once. When its --halt
// success/done rule is met, says so and halt_reason() names it (the session then ends the job;
// RunOverrides::halt). stop() prints what is left.
class AdhocStream final {
 public:
  AdhocStream(const AdhocJob& job, std::string db, bool keep_order);
  ~AdhocStream();
  AdhocStream(const AdhocStream&) = delete;
  AdhocStream& operator=(const AdhocStream&) = delete;

  // After the job ended: prints what is left, in order. Idempotent.
  void stop();
  // True when the job was stopped because its --halt success/done rule was met.
  [[nodiscard]] bool halted_on_success() const { return halted_ok_.load(); }
  // Why the job is to end early ("--halt success=1: 1 item succeeded"); "" until then. Any
  // thread.
  [[nodiscard]] std::string halt_reason() const {
    return halted_ok_.load(std::memory_order_acquire) ? halt_reason_ : std::string();
  }

 private:
  void loop();
  void poll(bool last);
  void poll_stderr();
  void poll_rows_unordered();
  void poll_rows_ordered(bool last);
  void check_halt();

  AdhocJob job_;
  std::string db_;
  bool keep_order_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> halted_ok_{false};
  bool halt_sent_ = false;
  std::string halt_reason_{};  // written once, before halted_ok_ is set
  std::uint64_t rows_at_ = 0, stderr_at_ = 0, next_batch_ = 0, job_id_ = 0;
  std::string row_tail_{}, stderr_tail_{};
  std::thread thread_{};
};

// For `fanout resume N` of an ad-hoc job whose rows went to stdout (its rows file is the one
// write_adhoc_job made beside the store): a stream that shows the rows and stderr lines the
// resumed mini-batches add, as the first run did; nullptr for any other job or an unreadable
// store (resume then says what is wrong).
std::unique_ptr<AdhocStream> adhoc_resume_stream(const std::string& db, std::uint64_t job_id);

// Writes GNU parallel's --joblog for the job that wrote `rows`: a header, then one line per item
// run (Seq Host Starttime JobRuntime Send Receive Exitval Signal Command). Error{Io} naming
// --joblog and the file.
[[nodiscard]] Expected<void> write_joblog(const std::string& db, const AdhocJob& job,
                                          const AdhocOptions& o);

// Rewrites an error about the generated job file into the user's own options: the file's path
// becomes "fanout run -c", its keys the options they came from (append_row_to: --output).
std::string adhoc_error(const std::string& message, const std::string& job_file);

}  // namespace fanout::client
