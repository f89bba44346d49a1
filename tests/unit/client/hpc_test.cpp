// The PBS, LSF and HTCondor launchers' decisions (client/launch/hpc_script.hpp) and their
// fanout: keys: the submit files, and what qsub/qstat, bsub/bjobs and condor_submit/condor_q
// print. The printed samples are written here in the shapes their documentation shows (no
// scheduler runs on this machine), as are the error lines for jobs that left the queue.
#include "client/launch/hpc_script.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "client/launch/slurm_script.hpp"
#include "fanout/config/job_spec.hpp"
#include "scratch_dir.hpp"

namespace hpc = fanout::client::hpc;
using fanout::test::ScratchDir;
using hpc::Scheduler;

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

hpc::ScriptInput input() {
  hpc::ScriptInput in;
  in.job_name = "score";
  in.run_dir = "/home/u/runs/score-1";
  in.launch.queue = "gpuq";
  in.launch.account = "proj7";
  in.launch.walltime = "01:30:00";
  in.launch.cores_per_node = 16;
  in.launch.gpus_per_node = "4";
  in.launch.mem_per_node = "64G";
  in.launch.worker_init = "module load python/3.11\nsource ~/venv/bin/activate";
  in.pool_argv = {"/opt/fanout/bin/fanout-pool", "--interchange", "tcp://10.0.0.1:4242", "--keys",
                  "/home/u/my keys"};
  in.node_script = "/home/u/runs/score-1/x/pool-node.sh";
  return in;
}

}  // namespace

TEST_CASE("client.hpc.walltime_seconds") {
  struct Row {
    const char* text;
    std::uint64_t seconds;
  };
  for (const Row& r :
       {Row{"30", 1800}, Row{"30:15", 1815}, Row{"01:30:00", 5400}, Row{"2-00:00:00", 172800},
        Row{"1-2", 93600}, Row{"1-2:30", 95400}, Row{"1-02:03:04", 93784}, Row{"7", 420},
        Row{"0:45", 45}, Row{"infinite", 0}, Row{"UNLIMITED", 0}, Row{"", 0}, Row{"1:2:3:4", 0},
        Row{"1h", 0}, Row{"-5", 0}, Row{"1-", 0}, Row{"1:", 0}}) {
    CAPTURE(r.text);
    CHECK(hpc::walltime_seconds(r.text) == r.seconds);
  }
}

TEST_CASE("client.hpc.node_script") {
  auto in = input();
  struct Row {
    Scheduler s;
    const char* id;
  };
  for (const Row& r :
       {Row{Scheduler::Pbs, "id=pbs${PBS_JOBID%%.*}\n"}, Row{Scheduler::Lsf, "id=lsf$LSB_JOBID\n"},
        Row{Scheduler::Condor, "id=condor$1.$2\n"}}) {
    const std::string s = hpc::node_script(r.s, in);
    CAPTURE(s);
    CHECK(s.starts_with("#!/bin/sh\n"));
    CHECK(has(s, r.id));
    // worker_init runs before the pool, the pool command each word quoted.
    CHECK(s.find("module load python/3.11\nsource ~/venv/bin/activate\n") < s.find("exec "));
    CHECK(has(s,
              "exec '/opt/fanout/bin/fanout-pool' '--interchange' 'tcp://10.0.0.1:4242' '--keys' "
              "'/home/u/my keys' --walltime-end \"$((start + 5400))\" --node \"$node\" --name "
              "\"$node-$id\" --log-file "
              "'/home/u/runs/score-1/logs/sys/node'/\"$node/pool-$id.log\""));
  }
}

