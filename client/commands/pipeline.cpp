// Running pipeline files. See pipeline.hpp.
#include "client/commands/pipeline.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>

#include "fanout/config/pipeline.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/protocol/run_folder.hpp"
#include "fanout/util/child_process.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

// Output folders exist before a job runs: a folder output is created, a file output's folder.
Expected<void> make_outputs(const config::PipelineStep& s) {
  for (const auto& [name, b] : s.outputs) {
    const std::string dir =
        b.type == "uri_file" ? fs::path(b.value).parent_path().string() : b.value;
    if (auto r = make_dirs(dir); !r) return r;
  }
  return {};
}

// `python` is the interpreter of --python: a command starting with `python` runs with it.
int run_command(const config::PipelineStep& s, bool quiet, const std::string& python) {
  const std::string command = config::with_interpreter(s.command, python);
  std::vector<std::pair<std::string, std::string>> env(s.environment_variables.begin(),
                                                       s.environment_variables.end());
  if (!quiet)
    std::fprintf(stderr, "fanout: job '%s' (command): %s\n", s.name.c_str(), command.c_str());
  auto child = ChildProcess::spawn(SpawnOptions{
      .argv = {"/bin/sh", "-c", command},
      .env_set = env,
      .cwd = s.cwd,
      .stdin_file = "null",
  });
  if (!child) {
    std::fprintf(stderr, "error: jobs.%s: cannot start /bin/sh: %s\n", s.name.c_str(),
                 child.error().message.c_str());
    return proto::kExitInfra;
  }
  auto st = child->wait();
  if (!st.success()) {
    std::fprintf(stderr, "fanout: job '%s' failed: its command %s\n", s.name.c_str(),
                 st.describe().c_str());
    return proto::kExitFailed;
  }
  return 0;
}

}  // namespace

// Long: the steps run in order in one loop that carries what each step leaves to the next.
int run_pipeline(const std::string& path, const RunOverrides& ov, Logger log) {
  // Absolute first: a bare `--db NAME` has no folder, and its runs/ belongs beside it.
  const std::string db =
      resolve_path(fs::current_path().string(), !ov.db.empty() ? ov.db : default_db_path());
  const std::string root =
      !ov.run_dir.empty() ? ov.run_dir : fs::path(db).parent_path().string() + "/runs";
  const std::string run_dir =
      resolve_path(fs::current_path().string(), root) + "/" +
      proto::run_folder_name(fs::path(path).stem().string(), std::time(nullptr), ::getpid());
  auto p = config::load_pipeline(path, run_dir);
  if (!p) {
    std::fprintf(stderr, "error: %s\n", p.error().message.c_str());
    return proto::kExitUsage;
  }
  // Everything that can be checked now is checked before the first job runs: parallel jobs whose
  // input no earlier job makes.
  std::vector<config::JobConfig> jobs(p->steps.size());
  for (std::size_t i = 0; i < p->steps.size(); ++i) {
    const auto& s = p->steps[i];
    if (s.type != "parallel" || !s.after.empty()) continue;
    if (auto r = config::check_step_files(s); !r) {
      std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
      return proto::kExitUsage;
    }
    jobs[i] = s.job;
    if (auto r = prepare(jobs[i], ov); !r) {
      std::fprintf(stderr, "error: %s (in jobs.%s)\n", r.error().message.c_str(), s.name.c_str());
      return proto::kExitUsage;
    }
  }
  if (!ov.quiet) {
    for (const auto& n : p->notices) std::fprintf(stderr, "note: %s\n", n.c_str());
    std::string order;
    for (const auto& s : p->steps) order += (order.empty() ? "" : " -> ") + s.name;
    std::fprintf(stderr, "fanout: pipeline '%s': %s; outputs under %s\n", p->name.c_str(),
                 order.c_str(), run_dir.c_str());
  }
  if (auto r = make_dirs(run_dir); !r) {
    std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
    return proto::kExitInfra;
  }
  // Command steps starting with `python` use the parallel jobs' interpreter: --python, else the
  // first parallel job's fanout.python when it names one.
  std::string python = ov.python;
  for (const auto& s : p->steps) {
    if (python.empty() && s.type == "parallel" && s.job.fanout.python != "python3") {
      python = s.job.fanout.python;
    }
  }
  RunOverrides step_ov = ov;
  if (step_ov.run_dir.empty()) step_ov.run_dir = run_dir;
  for (std::size_t i = 0; i < p->steps.size(); ++i) {
    const auto& s = p->steps[i];
    if (auto r = make_outputs(s); !r) {
      std::fprintf(stderr, "error: jobs.%s: %s\n", s.name.c_str(), r.error().message.c_str());
      return proto::kExitInfra;
    }
    int rc = 0;
    if (s.type == "command") {
      rc = run_command(s, ov.quiet, python);
    } else {
      if (!s.after.empty()) {
        // Its input exists only now that the jobs before it ran.
        if (auto r = config::check_step_files(s); !r) {
          std::fprintf(stderr, "error: %s\n", r.error().message.c_str());
          return proto::kExitFailed;
        }
        jobs[i] = s.job;
        if (auto r = prepare(jobs[i], ov); !r) {
          std::fprintf(stderr, "error: %s (in jobs.%s)\n", r.error().message.c_str(),
                       s.name.c_str());
          return proto::kExitFailed;
        }
      }
      jobs[i].fanout.run_dir = run_dir;  // every job's logs under the pipeline's folder
      if (!ov.quiet) std::fprintf(stderr, "fanout: job '%s' (parallel)\n", s.name.c_str());
      rc = run_job(jobs[i], step_ov, log);
    }
    if (rc != 0) {
      std::fprintf(stderr, "fanout: pipeline '%s' stopped at job '%s'\n", p->name.c_str(),
                   s.name.c_str());
      return rc;
    }
  }
  if (!ov.quiet) {
    std::fprintf(stderr, "fanout: pipeline '%s' succeeded\n", p->name.c_str());
    for (const auto& [name, b] : p->outputs) {
      std::fprintf(stderr, "  outputs.%s: %s\n", name.c_str(), b.value.c_str());
    }
  }
  return 0;
}

}  // namespace fanout::client
