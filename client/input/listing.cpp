// Listing the files of tables. See listing.hpp.
#include "client/input/listing.hpp"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>

#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

// Lists `dir` recursively (regular files only), sorted by path, onto `out`.
void list_folder(const fs::path& dir, std::vector<std::string>& out) {
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2)) found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
}

Expected<std::vector<std::string>> list_table_files_all(const config::TableSpec& t);

// A folder is listed in runs of this many entries, each run sorted by name before it is
// emitted: a folder of up to kSortRun entries comes out fully sorted, and a huge one starts
// streaming after one run instead of after the whole listing (1,000,000 files take seconds to
// read). See docs/job-spec.md#inputs for the order guarantee.
constexpr std::size_t kSortRun = 65536;

// The folders a walk has entered, by device and inode, with the path each was first entered by.
using Visited = std::map<std::pair<dev_t, ino_t>, std::string>;

// One entry of a folder as readdir gave it: its name and its type (DT_*), which spares a stat
// per entry on file systems that fill it in.
struct DirEntry {
  std::string name;
  unsigned char type;
};

// "strerror (ENAME)" of `err`.
std::string errno_text(int err) {
  const char* name = ::strerrorname_np(err);
  return std::string(std::strerror(err)) + " (" + (name != nullptr ? name : "?") + ")";
}

// "PATH: call: strerror (ENAME)", for an entry the walk cannot use.
std::string refusal(const std::string& path, const char* call, int err) {
  return path + ": " + call + ": " + errno_text(err);
}

// The kind of a file that is neither a folder nor a regular file, for a refusal.
const char* odd_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// One walk: the folders entered, by device and inode, with the path each was first entered by,
// and what it reports besides files.
struct Walk {
  Visited visited;
  const std::function<bool(const std::string&)>& on_file;
  const std::function<void(const std::string&, const std::string&)>& on_repeat;
  const WalkHooks& hooks;

  void refuse(const std::string& path, const std::string& why) const {
    if (hooks.on_refused) hooks.on_refused(path, why);
  }
  // True when (dev, ino) is one of the job's own files or folders: then it is said and skipped.
  bool excluded(const std::string& path, const struct stat& st) const {
    if (hooks.excluded.empty() || !hooks.excluded.contains({st.st_dev, st.st_ino})) return false;
    if (hooks.on_excluded) hooks.on_excluded(path);
    return true;
  }
  bool enter(const std::string& dir);
  bool entry(const std::string& path, std::string_view name, unsigned char type);
};

// One entry of a folder: walked when a folder (following a link), listed when a regular file,
// else refused with why. Returns false when on_file asked to stop.
bool Walk::entry(const std::string& path, std::string_view name, unsigned char type) {
  if (type == DT_DIR) return enter(path);
  struct stat st {};
  const bool cheap_file = type == DT_REG && !hooks.excluded_names.contains(name);
  if (!cheap_file) {
    // stat, not lstat: a link counts as what it leads to.
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      struct stat lst {};
      if (err == ENOENT && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
        refuse(path, path + ": a symbolic link to nothing (stat: " + errno_text(err) + ")");
      } else {
        refuse(path, refusal(path, "stat", err));
      }
      return true;
    }
    if (S_ISDIR(st.st_mode)) return enter(path);
    if (excluded(path, st)) return true;
    if (!S_ISREG(st.st_mode)) {
      refuse(path, path + ": " + odd_kind(st.st_mode) + ", not a regular file");
      return true;
    }
  }
  return on_file(path);
}

// Enters `dir` unless it was entered before (then reports it and returns true). Read with
// readdir rather than std::filesystem: a directory_entry per name (a path parsed and copied, then
// its filename copied again) made a 100,000-file folder take 0.25 s to list, 5 times `ls -f`.
bool Walk::enter(const std::string& dir) {
  struct stat st {};
  // stat, not lstat: `dir` may be a link, and what counts is the folder it leads to.
  if (::stat(dir.c_str(), &st) != 0) {
    refuse(dir, refusal(dir, "stat", errno));  // a path past PATH_MAX, a parent not searchable
    return true;
  }
  if (excluded(dir, st)) return true;
  auto [it, fresh] = visited.emplace(std::make_pair(st.st_dev, st.st_ino), dir);
  if (!fresh) {
    on_repeat(dir, it->second);
    return true;
  }
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    refuse(dir, refusal(dir, "opendir", errno));
    return true;
  }
  // Paths are joined as std::filesystem::path's operator/ joins them.
  const std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + '/';
  std::vector<DirEntry> run;
  std::string path;
  auto flush = [&]() {
    std::sort(run.begin(), run.end(),
              [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    for (const auto& e : run) {
      path.assign(prefix).append(e.name);
      if (!entry(path, e.name, e.type)) return false;
    }
    run.clear();
    return true;
  };
  while (const dirent* e = ::readdir(d.get())) {
    const std::string_view name(e->d_name);
    if (name == "." || name == "..") continue;
    run.push_back(DirEntry{std::string(name), e->d_type});
    if (run.size() >= kSortRun && !flush()) return false;
  }
  return flush();
}

}  // namespace

