// Through the real binaries: a result over the frame limit fails
// its attempt instead of hanging the job; a pool that heartbeats but drops tasks has them
// requeued when their lease expires; sys.exit() in run() fails only its own mini-batch; an
// oversized frame and a 100 MB all-nil SubmitTasks leave the interchange's memory bounded, a
// client ignoring its window is refused, and the interchange keeps serving; an init() that hangs
// is bounded by --first_task_creation_timeout.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "fanout/protocol/codec.hpp"
#include "job_fixture.hpp"
#include "raw_peer.hpp"
#include "test_hooks_skip.hpp"

using namespace fanout::test;
namespace proto = fanout::proto;

namespace {

// A job `name` over ./data, one file per mini-batch, rows into ./out.txt, with `retries` and a
// 600 s timeout; `extra_top`: more top-level keys.
std::string job_yaml(const std::string& name, const std::string& extra_top,
                     const std::string& retries, const std::string& args = "") {
  JobSpec job;
  job.name = name;
  job.concurrency.reset();
  job.max_retries = std::stoi(retries);
  job.timeout_s = 600;
  job.top = extra_top;
  job.program_arguments = args;
  return job_yaml(job);
}

std::string names_of(int from, int to, int step) {
  std::string s;
  for (int i = from; i < to; i += step) {
    char name[32];
    std::snprintf(name, sizeof name, "file%05d.txt", i);
    s += name;
    s += '\n';
  }
  return s;
}

// VmHWM of a process, in kB (-1 when unreadable).
}  // namespace

TEST_CASE("integration.peer_bounds.sys_exit_fails_only_its_own_minibatch") {
  // Item 6: one worker; odd mini-batches call sys.exit(3). The next mini-batch, already handed
  // to that worker, goes back to the queue without a try: with max_retries 0 every even row is
  // present and no attempt is WORKER_LOST.
  TempDir dir("sysexit");
  make_files(dir / "data", 12);
  write_file(dir / "src/score.py", R"PY(
import os, sys
def run(mini_batch):
    name = os.path.basename(mini_batch[0])
    if int(name[4:9]) % 2 == 1:
        sys.exit(3)
    return [name]
)PY");
  write_file(dir / "job.yaml",
             job_yaml("sysexit", "max_concurrency_per_instance: 1\nerror_threshold: -1\n", "0"));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db, {}, std::chrono::seconds(180));
  INFO("client stderr:\n" << r.err);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 6);
  CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") == 6);
  CHECK(sql_int(db, "select count(*) from attempts where status='WORKER_LOST'") == 0);
  CHECK(sql_int(db,
                "select count(*) from attempts where status='RUN_EXCEPTION' and "
                "error_category='SystemExit'") == 6);
  CHECK(sql_int(db, "select count(*) from attempts") == 12);
  auto lines = read_lines(dir / "out.txt");
  std::multiset<std::string> rows(lines.begin(), lines.end());
  const std::string want = names_of(0, 12, 2);
  std::multiset<std::string> expected;
  for (std::size_t p = 0, q; (q = want.find('\n', p)) != std::string::npos; p = q + 1) {
    expected.insert(want.substr(p, q - p));
  }
  CHECK(rows == expected);
}

TEST_CASE("integration.peer_bounds.a_result_over_the_frame_limit_fails_located") {
  // Item 4: mini-batch 1 returns a 270 MB row, more than a frame holds. Its attempts fail with
  // ResultTooLarge naming the mini-batch, the size and the limit, retried per max_retries; the
  // job ends instead of hanging, with every other row.
  TempDir dir("bigrow");
  make_files(dir / "data", 3);
  write_file(dir / "src/score.py", R"PY(
import os
def run(mini_batch):
    name = os.path.basename(mini_batch[0])
    if name == "file00001.txt":
        return ["x" * 270000000]
    return [name]
)PY");
  write_file(dir / "job.yaml", job_yaml("bigrow", "max_concurrency_per_instance: 1\n", "1"));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db, {}, std::chrono::seconds(200));
  INFO("client stderr:\n" << r.err);
  REQUIRE(r.status.signal == 0);  // not killed at the timeout: the job ended
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 2);
  CHECK(sql_column(db, "select state from minibatches where id=1") ==
        std::vector<std::string>{"failed"});
  CHECK(sql_int(db,
                "select count(*) from attempts where minibatch_id=1 and "
                "error_category='ResultTooLarge'") == 2);
  auto msg = sql_column(db, "select error_message from attempts where minibatch_id=1");
  REQUIRE_FALSE(msg.empty());
  CHECK(msg[0].find("mini-batch 1 returned 270000001 bytes") != std::string::npos);
  CHECK(msg[0].find("at most") != std::string::npos);
  auto lines = read_lines(dir / "out.txt");
  CHECK(std::set<std::string>(lines.begin(), lines.end()) ==
        std::set<std::string>{"file00000.txt", "file00002.txt"});
}

