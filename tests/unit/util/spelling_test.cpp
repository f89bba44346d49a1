// Tests for the "did you mean" helpers (util/spelling.hpp) shared by the job-file reader and the
// command line.
#include "fanout/util/spelling.hpp"

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

using fanout::edit_distance;
using fanout::nearest_word;

TEST_CASE("util.spelling.edit_distance_counts_single_character_edits") {
  CHECK(edit_distance("status", "status") == 0);
  CHECK(edit_distance("staus", "status") == 1);  // one left out
  CHECK(edit_distance("--wokers", "--workers") == 1);
  CHECK(edit_distance("resmue", "resume") == 2);  // a swap is two edits
  CHECK(edit_distance("", "run") == 3);
}

TEST_CASE("util.spelling.nearest_word_only_suggests_near_misses") {
  const std::vector<std::string_view> commands = {"run", "status", "resume", "report"};
  CHECK(nearest_word("staus", commands) == "status");
  CHECK(nearest_word("reprot", commands) == "report");
  CHECK(nearest_word("frobnicate", commands).empty());  // nothing within two edits
  CHECK(nearest_word("rn", commands, 0).empty());
}