TEST_CASE("client.hpc.node_script_tells_the_pool_its_end") {
  auto in = input();
  // The start is noted before worker_init (which may take a while), the end is start + limit.
  for (Scheduler sched : {Scheduler::Pbs, Scheduler::Condor}) {
    const std::string s = hpc::node_script(sched, in);
    CAPTURE(s);
    CHECK(s.find("start=$(date +%s)") < s.find("module load"));
    CHECK(has(s, " --walltime-end \"$((start + 5400))\""));
  }
  // LSF's -W is in whole minutes, rounded up: its end is that limit.
  in.launch.walltime = "90:30";
  CHECK(has(hpc::node_script(Scheduler::Lsf, in), " --walltime-end \"$((start + 5460))\""));
  CHECK(has(hpc::node_script(Scheduler::Pbs, in), " --walltime-end \"$((start + 5430))\""));
  // No walltime, or one that is not a time: no end, no start.
  for (const char* w : {"", "unlimited", "soon"}) {
    in.launch.walltime = w;
    const std::string s = hpc::node_script(Scheduler::Pbs, in);
    CHECK_FALSE(has(s, "--walltime-end"));
    CHECK_FALSE(has(s, "start="));
  }
}

TEST_CASE("client.hpc.pbs_script") {
  struct Row {
    const char* flavor;
    std::uint32_t nodes;
    bool exclusive;
    std::vector<const char*> lines;
  };
  const std::vector<Row> rows = {
      {"",
       1,
       false,
       {"#PBS -l select=1:ncpus=16:ngpus=4:mem=64gb:mpiprocs=1\n", "#PBS -N fanout-score\n",
        "#PBS -j oe\n#PBS -o /home/u/runs/score-1/pbs/\n", "#PBS -V\n",
        "#PBS -l walltime=01:30:00\n", "#PBS -q gpuq\n", "#PBS -A proj7\n", "#PBS -m n\n",
        "\nexec /bin/sh '/home/u/runs/score-1/x/pool-node.sh'\n"}},
      {"pro",
       3,
       true,
       {"#PBS -l select=3:ncpus=16:ngpus=4:mem=64gb:mpiprocs=1\n", "#PBS -l place=scatter:excl\n",
        "\nexec pbsdsh -- /bin/sh '/home/u/runs/score-1/x/pool-node.sh'\n"}},
      {"torque",
       2,
       false,
       {"#PBS -l nodes=2:ppn=16:gpus=4\n", "#PBS -l mem=64gb\n",
        "\nexec pbsdsh -u -- /bin/sh '/home/u/runs/score-1/x/pool-node.sh'\n"}},
  };
  for (const Row& r : rows) {
    auto in = input();
    in.launch.pbs_flavor = r.flavor;
    in.launch.nodes_per_block = r.nodes;
    in.launch.exclusive = r.exclusive;
    in.launch.scheduler_options = "#PBS -m n";
    const std::string s = hpc::submit_file(Scheduler::Pbs, in);
    CAPTURE(s);
    CHECK(s.starts_with("#!/bin/sh\n"));
    for (const char* line : r.lines) CHECK(has(s, line));
    // Directives are read only before the first command.
    CHECK(s.find("#PBS -m n") < s.find("\nexec "));
  }
}

TEST_CASE("client.hpc.lsf_script") {
  auto in = input();
  in.launch.scheduler_options = "#BSUB -R \"select[avx2]\"";
  std::string s = hpc::submit_file(Scheduler::Lsf, in);
  CAPTURE(s);
  for (const char* line :
       {"#BSUB -J fanout-score\n", "#BSUB -o /home/u/runs/score-1/lsf/pools-%J.out\n",
        "#BSUB -n 16\n", "#BSUB -R \"span[hosts=1]\"\n", "#BSUB -W 1:30\n", "#BSUB -q gpuq\n",
        "#BSUB -P proj7\n", "#BSUB -gpu \"num=4\"\n", "#BSUB -M 64GB\n",
        "#BSUB -R \"select[avx2]\"\n", "\nexec /bin/sh '/home/u/runs/score-1/x/pool-node.sh'\n"}) {
    CHECK(has(s, line));
  }
  CHECK_FALSE(has(s, "#BSUB -x"));
  // Two nodes: slots on each, one pool per host through blaunch; a typed GPU count.
  in.launch.nodes_per_block = 2;
  in.launch.exclusive = true;
  in.launch.gpus_per_node = "v100:2";
  in.launch.walltime = "90";  // minutes, as Slurm reads it
  s = hpc::submit_file(Scheduler::Lsf, in);
  CAPTURE(s);
  for (const char* line : {"#BSUB -n 32\n", "#BSUB -R \"span[ptile=16]\"\n", "#BSUB -x\n",
                           "#BSUB -gpu \"num=2:gmodel=v100\"\n", "#BSUB -W 1:30\n",
                           "exec blaunch -z \"$hosts\" /bin/sh "}) {
    CHECK(has(s, line));
  }
}

