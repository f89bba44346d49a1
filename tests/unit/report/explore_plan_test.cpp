// `fanout explore`'s sequential plan on simulated jobs whose best settings are known by
// construction: the time of a run is a formula of its treatment times seeded noise, passed in;
// no process runs.
#include "fanout/report/explore_plan.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>

using namespace fanout::report;

namespace {

// A simulated job: the seconds per item of a treatment (before noise) and its utilisation.
struct Job {
  std::vector<ExploreFactor> factors;
  std::function<double(const std::vector<double>&)> cost;  // numeric level values -> s/item
  double noise = 0.03;                                     // sd of the log time
  double spike = 0;  // the share of runs slowed 1.8x (another process took the cores)
  double utilisation = 0.5;
  std::function<bool(const Treatment&)> fails = [](const Treatment&) { return false; };
  std::uint64_t items = 200;
};

std::vector<double> values(const std::vector<ExploreFactor>& f, const Treatment& t) {
  std::vector<double> v;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const auto& l = f[i].levels[t[i]];
    v.push_back(std::isdigit(static_cast<unsigned char>(l[0])) ? std::stod(l) : 0.0);
  }
  return v;
}

// Capacity: mini_batch_size is the factor named so (else 1 item), workers the one named so.
Capacity capacity(std::uint64_t items) {
  auto level = [](const std::vector<ExploreFactor>& f, const Treatment& t, const char* name,
                  std::uint64_t dflt) -> std::uint64_t {
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (f[i].name == name) return std::stoull(f[i].levels[t[i]]);
    }
    return dflt;
  };
  Capacity c;
  c.mini_batches = [=](const std::vector<ExploreFactor>& f, const Treatment& t) {
    const auto m = level(f, t, "mini_batch_size", 1);
    return (items + m - 1) / m;
  };
  c.workers = [=](const std::vector<ExploreFactor>& f, const Treatment& t) {
    return level(f, t, "workers", 2);
  };
  return c;
}

struct Outcome {
  Plan plan;
  std::vector<ExploreRun> runs;
};

// Runs the plan to its end (at most `limit` runs) on the simulated job.
Outcome simulate(Job job, std::uint64_t seed, ExploreRules rules = {}, std::size_t limit = 400) {
  rules.seed = seed;
  if (rules.max_workers == 0) rules.max_workers = 8;
  std::mt19937_64 rng(seed * 7919 + 1);
  std::normal_distribution<double> z(0, 1);
  Outcome o;
  for (;;) {
    // The factors as the plan last left them (levels the walk added), as the client stores them.
    const auto fac = o.plan.factors.empty() ? job.factors : o.plan.factors;
    o.plan = plan_experiment(fac, o.runs, rules, capacity(job.items));
    if (o.plan.phase == Phase::Done || o.runs.size() >= limit) return o;
    const auto& t = o.plan.next;
    double spi = job.cost(values(o.plan.factors, t)) * std::exp(job.noise * z(rng));
    if (job.spike > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < job.spike) spi *= 1.8;
    o.runs.push_back({.treatment = t,
                      .seconds_per_item = spi,
                      .wall_s = spi * static_cast<double>(job.items),
                      .job_id = o.runs.size() + 1,
                      .ok = true,
                      .overhead_s = 0,
                      .utilisation = job.utilisation,
                      .attempts = 10,
                      .attempts_failed = job.fails(t) ? 1U : 0U});
  }
}

std::string winner_level(const Plan& p, const std::string& name) {
  for (std::size_t i = 0; i < p.factors.size(); ++i) {
    if (p.factors[i].name == name) return p.factors[i].levels[p.winner[i]];
  }
  return "";
}

ExploreFactor factor(std::string name, std::vector<std::string> levels, std::size_t base) {
  ExploreFactor f{.name = std::move(name), .levels = std::move(levels), .base = base};
  f.initial = f.levels.size();
  return f;
}

}  // namespace

