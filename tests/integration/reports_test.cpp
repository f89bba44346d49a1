// Through the real binaries: a 2-pool job with failures, the resource monitor and
// cProfile on; then every report file against the store (recomputed here with SQL from the
// tables, not the views), `fanout report` byte for byte, the sample series per node and pool,
// the profile through pstats, `fanout status` and `fanout history`.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "csv_parse.hpp"
#include "job_fixture.hpp"

using namespace fanout::test;

namespace {

namespace fs = std::filesystem;

// Mini-batches holding file00013 raise on every try; each run() sleeps so that the job lasts
// several resource-monitor intervals.
const std::string kScript = fail_on_script("file00013", "0.3", "cannot score, ");
// Mini-batches of 2 files on 2 instances of 2 workers, 2 tries, sampled every 0.25 s and
// profiled, rows into ./out/scores.txt.
JobSpec demo_job() {
  JobSpec job;
  job.name = "reports-demo";
  job.output_key = "scores";
  job.output = "./out/scores.txt";
  job.mini_batch_size = "2";
  job.instance_count = 2;
  job.max_retries = 1;
  job.timeout_s = 60;
  job.program_arguments = "--resource_monitor_interval 0.25 --profiling_module cProfile --mine 1";
  return job;
}

// The rows of a query that joins its columns with char(31), as join_row() joins CSV fields.
std::vector<std::string> sql_rows(const std::string& db, const std::string& query) {
  return sql_column(db, query);
}

std::string join_row(const std::vector<std::string>& row) {
  std::string s;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i > 0) s += '\x1f';
    s += row[i];
  }
  return s;
}

std::string header_of(const std::string& path) {
  auto lines = read_lines(path);
  return lines.empty() ? std::string() : lines[0];
}

}  // namespace

