// `fanout tune JOB`: what to change in a job's settings, from what that job measured. Each
// recommendation names the figure it rests on and the expected effect, or says that the data
// cannot support one. The rules and their thresholds: docs/tuning.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/report/report_data.hpp"

namespace fanout::report {

struct TuneOptions {
  double target_duration_s = 0;     // 0: no node count advice
  std::uint32_t cores = 0;          // cores per node; 0: this machine's when the job ran here
  std::uint64_t min_attempts = 20;  // successful attempts needed before any advice
};

enum class Verdict : std::uint8_t {
  Change,  // `suggested` differs from `current`
  Keep,    // the figure says the setting is fine
  NoData,  // the job did not measure enough to tell
};

struct Recommendation {
  std::string setting{};  // as in the job file: mini_batch_size, workers, prefetch, ...
  Verdict verdict = Verdict::NoData;
  std::string current{}, suggested{};  // suggested: empty unless Change
  std::string figure{};                // the measurement it rests on
  std::string effect{};                // the expected effect, or why there is no advice
};

// The five recommendations for job `d`, always in this order: mini_batch_size, workers,
// prefetch, poll_ms, instance_count; then, for a job with accelerator samples, gpu_advice()'s.
// Pure: no I/O except reading this machine's core count when opt.cores is 0 and every pool ran
// on this host.
std::vector<Recommendation> tune(const ReportData& d, const TuneOptions& opt);

// workers_per_accelerator from the accelerators' mean utilisation over the job (gpu_samples):
// below kGpuBusyLow on average, twice as many workers per device. Nothing (an empty vector) for
// a job without accelerator samples.
inline constexpr double kGpuBusyLow = 50;  // percent
std::vector<Recommendation> gpu_advice(const ReportData& d);

// The text `fanout tune` prints: one block per recommendation.
std::string format_tune(const ReportData& d, const std::vector<Recommendation>& recs);

// The suggested settings as YAML to merge into the job file (`mini_batch_size`,
// `resources.instance_count` and the `fanout:` block), with a comment naming the job. Settings
// without a Change keep their current value.
std::string tune_yaml(const ReportData& d, const std::vector<Recommendation>& recs);

std::string to_string(Verdict v);

}  // namespace fanout::report