TEST_CASE("report.explore_plan.sample_is_sized_for_k_minibatches_per_worker") {
  struct Row {
    std::uint64_t input, requested, per_batch, workers, items;
    bool too_small, grown;
  };
  const Row rows[] = {
      {4, 1, 5, 2, 4, true, false},          // file-scoring: 4 files, 5 per mini-batch, 2 workers
      {2000, 200, 1, 2, 200, false, false},  // the fixed-cost job: 10% is already enough
      {100, 10, 1, 2, 32, false, true},      // grown to 4 x K x workers x mini_batch_size
      {30, 3, 1, 2, 30, false, true},        // grown to the whole input
      {40, 4, 5, 2, 40, false, true},        // just enough: 8 mini-batches for 2 workers
      {39, 4, 5, 2, 39, true, false},        // one file short
  };
  for (const auto& r : rows) {
    CAPTURE(r.input);
    CAPTURE(r.requested);
    const auto c = choose_sample(r.input, r.requested, r.per_batch, r.workers, ExploreRules{});
    CHECK(c.items == r.items);
    CHECK(c.too_small == r.too_small);
    CHECK(c.grown == r.grown);
    if (r.too_small) CHECK(c.note.find("too small") != std::string::npos);
  }
}

TEST_CASE("report.explore_plan.next_level_steps_and_limits") {
  struct Row {
    const char *factor, *value;
    bool up;
    const char* next;
  };
  const Row rows[] = {
      {"mini_batch_size", "1", true, "4"},  {"mini_batch_size", "16", true, "64"},
      {"mini_batch_size", "4", false, "1"}, {"mini_batch_size", "1", false, ""},
      {"workers", "4", true, "8"},          {"workers", "1", false, ""},
      {"prefetch", "0", true, "2"},         {"prefetch", "2", true, "8"},
      {"prefetch", "0", false, ""},         {"poll_ms", "10", false, "2"},
      {"poll_ms", "1", false, ""},          {"log_level", "INFO", true, ""},
      {"mini_batch_size", "1mb", true, ""},
  };
  for (const auto& r : rows) {
    CAPTURE(r.factor);
    CAPTURE(r.value);
    CHECK(next_level(r.factor, r.value, r.up) == r.next);
  }
}

TEST_CASE("report.explore_plan.fixed_cost_per_minibatch_walks_mini_batch_size_past_16") {
  // 20 ms per mini-batch + 0.2 ms per item, 2 workers: the larger the mini-batch the better.
  Job job{.factors = {factor("mini_batch_size", {"1", "4"}, 0)},
          .cost = [](const std::vector<double>& v) { return (0.020 / v[0] + 0.0002) / 2; }};
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    const auto o = simulate(job, seed);
    CHECK(std::stoull(winner_level(o.plan, "mini_batch_size")) >= 16);
    CHECK(o.plan.confirmed);
    // 200 items, 2 workers, K = 4: 64 would make 4 mini-batches, 2 per worker: the walk stops
    // at the sample's limit and says so.
    bool capped = false;
    for (const auto& n : o.plan.notes)
      capped = capped || n.find("larger --sample") != std::string::npos;
    CHECK(capped);
    const auto yaml = confirmed_yaml(o.plan);
    CHECK(yaml.find("mini_batch_size: \"16\"") != std::string::npos);
    // A --resume replays the runs on the stored factors (the walk's levels appended, `initial`
    // kept): the same plan, to the same end.
    const auto again = plan_experiment(
        o.plan.factors, o.runs, ExploreRules{.max_workers = 8, .seed = seed}, capacity(job.items));
    CHECK(again.phase == Phase::Done);
    CHECK(again.winner == o.plan.winner);
    CHECK(again.factors[0].levels == o.plan.factors[0].levels);
    CHECK(again.confirmed);
    // explore.html's best is the confirmed winner, its speed-up the confirmation's; no
    // interaction without a balanced block.
    const auto a = plan_analysis(o.plan, o.runs);
    CHECK(a.best == o.plan.winner);
    CHECK(a.speedup.mean > 2);
    CHECK(a.interactions.empty());
    CHECK(yaml.find("# mini_batch_size 1 -> 16: time per item -") != std::string::npos);
  }
}

TEST_CASE("report.explore_plan.cpu_bound_picks_workers_equal_to_cores") {
  // Two cores: more workers than 2 gain nothing.
  Job job{.factors = {factor("workers", {"1", "2", "4"}, 0)},
          .cost = [](const std::vector<double>& v) { return 0.01 / std::min(v[0], 2.0); }};
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    const auto o = simulate(job, seed);
    CHECK(winner_level(o.plan, "workers") == "2");
    CHECK(o.plan.confirmed);
  }
}

