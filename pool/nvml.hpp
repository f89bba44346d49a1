// The NVIDIA management library (NVML), loaded at run time with dlopen("libnvidia-ml.so.1"), so
// that fanout has no build dependency on it and runs the same where it is absent. The pool asks
// it which devices the node has (worker_placement.hpp) and how busy they are (the resource
// monitor's gpu samples, docs/protocol.md GpuUsage). Not thread-safe; owned by one caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fanout/protocol/messages.hpp"

namespace fanout::pool {

// NVML's structs, as nvml.h lays them out.
struct NvmlUtilization {
  unsigned int gpu = 0;  // percent of the last sample period a kernel ran
  unsigned int memory = 0;
};
struct NvmlMemory {
  unsigned long long total = 0;  // bytes
  unsigned long long free = 0;
  unsigned long long used = 0;
};

// The NVML functions fanout calls, by their C signatures (a device handle is an opaque
// pointer; every function returns nvmlReturn_t, 0 = success). load_nvml() fills it from the
// library; a test fills it with functions of its own that return a table of values.
struct NvmlApi {
  int (*init)() = nullptr;                                            // nvmlInit_v2
  int (*shutdown)() = nullptr;                                        // nvmlShutdown
  int (*device_count)(unsigned int* count) = nullptr;                 // nvmlDeviceGetCount_v2
  int (*device_handle)(unsigned int index, void** device) = nullptr;  // ..GetHandleByIndex_v2
  int (*device_uuid)(void* device, char* uuid, unsigned int length) = nullptr;  // ..GetUUID
  int (*device_name)(void* device, char* name, unsigned int length) = nullptr;  // ..GetName
  int (*utilization)(void* device, NvmlUtilization* u) = nullptr;  // ..GetUtilizationRates
  int (*memory)(void* device, NvmlMemory* m) = nullptr;            // ..GetMemoryInfo
};

// An initialised NVML: calls shutdown on destruction. Move-only.
class Nvml final {
 public:
  // Initialises `api`; nullopt with `why` set when init fails or a function is missing.
  [[nodiscard]] static std::optional<Nvml> open(const NvmlApi& api, std::string& why);
  Nvml(Nvml&& o) noexcept;
  Nvml& operator=(Nvml&&) = delete;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml();

  // The devices now, by NVML index: one entry per device whose handle could be read (a device
  // NVML cannot query gives zeros, not a gap in the indices).
  [[nodiscard]] std::vector<proto::GpuUsage> sample() const;
  [[nodiscard]] unsigned int device_count() const;

 private:
  explicit Nvml(const NvmlApi& api) : api_(api) {}
  NvmlApi api_{};
  bool open_ = false;
};

// libnvidia-ml.so.1's functions; nullopt with `why` ("libnvidia-ml.so.1: cannot open shared
// object file...") where the library is absent or lacks one of them. The library stays loaded.
[[nodiscard]] std::optional<NvmlApi> load_nvml(std::string& why);

}  // namespace fanout::pool
