// Tests for `fanout tune` (src/fanout/report/tune.hpp), read as its specification: each case
// writes a constructed job history into a real store (the schema made by TaskStore, the rows by
// SQL), reads it back with report::read_report_data() and checks the advice whose right answer is
// known. Rules and thresholds: docs/tuning.md.
#include "fanout/report/tune.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fanout/report/job_figures.hpp"
#include "fanout/report/report_data.hpp"

#include "report_history.hpp"
#include "scratch_dir.hpp"

namespace report = fanout::report;
namespace store = fanout::store;
using fanout::test::History;
using fanout::test::uniform;
using fanout::test::WorkerRun;
using fanout::test::write_store;
using report::Recommendation;
using report::Verdict;

namespace {

const Recommendation& find(const std::vector<Recommendation>& recs, const std::string& setting) {
  for (const auto& r : recs) {
    if (r.setting == setting) return r;
  }
  FAIL("no recommendation for " << setting);
  return recs.front();
}

std::vector<Recommendation> tune_history(const History& h, report::TuneOptions opt = {}) {
  fanout::test::ScratchDir dir("tune");
  const std::string path = write_store(dir, h);
  auto d = report::read_report_data(path, 1);
  REQUIRE(d);
  if (opt.cores == 0) opt.cores = 4;
  return report::tune(*d, opt);
}

const std::string kSettings =
    R"({"mini_batch_size":"10","max_concurrency_per_instance":4,"prefetch":0,"poll_ms":10,)"
    R"("instance_count":1,"max_retries":3})";

const std::string kClusterSettings =
    R"({"mini_batch_size":"10","max_concurrency_per_instance":4,"prefetch":0,"poll_ms":10,)"
    R"("instance_count":1,"max_retries":3,"launcher":"slurm"})";

// The value of `key` in a block tune_yaml() wrote (the text after "key: ", quotes dropped).
std::string written(const std::string& yaml, const std::string& key) {
  const auto at = yaml.find(key + ": ");
  REQUIRE(at != std::string::npos);
  std::string v = yaml.substr(
      at + key.size() + 2, yaml.find_first_of(" \n", at + key.size() + 2) - (at + key.size() + 2));
  v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
  return v;
}

}  // namespace

TEST_CASE("report.tune.overhead_dominated_asks_for_larger_mini_batches") {
  // run() 10 ms, overhead 5 ms: 50% of run(); 25x larger brings it to 2%.
  const auto recs = tune_history(uniform(4, 50, kSettings, {.run_s = 0.010, .overhead_s = 0.005}));
  const auto& r = find(recs, "mini_batch_size");
  CHECK(r.verdict == Verdict::Change);
  CHECK(r.current == "10");
  CHECK(r.suggested == "250");
  CHECK(r.figure.find("50.0%") != std::string::npos);
  CHECK(r.effect.find("2.0%") != std::string::npos);
  CHECK(find(recs, "prefetch").verdict == Verdict::Keep);
  CHECK(find(recs, "workers").verdict == Verdict::Keep);
}

TEST_CASE("report.tune.tail_dominated_asks_for_smaller_mini_batches") {
  // Three workers finish at 10 s, the fourth runs on alone to 20 s: 7.5 s of idle tail per
  // worker, 37.5% of worker time; 7.5x smaller mini-batches bring it to 5%.
  History h = uniform(3, 10, kSettings, {.run_s = 0.999, .overhead_s = 0.001, .gap_s = 0});
  h.runs.push_back({.pool_id = 1,
                    .process = "process3",
                    .n = 20,
                    .run_s = 0.999,
                    .overhead_s = 0.001,
                    .gap_s = 0});
  h.settings = R"({"mini_batch_size":"100","max_concurrency_per_instance":4,"prefetch":0,)"
               R"("poll_ms":10,"instance_count":1})";
  const auto recs = tune_history(h);
  const auto& r = find(recs, "mini_batch_size");
  CHECK(r.verdict == Verdict::Change);
  CHECK(r.suggested == "13");
  CHECK(r.figure.find("37.5%") != std::string::npos);
}

