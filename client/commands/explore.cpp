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
#include <thread>

#include "client/commands/client.hpp"
#include "client/commands/explore_factors.hpp"
#include "client/commands/explore_store.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/report/explore.hpp"
#include "fanout/report/explore_plan.hpp"
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

// The sample's size: the input's items (files of the first folder input, or rows of the first
// file input), the items in one base mini-batch, and the rule's choice.
struct SampleSize {
  report::SampleChoice choice{};
  std::uint64_t input_items = 0;
  double bytes_per_item = 0;  // rows' mean size, for a mini_batch_size given in bytes
  std::uint64_t items_per_batch = 1;
};

// Items in one mini-batch of `cfg`: files, or rows of the mean size.
std::uint64_t batch_items(const config::JobConfig& cfg, double bytes_per_item) {
  if (cfg.mini_batch_files > 0) return cfg.mini_batch_files;
  if (cfg.mini_batch_bytes > 0 && bytes_per_item > 0) {
    return std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(static_cast<double>(cfg.mini_batch_bytes) / bytes_per_item));
  }
  return 1;
}

Expected<SampleSize> size_sample(const config::JobConfig& cfg, const std::string& spec,
                                 const report::ExploreRules& rules) {
  SampleSize s;
  for (const auto& in : cfg.inputs) {
    if (in.path.empty() || (in.type != "uri_folder" && in.type != "uri_file")) continue;
    std::error_code ec;
    if (in.type == "uri_folder") {
      for (auto it = fs::recursive_directory_iterator(in.path, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file()) ++s.input_items;
      }
    } else {
      std::ifstream f(in.path);
      std::uint64_t bytes = 0;
      for (std::string l; std::getline(f, l);) {
        ++s.input_items;
        bytes += l.size() + 1;
      }
      const auto ext = fs::path(in.path).extension().string();
      if ((ext == ".csv" || ext == ".tsv") && s.input_items > 0) --s.input_items;
      if (s.input_items > 0) s.bytes_per_item = static_cast<double>(bytes) / s.input_items;
    }
    break;
  }
  if (s.input_items == 0) {
    s.choice.items = 0;
    return s;  // sample_inputs names the empty input
  }
  auto requested = sample_count(spec, s.input_items);
  if (!requested) return Unexpected{requested.error()};
  s.items_per_batch = batch_items(cfg, s.bytes_per_item);
  s.choice = report::choose_sample(
      s.input_items, *requested, s.items_per_batch,
      workers_per_pool(cfg) * std::max<std::uint32_t>(1, cfg.instance_count), rules);
  return s;
}

// What a treatment's run makes of the sample: its mini-batches and its workers in all.
report::Capacity capacity_of(const config::JobConfig& base, std::uint64_t items,
                             std::uint64_t base_batch) {
  auto with = [base](const std::vector<ExploreFactor>& factors, const Treatment& t) {
    config::JobConfig c = base;
    (void)apply_treatment(c, factors, t);
    return c;
  };
  report::Capacity cap;
  cap.mini_batches = [with, items, base_batch, base](const std::vector<ExploreFactor>& f,
                                                     const Treatment& t) {
    const auto c = with(f, t);
    // A size in bytes: scaled from the base's items per mini-batch.
    std::uint64_t per = c.mini_batch_files;
    if (per == 0 && base.mini_batch_bytes > 0) {
      per = std::max<std::uint64_t>(1, base_batch * c.mini_batch_bytes / base.mini_batch_bytes);
    }
    per = std::max<std::uint64_t>(per, 1);
    return (items + per - 1) / per;
  };
  cap.workers = [with](const std::vector<ExploreFactor>& f, const Treatment& t) {
    const auto c = with(f, t);
    return static_cast<std::uint64_t>(workers_per_pool(c)) *
           std::max<std::uint32_t>(1, c.instance_count);
  };
  return cap;
}

