// Worker placement on a node. See worker_placement.hpp and docs/resources.md.
#include "pool/worker_placement.hpp"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "fanout/config/job_spec.hpp"
#include "pool/nvml.hpp"

namespace fanout::pool {

namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    std::string part(text.substr(start, end - start));
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) out.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

bool is_number(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The groups of an affinity "list:0-1:2-3" (or "0-1:2-3"): one CPU list per worker.
Expected<std::vector<std::vector<int>>> affinity_groups(std::string_view text) {
  if (text.rfind("list:", 0) == 0) text.remove_prefix(5);
  std::vector<std::vector<int>> out;
  for (const auto& g : split(text, ':')) {
    auto cpus = parse_cpu_list(g);
    if (!cpus) return Unexpected{cpus.error()};
    out.push_back(std::move(*cpus));
  }
  if (out.empty()) {
    return make_error(ErrorCode::InvalidArgument, "an empty CPU list");
  }
  return out;
}

// The devices NVML sees, else the entries of the driver's /proc/driver/nvidia/gpus, as indices.
std::vector<std::string> detected_cuda_devices(std::string& from) {
  std::string why;
  unsigned int n = 0;
  if (auto api = load_nvml(why)) {
    if (auto nvml = Nvml::open(*api, why)) {
      n = nvml->device_count();
      from = "NVML";
    }
  }
  if (n == 0) {
    if (DIR* d = ::opendir("/proc/driver/nvidia/gpus")) {
      while (const dirent* e = ::readdir(d)) {
        if (e->d_name[0] != '.') ++n;
      }
      ::closedir(d);
      from = "/proc/driver/nvidia/gpus";
    }
  }
  std::vector<std::string> out;
  for (unsigned int i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

std::vector<int> own_cpus() {
  std::vector<int> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) out.push_back(c);
    }
  }
  if (out.empty()) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < n; ++c) out.push_back(static_cast<int>(c));
  }
  return out;
}