TEST_CASE("report.tune.prefetch_too_low_covers_the_round_trip") {
  // Each worker waits 10 ms for its next task of 10.2 ms: a pool of 4 needs
  // ceil(4 × 10 / 10.2) + 1 = 5 tasks in hand.
  const auto recs = tune_history(uniform(4, 50, kSettings, {.gap_s = 0.010}));
  const auto& p = find(recs, "prefetch");
  CHECK(p.verdict == Verdict::Change);
  CHECK(p.current == "0");
  CHECK(p.suggested == "5");
  CHECK(p.figure.find("10 ms") != std::string::npos);
  // The poll is not to blame while prefetch is short, and the overhead share is small.
  CHECK(find(recs, "poll_ms").verdict == Verdict::Keep);
  CHECK(find(recs, "mini_batch_size").verdict == Verdict::Keep);
}

TEST_CASE("report.tune.gap_left_with_enough_prefetch_points_at_the_poll") {
  History h = uniform(4, 50, kSettings, {.gap_s = 0.008});
  h.settings = R"({"mini_batch_size":"10","max_concurrency_per_instance":4,"prefetch":16,)"
               R"("poll_ms":10,"instance_count":1})";
  const auto recs = tune_history(h);
  CHECK(find(recs, "prefetch").verdict == Verdict::Keep);
  const auto& p = find(recs, "poll_ms");
  CHECK(p.verdict == Verdict::Change);
  CHECK(p.suggested == "2");
}

TEST_CASE("report.tune.too_many_workers_for_the_cores") {
  // 16 CPU-bound workers on 4 cores: each gets a quarter of a core, the node is saturated.
  History h = uniform(16, 10, kSettings, {.cpu_per_s = 0.25});
  h.settings = R"({"mini_batch_size":"10","max_concurrency_per_instance":16,"prefetch":0,)"
               R"("poll_ms":10,"instance_count":1})";
  const auto recs = tune_history(h, {.cores = 4});
  const auto& w = find(recs, "workers");
  CHECK(w.verdict == Verdict::Change);
  CHECK(w.current == "16");
  CHECK(w.suggested == "4");
  CHECK(w.figure.find("4 cores") != std::string::npos);
}

TEST_CASE("report.tune.waiting_workers_get_company") {
  // run() uses 10% of a CPU: it waits; two workers leave 4 cores mostly idle.
  History h = uniform(2, 20, kSettings, {.cpu_per_s = 0.1});
  h.settings = R"({"mini_batch_size":"10","max_concurrency_per_instance":2,"prefetch":0,)"
               R"("poll_ms":10,"instance_count":1})";
  const auto recs = tune_history(h, {.cores = 4});
  const auto& w = find(recs, "workers");
  CHECK(w.verdict == Verdict::Change);
  CHECK(w.suggested == "16");  // 4 / 0.1 = 40, capped at 4 per core
}

TEST_CASE("report.tune.not_enough_data_says_so") {
  const auto recs = tune_history(uniform(2, 3, kSettings, {.overhead_s = 0.5}));
  REQUIRE(recs.size() == 5);
  for (const auto& r : recs) {
    CAPTURE(r.setting);
    CHECK(r.verdict == Verdict::NoData);
    CHECK(r.suggested.empty());
    CHECK(r.effect.find("not enough data: 6 successful attempts") != std::string::npos);
  }
}

TEST_CASE("report.tune.nodes_follow_parallel_run_steps_rule") {
  // 200 mini-batches of 10.2 ms (+0.1 ms gap) = 2.06 s of worker time; 4 processes per node
  // and a 0.25 s target: ceil(2.06 / (0.25 × 4)) = 3 nodes. A cluster launcher: the local one's
  // pools share one machine.
  const auto h = uniform(4, 50, kClusterSettings, {});
  SUBCASE("with a target") {
    const auto recs = tune_history(h, {.target_duration_s = 0.25});
    const auto& n = find(recs, "instance_count");
    CHECK(n.verdict == Verdict::Change);
    CHECK(n.current == "1");
    CHECK(n.suggested == "3");
  }
  SUBCASE("without one") {
    const auto recs = tune_history(h);
    const auto& n = find(recs, "instance_count");
    CHECK(n.verdict == Verdict::NoData);
    CHECK(n.effect.find("--target-duration") != std::string::npos);
  }
}

