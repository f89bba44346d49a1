// Private to config/: a parallel job's limits (mini_batch_size, concurrency, thresholds, retries,
// timeouts, logging level) from its YAML keys and from ParallelRunStep's flags in
// program_arguments. Several sources can set one limit: the later wins and a notice says so.
// See docs/job-spec.md.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/config/job_spec.hpp"

namespace fanout::config::detail {

// Writes limits and notices into a JobConfig being read. Borrows the reader and the config,
// which must outlive it; remembers which key set each limit last.
class JobLimits final {
 public:
  JobLimits(const YamlReader& r, JobConfig& cfg) : r_(r), cfg_(cfg) {}

  // mini_batch_size, or ParallelRunStep's 1MB for a tabular input when it is absent. Reads
  // cfg's inputs and input_data, so call it after those.
  void read_batch_size(const Fields& root);
  // resources.instance_count, max_concurrency_per_instance, the thresholds, logging_level,
  // retry_settings and their v1 spellings (run_max_try, run_invocation_timeout).
  void read_keys(const Fields& root);
  // The ParallelRunStep flags in cfg.system_args, taken from program_arguments written at `w`.
  void apply_system_args(const Where& w);

 private:
  [[noreturn]] void fail(const Where& w, std::string_view what) const { r_.fail(w, what); }
  std::uint32_t u32(const Entry& e, std::int64_t lo) const;
  double seconds(const Where& w, std::string_view s) const;
  double seconds(const Entry& e) const;
  double percent(const Where& w, std::string_view s) const;
  double percent(const Entry& e) const;
  std::string level(const Where& w, std::string_view s) const;
  std::string level(const Entry& e) const;
  void apply_batch_size(const Where& w, const std::string& s, const std::string& source);
  // Records that `source` set `field`; a notice when another source had set it.
  void claim(std::string_view field, const std::string& source);

  const YamlReader& r_;
  JobConfig& cfg_;
  std::map<std::string, std::string, std::less<>> set_by_{};  // field -> key that last set it
};

}  // namespace fanout::config::detail