// The rules of this invocation: --repeats runs of each level before a verdict (at least 2),
// at least 3 of each side in the confirmation, and a seed from --seed or the experiment's id.
report::ExploreRules explore_rules(const ExploreOptions& opt, const std::string& id) {
  report::ExploreRules r;
  r.min_reps = std::max<std::size_t>(2, opt.repeats);
  r.max_reps = std::max<std::size_t>(6, 2 * r.min_reps);
  r.confirm_reps = std::max<std::size_t>(3, opt.repeats);
  r.max_workers = 4 * std::max(1U, std::thread::hardware_concurrency());
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a of the id: the same on every --resume
  for (char c : id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  r.seed = opt.seed != 0 ? opt.seed : h;
  return r;
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

// Runs what the plan says next until it is done or the budget would be passed: a run is not
// started when the runs' mean wall time would take this invocation past it. One line per run:
// its treatment, then (once it ended) its result. Levels the walk added are stored.
report::Plan run_plan(Runner& r, Experiment& e, const report::ExploreRules& rules,
                      const report::Capacity& cap) {
  for (;;) {
    auto plan = report::plan_experiment(e.factors, e.runs, rules, cap);
    if (factors_text(plan.factors) != factors_text(e.factors)) {
      e.factors = plan.factors;
      r.store->set_factors(e.id, e.factors);
    }
    if (plan.phase == report::Phase::Done) return plan;
    const double estimate = r.done == 0 ? 0 : r.used_s / static_cast<double>(r.done);
    if (r.used_s + estimate > e.budget_s) {
      r.out_of_budget = true;
      return plan;
    }
    const std::size_t seq = e.runs.size();
    std::printf("run %zu (%s): %s%s", seq + 1,
                plan.phase == report::Phase::Confirm ? "confirm" : "screen",
                report::treatment_text(e.factors, plan.next).c_str(), r.verbose ? "\n" : ": ");
    std::fflush(stdout);
    const fs::path output = r.scratch / "runs" / std::to_string(seq) / "fanout-run.log";
    auto run = run_one(r, e, plan.next, seq, output);
    r.used_s += run.wall_s;
    ++r.done;
    r.store->add_run(e.id, seq, run);
    e.runs.push_back(std::move(run));
    print_run(e, e.runs.back(), r.verbose, output);
  }
}

// The results: the terminal summary, explore.html in the scratch folder, --write's YAML (only
// what the confirmation backs).
int report_results(const Experiment& e, const ExploreOptions& opt, const fs::path& scratch,
                   const report::Plan& plan, const report::ExploreRules& rules,
                   bool out_of_budget) {
  if (std::none_of(e.runs.begin(), e.runs.end(), [](const ExploreRun& r) { return r.ok; })) {
    std::fprintf(stderr, "error: explore %s: no run succeeded (see the jobs: fanout history)\n",
                 e.id.c_str());
    return proto::kExitFailed;
  }
  std::size_t ok = 0;
  for (const auto& run : e.runs) ok += run.ok ? 1 : 0;
  const std::string summary = fmt::format("{} runs ({} succeeded)\n", e.runs.size(), ok) +
                              report::plan_text(plan, e.runs, rules) +
                              report::explore_measures_text(e.factors, e.runs);
  std::printf("\nexperiment %s%s\n%s", e.id.c_str(),
              out_of_budget ? " (stopped at the budget: what it has so far)" : "", summary.c_str());
  const auto a = report::plan_analysis(plan, e.runs);
  const std::string page = (scratch / "explore.html").string();
  if (auto w = write_file_atomic(page, report::explore_html(e.id, e.factors, e.runs, a, summary));
      !w) {
    std::fprintf(stderr, "error: %s\n", w.error().message.c_str());
    return proto::kExitFailed;
  }
  std::printf("page written to %s\n", page.c_str());
  if (!opt.write.empty()) {
    const std::string yaml = report::confirmed_yaml(plan);
    if (yaml.empty()) {
      std::printf("nothing written to %s: no setting's gain was confirmed%s\n", opt.write.c_str(),
                  out_of_budget ? " within the budget (--resume continues)" : "");
    } else if (auto w = write_file_atomic(opt.write, yaml); !w) {
      std::fprintf(stderr, "error: %s\n", w.error().message.c_str());
      return proto::kExitFailed;
    } else {
      std::printf("confirmed settings written to %s\n", opt.write.c_str());
    }
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
  // The sample is sized before anything is recorded: too small an input ends here.
  const auto sample =
      size_sample(*cfg, opt.resume.empty() ? opt.sample : stored.sample, explore_rules(opt, ""));
  if (!sample) {
    std::fprintf(stderr, "error: %s\n", sample.error().message.c_str());
    return proto::kExitUsage;
  }
  if (sample->choice.too_small) {
    std::printf("explore: %s\nnothing was run%s\n", sample->choice.note.c_str(),
                opt.write.empty() ? "" : "; nothing written");
    return proto::kExitUsage;
  }
  if (!sample->choice.note.empty()) std::printf("note: explore: %s\n", sample->choice.note.c_str());
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
  if (auto s = sample_inputs(r.base, std::to_string(sample->choice.items), r.scratch); !s) {
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
  const auto rules = explore_rules(opt, e->id);
  const auto cap = capacity_of(r.base, sample->choice.items, sample->items_per_batch);
  const auto plan = run_plan(r, *e, rules, cap);
  st->set_state(e->id, r.out_of_budget ? "budget" : "done");
  return report_results(*e, opt, r.scratch, plan, rules, r.out_of_budget);
}

}  // namespace fanout::client
