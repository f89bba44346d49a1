// Tests of worker placement (pool/worker_placement.hpp): CPU lists, how many workers a pool
// runs and which device and CPUs each slot gets, and the environment a worker is started with.
#include "pool/worker_placement.hpp"

#include <doctest/doctest.h>
#include <sched.h>

#include <cstdlib>
#include <string>
#include <vector>

using fanout::pool::apply_placement;
using fanout::pool::check_placement;
using fanout::pool::format_cpu_list;
using fanout::pool::NodeOffer;
using fanout::pool::parse_cpu_list;
using fanout::pool::PlacementOptions;
using fanout::pool::plan_placement;
using fanout::pool::WorkerLaunch;

namespace {

NodeOffer offer(std::vector<std::string> devices, int cpus) {
  NodeOffer o;
  o.devices = std::move(devices);
  for (int c = 0; c < cpus; ++c) o.cpus.push_back(c);
  return o;
}

std::string env_of(const WorkerLaunch& l, const std::string& name) {
  for (const auto& [k, v] : l.env) {
    if (k == name) return v;
  }
  return "(unset)";
}

}  // namespace

TEST_CASE("pool.worker_placement.cpu_lists") {
  CHECK(*parse_cpu_list("0-3,8") == std::vector<int>{0, 1, 2, 3, 8});
  CHECK(*parse_cpu_list(" 5 , 1-2 ") == std::vector<int>{1, 2, 5});
  CHECK(format_cpu_list({0, 1, 2, 3, 8}) == "0-3,8");
  CHECK(format_cpu_list({1}) == "1");
  CHECK(format_cpu_list({}).empty());
  for (const char* bad : {"", "a", "3-1", "1-", "-2", "99999999"}) {
    CAPTURE(bad);
    auto r = parse_cpu_list(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.find("expected a CPU list") != std::string::npos);
  }
}

TEST_CASE("pool.worker_placement.one_worker_per_accelerator_unless_counted") {
  PlacementOptions o;
  std::string why;
  auto p = plan_placement(o, offer({"0", "1", "2", "3"}, 2), 0, why);
  CHECK(p.workers == 4);
  CHECK(why == "4 accelerators x 1 workers each");
  CHECK(p.device_variable == "CUDA_VISIBLE_DEVICES");
  REQUIRE(p.slots.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(p.slots[i].device == std::to_string(i));

  // Two per device: round-robin, so two slots share each.
  o.workers_per_accelerator = 2;
  p = plan_placement(o, offer({"GPU-a", "GPU-b"}, 2), 0, why);
  REQUIRE(p.workers == 4);
  CHECK(p.slots[0].device == "GPU-a");
  CHECK(p.slots[1].device == "GPU-b");
  CHECK(p.slots[2].device == "GPU-a");
  CHECK(p.slots[3].device == "GPU-b");

  // A count given wins; no devices: no device, the cores shared out as threads.
  p = plan_placement(PlacementOptions{}, offer({}, 8), 2, why);
  REQUIRE(p.workers == 2);
  CHECK(p.slots[0].device.empty());
  CHECK(p.slots[0].cpus.empty());
  CHECK(p.slots[0].cores == 4);
  p = plan_placement(PlacementOptions{}, offer({}, 3), 0, why);
  CHECK(p.workers == 3);

  o = PlacementOptions{};
  o.accelerator_kind = "rocm";
  CHECK(plan_placement(o, offer({"0"}, 1), 0, why).device_variable == "ROCR_VISIBLE_DEVICES");
  o.accelerator_kind = "ze";
  CHECK(plan_placement(o, offer({"0"}, 1), 0, why).device_variable == "ZE_AFFINITY_MASK");
}

TEST_CASE("pool.worker_placement.cores_per_worker_bounds_the_count") {
  PlacementOptions o;
  o.cores_per_worker = 4;
  std::string why;
  auto p = plan_placement(o, offer({}, 16), 8, why);
  CHECK(p.workers == 4);
  CHECK(why == "16 cores / cores_per_worker 4");
  CHECK(p.slots[0].cores == 4);
  p = plan_placement(o, offer({}, 2), 0, why);
  CHECK(p.workers == 1);  // never none
}

TEST_CASE("pool.worker_placement.cpu_affinity") {
  PlacementOptions o;
  std::string why;
  o.cpu_affinity = "block";
  auto p = plan_placement(o, offer({}, 8), 4, why);
  CHECK(format_cpu_list(p.slots[0].cpus) == "0-1");
  CHECK(format_cpu_list(p.slots[3].cpus) == "6-7");
  CHECK(p.slots[3].cores == 2);
  o.cpu_affinity = "alternating";
  p = plan_placement(o, offer({}, 8), 4, why);
  CHECK(format_cpu_list(p.slots[0].cpus) == "0,4");
  CHECK(format_cpu_list(p.slots[1].cpus) == "1,5");
  o.cpu_affinity = "list:3:0-2";
  p = plan_placement(o, offer({}, 8), 3, why);
  CHECK(format_cpu_list(p.slots[0].cpus) == "3");
  CHECK(format_cpu_list(p.slots[1].cpus) == "0-2");
  CHECK(format_cpu_list(p.slots[2].cpus) == "3");  // the groups repeat
  CHECK(p.slots[1].cores == 3);

  CHECK(check_placement(o).has_value());
  o.cpu_affinity = "list:x";
  auto bad = check_placement(o);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.find("--cpu-affinity: expected none, block, alternating") == 0);
  o = PlacementOptions{};
  o.accelerator_kind = "tpu";
  REQUIRE_FALSE(check_placement(o).has_value());
}

