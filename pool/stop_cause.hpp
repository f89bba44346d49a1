// Why the pool ended a task without its reply, as one enum: the one spelling of the error
// category each cause is stored with. See docs/protocol.md (attempt statuses).
#pragma once

#include <cstdint>

#include "fanout/protocol/messages.hpp"

namespace fanout::pool {

enum class StopCause : std::uint8_t {
  RunTimeout,           // the task overran the job's run timeout; the pool stopped the worker
  TaskOverheadTimeout,  // its time outside run() overran --task_overhead_timeout
  WorkerLost,           // the worker process died while running it
  WorkerStartError,     // no worker process could be started for its job
  UnknownJob,           // it arrived without its job's JobInfo
  // Its worker ran out of memory: its process group passed fanout.worker_memory_limit (the pool
  // stopped it), or it was killed by SIGKILL while the node's memory was nearly full.
  OutOfMemory,
};

// The error category text of `cause`, as the store and the reports read it ("RunTimeout", ...).
[[nodiscard]] constexpr const char* to_string(StopCause cause) noexcept {
  switch (cause) {
    case StopCause::RunTimeout:
      return "RunTimeout";
    case StopCause::TaskOverheadTimeout:
      return "TaskOverheadTimeout";
    case StopCause::WorkerLost:
      return "WorkerLost";
    case StopCause::WorkerStartError:
      return "WorkerStartError";
    case StopCause::UnknownJob:
      return "ProtocolError";
    case StopCause::OutOfMemory:
      return "OUT_OF_MEMORY";
  }
  return "?";
}

// The attempt status `cause` is reported with: RUN_TIMEOUT for both timeouts, WORKER_LOST,
// RUN_EXCEPTION for memory (as Python's MemoryError would be: the mini-batch's own use, retried
// like any failure; the category says OUT_OF_MEMORY), or LOAD_EXCEPTION for a task that never
// reached a worker.
[[nodiscard]] constexpr proto::AttemptStatus attempt_status(StopCause cause) noexcept {
  switch (cause) {
    case StopCause::RunTimeout:
    case StopCause::TaskOverheadTimeout:
      return proto::AttemptStatus::RunTimeout;
    case StopCause::WorkerLost:
      return proto::AttemptStatus::WorkerLost;
    case StopCause::OutOfMemory:
      return proto::AttemptStatus::RunException;
    case StopCause::WorkerStartError:
    case StopCause::UnknownJob:
      break;
  }
  return proto::AttemptStatus::LoadException;
}

}  // namespace fanout::pool
