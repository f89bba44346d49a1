// The ssh launcher's decisions (client/launch/ssh_script.hpp) and its keys in the job file and on
// the command line: the host list, the script each host runs, the ssh command line, and where a
// pool goes.
#include "client/launch/ssh_script.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "client/launch/run_plan.hpp"
#include "client/launch/run_settings.hpp"
#include "fanout/config/job_spec.hpp"
#include "scratch_dir.hpp"

namespace ssh = fanout::client::ssh;
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
    "fanout:\n"                       // 10
    "  launcher: ssh\n";              // 11

fanout::Expected<fanout::config::JobConfig> parse(const std::string& fanout_block) {
  ScratchDir t;
  t.write("data/a.txt", "a\n");
  t.write("src/score.py", "def run(mini_batch):\n    return mini_batch\n");
  return fanout::config::parse_job(kBase + fanout_block, t.path("job.yaml"));
}

bool has(const std::string& text, const std::string& piece) {
  return text.find(piece) != std::string::npos;
}

using Words = std::vector<std::string>;

}  // namespace

TEST_CASE("client.ssh.host_list_text_and_yaml_list") {
  CHECK(fanout::config::split_host_list("h1, h2,h3") == Words{"h1", "h2", "h3"});
  CHECK(fanout::config::split_host_list(" h1,,u@h2 ,") == Words{"h1", "u@h2"});
  CHECK(fanout::config::split_host_list("").empty());
  CHECK(fanout::config::split_words(" -p 2222\t-i  /k/id ") == Words{"-p", "2222", "-i", "/k/id"});

  auto r = parse("  hosts: h1, h2 ,h3\n  ssh_options: -p 2222 -i /keys/id\n");
  REQUIRE_MESSAGE(r.has_value(), r.error().message);
  CHECK(r->fanout.launch.kind == "ssh");
  CHECK(r->fanout.launch.hosts == Words{"h1", "h2", "h3"});
  CHECK(r->fanout.launch.ssh_options == Words{"-p", "2222", "-i", "/keys/id"});
  CHECK(r->fanout.launch.pool_command.empty());

  r = parse(
      "  hosts: [alice@h1, h2]\n  ssh_options: [-p, \"2222\"]\n  pool_command: "
      "/opt/fanout/bin/fanout-pool\n");
  REQUIRE_MESSAGE(r.has_value(), r.error().message);
  CHECK(r->fanout.launch.hosts == Words{"alice@h1", "h2"});
  CHECK(r->fanout.launch.ssh_options == Words{"-p", "2222"});
  CHECK(r->fanout.launch.pool_command == "/opt/fanout/bin/fanout-pool");
}

TEST_CASE("client.ssh.job_file_errors") {
  struct Case {
    std::string block, key, also;
  };
  const std::vector<Case> cases = {
      {"  hosts: \"\"\n", "fanout.hosts", "expected at least one host"},
      {"  hosts: [\"h 1\"]\n", "fanout.hosts", "without spaces"},
      {"  hosts: {a: b}\n", "fanout.hosts", "a list"},
      {"  pool_command: \"\"\n", "fanout.pool_command", "expected a path"},
      {"  scheduler_options: \"#SBATCH -N 1\"\n", "fanout.scheduler_options", "ssh_options"},
  };
  for (const auto& tc : cases) {
    CAPTURE(tc.block);
    auto r = parse(tc.block);
    REQUIRE(!r.has_value());
    const std::string& msg = r.error().message;
    CAPTURE(msg);
    CHECK(has(msg, "job.yaml:12: " + tc.key + ": "));
    CHECK(has(msg, tc.also));
  }
  // No hosts at load is fine: --hosts may give them; the client checks before starting.
  CHECK(parse("").has_value());
}

TEST_CASE("client.ssh.check_hosts") {
  CHECK(ssh::check_hosts({"h1", "alice@h2.example.org", "10.0.0.3"}).empty());
  CHECK(has(ssh::check_hosts({}), "expected at least one host"));
  CHECK(has(ssh::check_hosts({"h1", "-oProxyCommand=x"}), "host 2: expected a host name"));
  CHECK(has(ssh::check_hosts({"h1;rm"}), "host 1"));
  CHECK(has(ssh::check_hosts({"alice@"}), "host 1"));
  CHECK(ssh::node_of("alice@h2") == "h2");
  CHECK(ssh::node_of("h3") == "h3");
}

