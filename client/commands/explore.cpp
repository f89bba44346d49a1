// `fanout explore`: runs each treatment as a job through run_job_with_id(), in this process. See
// explore.hpp and docs/explore.md.
#include "client/commands/explore.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "client/commands/client.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/report/explore.hpp"
#include "fanout/report/report_data.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/schema.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/user_text.hpp"

namespace fanout::client {

namespace {

namespace fs = std::filesystem;
using report::ExploreFactor;
using report::ExploreRun;
using report::Treatment;

constexpr std::uint64_t kSampleSeed = 31;  // the sample is the same on every run and resume

// An experiment as the store holds it.
struct Experiment {
  std::string id{}, job_file{}, sample{};
  double budget_s = 0;
  std::vector<ExploreFactor> factors{};
  std::vector<ExploreRun> runs{};
};

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

// Why Curve cannot be varied for this job's runs; empty when it can: only the interchange that
// explore starts itself (the local embedded default) listens as a treatment says.
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

// The factors of a new experiment: --factors (or the defaults), each with --factor's levels.
// Curve is dropped, said once, where it cannot be varied.
Expected<std::vector<ExploreFactor>> make_factors(const config::JobConfig& cfg,
                                                  const ExploreOptions& opt,
                                                  const RunOverrides& ov) {
  std::vector<std::string> names;
  std::stringstream in(opt.factors.empty() ? "mini_batch_size,workers,prefetch,poll_ms,log_level"
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
    if (f->levels.size() > 1) out.push_back(std::move(*f));
  }
  if (out.empty())
    return make_error(ErrorCode::InvalidArgument, "explore: no factor has two levels");
  return out;
}

// Writes a treatment's levels into a copy of the job's configuration.
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

// How many of `n` things the sample keeps: "N", "P%", or 10% when empty (at least 1).
Expected<std::size_t> sample_count(const std::string& spec, std::size_t n) {
  try {
    if (spec.empty()) return std::max<std::size_t>(1, n / 10);
    if (spec.back() == '%') {
      const double p = std::stod(spec.substr(0, spec.size() - 1));
      if (p <= 0 || p > 100) throw std::invalid_argument(spec);
      return std::clamp<std::size_t>(static_cast<std::size_t>(p / 100 * static_cast<double>(n)), 1,
                                     n);
    }
    const auto c = std::stoull(spec);
    if (c == 0) throw std::invalid_argument(spec);
    return std::min<std::size_t>(c, n);
  } catch (const std::exception&) {
    return make_error(ErrorCode::InvalidArgument,
                      "explore: --sample " + spec + ": expected a count N or a percentage P%");
  }
}

// The indexes of a reproducible sample of `n` (a fixed seed), in their original order.
std::vector<std::size_t> sample_indexes(std::size_t n, std::size_t keep) {
  std::vector<std::size_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = i;
  std::mt19937_64 rng(kSampleSeed);
  std::shuffle(idx.begin(), idx.end(), rng);
  idx.resize(keep);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// A folder input: symbolic links to a sample of its files under `dir`, same relative paths.
Expected<void> sample_folder(config::InputSpec& in, const std::string& spec, const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(in.path)) {
    if (e.is_regular_file()) files.push_back(fs::relative(e.path(), in.path));
  }
  std::sort(files.begin(), files.end());
  if (files.empty())
    return make_error(ErrorCode::InvalidArgument,
                      "explore: input " + in.name + ": " + in.path + " holds no files");
  auto keep = sample_count(spec, files.size());
  if (!keep) return Unexpected{keep.error()};
  fs::remove_all(dir);
  for (auto i : sample_indexes(files.size(), *keep)) {
    fs::create_directories((dir / files[i]).parent_path());
    fs::create_symlink(fs::path(in.path) / files[i], dir / files[i]);
  }
  in.path = dir.string();
  return {};
}

// A file input: a sample of its lines (a .csv or .tsv keeps its header line) in `dir`.
Expected<void> sample_rows(config::InputSpec& in, const std::string& spec, const fs::path& dir) {
  std::ifstream f(in.path);
  if (!f)
    return make_error(ErrorCode::Io, "explore: input " + in.name + ": cannot read " + in.path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  const auto ext = fs::path(in.path).extension().string();
  const bool header = (ext == ".csv" || ext == ".tsv") && !lines.empty();
  std::string out = header ? lines.front() + "\n" : "";
  const std::size_t first = header ? 1 : 0;
  if (lines.size() <= first)
    return make_error(ErrorCode::InvalidArgument,
                      "explore: input " + in.name + ": " + in.path + " holds no rows");
  auto keep = sample_count(spec, lines.size() - first);
  if (!keep) return Unexpected{keep.error()};
  for (auto i : sample_indexes(lines.size() - first, *keep)) out += lines[first + i] + "\n";
  fs::create_directories(dir);
  const fs::path p = dir / fs::path(in.path).filename();
  if (auto w = write_file_atomic(p.string(), out); !w) return Unexpected{w.error()};
  in.path = p.string();
  return {};
}

// The sampled inputs of the job, in the experiment's scratch folder.
Expected<void> sample_inputs(config::JobConfig& cfg, const std::string& spec,
                             const fs::path& scratch) {
  for (auto& in : cfg.inputs) {
    if (in.path.empty() || (in.type != "uri_folder" && in.type != "uri_file")) continue;
    const fs::path dir = scratch / "sample" / in.name;
    auto r = in.type == "uri_folder" ? sample_folder(in, spec, dir) : sample_rows(in, spec, dir);
    if (!r) return Unexpected{r.error()};
  }
  return {};
}

// Every output of one run goes to its own folder under the scratch folder.
void scratch_outputs(config::JobConfig& cfg, const fs::path& dir) {
  for (auto& o : cfg.outputs) {
    if (o.path.empty()) continue;
    o.path =
        (o.type == "uri_file" ? dir / o.name / fs::path(o.path).filename() : dir / o.name).string();
  }
  if (!cfg.append_row_to.empty()) {
    cfg.append_row_to = (dir / fs::path(cfg.append_row_to).filename()).string();
  }
}

std::string factors_text(const std::vector<ExploreFactor>& factors) {
  std::string s;
  for (const auto& f : factors) {
    s += f.name + "\t" + std::to_string(f.base);
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

// The experiment's rows in the store (the runs in order).
class ExperimentStore {
 public:
  ExperimentStore(const std::string& path, const Logger& log)
      : db_(path, store::Db::Mode::ReadWriteCreate) {
    store::apply_migrations(db_, log);
  }

  void create(const Experiment& e) {
    store::Statement s(db_,
                       "INSERT INTO experiments (id, created, job_file, budget_s, sample, factors, "
                       "state) VALUES (?, ?, ?, ?, ?, ?, 'running')");
    s.bind(1, e.id).bind(2, unix_now()).bind(3, e.job_file).bind(4, e.budget_s);
    const std::string factors = factors_text(e.factors);  // bound, not copied: must outlive run()
    s.bind(5, e.sample).bind(6, factors);
    s.run();
  }

  // The experiment `id` and its runs; false when there is none.
  bool load(const std::string& id, Experiment& e) {
    store::Statement s(db_,
                       "SELECT job_file, budget_s, sample, factors FROM experiments WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) return false;
    e = {.id = id,
         .job_file = std::string(s.column_text(0)),
         .sample = std::string(s.column_text(2)),
         .budget_s = s.column_double(1),
         .factors = parse_factors(std::string(s.column_text(3))),
         .runs = {}};
    store::Statement r(db_,
                       "SELECT treatment, coalesce(seconds_per_item, 0), wall_s, "
                       "coalesce(job_id, 0), ok FROM experiment_runs WHERE experiment = ? "
                       "ORDER BY seq");
    r.bind(1, id);
    while (r.step()) {
      ExploreRun run{.treatment = {},
                     .seconds_per_item = r.column_double(1),
                     .wall_s = r.column_double(2),
                     .job_id = r.column_uint64(3),
                     .ok = r.column_int64(4) != 0};
      std::stringstream in{std::string(r.column_text(0))};
      for (std::size_t l; in >> l;) run.treatment.push_back(l);
      e.runs.push_back(std::move(run));
    }
    for (auto& run : e.runs) add_measures(run);
    return true;
  }

  // The measures of a run beyond time per item, from its job's attempts (computed when needed
  // rather than stored: the job's rows are the record, and no schema change is needed).
  void add_measures(ExploreRun& run) {
    if (run.job_id == 0) return;
    store::Statement a(db_,
                       "SELECT status, elapsed_s, run_s FROM attempts WHERE job_id = ? "
                       "ORDER BY id");
    a.bind(1, run.job_id);
    std::vector<double> overheads;
    double run_s = 0;
    run.attempts = run.attempts_failed = 0;
    while (a.step()) {
      ++run.attempts;
      if (a.column_text(0) != "RUN_DONE") {
        ++run.attempts_failed;
        continue;
      }
      run_s += a.column_double(2);
      overheads.push_back(std::max(0.0, a.column_double(1) - a.column_double(2)));
    }
    if (!overheads.empty()) {
      auto mid = overheads.begin() + static_cast<std::ptrdiff_t>(overheads.size() / 2);
      std::nth_element(overheads.begin(), mid, overheads.end());
      run.overhead_s = *mid;
    }
    const std::uint64_t workers = job_workers(run.job_id);
    if (workers > 0 && run.wall_s > 0) {
      run.utilisation = run_s / (static_cast<double>(workers) * run.wall_s);
    }
  }

  void add_run(const std::string& id, std::size_t seq, const ExploreRun& r) {
    store::Statement s(db_,
                       "INSERT INTO experiment_runs (experiment, seq, job_id, treatment, "
                       "seconds_per_item, wall_s, ok) VALUES (?, ?, ?, ?, ?, ?, ?)");
    s.bind(1, id).bind(2, static_cast<std::int64_t>(seq)).bind(3, r.job_id);
    const std::string treatment = treatment_key(r.treatment);  // bound, not copied
    s.bind(4, treatment).bind(5, r.seconds_per_item).bind(6, r.wall_s);
    s.bind(7, static_cast<std::int64_t>(r.ok ? 1 : 0));
    s.run();
  }

  void set_state(const std::string& id, const std::string& state) {
    store::Statement s(db_, "UPDATE experiments SET state = ? WHERE id = ?");
    s.bind(1, state).bind(2, id);
    s.run();
  }

 private:
  // The workers of the pools that ran the job's attempts; without their count, the worker
  // processes seen in its attempts.
  std::uint64_t job_workers(std::uint64_t job_id) {
    store::Statement p(db_,
                       "SELECT coalesce(sum(workers), 0) FROM pools WHERE id IN "
                       "(SELECT DISTINCT pool_id FROM attempts WHERE job_id = ?)");
    p.bind(1, job_id);
    if (p.step() && p.column_uint64(0) > 0) return p.column_uint64(0);
    store::Statement w(db_,
                       "SELECT count(DISTINCT coalesce(pool_id, 0) || '/' || coalesce(process, "
                       "worker_pid)) FROM attempts WHERE job_id = ?");
    w.bind(1, job_id);
    return w.step() ? w.column_uint64(0) : 0;
  }

  store::Db db_;
};

// What the runs need beyond the experiment: the sampled job, the run's overrides, the store.
struct Runner {
  config::JobConfig base{};
  RunOverrides ov{};
  std::string db{};
  fs::path scratch{};
  Logger log{};
  ExperimentStore* store = nullptr;
  bool verbose = false;  // the runs' own progress and summaries on the terminal
  double used_s = 0;     // wall seconds of this invocation's runs
  std::size_t done = 0;  // this invocation's runs
  bool out_of_budget = false;
};

// Sends this process's stderr (a run's progress, summary and errors, and what the processes it
// starts inherit) to a file while it lives; a run's output stays there, quiet on the terminal.
class StderrToFile {
 public:
  explicit StderrToFile(const fs::path& path) {
    std::fflush(stderr);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    saved_ = fd < 0 ? -1 : ::fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (saved_ >= 0) ::dup2(fd, 2);
    if (fd >= 0) ::close(fd);
  }
  ~StderrToFile() {
    std::fflush(stderr);
    if (saved_ < 0) return;
    ::dup2(saved_, 2);
    ::close(saved_);
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;

 private:
  int saved_ = -1;
};

// The run's overrides: how the embedded interchange listens when curve is a factor (Curve with
// keys made for the run, or plaintext TCP, --insecure, on loopback only: the interchange refuses
// it elsewhere).
RunOverrides run_overrides(const Runner& r, const Experiment& e, const Treatment& t) {
  RunOverrides ov = r.ov;
  for (std::size_t i = 0; i < e.factors.size(); ++i) {
    if (e.factors[i].name != "curve") continue;
    ov.transport = e.factors[i].levels[t[i]] == "off" ? Transport::Tcp : Transport::Curve;
  }
  return ov;
}

// Runs one treatment as a job and measures seconds per item of the whole job. The job's own
// output goes to `output` unless --verbose.
ExploreRun run_one(Runner& r, const Experiment& e, const Treatment& t, std::size_t seq,
                   const fs::path& output) {
  ExploreRun run{.treatment = t, .seconds_per_item = 0, .wall_s = 0, .job_id = 0, .ok = false};
  config::JobConfig cfg = r.base;
  if (auto a = apply_treatment(cfg, e.factors, t); !a) {
    std::fprintf(stderr, "error: %s\n", a.error().message.c_str());
    return run;
  }
  const fs::path dir = r.scratch / "runs" / std::to_string(seq);
  scratch_outputs(cfg, dir);
  cfg.name = r.base.name + "-" + e.id + "-" + std::to_string(seq);
  cfg.fanout.run_dir = (r.scratch / "logs").string();
  const RunOverrides ov = run_overrides(r, e, t);
  std::optional<StderrToFile> quiet;
  if (!r.verbose) {
    fs::create_directories(dir);
    quiet.emplace(output);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const JobRun jr = run_job_with_id(cfg, ov, r.log);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  quiet.reset();
  run.job_id = jr.job_id;
  if (auto d = report::read_report_data(r.db, run.job_id); d && d->items_succeeded > 0) {
    run.seconds_per_item = run.wall_s / static_cast<double>(d->items_succeeded);
    run.ok = jr.exit_code == proto::kExitOk && d->items_failed == 0;
  }
  r.store->add_measures(run);
  return run;
}

// The line of a finished run: its time per item, with the interval over its treatment's runs so
// far, and whether it succeeded.
void print_run(const Experiment& e, const ExploreRun& run, bool verbose, const fs::path& output) {
  std::vector<double> same;
  for (const auto& o : e.runs) {
    if (o.ok && o.treatment == run.treatment) same.push_back(o.seconds_per_item);
  }
  const auto mi = report::mean_interval(same);
  std::string line =
      run.ok ? fmt::format("{:.4g} s/item ± {}", run.seconds_per_item,
                           mi.n > 1 ? fmt::format("{:.2g} (over {} runs)", mi.half, mi.n) : "-")
             : std::string("-");
  line += run.ok ? (run.attempts_failed > 0 ? ", ok with failed attempts" : ", ok") : ", failed";
  line += fmt::format(", {:.1f} s (job {})", run.wall_s, run.job_id);
  if (!run.ok && !verbose) line += "; its output: " + output.string();
  if (verbose) {
    std::printf("  %s\n", line.c_str());
  } else {
    std::printf("%s\n", line.c_str());
  }
  std::fflush(stdout);
}

// Runs the treatments from index `from` of the experiment's runs on; stops at the budget: a run
// is not started when the runs' mean wall time would take the experiment past it. One line per
// run: its treatment, then (once it ended) its result.
void run_treatments(Runner& r, Experiment& e, const std::vector<Treatment>& design,
                    std::size_t from) {
  for (std::size_t i = 0; i < design.size() && !r.out_of_budget; ++i) {
    const std::size_t seq = from + i;
    if (seq < e.runs.size()) continue;  // done before a --resume
    const double estimate = r.done == 0 ? 0 : r.used_s / static_cast<double>(r.done);
    if (r.used_s + estimate > e.budget_s) {
      r.out_of_budget = true;
      break;
    }
    std::printf("run %zu: %s%s", seq + 1, report::treatment_text(e.factors, design[i]).c_str(),
                r.verbose ? "\n" : ": ");
    std::fflush(stdout);
    const fs::path output = r.scratch / "runs" / std::to_string(seq) / "fanout-run.log";
    auto run = run_one(r, e, design[i], seq, output);
    r.used_s += run.wall_s;
    ++r.done;
    r.store->add_run(e.id, seq, run);
    e.runs.push_back(std::move(run));
    print_run(e, e.runs.back(), r.verbose, output);
  }
}

// Stage 2: the factors that mattered, at their base and best levels, in a fractional factorial,
// then the best of those repeated; empty when no factor mattered (nothing left to learn).
std::vector<Treatment> second_stage(const Experiment& e, std::size_t repeats) {
  const auto a = report::analyse(e.factors, e.runs);
  std::vector<std::size_t> chosen, lo, hi;
  Treatment all_best(e.factors.size());  // every factor at its best level
  for (std::size_t i = 0; i < e.factors.size(); ++i) all_best[i] = e.factors[i].base;
  for (const auto& f : a.effects) {
    if (!f.matters || f.best_level == e.factors[f.factor].base || chosen.size() == 5) continue;
    chosen.push_back(f.factor);
    lo.push_back(std::min(f.best_level, e.factors[f.factor].base));
    hi.push_back(std::max(f.best_level, e.factors[f.factor].base));
    all_best[f.factor] = f.best_level;
  }
  if (chosen.empty()) return {};
  // One factor: its best level repeated measures the noise of the answer.
  if (chosen.size() == 1)
    return std::vector<Treatment>(std::max<std::size_t>(repeats, 2) - 1, all_best);
  auto design = report::fractional_factorial(e.factors, chosen, lo, hi, 8);
  for (std::size_t i = 1; i < repeats; ++i) design.push_back(all_best);
  return design;
}

// The results: the terminal summary, explore.html in the scratch folder, --write's YAML.
int report_results(const Experiment& e, const ExploreOptions& opt, const fs::path& scratch,
                   bool out_of_budget) {
  const auto a = report::analyse(e.factors, e.runs);
  if (std::none_of(e.runs.begin(), e.runs.end(), [](const ExploreRun& r) { return r.ok; })) {
    std::fprintf(stderr, "error: explore %s: no run succeeded (see the jobs: fanout history)\n",
                 e.id.c_str());
    return proto::kExitFailed;
  }
  std::printf("\nexperiment %s%s\n%s", e.id.c_str(),
              out_of_budget ? " (stopped at the budget: what it has so far)" : "",
              report::explore_text(e.factors, e.runs, a).c_str());
  const std::string page = (scratch / "explore.html").string();
  if (auto w = write_file_atomic(page, report::explore_html(e.id, e.factors, e.runs, a)); !w) {
    std::fprintf(stderr, "error: %s\n", w.error().message.c_str());
    return proto::kExitFailed;
  }
  std::printf("page written to %s\n", page.c_str());
  if (!opt.write.empty()) {
    if (auto w = write_file_atomic(opt.write, report::explore_yaml(e.factors, a.best)); !w) {
      std::fprintf(stderr, "error: %s\n", w.error().message.c_str());
      return proto::kExitFailed;
    }
    std::printf("best settings written to %s\n", opt.write.c_str());
  }
  return proto::kExitOk;
}

// A new experiment's id: the time it started.
std::string new_id() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "exp-%Y%m%d-%H%M%S", &tm);
  return buf;
}

// The experiment to run: a new one from the options, or --resume's from the store.
Expected<Experiment> open_experiment(const ExploreOptions& opt, const config::JobConfig* cfg,
                                     const RunOverrides& ov, ExperimentStore& st) {
  Experiment e;
  if (!opt.resume.empty()) {
    if (!st.load(opt.resume, e)) {
      return make_error(ErrorCode::InvalidArgument,
                        "explore: --resume " + opt.resume + ": no such experiment in the store");
    }
    return e;
  }
  auto factors = make_factors(*cfg, opt, ov);
  if (!factors) return Unexpected{factors.error()};
  e = {.id = new_id(),
       .job_file = fs::absolute(opt.job_file).string(),
       .sample = opt.sample,
       .budget_s = opt.budget_s,
       .factors = std::move(*factors),
       .runs = {}};
  st.create(e);
  return e;
}

// The job file's configuration, prepared with the command line's overrides. Nullopt after
// printing why.
std::optional<config::JobConfig> load_prepared(const std::string& job_file,
                                               const RunOverrides& ov) {
  auto cfg = config::load_job(job_file);
  if (!cfg) {
    std::fprintf(stderr, "error: %s\n", cfg.error().message.c_str());
    return std::nullopt;
  }
  if (auto r = prepare(*cfg, ov); !r) {
    std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
    return std::nullopt;
  }
  return std::move(*cfg);
}

// A fresh scratch folder for this invocation of experiment `id`: <store folder>/explore/
// <id>-XXXXXX, made by mkdtemp (mode 0700, a name no one could guess and make first), inside
// explore/, which is made 0700 when missing and must otherwise be a folder of this user closed
// to others: the runs' job files, entry-script copies and outputs go there, and whoever could
// replace them would choose what the runs execute. Error{Io} naming the folder, its owner and
// mode.
Expected<fs::path> make_scratch(const fs::path& store_dir, const std::string& id) {
  const std::string parent = (store_dir / "explore").string();
  if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
    return make_error(ErrorCode::Io, "explore: mkdir " + parent + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(parent.c_str(), &st) != 0) {
    return make_error(ErrorCode::Io, "explore: " + parent + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
    return make_error(
        ErrorCode::Io,
        fmt::format("explore: {} is not a folder of {} closed to others ({}owner {}, mode "
                    "{:04o}): another user could replace the experiment's files there; remove "
                    "it, or give --db a folder of your own",
                    parent, describe_uid(::geteuid()),
                    S_ISLNK(st.st_mode) ? "a symbolic link, " : "", describe_uid(st.st_uid),
                    st.st_mode & 07777));
  }
  std::string tmpl = parent + "/" + id + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return make_error(ErrorCode::Io, "explore: mkdtemp " + tmpl + ": " + std::strerror(errno));
  }
  return fs::path(tmpl);
}

}  // namespace

// Opens the store and the experiment, samples the input, runs both stages within the budget and
// reports.
int run_explore(const ExploreOptions& opt, const RunOverrides& ov, const Logger& log) {
  const std::string db = ov.db.empty() ? default_db_path() : ov.db;
  fs::create_directories(fs::absolute(db).parent_path());
  std::optional<ExperimentStore> st;
  try {
    st.emplace(db, log);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "error: %s\n", ex.what());
    return proto::kExitInfra;
  }
  Experiment stored;
  if (!opt.resume.empty() && !st->load(opt.resume, stored)) {
    std::fprintf(stderr, "error: explore: --resume %s: no such experiment in %s\n",
                 opt.resume.c_str(), db.c_str());
    return proto::kExitUsage;
  }
  auto cfg = load_prepared(opt.resume.empty() ? opt.job_file : stored.job_file, ov);
  if (!cfg) return proto::kExitUsage;
  auto e = open_experiment(opt, &*cfg, ov, *st);
  if (!e) {
    std::fprintf(stderr, "error: %s\n", e.error().message.c_str());
    return proto::kExitUsage;
  }
  Runner r{.base = *cfg, .ov = ov, .db = db, .scratch = {}, .log = log, .store = &*st};
  auto scratch = make_scratch(fs::absolute(db).parent_path(), e->id);
  if (!scratch) {
    std::fprintf(stderr, "error: %s\n", scratch.error().message.c_str());
    return proto::kExitInfra;
  }
  r.scratch = std::move(*scratch);
  if (auto s = sample_inputs(r.base, e->sample, r.scratch); !s) {
    std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
    return proto::kExitUsage;
  }
  // The treatments set these; the run's own settings are the job's, with the overrides applied.
  r.ov.prefetch = -1;
  r.ov.poll_ms = -1;
  r.ov.workers = 0;
  r.ov.pools = 0;
  r.ov.quiet = !opt.verbose;
  r.verbose = opt.verbose;
  r.ov.overwrite = true;
  r.ov.db = db;
  r.ov.run_dir = (r.scratch / "logs").string();
  const bool curve = std::any_of(e->factors.begin(), e->factors.end(),
                                 [](const ExploreFactor& f) { return f.name == "curve"; });
  if (curve && !opt.resume.empty() && !curve_fixed_reason(*cfg, ov).empty()) {
    std::printf("note: explore: curve's levels are not applied to this run: %s\n",
                curve_fixed_reason(*cfg, ov).c_str());
  } else if (curve) {
    // The run's own --insecure warning goes to its output file: said here, once.
    std::printf(
        "note: explore: the curve=off runs listen on plaintext TCP on 127.0.0.1 (--insecure): "
        "while one runs, any local user can connect to it\n");
  }
  // The budget is this invocation's: a --resume runs for its own --budget.
  e->budget_s = opt.budget_s;
  std::printf("experiment %s: %zu factors, budget %.0f s, store %s\n", e->id.c_str(),
              e->factors.size(), e->budget_s, db.c_str());
  const auto first = report::one_factor_design(e->factors, opt.repeats);
  run_treatments(r, *e, first, 0);
  if (!r.out_of_budget) {
    const auto second = second_stage(*e, opt.repeats);
    if (second.empty()) {
      std::printf(
          "no factor's best level differs from the base beyond the noise: no second stage\n");
    }
    run_treatments(r, *e, second, first.size());
  }
  st->set_state(e->id, r.out_of_budget ? "budget" : "done");
  return report_results(*e, opt, r.scratch, r.out_of_budget);
}

}  // namespace fanout::client
