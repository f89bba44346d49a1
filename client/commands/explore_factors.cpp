// The factors of `fanout explore`. See explore_factors.hpp and docs/explore.md.
#include "client/commands/explore_factors.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "client/commands/client.hpp"

namespace fanout::client {

using report::ExploreFactor;
using report::Treatment;

namespace {

// `base` inserted into `levels`, numbers sorted; the factor with base's index.
ExploreFactor numeric_factor(std::string name, std::vector<std::uint64_t> levels,
                             std::uint64_t base) {
  levels.push_back(base);
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  ExploreFactor f{.name = std::move(name), .levels = {}, .base = 0};
  for (std::size_t i = 0; i < levels.size(); ++i) {
    if (levels[i] == base) f.base = i;
    f.levels.push_back(std::to_string(levels[i]));
  }
  return f;
}

// The base (the job's own) level of a factor, as text.
std::string base_level(const config::JobConfig& cfg, const std::string& name) {
  if (name == "mini_batch_size") return cfg.mini_batch_size;
  if (name == "workers") return std::to_string(workers_per_pool(cfg));
  if (name == "pools") return std::to_string(cfg.instance_count);
  if (name == "prefetch") return std::to_string(cfg.fanout.prefetch);
  if (name == "poll_ms") return std::to_string(cfg.fanout.poll_ms);
  if (name == "log_level") {
    return cfg.fanout.log_level.empty() ? cfg.logging_level : cfg.fanout.log_level;
  }
  if (name == "cpu_affinity") {
    return cfg.fanout.placement.cpu_affinity.empty() ? "none" : cfg.fanout.placement.cpu_affinity;
  }
  if (name == "cores_per_worker") return std::to_string(cfg.fanout.placement.cores_per_worker);
  if (name == "curve") return "on";  // the base: an encrypted TCP interchange
  return {};
}

// The default levels of a factor around the job's own setting.
Expected<ExploreFactor> default_factor(const config::JobConfig& cfg, const std::string& name) {
  if (name == "mini_batch_size") {
    if (cfg.mini_batch_files == 0) {
      return make_error(ErrorCode::InvalidArgument,
                        "explore: mini_batch_size " + cfg.mini_batch_size +
                            " is a size; give its levels with --factor mini_batch_size=...");
    }
    const auto b = cfg.mini_batch_files;
    return numeric_factor(name, {std::max<std::uint64_t>(1, b / 4), b * 4}, b);
  }
  if (name == "workers") {
    const auto w = workers_per_pool(cfg);
    return numeric_factor(name, {std::max<std::uint64_t>(1, w / 2), 2ULL * w}, w);
  }
  if (name == "pools") return numeric_factor(name, {1, 2}, cfg.instance_count);
  if (name == "prefetch") return numeric_factor(name, {0, 2, 8}, cfg.fanout.prefetch);
  if (name == "poll_ms") return numeric_factor(name, {1, 10, 50}, cfg.fanout.poll_ms);
  if (name == "cores_per_worker") {
    return numeric_factor(name, {1, 2}, cfg.fanout.placement.cores_per_worker);
  }
  const std::string base = base_level(cfg, name);
  std::vector<std::string> levels;
  if (name == "log_level") levels = {"WARNING", "INFO", "DEBUG"};
  if (name == "cpu_affinity") levels = {"none", "block"};
  if (name == "curve") levels = {"on", "off"};
  if (levels.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      "explore: --factors: unknown factor '" + name +
                          "' (mini_batch_size, workers, pools, prefetch, poll_ms, log_level, "
                          "cpu_affinity, cores_per_worker, curve)");
  }
  if (std::find(levels.begin(), levels.end(), base) == levels.end())
    levels.insert(levels.begin(), base);
  const auto at = std::find(levels.begin(), levels.end(), base) - levels.begin();
  return ExploreFactor{name, levels, static_cast<std::size_t>(at)};
}

// The user's levels `NAME=L1,L2,...`; the job's own level is added when missing (first).
Expected<ExploreFactor> named_levels(const config::JobConfig& cfg, const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq + 1 == spec.size()) {
    return make_error(ErrorCode::InvalidArgument,
                      "explore: --factor " + spec + ": expected NAME=LEVEL,LEVEL,...");
  }
  const std::string name = spec.substr(0, eq);
  if (auto d = default_factor(cfg, name); !d && name != "mini_batch_size")
    return Unexpected{d.error()};
  ExploreFactor f{.name = name, .levels = {}, .base = 0};
  std::stringstream in(spec.substr(eq + 1));
  for (std::string l; std::getline(in, l, ',');) {
    if (!l.empty()) f.levels.push_back(l);
  }
  if (name == "curve") {
    for (const auto& l : f.levels) {
      if (l != "on" && l != "off") {
        return make_error(
            ErrorCode::InvalidArgument,
            "explore: --factor " + spec + ": curve's levels are on and off, not '" + l + "'");
      }
    }
  }
  const std::string base = base_level(cfg, name);
  auto it = std::find(f.levels.begin(), f.levels.end(), base);
  if (it == f.levels.end()) it = f.levels.insert(f.levels.begin(), base);
  f.base = static_cast<std::size_t>(it - f.levels.begin());
  return f;
}

}  // namespace