TEST_CASE("report.tune.write_gives_the_suggested_block") {
  fanout::test::ScratchDir dir("tune");
  const auto path = write_store(dir, uniform(4, 50, kSettings, {.gap_s = 0.010}));
  auto d = report::read_report_data(path, 1);
  REQUIRE(d);
  const auto yaml = report::tune_yaml(*d, report::tune(*d, {.cores = 4}));
  CHECK(yaml.find("mini_batch_size: \"10\"\n") != std::string::npos);
  CHECK(yaml.find("fanout:\n") != std::string::npos);
  CHECK(yaml.find("  prefetch: 5  # was 0\n") != std::string::npos);
  CHECK(yaml.find("  poll_ms: 10\n") != std::string::npos);
}

TEST_CASE("report.job_figures.idle_gap_and_utilisation") {
  fanout::test::ScratchDir dir("tune");
  const auto path = write_store(
      dir, uniform(2, 11, kSettings, {.run_s = 0.008, .overhead_s = 0.002, .gap_s = 0.010}));
  auto d = report::read_report_data(path, 1);
  REQUIRE(d);
  const auto f = report::job_figures(*d);
  CHECK(f.gaps == 20);
  CHECK(f.mean_gap_s == doctest::Approx(0.010).epsilon(1e-6));
  CHECK(f.mean_run_s == doctest::Approx(0.008));
  CHECK(f.mean_overhead_s == doctest::Approx(0.002));
  // 11 tasks of 10 ms with 10 gaps of 10 ms: run() is 88 ms of 210 ms.
  CHECK(f.run_share == doctest::Approx(0.088 / 0.210).epsilon(1e-6));
}

TEST_CASE("report.tune.local_pools_and_nodes_are_sized_with_the_workers_advised") {
  // The case that wrote `workers: 8` beside `instance_count: 3` sized for 2 processes per node:
  // run() waits 90% of its time, 2 workers on 2 cores, 40 mini-batches of 10.3 ms = 0.412 s.
  History h = uniform(2, 20, kSettings, {.cpu_per_s = 0.1});
  SUBCASE("local launcher: the pools share this machine, their count stays") {
    h.settings = R"({"mini_batch_size":"10","max_concurrency_per_instance":2,"prefetch":0,)"
                 R"("poll_ms":10,"instance_count":1})";
    const auto recs = tune_history(h, {.target_duration_s = 0.05, .cores = 2});
    CHECK(find(recs, "workers").suggested == "8");  // 2 / 0.1 = 20, capped at 4 per core
    const auto& n = find(recs, "instance_count");
    CHECK(n.verdict == Verdict::Keep);
    CHECK(n.figure.find("1 pool(s) × 8 workers") != std::string::npos);
    CHECK(n.effect.find("node") == std::string::npos);
  }
  SUBCASE("local launcher, two pools: the workers advised are split between them") {
    h.pools = 2;
    h.settings = R"({"mini_batch_size":"10","max_concurrency_per_instance":1,"prefetch":0,)"
                 R"("poll_ms":10,"instance_count":2})";
    h.workers_per_pool = 1;
    h.runs[1].pool_id = 2;
    const auto recs = tune_history(h, {.target_duration_s = 0.05, .cores = 2});
    CHECK(find(recs, "workers").suggested == "4");  // 8 for the machine, 4 in each pool
    CHECK(find(recs, "instance_count").verdict == Verdict::Keep);
  }
  SUBCASE("cluster: nodes counted with the workers advised") {
    h.settings = R"({"mini_batch_size":"10","max_concurrency_per_instance":2,"prefetch":0,)"
                 R"("poll_ms":10,"instance_count":1,"launcher":"slurm"})";
    const auto recs = tune_history(h, {.target_duration_s = 0.05, .cores = 2});
    CHECK(find(recs, "workers").suggested == "8");
    const auto& n = find(recs, "instance_count");
    CHECK(n.suggested == "2");  // ceil(0.412 / (0.05 × 8)); with 2 processes it said 5
    CHECK(n.figure.find("8 processes per node") != std::string::npos);
  }
}

