// Results in frames the interchange accepts. See result_frames.hpp.
#include "pool/result_frames.hpp"

#include <fmt/format.h>

namespace fanout::pool {

std::size_t result_frame_bytes(const proto::TaskResult& r) noexcept {
  return kResultOverheadBytes + r.output.size() + r.error_category.size() + r.error_message.size() +
         r.node.size() + r.process.size();
}

bool fit_result(proto::TaskResult& r, const proto::Task& task) {
  if (r.error_message.size() > kMaxErrorBytes) {
    static constexpr const char* kCut = "\n... (error text cut to 64 KiB by the pool)";
    r.error_message.resize(kMaxErrorBytes - std::char_traits<char>::length(kCut));
    r.error_message += kCut;
  }
  if (r.error_category.size() > 256) r.error_category.resize(256);
  if (r.output.size() <= kMaxResultRowBytes) return false;
  const std::string message = fmt::format(
      "ResultTooLarge: mini-batch {} returned {} bytes of rows ({} rows); one result may carry at "
      "most {} bytes (a frame of {} bytes, docs/protocol.md#limits)",
      task.index, r.output.size(), r.rows, kMaxResultRowBytes, proto::kMaxFrameBytes);
  proto::TaskResult failed =
      proto::failed_result(task, proto::AttemptStatus::RunException, "ResultTooLarge", message);
  failed.node = std::move(r.node);
  failed.process = std::move(r.process);
  failed.worker_pid = r.worker_pid;
  failed.start = r.start;
  failed.elapsed_s = r.elapsed_s;
  failed.run_s = r.run_s;
  failed.cpu_s = r.cpu_s;
  r = std::move(failed);
  return true;
}

std::vector<std::size_t> split_results(const std::vector<std::size_t>& sizes, std::size_t budget) {
  std::vector<std::size_t> frames;
  std::size_t count = 0, bytes = kBatchOverheadBytes;
  for (const std::size_t n : sizes) {
    if (count > 0 && bytes + n > budget) {
      frames.push_back(count);
      count = 0;
      bytes = kBatchOverheadBytes;
    }
    ++count;
    bytes += n;
  }
  if (count > 0) frames.push_back(count);
  return frames;
}

}  // namespace fanout::pool
