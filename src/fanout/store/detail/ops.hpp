// The operations TaskStore queues for its writer thread, one per public write call. Private to
// the store: TaskStore makes them, WriteQueue carries them, Writer applies them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/store/records.hpp"

namespace fanout::store::detail {

struct CreateJob {
  std::uint64_t job_id = 0;
  proto::JobSpec spec{};
  double created = 0;
};
struct AddMiniBatches {
  std::uint64_t job_id = 0;
  std::vector<proto::MiniBatch> batches{};
};
struct SetSubmitDone {
  std::uint64_t job_id = 0;
  std::uint64_t total = 0;
};
struct MarkRunning {
  std::uint64_t job_id = 0;
  std::uint64_t index = 0;
  std::uint32_t tries = 0;
  bool superseded = false;  // a later AttemptRecord in the same transaction overwrites it
};
struct FinishJob {
  std::uint64_t job_id = 0;
  std::string state{};
  std::string reason{};
  double ended = 0;
};

// Queued by flush(): every submitted mini-batch the writer still holds back is written.
// The job's reports (logs/) are written.
struct MarkReported {
  std::uint64_t job_id = 0;
  double when = 0;
};

struct WriteSubmitted {};

// CreateJob and ResourceRecord are rare and large, so they are boxed to keep the queue's
// elements small.
using Op = std::variant<std::unique_ptr<CreateJob>, AddMiniBatches, SetSubmitDone, MarkRunning,
                        AttemptRecord, FinishJob, PoolRecord, std::unique_ptr<ResourceRecord>,
                        MarkReported, WriteSubmitted>;

}  // namespace fanout::store::detail