TEST_CASE("report.tune.written_block_retunes_to_no_change") {
  // A job whose run() waits (more workers) and whose workers wait 4 ms between tasks (prefetch);
  // its written block applied, the same tasks measured again, tune has nothing left to change.
  const WorkerRun shape{.run_s = 0.010, .gap_s = 0.004, .cpu_per_s = 0.1};
  History first = uniform(2, 20, kSettings, shape);
  first.settings = R"({"mini_batch_size":"10","max_concurrency_per_instance":2,"prefetch":0,)"
                   R"("poll_ms":10,"instance_count":1})";
  fanout::test::ScratchDir dir("tune-retune");
  auto d1 = report::read_report_data(write_store(dir, first), 1);
  REQUIRE(d1);
  const auto recs1 = report::tune(*d1, {.cores = 2});
  const std::string yaml = report::tune_yaml(*d1, recs1);
  INFO(yaml);
  CHECK(report::format_tune(*d1, recs1).find("change(s), sized to be applied together") !=
        std::string::npos);
  const int workers = std::stoi(written(yaml, "workers"));
  CHECK(workers == 8);
  History second = uniform(workers, 40 / workers, kSettings, shape);
  second.workers_per_pool = workers;
  second.prefetch = std::stoi(written(yaml, "prefetch"));
  second.settings = R"({"mini_batch_size":")" + written(yaml, "mini_batch_size") +
                    R"(","max_concurrency_per_instance":)" + written(yaml, "workers") +
                    R"(,"prefetch":)" + written(yaml, "prefetch") + R"(,"poll_ms":)" +
                    written(yaml, "poll_ms") + R"(,"instance_count":)" +
                    written(yaml, "instance_count") + "}";
  fanout::test::ScratchDir dir2("tune-retune2");
  auto d2 = report::read_report_data(write_store(dir2, second), 1);
  REQUIRE(d2);
  const auto recs2 = report::tune(*d2, {.cores = 2});
  for (const auto& r : recs2) {
    CAPTURE(r.setting);
    CAPTURE(r.effect);
    CHECK(r.verdict != Verdict::Change);
  }
  INFO(report::format_tune(*d2, recs2));
  CHECK(report::format_tune(*d2, recs2).find("\nno change:") != std::string::npos);
}

TEST_CASE("report.tune.gpu_advice_from_the_accelerators_utilisation") {
  report::ReportData d;
  CHECK(report::gpu_advice(d).empty());  // no accelerator samples: no advice, none listed
  store::ResourceSeries idle;
  idle.node = "n1";
  idle.process = "GPU 2 NVIDIA H100";
  idle.mean_cpu = 31;
  d.gpu_series = {idle};
  auto recs = report::gpu_advice(d);
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].setting == "workers_per_accelerator");
  CHECK(recs[0].verdict == Verdict::Change);
  CHECK(recs[0].current == "1");
  CHECK(recs[0].suggested == "2");
  CHECK(recs[0].figure == "GPU 2 NVIDIA H100 on n1 busy 31% of the job");
  d.settings = {{"workers_per_accelerator", "2"}};
  CHECK(report::gpu_advice(d)[0].suggested == "4");
  d.gpu_series[0].mean_cpu = 90;
  CHECK(report::gpu_advice(d)[0].verdict == Verdict::Keep);
}

TEST_CASE("report.tune.reads_the_placement_the_job_ran_with") {
  // Pools that counted their own workers (from their devices or cores_per_worker) record no
  // count: tune takes what they had, and sees the placement keys recorded with the job.
  History h = uniform(16, 10, kSettings, {.cpu_per_s = 0.25});
  h.settings =
      R"({"mini_batch_size":"10","max_concurrency_per_instance":0,"prefetch":0,)"
      R"("poll_ms":10,"instance_count":1,"accelerators":"0,1","workers_per_accelerator":8,)"
      R"("cores_per_worker":1,"cpu_affinity":"block"})";
  fanout::test::ScratchDir dir("tune");
  auto d = report::read_report_data(write_store(dir, h), 1);
  REQUIRE(d);
  CHECK(d->setting("workers_per_accelerator") == "8");
  CHECK(d->setting("accelerators") == "0,1");
  CHECK(d->setting("cores_per_worker") == "1");
  CHECK(d->setting("cpu_affinity") == "block");
  const auto recs = report::tune(*d, {.cores = 4});
  const auto& w = find(recs, "workers");
  CHECK(w.current == "16");
  CHECK(w.verdict == Verdict::Change);
  CHECK(w.suggested == "4");
}
