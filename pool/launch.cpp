// Worker launches per runtime. See launch.hpp.
#include "pool/launch.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "fanout/util/fs.hpp"

namespace fanout::pool {

namespace {

std::string dir_of(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

}  // namespace

std::string merged_pythonpath(const std::string& job, const std::string& shim_dir,
                              const char* inherited) {
  std::string out = job;
  if (!shim_dir.empty()) out += (out.empty() ? "" : ":") + shim_dir;
  if (inherited != nullptr && *inherited != '\0')
    out += (out.empty() ? "" : ":") + std::string(inherited);
  return out;
}

bool run_markers(const proto::JobSpec& spec) {
  return spec.task_overhead_timeout_s > 0 && spec.runtime != "command" && spec.runtime != "native";
}

WorkerLaunch make_launch(const proto::JobSpec& spec, const LaunchContext& ctx) {
  WorkerLaunch l;
  if (spec.runtime == "command" || spec.runtime == "native") {
    // The native library was resolved against the code folder by the job parser; a built-in
    // ("builtin:noop") is passed as it is.
    l.argv = {ctx.worker_bin, spec.runtime, spec.entry_script};
  } else {
    const std::string python = ctx.python.empty() ? spec.python : ctx.python;
    l.argv = {python.empty() ? std::string(kDefaultPython) : python, "-u",
              ctx.shim_dir + "/fanout_worker.py"};
  }
  l.argv.insert(l.argv.end(), spec.args.begin(), spec.args.end());
  l.cwd = spec.code_dir;
  const std::string output_dir =
      spec.output_path.empty() ? dir_of(spec.log_dir) + "/outputs" : dir_of(spec.output_path);
  l.env = {{"FANOUT_ENTRY_SCRIPT", resolve_path(spec.code_dir, spec.entry_script)},
           {"FANOUT_NODE", ctx.node},
           {"FANOUT_PROCESS", ctx.process},
           {"FANOUT_LOG_DIR", spec.log_dir},
           {"FANOUT_OUTPUT_DIR", output_dir},
           {"FANOUT_INPUT_NAME", spec.input_name},
           {"FANOUT_APPEND_ROW", spec.output_path.empty() ? "0" : "1"},
           {"FANOUT_JOB_ID", std::to_string(ctx.job_id)}};
  if (spec.runtime == "command" || spec.runtime == "native") {
    l.env[0] = {"FANOUT_ENTRY_SCRIPT", spec.entry_script};
  }
  // Only these jobs pay for the two marker frames per task; the others' pipe is unchanged.
  if (run_markers(spec)) l.env.emplace_back("FANOUT_RUN_MARKERS", "1");
  // The job's variables reach the worker exactly as given, each once: one the pool also sets
  // takes the job's value, except PYTHONPATH, which is merged: the job's entries, then the
  // shim's folder, then the pool's own PYTHONPATH (so a job can bring its own packages and still
  // import the shim, and a site's PYTHONPATH keeps working).
  std::string job_pythonpath;
  for (const auto& kv : spec.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string name = kv.substr(0, eq);
    std::string value = kv.substr(eq + 1);
    if (name == "PYTHONPATH") {
      job_pythonpath = std::move(value);
      continue;
    }
    auto same =
        std::find_if(l.env.begin(), l.env.end(), [&](const auto& e) { return e.first == name; });
    if (same != l.env.end()) {
      same->second = std::move(value);
    } else {
      l.env.emplace_back(std::move(name), std::move(value));
    }
  }
  l.env.emplace_back("PYTHONPATH",
                     merged_pythonpath(job_pythonpath, ctx.shim_dir, std::getenv("PYTHONPATH")));
  if (!spec.log_dir.empty()) {
    const std::string out_dir = spec.log_dir + "/user/stdout/" + ctx.node;
    const std::string err_dir = spec.log_dir + "/user/stderr/" + ctx.node;
    (void)make_dirs(out_dir);
    (void)make_dirs(err_dir);
    l.stdout_file = out_dir + "/" + ctx.process + ".stdout.txt";
    l.stderr_file = err_dir + "/" + ctx.process + ".stderr.txt";
  }
  return l;
}

}  // namespace fanout::pool
