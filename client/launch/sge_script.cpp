// The Grid Engine launcher's decisions, without I/O. See sge_script.hpp.
#include "client/launch/sge_script.hpp"

#include <fmt/format.h>

#include <charconv>

#include "client/launch/hpc_script.hpp"
#include "client/launch/slurm_script.hpp"

namespace fanout::client::sge {

namespace {

// The number at the front of `s` (digits only), or -1 when there is none or more follows.
long long number(std::string_view s) {
  long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) return -1;
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t pos = 0;;) {
    auto at = s.find(sep, pos);
    parts.push_back(s.substr(pos, at - pos));
    if (at == std::string_view::npos) return parts;
    pos = at + 1;
  }
}

}  // namespace

std::string h_rt(std::string_view w) {
  const std::uint64_t secs = hpc::walltime_seconds(w);
  if (secs == 0) return {};
  return fmt::format("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
}

std::string job_script(const ScriptInput& in) {
  const auto& l = in.launch;
  std::string s = "#!/bin/sh\n";
  s += fmt::format(
      "# Written by `fanout run` for job '{}': one fanout-pool on the host Grid Engine gives this\n"
      "# job, connecting back to the job's interchange. Kept for you to read (docs/cluster.md).\n",
      in.job_name);
  s += fmt::format("#$ -N fanout-{}\n#$ -S /bin/sh\n#$ -j y\n", in.job_name);
  s += fmt::format("#$ -o {}/sge/pools-$JOB_ID.out\n", in.run_dir);
  if (l.cores_per_node > 0) s += fmt::format("#$ -pe smp {}\n", l.cores_per_node);
  if (!l.walltime.empty()) s += fmt::format("#$ -l h_rt={}\n", h_rt(l.walltime));
  const std::string& queue = l.queue.empty() ? l.partition : l.queue;
  if (!queue.empty()) s += fmt::format("#$ -q {}\n", queue);
  if (!l.account.empty()) s += fmt::format("#$ -P {}\n", l.account);
  if (!l.scheduler_options.empty()) {
    s += l.scheduler_options;
    if (s.back() != '\n') s += '\n';
  }
  // h_rt is a hard limit (SIGKILL at the end): the pool leaves before it.
  const std::uint64_t limit = hpc::walltime_seconds(l.walltime);
  if (limit > 0) s += "\n" + std::string(hpc::kWalltimeStart);
  if (!l.worker_init.empty()) {
    s += "\n# worker_init\n" + l.worker_init;
    if (s.back() != '\n') s += '\n';
  }
  // The host's name and the job id are known only on the exec host.
  s += "\nnode=$(hostname -s)\n";
  s += "logs=" + slurm::shell_quote(in.run_dir + "/logs/sys/node") + "/$node\n";
  s += "mkdir -p \"$logs\" || exit 1\nexec";
  for (const auto& a : in.pool_argv) s += " " + slurm::shell_quote(a);
  s += hpc::walltime_end_flag(limit);
  s += " \\\n  --node \"$node\" --name \"$node-sge$JOB_ID\" --log-file "
       "\"$logs/pool-sge$JOB_ID.log\"\n";
  return s;
}

std::uint64_t parse_job_id(std::string_view out) {
  while (!out.empty() && (out.front() == ' ' || out.front() == '\n')) out.remove_prefix(1);
  std::uint64_t id = 0;
  auto [p, ec] = std::from_chars(out.data(), out.data() + out.size(), id);
  if (ec != std::errc{} || p == out.data()) return 0;
  if (p != out.data() + out.size() && *p != '.' && *p != '\n' && *p != ' ' && *p != '\r') {
    return 0;
  }
  return id;
}

std::map<std::uint64_t, std::string> parse_qstat(std::string_view text) {
  std::map<std::uint64_t, std::string> states;
  for (auto line : split(text, '\n')) {
    std::vector<std::string_view> words;
    for (auto w : split(line, ' ')) {
      if (!w.empty() && w != "\r") words.push_back(w);
    }
    // job-ID prior name user state ...: the id is a number, the state the fifth word.
    if (words.size() < 5) continue;
    const long long id = number(words[0]);
    if (id <= 0) continue;
    states.emplace(static_cast<std::uint64_t>(id), std::string(words[4]));
  }
  return states;
}

bool is_active(std::string_view state) {
  return !state.empty() && state.find('E') == std::string_view::npos &&
         state.find('d') == std::string_view::npos;
}

std::string describe_jobs(const std::vector<std::uint64_t>& ids,
                          const std::map<std::uint64_t, std::string>& states) {
  std::string s = ids.size() == 1 ? "sge job" : "sge jobs";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto it = states.find(ids[i]);
    const std::string st = it == states.end() || it->second.empty() ? "GONE" : it->second;
    s += fmt::format("{} {} {}", i == 0 ? "" : ",", ids[i], st);
  }
  return s;
}

}  // namespace fanout::client::sge
