// How the pool's results fit in ResultBatch frames the interchange accepts (at most
// proto::kMaxFrameBytes each; a larger one is dropped by ZeroMQ with the connection): the bound
// on one result, and the split of the results due into frames. No I/O. See docs/protocol.md
// ("Limits").
#pragma once

#include <cstddef>
#include <vector>

#include "fanout/protocol/messages.hpp"

namespace fanout::pool {

// Bytes a ResultBatch takes beyond its results, and a result beyond its strings (msgpack headers
// of its 19 fields, each at most 9 bytes), rounded up.
inline constexpr std::size_t kBatchOverheadBytes = 64;
inline constexpr std::size_t kResultOverheadBytes = 512;
// The most bytes of rows one mini-batch's result may carry: a frame less its overheads and the
// error text and names a result may hold besides.
inline constexpr std::size_t kMaxErrorBytes = 64 * 1024;
inline constexpr std::size_t kMaxResultRowBytes =
    proto::kMaxFrameBytes - kBatchOverheadBytes - kResultOverheadBytes - kMaxErrorBytes - 4096;

// An upper bound of the bytes `r` takes in a ResultBatch frame.
[[nodiscard]] std::size_t result_frame_bytes(const proto::TaskResult& r) noexcept;

// Makes `r` fit in a frame: an error text longer than kMaxErrorBytes is cut (and says so), and a
// result whose rows exceed kMaxResultRowBytes becomes a failed attempt of `task` (RUN_EXCEPTION,
// category ResultTooLarge, naming the mini-batch, the size and the limit; retried like any
// run() failure). Returns true when the rows were refused.
bool fit_result(proto::TaskResult& r, const proto::Task& task);

// Splits results of the given frame sizes (result_frame_bytes), in order, into frames of at most
// `budget` bytes with kBatchOverheadBytes each: the number of results of each frame. A result
// larger than the budget alone still gets a frame of its own (fit_result() prevents that).
[[nodiscard]] std::vector<std::size_t> split_results(const std::vector<std::size_t>& sizes,
                                                     std::size_t budget = proto::kMaxFrameBytes);

}  // namespace fanout::pool
