// GNU parallel's ways of reshaping an ad-hoc run's items (client/commands/adhoc_items.hpp) and
// its command line (client/commands/adhoc_argv.hpp), checked against what Debian's parallel
// 20221122 does with the same input.
#include "client/commands/adhoc_items.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "client/commands/adhoc_argv.hpp"
#include "fanout/config/adhoc_job.hpp"

using namespace fanout::client;

namespace {

std::vector<std::size_t> sizes(const std::vector<std::string>& chunks) {
  std::vector<std::size_t> out;
  for (const auto& c : chunks) out.push_back(c.size());
  return out;
}

std::string seq(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += std::to_string(i) + "\n";
  return s;
}

}  // namespace

TEST_CASE("adhoc_items.pipe_cuts_stdin_as_gnu_parallel") {
  // `seq 10 | parallel --pipe --block 6 wc -c` prints 6 6 6 3; --block 5: 4 4 4 4 5.
  CHECK(sizes(cut_chunks(seq(10), -1, 6)) == std::vector<std::size_t>{6, 6, 6, 3});
  CHECK(sizes(cut_chunks(seq(10), -1, 5)) == std::vector<std::size_t>{4, 4, 4, 4, 5});
  CHECK(sizes(cut_chunks(seq(30), -1, 10)) == std::vector<std::size_t>{10, 8, 9, 9, 9, 9, 9, 9, 9});
  // -N3: three records a chunk.
  CHECK(sizes(cut_chunks(seq(10), 3, 0)) == std::vector<std::size_t>{6, 6, 6, 3});
  // A record longer than the block stays whole; a last line without newline is kept.
  CHECK(cut_chunks("abcdefgh\nx", -1, 3) == std::vector<std::string>{"abcdefgh\n", "x"});
  CHECK(cut_chunks("", -1, 3).empty());
}

TEST_CASE("adhoc_items.block_sizes_take_gnu_units") {
  CHECK(*parse_block("") == 1024 * 1024);
  CHECK(*parse_block("6") == 6);
  CHECK(*parse_block("10K") == 10240);
  CHECK(*parse_block("10k") == 10000);
  CHECK(*parse_block("1M") == 1024 * 1024);
  CHECK_FALSE(parse_block("0").has_value());
  CHECK_FALSE(parse_block("1x").has_value());
}

TEST_CASE("adhoc_items.colsep_makes_columns_values") {
  AdhocOptions o;
  o.command = "echo";
  o.colsep = ",";
  // GNU: `a,b` and `c,d,e` print `a b` and `c d e`; empty columns stay ('' put in); {3} past
  // the last column is empty.
  CHECK(*column_lines(o, {"a,b", "c,d,e", "a,,b", "a,b,"}) ==
        std::vector<std::string>{"echo a b", "echo c d e", "echo a '' b", "echo a b ''"});
  o.command = "echo {2}:{1}:{3}";
  CHECK(*column_lines(o, {"a,b"}) == std::vector<std::string>{"echo b:a:"});
  o.colsep = "\\t";
  o.command = "echo";
  CHECK(*column_lines(o, {"x\ty z"}) == std::vector<std::string>{"echo x 'y z'"});
  o.colsep = "(";
  CHECK_FALSE(column_lines(o, {"x"}).has_value());
}

TEST_CASE("adhoc_items.N_m_and_X_group_values_as_gnu_parallel") {
  AdhocOptions o;
  o.command = "echo {1}-{2}";
  o.max_args = 2;
  // `parallel -N2 echo {1}-{2} ::: a b c d e`: a-b c-d e-
  CHECK(group_lines(o, {"a", "b", "c", "d", "e"}) ==
        std::vector<std::string>{"echo a-b", "echo c-d", "echo e-"});
  // -X with -j2 and 3 values: `pre1post pre2post`, `pre3post`; -m -j4 with 8: pairs.
  o = {};
  o.command = "echo pre{}post";
  o.multi = 'X';
  o.jobs = 2;
  CHECK(group_lines(o, {"1", "2", "3"}) ==
        std::vector<std::string>{"echo pre1post pre2post", "echo pre3post"});
  o.command = "echo";
  o.multi = 'm';
  o.jobs = 4;
  CHECK(group_lines(o, {"1", "2", "3", "4", "5", "6", "7", "8"}) ==
        std::vector<std::string>{"echo 1 2", "echo 3 4", "echo 5 6", "echo 7 8"});
  // {#} is the line's number; {%} is left to the shell loop.
  o = {};
  o.command = "echo {#} {%} {}";
  o.max_args = 2;
  CHECK(group_lines(o, {"a", "b", "c"}) ==
        std::vector<std::string>{R"(echo 1 "$fanout_slot" a b)", R"(echo 2 "$fanout_slot" c)"});
}

TEST_CASE("adhoc_argv.gnu_spellings_become_fanouts") {
  std::vector<std::string> words = {"fanout",   "run", "--jobs", "3",    "--eta", "-N2", "-X",
                                    "--colsep", ",",   "-c",     "-N x", ":::",   "a",   "-N"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  auto r = split_adhoc_argv(static_cast<int>(argv.size()), argv.data());
  REQUIRE(r.has_value());
  CHECK(r->args == std::vector<std::string>{"fanout", "run", "-j", "3", "--bar", "-c", "-N x"});
  CHECK(r->gnu.max_args == 2);
  CHECK(r->gnu.multi == 'X');
  CHECK(r->gnu.colsep == ",");
  REQUIRE(r->sources.size() == 1);
  CHECK(r->sources[0].values == std::vector<std::string>{"a", "-N"});
}

TEST_CASE("adhoc_argv.unsupported_gnu_options_are_refused") {
  std::vector<std::string> words = {"fanout", "run", "--ungroup", "-c", "echo", ":::", "a"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  CHECK_FALSE(split_adhoc_argv(static_cast<int>(argv.size()), argv.data()).has_value());
}