TEST_CASE("integration.reports.two_pool_job_with_failures") {
  TempDir dir("reports");
  make_files(dir / "data", 40);  // 20 mini-batches of 2; mini-batch 6 always fails
  write_file(dir / "src/score.py", kScript);
  write_file(dir / "job.yaml", job_yaml(demo_job()));
  const std::string db = dir / "fanout.db";
  const std::string py = python_bin();

  auto r = run_capture(run_argv(dir / "job.yaml", db, ""), dir.path());
  INFO("stderr:\n" << r.err);
  REQUIRE(r.status.code == 4);  // one mini-batch failed within the thresholds: partial
  const std::string logs = sql_column(db, "select log_dir from jobs where id = 1")[0];
  INFO("logs: " << logs << "\n" << tail(logs + "/sys/interchange.log"));
  CHECK(sql_int(db, "select count(distinct pool_id) from attempts where job_id = 1") == 2);
  CHECK(sql_int(db, "select count(*) from attempts where status = 'RUN_EXCEPTION'") == 2);

  // ---- every CSV exists with its documented header
  const std::string pm_path = logs + "/sys/job_report/processed_mini-batches.csv";
  const std::string ps_path = logs + "/sys/job_report/process_summary.csv";
  const std::string ns_path = logs + "/sys/job_report/node_summary.csv";
  CHECK(header_of(pm_path) ==
        "Mini-batch Id,Picked Count,Process,Process Start Time,Total,Succeeded,Failed,"
        "Elapsed Seconds,Process Seconds,Run Method Seconds,Status,Error Category,Error Message,"
        "Mini-batch Detail");
  CHECK(header_of(ps_path) ==
        "Node,Process,Worker Starts,Attempts,Succeeded Attempts,Failed Attempts,Items,"
        "Items Succeeded,Items Failed,Elapsed Seconds,Process Seconds,Run Method Seconds,"
        "Average Run Method Seconds,Overhead Seconds,First Start Time,Last End Time,Device,CPUs,"
        "Threads");
  CHECK(header_of(ns_path) ==
        "Node,Pools,Processes,Attempts,Succeeded Attempts,Failed Attempts,Items,Items Succeeded,"
        "Items Failed,Elapsed Seconds,Process Seconds,Run Method Seconds,First Start Time,"
        "Last End Time,Attempts Per Second");

  // ---- processed_mini-batches.csv: one row per attempt, recomputed from attempts and
  // minibatch_inputs, in attempt id order (the order tasks were handed out).
  const auto pm = parse_csv(read_text(pm_path));
  REQUIRE(pm.size() >= 2);
  std::vector<std::string> got;
  for (std::size_t i = 1; i < pm.size(); ++i) got.push_back(join_row(pm[i]));
  const auto want = sql_rows(
      db,
      "select a.minibatch_id || char(31) || a.attempt || char(31) || "
      "  a.pool || '/' || a.process || char(31) || "
      "  strftime('%Y-%m-%dT%H:%M:%fZ', a.start, 'unixepoch') || char(31) || a.items || char(31) "
      "|| "
      "  a.succeeded || char(31) || a.failed || char(31) || round(a.elapsed_s, 3) || char(31) || "
      "  round(a.cpu_s, 3) || char(31) || round(a.run_s, 3) || char(31) || a.status || char(31) || "
      "  coalesce(a.error_category, '') || char(31) || coalesce(a.error_message, '') || char(31) "
      "|| "
      "  i.detail "
      "from attempts a join minibatch_inputs i on i.job_id = a.job_id and "
      "  i.minibatch_id = a.minibatch_id where a.job_id = 1 order by a.id");
  CHECK(got.size() == 21);  // 20 mini-batches, one of them tried twice
  CHECK(got == want);
  // The failing attempts carry their traceback, with line breaks, inside one CSV field.
  bool saw_traceback = false;
  for (const auto& row : pm) {
    if (row.size() == 14 && row[10] == "RUN_EXCEPTION") {
      CHECK(row[11] == "ValueError");
      saw_traceback = saw_traceback || row[12].find("Traceback") != std::string::npos;
    }
  }
  CHECK(saw_traceback);

  // ---- process_summary.csv and node_summary.csv, recomputed from attempts.
  const auto ps = parse_csv(read_text(ps_path));
  std::vector<std::string> ps_got;
  for (std::size_t i = 1; i < ps.size(); ++i) ps_got.push_back(join_row(ps[i]));
  CHECK(ps_got ==
        sql_rows(
            db,
            "select node || char(31) || pool || '/' || process || char(31) || "
            "  count(distinct worker_pid) || char(31) || count(*) || char(31) || "
            "  sum(status = 'RUN_DONE') || char(31) || sum(status != 'RUN_DONE') || char(31) || "
            "  sum(items) || char(31) || sum(succeeded) || char(31) || sum(failed) || char(31) || "
            "  round(sum(elapsed_s), 3) || char(31) || round(sum(cpu_s), 3) || char(31) || "
            "  round(sum(run_s), 3) || char(31) || round(avg(run_s), 4) || char(31) || "
            "  round(sum(elapsed_s) - sum(run_s), 3) || char(31) || "
            "  strftime('%Y-%m-%dT%H:%M:%fZ', min(start), 'unixepoch') || char(31) || "
            "  strftime('%Y-%m-%dT%H:%M:%fZ', max(start + elapsed_s), 'unixepoch') || char(31) || "
            "  coalesce(max(device), '') || char(31) || coalesce(max(cpus), '') || char(31) || "
            "  coalesce(max(threads), 0) "
            "from attempts where job_id = 1 group by node, pool, process "
            "order by node, pool || '/' || process"));
  CHECK(ps_got.size() == 4);  // 2 pools x 2 workers
  const auto ns = parse_csv(read_text(ns_path));
  REQUIRE(ns.size() == 2);  // both pools run on this host: one node
  CHECK(ns[1][0] == sql_column(db, "select distinct node from attempts")[0]);
  CHECK(ns[1][1] == "2");
  CHECK(ns[1][2] == "4");
  CHECK(ns[1][3] == "21");
  CHECK(ns[1][5] == "2");

  // ---- job_result.txt and the progress overview
  const std::string result = read_text(logs + "/job_result.txt");
  CHECK(result.find("state: partial\n") != std::string::npos);
  const std::string job_error = read_text(logs + "/job_error.txt");
  CHECK(job_error.find("RUN_EXCEPTION ValueError: 2 attempts, 1 mini-batches") !=
        std::string::npos);
  CHECK(result.find("mini_batches_failed: 1\n") != std::string::npos);
  CHECK(result.find("failed_attempts: 2\n") != std::string::npos);
  CHECK(result.find("RUN_EXCEPTION: ValueError: cannot score, file00012.txt") != std::string::npos);
  std::string overview;
  for (const auto& e : fs::directory_iterator(logs)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("job_progress_overview.", 0) == 0) overview = read_text(e.path().string());
  }
  CHECK(overview.find("20 of 20 done (100.0%): 19 succeeded, 1 failed") != std::string::npos);

  // ---- resource samples: a series for every node, and from every pool
  const auto nodes = sql_column(db, "select distinct node from attempts where job_id = 1");
  for (const auto& node : nodes) {
    CAPTURE(node);
    CHECK(sql_int(db, "select count(*) from node_resource_samples where job_id = 1 and node = '" +
                          node + "'") >= 3);
    const std::string perf = logs + "/sys/perf/" + node;
    CHECK(header_of(perf + "/node_resource_usage.csv") ==
          "Time,Pool,Interval Seconds,CPU Percent,Total Memory MB,Available Memory MB,"
          "Used Memory MB,Disk Read Count,Disk Write Count,Disk Read MB,Disk Write MB,"
          "Network Sent MB,Network Received MB,TCP Connections,UDP Connections");
    CHECK(header_of(perf + "/processes_resource_usage.csv") ==
          "Time,Pool,Process,PID,CPU Percent,RSS MB,Read Count,Write Count,Read MB,Write MB");
    CHECK(header_of(perf + "/node_disk_usage.csv") ==
          "Time,Pool,Mount,Total MB,Used MB,Free MB,Used Percent");
    CHECK(static_cast<long long>(read_lines(perf + "/node_resource_usage.csv").size()) ==
          1 + sql_int(db,
                      "select count(*) from node_resource_samples where job_id = 1 and "
                      "node = '" +
                          node + "'"));
    CHECK(static_cast<long long>(read_lines(perf + "/processes_resource_usage.csv").size()) ==
          1 + sql_int(db,
                      "select count(*) from process_resource_samples where job_id = 1 and "
                      "node = '" +
                          node + "'"));
  }
  CHECK(sql_int(db, "select count(distinct pool) from node_resource_samples where job_id = 1") ==
        2);
  CHECK(sql_int(db,
                "select count(*) from process_resource_samples where job_id = 1 and "
                "rss_mb > 0") >= 1);
  CHECK(sql_int(db, "select count(*) from node_resource_samples where mem_total_mb <= 0") == 0);

  // ---- fanout report reproduces every file byte for byte
  auto rep =
      run_capture({fanout_bin(), "report", "1", "--db", db, "--out", dir / "again"}, dir.path());
  INFO("report stderr: " << rep.err);
  REQUIRE(rep.status.code == 0);
  int compared = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir / "again")) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), dir / "again").string();
    CAPTURE(rel);
    CHECK(read_text(e.path().string()) == read_text(logs + "/" + rel));
    ++compared;
  }
  // + job_error.txt and one user/error/ file per worker process that failed
  CHECK(compared == 6 + 3 * static_cast<int>(nodes.size()) +
                        static_cast<int>(sql_int(db,
                                                 "select count(distinct pool || process) from "
                                                 "attempts where job_id = 1 and status not in "
                                                 "('RUN_DONE', 'CANCELLED')")));
  // ... and into the job's own folder by default, leaving the same bytes.
  const std::string before = read_text(pm_path);
  auto rep2 = run_capture({fanout_bin(), "report", "1", "--db", db}, dir.path());
  CHECK(rep2.status.code == 0);
  CHECK(read_text(pm_path) == before);
  auto bad = run_capture({fanout_bin(), "report", "99", "--db", db}, dir.path());
  CHECK(bad.status.code == 2);
  CHECK(bad.err.find("no job 99") != std::string::npos);

  // ---- the cProfile file of each worker loads with pstats and names the entry script's run
  int profiles = 0;
  for (const auto& e : fs::recursive_directory_iterator(logs + "/sys/node")) {
    if (e.path().extension() != ".profile") continue;
    ++profiles;
    auto ps_run =
        run_capture({py, "-c",
                     "import pstats, sys\n"
                     "s = pstats.Stats(sys.argv[1])\n"
                     "hits = [k for k in s.stats if k[2] == 'run' and k[0].endswith('score.py')]\n"
                     "print('RUN', hits[0][0], s.stats[hits[0]][1])\n",
                     e.path().string()},
                    dir.path());
    CAPTURE(ps_run.err);
    CHECK(ps_run.status.code == 0);
    CHECK(ps_run.out.find("RUN " + (dir / "src/score.py")) != std::string::npos);
  }
  // Each pool numbers its workers apart (process001-002, process003-004): one file per worker
  // that ran, never one shared by two pools.
  CHECK(profiles >= 2);
  CHECK(profiles <= 4);
  // The pstats browser itself loads it (stdin is empty, so it stops at once).
  for (const auto& e : fs::recursive_directory_iterator(logs + "/sys/node")) {
    if (e.path().extension() != ".profile") continue;
    auto browser = run_capture({py, "-m", "pstats", e.path().string()}, dir.path());
    CHECK(browser.status.code == 0);
    CHECK(browser.err.find("Traceback") == std::string::npos);
    CHECK(browser.out.find("Welcome to the profile statistics browser") != std::string::npos);
  }

  // ---- settings are queryable, user arguments still reach the script
  CHECK(sql_column(db,
                   "select value from job_settings where job_id = 1 and "
                   "key = 'resource_monitor_interval'")[0] == "0.25");
  CHECK(sql_column(db,
                   "select value from job_settings where job_id = 1 and "
                   "key = 'profiling_module'")[0] == "cProfile");

  // ---- fanout status and fanout history
  auto st = run_capture({fanout_bin(), "status", "1", "--db", db}, dir.path());
  CHECK(st.status.code == 0);
  CHECK(st.out.find("job 1 (reports-demo): partial") != std::string::npos);
  CHECK(st.out.find("  first error: ") != std::string::npos);
  CHECK(st.out.find("20/20 done (100.0%): 19 succeeded, 1 failed") != std::string::npos);
  CHECK(st.out.find("pools: 2") != std::string::npos);
  CHECK(st.out.find("ValueError: cannot score, file00012.txt") != std::string::npos);
  auto stj = run_capture({fanout_bin(), "status", "1", "--db", db, "--json"}, dir.path());
  CHECK(stj.out.find("\"succeeded\":19") != std::string::npos);
  CHECK(stj.out.find("\"processes\":4") != std::string::npos);
  auto st_missing = run_capture({fanout_bin(), "status", "7", "--db", db}, dir.path());
  CHECK(st_missing.status.code == 2);
  CHECK(st_missing.err.find("no job 7") != std::string::npos);
}

