// A job's state, as the interchange decides it, the store records it (jobs.state) and JobEnded
// carries it. The strings are a public interface (docs/store.md); this is their one definition.
#pragma once

#include <optional>
#include <string_view>

namespace fanout::proto {

// Partial: every mini-batch finished and no threshold was crossed, but some mini-batches failed
// (ParallelRunStep calls this a success; fanout records it apart and exits with its own status).
enum class JobState : unsigned char { Running, Succeeded, Partial, Failed, Cancelled };

// The store's and the wire's spelling: "running", "succeeded", "partial", "failed", "cancelled".
[[nodiscard]] constexpr std::string_view to_string(JobState s) noexcept {
  switch (s) {
    case JobState::Running:
      return "running";
    case JobState::Succeeded:
      return "succeeded";
    case JobState::Partial:
      return "partial";
    case JobState::Failed:
      return "failed";
    case JobState::Cancelled:
      return "cancelled";
  }
  return "running";
}

// The state spelt `s`, or nullopt for any other string.
[[nodiscard]] constexpr std::optional<JobState> parse_job_state(std::string_view s) noexcept {
  for (JobState st : {JobState::Running, JobState::Succeeded, JobState::Partial, JobState::Failed,
                      JobState::Cancelled}) {
    if (to_string(st) == s) return st;
  }
  return std::nullopt;
}

// True for the states a job never leaves.
[[nodiscard]] constexpr bool is_ended(JobState s) noexcept { return s != JobState::Running; }

}  // namespace fanout::proto
