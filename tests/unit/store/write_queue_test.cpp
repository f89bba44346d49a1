// Tests for the write queue (src/fanout/store/detail/write_queue.hpp), with a recording apply
// function in place of the writer: order, one transaction for what queued up meanwhile, the
// transaction size bound, held submissions coming due, and what a failure does.
#include "fanout/store/detail/write_queue.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <stdexcept>
#include <variant>
#include <vector>

#include "fanout/util/log.hpp"

using fanout::store::detail::kMaxOpsPerTransaction;
using fanout::store::detail::Op;
using fanout::store::detail::SetSubmitDone;
using fanout::store::detail::WriteQueue;
using fanout::store::detail::WriteSubmitted;
using TimePoint = WriteQueue::TimePoint;

namespace {

fanout::Logger quiet() { return fanout::make_logger("queue-test", spdlog::level::off); }

// What the writer thread was given: the totals of the SetSubmitDone ops of each transaction.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<std::uint64_t>> batches;
  bool gate_open = true;  // while false, apply() waits (the writer is "busy")

  TimePoint apply(std::span<Op> ops) {
    std::unique_lock lk(mu);
    cv.wait(lk, [this] { return gate_open; });
    std::vector<std::uint64_t> b;
    for (auto& op : ops) {
      if (auto* s = std::get_if<SetSubmitDone>(&op)) b.push_back(s->total);
    }
    batches.push_back(std::move(b));
    cv.notify_all();
    return TimePoint::max();
  }
  void open() {
    std::lock_guard lk(mu);
    gate_open = true;
    cv.notify_all();
  }
  std::size_t count() {
    std::lock_guard lk(mu);
    return batches.size();
  }
};

void start(WriteQueue& q, Recorder& r) {
  q.start([&r](std::span<Op> ops) { return r.apply(ops); });
}

}  // namespace

TEST_CASE("store.write_queue.applies_everything_in_order") {
  Recorder r;
  WriteQueue q("test.db", quiet());
  start(q, r);
  for (std::uint64_t i = 0; i < 1000; ++i) q.push(SetSubmitDone{1, i});
  q.wait_applied();
  std::vector<std::uint64_t> seen;
  for (const auto& b : r.batches) seen.insert(seen.end(), b.begin(), b.end());
  REQUIRE(seen.size() == 1000);
  for (std::uint64_t i = 0; i < 1000; ++i) CHECK(seen[i] == i);
  CHECK(q.ok());
}

TEST_CASE("store.write_queue.what_queues_while_the_writer_is_busy_is_one_transaction") {
  Recorder r;
  WriteQueue q("test.db", quiet());
  start(q, r);
  {
    std::lock_guard lk(r.mu);
    r.gate_open = false;
  }
  q.push(SetSubmitDone{1, 0});
  // The writer takes the first op and blocks in apply(), or has not woken yet; either way the
  // rest queue up behind it.
  for (std::uint64_t i = 1; i <= 500; ++i) q.push(SetSubmitDone{1, i});
  r.open();
  q.wait_applied();
  // The writer took op 0 (perhaps with some of the rest) and then waited at the gate, while
  // everything else queued up behind it: at most two transactions, never one per op.
  CHECK(r.count() <= 2);
  std::size_t total = 0;
  for (const auto& b : r.batches) total += b.size();
  CHECK(total == 501);
}

TEST_CASE("store.write_queue.a_backlog_commits_in_bounded_transactions") {
  Recorder r;
  WriteQueue q("test.db", quiet());
  // Everything is queued before the writer thread starts, so it finds one backlog.
  const std::size_t n = kMaxOpsPerTransaction + kMaxOpsPerTransaction / 2;
  for (std::size_t i = 0; i < n; ++i) q.push(SetSubmitDone{1, i});
  start(q, r);
  q.wait_applied();
  REQUIRE(r.batches.size() == 2);
  CHECK(r.batches[0].size() == kMaxOpsPerTransaction);
  CHECK(r.batches[1].size() == n - kMaxOpsPerTransaction);
}

TEST_CASE("store.write_queue.held_work_comes_due_without_new_ops") {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::size_t> sizes;
  WriteQueue q("test.db", quiet());
  q.start([&](std::span<Op> ops) {
    std::lock_guard lk(mu);
    sizes.push_back(ops.size());
    cv.notify_all();
    // The first transaction leaves work due in 50 ms; after that, none.
    return sizes.size() == 1 ? std::chrono::steady_clock::now() + std::chrono::milliseconds(50)
                             : TimePoint::max();
  });
  q.push(WriteSubmitted{});
  std::unique_lock lk(mu);
  REQUIRE(cv.wait_for(lk, std::chrono::seconds(20), [&] { return sizes.size() >= 2; }));
  CHECK(sizes[0] == 1);
  CHECK(sizes[1] == 0);  // a transaction of no operations, for the held work
}

TEST_CASE("store.write_queue.a_failure_drops_the_rest_and_wait_applied_returns") {
  int calls = 0;
  WriteQueue q("test.db", quiet());
  q.start([&](std::span<Op>) -> TimePoint {
    ++calls;
    throw std::runtime_error("disk full");
  });
  q.push(SetSubmitDone{1, 1});
  q.wait_applied();  // returns: a failed transaction counts as applied
  CHECK_FALSE(q.ok());
  q.push(SetSubmitDone{1, 2});  // dropped
  q.wait_applied();
  q.stop();
  CHECK(calls == 1);
}

TEST_CASE("store.write_queue.stop_applies_everything_queued") {
  Recorder r;
  std::size_t total = 0;
  {
    WriteQueue q("test.db", quiet());
    start(q, r);
    for (std::uint64_t i = 0; i < 100; ++i) q.push(SetSubmitDone{1, i});
    q.stop();
    for (const auto& b : r.batches) total += b.size();
  }
  CHECK(total == 100);
}