TEST_CASE("integration.peer_bounds.a_pool_that_drops_tasks_has_them_requeued") {
  require_test_hooks_or_skip();
  // Item 5: the only pool heartbeats but drops its first 2 tasks (the test hook). Their leases
  // expire after heartbeat_threshold_ms and they run again; without a lease the job never ends.
  TempDir dir("lease");
  make_files(dir / "data", 6);
  write_file(dir / "src/score.py", echo_script());
  write_file(
      dir / "job.yaml",
      job_yaml("lease", "fanout:\n  heartbeat_period_ms: 200\n  heartbeat_threshold_ms: 3000\n",
               "3"));
  const std::string db = dir / "fanout.db";
  auto r = run_capture(run_argv(dir / "job.yaml", db, ""), dir.path(),
                       {{"FANOUT_TEST_SWALLOW_TASKS", "2"}}, std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err);
  REQUIRE(r.status.signal == 0);
  CHECK(r.status.code == 0);
  CHECK(read_lines(dir / "out.txt").size() == 6);
  CHECK(sql_int(db, "select count(*) from minibatches where state='succeeded'") == 6);
  CHECK(sql_int(db,
                "select count(*) from attempts where status='POOL_LOST' and "
                "error_message like '%task lease expired%'") == 2);
  CHECK(sql_int(db, "select count(*) from attempts where status='RUN_DONE'") == 6);
}

TEST_CASE("integration.peer_bounds.hostile_sizes_leave_memory_bounded_and_window_enforced") {
  // Item 7.
  TempDir dir("peermem");
  const std::string db = dir / "fanout.db";
  Cluster cl;
  cl.start_interchange(dir.path(), db, {"--window", "10"});
  const int pid = cl.interchange.pid();
  const long long base_kb = peak_rss_kb(pid);
  REQUIRE(base_kb > 0);

  // A 300 MB frame on the pool port: refused by ZeroMQ as its header arrives.
  {
    RawDealer s(cl.pool_ep);
    std::string big(300u << 20, '\0');
    big[0] = static_cast<char>(proto::kProtocolVersion);
    big[1] = static_cast<char>(proto::MsgType::ResultBatch);
    s.send(big);
    // The sender's connection is dropped; nothing comes back.
    CHECK(s.recv_within(3000).empty());
  }
  // A 100 MB SubmitTasks of nils on the client port: refused by its element count.
  RawDealer c(cl.client_ep);
  {
    std::string frame;
    frame.push_back(static_cast<char>(proto::kProtocolVersion));
    frame.push_back(static_cast<char>(proto::MsgType::SubmitTasks));
    const std::size_t n = 100u << 20;
    frame += "\x92\x01\xdd";
    for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(n >> shift));
    frame.append(n, '\xc0');
    c.send(frame);
  }
  REQUIRE(wait_until(
      [&] { return read_text(cl.ix_log).find("dropped a bad frame") != std::string::npos; },
      std::chrono::seconds(60)));
  CHECK(read_text(cl.ix_log).find("SubmitTasks: body: more than") != std::string::npos);

  // A client that ignores its window of 10: 5000 mini-batches in one frame; 2 x 10 + 1024 kept.
  proto::JobSpec spec;
  spec.name = "greedy";
  spec.runtime = "python";
  spec.code_dir = dir.path();
  spec.entry_script = "score.py";
  c.send(proto::encode(proto::SubmitJob{spec}));
  std::uint64_t job_id = 0;
  for (int k = 0; k < 50 && job_id == 0; ++k) {
    auto reply = c.recv_within(5000);
    if (reply.empty()) break;
    if (auto a = proto::decode<proto::JobAccepted>(reply)) job_id = a->job_id;
  }
  REQUIRE(job_id != 0);
  proto::SubmitTasks st{job_id, {}};
  for (std::uint64_t i = 0; i < 5000; ++i) st.batches.push_back(proto::MiniBatch{i, {"f"}, ""});
  c.send(proto::encode(st));
  std::uint64_t submitted = 0;
  for (int k = 0; k < 50; ++k) {
    auto reply = c.recv_within(5000);
    if (reply.empty()) break;
    auto p = proto::decode<proto::JobProgress>(reply);
    if (p && p->submitted > 0) {
      submitted = p->submitted;
      break;
    }
  }
  CHECK(submitted == 1044);
  CHECK(wait_until([&] { return sql_int(db, "select count(*) from minibatches") == 1044; },
                   std::chrono::seconds(30)));
  CHECK(read_text(cl.ix_log).find("beyond the client's window of 10") != std::string::npos);
  c.send(proto::encode(proto::CancelJob{job_id, "test"}));

  // Still serving: a real pool runs a real job.
  CHECK(!cl.interchange.poll().has_value());
  cl.start_pool(dir.path(), "pool-a", 2);
  make_files(dir / "data", 8);
  write_file(dir / "src/score.py", echo_script());
  write_file(dir / "job.yaml", job_yaml("after", "", "1"));
  auto r = run_capture(run_argv(dir / "job.yaml", "", cl.client_ep), dir.path(), {},
                       std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err << cl.logs());
  CHECK(r.status.code == 0);
  CHECK(read_lines(dir / "out.txt").size() == 8);

  // The peak: the 100 MB frame is held twice (ZeroMQ's message and the loop's copy) and nothing
  // more; without the limits the 300 MB frame alone cost 600 MB and the nils 2.5 GB.
  const long long peak_kb = peak_rss_kb(pid);
  MESSAGE("interchange VmHWM: " << base_kb << " kB at start, " << peak_kb << " kB at the end");
  CHECK(peak_kb - base_kb < 400 * 1024);
}