bool walk_folder(const std::string& dir, const std::function<bool(const std::string&)>& on_file,
                 const std::function<void(const std::string&, const std::string&)>& on_repeat,
                 const WalkHooks& hooks) {
  Walk walk{{}, on_file, on_repeat, hooks};
  return walk.enter(dir);
}

bool walk_folder(const std::string& dir, const std::function<bool(const std::string&)>& on_file,
                 const std::function<void(const std::string&, const std::string&)>& on_repeat) {
  return walk_folder(dir, on_file, on_repeat, WalkHooks{});
}

config::TableSpec plain_table(const std::string& path, bool is_folder) {
  config::TableSpec t;
  t.source = path;
  if (!is_folder) {
    t.base_dir = fs::path(path).parent_path().string();
    t.paths.push_back(config::TablePath{"file", path, 0});
    if (fs::path(path).extension() == ".tsv") t.delimiter = "\t";
    return t;
  }
  // A folder is read as its *.csv files, or its *.tsv files when it has no .csv file: other
  // files (a README, an MLTable) are not rows.
  t.base_dir = path;
  std::vector<std::string> files;
  list_folder(path, files);
  const auto has = [&](const char* ext) {
    return std::any_of(files.begin(), files.end(),
                       [&](const std::string& f) { return fs::path(f).extension() == ext; });
  };
  const bool tsv = !has(".csv") && has(".tsv");
  t.paths.push_back(config::TablePath{"pattern", tsv ? "**/*.tsv" : "**/*.csv", 0});
  if (tsv) t.delimiter = "\t";
  return t;
}

Expected<std::vector<std::string>> list_table_files(const config::TableSpec& t) {
  std::vector<std::string> out;
  // The MLTable file is never one of its own table's files (a `folder: ./` or `pattern: ./*`
  // would otherwise list it).
  const fs::path self = fs::path(t.source).lexically_normal();
  const auto is_self = [&](const std::string& f) { return fs::path(f).lexically_normal() == self; };
  auto found_files = list_table_files_all(t);
  if (!found_files) return found_files;
  for (auto& f : *found_files) {
    if (!is_self(f)) out.push_back(std::move(f));
  }
  return out;
}

namespace {

Expected<std::vector<std::string>> list_table_files_all(const config::TableSpec& t) {
  std::vector<std::string> out;
  for (const auto& p : t.paths) {
    const std::string where = t.source +
                              (p.line > 0 ? ":" + std::to_string(p.line) : std::string()) +
                              ": paths: " + p.kind + ": ";
    const std::string got = "(got \"" + p.value + "\"";
    std::error_code ec;
    if (p.kind == "file") {
      if (!fs::is_regular_file(p.value, ec)) {
        return make_error(ErrorCode::NotFound,
                          where + "expected an existing file " + got + ", which does not exist)");
      }
      out.push_back(p.value);
    } else if (p.kind == "folder") {
      if (!fs::is_directory(p.value, ec)) {
        return make_error(ErrorCode::NotFound,
                          where + "expected an existing folder " + got + ", which does not exist)");
      }
      list_folder(p.value, out);
    } else {
      // Patterns are matched against paths relative to the base folder (or absolute ones).
      const bool absolute = !p.value.empty() && p.value.front() == '/';
      std::string pat = p.value;
      if (pat.rfind("./", 0) == 0) pat = pat.substr(2);
      // Walk only below the pattern's literal prefix.
      const std::string prefix = config::glob_prefix(pat);
      const std::string root = absolute ? "/" + prefix : resolve_path(t.base_dir, prefix);
      std::vector<std::string> all;
      if (fs::is_directory(root, ec)) list_folder(root, all);
      if (fs::is_regular_file(absolute ? pat : resolve_path(t.base_dir, pat), ec)) {
        all.push_back(absolute ? pat : resolve_path(t.base_dir, pat));
      }
      std::size_t found = 0;
      for (const auto& f : all) {
        std::string rel = absolute ? f : fs::path(f).lexically_relative(t.base_dir).string();
        if (config::glob_match(pat, rel)) {
          out.push_back(f);
          ++found;
        }
      }
      if (found == 0) {
        return make_error(ErrorCode::NotFound,
                          where + "expected a pattern matching at least one file " + got +
                              ", which matches none under " + t.base_dir + ")");
      }
    }
  }
  return out;
}

}  // namespace

}  // namespace fanout::client
