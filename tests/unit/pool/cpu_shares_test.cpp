// Tests for the worker's CPU readings per mini-batch (pool/cpu_shares.hpp): how many readings a
// run of short mini-batches takes, and what each D frame's cpu_seconds holds, with a fake clock.
#include "pool/cpu_shares.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "pool/worker_pipe.hpp"

using namespace fanout;
using fanout::worker::CpuShares;

namespace {

double g_cpu = 0;  // the fake process CPU clock
int g_readings = 0;

double fake_reading() {
  ++g_readings;
  return g_cpu;
}

// Appends a D frame for task `id` and hands it to `shares`, as fanout-worker's loop does.
std::size_t done(std::string& replies, CpuShares& shares, std::uint64_t id, double run_s) {
  const std::size_t at = replies.size();
  pipe::append_done(replies, pipe::DoneHead{id, pipe::DoneStatus::Ok, 1, run_s, 0}, "", "");
  shares.add(replies, at, run_s);
  return at;
}

double cpu_at(const std::string& replies, std::size_t at) {
  return pipe::read_le<double>(replies.data() + at + pipe::DoneLayout::kCpuSeconds);
}

}  // namespace

TEST_CASE("pool.cpu_shares.short_minibatches_share_one_reading_in_proportion_to_run_time") {
  g_cpu = 10.0;
  g_readings = 0;
  CpuShares shares(fake_reading);
  CHECK(g_readings == 1);
  std::string replies;
  std::vector<std::size_t> at;
  // 200 mini-batches of 2 µs each, then 100 of 1 µs: 0.5 ms of run time in all, under the
  // group's 1 ms, so no reading is taken until the replies are about to be written.
  for (int i = 0; i < 200; ++i) {
    at.push_back(done(replies, shares, i, 2e-6));
    g_cpu += 2e-6;
  }
  for (int i = 200; i < 300; ++i) {
    at.push_back(done(replies, shares, i, 1e-6));
    g_cpu += 1e-6;
  }
  CHECK(g_readings == 1);
  g_cpu += 0.5e-3 * 0.5;  // the loop's own CPU between the runs: shared the same way
  shares.settle(replies);
  CHECK(g_readings == 2);
  double sum = 0;
  for (std::size_t k = 0; k < at.size(); ++k) sum += cpu_at(replies, at[k]);
  CHECK(sum == doctest::Approx(0.75e-3).epsilon(1e-9));
  CHECK(cpu_at(replies, at[0]) == doctest::Approx(2 * cpu_at(replies, at[299])).epsilon(1e-9));
  CHECK(cpu_at(replies, at[0]) == doctest::Approx(0.75e-3 * 2e-6 / 0.5e-3).epsilon(1e-9));
  // The frames are intact around the field: the task ids and run times decode as written.
  const pipe::Cut c = pipe::cut_frame(std::string_view(replies).substr(at[299]), UINT32_MAX);
  REQUIRE(c.status == pipe::Cut::Status::Frame);
  auto d = pipe::decode_done(c.payload);
  REQUIRE(d);
  CHECK(d->head.task_id == 299);
  CHECK(d->head.run_s == 1e-6);
  // Nothing pending: settling again takes no reading.
  shares.settle(replies);
  CHECK(g_readings == 2);
}

TEST_CASE("pool.cpu_shares.a_minibatch_of_a_millisecond_or_more_gets_its_own_reading") {
  g_cpu = 0;
  g_readings = 0;
  CpuShares shares(fake_reading);
  std::string replies;
  // A CPU-bound mini-batch (4 threads: 2 s of CPU in 0.5 s), then one that sleeps 0.5 s.
  g_cpu += 2.0;
  const std::size_t busy = done(replies, shares, 1, 0.5);
  CHECK(g_readings == 2);
  const std::size_t idle = done(replies, shares, 2, 0.5);
  CHECK(g_readings == 3);
  CHECK(cpu_at(replies, busy) == 2.0);
  CHECK(cpu_at(replies, idle) == 0.0);
}

TEST_CASE("pool.cpu_shares.groups_close_once_their_run_time_reaches_a_millisecond") {
  g_cpu = 0;
  g_readings = 0;
  CpuShares shares(fake_reading);
  std::string replies;
  // 10,000 mini-batches of 0.1 ms: one reading per 10 of them (1 ms of run time each).
  for (int i = 0; i < 10000; ++i) {
    done(replies, shares, i, 1e-4);
    g_cpu += 1e-4;
  }
  shares.settle(replies);
  CHECK(g_readings >= 1 + 1000);
  CHECK(g_readings <= 1 + 1001);
}

TEST_CASE("pool.cpu_shares.mini_batches_that_took_no_measurable_time_share_evenly") {
  g_cpu = 1.0;
  g_readings = 0;
  CpuShares shares(fake_reading);
  std::string replies;
  const std::size_t a = done(replies, shares, 1, 0.0);
  const std::size_t b = done(replies, shares, 2, 0.0);
  g_cpu += 4e-6;
  shares.settle(replies);
  CHECK(cpu_at(replies, a) == doctest::Approx(2e-6));
  CHECK(cpu_at(replies, b) == doctest::Approx(2e-6));
}
