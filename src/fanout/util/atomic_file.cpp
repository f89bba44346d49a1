// Whole-or-nothing files. See atomic_file.hpp.
#include "fanout/util/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kFlushBytes = 1 << 16;

}  // namespace

AtomicFile::AtomicFile(std::string path, mode_t mode)
    : path_(std::move(path)), tmp_(path_ + ".tmp" + std::to_string(::getpid())) {
  if (auto r = make_parent_dirs(path_); !r) throw Failure(r.error());
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  fd_ = UniqueFd(::open(tmp_.c_str(), flags, mode));
  struct stat st {};
  if (!fd_.valid() && errno == EEXIST && ::lstat(tmp_.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_uid == ::geteuid()) {
    // Our own file, left by a killed writer whose pid this process now has: replaced.
    ::unlink(tmp_.c_str());
    fd_ = UniqueFd(::open(tmp_.c_str(), flags, mode));
  }
  if (!fd_.valid()) {
    const int err = errno;
    if (err == EEXIST && ::lstat(tmp_.c_str(), &st) == 0) {
      // Not ours to remove or reuse: it may be another user's file, or a link to one.
      throw Failure(
          ErrorCode::Io,
          fmt::format("{}: cannot be written: its temporary file {} exists already ({}, "
                      "owner uid {}); it is never written through: remove it",
                      path_, tmp_, S_ISLNK(st.st_mode) ? "a symbolic link" : "a file", st.st_uid));
    }
    throw Failure(ErrorCode::Io,
                  path_ + ": cannot be written: " + tmp_ + ": " + std::strerror(err));
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_ && fd_.valid()) {
    fd_.reset();
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::flush() {
  if (auto r = write_all(fd_.get(), buf_); !r) {
    throw Failure(ErrorCode::Io, path_ + ": cannot be written: " + r.error().message);
  }
  buf_.clear();
}

void AtomicFile::write(std::string_view text) {
  buf_.append(text);
  if (buf_.size() >= kFlushBytes) flush();
}

void AtomicFile::commit() {
  flush();
  if (::close(fd_.release()) != 0) {
    throw Failure(ErrorCode::Io, path_ + ": cannot be written: " + std::strerror(errno));
  }
  committed_ = true;  // the descriptor is gone; on failure below the temporary file is removed
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Failure(ErrorCode::Io, path_ + ": cannot be written: " + std::strerror(err));
  }
}

Expected<void> write_file_atomic(const std::string& path, std::string_view text, mode_t mode) {
  try {
    AtomicFile file(path, mode);
    file.write(text);
    file.commit();
    return {};
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

std::size_t remove_stale_temporaries(const std::string& dir) {
  std::size_t removed = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string name = it->path().filename().string();
    const auto dot = name.rfind(".tmp");
    if (dot == std::string::npos || dot + 4 >= name.size()) continue;
    const std::string digits = name.substr(dot + 4);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const auto pid = static_cast<pid_t>(std::stol(digits));
    if (pid > 0 && (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH)) continue;
    std::error_code rm;
    if (fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace fanout
