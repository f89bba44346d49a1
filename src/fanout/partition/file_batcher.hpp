// Cutting a stream of input files into mini-batches. Pure: no I/O, so it is tested as a property
// (every item in exactly one mini-batch, none over its bound).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fanout::part {

// One mini-batch as cut: its stable id (position in the input), its items (file paths or
// descriptors) and an optional JSON detail.
struct Batch {
  std::uint64_t index = 0;
  std::vector<std::string> items{};
  std::string detail{};
};

// Groups items into mini-batches of at most `per_batch` items, numbered from 0 in input order.
// Not thread-safe.
class FileBatcher final {
 public:
  // Precondition: per_batch >= 1.
  explicit FileBatcher(std::uint64_t per_batch);

  // Adds one item. Returns a full mini-batch when this item completes one.
  std::optional<Batch> push(std::string item);
  // Returns the last, partial mini-batch, if any items are left.
  std::optional<Batch> finish();

  [[nodiscard]] std::uint64_t batches_emitted() const noexcept { return next_index_; }
  [[nodiscard]] std::uint64_t items_seen() const noexcept { return items_; }

 private:
  Batch take();
  std::uint64_t per_batch_;
  std::uint64_t next_index_ = 0;
  std::uint64_t items_ = 0;
  std::vector<std::string> pending_{};
};

}  // namespace fanout::part
