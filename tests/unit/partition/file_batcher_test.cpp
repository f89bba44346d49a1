// Property tests for FileBatcher: every item lands in exactly one mini-batch, in order, and no
// mini-batch exceeds its bound.
#include "fanout/partition/file_batcher.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using fanout::part::FileBatcher;

TEST_CASE("partition.file_batcher.every_item_exactly_once") {
  for (std::uint64_t n : {0u, 1u, 7u, 1000u}) {
    for (std::uint64_t per : {1u, 3u, 10u, 999u, 5000u}) {
      CAPTURE(n);
      CAPTURE(per);
      FileBatcher b(per);
      std::vector<fanout::part::Batch> out;
      for (std::uint64_t i = 0; i < n; ++i) {
        if (auto mb = b.push("f" + std::to_string(i))) out.push_back(std::move(*mb));
      }
      if (auto mb = b.finish()) out.push_back(std::move(*mb));
      std::set<std::string> seen;
      std::uint64_t count = 0, expect_index = 0, next_item = 0;
      for (const auto& mb : out) {
        CHECK(mb.index == expect_index++);
        CHECK(!mb.items.empty());
        CHECK(mb.items.size() <= per);
        for (const auto& it : mb.items) {
          CHECK(it == "f" + std::to_string(next_item++));  // input order kept
          seen.insert(it);
          ++count;
        }
      }
      CHECK(count == n);
      CHECK(seen.size() == n);
      CHECK(out.size() == (n + per - 1) / per);
      CHECK(b.items_seen() == n);
    }
  }
}

TEST_CASE("partition.file_batcher.finish_twice_is_empty") {
  FileBatcher b(2);
  CHECK(!b.push("a").has_value());
  auto last = b.finish();
  REQUIRE(last.has_value());
  CHECK(last->items.size() == 1);
  CHECK(!b.finish().has_value());
}
