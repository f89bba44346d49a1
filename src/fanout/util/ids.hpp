// Strong id types, so that one kind of id cannot be passed for another.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace fanout {

struct JobId {
  std::uint64_t v = 0;
  auto operator<=>(const JobId&) const = default;
};
// A task is one attempt-able mini-batch of one job, unique within one interchange store.
struct TaskId {
  std::uint64_t v = 0;
  auto operator<=>(const TaskId&) const = default;
};
struct PoolId {
  std::uint64_t v = 0;
  auto operator<=>(const PoolId&) const = default;
};
struct WorkerId {
  std::uint32_t v = 0;
  auto operator<=>(const WorkerId&) const = default;
};

}  // namespace fanout

template <>
struct std::hash<fanout::TaskId> {
  std::size_t operator()(fanout::TaskId id) const noexcept {
    return std::hash<std::uint64_t>{}(id.v);
  }
};
template <>
struct std::hash<fanout::PoolId> {
  std::size_t operator()(fanout::PoolId id) const noexcept {
    return std::hash<std::uint64_t>{}(id.v);
  }
};
template <>
struct std::hash<fanout::JobId> {
  std::size_t operator()(fanout::JobId id) const noexcept {
    return std::hash<std::uint64_t>{}(id.v);
  }
};
