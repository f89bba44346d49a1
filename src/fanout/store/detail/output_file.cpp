// The output files of running jobs. See output_file.hpp and docs/store.md, section 5.
#include "fanout/store/detail/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <utility>

#include "fanout/util/error.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::store::detail {

namespace {

std::string sys_error(const std::string& path, const char* what) {
  const int err = errno;
  const char* name = ::strerrorname_np(err);
  return path + ": " + what + ": " + std::strerror(err) + " (" + (name != nullptr ? name : "?") +
         ")";
}

// Opens (creating, never truncating) the file at `path`, making its folders, and returns its
// size. Throws Failure{Io} naming the file or folder.
UniqueFd open_for_append(const std::string& path, std::uint64_t& size) {
  if (auto r = make_parent_dirs(path); !r) throw Failure(r.error());
  // O_NOFOLLOW: a symbolic link at the output path (another local user may plant one in a
  // shared folder, dangling or not) is refused, never written through.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    if (errno == ELOOP) {
      throw Failure(ErrorCode::Io, path +
                                       ": cannot open output file: it is a symbolic link, "
                                       "which fanout does not follow: remove it");
    }
    throw Failure(ErrorCode::Io, sys_error(path, "cannot open output file"));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw Failure(ErrorCode::Io, sys_error(path, "fstat"));
  size = static_cast<std::uint64_t>(st.st_size);
  return fd;
}

}  // namespace

OutputFile& OutputFiles::open(std::uint64_t job_id, const std::string& path) {
  if (auto it = files_.find(job_id); it != files_.end()) {
    it->second.close_after = false;
    return it->second;
  }
  OutputFile f;
  f.job_id = job_id;
  f.fd = open_for_append(path, f.end);
  f.path = path;
  return files_.emplace(job_id, std::move(f)).first->second;
}

void OutputFiles::close_after_batch(std::uint64_t job_id) {
  // Closed only after this batch's bytes are written and synced (see commit()).
  if (auto it = files_.find(job_id); it != files_.end()) it->second.close_after = true;
}

std::vector<OutputFailure> OutputFiles::write_and_sync() {
  std::vector<OutputFailure> failed;
  for (OutputFile* f : touched_) {
    std::string_view data = f->pending;
    auto off = static_cast<off_t>(f->end);
    std::string error;
    while (!data.empty()) {
      const ssize_t n = ::pwrite(f->fd.get(), data.data(), data.size(), off);
      if (n < 0) {
        if (errno == EINTR) continue;
        error = sys_error(f->path, "write");
        break;
      }
      data.remove_prefix(static_cast<std::size_t>(n));
      off += n;
    }
    if (error.empty() && ::fdatasync(f->fd.get()) != 0) error = sys_error(f->path, "fdatasync");
    if (error.empty()) continue;
    // Only this job's file: its bytes of the batch go, the file is cut back to its committed
    // rows (best effort; recovery cuts it again), and it is closed after this batch.
    if (::ftruncate(f->fd.get(), static_cast<off_t>(f->end)) != 0) {
      // Left to recovery, as in discard().
    }
    f->pending.clear();
    f->close_after = true;
    failed.push_back(OutputFailure{f->job_id, std::move(error)});
  }
  return failed;
}

void OutputFiles::commit() {
  for (OutputFile* f : touched_) {
    f->end += f->pending.size();
    f->pending.clear();
    f->touched = false;
  }
  touched_.clear();
  for (auto it = files_.begin(); it != files_.end();) {
    it = it->second.close_after ? files_.erase(it) : std::next(it);
  }
}

void OutputFiles::discard() noexcept {
  // The bytes may have been written and synced before the commit failed.
  for (OutputFile* f : touched_) {
    f->pending.clear();
    f->touched = false;
    if (::ftruncate(f->fd.get(), static_cast<off_t>(f->end)) != 0) {
      // Nothing more can be done here; recovery truncates on the next start.
    }
  }
  touched_.clear();
}

void restore_output(const std::string& path, std::uint64_t end, const Logger& log) {
  std::uint64_t size = 0;
  const UniqueFd fd = open_for_append(path, size);
  if (size > end) {
    if (::ftruncate(fd.get(), static_cast<off_t>(end)) != 0 || ::fsync(fd.get()) != 0) {
      throw Failure(ErrorCode::Io, sys_error(path, "cannot truncate output file"));
    }
    log->info("output {}: removed {} uncommitted bytes after offset {}", path, size - end, end);
  } else if (size < end) {
    // Extending would write zeros in place of rows; the loss is reported instead.
    log->error(
        "output {}: {} bytes, but the store records rows up to offset {}; the file was "
        "changed outside fanout and rows are missing",
        path, size, end);
  }
}

}  // namespace fanout::store::detail
