// Whether a job's input still lists as it did when the job was submitted: `fanout resume` lists
// the input again and compares it with the mini-batches the store holds, so that files removed or
// added since (or tables changed) are not skipped or run silently. See docs/job-spec.md#inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fanout/config/job_spec.hpp"
#include "fanout/store/submitted_inputs.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::client {

// What differs between the submitted mini-batches and the input listed now.
struct InputDrift {
  std::uint64_t added = 0;    // items listed now that no submitted mini-batch holds
  std::uint64_t removed = 0;  // items submitted that are not listed now
  std::uint64_t changed = 0;  // mini-batches whose descriptor (detail) differs, e.g. a table
  std::vector<std::string> first_added{}, first_removed{};  // up to kDriftNames of each
  std::vector<std::uint64_t> first_changed{};               // mini-batch ids, likewise
  std::uint64_t submitted = 0;                              // mini-batches the store holds
  std::uint64_t listed = 0;                                 // mini-batches the input lists now
  [[nodiscard]] bool any() const noexcept { return added != 0 || removed != 0 || changed != 0; }
  // "3 added (e.g. data/x.txt, ...), 10 removed (e.g. ...), ..." for messages and the store.
  [[nodiscard]] std::string describe() const;
};

inline constexpr std::size_t kDriftNames = 3;

// Lists the input of `cfg` (a prepared job file) again and compares it with `submitted`. With
// `complete` (the job's submission ended) the whole listing is compared; else only as many
// mini-batches as were submitted (the rest is still to be submitted from the listing). Items
// compare as a set of names; details mini-batch by mini-batch. Errors: the listing's.
// `own`: the job's own paths, left out of the listing as at its submission.
[[nodiscard]] Expected<InputDrift> compare_input(
    const config::JobConfig& cfg, const std::vector<store::SubmittedInput>& submitted,
    bool complete, const std::vector<std::string>& own = {});

}  // namespace fanout::client
