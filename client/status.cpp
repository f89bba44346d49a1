// fanout status and fanout report. See status.hpp.
#include "client/status.hpp"

#include <cstdio>
#include <filesystem>

#include "client/slurm_launcher.hpp"
#include "fanout/report/job_report.hpp"
#include "fanout/report/status_text.hpp"
#include "fanout/store/job_status.hpp"
#include "fanout/util/error.hpp"

namespace fanout::client {

int print_status(const std::string& db, std::uint64_t job_id, bool json) {
  auto s = store::read_job_status(db, job_id);
  if (!s) {
    std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
    return 2;
  }
  if (json) {
    std::string out = report::format_status_json(*s);
    // A Slurm launcher's pool jobs as one more key (docs/cluster.md).
    if (auto pos = out.rfind('}'); !s->log_dir.empty() && pos != std::string::npos) {
      auto jobs = slurm_status_json(std::filesystem::path(s->log_dir).parent_path().string());
      if (!jobs.empty()) out.insert(pos, ",\"slurm_jobs\":" + jobs);
    }
    std::fputs(out.c_str(), stdout);
  } else {
    std::fputs(report::format_status_text(*s).c_str(), stdout);
    // A Slurm launcher's pool jobs, as squeue sees them now (docs/cluster.md).
    if (!s->log_dir.empty()) {
      auto line = slurm_status_line(std::filesystem::path(s->log_dir).parent_path().string());
      if (!line.empty()) std::printf("pools:    %s\n", line.c_str());
    }
  }
  return 0;
}

int write_report(const std::string& db, std::uint64_t job_id, const std::string& out_dir) {
  std::string dir = out_dir;
  if (dir.empty()) {
    auto s = store::read_job_status(db, job_id);
    if (!s) {
      std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
      return 2;
    }
    if (s->log_dir.empty()) {
      std::fprintf(stderr, "error: %s: job %llu has no logs folder recorded; give --out DIR\n",
                   db.c_str(), static_cast<unsigned long long>(job_id));
      return 2;
    }
    dir = s->log_dir;
  }
  auto files = report::write_job_report(db, job_id, dir);
  if (!files) {
    std::fprintf(stderr, "error: %s\n", files.error().message.c_str());
    return files.error().code == ErrorCode::Io ? 1 : 2;
  }
  std::printf("report of job %llu written to %s:\n", static_cast<unsigned long long>(job_id),
              dir.c_str());
  for (const auto& f : *files) std::printf("  %s\n", f.c_str());
  return 0;
}

}  // namespace fanout::client