TEST_CASE("client.hpc.condor_submit") {
  auto in = input();
  in.launch.nodes_per_block = 3;
  in.launch.scheduler_options = "requirements = (OpSys == \"LINUX\")\n+WantGPULab = true";
  const std::string s = hpc::submit_file(Scheduler::Condor, in);
  CAPTURE(s);
  for (const char* line :
       {"universe = vanilla\n", "executable = /home/u/runs/score-1/x/pool-node.sh\n",
        "arguments = \"$(Cluster) $(Process)\"\n",
        "output = /home/u/runs/score-1/condor/pools-$(Cluster).$(Process).out\n",
        "log = /home/u/runs/score-1/condor/pools.log\n", "getenv = True\n", "request_cpus = 16\n",
        "request_memory = 64G\n", "request_gpus = 4\n", "+ProjectName = \"proj7\"\n",
        "periodic_remove = (JobStatus == 2) && (time() - EnteredCurrentStatus > 5400)\n",
        "requirements = (OpSys == \"LINUX\")\n+WantGPULab = true\n"}) {
    CHECK(has(s, line));
  }
  CHECK(s.ends_with("queue 3\n"));
}

TEST_CASE("client.hpc.commands") {
  CHECK(hpc::submit_command(Scheduler::Pbs, "/r/pools.pbs").argv ==
        std::vector<std::string>{"qsub", "/r/pools.pbs"});
  const auto bsub = hpc::submit_command(Scheduler::Lsf, "/r/pools.lsf");
  CHECK(bsub.argv == std::vector<std::string>{"bsub"});
  CHECK(bsub.stdin_file == "/r/pools.lsf");
  CHECK(hpc::status_command(Scheduler::Condor, {"42"}).argv ==
        std::vector<std::string>{"condor_q", "-af:j", "JobStatus", "42"});
  CHECK(hpc::cancel_command(Scheduler::Lsf, {"7", "8"}).argv ==
        std::vector<std::string>{"bkill", "7", "8"});
}

TEST_CASE("client.hpc.parse_submit") {
  struct Row {
    Scheduler s;
    const char* out;
    const char* id;
  };
  for (const Row& r : {
           Row{Scheduler::Pbs, "1234.pbs01\n", "1234.pbs01"},
           Row{Scheduler::Pbs, "  98765.torque-srv.example.org\n", "98765.torque-srv.example.org"},
           Row{Scheduler::Pbs, "qsub: Unknown queue\n", ""},
           Row{Scheduler::Pbs, "", ""},
           Row{Scheduler::Lsf, "Job <4711> is submitted to queue <normal>.\n", "4711"},
           Row{Scheduler::Lsf, "Job <4712> is submitted to default queue <normal>.\n", "4712"},
           Row{Scheduler::Lsf, "Request aborted by esub. Job not submitted.\n", ""},
           Row{Scheduler::Condor, "Submitting job(s).\n1 job(s) submitted to cluster 42.\n", "42"},
           Row{Scheduler::Condor, "Submitting job(s)...\n3 job(s) submitted to cluster 8801.\n",
               "8801"},
           Row{Scheduler::Condor, "ERROR: Failed to connect to local queue manager\n", ""},
       }) {
    CAPTURE(r.out);
    CHECK(hpc::parse_submit(r.s, r.out) == r.id);
  }
}