TEST_CASE("report.explore_plan.sleep_bound_walks_workers_past_the_cores_to_the_limit") {
  Job job{.factors = {factor("workers", {"1", "2", "4"}, 1)},
          .cost = [](const std::vector<double>& v) { return 0.05 / v[0]; },
          .items = 400};
  const auto o = simulate(job, 3);
  CHECK(winner_level(o.plan, "workers") == "8");  // rules.max_workers = 8 in simulate()
  CHECK(o.plan.confirmed);
  bool limit = false;
  for (const auto& n : o.plan.notes) limit = limit || n.find("limit of 8") != std::string::npos;
  CHECK(limit);
}

TEST_CASE("report.explore_plan.a_setting_without_effect_is_left_alone_and_nothing_written") {
  Job job{.factors = {factor("log_level", {"INFO", "WARNING", "DEBUG"}, 0)},
          .cost = [](const std::vector<double>&) { return 0.01; },
          .noise = 0.05};
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    const auto o = simulate(job, seed);
    // A screening verdict can be a false alarm (about one in twenty); the confirmation is the
    // guard: nothing is written.
    CHECK_FALSE(o.plan.confirmed);
    CHECK(confirmed_yaml(o.plan).empty());
    CHECK(plan_analysis(o.plan, o.runs).best == Treatment{0});    // the page names no best either
    for (const auto& c : o.plan.candidates) CHECK(c.cmp.n >= 3);  // never judged on fewer runs
  }
}

TEST_CASE("report.explore_plan.rounds_interleave_the_base_in_shuffled_order") {
  Job job{.factors = {factor("prefetch", {"0", "2", "8"}, 0)},
          .cost = [](const std::vector<double>&) { return 0.01; }};
  const auto o = simulate(job, 11, {}, 9);  // three rounds of three
  REQUIRE(o.runs.size() == 9);
  bool some_base_not_first = false;
  for (std::size_t round = 0; round < 3; ++round) {
    std::size_t base = 0;
    for (std::size_t i = 3 * round; i < 3 * round + 3; ++i) base += o.runs[i].treatment[0] == 0;
    CHECK(base == 1);  // one base run in every round
    some_base_not_first = some_base_not_first || o.runs[3 * round].treatment[0] != 0;
  }
  CHECK(some_base_not_first);
  // The same runs replayed give the same next step: a --resume continues the same plan.
  std::vector<ExploreRun> prefix(o.runs.begin(), o.runs.begin() + 5);
  const auto fac = job.factors;
  const auto p = plan_experiment(fac, prefix, ExploreRules{.seed = 11}, capacity(200));
  CHECK(p.next == o.runs[5].treatment);
}

TEST_CASE("report.explore_plan.one_run_never_decides") {
  Job job{.factors = {factor("mini_batch_size", {"1", "4"}, 0)},
          .cost = [](const std::vector<double>& v) { return 0.02 / v[0]; }};
  const auto o = simulate(job, 2, {}, 2);  // one round: the base and mini_batch_size 4, once
  REQUIRE(o.plan.candidates.size() == 1);
  CHECK(o.plan.candidates[0].verdict == Verdict::Pending);
  CHECK(confirmed_yaml(o.plan).empty());
}

TEST_CASE("report.explore_plan.levels_that_do_not_fit_the_sample_are_not_tried") {
  Job job{.factors = {factor("mini_batch_size", {"1", "4", "64"}, 0)},
          .cost = [](const std::vector<double>& v) { return 0.02 / v[0]; }};
  const auto o = simulate(job, 1, {}, 0);
  REQUIRE(o.plan.candidates.size() == 1);  // 64: 4 mini-batches of 200 items for 2 workers
  REQUIRE_FALSE(o.plan.notes.empty());
  CHECK(o.plan.notes[0].find("mini_batch_size 64 not tried") != std::string::npos);
}