TEST_CASE("client.ssh.overrides_and_run_settings") {
  fanout::config::JobConfig c;
  c.name = "score";
  c.instance_count = 1;
  c.fanout.launch.kind = "ssh";
  c.fanout.launch.hosts = {"a", "b"};
  fanout::client::RunOverrides ov;
  // One pool per host listed by default, Curve with the user's keys.
  auto rs = fanout::client::run_settings(c, ov);
  CHECK(rs.pools == 2);
  CHECK(rs.transport == fanout::client::Transport::Curve);
  // The flags win over the job file; each --ssh-option is split at white space.
  ov.hosts = "h1,h2,h3";
  ov.ssh_options = {"-p 2222", "-i /k/id"};
  ov.pool_command = "/opt/fanout-pool";
  fanout::client::apply_overrides(c, ov);
  CHECK(c.fanout.launch.hosts == Words{"h1", "h2", "h3"});
  CHECK(c.fanout.launch.ssh_options == Words{"-p", "2222", "-i", "/k/id"});
  CHECK(c.fanout.launch.pool_command == "/opt/fanout-pool");
  rs = fanout::client::run_settings(c, ov);
  CHECK(rs.pools == 3);
  CHECK(fanout::client::plan_launcher(rs) == fanout::client::LauncherKind::Ssh);
  c.fanout.launch.nodes = 2;  // fewer pools than hosts: the rest are spares for replacements
  CHECK(fanout::client::run_settings(c, ov).pools == 2);
}

TEST_CASE("client.ssh.remote_script") {
  const std::string s =
      ssh::remote_script({.cwd = "/home/u/my work",
                          .run_dir = "/home/u/runs/score-1",
                          .worker_init = "source ~/venv/bin/activate",
                          .pool_argv = {"/opt/fanout-pool", "--interchange", "tcp://10.0.0.1:4242",
                                        "--keys", "/home/u/k"},
                          .node = "h2",
                          .block = 4,
                          .workers = 8});
  CAPTURE(s);
  CHECK(s.starts_with("cd '/home/u/my work' || exit 1\n"));
  CHECK(has(s, "\nsource ~/venv/bin/activate\n"));
  CHECK(s.find("activate") < s.find("/opt/fanout-pool"));
  CHECK(has(s, "mkdir -p '/home/u/runs/score-1/logs/sys/node/h2'"));
  CHECK(has(s,
            "'/opt/fanout-pool' '--interchange' 'tcp://10.0.0.1:4242' '--keys' '/home/u/k' "
            "--node 'h2' --name 'h2-ssh4' --log-file "
            "'/home/u/runs/score-1/logs/sys/node/h2/pool-ssh4.log' --first-process 25 3<&- &\n"));
  // ssh's stdin on fd 3 for the watcher, which stops the pool at its end; the pool's status out.
  CHECK(has(s, "exec 3<&0 </dev/null\n"));
  CHECK(has(s, "while read -r _ <&3; do :; done; kill -TERM $p"));
  CHECK(s.ends_with("wait $p\ns=$?\nkill $w 2>/dev/null\nexit $s\n"));
}

TEST_CASE("client.ssh.ssh_argv") {
  const auto argv = ssh::ssh_argv("alice@h2", {"-p", "2222", "-o", "ConnectTimeout=3"}, "echo 'x'");
  const Words want = {"ssh",
                      "-p",
                      "2222",
                      "-o",
                      "ConnectTimeout=3",
                      "-o",
                      "BatchMode=yes",
                      "-o",
                      "ConnectTimeout=10",
                      "-o",
                      "ServerAliveInterval=5",
                      "-o",
                      "ServerAliveCountMax=3",
                      "-o",
                      "LogLevel=ERROR",
                      "-T",
                      "--",
                      "alice@h2",
                      "exec /bin/sh -c 'echo '\\''x'\\'''"};
  CHECK(argv == want);
}

TEST_CASE("client.ssh.pick_host") {
  struct Row {
    std::vector<std::uint32_t> running, lost;
    std::size_t want;
  };
  const std::vector<Row> rows = {
      {{0, 0, 0}, {0, 0, 0}, 0},  // the first listed
      {{1, 0, 0}, {0, 0, 0}, 1},  // the next free host
      {{1, 1, 1}, {0, 0, 0}, 0},  // every host busy: the first again
      {{0, 1, 1}, {1, 0, 0}, 1},  // h1 lost its pool: a second pool on h2 rather than h1
      {{0, 1, 0}, {1, 0, 1}, 1},  // every other host lost one too: the one that lost none
      {{0, 0, 0}, {1, 1, 1}, 0},  // all lost one: the first
  };
  for (const auto& r : rows) {
    CAPTURE(r.want);
    CHECK(ssh::pick_host(r.running, r.lost) == r.want);
  }
}
