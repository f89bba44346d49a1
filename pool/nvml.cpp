// NVML through dlopen. See nvml.hpp.
#include "pool/nvml.hpp"

#include <dlfcn.h>

#include <array>
#include <string>
#include <type_traits>
#include <utility>

namespace fanout::pool {

namespace {

constexpr double kMb = 1024.0 * 1024.0;

bool complete(const NvmlApi& a) {
  return a.init != nullptr && a.shutdown != nullptr && a.device_count != nullptr &&
         a.device_handle != nullptr && a.device_uuid != nullptr && a.device_name != nullptr &&
         a.utilization != nullptr && a.memory != nullptr;
}

}  // namespace

std::optional<Nvml> Nvml::open(const NvmlApi& api, std::string& why) {
  if (!complete(api)) {
    why = "NVML lacks a function fanout needs";
    return std::nullopt;
  }
  if (const int rc = api.init(); rc != 0) {
    why = "nvmlInit failed with code " + std::to_string(rc);
    return std::nullopt;
  }
  Nvml n(api);
  n.open_ = true;
  return n;
}

Nvml::Nvml(Nvml&& o) noexcept : api_(o.api_), open_(std::exchange(o.open_, false)) {}

Nvml::~Nvml() {
  if (open_) (void)api_.shutdown();
}

unsigned int Nvml::device_count() const {
  unsigned int n = 0;
  return api_.device_count(&n) == 0 ? n : 0;
}

std::vector<proto::GpuUsage> Nvml::sample() const {
  std::vector<proto::GpuUsage> out;
  const unsigned int n = device_count();
  out.reserve(n);
  for (unsigned int i = 0; i < n; ++i) {
    proto::GpuUsage g;
    g.index = i;
    void* dev = nullptr;
    if (api_.device_handle(i, &dev) == 0) {
      std::array<char, 96> text{};
      if (api_.device_uuid(dev, text.data(), text.size()) == 0) g.uuid = text.data();
      text.fill('\0');
      if (api_.device_name(dev, text.data(), text.size()) == 0) g.name = text.data();
      NvmlUtilization u;
      if (api_.utilization(dev, &u) == 0) g.util_percent = u.gpu;
      NvmlMemory m;
      if (api_.memory(dev, &m) == 0) {
        g.mem_used_mb = static_cast<double>(m.used) / kMb;
        g.mem_total_mb = static_cast<double>(m.total) / kMb;
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::optional<NvmlApi> load_nvml(std::string& why) {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    why = e != nullptr ? e : "libnvidia-ml.so.1: cannot be loaded";
    return std::nullopt;
  }
  NvmlApi a;
  // Each symbol is cast to the signature nvml.h gives it (see NvmlApi).
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
    if (fn == nullptr && why.empty()) why = std::string("libnvidia-ml.so.1 has no ") + name;
  };
  why.clear();
  sym(a.init, "nvmlInit_v2");
  sym(a.shutdown, "nvmlShutdown");
  sym(a.device_count, "nvmlDeviceGetCount_v2");
  sym(a.device_handle, "nvmlDeviceGetHandleByIndex_v2");
  sym(a.device_uuid, "nvmlDeviceGetUUID");
  sym(a.device_name, "nvmlDeviceGetName");
  sym(a.utilization, "nvmlDeviceGetUtilizationRates");
  sym(a.memory, "nvmlDeviceGetMemoryInfo");
  if (!why.empty()) return std::nullopt;
  return a;
}

}  // namespace fanout::pool
