// The pool's walltime: when its allocation ends (the earlier of --walltime-end and the
// scheduler's SLURM_JOB_END_TIME) it stops taking mini-batches whose expected run() time does not
// fit in what is left, lets the running ones finish until a margin before the end, and hands the
// rest back (PoolLeaving: no attempt is lost and no try spent). The expected time is the median of
// the run() durations this pool has seen for the job. Pure: times are passed in. Unit-tested in
// tests/unit/pool/walltime_test.cpp. See docs/cluster.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

namespace fanout::pool {

// The end of the allocation from --walltime-end or SLURM_JOB_END_TIME: Unix seconds, a whole or
// fractional positive number. nullopt when `text` is not one; `error` then says why.
[[nodiscard]] std::optional<double> parse_walltime_end(const std::string& text, std::string& error);

// The end the pool keeps when it is told two: the earlier of --walltime-end (the batch script's
// start + walltime, a little late by the time the script took to start) and SLURM_JOB_END_TIME
// (Slurm's own end, where Slurm sets it); either may be missing.
[[nodiscard]] std::optional<double> earlier_end(std::optional<double> flag,
                                                std::optional<double> env) noexcept;

// The run() durations a pool has seen, per job: the last kKept of each, whose median is the
// job's expected run() time. Bounded whatever the task count.
class RunTimes final {
 public:
  static constexpr std::size_t kKept = 255;
  void add(std::uint64_t job_id, double seconds);
  void forget(std::uint64_t job_id) { times_.erase(job_id); }
  // The median of the job's kept durations; 0 when none was seen.
  [[nodiscard]] double median(std::uint64_t job_id) const;
  // The largest median over the jobs seen: the time a next mini-batch of any of them needs.
  [[nodiscard]] double longest_median() const;

 private:
  std::map<std::uint64_t, std::deque<double>> times_{};
};

// Whether a mini-batch expected to run `expected_s` (0: not known yet), started at `now`, ends
// by `margin_s` before `end` (all Unix seconds).
[[nodiscard]] bool fits_walltime(double now, double end, double margin_s,
                                 double expected_s) noexcept;

// How long running mini-batches may still run at `now`: until `margin_s` before `end`, never
// below 0.
[[nodiscard]] double walltime_left(double now, double end, double margin_s) noexcept;

}  // namespace fanout::pool