std::string curve_fixed_reason(const config::JobConfig& cfg, const RunOverrides& ov) {
  if (!ov.interchange.empty()) {
    return "the runs go to --interchange " + ov.interchange + ", which listens as it was started";
  }
  if (cfg.fanout.launch.kind != "local") {
    return "pools launched by " + cfg.fanout.launch.kind +
           " always reach the interchange with Curve";
  }
  return {};
}

Expected<std::vector<ExploreFactor>> make_factors(const config::JobConfig& cfg,
                                                  const ExploreOptions& opt,
                                                  const RunOverrides& ov) {
  std::vector<std::string> names;
  std::stringstream in(opt.factors.empty() ? "mini_batch_size,workers,prefetch,poll_ms"
                                           : opt.factors);
  for (std::string n; std::getline(in, n, ',');) {
    if (!n.empty()) names.push_back(n);
  }
  for (const auto& spec : opt.factor_levels) {
    const std::string n = spec.substr(0, spec.find('='));
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::vector<ExploreFactor> out;
  for (const auto& n : names) {
    auto it = std::find_if(opt.factor_levels.begin(), opt.factor_levels.end(),
                           [&](const std::string& s) { return s.substr(0, s.find('=')) == n; });
    auto f = it != opt.factor_levels.end() ? named_levels(cfg, *it) : default_factor(cfg, n);
    if (!f) return Unexpected{f.error()};
    if (n == "curve" && !curve_fixed_reason(cfg, ov).empty()) {
      std::printf("note: explore: curve is not a factor of this experiment: %s\n",
                  curve_fixed_reason(cfg, ov).c_str());
      continue;
    }
    f->initial = f->levels.size();
    if (f->levels.size() > 1) out.push_back(std::move(*f));
  }
  if (out.empty())
    return make_error(ErrorCode::InvalidArgument, "explore: no factor has two levels");
  return out;
}

Expected<void> apply_treatment(config::JobConfig& cfg, const std::vector<ExploreFactor>& factors,
                               const Treatment& t) {
  for (std::size_t i = 0; i < factors.size(); ++i) {
    const auto& name = factors[i].name;
    const auto& v = factors[i].levels[t[i]];
    try {
      if (name == "mini_batch_size") {
        auto b = config::parse_batch_size(v);
        if (!b) return Unexpected{b.error()};
        cfg.mini_batch_size = v;
        cfg.mini_batch_size_written = true;
        cfg.mini_batch_files = b->files;
        cfg.mini_batch_bytes = b->bytes;
      } else if (name == "workers") {
        cfg.fanout.workers = static_cast<std::uint32_t>(std::stoul(v));
      } else if (name == "pools") {
        cfg.instance_count = static_cast<std::uint32_t>(std::stoul(v));
      } else if (name == "prefetch") {
        cfg.fanout.prefetch = static_cast<std::uint32_t>(std::stoul(v));
      } else if (name == "poll_ms") {
        cfg.fanout.poll_ms = static_cast<std::uint32_t>(std::stoul(v));
      } else if (name == "log_level") {
        cfg.fanout.log_level = v;
      } else if (name == "cpu_affinity") {
        cfg.fanout.placement.cpu_affinity = v == "none" ? "" : v;
      } else if (name == "cores_per_worker") {
        cfg.fanout.placement.cores_per_worker = static_cast<std::uint32_t>(std::stoul(v));
      }  // curve is not the job's setting: run_overrides() sets how the interchange listens
    } catch (const std::exception&) {
      return make_error(ErrorCode::InvalidArgument,
                        "explore: factor " + name + ": level '" + v + "' is not a number");
    }
  }
  return {};
}

std::string factors_text(const std::vector<ExploreFactor>& factors) {
  std::string s;
  for (const auto& f : factors) {
    s += f.name + "\t" + std::to_string(f.base);
    if (f.initial != 0 && f.initial != f.levels.size()) s += "/" + std::to_string(f.initial);
    for (const auto& l : f.levels) s += "\t" + l;
    s += "\n";
  }
  return s;
}

std::vector<ExploreFactor> parse_factors(const std::string& text) {
  std::vector<ExploreFactor> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::stringstream ls(line);
    ExploreFactor f;
    std::string base;
    std::getline(ls, f.name, '\t');
    std::getline(ls, base, '\t');
    f.base = std::stoul(base);
    if (const auto slash = base.find('/'); slash != std::string::npos) {
      f.initial = std::stoul(base.substr(slash + 1));
    }
    for (std::string l; std::getline(ls, l, '\t');) f.levels.push_back(l);
    out.push_back(std::move(f));
  }
  return out;
}

std::string treatment_key(const Treatment& t) {
  std::string s;
  for (auto l : t) s += (s.empty() ? "" : " ") + std::to_string(l);
  return s;
}

}  // namespace fanout::client
