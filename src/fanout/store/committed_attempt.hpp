// An attempt as the store's writer committed it, owning its text: what TaskStore hands to its
// attempt listener after each commit. The interchange's report thread builds a running job's
// report from these (interchange/report_writer.hpp) instead of reading the rows back.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fanout/store/report_source.hpp"

namespace fanout::store {

struct CommittedAttempt {
  std::uint64_t id = 0, job_id = 0, minibatch_id = 0, pool_id = 0;
  std::int64_t attempt = 0, worker_pid = 0, items = 0, succeeded = 0, failed = 0;
  double start = 0, elapsed_s = 0, cpu_s = 0, run_s = 0;
  std::string status{}, pool{}, node{}, process{}, error_category{}, error_message{}, detail{};
  std::string device{}, cpus{};  // where the worker was placed; empty: none
  std::uint32_t threads = 0;
  // False when the writer did not have the mini-batch's detail at hand (it wrote the
  // minibatch_inputs row in an earlier transaction): read it from the store.
  bool detail_known = false;
  bool has_detail = false;

  // The row as ReportSource reads it back from the store (NULL where SQLite stores NULL: an
  // empty pool or node name, a NaN time), viewing into this.
  [[nodiscard]] AttemptRow row() const;
};

// Called on the store's writer thread after each commit with the attempts it committed, in the
// order they were queued; may take (move from) them. Must be quick: the writer waits for it.
using AttemptListener = std::function<void(std::vector<CommittedAttempt>&)>;

}  // namespace fanout::store
