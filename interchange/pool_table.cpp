// The pool table. See pool_table.hpp.
#include "interchange/pool_table.hpp"

#include <algorithm>

namespace fanout::ix {

namespace {
constexpr std::size_t kNotFree = static_cast<std::size_t>(-1);
}  // namespace

RegisterDecision PoolTable::on_register(const std::string& peer, const proto::Register& reg) const {
  RegisterDecision d;
  if (auto it = pools_.find(peer); it != pools_.end()) {
    const Pool& known = it->second;
    if (known.tasks.empty() && reg.workers > 0 && reg.pid == known.reg.pid &&
        reg.pool_name == known.reg.pool_name && reg.workers == known.reg.workers &&
        reg.prefetch == known.reg.prefetch) {
      d.outcome = RegisterDecision::Outcome::Repeat;
      return d;
    }
    // The same peer registering as another process, or holding tasks it no longer knows of
    // (restart): what it held is requeued before anything else.
    d.lose_previous = true;
  }
  if (reg.workers == 0) {
    d.outcome = RegisterDecision::Outcome::Reject;
    d.reason = "Register: workers must be >= 1";
  }
  return d;
}

Pool& PoolTable::add(const std::string& peer, const proto::Register& reg, Clock::time_point now,
                     double now_unix, const std::string& key) {
  auto [it, inserted] = pools_.try_emplace(peer);
  Pool& pool = it->second;
  pool.id = next_id_++;
  pool.peer = peer;
  pool.reg = reg;
  pool.key = key;
  pool.capacity = reg.workers + reg.prefetch;
  pool.last_seen = now;
  pool.idle_from = now;
  pool.registered = now_unix;
  pool.seen_pos_ = by_seen_.insert(by_seen_.end(), &pool);
  by_id_.emplace(pool.id, &pool);
  workers_ += reg.workers;
  update_free(pool);
  return pool;
}

std::optional<RemovedPool> PoolTable::remove(const std::string& peer) {
  auto it = pools_.find(peer);
  if (it == pools_.end()) return std::nullopt;
  Pool& pool = it->second;
  by_seen_.erase(pool.seen_pos_);
  by_id_.erase(pool.id);
  workers_ -= pool.reg.workers;
  pool.capacity = 0;
  update_free(pool);
  RemovedPool out;
  out.tasks.assign(pool.tasks.begin(), pool.tasks.end());
  std::sort(out.tasks.begin(), out.tasks.end());
  out.pool = std::move(pool);
  pools_.erase(it);
  return out;
}

bool PoolTable::key_holds(const std::string& peer, const std::string& key) const {
  const std::string* bound = bound_key(peer);
  return bound == nullptr || *bound == key;
}

void PoolTable::bind_key(const std::string& peer, const std::string& key) {
  (void)peer_keys_.try_emplace(peer, key);
}

const std::string* PoolTable::bound_key(const std::string& peer) const {
  auto it = peer_keys_.find(peer);
  return it == peer_keys_.end() ? nullptr : &it->second;
}

bool PoolTable::name_holds(const std::string& name, const std::string& key) const {
  const std::string* bound = name_key(name);
  return bound == nullptr || *bound == key;
}

void PoolTable::bind_name(const std::string& name, const std::string& key) {
  (void)name_keys_.try_emplace(name, key);
}

const std::string* PoolTable::name_key(const std::string& name) const {
  auto it = name_keys_.find(name);
  return it == name_keys_.end() ? nullptr : &it->second;
}

Pool* PoolTable::find(const std::string& peer) {
  auto it = pools_.find(peer);
  return it == pools_.end() ? nullptr : &it->second;
}

Pool* PoolTable::find_id(std::uint64_t id) {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

void PoolTable::seen(Pool& pool, Clock::time_point now) {
  pool.last_seen = now;
  by_seen_.splice(by_seen_.end(), by_seen_, pool.seen_pos_);
}

void PoolTable::set_capacity(Pool& pool, std::uint32_t capacity) {
  pool.capacity = capacity;
  update_free(pool);
}

void PoolTable::assign(Pool& pool, std::uint64_t task_id) {
  pool.tasks.insert(task_id);
  update_free(pool);
}

void PoolTable::release(Pool& pool, std::uint64_t task_id) {
  if (pool.tasks.erase(task_id) != 0 && pool.tasks.empty()) pool.idle_from = Clock::now();
  update_free(pool);
}

std::vector<std::string> PoolTable::forget_job(std::uint64_t job_id) {
  std::vector<std::string> peers;
  for (auto& [peer, pool] : pools_) {
    if (pool.jobs_known.erase(job_id) != 0) peers.push_back(peer);
  }
  return peers;
}

std::vector<std::string> PoolTable::silent(Clock::time_point now,
                                           std::chrono::milliseconds threshold) const {
  std::vector<std::string> out;
  for (const Pool* pool : by_seen_) {
    // Last-seen order: the first live pool means every later one is live too.
    if (now - pool->last_seen <= threshold) break;
    out.push_back(pool->peer);
  }
  return out;
}

void PoolTable::update_free(Pool& pool) {
  const bool in = pool.free_slot_ != kNotFree;
  if (pool.has_room() == in) return;
  if (!in) {
    pool.free_slot_ = free_.size();
    free_.push_back(&pool);
    return;
  }
  // Swap-remove: the last free pool takes this one's slot.
  Pool* last = free_.back();
  free_[pool.free_slot_] = last;
  last->free_slot_ = pool.free_slot_;
  free_.pop_back();
  pool.free_slot_ = kNotFree;
}

}  // namespace fanout::ix
