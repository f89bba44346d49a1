// Sending a job's mini-batches within the window. See submission.hpp.
#include "client/session/submission.hpp"

#include <algorithm>

#include "client/input/inputs.hpp"

namespace fanout::client {

Expected<std::uint64_t> submit_input(const config::JobConfig& cfg, Session& session,
                                     std::uint64_t skip_below,
                                     const std::vector<std::string>& own) {
  proto::SubmitTasks pending{session.policy().job_id(), {}};
  std::size_t pending_bytes = 0;
  // The first frames are small (1, 4, 16, 64, then 256 mini-batches): the first mini-batch reaches
  // a pool, which then starts the job's workers, while the rest of the input is still being read.
  std::size_t send_at = 1;
  bool ok = true;
  auto send_pending = [&]() {
    if (pending.batches.empty()) return;
    session.send_tasks(pending, pending_bytes + 64);
    pending.batches.clear();
    pending_bytes = 0;
    send_at = std::min<std::size_t>(send_at * 4, 256);
  };
  auto listed = stream_minibatches(
      cfg,
      [&](proto::MiniBatch&& mb) {
        if (mb.index < skip_below) return true;
        for (const auto& it : mb.items) pending_bytes += it.size() + 2;
        pending_bytes += mb.detail.size();
        pending.batches.push_back(std::move(mb));
        // Backpressure: never run further ahead of the finished mini-batches than the window
        // (counting those still buffered here, which are sent before waiting).
        const bool window_full = pending.batches.size() >= session.policy().credit();
        if (window_full || pending.batches.size() >= send_at || pending_bytes >= (1u << 20)) {
          send_pending();
        }
        ok = session.wait_for_room(1) && session.pump(std::chrono::milliseconds(0));
        return ok;
      },
      own);
  if (listed && ok) send_pending();
  return listed;
}

}  // namespace fanout::client
