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

// Connected pools' heartbeats, all pools in one operation (TaskStore::record_pools_seen).
struct PoolsSeen {
  std::vector<PoolSeen> pools{};
};

// The large records are boxed to keep the queue's elements small: CreateJob, PoolRecord and
// ResourceRecord are rare, and an AttemptRecord (one per result, about 430 bytes inline) made
// every element that large, so the queue's two vectors, which keep their capacity and double
// with a backlog of up to kMaxBacklog, held over 100 MB and moved every queued record's strings
// each time they grew. A box costs one allocation per result, freed after its commit.
using Op = std::variant<std::unique_ptr<CreateJob>, AddMiniBatches, SetSubmitDone, MarkRunning,
                        std::unique_ptr<AttemptRecord>, FinishJob, std::unique_ptr<PoolRecord>,
                        std::unique_ptr<ResourceRecord>, MarkReported, WriteSubmitted, PoolsSeen>;
static_assert(sizeof(Op) <= 96, "a queued operation stays small: box large records");

}  // namespace fanout::store::detail
