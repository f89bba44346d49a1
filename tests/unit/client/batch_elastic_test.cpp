// Elastic pool jobs wired into the batch launcher (client/launch/batch_elastic.cpp): the load
// the interchange reports turned into sbatch / scancel calls and pool_jobs rows. The scheduler
// is three small shell scripts on PATH (sbatch, squeue, scancel) keeping job states in a file;
// tests/integration/slurm_test.py runs the same against a real Slurm.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "client/launch/slurm_launcher.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/schema.hpp"

#include "scratch_dir.hpp"

using fanout::client::Load;
using fanout::client::PoolCommand;
using fanout::client::SlurmLauncher;
using fanout::test::ScratchDir;

namespace {

fanout::Logger quiet() { return fanout::make_logger("elastic-test", spdlog::level::off); }

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fake Slurm in <dir>/bin, first on PATH while it lives: sbatch hands out ids from 101, each
// RUNNING at once; scancel --signal=TERM ID completes ID (its pool left), scancel ID cancels it.
class FakeSlurm {
 public:
  explicit FakeSlurm(const ScratchDir& d) : dir_(d.path("sched")), old_path_(std::getenv("PATH")) {
    d.mkdir("sched/bin");
    const std::string s = dir_ + "/states", n = dir_ + "/next", log = dir_ + "/calls";
    write("sbatch", "n=$(cat " + n + " 2>/dev/null || echo 101); echo $((n + 1)) > " + n +
                        "; echo \"$n RUNNING\" >> " + s + "; echo sbatch >> " + log +
                        "; echo $n\n");
    write("squeue", "cat " + s + " 2>/dev/null\n");
    write("scancel", "echo \"scancel $*\" >> " + log +
                         "; for a in \"$@\"; do case $a in --*) ;; *) id=$a;; esac; done; "
                         "case $1 in --signal=*) st=COMPLETED;; *) st=CANCELLED;; esac; "
                         "sed -i \"s/^$id .*/$id $st/\" " +
                         s + "\n");
    ::setenv("PATH", (dir_ + "/bin:" + old_path_).c_str(), 1);
  }
  ~FakeSlurm() { ::setenv("PATH", old_path_.c_str(), 1); }
  FakeSlurm(const FakeSlurm&) = delete;
  FakeSlurm& operator=(const FakeSlurm&) = delete;

  [[nodiscard]] std::string calls() const { return slurp(dir_ + "/calls"); }

 private:
  void write(const std::string& name, const std::string& body) const {
    const std::string path = dir_ + "/bin/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  std::string dir_, old_path_;
};

std::string make_store(const ScratchDir& d) {
  const std::string path = d.path("fanout.db");
  fanout::store::Db db(path, fanout::store::Db::Mode::ReadWriteCreate);
  fanout::store::apply_migrations(db, quiet());
  return path;
}

// pool_jobs as "id:reason" (reason "-" while not ended), by id.
std::string rows(const std::string& db_path) {
  fanout::store::Db db(db_path, fanout::store::Db::Mode::ReadOnly);
  fanout::store::Statement st(db,
                              "SELECT sched_job_id, coalesce(end_reason, '-'), "
                              "started IS NOT NULL FROM pool_jobs ORDER BY sched_job_id");
  std::string out;
  while (st.step()) {
    out += std::string(st.column_text(0)) + ":" + std::string(st.column_text(1)) +
           (st.column_int64(2) != 0 ? "" : "(never started)") + " ";
  }
  return out;
}

SlurmLauncher::Options options(const ScratchDir& d, std::uint32_t nodes) {
  SlurmLauncher::Options o;
  o.launch.kind = "slurm";
  o.nodes = nodes;
  o.job_name = "t";
  o.run_dir = d.path("run");
  o.quiet = true;
  return o;
}

// Polls `l` until `pred` holds (the launcher asks the scheduler every 2 s at most).
template <typename P>
bool poll_until(SlurmLauncher& l, P pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!pred() && std::chrono::steady_clock::now() < until) {
    (void)l.poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

}  // namespace

TEST_CASE("client.batch_elastic.idle_pool_job_is_drained_and_recorded") {
  ScratchDir d;
  FakeSlurm slurm(d);
  const std::string db = make_store(d);
  auto o = options(d, 2);
  o.launch.max_idletime_s = 5;
  SlurmLauncher l(o, quiet());
  l.start(PoolCommand{.argv = {"fanout-pool"}, .workers = 1}, 2);
  // Nothing waits; the pool of job 102 has held nothing for 10 s, job 101's is busy.
  l.observe(Load{.job_id = 7,
                 .backlog = 0,
                 .in_flight = 1,
                 .idle_pools = {{"n1-slurm102-0", 10.0}, {"n2-slurm1020-0", 30.0}},
                 .db = db});
  CHECK(slurm.calls().find("scancel --signal=TERM 102") != std::string::npos);
  CHECK(slurm.calls().find("scancel --signal=TERM 101") == std::string::npos);
  REQUIRE(poll_until(l, [&] { return rows(db) == "101:- 102:released-idle "; }));
  // The job is over: the rest is released, and recorded as finished.
  l.release();
  CHECK(rows(db) == "101:finished 102:released-idle ");
}

TEST_CASE("client.batch_elastic.backlog_adds_pool_jobs_within_max_nodes") {
  ScratchDir d;
  FakeSlurm slurm(d);
  const std::string db = make_store(d);
  auto o = options(d, 1);
  o.launch.init_nodes = 1;
  o.launch.max_nodes = 2;
  SlurmLauncher l(o, quiet());
  l.start(PoolCommand{.argv = {"fanout-pool"}, .workers = 1}, 1);
  l.observe(Load{.job_id = 7, .backlog = 10, .in_flight = 1, .db = db});
  CHECK(slurm.calls() == "sbatch\nsbatch\n");
  CHECK(slurm.calls().find("scancel") == std::string::npos);
  CHECK(rows(db) == "101:- 102:- ");
}

TEST_CASE("client.batch_elastic.fixed_size_without_the_keys") {
  // max_nodes alone allows replacements only: an idle pool is left alone, nothing is added.
  ScratchDir d;
  FakeSlurm slurm(d);
  const std::string db = make_store(d);
  auto o = options(d, 1);
  o.launch.max_nodes = 3;
  SlurmLauncher l(o, quiet());
  l.start(PoolCommand{.argv = {"fanout-pool"}, .workers = 1}, 1);
  l.observe(Load{.job_id = 7,
                 .backlog = 50,
                 .in_flight = 0,
                 .idle_pools = {{"n1-slurm101-0", 500.0}},
                 .db = db});
  CHECK(slurm.calls() == "sbatch\n");
  CHECK(rows(db) == "101:- ");  // recorded all the same
}
