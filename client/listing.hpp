// The file-system half of tabular input: the files a table's paths name (a folder's files, a
// pattern's matches), and plain CSV/TSV inputs described as tables. config/mltable.hpp says what
// an MLTable file says; this lists what it names. See docs/job-spec.md#tabular-input.
#pragma once

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

}  // namespace fanout::client
