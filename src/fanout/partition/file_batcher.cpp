// Mini-batch cutting for file inputs.
#include "fanout/partition/file_batcher.hpp"

#include "fanout/util/error.hpp"

namespace fanout::part {

FileBatcher::FileBatcher(std::uint64_t per_batch) : per_batch_(per_batch) {
  FANOUT_ASSERT(per_batch >= 1);
  pending_.reserve(per_batch_ < 4096 ? per_batch_ : 4096);
}

std::optional<Batch> FileBatcher::push(std::string item) {
  ++items_;
  pending_.push_back(std::move(item));
  if (pending_.size() >= per_batch_) return take();
  return std::nullopt;
}

std::optional<Batch> FileBatcher::finish() {
  if (pending_.empty()) return std::nullopt;
  return take();
}

Batch FileBatcher::take() {
  Batch mb;
  mb.index = next_index_++;
  mb.items = std::move(pending_);
  pending_.clear();
  pending_.reserve(per_batch_ < 4096 ? per_batch_ : 4096);
  return mb;
}

}  // namespace fanout::part
