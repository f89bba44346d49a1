// The CSV side of a job report's one pass over its attempts (report_data()): each
// attempt becomes a line of processed_mini-batches.csv as it goes by, and is summed into the
// process and node summaries, formatted in C++ as SQLite would print the same values (round()
// to text, strftime('%Y-%m-%dT%H:%M:%fZ')), so no query formats or sorts a million rows.
// Files and columns: docs/store.md, section 8.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "fanout/store/report_source.hpp"
#include "fanout/util/atomic_file.hpp"

namespace fanout::report {

// round(x, digits) as SQLite prints it: "%.{digits}f", read back, then "%!.15g" (so 1 is
// "1.0").
[[nodiscard]] std::string sql_round_text(double x, int digits);
// strftime('%Y-%m-%dT%H:%M:%fZ', t, 'unixepoch') as SQLite computes it (milliseconds rounded).
[[nodiscard]] std::string sql_time_text(double unix_seconds);

class ReportPass final {
 public:
  // Writes the header of processed_mini-batches.csv to `processed`, which must outlive this.
  ReportPass(AtomicFile& processed, std::string_view processed_header, std::size_t first_errors);

  // One attempt, in id order.
  void add(const store::AttemptRow& a);
  // Writes what is buffered of processed_mini-batches.csv.
  void finish_processed();

  // The summaries' CSV text (header line included), ordered as docs/store.md says.
  [[nodiscard]] std::string process_summary(std::string_view header) const;
  [[nodiscard]] std::string node_summary(std::string_view header) const;
  // The first failed attempts, in id order.
  [[nodiscard]] const std::vector<store::FailedAttemptRow>& first_failed() const noexcept {
    return first_failed_;
  }

 private:
  struct Sums {
    std::uint64_t attempts = 0, ok = 0, failed = 0;
    std::int64_t items = 0, items_ok = 0, items_failed = 0;
    bool has_items = false, has_ok = false, has_failed = false;
    double elapsed = 0, cpu = 0, run = 0;
    std::uint64_t n_elapsed = 0, n_cpu = 0, n_run = 0;
    std::optional<double> first_start{}, last_end{};
    void add(const store::AttemptRow& a);
  };
  struct Node {
    std::set<std::string> pools{}, processes{};
    Sums sums{};
  };
  struct Process {
    std::string shown{};  // pool/process, or process
    std::set<std::int64_t> pids{};
    Sums sums{};
    std::string device{}, cpus{};  // the greatest seen, as the view's max()
    std::int64_t threads = 0;
    Node* node = nullptr;  // its entry of nodes_ (stable in a std::map); none without a node
  };
  // (node or nullopt, pool or nullopt, process)
  using ProcessKey =
      std::tuple<std::optional<std::string>, std::optional<std::string>, std::string>;
  // The same key viewing into an attempt's row, so finding a known process allocates nothing.
  using ProcessKeyView = std::tuple<std::optional<std::string_view>,
                                    std::optional<std::string_view>, std::string_view>;
  struct ProcessKeyLess {
    using is_transparent = void;
    static ProcessKeyView view(const ProcessKey& k) {
      const auto& [node, pool, process] = k;
      return {node ? std::optional<std::string_view>(*node) : std::nullopt,
              pool ? std::optional<std::string_view>(*pool) : std::nullopt, process};
    }
    static const ProcessKeyView& view(const ProcessKeyView& k) { return k; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return view(a) < view(b);
    }
  };

  // The process and node entries of an attempt with a process, made on its first attempt.
  Process& process_of(const store::AttemptRow& a);
  // sql_time_text(t) appended to buf_, the date and time to the second formatted once per
  // second rather than once per attempt.
  void append_time(double unix_seconds);

  AtomicFile& processed_;
  std::string buf_{};
  std::size_t first_errors_;
  std::vector<store::FailedAttemptRow> first_failed_{};
  std::map<ProcessKey, Process, ProcessKeyLess> processes_{};
  std::map<std::string, Node> nodes_{};
  std::int64_t time_second_ = 0;  // the second time_prefix_ shows; none while it is empty
  std::string time_prefix_{};     // "YYYY-MM-DDTHH:MM:SS."
};

}  // namespace fanout::report
