// The Slurm launcher's decisions (client/launch/slurm_script.hpp) and the launcher keys of the job
// file's `fanout:` block: the batch script, what sbatch and squeue print, the block policy, and
// the located errors of bad launcher keys.
#include "client/launch/slurm_script.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "client/launch/run_settings.hpp"
#include "fanout/config/job_spec.hpp"
#include "fanout/store/job_settings.hpp"
#include "scratch_dir.hpp"

namespace slurm = fanout::client::slurm;
using fanout::test::ScratchDir;

namespace {

const std::string kBase =
    "type: parallel\n"                // 1
    "inputs:\n"                       // 2
    "  data:\n"                       // 3
    "    type: uri_folder\n"          // 4
    "    path: ./data\n"              // 5
    "input_data: ${{inputs.data}}\n"  // 6
    "task:\n"                         // 7
    "  code: ./src\n"                 // 8
    "  entry_script: score.py\n"      // 9
    "fanout:\n";                      // 10

fanout::Expected<fanout::config::JobConfig> parse(const std::string& fanout_block) {
  ScratchDir t;
  t.write("data/a.txt", "a\n");
  t.write("src/score.py", "def run(mini_batch):\n    return mini_batch\n");
  return fanout::config::parse_job(kBase + fanout_block, t.path("job.yaml"));
}

bool has(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

}  // namespace

TEST_CASE("client.slurm.batch_script") {
  slurm::ScriptInput in;
  in.job_name = "score";
  in.run_dir = "/home/u/runs/score-1";
  in.launch.partition = "gpu";
  in.launch.account = "proj7";
  in.launch.qos = "short";
  in.launch.walltime = "01:30:00";
  in.launch.cores_per_node = 16;
  in.launch.exclusive = true;
  in.launch.scheduler_options = "#SBATCH --mem=4G\n#SBATCH --constraint=avx2";
  in.launch.worker_init = "module load python/3.11\nsource ~/venv/bin/activate";
  in.pool_argv = {"/opt/fanout/bin/fanout-pool", "--interchange", "tcp://10.0.0.1:4242", "--keys",
                  "/home/u/my keys"};
  const std::string s = slurm::batch_script(in);
  CAPTURE(s);
  CHECK(s.starts_with("#!/bin/sh\n"));
  for (const char* line :
       {"#SBATCH --job-name=fanout-score\n", "#SBATCH --nodes=1\n",
        "#SBATCH --output=/home/u/runs/score-1/slurm/pools-%j.out\n", "#SBATCH --partition=gpu\n",
        "#SBATCH --account=proj7\n", "#SBATCH --qos=short\n", "#SBATCH --time=01:30:00\n",
        "#SBATCH --cpus-per-task=16\n", "#SBATCH --exclusive\n", "#SBATCH --mem=4G\n",
        "#SBATCH --constraint=avx2\n", "module load python/3.11\nsource ~/venv/bin/activate\n"}) {
    CHECK(has(s, line));
  }
  // #SBATCH lines are read only before the first command: worker_init and srun come after.
  CHECK(s.find("#SBATCH --constraint") < s.find("module load"));
  CHECK(s.find("module load") < s.find("exec srun"));
  // The pool command, each word quoted; the space in the key folder stays one word.
  CHECK(has(s,
            "'/opt/fanout/bin/fanout-pool' '--interchange' 'tcp://10.0.0.1:4242' '--keys' "
            "'/home/u/my keys'"));
  CHECK(has(s, "'/home/u/runs/score-1/logs/sys/node'"));
  CHECK(has(s, "pool-slurm$SLURM_JOB_ID.log"));
  // The pools learn the allocation's end without a signal: the script's start + the walltime,
  // noted after the last #SBATCH line and before worker_init.
  CHECK(s.find("#SBATCH --constraint") < s.find("start=$(date +%s)"));
  CHECK(s.find("start=$(date +%s)") < s.find("module load"));
  CHECK(has(s, "'/home/u/my keys' --walltime-end \"$((start + 5400))\"\n"));
  CHECK_FALSE(has(s, "--signal"));

  slurm::ScriptInput bare;
  bare.job_name = "j";
  bare.run_dir = "/r";
  bare.pool_argv = {"fanout-pool"};
  const std::string b = slurm::batch_script(bare);
  CHECK(!has(b, "--partition"));
  CHECK(!has(b, "--time"));
  CHECK(!has(b, "--exclusive"));
  CHECK(!has(b, "--cpus-per-task"));
  CHECK(!has(b, "--walltime-end"));
  CHECK(!has(b, "start="));
  // Every form sbatch --time takes.
  struct Row {
    const char* time;
    const char* end;
  };
  for (const Row& r : {Row{"1", "60"}, Row{"1:30", "90"}, Row{"01:00:00", "3600"},
                       Row{"2-3", "183600"}, Row{"2-3:04", "183840"}, Row{"2-3:04:05", "183845"}}) {
    bare.launch.walltime = r.time;
    CAPTURE(r.time);
    CHECK(has(slurm::batch_script(bare), std::string("--walltime-end \"$((start + ") + r.end));
  }
  bare.launch.walltime = "infinite";
  CHECK(!has(slurm::batch_script(bare), "--walltime-end"));
}

TEST_CASE("client.slurm.shell_quote") {
  CHECK(slurm::shell_quote("a b") == "'a b'");
  CHECK(slurm::shell_quote("it's") == "'it'\\''s'");
  CHECK(slurm::shell_quote("") == "''");
}

TEST_CASE("client.slurm.parse_job_id") {
  CHECK(slurm::parse_job_id("123\n") == 123);
  CHECK(slurm::parse_job_id("77;cluster\n") == 77);
  CHECK(slurm::parse_job_id("") == 0);
  CHECK(slurm::parse_job_id("sbatch: error: x") == 0);
  CHECK(slurm::parse_job_id("12x") == 0);
}

TEST_CASE("client.slurm.parse_squeue_and_states") {
  auto st = slurm::parse_squeue("  12 RUNNING\n13 PENDING\n14 CANCELLED\n15_1 RUNNING\nnoise\n\n");
  CHECK(st.size() == 3);
  CHECK(st[12] == "RUNNING");
  CHECK(st[13] == "PENDING");
  CHECK(st[14] == "CANCELLED");
  CHECK(slurm::is_active("RUNNING"));
  CHECK(slurm::is_active("PENDING"));
  CHECK(slurm::is_active("CONFIGURING"));
  CHECK(slurm::is_active("SUSPENDED"));
  for (const char* ended : {"", "COMPLETING", "COMPLETED", "CANCELLED", "CANCELLED by 0", "TIMEOUT",
                            "PREEMPTED", "NODE_FAIL", "FAILED", "OUT_OF_MEMORY"}) {
    CAPTURE(ended);
    CHECK(!slurm::is_active(ended));
  }
  CHECK(slurm::describe_jobs({12, 13, 99}, st) == "slurm jobs 12 RUNNING, 13 PENDING, 99 GONE");
  CHECK(slurm::describe_jobs({12}, st) == "slurm job 12 RUNNING");
}

TEST_CASE("client.slurm.block_policy") {
  // Defaults: nodes at the start, no replacement (max_nodes = nodes).
  slurm::BlockPolicy def(2, 0, 0);
  CHECK(def.initial() == 2);
  CHECK(def.replacements(1, 2) == 0);
  CHECK(def.replacements(0, 2) == 0);
  // max_nodes above nodes: each pool job that ends is replaced until max_nodes were submitted.
  slurm::BlockPolicy rep(1, 0, 3);
  CHECK(rep.initial() == 1);
  CHECK(rep.replacements(1, 1) == 0);
  CHECK(rep.replacements(0, 1) == 1);
  CHECK(rep.replacements(0, 2) == 1);
  CHECK(rep.replacements(0, 3) == 0);  // the budget is spent
  // min_nodes below nodes: a job keeps going with fewer before anything is replaced.
  slurm::BlockPolicy low(3, 1, 5);
  CHECK(low.replacements(2, 3) == 0);
  CHECK(low.replacements(1, 3) == 0);
  CHECK(low.replacements(0, 3) == 1);
  // Several at once, within the budget.
  slurm::BlockPolicy many(4, 0, 6);
  CHECK(many.replacements(1, 4) == 2);
}

TEST_CASE("client.slurm.check_blocks") {
  fanout::config::LauncherSettings s;
  s.kind = "slurm";
  CHECK(slurm::check_blocks(s, 2).empty());
  s.max_nodes = 1;
  CHECK(has(slurm::check_blocks(s, 2), "max_nodes (--max-nodes): expected >= nodes (got 1 < 2)"));
  s.max_nodes = 0;
  s.min_nodes = 3;
  CHECK(has(slurm::check_blocks(s, 2), "min_nodes (--min-nodes): expected <= nodes (got 3 > 2)"));
  s.nodes = 3;
  CHECK(slurm::check_blocks(s, 1).empty());
}

TEST_CASE("client.slurm.end_advice") {
  fanout::config::LauncherSettings l;
  l.walltime = "00:01:00";
  CHECK(slurm::end_advice(12, "TIMEOUT", l) ==
        "; pool job 12 reached its walltime (fanout.walltime 00:01:00): raise it, or allow "
        "replacement pool jobs with --max-nodes");
  // Without fanout.walltime the partition's default limit applied.
  CHECK(has(slurm::end_advice(12, "TIMEOUT", {}),
            "the partition's default time limit (set "
            "fanout.walltime)"));
  // A pool that left before its walltime ends its job COMPLETED: the walltime is named too.
  CHECK(has(slurm::end_advice(12, "COMPLETED", l),
            "left before its walltime (fanout.walltime "
            "00:01:00)"));
  CHECK(slurm::end_advice(12, "COMPLETED", {}).empty());
  // Other ends say nothing more: the state in the message says enough.
  for (const char* st : {"CANCELLED", "CANCELLED by 0", "NODE_FAIL", "FAILED", ""}) {
    CHECK(slurm::end_advice(12, st, l).empty());
  }
}

TEST_CASE("client.slurm.job_file_keys") {
  auto r = parse(
      "  launcher: slurm\n"
      "  partition: debug\n"
      "  account: proj\n"
      "  qos: low\n"
      "  walltime: \"2-00:30:00\"\n"
      "  nodes: 2\n"
      "  min_nodes: 1\n"
      "  max_nodes: 4\n"
      "  cores_per_node: 8\n"
      "  exclusive: true\n"
      "  scheduler_options: |\n"
      "    #SBATCH --mem=2G\n"
      "  worker_init: module load x\n"
      "  interchange_address: 10.1.2.3\n");
  REQUIRE_MESSAGE(r.has_value(), r.error().message);
  const auto& l = r->fanout.launch;
  CHECK(l.kind == "slurm");
  CHECK(l.line == 11);
  CHECK(l.partition == "debug");
  CHECK(l.account == "proj");
  CHECK(l.qos == "low");
  CHECK(l.walltime == "2-00:30:00");
  CHECK(l.nodes == 2);
  CHECK(l.min_nodes == 1);
  CHECK(l.max_nodes == 4);
  CHECK(l.cores_per_node == 8);
  CHECK(l.exclusive);
  CHECK(l.scheduler_options == "#SBATCH --mem=2G\n");
  CHECK(l.worker_init == "module load x");
  CHECK(l.interchange_address == "10.1.2.3");

  auto none = parse("  prefetch: 1\n");
  REQUIRE(none.has_value());
  CHECK(none->fanout.launch.kind == "local");
}

TEST_CASE("client.slurm.job_file_errors") {
  struct Case {
    std::string block, key;
    int line;
    std::string also;
  };
  const std::vector<Case> cases = {
      {"  launcher: k8s\n", "fanout.launcher", 11,
       "expected local, slurm, sge, pbs, lsf, condor or ssh (got \"k8s\")"},
      {"  walltime: an hour\n", "fanout.walltime", 11, "Slurm time limit"},
      {"  walltime: \"1:2:3:4\"\n", "fanout.walltime", 11, "Slurm time limit"},
      {"  nodes: 0\n", "fanout.nodes", 11, ">= 1"},
      {"  nodes: 2\n  max_nodes: 1\n", "fanout.max_nodes", 12, "expected max_nodes >= nodes"},
      {"  nodes: 2\n  min_nodes: 3\n", "fanout.min_nodes", 12, "expected min_nodes <= nodes"},
      {"  partition: two words\n", "fanout.partition", 11, "expected one word"},
      {"  exclusive: sometimes\n", "fanout.exclusive", 11, ""},
      {"  scheduler_options: |\n    #SBATCH --mem=1G\n    --qos=x\n", "fanout.scheduler_options",
       11, "line 2: expected an #SBATCH, #$, #PBS, #BSUB line or a condor submit command"},
      {"  worker_init: [a, b]\n", "fanout.worker_init", 11, "shell lines"},
      {"  max_node: 3\n", "fanout.max_node", 11, "did you mean max_nodes?"},
  };
  for (const auto& tc : cases) {
    CAPTURE(tc.block);
    auto r = parse(tc.block);
    REQUIRE(!r.has_value());
    const std::string& msg = r.error().message;
    CAPTURE(msg);
    CHECK(has(msg, "job.yaml:" + std::to_string(tc.line) + ": " + tc.key + ": "));
    if (!tc.also.empty()) CHECK(has(msg, tc.also));
  }
  CHECK(slurm::check_blocks({}, 1).empty());
}

TEST_CASE("client.slurm.run_settings") {
  fanout::config::JobConfig c;
  c.name = "score";
  c.instance_count = 3;
  c.fanout.launch.kind = "slurm";
  c.fanout.launch.cores_per_node = 8;
  fanout::client::RunOverrides ov;
  ov.security.keys_dir = "/shared/keys";
  // nodes from instance_count, workers from cores_per_node, Curve with the user's keys.
  auto rs = fanout::client::run_settings(c, ov);
  CHECK(rs.launch.kind == "slurm");
  CHECK(rs.launch.nodes == 3);
  CHECK(rs.pools == 3);
  CHECK(rs.workers == 8);
  CHECK(rs.transport == fanout::client::Transport::Curve);
  CHECK(rs.keys_dir == "/shared/keys");
  // The command line wins over the job file.
  ov.nodes = 2;
  ov.max_nodes = 4;
  fanout::client::apply_overrides(c, ov);
  rs = fanout::client::run_settings(c, ov);
  CHECK(rs.pools == 2);
  CHECK(rs.launch.max_nodes == 4);
  // Recorded with the job; a local job's settings have no launcher keys.
  const auto json = fanout::store::settings_json(fanout::client::recorded_settings(c));
  CHECK(has(json, "\"launcher\":\"slurm\",\"nodes\":2,\"min_nodes\":0,\"max_nodes\":4"));
  c.fanout.launch.kind = "local";
  CHECK(!has(fanout::store::settings_json(fanout::client::recorded_settings(c)), "launcher"));
  rs = fanout::client::run_settings(c, fanout::client::RunOverrides{});
  CHECK(rs.transport == fanout::client::Transport::Ipc);
}

TEST_CASE("client.slurm.elastic_keys") {
  // Not elastic unless one of init_nodes, parallelism, max_idletime is given (max_nodes alone
  // keeps its meaning of replacements).
  auto fixed = parse("  launcher: slurm\n  nodes: 2\n  max_nodes: 4\n");
  REQUIRE_MESSAGE(fixed.has_value(), fixed.error().message);
  CHECK(!fixed->fanout.launch.elastic());
  auto r = parse(
      "  launcher: slurm\n"
      "  init_nodes: 1\n"
      "  max_nodes: 3\n"
      "  parallelism: 0.5\n"
      "  max_idletime: 30\n");
  REQUIRE_MESSAGE(r.has_value(), r.error().message);
  const auto& l = r->fanout.launch;
  CHECK(l.elastic());
  CHECK(l.init_nodes == 1);
  CHECK(l.parallelism == 0.5);
  CHECK(l.max_idletime_s == 30);
  // init_nodes is the start: the pools submitted first.
  auto rs = fanout::client::run_settings(*r, fanout::client::RunOverrides{});
  CHECK(rs.pools == 1);
  // The flags replace the keys, and any of them turns scaling on.
  auto c = *fixed;
  fanout::client::RunOverrides ov;
  ov.max_idletime_s = 5;
  fanout::client::apply_overrides(c, ov);
  CHECK(c.fanout.launch.elastic());
  CHECK(c.fanout.launch.max_idletime_s == 5);
  ov.init_nodes = 3;
  ov.parallelism = 0;
  fanout::client::apply_overrides(c, ov);
  CHECK(c.fanout.launch.parallelism == 0);
  CHECK(fanout::client::run_settings(c, ov).pools == 3);

  struct Case {
    std::string block, key, also;
  };
  const std::vector<Case> cases = {
      {"  parallelism: 2\n", "fanout.parallelism", "expected a number from 0 to 1"},
      {"  parallelism: lots\n", "fanout.parallelism", "expected a number from 0 to 1"},
      {"  max_idletime: -1\n", "fanout.max_idletime", "expected a number of seconds >= 0"},
      {"  init_nodes: 0\n", "fanout.init_nodes", ">= 1"},
      {"  init_nodes: 3\n  max_nodes: 2\n", "fanout.max_nodes", "expected max_nodes >= init_nodes"},
      {"  max_idletim: 3\n", "fanout.max_idletim", "did you mean max_idletime?"},
  };
  for (const auto& tc : cases) {
    CAPTURE(tc.block);
    auto e = parse(tc.block);
    REQUIRE(!e.has_value());
    CAPTURE(e.error().message);
    CHECK(has(e.error().message, tc.key + ": "));
    CHECK(has(e.error().message, tc.also));
  }
}

TEST_CASE("client.slurm.gpus_and_memory_per_node") {
  // fanout: keys -> the #SBATCH line each adds ("" : none), or the error at load.
  struct Row {
    const char* yaml;
    const char* line;
    const char* error;
  };
  const Row rows[] = {
      {"  gpus_per_node: 4\n", "#SBATCH --gpus-per-node=4\n", nullptr},
      {"  gpus_per_node: a100:2\n", "#SBATCH --gpus-per-node=a100:2\n", nullptr},
      {"  mem_per_node: 64G\n", "#SBATCH --mem=64G\n", nullptr},
      {"  mem_per_node: 4000\n", "#SBATCH --mem=4000\n", nullptr},
      {"  gpus_per_node: four\n", nullptr, "expected a GPU count such as 4 or a100:4"},
      {"  mem_per_node: 4 GB\n", nullptr, "expected a memory size as Slurm's --mem takes it"},
      {"  mem_per_node: a:4G\n", nullptr, "expected a memory size"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.yaml);
    auto r = parse(std::string("  launcher: slurm\n") + row.yaml);
    if (row.error != nullptr) {
      REQUIRE_FALSE(r.has_value());
      CHECK(has(r.error().message, row.error));
      continue;
    }
    REQUIRE_MESSAGE(r.has_value(), r.error().message);
    slurm::ScriptInput in;
    in.job_name = "j";
    in.run_dir = "/r";
    in.launch = r->fanout.launch;
    in.pool_argv = {"fanout-pool"};
    const std::string s = slurm::batch_script(in);
    CAPTURE(s);
    CHECK(has(s, row.line));
    CHECK(s.find(row.line) < s.find("exec srun"));
  }
  slurm::ScriptInput bare;
  bare.job_name = "j";
  bare.run_dir = "/r";
  bare.pool_argv = {"fanout-pool"};
  const std::string b = slurm::batch_script(bare);
  CHECK(!has(b, "--gpus-per-node"));
  CHECK(!has(b, "--mem"));
}
