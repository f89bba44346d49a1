// The file-system half of tabular input: the files a table's paths name (a folder's files, a
// pattern's matches), and plain CSV/TSV inputs described as tables. config/mltable.hpp says what
// an MLTable file says; this lists what it names. See docs/job-spec.md#tabular-input.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fanout/config/mltable.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// A plain delimited file or folder of them (uri_file / uri_folder), every file with a header: a
// file is tab-separated when it ends in .tsv, else comma-separated; a folder is read as its
// *.csv files (recursively), or as its *.tsv files, tab-separated, when it has no .csv file
// (which this lists the folder to find out).
config::TableSpec plain_table(const std::string& path, bool is_folder);

// The files a table reads, in a stable order: each `paths` entry in turn; a folder's files and a
// pattern's matches sorted by path. Error{NotFound} naming the entry (and its line) when a file
// or folder is missing or a pattern matches nothing.
[[nodiscard]] Expected<std::vector<std::string>> list_table_files(const config::TableSpec& t);

// Walks `dir` recursively, following symbolic links to folders, and calls `on_file` with the
// path of each regular file (or link to one), each folder's entries in name order (a folder of
// more than 65,536 entries in sorted runs of that many, so a huge folder starts streaming before
// it is fully read). A folder reached a second time (the same device and inode: a link to the
// folder itself or to one above it, or a second link to one folder) is not walked again, so a
// link loop cannot make the listing endless and each file is listed once; `on_repeat` is called
// once for each such entry with its path and the path the folder was first listed under.
// Returns false as soon as `on_file` returns false (to stop early), else true.
bool walk_folder(
    const std::string& dir, const std::function<bool(const std::string&)>& on_file,
    const std::function<void(const std::string& entry, const std::string& first)>& on_repeat);

}  // namespace fanout::client
