// Results in frames the interchange accepts (pool/result_frames.hpp): rows too
// large for a frame fail their attempt with a located ResultTooLarge, long error texts are cut,
// and results that together exceed a frame are split over several, in order.
#include "pool/result_frames.hpp"

#include <doctest/doctest.h>

#include <numeric>
#include <string>
#include <vector>

#include "fanout/protocol/codec.hpp"

using namespace fanout::pool;
namespace proto = fanout::proto;

namespace {

proto::Task task_of(std::uint64_t index) {
  proto::Task t;
  t.task_id = 40 + index;
  t.job_id = 3;
  t.index = index;
  t.attempt = 2;
  t.items = {"a.txt", "b.txt"};
  return t;
}

proto::TaskResult done(const proto::Task& t, std::string rows) {
  proto::TaskResult r;
  r.task_id = t.task_id;
  r.job_id = t.job_id;
  r.index = t.index;
  r.attempt = t.attempt;
  r.status = static_cast<std::uint8_t>(proto::AttemptStatus::RunDone);
  r.items = 2;
  r.succeeded = 2;
  r.rows = 2;
  r.output = std::move(rows);
  r.node = "node1";
  r.process = "process001";
  r.worker_pid = 1234;
  return r;
}

}  // namespace

TEST_CASE("pool.result_frames.rows_over_the_limit_fail_the_attempt") {
  const auto t = task_of(17);
  auto r = done(t, std::string(kMaxResultRowBytes + 1, 'x'));
  CHECK(fit_result(r, t));
  CHECK(r.status == static_cast<std::uint8_t>(proto::AttemptStatus::RunException));
  CHECK(r.error_category == "ResultTooLarge");
  CHECK(r.output.empty());
  CHECK(r.rows == 0);
  CHECK(r.failed == 2);
  CHECK(r.attempt == 2);
  CHECK(r.task_id == t.task_id);
  CHECK(r.process == "process001");  // where it happened is kept
  // Located: the mini-batch, the size and the limit.
  CHECK(r.error_message.find("mini-batch 17") != std::string::npos);
  CHECK(r.error_message.find(std::to_string(kMaxResultRowBytes + 1) + " bytes") !=
        std::string::npos);
  CHECK(r.error_message.find(std::to_string(kMaxResultRowBytes)) != std::string::npos);
}

TEST_CASE("pool.result_frames.rows_at_the_limit_fit_one_frame") {
  const auto t = task_of(1);
  auto r = done(t, std::string(1000, 'x'));
  CHECK_FALSE(fit_result(r, t));
  CHECK(r.output.size() == 1000);
  // The largest result allowed, with the largest error text, still fits a frame once encoded.
  auto big = done(t, std::string(kMaxResultRowBytes, 'x'));
  big.error_message = std::string(kMaxErrorBytes * 2, 'e');
  big.error_category = std::string(1000, 'c');
  CHECK_FALSE(fit_result(big, t));
  CHECK(big.error_message.size() <= kMaxErrorBytes);
  CHECK(big.error_message.find("cut to 64 KiB") != std::string::npos);
  CHECK(result_frame_bytes(big) + kBatchOverheadBytes <= proto::kMaxFrameBytes);
  proto::ResultBatch batch;
  batch.results.push_back(std::move(big));
  CHECK(proto::encode(batch).size() <= proto::kMaxFrameBytes);
}

TEST_CASE("pool.result_frames.split_keeps_each_frame_under_the_budget") {
  SUBCASE("small results share one frame") {
    CHECK(split_results({100, 200, 300}, 10000) == std::vector<std::size_t>{3});
  }
  SUBCASE("three results of 40% each: two frames") {
    const std::size_t n = proto::kMaxFrameBytes * 2 / 5;
    auto frames = split_results({n, n, n});
    CHECK(frames == std::vector<std::size_t>{2, 1});
  }
  SUBCASE("an exact fit, then the next") {
    const std::size_t budget = 1000;
    CHECK(split_results({500, 1000 - 500 - kBatchOverheadBytes, 1}, budget) ==
          std::vector<std::size_t>{2, 1});
  }
  SUBCASE("an oversized result still gets a frame of its own") {
    CHECK(split_results({10, 5000, 10}, 1000) == std::vector<std::size_t>{1, 1, 1});
  }
  SUBCASE("none") { CHECK(split_results({}).empty()); }
  SUBCASE("every result is in exactly one frame, in order") {
    std::vector<std::size_t> sizes;
    for (std::size_t i = 0; i < 500; ++i) sizes.push_back(1 + (i * 7919) % 300);
    auto frames = split_results(sizes, 2000);
    CHECK(std::accumulate(frames.begin(), frames.end(), std::size_t{0}) == sizes.size());
    std::size_t first = 0;
    for (const std::size_t count : frames) {
      std::size_t bytes = kBatchOverheadBytes;
      for (std::size_t i = first; i < first + count; ++i) bytes += sizes[i];
      CHECK(bytes <= 2000);
      first += count;
    }
  }
}
