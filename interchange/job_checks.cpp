// Job spec checks. See job_checks.hpp.
#include "interchange/job_checks.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <string>

namespace fanout::ix {

Expected<void> check_job_spec(const proto::JobSpec& spec) {
  namespace fs = std::filesystem;
  auto bad = [](const std::string& field, const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "SubmitJob: " + field + ": " + what);
  };
  if (spec.name.empty()) return bad("name", "must not be empty");
  if (spec.runtime != "python" && spec.runtime != "command" && spec.runtime != "native") {
    return bad("runtime", "expected python, command or native (got '" + spec.runtime + "')");
  }
  if (spec.max_tries == 0) return bad("max_tries", "must be >= 1");
  // fs::path only parses here: nothing touches the file system.
  if (!fs::path(spec.code_dir).is_absolute()) {
    return bad("code_dir", "expected an existing absolute folder (got '" + spec.code_dir + "')");
  }
  if (!spec.log_dir.empty() && !fs::path(spec.log_dir).is_absolute()) {
    return bad("log_dir", "expected an absolute path (got '" + spec.log_dir + "')");
  }
  if (!spec.output_path.empty()) {
    const fs::path out(spec.output_path);
    if (!out.is_absolute() || !out.has_filename()) {
      return bad("output_path", "expected an absolute file path (got '" + spec.output_path + "')");
    }
  }
  return {};
}

namespace {

// Whether two output paths name one file: the same device and inode when both exist (links,
// `..` and hard links seen through), else the same place once their links are followed
// (resolve_for_write), else the same lexically normalised spelling.
bool same_output(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  auto ra = resolve_for_write(a);
  auto rb = resolve_for_write(b);
  if (ra && rb) return *ra == *rb;
  return std::filesystem::path(a).lexically_normal() == std::filesystem::path(b).lexically_normal();
}

}  // namespace

Expected<void> check_output_free(const proto::JobSpec& spec, const JobLedger::Jobs& jobs) {
  if (spec.output_path.empty()) return {};
  for (const auto& [id, job] : jobs) {
    if (job.spec.output_path.empty() || !same_output(job.spec.output_path, spec.output_path)) {
      continue;
    }
    return make_error(ErrorCode::InvalidArgument,
                      fmt::format("SubmitJob: output_path: {} is the append_row output of running "
                                  "job {} ({}); two jobs must not append to one file: wait for "
                                  "it to end, or choose another output",
                                  spec.output_path, id, job.spec.name));
  }
  return {};
}

Expected<std::string> resolve_for_write(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path given(path);
  if (!given.is_absolute()) {
    return make_error(ErrorCode::InvalidArgument, "expected an absolute path (got '" + path + "')");
  }
  // The components still to walk; a link's target is pushed in front of what followed it.
  std::deque<std::string> todo;
  for (const auto& c : given.relative_path()) todo.push_back(c.string());
  fs::path done("/");
  bool exists = true;  // every component so far exists (then `done` has no link in it)
  int links = 0;
  while (!todo.empty()) {
    const std::string c = todo.front();
    todo.pop_front();
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      // `done` is free of links, so its parent is the folder `..` reaches; `/..` is `/`.
      done = done.parent_path();
      continue;
    }
    fs::path next = done / c;
    if (exists) {
      struct stat st {};
      if (::lstat(next.c_str(), &st) != 0) {
        // Missing (or unreadable to us): what follows is made by us, as written. An unreadable
        // folder cannot hide a link that we would then follow: we could not create in it either.
        exists = false;
      } else if (S_ISLNK(st.st_mode)) {
        if (++links > 40) {
          return make_error(ErrorCode::InvalidArgument,
                            path + ": more than 40 symbolic links on the way (a loop?)");
        }
        std::string target(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 4096) + 1, '\0');
        const ssize_t n = ::readlink(next.c_str(), target.data(), target.size());
        if (n < 0) {
          return make_error(ErrorCode::InvalidArgument,
                            path + ": readlink " + next.string() + ": " + std::strerror(errno));
        }
        target.resize(static_cast<std::size_t>(n));
        const fs::path t(target);
        std::vector<std::string> parts;
        for (const auto& p : t.relative_path()) parts.push_back(p.string());
        todo.insert(todo.begin(), parts.begin(), parts.end());
        if (t.is_absolute()) done = "/";
        continue;
      }
    }
    done = std::move(next);
  }
  return done.lexically_normal().string();
}

bool is_within(const std::string& path, const std::string& root) {
  const auto rel = std::filesystem::path(path).lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

Expected<void> check_write_roots(const proto::JobSpec& spec, const std::vector<std::string>& roots,
                                 bool log_dir_is_clients) {
  auto check = [&](const std::string& field, const std::string& path) -> Expected<void> {
    if (path.empty()) return {};
    auto real = resolve_for_write(path);
    if (!real) {
      return make_error(ErrorCode::InvalidArgument,
                        "SubmitJob: " + field + ": " + real.error().message);
    }
    for (const auto& root : roots) {
      if (is_within(*real, root)) return {};
    }
    std::string listed;
    for (const auto& root : roots) listed += (listed.empty() ? "" : ", ") + root;
    return make_error(
        ErrorCode::InvalidArgument,
        fmt::format("SubmitJob: {}: {}{} is outside the folders this interchange writes for "
                    "clients: {} (fanout-interchange --write-root); nothing was created",
                    field, path, *real == path ? "" : " (resolves to " + *real + ")",
                    listed.empty() ? "(none)" : listed));
  };
  if (auto r = check("output_path", spec.output_path); !r) return r;
  if (log_dir_is_clients) return check("log_dir", spec.log_dir);
  return {};
}

Expected<void> check_output_fresh(const proto::JobSpec& spec) {
  if (spec.output_path.empty()) return {};
  std::error_code ec;
  const auto size = std::filesystem::file_size(spec.output_path, ec);
  if (ec || size == 0) return {};  // absent or empty: nothing of an earlier job is lost
  return make_error(
      ErrorCode::InvalidArgument,
      fmt::format("SubmitJob: output_path: {} holds {} bytes of an earlier job's rows; a new job "
                  "writes a fresh file. Move it away, or run with --overwrite to replace it "
                  "(fanout resume JOB continues an unfinished job's own file)",
                  spec.output_path, size));
}

}  // namespace fanout::ix