TEST_CASE("client.hpc.parse_status") {
  SUBCASE("pbs") {
    const std::string out =
        "Job Id: 1234.pbs01.example.org\n"
        "    Job_Name = fanout-score\n"
        "    Job_Owner = alice@login1.example.org\n"
        "    job_state = R\n"
        "    queue = workq\n"
        "    exec_host = node12/0*16\n"
        "    Resource_List.walltime = 01:30:00\n"
        "\n"
        "Job Id: 1235.pbs01.example.org\n"
        "    Job_Name = fanout-score\n"
        "    job_state = Q\n"
        "\n"
        "Job Id: 1238.pbs01\n"
        "    job_state = F\n";
    const std::string err =
        "qstat: 1236.pbs01 Job has finished, use -x or -H to obtain historical job information\n"
        "qstat: Unknown Job Id 1237.pbs01\n";
    auto st = hpc::parse_status(Scheduler::Pbs, out, err);
    CHECK(st.size() == 5);
    CHECK(st["1234"] == "R");
    CHECK(st["1235"] == "Q");
    CHECK(st["1236"].empty());
    CHECK(st["1237"].empty());
    CHECK(st["1238"] == "F");
    CHECK(hpc::key_of(Scheduler::Pbs, "1234.pbs01") == "1234");
  }
  SUBCASE("lsf") {
    const std::string out =
        "JOBID   USER    STAT  QUEUE      FROM_HOST   EXEC_HOST   JOB_NAME   SUBMIT_TIME\n"
        "4711    alice   RUN   normal     login1      16*node07   fanout-score Nov 26 06:40\n"
        "4712    alice   PEND  normal     login1      -           fanout-score Nov 26 06:41\n"
        "4713    alice   DONE  normal     login1      16*node08   fanout-score Nov 26 06:30\n";
    auto st = hpc::parse_status(Scheduler::Lsf, out, "Job <4714> is not found\n");
    CHECK(st.size() == 4);
    CHECK(st["4711"] == "RUN");
    CHECK(st["4712"] == "PEND");
    CHECK(st["4713"] == "DONE");
    CHECK(st["4714"].empty());
  }
  SUBCASE("condor") {
    // condor_q -af:j JobStatus: a cluster is as active as its most active process.
    const std::string out = "88.0 4\n88.1 2\n89.0 1\n90.0 5\n91.0 3\n91.1 4\nnot a line\n";
    auto st = hpc::parse_status(Scheduler::Condor, out, "");
    CHECK(st.size() == 4);
    CHECK(st["88"] == "RUNNING");
    CHECK(st["89"] == "IDLE");
    CHECK(st["90"] == "HELD");
    CHECK(st["91"] == "COMPLETED");
  }
}

TEST_CASE("client.hpc.is_active") {
  struct Row {
    Scheduler s;
    const char* state;
    bool active;
  };
  for (const Row& r :
       {Row{Scheduler::Pbs, "Q", true}, Row{Scheduler::Pbs, "R", true},
        Row{Scheduler::Pbs, "H", true}, Row{Scheduler::Pbs, "E", false},
        Row{Scheduler::Pbs, "F", false}, Row{Scheduler::Pbs, "C", false},
        Row{Scheduler::Lsf, "PEND", true}, Row{Scheduler::Lsf, "RUN", true},
        Row{Scheduler::Lsf, "USUSP", true}, Row{Scheduler::Lsf, "DONE", false},
        Row{Scheduler::Lsf, "EXIT", false}, Row{Scheduler::Condor, "IDLE", true},
        Row{Scheduler::Condor, "HELD", true}, Row{Scheduler::Condor, "REMOVED", false},
        Row{Scheduler::Condor, "COMPLETED", false}, Row{Scheduler::Condor, "", false}}) {
    CAPTURE(r.state);
    CHECK(hpc::is_active(r.s, r.state) == r.active);
  }
}

