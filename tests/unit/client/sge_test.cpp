// The Grid Engine launcher's decisions (client/launch/sge_script.hpp): the job script, the time
// limit as h_rt, what qsub -terse and qstat print, and which states still hold a slot.
#include "client/launch/sge_script.hpp"

#include <doctest/doctest.h>

#include <string>

namespace sge = fanout::client::sge;

namespace {

bool has(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

}  // namespace

TEST_CASE("client.sge.job_script") {
  sge::ScriptInput in;
  in.job_name = "score";
  in.run_dir = "/home/u/runs/score-1";
  in.launch.partition = "all.q";
  in.launch.account = "proj7";
  in.launch.walltime = "01:30:00";
  in.launch.cores_per_node = 16;
  in.launch.scheduler_options = "#$ -l mem_free=4G";
  in.launch.worker_init = "module load python/3.11";
  in.pool_argv = {"/opt/fanout/bin/fanout-pool", "--interchange", "tcp://10.0.0.1:4242", "--keys",
                  "/home/u/my keys"};
  const std::string s = sge::job_script(in);
  CHECK(s.rfind("#!/bin/sh\n", 0) == 0);
  CHECK(has(s, "#$ -N fanout-score\n"));
  CHECK(has(s, "#$ -S /bin/sh\n"));
  CHECK(has(s, "#$ -j y\n"));
  CHECK(has(s, "#$ -o /home/u/runs/score-1/sge/pools-$JOB_ID.out\n"));
  CHECK(has(s, "#$ -pe smp 16\n"));
  CHECK(has(s, "#$ -l h_rt=1:30:00\n"));
  CHECK(has(s, "#$ -q all.q\n"));
  CHECK(has(s, "#$ -P proj7\n"));
  CHECK(has(s, "#$ -l mem_free=4G\n"));
  CHECK(has(s, "# worker_init\nmodule load python/3.11\n"));
  // The directives come before the first command, or qsub would not read them.
  CHECK(s.find("#$ -l mem_free") < s.find("module load"));
  CHECK(has(s,
            "exec '/opt/fanout/bin/fanout-pool' '--interchange' 'tcp://10.0.0.1:4242' "
            "'--keys' '/home/u/my keys'"));
  CHECK(has(s, "--name \"$node-sge$JOB_ID\""));
  CHECK(has(s, "--log-file \"$logs/pool-sge$JOB_ID.log\""));
  CHECK(has(s, "logs='/home/u/runs/score-1/logs/sys/node'/$node\n"));
  // h_rt kills at the end: the pool is told it (the script's start + h_rt) and leaves before.
  CHECK(s.find("#$ -l mem_free") < s.find("start=$(date +%s)"));
  CHECK(s.find("start=$(date +%s)") < s.find("module load"));
  CHECK(has(s, "'/home/u/my keys' --walltime-end \"$((start + 5400))\" \\\n  --node"));

  sge::ScriptInput bare;
  bare.job_name = "j";
  bare.run_dir = "/r";
  bare.pool_argv = {"fanout-pool"};
  const std::string b = sge::job_script(bare);
  CHECK_FALSE(has(b, "-pe "));
  CHECK_FALSE(has(b, "h_rt"));
  CHECK_FALSE(has(b, "#$ -q"));
  CHECK_FALSE(has(b, "#$ -P"));
  CHECK_FALSE(has(b, "worker_init"));
  CHECK_FALSE(has(b, "--walltime-end"));
}

TEST_CASE("client.sge.h_rt") {
  CHECK(sge::h_rt("30") == "0:30:00");
  CHECK(sge::h_rt("90") == "1:30:00");
  CHECK(sge::h_rt("5:30") == "0:05:30");
  CHECK(sge::h_rt("01:00:00") == "1:00:00");
  CHECK(sge::h_rt("2-00:00:00") == "48:00:00");
  CHECK(sge::h_rt("1-2") == "26:00:00");
  CHECK(sge::h_rt("1-2:30") == "26:30:00");
  CHECK(sge::h_rt("") == "");
  CHECK(sge::h_rt("abc") == "");
  CHECK(sge::h_rt("1:2:3:4") == "");
}

TEST_CASE("client.sge.parse_job_id") {
  CHECK(sge::parse_job_id("123\n") == 123);
  CHECK(sge::parse_job_id("  77") == 77);
  CHECK(sge::parse_job_id("42.1-4:1\n") == 42);
  CHECK(sge::parse_job_id("") == 0);
  CHECK(sge::parse_job_id("Unable to run job: denied\n") == 0);
  CHECK(sge::parse_job_id("12abc") == 0);
}

TEST_CASE("client.sge.parse_qstat") {
  const std::string text =
      "job-ID  prior   name       user         state submit/start at     queue                    "
      "      slots ja-task-ID \n"
      "-----------------------------------------------------------------------------------------"
      "------------------------\n"
      "     11 0.55500 fanout-sco root         r     11/26/2026 07:10:01 all.q@vm                 "
      "          1        \n"
      "     12 0.00000 fanout-sco root         qw    11/26/2026 07:10:02                          "
      "          1        \n"
      "     13 0.00000 fanout-sco root         Eqw   11/26/2026 07:10:03                          "
      "          1        \n"
      "     14 0.55500 fanout-sco root         dr    11/26/2026 07:10:01 all.q@vm                 "
      "          1        \n"
      "garbage line\n";
  auto st = sge::parse_qstat(text);
  REQUIRE(st.size() == 4);
  CHECK(st[11] == "r");
  CHECK(st[12] == "qw");
  CHECK(st[13] == "Eqw");
  CHECK(st[14] == "dr");
  CHECK(sge::parse_qstat("").empty());
}

TEST_CASE("client.sge.is_active") {
  CHECK(sge::is_active("r"));
  CHECK(sge::is_active("qw"));
  CHECK(sge::is_active("hqw"));
  CHECK(sge::is_active("t"));
  CHECK(sge::is_active("Rr"));
  CHECK(sge::is_active("s"));
  CHECK_FALSE(sge::is_active(""));
  CHECK_FALSE(sge::is_active("Eqw"));
  CHECK_FALSE(sge::is_active("dr"));
  CHECK_FALSE(sge::is_active("dt"));
}

TEST_CASE("client.sge.describe_jobs") {
  CHECK(sge::describe_jobs({12}, {{12, "r"}}) == "sge job 12 r");
  CHECK(sge::describe_jobs({12, 13}, {{12, "r"}}) == "sge jobs 12 r, 13 GONE");
}