// The CPUs of worker `i` of `n`, each `per` cores, under `affinity` (see docs/resources.md).
std::vector<int> slot_cpus(const std::string& affinity, const std::vector<int>& avail,
                           std::size_t i, std::size_t n, std::uint32_t per) {
  std::vector<int> out;
  if (affinity == "none" || avail.empty()) return out;
  if (affinity == "block") {
    for (std::uint32_t k = 0; k < per; ++k) out.push_back(avail[(i * per + k) % avail.size()]);
  } else if (affinity == "alternating") {
    for (std::uint32_t k = 0; k < per; ++k) out.push_back(avail[(i + k * n) % avail.size()]);
  } else {
    auto groups = affinity_groups(affinity);  // checked by check_placement()
    if (groups) out = (*groups)[i % groups->size()];
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

Expected<std::vector<int>> parse_cpu_list(std::string_view text) {
  std::vector<int> out;
  auto bad = [&] {
    return make_error(ErrorCode::InvalidArgument,
                      fmt::format("expected a CPU list such as 0-3,8 (got \"{}\")", text));
  };
  const auto parts = split(text, ',');
  if (parts.empty()) return bad();
  for (const auto& p : parts) {
    const auto dash = p.find('-');
    const std::string lo = p.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : p.substr(dash + 1);
    if (!is_number(lo) || !is_number(hi) || lo.size() > 5 || hi.size() > 5) return bad();
    const int a = std::stoi(lo), b = std::stoi(hi);
    if (b < a || b >= CPU_SETSIZE) return bad();
    for (int c = a; c <= b; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string device_variable(std::string_view kind) {
  return std::string(config::accelerator_variable(kind));
}

Expected<void> check_placement(const PlacementOptions& o) {
  auto bad = [](const std::string& what) { return make_error(ErrorCode::InvalidArgument, what); };
  if (device_variable(o.accelerator_kind).empty()) {
    return bad(fmt::format("--accelerator-kind: expected cuda, rocm or ze (got \"{}\")",
                           o.accelerator_kind));
  }
  if (o.workers_per_accelerator == 0) return bad("--workers-per-accelerator: expected 1 or more");
  const auto& a = o.cpu_affinity;
  if (a != "none" && a != "block" && a != "alternating") {
    auto groups = affinity_groups(a);
    if (!groups) {
      return bad(
          fmt::format("--cpu-affinity: expected none, block, alternating or a list such as "
                      "list:0-1:2-3 (got \"{}\": {})",
                      a, groups.error().message));
    }
  }
  return {};
}

NodeOffer node_offer(const PlacementOptions& o) {
  NodeOffer offer;
  const std::string var = device_variable(o.accelerator_kind);
  if (!o.accelerators.empty()) {
    offer.devices = split(o.accelerators, ',');
    offer.devices_from = "--accelerators";
  } else if (const char* env = std::getenv(var.c_str()); env != nullptr && *env != '\0') {
    offer.devices = split(env, ',');
    offer.devices_from = "the pool's " + var;
  } else if (o.accelerator_kind == "cuda") {
    offer.devices = detected_cuda_devices(offer.devices_from);
  }
  offer.cpus = own_cpus();
  return offer;
}

PoolPlacement plan_placement(const PlacementOptions& o, const NodeOffer& offer,
                             std::uint32_t requested, std::string& why) {
  PoolPlacement p;
  p.device_variable = device_variable(o.accelerator_kind);
  const auto cores = static_cast<std::uint32_t>(std::max<std::size_t>(1, offer.cpus.size()));
  const auto ndev = static_cast<std::uint32_t>(offer.devices.size());
  std::uint32_t n = requested;
  if (n == 0 && ndev > 0) {
    n = ndev * o.workers_per_accelerator;
    why = fmt::format("{} accelerators x {} workers each", ndev, o.workers_per_accelerator);
  } else if (n == 0) {
    n = cores;
    why = fmt::format("{} cores", cores);
  }
  if (o.cores_per_worker > 0 && n * o.cores_per_worker > cores) {
    n = std::max(1u, cores / o.cores_per_worker);
    why = fmt::format("{} cores / cores_per_worker {}", cores, o.cores_per_worker);
  }
  p.workers = n;
  const std::uint32_t per = o.cores_per_worker > 0 ? o.cores_per_worker : std::max(1u, cores / n);
  for (std::size_t i = 0; i < n; ++i) {
    SlotPlacement s;
    if (ndev > 0) s.device = offer.devices[i % ndev];
    s.cpus = slot_cpus(o.cpu_affinity, offer.cpus, i, n, per);
    s.cores = s.cpus.empty() ? per : static_cast<std::uint32_t>(s.cpus.size());
    p.slots.push_back(std::move(s));
  }
  return p;
}

Placed apply_placement(WorkerLaunch& l, const PoolPlacement& p, std::size_t slot,
                       const std::vector<std::string>& job_env) {
  Placed got;
  if (slot >= p.slots.size()) return got;
  const SlotPlacement& s = p.slots[slot];
  auto job_value = [&](const std::string& name) -> const std::string* {
    for (const auto& kv : job_env) {
      if (kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 &&
          kv[name.size()] == '=') {
        return &kv;
      }
    }
    return nullptr;
  };
  auto value_of = [&](const std::string& kv) { return kv.substr(kv.find('=') + 1); };
  if (const std::string* v = job_value(p.device_variable)) {
    got.device = value_of(*v);  // the job chose: it gets what it asked for
  } else if (!s.device.empty()) {
    l.env.emplace_back(p.device_variable, s.device);
    got.device = s.device;
  }
  for (const char* name :
       {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"}) {
    if (job_value(name) == nullptr) l.env.emplace_back(name, std::to_string(s.cores));
  }
  if (const std::string* v = job_value("OMP_NUM_THREADS")) {
    got.threads = static_cast<std::uint32_t>(std::strtoul(value_of(*v).c_str(), nullptr, 10));
  } else {
    got.threads = s.cores;
  }
  l.cpus = s.cpus;
  got.cpus = format_cpu_list(s.cpus);
  return got;
}

}  // namespace fanout::pool