TEST_CASE("client.hpc.launcher_keys") {
  auto ok = parse(
      "  launcher: pbs\n"
      "  queue: workq\n"
      "  nodes_per_block: 2\n"
      "  pbs_flavor: torque\n"
      "  worker_init: |\n"
      "    module load python\n"
      "  scheduler_options: |\n"
      "    #PBS -m n\n");
  REQUIRE(ok);
  CHECK(ok->fanout.launch.kind == "pbs");
  CHECK(ok->fanout.launch.queue == "workq");
  CHECK(ok->fanout.launch.nodes_per_block == 2);
  CHECK(ok->fanout.launch.pbs_flavor == "torque");
  CHECK(ok->fanout.launch.worker_init == "module load python\n");
  struct Row {
    const char* block;
    const char* error;
  };
  for (const Row& r : {
           Row{"  launcher: k8s\n", "job.yaml:11"},
           Row{"  launcher: k8s\n",
               "expected local, slurm, sge, pbs, lsf, condor or ssh (got \"k8s\")"},
           Row{"  launcher: sge\n  scheduler_options: \"#PBS -m n\"\n",
               "line 1: expected an #$ line for launcher sge"},
           Row{"  launcher: lsf\n  scheduler_options: |\n    #BSUB -x\n    #PBS -m n\n",
               "line 2: expected an #BSUB line for launcher lsf (got \"#PBS -m n\")"},
           Row{"  launcher: slurm\n  scheduler_options: \"#PBS -m n\"\n",
               "line 1: expected an #SBATCH line for launcher slurm"},
           Row{"  launcher: condor\n  scheduler_options: \"#BSUB -x\"\n",
               "expected a submit description command `key = value` for launcher condor"},
           Row{"  queue: two words\n", "expected one word (got \"two words\")"},
           Row{"  pbs_flavor: openpbs\n", "expected pro or torque (got \"openpbs\")"},
           Row{"  nodes_per_block: 0\n", "job.yaml:11"},
       }) {
    CAPTURE(r.block);
    auto bad = parse(r.block);
    REQUIRE_FALSE(bad);
    CAPTURE(bad.error().message);
    CHECK(has(bad.error().message, r.error));
  }
  CHECK(
      fanout::config::check_scheduler_options("condor", "request_disk = 1G\n+Foo = 1\n\n").empty());
}

TEST_CASE("client.hpc.slurm_nodes_per_block") {
  // Slurm's batch script asks for nodes_per_block nodes; its srun runs one pool on each.
  fanout::client::slurm::ScriptInput in;
  in.job_name = "score";
  in.run_dir = "/r";
  in.pool_argv = {"fanout-pool"};
  CHECK(has(fanout::client::slurm::batch_script(in), "#SBATCH --nodes=1\n"));
  in.launch.nodes_per_block = 3;
  const std::string s = fanout::client::slurm::batch_script(in);
  CHECK(has(s, "#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\n"));
  CHECK(has(s, "exec srun --ntasks-per-node=1"));
}

// A job name holding a newline became a shell line (or a directive) of its own in the Slurm,
// Grid Engine, PBS, LSF and HTCondor scripts; every batch launcher now refuses it first.
TEST_CASE("client.hpc.control_characters_in_script_values_are_refused") {
  const auto in = input();
  CHECK(hpc::check_script_values(in.job_name, in.run_dir, in.launch).has_value());
  CHECK(hpc::check_script_values("name with spaces, 'quotes' & $x", in.run_dir, in.launch)
            .has_value());
  auto refused = [&](const std::string& name, const std::string& dir,
                     const fanout::config::LauncherSettings& l, const std::string& what) {
    auto r = hpc::check_script_values(name, dir, l);
    REQUIRE(!r.has_value());
    CHECK(r.error().code == fanout::ErrorCode::InvalidArgument);
    CHECK(has(r.error().message, what));
    CHECK(r.error().message.find('\n') == std::string::npos);
  };
  SUBCASE("a newline in the job's name") {
    refused("x\ntouch /tmp/pwned", in.run_dir, in.launch, "the job's name 'x\\x0atouch");
  }
  SUBCASE("a carriage return or an escape") {
    refused("x\ry", in.run_dir, in.launch, "0x0d");
    refused("x\x1b[2Jy", in.run_dir, in.launch, "0x1b");
  }
  SUBCASE("a newline in the run folder") {
    refused(in.job_name, "/home/u/runs/a\nb", in.launch, "the run folder");
  }
  SUBCASE("a newline in a one-line setting") {
    auto l = in.launch;
    l.partition = "gpu\n#SBATCH --uid=0";
    refused(in.job_name, in.run_dir, l, "fanout.partition");
  }
}
