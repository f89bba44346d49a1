// Where a pool's workers run on its node: which accelerator(s) each worker slot gets, which
// CPUs it is pinned to, and how many threads its numeric libraries may start. Computed once per
// pool from its options, its own CUDA_VISIBLE_DEVICES and CPU affinity (what Slurm gave it) and
// what NVML or the driver reports; a slot keeps its placement for the pool's life, so a worker
// that replaces a crashed one gets the same device. docs/resources.md describes the rules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/util/expected.hpp"
#include "fanout/util/log.hpp"
#include "pool/worker.hpp"

namespace fanout::pool {

// The pool's placement options (fanout-pool's command line; the job file's `fanout:` keys of
// the same names reach it through the launcher).
struct PlacementOptions {
  std::string accelerators{};             // --accelerators: ids, comma-separated; "": detect
  std::string accelerator_kind = "cuda";  // cuda | rocm | ze
  std::uint32_t workers_per_accelerator = 1;
  std::uint32_t cores_per_worker = 0;  // 0: the pool's cores shared out between workers
  std::string cpu_affinity = "none";   // none | block | alternating | list:A:B...
};

// What the node offers the pool.
struct NodeOffer {
  std::vector<std::string> devices{};  // accelerator ids, as the kind's variable takes them
  std::string devices_from{};          // where they came from, for the log
  std::vector<int> cpus{};             // the pool's own CPU affinity, ascending
};

// One worker slot's share.
struct SlotPlacement {
  std::string device{};     // its devices (comma-separated); "": none
  std::vector<int> cpus{};  // pinned to these; empty: not pinned
  std::uint32_t cores = 1;  // the threads its libraries get
};

struct PoolPlacement {
  std::uint32_t workers = 0;
  std::string device_variable{};  // CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, ZE_AFFINITY_MASK
  std::vector<SlotPlacement> slots{};
};

// "0-3,8" -> {0,1,2,3,8}. Error{InvalidArgument} naming the text on a malformed list.
[[nodiscard]] Expected<std::vector<int>> parse_cpu_list(std::string_view text);
// {0,1,2,3,8} -> "0-3,8", as /proc/<pid>/status Cpus_allowed_list writes it.
[[nodiscard]] std::string format_cpu_list(const std::vector<int>& cpus);
// The variable that names a kind's devices; "" for an unknown kind.
[[nodiscard]] std::string device_variable(std::string_view kind);
// Error{InvalidArgument} naming the option and value when an option is malformed.
[[nodiscard]] Expected<void> check_placement(const PlacementOptions& o);

// What this node offers: --accelerators, else the kind's variable in the pool's environment
// (Slurm's --gpus), else (cuda) NVML's devices or /proc/driver/nvidia/gpus; and the pool's own
// CPU affinity.
[[nodiscard]] NodeOffer node_offer(const PlacementOptions& o);

// The placement of `requested` workers (0: not given) over `offer`: with devices and no count,
// devices x workers_per_accelerator; without, the cores; cores_per_worker bounds the count by
// the cores. Devices go round-robin over the slots, so workers_per_accelerator workers share
// each; CPUs per cpu_affinity. `why` says how the count was chosen when it was not `requested`.
[[nodiscard]] PoolPlacement plan_placement(const PlacementOptions& o, const NodeOffer& offer,
                                           std::uint32_t requested, std::string& why);

// The number of the first worker of the pool with index `pool_index` (0-based) among pools on one
// node that each plan `planned` workers: pools with the same options on the same node plan the
// same count, so their processNNN names never meet.
[[nodiscard]] constexpr std::uint32_t first_process_of(std::uint32_t pool_index,
                                                       std::uint32_t planned) {
  return pool_index * std::max(1u, planned) + 1;
}

// Sets the slot's device variable and OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS and
// NUMEXPR_NUM_THREADS in the launch, each unless the job's environment (already in `l.env`)
// sets it, and its CPUs. Returns what the worker got, as TaskResult records it.
struct Placed {
  std::string device{}, cpus{};
  std::uint32_t threads = 0;
};
Placed apply_placement(WorkerLaunch& l, const PoolPlacement& p, std::size_t slot,
                       const std::vector<std::string>& job_env);

}  // namespace fanout::pool
