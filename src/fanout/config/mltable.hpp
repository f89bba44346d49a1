// Tabular input: what an Azure ML MLTable file says (its paths, each a file, folder or pattern,
// and its transformations), as one TableSpec; plain CSV/TSV inputs are described the same way by
// client/input/listing.hpp. Nothing here lists a folder. See docs/job-spec.md#tabular-input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/util/expected.hpp"

namespace fanout::config {

// One `paths:` entry of an MLTable file.
struct TablePath {
  std::string kind{};   // "file" | "folder" | "pattern"
  std::string value{};  // as written for patterns; absolute for files and folders
  int line = 0;         // where it was written (0: not from a file)
};

// What the table's rows are, as its MLTable file says.
enum class TableFormat {
  Delimited,  // a read_delimited transformation: rows of delimited text (plain CSV/TSV too)
  // No read_* transformation, only paths: Azure ML reads this as a table of files, and so does
  // fanout: each file is an item and mini_batch_size counts files (client/input/tabular.hpp).
  Files,
  JsonLines,  // a read_json_lines transformation: one JSON object per line
};

// A step that chooses rows (take, skip, take_random_sample). The client applies these, in order,
// as it cuts the table, so mini-batches hold only the rows they keep.
struct RowStep {
  enum class Kind { Take, Skip, Sample };
  Kind kind = Kind::Take;
  std::uint64_t count = 0;  // take, skip
  double probability = 0;   // take_random_sample
  std::uint64_t seed = 0;   // take_random_sample (0 when not written)
};

// Decides, row by row in table order, which rows a list of row steps keeps: each step sees only
// the rows the steps before it kept, as the mltable library applies them. Sampling is a
// Bernoulli draw per row from a hash of (seed, the row's position in the step's input), so the
// same seed keeps the same rows on every run. Not thread-safe.
class RowSelector final {
 public:
  explicit RowSelector(std::vector<RowStep> steps);
  // The next row: true when every step keeps it.
  bool keep();
  // True once a take step is full: no later row can be kept.
  [[nodiscard]] bool done() const noexcept { return done_; }

 private:
  std::vector<RowStep> steps_;
  std::vector<std::uint64_t> seen_;  // rows each step has been offered
  bool done_ = false;
};

// How a table is read. Every field has ParallelRunStep's / MLTable's default.
struct TableSpec {
  std::string source{};    // the MLTable file, or the CSV file/folder; for messages
  std::string base_dir{};  // relative paths and patterns resolve against it
  std::vector<TablePath> paths{};
  TableFormat format = TableFormat::Delimited;
  // read_delimited's options (their defaults when it is absent):
  std::string delimiter = ",";
  std::string encoding =
      "utf8";  // utf8, iso88591, latin1, ascii, utf16, utf32, utf8bom, windows1252
  // no_header | from_first_file | all_files_different_headers | all_files_same_headers
  std::string header = "all_files_same_headers";
  bool empty_as_string = false;
  bool include_path_column = false;  // adds a "Path" column holding the file's path
  // The column transformations:
  std::string partition_format{};  // extract_columns_from_partition_format, e.g. "{a}/{b}.csv"
  std::vector<std::string> drop_columns{};
  std::vector<std::string> keep_columns{};
  // read_json_lines: what an invalid line does, "error" (the mini-batch fails naming the file and
  // line) or "drop" (the line is left out).
  std::string invalid_lines = "error";
  std::vector<RowStep> row_steps{};
  // convert_column_types and filter, in file order, as the JSON list the worker applies to the
  // DataFrame after reading the rows (docs/worker-pipe.md, "column_steps"); "[]" when none.
  std::string column_steps = "[]";
};

// Reads an MLTable file (`path` is the file, or a folder holding a file named MLTable). Errors
// name the file, the line and the key: "data/MLTable:4: transformations[0].read_delimited.header:
// expected no_header, from_first_file, ... (got \"maybe\")". InvalidArgument, or NotFound when
// the file is missing.
[[nodiscard]] Expected<TableSpec> load_mltable(const std::string& path);
[[nodiscard]] Expected<TableSpec> parse_mltable(const std::string& text, const std::string& file);

// The MLTable file fanout writes into an `mltable` output folder when a job ends: when
// `row_file` (the append_row file) lies in `folder`, a read_delimited table over it with
// `separator` and, when `header`, a header row (else no_header); otherwise a table of the
// folder's files. Paths in it are relative to `folder`, so the folder can be moved.
std::string output_mltable_text(const std::string& folder, const std::string& row_file,
                                const std::string& separator, bool header);

// Glob matching on '/'-separated paths: `*` and `?` stay inside one path segment, `**` as a
// whole segment matches zero or more segments, `[abc]` a character class.
bool glob_match(std::string_view pattern, std::string_view path);

// The leading segments of a pattern that hold no wildcard, each followed by '/': "data/2024/"
// for "data/2024/*/x.csv", "" for "**/*.csv". Only files below it can match.
std::string glob_prefix(std::string_view pattern);

// Matches a path (relative to the table's base) against a partition format such as
// "{user}/{season}/{genre}.wav" (a leading '/' is ignored; {name} matches within one segment,
// `*` within one segment too). Returns the named values in format order, or an empty vector with
// ok=false when the path does not fit.
struct FormatMatch {
  bool ok = false;
  std::vector<std::pair<std::string, std::string>> values{};
};
FormatMatch match_partition_format(std::string_view format, std::string_view rel_path);
// The {names} of a partition format, in order.
std::vector<std::string> partition_format_keys(std::string_view format);

}  // namespace fanout::config