TEST_CASE("report.explore_plan.failures_and_low_utilisation_are_never_called_faster") {
  Job failing{.factors = {factor("workers", {"2", "4"}, 0)},
              .cost = [](const std::vector<double>& v) { return 0.05 / v[0]; },
              .fails = [](const Treatment& t) { return t[0] == 1; }};
  auto o = simulate(failing, 1);
  CHECK(o.plan.candidates[0].verdict == Verdict::Failures);
  CHECK(o.plan.winner == Treatment{0});
  Job idle{.factors = {factor("workers", {"2", "4"}, 0)},
           .cost = [](const std::vector<double>& v) { return 0.05 / v[0]; },
           .utilisation = 0.001};
  o = simulate(idle, 1);
  CHECK(o.plan.candidates[0].verdict == Verdict::Unsupported);
  CHECK(confirmed_yaml(o.plan).empty());
}

TEST_CASE("report.explore_plan.interactions_only_from_a_balanced_replicated_block") {
  // Two factors that both help, and together less than the product (an interaction).
  Job job{.factors = {factor("mini_batch_size", {"1", "4"}, 0), factor("workers", {"2", "4"}, 0)},
          .cost =
              [](const std::vector<double>& v) {
                const double t = 0.02 / v[0] / v[1];
                return v[0] > 1 && v[1] > 2 ? t * 1.5 : t;
              },
          .items = 400};
  ExploreRules rules;
  rules.max_workers = 4;
  const auto o = simulate(job, 5, rules);
  // Before the winner runs (a single-factor screen), no interaction can be measured.
  std::vector<ExploreRun> screen;
  for (const auto& r : o.runs) {
    if (r.treatment[0] == 0 || r.treatment[1] == 0) screen.push_back(r);
  }
  CHECK(block_interactions(o.plan.factors, screen).empty());
  const auto all = block_interactions(o.plan.factors, o.runs);
  REQUIRE(all.size() == 1);
  CHECK(std::exp(all[0].mean_log) == doctest::Approx(1.5).epsilon(0.1));
  CHECK(std::abs(all[0].mean_log) > all[0].half_log);
  CHECK(plan_text(o.plan, o.runs, rules).find("interactions (balanced blocks") !=
        std::string::npos);
  CHECK(plan_text(o.plan, screen, rules).find("interactions: none measured") != std::string::npos);
}

TEST_CASE("report.explore_plan.written_settings_carry_their_gain_and_curve_is_a_comment") {
  Plan p;
  p.factors = {factor("curve", {"on", "off"}, 0), factor("prefetch", {"0", "8"}, 0)};
  p.winner = {1, 1};
  p.candidates = {{.factor = 0,
                   .level = 1,
                   .cmp = {.n = 3, .mean_log = -0.2, .half_log = 0.05},
                   .verdict = Verdict::Faster},
                  {.factor = 1,
                   .level = 1,
                   .cmp = {.n = 4, .mean_log = -0.1, .half_log = 0.02},
                   .verdict = Verdict::Faster}};
  p.confirmation = {.n = 3, .mean_log = -0.3, .half_log = 0.1};
  CHECK(confirmed_yaml(p).empty());  // not confirmed: nothing
  p.confirmed = true;
  const auto yaml = confirmed_yaml(p);
  CHECK(yaml.find("3 runs each: time per item -25.9% [-33.0% .. -18.1%], 1.35x") !=
        std::string::npos);
  CHECK(yaml.find("# curve on -> off: time per item -18.1%") != std::string::npos);
  CHECK(yaml.find("curve:") == std::string::npos);
  CHECK(yaml.find("fanout:\n  # prefetch 0 -> 8: time per item -9.5% [-11.3% .. -7.7%] over 4 "
                  "paired runs\n  prefetch: 8\n") != std::string::npos);
}

TEST_CASE("report.explore_plan.a_noisy_machine_still_walks_to_16") {
  // 10% noise on each run's log time and one run in five slowed 1.8x (a loaded machine): between
  // 4 and 16 the plan replicates until the difference is clear rather than settling for the
  // level nearer the base.
  Job job{.factors = {factor("mini_batch_size", {"1", "4"}, 0)},
          .cost = [](const std::vector<double>& v) { return (0.020 / v[0] + 0.0002) / 2; },
          .noise = 0.10,
          .spike = 0.2};
  std::size_t right = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const auto o = simulate(job, seed);
    right += o.plan.confirmed && std::stoull(winner_level(o.plan, "mini_batch_size")) >= 16;
  }
  MESSAGE("noisy fixed cost: right in ", right, " of 40");
  CHECK(right >= 36);
}