TEST_CASE("pool.worker_placement.the_jobs_environment_wins") {
  PlacementOptions o;
  o.cpu_affinity = "block";
  std::string why;
  const auto p = plan_placement(o, offer({"0", "1"}, 4), 2, why);
  WorkerLaunch l;
  auto got = apply_placement(l, p, 1, {});
  CHECK(env_of(l, "CUDA_VISIBLE_DEVICES") == "1");
  for (const char* v :
       {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"}) {
    CAPTURE(v);
    CHECK(env_of(l, v) == "2");
  }
  CHECK(l.cpus == std::vector<int>{2, 3});
  CHECK(got.device == "1");
  CHECK(got.cpus == "2-3");
  CHECK(got.threads == 2);

  // The job sets a device and a thread count: the worker keeps them, and says so.
  WorkerLaunch j;
  got = apply_placement(j, p, 0, {"CUDA_VISIBLE_DEVICES=7", "OMP_NUM_THREADS=5", "X=1"});
  CHECK(env_of(j, "CUDA_VISIBLE_DEVICES") == "(unset)");  // make_launch already put the job's
  CHECK(env_of(j, "OMP_NUM_THREADS") == "(unset)");
  CHECK(env_of(j, "MKL_NUM_THREADS") == "2");
  CHECK(got.device == "7");
  CHECK(got.threads == 5);
}

TEST_CASE("pool.worker_placement.the_pools_own_devices_and_cpus") {
  // Under Slurm the pool's own CUDA_VISIBLE_DEVICES names its GPUs; --accelerators wins.
  ::setenv("CUDA_VISIBLE_DEVICES", "3,5", 1);
  auto o = fanout::pool::node_offer(PlacementOptions{});
  CHECK(o.devices == std::vector<std::string>{"3", "5"});
  CHECK(o.devices_from == "the pool's CUDA_VISIBLE_DEVICES");
  PlacementOptions given;
  given.accelerators = "GPU-a, GPU-b";
  o = fanout::pool::node_offer(given);
  CHECK(o.devices == std::vector<std::string>{"GPU-a", "GPU-b"});
  CHECK(o.devices_from == "--accelerators");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  // The cores are the pool's CPU affinity (what a cpuset gave it), not the machine's.
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(o.cpus.size() == static_cast<std::size_t>(CPU_COUNT(&set)));
}

TEST_CASE("pool.worker_placement.pools_that_count_their_workers_number_them_apart") {
  // Two pools on one node with 4 devices and no count: each plans 4 workers, and pool 1
  // (0-based) numbers its workers after pool 0's, so their processNNN folders never meet.
  std::string why;
  const auto p = plan_placement(PlacementOptions{}, offer({"0", "1", "2", "3"}, 8), 0, why);
  REQUIRE(p.workers == 4);
  CHECK(fanout::pool::first_process_of(0, p.workers) == 1);
  CHECK(fanout::pool::first_process_of(1, p.workers) == 5);
  CHECK(fanout::pool::first_process_of(2, p.workers) == 9);
  CHECK(fanout::pool::first_process_of(1, 0) == 2);  // never the same number as pool 0
}
