// A parallel job's limits and which key set each. See detail/job_limits.hpp.
#include "fanout/config/detail/job_limits.hpp"

#include <limits>
#include <utility>

namespace fanout::config::detail {
namespace {

constexpr std::int64_t kMaxI64 = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();

// ParallelRunStep's default mini-batch for tabular input.
constexpr std::uint64_t kDefaultTabularBytes = 1024 * 1024;

// What messages say was expected, where several places check the same thing.
constexpr std::string_view kSecondsText = "a number of seconds >= 0 (0: none)";
constexpr std::string_view kPercentText = "a percentage from 0 to 100, or -1";
constexpr std::string_view kLevelText = "DEBUG, INFO, WARNING, ERROR or CRITICAL";

}  // namespace

std::uint32_t JobLimits::u32(const Entry& e, std::int64_t lo) const {
  return static_cast<std::uint32_t>(r_.integer(e, lo, kMaxU32));
}

double JobLimits::seconds(const Entry& e) const {
  return seconds(e.where(), r_.text(e, kSecondsText));
}

double JobLimits::percent(const Entry& e) const {
  return percent(e.where(), r_.text(e, kPercentText));
}

std::string JobLimits::level(const Entry& e) const {
  return level(e.where(), r_.text(e, kLevelText));
}

double JobLimits::seconds(const Where& w, std::string_view s) const {
  auto v = to_double(s);
  if (!v) fail(w, "expected " + std::string(kSecondsText) + " (got " + quote(s) + ")");
  // 0 is "none" for every timeout, as the pool and the interchange read it.
  if (*v < 0) {
    fail(w, "expected " + std::string(kSecondsText) + " (got " + std::string(trim(s)) + ")");
  }
  return *v;
}

double JobLimits::percent(const Where& w, std::string_view s) const {
  auto v = to_double(s);
  if (!v) fail(w, "expected " + std::string(kPercentText) + " (got " + quote(s) + ")");
  // ParallelRunStep reads -1 as "ignore failures", which is what 100 means.
  if (*v == -1) return 100;
  if (*v < 0 || *v > 100) {
    fail(w, "expected " + std::string(kPercentText) + " (got " + std::string(trim(s)) + ")");
  }
  return *v;
}

std::string JobLimits::level(const Where& w, std::string_view s) const {
  std::string u = upper(trim(s));
  for (std::string_view l : {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}) {
    if (u == l) return u;
  }
  fail(w, "expected " + std::string(kLevelText) + " (got " + quote(s) + ")");
}

void JobLimits::claim(std::string_view field, const std::string& source) {
  auto it = set_by_.find(field);
  if (it != set_by_.end() && it->second != source) {
    cfg_.notices.push_back(source + " overrides " + it->second);
  }
  set_by_.insert_or_assign(std::string(field), source);
}

void JobLimits::apply_batch_size(const Where& w, const std::string& s, const std::string& source) {
  auto size = parse_batch_size(s);
  if (!size) fail(w, size.error().message);
  cfg_.mini_batch_size = std::string(trim(s));
  cfg_.mini_batch_size_written = true;
  cfg_.mini_batch_files = size->files;
  cfg_.mini_batch_bytes = size->bytes;
  // For tabular input ParallelRunStep reads a bare number as bytes ("1024" is 1 KiB).
  for (const auto& in : cfg_.inputs) {
    if (in.name == cfg_.input_data && in.type == "mltable" && size->files > 0) {
      cfg_.mini_batch_bytes = size->files;
      cfg_.mini_batch_files = 0;
    }
  }
  claim("mini_batch_size", source);
}

void JobLimits::read_batch_size(const Fields& root) {
  if (const Entry* e = root.get("mini_batch_size")) {
    apply_batch_size(e->where(), r_.text(*e, "a file count or a size like \"10kb\""), e->key);
  } else {
    for (const auto& in : cfg_.inputs) {
      if (in.name == cfg_.input_data && in.type == "mltable") {
        cfg_.mini_batch_size = "1MB";  // ParallelRunStep's default for tabular input
        cfg_.mini_batch_files = 0;
        cfg_.mini_batch_bytes = kDefaultTabularBytes;
      }
    }
  }
}

void JobLimits::read_keys(const Fields& root) {
  if (const Entry* e = root.get("resources")) {
    Fields f = r_.fields(*e, {"instance_count", "instance_type", "shm_size", "properties",
                              "docker_args", "max_instance_count", "locations"});
    if (const Entry* c = f.get("instance_count")) {
      cfg_.instance_count = u32(*c, 1);
      claim("instance_count", c->key);
    }
  }
  if (const Entry* e = root.get("max_concurrency_per_instance")) {
    cfg_.max_concurrency_per_instance = u32(*e, 1);
    claim("max_concurrency_per_instance", e->key);
  }
  if (const Entry* e = root.get("mini_batch_error_threshold")) {
    cfg_.mini_batch_error_threshold = r_.integer(*e, -1, kMaxI64);
    claim("mini_batch_error_threshold", e->key);
  }
  if (const Entry* e = root.get("error_threshold")) {
    cfg_.error_threshold = r_.integer(*e, -1, kMaxI64);
    claim("error_threshold", e->key);
  }
  if (const Entry* e = root.get("allowed_failed_percent")) {
    cfg_.allowed_failed_percent = percent(*e);
    claim("allowed_failed_percent", e->key);
  }
  if (const Entry* e = root.get("logging_level")) {
    cfg_.logging_level = level(*e);
    claim("logging_level", e->key);
  }
  if (const Entry* e = root.get("retry_settings")) {
    Fields f = r_.fields(*e, {"max_retries", "timeout"});
    if (const Entry* r = f.get("max_retries")) {
      // Tries are retries + 1 in a u32 (JobSpec::max_tries): the largest count would wrap to 0.
      cfg_.max_retries = static_cast<std::uint32_t>(r_.integer(*r, 0, kMaxU32 - 1));
      claim("max_retries", r->key);
    }
    if (const Entry* t = f.get("timeout")) {
      cfg_.timeout_s = seconds(*t);
      claim("timeout_s", t->key);
    }
  }
  // ParallelRunStep (v1) spellings; run_max_try counts tries, max_retries counts retries.
  if (const Entry* e = root.get("run_max_try")) {
    cfg_.max_retries = static_cast<std::uint32_t>(r_.integer(*e, 1, kMaxU32) - 1);
    claim("max_retries", e->key);
  }
  if (const Entry* e = root.get("run_invocation_timeout")) {
    cfg_.timeout_s = seconds(*e);
    claim("timeout_s", e->key);
  }
}

void JobLimits::apply_system_args(const Where& w) {
  const auto& sa = cfg_.system_args;
  auto at = [&](std::string_view flag) {
    return Where{w.key + ": --" + std::string(flag), w.line};
  };
  auto source = [&](std::string_view flag) { return w.key + " --" + std::string(flag); };
  if (auto it = sa.find("error_threshold"); it != sa.end()) {
    cfg_.error_threshold = r_.integer(at(it->first), it->second, -1, kMaxI64);
    claim("error_threshold", source(it->first));
  }
  if (auto it = sa.find("allowed_failed_count"); it != sa.end()) {
    cfg_.mini_batch_error_threshold = r_.integer(at(it->first), it->second, -1, kMaxI64);
    claim("mini_batch_error_threshold", source(it->first));
  }
  if (auto it = sa.find("allowed_failed_percent"); it != sa.end()) {
    cfg_.allowed_failed_percent = percent(at(it->first), it->second);
    claim("allowed_failed_percent", source(it->first));
  }
  if (auto it = sa.find("logging_level"); it != sa.end()) {
    cfg_.logging_level = level(at(it->first), it->second);
    claim("logging_level", source(it->first));
  }
  if (auto it = sa.find("run_invocation_timeout"); it != sa.end()) {
    cfg_.timeout_s = seconds(at(it->first), it->second);
    claim("timeout_s", source(it->first));
  }
  if (auto it = sa.find("run_max_try"); it != sa.end()) {
    cfg_.max_retries =
        static_cast<std::uint32_t>(r_.integer(at(it->first), it->second, 1, kMaxU32) - 1);
    claim("max_retries", source(it->first));
  }
  if (auto it = sa.find("process_count_per_node"); it != sa.end()) {
    cfg_.max_concurrency_per_instance =
        static_cast<std::uint32_t>(r_.integer(at(it->first), it->second, 1, kMaxU32));
    claim("max_concurrency_per_instance", source(it->first));
  }
  if (auto it = sa.find("node_count"); it != sa.end()) {
    cfg_.instance_count =
        static_cast<std::uint32_t>(r_.integer(at(it->first), it->second, 1, kMaxU32));
    claim("instance_count", source(it->first));
  }
  if (auto it = sa.find("mini_batch_size"); it != sa.end()) {
    apply_batch_size(at(it->first), it->second, source(it->first));
  }
  if (auto it = sa.find("task_overhead_timeout"); it != sa.end()) {
    cfg_.task_overhead_timeout_s = seconds(at(it->first), it->second);
    // Only the Python shim marks where run() starts and ends; fanout-worker's runtimes hand the
    // mini-batch straight over, so the run timeout already bounds all of it.
    if (cfg_.task_type == "command" || cfg_.task_type == "native") {
      cfg_.notices.push_back(source(it->first) + " ignored (the " + cfg_.task_type +
                             " runtime has no loading phase; retry_settings.timeout bounds each "
                             "mini-batch)");
    }
  }
  if (auto it = sa.find("first_task_creation_timeout"); it != sa.end()) {
    cfg_.first_task_creation_timeout_s = seconds(at(it->first), it->second);
  }
  if (auto it = sa.find("progress_update_timeout"); it != sa.end()) {
    cfg_.progress_update_timeout_s = seconds(at(it->first), it->second);
  }
}

}  // namespace fanout::config::detail
