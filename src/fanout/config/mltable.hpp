// Tabular input: Azure ML MLTable files (paths + read_delimited + column transformations) and
// plain CSV/TSV inputs, as one TableSpec. See docs/job-spec.md#tabular-input.
#pragma once

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

// How a table is read. Every field has ParallelRunStep's / MLTable's default.
struct TableSpec {
  std::string source{};    // the MLTable file, or the CSV file/folder; for messages
  std::string base_dir{};  // relative paths and patterns resolve against it
  std::vector<TablePath> paths{};
  std::string delimiter = ",";
  std::string encoding =
      "utf8";  // utf8, iso88591, latin1, ascii, utf16, utf32, utf8bom, windows1252
  // no_header | from_first_file | all_files_different_headers | all_files_same_headers
  std::string header = "all_files_same_headers";
  bool empty_as_string = false;
  bool include_path_column = false;  // adds a "Path" column holding the file's path
  std::string partition_format{};    // extract_columns_from_partition_format, e.g. "{a}/{b}.csv"
  std::vector<std::string> drop_columns{};
  std::vector<std::string> keep_columns{};
};

// Reads an MLTable file (`path` is the file, or a folder holding a file named MLTable). Errors
// name the file, the line and the key: "data/MLTable:4: transformations[0].read_delimited.header:
// expected no_header, from_first_file, ... (got \"maybe\")". InvalidArgument, or NotFound when
// the file is missing.
[[nodiscard]] Expected<TableSpec> load_mltable(const std::string& path);
[[nodiscard]] Expected<TableSpec> parse_mltable(const std::string& text, const std::string& file);

// A plain delimited file or folder of them (uri_file / uri_folder), every file with a header: a
// file is tab-separated when it ends in .tsv, else comma-separated; a folder is read as its
// *.csv files (recursively), or as its *.tsv files, tab-separated, when it has no .csv file.
TableSpec plain_table(const std::string& path, bool is_folder);

// The files a table reads, in a stable order: each `paths` entry in turn; a folder's files and a
// pattern's matches sorted by path. Error{NotFound} naming the entry (and its line) when a file
// or folder is missing or a pattern matches nothing.
[[nodiscard]] Expected<std::vector<std::string>> list_table_files(const TableSpec& t);

// Glob matching on '/'-separated paths: `*` and `?` stay inside one path segment, `**` as a
// whole segment matches zero or more segments, `[abc]` a character class.
bool glob_match(std::string_view pattern, std::string_view path);

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