TEST_CASE("integration.reports.history_limit_state_json") {
  TempDir dir("history");
  make_files(dir / "data", 4);
  write_file(dir / "src/score.py", kPassThroughScript);
  write_file(dir / "src/bad.py", "def run(mb):\n    raise ValueError('no')\n");
  JobSpec ok = demo_job();
  ok.program_arguments.clear();
  ok.instance_count = 1;
  write_file(dir / "ok.yaml", job_yaml(ok));
  JobSpec bad = ok;
  bad.task = "  type: run_function\n  code: ./src\n  entry_script: bad.py\n";
  bad.max_retries = 0;
  bad.top = "error_threshold: 0\n";
  write_file(dir / "bad.yaml", job_yaml(bad));
  const std::string db = dir / "fanout.db";
  for (const char* job : {"ok.yaml", "bad.yaml", "ok.yaml"}) {
    // The jobs share one append_row file: each replaces the last one's (--overwrite).
    auto r = run_capture(run_argv(dir / job, db, "", {"--overwrite"}), dir.path());
    INFO(r.err);
    CHECK(r.status.code == (std::string(job) == "ok.yaml" ? 0 : 1));
  }
  auto all = run_capture({fanout_bin(), "history", "--db", db}, dir.path());
  CHECK(all.status.code == 0);
  auto lines = [](const std::string& s) {
    std::size_t n = 0;
    for (char c : s) n += c == '\n' ? 1 : 0;
    return n;
  };
  CHECK(lines(all.out) == 4);  // header + 3 jobs
  auto one = run_capture({fanout_bin(), "history", "--db", db, "--limit", "1"}, dir.path());
  CHECK(lines(one.out) == 2);
  CHECK(one.out.find("\n3 ") != std::string::npos);  // the newest
  auto failed =
      run_capture({fanout_bin(), "history", "--db", db, "--state", "failed", "--json"}, dir.path());
  CHECK(failed.status.code == 0);
  CHECK(failed.out.rfind("[{\"id\":2,", 0) == 0);
  CHECK(failed.out.find("\"id\":1,") == std::string::npos);
  CHECK(failed.out.find("error_threshold") != std::string::npos);
  auto none = run_capture({fanout_bin(), "history", "--db", db, "--state", "cancelled", "--json"},
                          dir.path());
  CHECK(none.out == "[]\n");
}

