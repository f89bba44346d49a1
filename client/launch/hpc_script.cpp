// The PBS, LSF and HTCondor launchers' decisions, without I/O. See hpc_script.hpp.
#include "client/launch/hpc_script.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

#include "client/launch/slurm_script.hpp"

namespace fanout::client::hpc {

namespace {

using slurm::shell_quote;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    auto nl = text.find('\n', pos);
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  return lines;
}

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> words;
  for (std::size_t pos = 0; pos < line.size();) {
    while (pos < line.size() && std::isspace(static_cast<unsigned char>(line[pos])) != 0) ++pos;
    auto end = pos;
    while (end < line.size() && std::isspace(static_cast<unsigned char>(line[end])) == 0) ++end;
    if (end > pos) words.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  return words;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

std::uint64_t number(std::string_view s) {
  std::uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// "[type:]count" of gpus_per_node → {type, count}.
std::pair<std::string, std::string> gpu_parts(const std::string& gpus) {
  auto colon = gpus.rfind(':');
  if (colon == std::string::npos) return {"", gpus};
  return {gpus.substr(0, colon), gpus.substr(colon + 1)};
}

// mem_per_node as Slurm's --mem reads it ("64G", "4000": megabytes) → {count, unit letter}.
std::pair<std::string, char> mem_parts(const std::string& mem) {
  if (!mem.empty() && std::isalpha(static_cast<unsigned char>(mem.back())) != 0) {
    return {mem.substr(0, mem.size() - 1),
            static_cast<char>(std::tolower(static_cast<unsigned char>(mem.back())))};
  }
  return {mem, 'm'};
}

std::uint32_t nodes_per_block(const config::LauncherSettings& l) {
  return std::max(1u, l.nodes_per_block);
}

void append_lines(std::string& s, const std::string& text) {
  if (text.empty()) return;
  s += text;
  if (s.back() != '\n') s += '\n';
}

std::string head(Scheduler s, const ScriptInput& in, std::string_view what) {
  return fmt::format(
      "# Written by `fanout run` for job '{}' (launcher {}): {}\n"
      "# connecting back to the job's interchange. Kept for you to read (docs/cluster.md).\n",
      in.job_name, name_of(s), what);
}

std::string pbs_script(const ScriptInput& in) {
  const auto& l = in.launch;
  const std::uint32_t n = nodes_per_block(l);
  const bool torque = l.pbs_flavor == "torque";
  std::string s = "#!/bin/sh\n" + head(Scheduler::Pbs, in, "one fanout-pool on each node,");
  // PBS job names: at most 15 characters on older servers.
  s += fmt::format("#PBS -N {}\n", ("fanout-" + in.job_name).substr(0, 15));
  // Standard output and error joined, into the folder (PBS names the file <name>.o<seq>).
  s += fmt::format("#PBS -j oe\n#PBS -o {}/pbs/\n", in.run_dir);
  s += "#PBS -V\n";  // the pools see the submitting environment, as under Slurm
  const auto [gtype, gcount] = gpu_parts(l.gpus_per_node);
  const auto [mcount, munit] = mem_parts(l.mem_per_node);
  if (torque) {
    std::string res = fmt::format("nodes={}", n);
    if (l.cores_per_node > 0) res += fmt::format(":ppn={}", l.cores_per_node);
    if (!gcount.empty()) res += ":gpus=" + gcount;
    s += "#PBS -l " + res + "\n";
    if (!l.mem_per_node.empty()) s += fmt::format("#PBS -l mem={}{}b\n", mcount, munit);
  } else {
    // One chunk per node, each listed once in $PBS_NODEFILE (mpiprocs=1), so pbsdsh runs one
    // pool per node.
    std::string res = fmt::format("select={}", n);
    if (l.cores_per_node > 0) res += fmt::format(":ncpus={}", l.cores_per_node);
    if (!gcount.empty()) res += ":ngpus=" + gcount;
    if (!l.mem_per_node.empty()) res += fmt::format(":mem={}{}b", mcount, munit);
    res += ":mpiprocs=1";
    s += "#PBS -l " + res + "\n";
    std::string place = n > 1 ? "scatter" : "";
    if (l.exclusive) place += place.empty() ? "excl" : ":excl";
    if (!place.empty()) s += "#PBS -l place=" + place + "\n";
  }
  if (const auto w = walltime_seconds(l.walltime); w > 0) {
    s += fmt::format("#PBS -l walltime={:02}:{:02}:{:02}\n", w / 3600, w / 60 % 60, w % 60);
  }
  if (!l.queue.empty()) s += fmt::format("#PBS -q {}\n", l.queue);
  if (!l.account.empty()) s += fmt::format("#PBS -A {}\n", l.account);
  append_lines(s, l.scheduler_options);
  const std::string node = "/bin/sh " + shell_quote(in.node_script);
  if (n == 1) {
    s += "\nexec " + node + "\n";
  } else {
    s += "\nexec pbsdsh " + std::string(torque ? "-u " : "") + "-- " + node + "\n";
  }
  return s;
}

std::string lsf_script(const ScriptInput& in) {
  const auto& l = in.launch;
  const std::uint32_t n = nodes_per_block(l);
  const std::uint32_t cores = std::max(1u, l.cores_per_node);
  std::string s = "#!/bin/sh\n" + head(Scheduler::Lsf, in, "one fanout-pool on each node,");
  s += fmt::format("#BSUB -J fanout-{}\n", in.job_name);
  s += fmt::format("#BSUB -o {}/lsf/pools-%J.out\n", in.run_dir);
  // Slots are cores: `cores` on each of `n` hosts.
  s += fmt::format("#BSUB -n {}\n", n * cores);
  s += n == 1 ? std::string("#BSUB -R \"span[hosts=1]\"\n")
              : fmt::format("#BSUB -R \"span[ptile={}]\"\n", cores);
  if (const auto w = walltime_seconds(l.walltime); w > 0) {
    const auto minutes = (w + 59) / 60;  // -W takes [hours:]minutes
    s += fmt::format("#BSUB -W {}:{:02}\n", minutes / 60, minutes % 60);
  }
  if (!l.queue.empty()) s += fmt::format("#BSUB -q {}\n", l.queue);
  if (!l.account.empty()) s += fmt::format("#BSUB -P {}\n", l.account);
  if (l.exclusive) s += "#BSUB -x\n";
  const auto [gtype, gcount] = gpu_parts(l.gpus_per_node);
  if (!gcount.empty()) {
    s += fmt::format("#BSUB -gpu \"num={}{}\"\n", gcount, gtype.empty() ? "" : ":gmodel=" + gtype);
  }
  if (!l.mem_per_node.empty()) {
    const auto [mcount, munit] = mem_parts(l.mem_per_node);
    s += fmt::format("#BSUB -M {}{}B\n", mcount,
                     static_cast<char>(std::toupper(static_cast<unsigned char>(munit))));
  }
  append_lines(s, l.scheduler_options);
  const std::string node = "/bin/sh " + shell_quote(in.node_script);
  if (n == 1) {
    s += "\nexec " + node + "\n";
  } else {
    // $LSB_MCPU_HOSTS is "hostA 4 hostB 4": every other word is a host.
    s += "\nhosts=$(echo $LSB_MCPU_HOSTS | awk '{for (i = 1; i <= NF; i += 2) printf \"%s \", "
         "$i}')\n";
    s += "exec blaunch -z \"$hosts\" " + node + "\n";
  }
  return s;
}

std::string condor_submit(const ScriptInput& in) {
  const auto& l = in.launch;
  std::string s = head(Scheduler::Condor, in, "one fanout-pool per process,");
  const std::string dir = in.run_dir + "/condor";
  s += "universe = vanilla\n";
  s += fmt::format("executable = {}\n", in.node_script);
  s += "arguments = \"$(Cluster) $(Process)\"\n";
  s += fmt::format("output = {}/pools-$(Cluster).$(Process).out\n", dir);
  s += fmt::format("error = {}/pools-$(Cluster).$(Process).err\n", dir);
  s += fmt::format("log = {}/pools.log\n", dir);
  s += "getenv = True\n";               // the pools see the submitting environment, as under Slurm
  s += "should_transfer_files = NO\n";  // the run folder is on a shared file system
  s += fmt::format("batch_name = fanout-{}\n", in.job_name);
  if (l.cores_per_node > 0) s += fmt::format("request_cpus = {}\n", l.cores_per_node);
  if (!l.mem_per_node.empty()) {
    const auto [mcount, munit] = mem_parts(l.mem_per_node);
    s += fmt::format("request_memory = {}{}\n", mcount,
                     static_cast<char>(std::toupper(static_cast<unsigned char>(munit))));
  }
  const auto [gtype, gcount] = gpu_parts(l.gpus_per_node);
  if (!gcount.empty()) s += "request_gpus = " + gcount + "\n";
  if (!l.account.empty()) s += fmt::format("+ProjectName = \"{}\"\n", l.account);
  // HTCondor has no walltime: a running process past it is removed.
  if (const auto w = walltime_seconds(l.walltime); w > 0) {
    s += fmt::format("periodic_remove = (JobStatus == 2) && (time() - EnteredCurrentStatus > {})\n",
                     w);
  }
  append_lines(s, l.scheduler_options);
  s += fmt::format("queue {}\n", nodes_per_block(l));
  return s;
}

std::string condor_state(std::string_view code) {
  static constexpr std::array<std::string_view, 7> kNames = {
      "IDLE", "RUNNING", "REMOVED", "COMPLETED", "HELD", "TRANSFERRING_OUTPUT", "SUSPENDED"};
  const auto n = number(code);
  if (!all_digits(code) || n < 1 || n > kNames.size()) return std::string(code);
  return std::string(kNames[n - 1]);
}

// `s` with each control character written \xNN, so that an error message stays one line.
std::string printable(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    out += c >= 0x20 && c != 0x7f ? std::string(1, ch) : fmt::format("\\x{:02x}", c);
  }
  return out;
}

}  // namespace

std::optional<Scheduler> scheduler_of(std::string_view kind) {
  if (kind == "pbs") return Scheduler::Pbs;
  if (kind == "lsf") return Scheduler::Lsf;
  if (kind == "condor") return Scheduler::Condor;
  return std::nullopt;
}

std::string_view name_of(Scheduler s) {
  switch (s) {
    case Scheduler::Pbs:
      return "pbs";
    case Scheduler::Lsf:
      return "lsf";
    case Scheduler::Condor:
      return "condor";
  }
  return "";
}

std::uint64_t walltime_seconds(std::string_view s) {
  std::uint64_t days = 0;
  bool had_days = false;
  if (auto dash = s.find('-'); dash != std::string_view::npos) {
    if (!all_digits(s.substr(0, dash))) return 0;
    days = number(s.substr(0, dash));
    had_days = true;
    s = s.substr(dash + 1);
  }
  std::vector<std::uint64_t> parts;
  for (std::size_t pos = 0;;) {
    auto c = s.find(':', pos);
    auto p = s.substr(pos, c - pos);
    if (!all_digits(p)) return 0;
    parts.push_back(number(p));
    if (c == std::string_view::npos) break;
    pos = c + 1;
  }
  if (parts.size() > 3) return 0;
  // Slurm's reading: "M", "M:S", "H:M:S"; with days, "D-H", "D-H:M", "D-H:M:S".
  const bool hours_first = had_days || parts.size() == 3;
  if (!hours_first) parts.insert(parts.begin(), 0);
  parts.resize(3, 0);
  const std::uint64_t h = parts[0], m = parts[1], sec = parts[2];
  return ((days * 24 + h) * 60 + m) * 60 + sec;
}

std::string walltime_end_flag(std::uint64_t seconds) {
  if (seconds == 0) return {};
  return fmt::format(" --walltime-end \"$((start + {}))\"", seconds);
}

std::string node_script(Scheduler s, const ScriptInput& in) {
  std::string t = "#!/bin/sh\n" + head(s, in, "one fanout-pool on this node,");
  // The limit as the scheduler applies it: LSF's -W is in whole minutes (rounded up above).
  std::uint64_t limit = walltime_seconds(in.launch.walltime);
  if (s == Scheduler::Lsf) limit = (limit + 59) / 60 * 60;
  if (limit > 0) t += kWalltimeStart;
  if (!in.launch.worker_init.empty()) {
    t += "\n# worker_init\n";
    append_lines(t, in.launch.worker_init);
  }
  t += "\nnode=$(hostname)\n";
  switch (s) {
    case Scheduler::Pbs:
      t += "id=pbs${PBS_JOBID%%.*}\n";
      break;
    case Scheduler::Lsf:
      t += "id=lsf$LSB_JOBID\n";
      break;
    case Scheduler::Condor:
      t += "id=condor$1.$2\n";
      break;
  }
  const std::string logs = shell_quote(in.run_dir + "/logs/sys/node");
  t += fmt::format("mkdir -p {}/\"$node\"\nexec", logs);
  for (const auto& a : in.pool_argv) t += " " + shell_quote(a);
  t += walltime_end_flag(limit);
  t += fmt::format(" --node \"$node\" --name \"$node-$id\" --log-file {}/\"$node/pool-$id.log\"\n",
                   logs);
  return t;
}

std::string submit_file(Scheduler s, const ScriptInput& in) {
  switch (s) {
    case Scheduler::Pbs:
      return pbs_script(in);
    case Scheduler::Lsf:
      return lsf_script(in);
    case Scheduler::Condor:
      return condor_submit(in);
  }
  return {};
}

Command submit_command(Scheduler s, const std::string& file) {
  switch (s) {
    case Scheduler::Pbs:
      return {.argv = {"qsub", file}};
    case Scheduler::Lsf:
      return {.argv = {"bsub"}, .stdin_file = file};
    case Scheduler::Condor:
      return {.argv = {"condor_submit", file}};
  }
  return {};
}

Command status_command(Scheduler s, const std::vector<std::string>& ids) {
  Command c;
  switch (s) {
    case Scheduler::Pbs:
      c.argv = {"qstat", "-f"};
      break;
    case Scheduler::Lsf:
      c.argv = {"bjobs", "-a", "-w"};
      break;
    case Scheduler::Condor:
      c.argv = {"condor_q", "-af:j", "JobStatus"};
      break;
  }
  c.argv.insert(c.argv.end(), ids.begin(), ids.end());
  return c;
}

Command cancel_command(Scheduler s, const std::vector<std::string>& ids) {
  Command c;
  switch (s) {
    case Scheduler::Pbs:
      c.argv = {"qdel"};
      break;
    case Scheduler::Lsf:
      c.argv = {"bkill"};
      break;
    case Scheduler::Condor:
      c.argv = {"condor_rm"};
      break;
  }
  c.argv.insert(c.argv.end(), ids.begin(), ids.end());
  return c;
}

std::string parse_submit(Scheduler s, std::string_view out) {
  for (auto line : lines_of(out)) {
    line = trim(line);
    if (line.empty()) continue;
    if (s == Scheduler::Pbs) {
      // qsub prints the id alone: "1234.server" (PBS Pro, Torque).
      auto w = words_of(line);
      if (w.size() == 1 && std::isdigit(static_cast<unsigned char>(w[0].front())) != 0) {
        return std::string(w[0]);
      }
    } else if (s == Scheduler::Lsf) {
      auto open = line.find("Job <");
      auto close = line.find('>', open);
      if (open == std::string_view::npos || close == std::string_view::npos) continue;
      auto id = line.substr(open + 5, close - open - 5);
      if (all_digits(id)) return std::string(id);
    } else {
      constexpr std::string_view kCluster = "submitted to cluster ";
      auto at = line.find(kCluster);
      if (at == std::string_view::npos) continue;
      auto id = line.substr(at + kCluster.size());
      while (!id.empty() && id.back() == '.') id.remove_suffix(1);
      if (all_digits(id)) return std::string(id);
    }
  }
  return {};
}

std::string key_of(Scheduler s, std::string_view id) {
  id = trim(id);
  if (s == Scheduler::Pbs) id = id.substr(0, id.find('.'));
  return std::string(id);
}

// Each scheduler's output is read by its own branch; the error output's unknown or finished jobs
// are read last, so a job listed in neither stays unknown to the caller.
std::map<std::string, std::string> parse_status(Scheduler s, std::string_view out,
                                                std::string_view err) {
  std::map<std::string, std::string> states;
  std::string current;  // PBS: the job whose attributes follow
  for (auto line : lines_of(out)) {
    auto w = words_of(line);
    if (w.empty()) continue;
    if (s == Scheduler::Pbs) {
      if (w.size() >= 3 && w[0] == "Job" && w[1] == "Id:") {
        current = key_of(s, w[2]);
      } else if (w.size() >= 3 && w[0] == "job_state" && w[1] == "=" && !current.empty()) {
        states[current] = std::string(w[2]);
      }
    } else if (s == Scheduler::Lsf) {
      // JOBID USER STAT QUEUE FROM_HOST EXEC_HOST JOB_NAME SUBMIT_TIME; the header is skipped.
      if (w.size() >= 3 && all_digits(w[0])) states[std::string(w[0])] = std::string(w[2]);
    } else {
      // "42.0 2": cluster.process JobStatus.
      if (w.size() < 2) continue;
      auto dot = w[0].find('.');
      auto cluster = w[0].substr(0, dot);
      if (!all_digits(cluster) || !all_digits(w[1])) continue;
      const std::string state = condor_state(w[1]);
      auto [it, fresh] = states.emplace(std::string(cluster), state);
      if (!fresh && !is_active(s, it->second)) it->second = state;
    }
  }
  for (auto line : lines_of(err)) {
    auto w = words_of(line);
    std::string id;
    if (s == Scheduler::Pbs) {
      // "qstat: Unknown Job Id 12.srv" (Torque, PBS Pro), "qstat: 12.srv Job has finished, use
      // -x or -H to obtain historical job information" (PBS Pro).
      if (line.find("Unknown Job Id") != std::string_view::npos && !w.empty()) {
        id = std::string(w.back());
      } else if (line.find("Job has finished") != std::string_view::npos && w.size() >= 2) {
        id = std::string(w[1]);
      }
      if (!id.empty()) id = key_of(s, id);
    } else if (s == Scheduler::Lsf) {
      // "Job <12> is not found".
      auto open = line.find("Job <");
      auto close = line.find('>', open);
      if (line.find("not found") != std::string_view::npos && open != std::string_view::npos &&
          close != std::string_view::npos) {
        id = std::string(line.substr(open + 5, close - open - 5));
      }
    }
    if (!id.empty() && !states.contains(id)) states[id] = std::string();
  }
  return states;
}

bool is_active(Scheduler s, std::string_view state) {
  if (state.empty()) return false;
  switch (s) {
    case Scheduler::Pbs: {
      // E (exiting), F (finished, PBS Pro), C (completed, Torque), X (subjob expired) have ended
      // or are ending; Q, R, H, W, T, S, B, U, M still hold or wait for a node.
      static constexpr std::array<std::string_view, 4> kEnded = {"E", "F", "C", "X"};
      return std::find(kEnded.begin(), kEnded.end(), state) == kEnded.end();
    }
    case Scheduler::Lsf: {
      static constexpr std::array<std::string_view, 3> kEnded = {"DONE", "EXIT", "ZOMBI"};
      return std::find(kEnded.begin(), kEnded.end(), state) == kEnded.end();
    }
    case Scheduler::Condor:
      return state != "REMOVED" && state != "COMPLETED";
  }
  return false;
}

Expected<void> check_script_values(std::string_view job_name, std::string_view run_dir,
                                   const config::LauncherSettings& launch) {
  const std::array<std::pair<std::string_view, std::string_view>, 10> values = {{
      {"the job's name", job_name},
      {"the run folder", run_dir},
      {"fanout.partition", launch.partition},
      {"fanout.account", launch.account},
      {"fanout.qos", launch.qos},
      {"fanout.walltime", launch.walltime},
      {"fanout.queue", launch.queue},
      {"fanout.gpus_per_node", launch.gpus_per_node},
      {"fanout.mem_per_node", launch.mem_per_node},
      {"fanout.pbs_flavor", launch.pbs_flavor},
  }};
  for (const auto& [what, value] : values) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      const auto c = static_cast<unsigned char>(value[i]);
      if (c >= 0x20 && c != 0x7f) continue;
      return make_error(
          ErrorCode::InvalidArgument,
          fmt::format("{} '{}' holds a control character (0x{:02x}) at position {}; a batch "
                      "script writes it on one line, where a newline would start a line of its "
                      "own: use printable characters only",
                      what, printable(value), c, i + 1));
    }
  }
  return {};
}

}  // namespace fanout::client::hpc
