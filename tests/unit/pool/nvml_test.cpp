// Tests of the NVML sampling (pool/nvml.hpp) against a stand-in for libnvidia-ml.so.1: NVML's C
// functions answering from a table of values, as the library would for two devices.
#include "pool/nvml.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

using fanout::pool::Nvml;
using fanout::pool::NvmlApi;
using fanout::pool::NvmlMemory;
using fanout::pool::NvmlUtilization;

namespace {

struct Device {
  const char* uuid;
  const char* name;
  unsigned int util;
  unsigned long long used, total;
  bool answers;  // false: its queries fail (NVML_ERROR_GPU_IS_LOST)
};

Device g_devices[] = {
    {"GPU-11111111-2222", "NVIDIA H100 80GB HBM3", 31, 2048ull << 20, 81559ull << 20, true},
    {"GPU-33333333-4444", "NVIDIA H100 80GB HBM3", 97, 70000ull << 20, 81559ull << 20, true},
    {"GPU-lost", "", 0, 0, 0, false},
};
unsigned int g_count = 2;
int g_init_rc = 0;
int g_inits = 0, g_shutdowns = 0;
constexpr int kGpuIsLost = 15;

Device* dev(void* d) { return static_cast<Device*>(d); }

NvmlApi table_api() {
  NvmlApi a;
  a.init = [] { return ++g_inits, g_init_rc; };
  a.shutdown = [] { return ++g_shutdowns, 0; };
  a.device_count = [](unsigned int* n) { return *n = g_count, 0; };
  a.device_handle = [](unsigned int i, void** d) {
    if (i >= g_count) return 2;
    *d = &g_devices[i];
    return 0;
  };
  a.device_uuid = [](void* d, char* out, unsigned int len) {
    if (!dev(d)->answers) return kGpuIsLost;
    std::snprintf(out, len, "%s", dev(d)->uuid);
    return 0;
  };
  a.device_name = [](void* d, char* out, unsigned int len) {
    if (!dev(d)->answers) return kGpuIsLost;
    std::snprintf(out, len, "%s", dev(d)->name);
    return 0;
  };
  a.utilization = [](void* d, NvmlUtilization* u) {
    if (!dev(d)->answers) return kGpuIsLost;
    u->gpu = dev(d)->util;
    u->memory = 0;
    return 0;
  };
  a.memory = [](void* d, NvmlMemory* m) {
    if (!dev(d)->answers) return kGpuIsLost;
    m->used = dev(d)->used;
    m->total = dev(d)->total;
    m->free = m->total - m->used;
    return 0;
  };
  return a;
}

}  // namespace

TEST_CASE("pool.nvml.samples_each_device_from_the_library") {
  g_count = 2;
  g_init_rc = 0;
  g_inits = g_shutdowns = 0;
  std::string why;
  {
    auto nvml = Nvml::open(table_api(), why);
    REQUIRE(nvml.has_value());
    CHECK(g_inits == 1);
    CHECK(nvml->device_count() == 2);
    const auto s = nvml->sample();
    REQUIRE(s.size() == 2);
    CHECK(s[0].index == 0);
    CHECK(s[0].uuid == "GPU-11111111-2222");
    CHECK(s[0].name == "NVIDIA H100 80GB HBM3");
    CHECK(s[0].util_percent == 31);
    CHECK(s[0].mem_used_mb == 2048);
    CHECK(s[0].mem_total_mb == 81559);
    CHECK(s[1].index == 1);
    CHECK(s[1].util_percent == 97);
    CHECK(s[1].mem_used_mb == 70000);
  }
  CHECK(g_shutdowns == 1);  // once, by the one that was opened
}

TEST_CASE("pool.nvml.a_device_that_does_not_answer_gives_zeros") {
  g_count = 3;
  g_init_rc = 0;
  std::string why;
  auto nvml = Nvml::open(table_api(), why);
  REQUIRE(nvml.has_value());
  const auto s = nvml->sample();
  REQUIRE(s.size() == 3);
  CHECK(s[2].index == 2);
  CHECK(s[2].uuid.empty());
  CHECK(s[2].util_percent == 0);
  CHECK(s[2].mem_total_mb == 0);
  g_count = 2;
}

TEST_CASE("pool.nvml.init_failure_and_missing_functions_say_why") {
  g_init_rc = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  g_inits = g_shutdowns = 0;
  std::string why;
  CHECK_FALSE(Nvml::open(table_api(), why).has_value());
  CHECK(why == "nvmlInit failed with code 9");
  CHECK(g_shutdowns == 0);
  g_init_rc = 0;
  NvmlApi partial = table_api();
  partial.memory = nullptr;
  CHECK_FALSE(Nvml::open(partial, why).has_value());
  CHECK(why == "NVML lacks a function fanout needs");
}

TEST_CASE("pool.nvml.absent_library_says_why") {
  // This machine has no NVIDIA driver; where it has one, the library loads.
  std::string why;
  auto api = fanout::pool::load_nvml(why);
  if (api) {
    MESSAGE("libnvidia-ml.so.1 is present here");
    return;
  }
  CHECK(why.find("libnvidia-ml.so.1") != std::string::npos);
}
