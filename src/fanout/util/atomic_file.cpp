// Whole-or-nothing files. See atomic_file.hpp.
#include "fanout/util/atomic_file.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout {

namespace fs = std::filesystem;

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp" + std::to_string(::getpid())) {
  if (auto r = make_parent_dirs(path_); !r) throw Failure(r.error());
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Failure(ErrorCode::Io, path_ + ": cannot be written");
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    out_.close();
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
}

void AtomicFile::write(std::string_view text) {
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out_) throw Failure(ErrorCode::Io, path_ + ": cannot be written");
}

void AtomicFile::commit() {
  out_.close();
  if (!out_) throw Failure(ErrorCode::Io, path_ + ": cannot be written");
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) throw Failure(ErrorCode::Io, path_ + ": cannot be written: " + ec.message());
  committed_ = true;
}

Expected<void> write_file_atomic(const std::string& path, std::string_view text) {
  try {
    AtomicFile file(path);
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
