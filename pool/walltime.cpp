// The pool's walltime decisions. See walltime.hpp.
#include "pool/walltime.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace fanout::pool {

std::optional<double> parse_walltime_end(const std::string& text, std::string& error) {
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || !std::isfinite(v) || v <= 0) {
    error = "expected the allocation's end in Unix seconds, a positive number (got '" + text + "')";
    return std::nullopt;
  }
  return v;
}

std::optional<double> earlier_end(std::optional<double> flag, std::optional<double> env) noexcept {
  if (flag && env) return std::min(*flag, *env);
  return flag ? flag : env;
}

void RunTimes::add(std::uint64_t job_id, double seconds) {
  auto& d = times_[job_id];
  d.push_back(std::max(0.0, seconds));
  if (d.size() > kKept) d.pop_front();
}

double RunTimes::median(std::uint64_t job_id) const {
  auto it = times_.find(job_id);
  if (it == times_.end() || it->second.empty()) return 0;
  std::vector<double> v(it->second.begin(), it->second.end());
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double RunTimes::longest_median() const {
  double m = 0;
  for (const auto& [job, d] : times_) m = std::max(m, median(job));
  return m;
}

bool fits_walltime(double now, double end, double margin_s, double expected_s) noexcept {
  return now + std::max(0.0, expected_s) <= end - std::max(0.0, margin_s);
}

double walltime_left(double now, double end, double margin_s) noexcept {
  return std::max(0.0, end - std::max(0.0, margin_s) - now);
}

}  // namespace fanout::pool
