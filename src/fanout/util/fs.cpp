// File-system helpers.
#include "fanout/util/fs.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "fanout/util/user_text.hpp"

namespace fanout {

namespace fs = std::filesystem;

Expected<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error(ErrorCode::NotFound, path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::Io, path + ": cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Expected<void> make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::Io, dir + ": cannot create folder: " + ec.message());
  return {};
}

Expected<void> make_parent_dirs(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return {};
  return make_dirs(parent.string());
}

Expected<UniqueFd> open_trusted(const std::string& path, int flags, mode_t create_mode) {
  UniqueFd fd(::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, create_mode));
  if (!fd.valid()) {
    const int err = errno;
    if (err == ENOENT) return make_error(ErrorCode::NotFound, path + ": no such file");
    struct stat lst {};
    if (err == ELOOP && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      return make_error(ErrorCode::Io,
                        fmt::format("{}: is a symbolic link (owner {}); fanout does not follow "
                                    "links here: remove it",
                                    path, describe_uid(lst.st_uid)));
    }
    return make_error(ErrorCode::Io, path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return make_error(ErrorCode::Io, path + ": fstat: " + std::strerror(errno));
  }
  // Root's files are trusted as the system's own; a file writable by others could have been
  // rewritten by any of them, whoever made it.
  const uid_t me = ::geteuid();
  if (!S_ISREG(st.st_mode) || (st.st_uid != me && st.st_uid != 0) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return make_error(
        ErrorCode::Io,
        fmt::format("{}: not trusted: owner {}, mode {:04o}{}; expected a regular "
                    "file of {} writable by its owner only (another local user may "
                    "have planted it: remove it)",
                    path, describe_uid(st.st_uid), st.st_mode & 07777,
                    S_ISREG(st.st_mode) ? "" : ", not a regular file", describe_uid(me)));
  }
  return fd;
}

std::string resolve_path(const std::string& base, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base) / p;
  if (p.is_relative()) {
    std::error_code ec;
    p = fs::absolute(p, ec);
  }
  std::string s = p.lexically_normal().string();
  if (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string self_dir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return p.parent_path().string();
}

}  // namespace fanout