TEST_CASE("integration.reports.bad_monitoring_arguments_are_refused_before_start") {
  TempDir dir("bad-monitor");
  make_files(dir / "data", 2);
  write_file(dir / "src/score.py", kPassThroughScript);
  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"--profiling_module yappi",
       "job.yaml: program_arguments: --profiling_module: expected cProfile or profile (got "
       "'yappi')"},
      {"--resource_monitor_interval soon",
       "job.yaml: program_arguments: --resource_monitor_interval: expected a number of seconds "
       ">= 0 (got 'soon')"},
      {"--resource_monitor_interval -1",
       "--resource_monitor_interval: expected a number of seconds >= 0 (got '-1')"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    JobSpec job = demo_job();
    job.program_arguments = c.args;
    write_file(dir / "job.yaml", job_yaml(job));
    auto r = run_capture(run_argv(dir / "job.yaml", dir / "fanout.db", ""), dir.path());
    CHECK(r.status.code == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(r.err.find("error: ") == 0);
  }
  CHECK_FALSE(fs::exists(dir / "fanout.db"));  // nothing was started
}

TEST_CASE("integration.reports.shared_pool_samples_for_the_job_that_asks") {
  // A standalone interchange and pool started without a monitor: the job's own
  // --resource_monitor_interval (JobSpec) turns the pool's monitor on while it runs the job.
  TempDir dir("shared-monitor");
  make_files(dir / "data", 16);
  write_file(dir / "src/score.py", kScript);
  JobSpec job = demo_job();
  job.instance_count = 1;
  write_file(dir / "job.yaml", job_yaml(job));
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db);
  cl.start_pool(dir.path(), "shared-pool", 2);
  INFO(cl.logs());
  auto r = run_capture(run_argv(dir / "job.yaml", db, cl.client_ep), dir.path());
  INFO(r.err);
  REQUIRE(r.status.code == 4);  // file00012's mini-batch fails: partial
  CHECK(sql_int(db,
                "select count(*) from node_resource_samples where job_id = 1 and "
                "pool = 'shared-pool'") >= 3);
  CHECK(sql_int(db,
                "select count(distinct process) from process_resource_samples where "
                "job_id = 1") == 2);
  const std::string logs = sql_column(db, "select log_dir from jobs where id = 1")[0];
  const std::string node = sql_column(db, "select distinct node from attempts")[0];
  CHECK(read_lines(logs + "/sys/perf/" + node + "/node_resource_usage.csv").size() >= 4);
}
