// What a job's submitted mini-batches hold, read back from the store (minibatch_inputs), for
// `fanout resume` to compare with the job's input listed again. See docs/store.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fanout::store {

// One submitted mini-batch: its items and the detail the client sent ("" when it sent none).
struct SubmittedInput {
  std::uint64_t id = 0;
  std::vector<std::string> items{};
  std::string detail{};
};

// The submitted mini-batches of job `job_id` in the store at `path` (opened read-only), by id.
// Throws Failure{Database} when the store cannot be read, Failure{InvalidArgument} naming the job
// and mini-batch when its stored items cannot be decoded.
[[nodiscard]] std::vector<SubmittedInput> read_submitted_inputs(const std::string& path,
                                                                std::uint64_t job_id);

}  // namespace fanout::store
