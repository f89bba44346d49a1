// The append_row output files of running jobs, as the writer keeps them: bytes of the current
// transaction are written and synced before it commits, and cut off again if it does not.
// Private to the store. The rules: docs/store.md, section 5 ("The output file and the store").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fanout/util/fd.hpp"
#include "fanout/util/log.hpp"

namespace fanout::store::detail {

// A job's append_row file, open while the job runs.
struct OutputFile {
  std::uint64_t job_id = 0;
  std::string path{};
  UniqueFd fd{};
  std::uint64_t end = 0;     // bytes written and synced (or present at open)
  std::string pending{};     // bytes of the current batch, written at `end`
  bool touched = false;      // has pending bytes in the current batch
  bool close_after = false;  // the job finished in the current batch
};

// A job's output file that could not be written or synced (disk full, I/O error, quota,
// read-only): `reason` names the file, the call and the errno ("out.txt: write: No space left
// on device (ENOSPC)").
struct OutputFailure {
  std::uint64_t job_id = 0;
  std::string reason{};
};

// The open output files, by job id, and the bytes the current transaction adds to them. A batch
// goes: append() for each succeeded mini-batch, write_and_sync() before the commit, then
// commit() after it, or discard() when the transaction failed. Writer thread only.
class OutputFiles final {
 public:
  // The open file of `job_id`, or null.
  [[nodiscard]] OutputFile* find(std::uint64_t job_id) {
    auto it = files_.find(job_id);
    return it == files_.end() ? nullptr : &it->second;
  }

  // Opens (creating, never truncating) the output file of `job_id` at `path`; new rows go at its
  // current end. A file already open is kept (and no longer closed after this batch). Creates
  // the parent folders. Throws Failure{Io} naming the file or folder.
  OutputFile& open(std::uint64_t job_id, const std::string& path);

  // Queues `bytes` for `f` in the current batch and returns the offset they will have.
  std::uint64_t append(OutputFile& f, std::string_view bytes) {
    if (!f.touched) {
      f.touched = true;
      touched_.push_back(&f);
    }
    const std::uint64_t offset = f.end + f.pending.size();
    f.pending += bytes;
    return offset;
  }

  // Closes the file of `job_id`, if open, once the current batch is committed.
  void close_after_batch(std::uint64_t job_id);

  // Writes the batch's bytes at each touched file's end (one pwrite each), then fdatasyncs each.
  // A file that fails is cut back to its committed end, its batch bytes are dropped, and it is
  // closed at commit(); the others are written all the same. Returns the files that failed.
  [[nodiscard]] std::vector<OutputFailure> write_and_sync();

  // After the commit: the batch's bytes are part of the committed output; the files of jobs
  // that finished in the batch are closed.
  void commit();

  // After a failed batch: drops its bytes and cuts each file back to its committed end, so that
  // nothing is left past the last committed offset. Best effort: recovery does the same on the
  // next start.
  void discard() noexcept;

 private:
  std::unordered_map<std::uint64_t, OutputFile> files_;
  std::vector<OutputFile*> touched_;  // stable: unordered_map never moves its elements
};

// Cuts the output file at `path` back to `end`, the end of its last committed rows, removing
// what a writer that crashed before committing appended; creates the file (and its folders)
// when missing. A file shorter than `end` was changed outside fanout: it is logged at error and
// left as it is. Throws Failure{Io} naming the file.
void restore_output(const std::string& path, std::uint64_t end, const Logger& log);

}  // namespace fanout::store::detail