TEST_CASE("integration.peer_bounds.a_hanging_init_is_bounded_by_first_task_creation_timeout") {
  // Item 13: init() never returns; --first_task_creation_timeout 3 bounds each worker's start
  // (instead of the pool's fixed 600 s). With one worker, 3 failed starts fail every queued
  // mini-batch, each LOAD_EXCEPTION naming the timeout.
  TempDir dir("inithang");
  make_files(dir / "data", 2);
  write_file(dir / "src/score.py", R"PY(
import time
def init():
    time.sleep(3600)
def run(mini_batch):
    return mini_batch
)PY");
  write_file(dir / "job.yaml", job_yaml("inithang", "max_concurrency_per_instance: 1\n", "0",
                                        "--first_task_creation_timeout 3"));
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db, {}, std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err);
  REQUIRE(r.status.signal == 0);
  // init() failing on every worker start fails the job at once: the first
  // mini-batch's tries are spent, the job ends failed naming the timeout.
  CHECK(r.status.code == 1);
  CHECK(sql_column(db, "select state from jobs where id = 1").at(0) == "failed");
  CHECK(sql_int(db, "select count(*) from minibatches where state='failed'") >= 1);
  CHECK(r.err.find("LoadTimeout") != std::string::npos);
  auto msg = sql_column(db, "select error_message from attempts where status='LOAD_EXCEPTION'");
  REQUIRE_FALSE(msg.empty());
  CHECK(msg[0].find("--first_task_creation_timeout 3 s") != std::string::npos);
}

TEST_CASE("integration.peer_bounds.unwritable_output_and_empty_input") {
  // Item 13: an append_row_to that cannot be written is found before anything starts (exit 2,
  // file:line); an empty input folder ends plainly (exit 0, "0 mini-batches: input ... empty").
  TempDir dir("outcheck");
  make_files(dir / "data", 1);
  write_file(dir / "src/score.py", kPassThroughScript);
  write_file(dir / "afile", "not a folder\n");
  std::string yaml = job_yaml("outcheck", "", "0");
  const std::string from = "./out.txt";
  yaml.replace(yaml.find(from), from.size(), "./afile/out.txt");
  write_file(dir / "job.yaml", yaml);
  const std::string db = dir / "fanout.db";
  auto r = fanout_run(dir, "job.yaml", db, {}, std::chrono::seconds(60));
  INFO("client stderr:\n" << r.err);
  CHECK(r.status.code == 2);
  // file:line, the line of append_row_to in the job file written above.
  CHECK(r.err.find("job.yaml:" + std::to_string(line_of(yaml, "append_row_to:")) +
                   ": task.append_row_to: ") != std::string::npos);
  CHECK(r.err.find("afile is not a folder") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(db));  // nothing started, no store made

  std::filesystem::remove_all(dir / "data");
  std::filesystem::create_directories(dir / "data");
  write_file(dir / "job.yaml", job_yaml("empty", "", "0"));
  r = fanout_run(dir, "job.yaml", db, {}, std::chrono::seconds(120));
  INFO("client stderr:\n" << r.err);
  CHECK(r.status.code == 0);
  CHECK(r.err.find("fanout: 0 mini-batches: input files (" + (dir / "data") + ") is empty") !=
        std::string::npos);
}
