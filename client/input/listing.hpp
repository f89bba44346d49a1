// The file-system half of tabular input: the files a table's paths name (a folder's files, a
// pattern's matches), and plain CSV/TSV inputs described as tables. config/mltable.hpp says what
// an MLTable file says; this lists what it names. See docs/job-spec.md#tabular-input.
#pragma once

#include <sys/types.h>

#include <functional>
#include <set>
#include <string>
#include <utility>
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

// What walk_folder() reports besides files, and what it leaves out.
struct WalkHooks {
  // An entry that is neither a regular file nor a folder to walk, with why, as
  // "PATH: call: strerror (ERRNO)" or "PATH: a FIFO, not a regular file": a folder it cannot
  // open or stat (EACCES, ENAMETOOLONG past PATH_MAX, ...), a link to nothing, a FIFO, socket or
  // device. Null: such entries are skipped without a word.
  std::function<void(const std::string& path, const std::string& why)> on_refused{};
  // Files and folders (device, inode) never listed: the job's own store, output and logs, which
  // a link (`ln -s .. data/up`) can bring under its input folder. `on_excluded` is told each
  // path left out that way (may be null).
  // Files are looked up only when their name is in `excluded_names` (a stat per file would slow
  // a large listing); folders always.
  std::set<std::pair<dev_t, ino_t>> excluded{};
  std::set<std::string, std::less<>> excluded_names{};
  std::function<void(const std::string& path)> on_excluded{};
};

// walk_folder() with `hooks`: every entry met is a file (`on_file`), a folder walked, a folder
// met again (`on_repeat`), a refusal (`hooks.on_refused`) or one of the job's own
// (`hooks.on_excluded`); none is dropped without a word when the hooks are set.
bool walk_folder(
    const std::string& dir, const std::function<bool(const std::string&)>& on_file,
    const std::function<void(const std::string& entry, const std::string& first)>& on_repeat,
    const WalkHooks& hooks);

}  // namespace fanout::client
