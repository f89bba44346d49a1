// The pools connected to the interchange: registration, capacity, liveness and loss. Decides
// without doing I/O; the wiring (interchange.cpp) sends the frames and writes the store.
// See docs/architecture.md and docs/protocol.md (Register, Heartbeat, PoolLeaving).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fanout/protocol/messages.hpp"
#include "fanout/util/clock.hpp"

namespace fanout::ix {

// One registered pool. Read its fields freely; change `capacity` and `tasks` only through the
// PoolTable, which keeps its free-capacity and last-seen indexes in step.
struct Pool {
  std::uint64_t id = 0;
  std::string peer{};  // routing id on the pool socket
  proto::Register reg{};
  std::string key{};  // fingerprint of its Curve key (docs/security.md); "" on plaintext endpoints
  std::uint32_t capacity = 0;                      // tasks it will hold (workers + prefetch)
  std::unordered_set<std::uint64_t> tasks{};       // task ids it holds
  std::unordered_set<std::uint64_t> jobs_known{};  // jobs whose JobInfo it was sent
  Clock::time_point last_seen{};
  double registered = 0;          // Unix seconds
  Clock::time_point idle_from{};  // when it last came to hold no task (or registered)

  [[nodiscard]] bool has_room() const noexcept { return tasks.size() < capacity; }
  [[nodiscard]] std::size_t room() const noexcept {
    return has_room() ? capacity - tasks.size() : 0;
  }

 private:
  friend class PoolTable;
  std::list<Pool*>::iterator seen_pos_{};
  std::size_t free_slot_ = static_cast<std::size_t>(-1);
};

// What a Register from a peer calls for.
struct RegisterDecision {
  enum class Outcome : std::uint8_t {
    Repeat,  // the same process asking again with nothing to lose: answer with its registration
    Add,     // a new registration: add() it
    Reject,  // refuse with `reason`
  };
  Outcome outcome = Outcome::Add;
  bool lose_previous = false;  // the peer was registered and lost its state: lose it first
  const char* reason = "";
};

// A pool taken out of the table (lost, left or replaced) and the tasks it held, ascending: the
// caller requeues each as an attempt lost with the pool.
struct RemovedPool {
  Pool pool{};
  std::vector<std::uint64_t> tasks{};
};

// Not thread-safe: owned and used only by the interchange poll loop. Pool references stay valid
// until the pool is removed.
class PoolTable final {
 public:
  // `first_id`: the id the next new pool gets (ids are never reused within a store).
  explicit PoolTable(std::uint64_t first_id = 1) : next_id_(first_id) {}
  PoolTable(const PoolTable&) = delete;
  PoolTable& operator=(const PoolTable&) = delete;

  // Decides what a Register from `peer` calls for. A known peer that registers again with the
  // same pid, name, workers and prefetch and holds no task is a Repeat (Registers it queued while
  // the interchange was away arrive in a burst); any other known peer restarted and is lost
  // first. A Register with no workers is rejected.
  [[nodiscard]] RegisterDecision on_register(const std::string& peer,
                                             const proto::Register& reg) const;
  // Adds a pool for `peer` (which must not be registered) with capacity workers + prefetch,
  // registered with Curve key `key` (its fingerprint; "" on plaintext endpoints).
  Pool& add(const std::string& peer, const proto::Register& reg, Clock::time_point now,
            double now_unix, const std::string& key = {});
  // Removes `peer`'s pool; nullopt when it is not registered.
  std::optional<RemovedPool> remove(const std::string& peer);

  [[nodiscard]] Pool* find(const std::string& peer);
  [[nodiscard]] Pool* find_id(std::uint64_t id);

  // Any frame from a pool counts as a heartbeat: it moves to the back of the last-seen order.
  void seen(Pool& pool, Clock::time_point now);
  // The capacity a pool reported (Heartbeat, ResultBatch).
  void set_capacity(Pool& pool, std::uint32_t capacity);
  // `task_id` was sent to the pool / finished or was taken back from it.
  void assign(Pool& pool, std::uint64_t task_id);
  void release(Pool& pool, std::uint64_t task_id);
  // Forgets that `job_id`'s JobInfo was sent; returns the peers that had it, who must be told
  // to drop the job.
  std::vector<std::string> forget_job(std::uint64_t job_id);

  // A pool's routing id is bound to its key (docs/security.md): the first key that registers a
  // routing id holds it for the interchange's life, after the pool is lost too, so that another
  // authorised key can neither take over a registered pool's connection (ROUTER_HANDOVER) nor
  // register anew under its name. On plaintext endpoints every key is "", and always holds.
  // Whether frames from `peer` carrying `key` may be trusted: `peer` is unbound or bound to `key`.
  [[nodiscard]] bool key_holds(const std::string& peer, const std::string& key) const;
  // Binds `peer` to `key` unless it is bound already.
  void bind_key(const std::string& peer, const std::string& key);
  // The key `peer` is bound to; nullptr when unbound.
  [[nodiscard]] const std::string* bound_key(const std::string& peer) const;
  // A pool name (Register.pool_name, shown in reports and the pools table) is bound the same
  // way: the first key that registers a name holds it for the interchange's life, so that another
  // key cannot register under it from another routing id. Whether `key` may use `name`.
  [[nodiscard]] bool name_holds(const std::string& name, const std::string& key) const;
  // Binds `name` to `key` unless it is bound already.
  void bind_name(const std::string& name, const std::string& key);
  // The key `name` is bound to; nullptr when unbound.
  [[nodiscard]] const std::string* name_key(const std::string& name) const;

  // Peers silent for longer than `threshold`, oldest first. Walks the last-seen order and stops
  // at the first live pool.
  [[nodiscard]] std::vector<std::string> silent(Clock::time_point now,
                                                std::chrono::milliseconds threshold) const;

  // The pools with room for a task, in no particular order. Removing free_at(i) (it filled up
  // or was lost) moves the last one into slot i, so walk from the back.
  [[nodiscard]] std::size_t free_count() const noexcept { return free_.size(); }
  [[nodiscard]] Pool& free_at(std::size_t i) noexcept { return *free_[i]; }

  [[nodiscard]] std::size_t size() const noexcept { return pools_.size(); }
  [[nodiscard]] bool empty() const noexcept { return pools_.empty(); }
  [[nodiscard]] std::uint32_t workers() const noexcept { return workers_; }
  // Every pool, by routing id.
  [[nodiscard]] const std::unordered_map<std::string, Pool>& all() const noexcept { return pools_; }

 private:
  void update_free(Pool& pool);

  std::unordered_map<std::string, Pool> pools_{};  // by routing id; nodes never move
  std::unordered_map<std::uint64_t, Pool*> by_id_{};
  std::list<Pool*> by_seen_{};  // last-seen order, oldest first
  std::vector<Pool*> free_{};   // pools with room
  // Routing id -> the key it is bound to; kept after the pool is removed.
  std::unordered_map<std::string, std::string> peer_keys_{};
  // Pool name -> the key it is bound to; kept after the pool is removed.
  std::unordered_map<std::string, std::string> name_keys_{};
  std::uint64_t next_id_ = 1;
  std::uint32_t workers_ = 0;  // sum of reg.workers
};

}  // namespace fanout::ix
