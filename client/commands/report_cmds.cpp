// The report page, compare and tune commands. See report_cmds.hpp.
#include "client/commands/report_cmds.hpp"

#include <cstdio>

#include "fanout/protocol/exit_codes.hpp"
#include "fanout/report/compare.hpp"
#include "fanout/report/html_report.hpp"
#include "fanout/report/report_data.hpp"
#include "fanout/util/atomic_file.hpp"

namespace fanout::client {

namespace {

// Exit code of a failed read: a missing store or job is the user's input (2).
int read_failed(const Error& e) {
  std::fprintf(stderr, "error: %s\n", e.message.c_str());
  return e.code == ErrorCode::Io ? proto::kExitFailed : proto::kExitUsage;
}

}  // namespace

int write_html_report(const std::string& db, std::uint64_t job_id, const std::string& out_file) {
  auto d = report::read_report_data(db, job_id);
  if (!d) return read_failed(d.error());
  std::string path = out_file;
  if (path.empty()) {
    if (d->log_dir.empty()) {
      std::fprintf(stderr, "error: %s: job %llu has no logs folder recorded; give --out FILE\n",
                   db.c_str(), static_cast<unsigned long long>(job_id));
      return proto::kExitUsage;
    }
    path = d->log_dir + "/report.html";
  }
  if (auto w = write_file_atomic(path, report::render_job_html(*d)); !w) {
    return read_failed(w.error());
  }
  std::printf("report of job %llu (%s) written to %s\n", static_cast<unsigned long long>(job_id),
              d->state.c_str(), path.c_str());
  return 0;
}

int compare_jobs(const std::string& db, const std::vector<std::uint64_t>& jobs,
                 const std::string& html_file) {
  std::vector<report::ReportData> data;
  for (auto id : jobs) {
    auto d = report::read_report_data(db, id);
    if (!d) return read_failed(d.error());
    data.push_back(std::move(*d));
  }
  std::fputs(report::compare_text(data).c_str(), stdout);
  if (!html_file.empty()) {
    if (auto w = write_file_atomic(html_file, report::compare_html(data)); !w) {
      return read_failed(w.error());
    }
    std::printf("\ncomparison written to %s\n", html_file.c_str());
  }
  return 0;
}

int tune_job(const std::string& db, std::uint64_t job_id, const report::TuneOptions& opt,
             const std::string& write_file) {
  auto d = report::read_report_data(db, job_id);
  if (!d) return read_failed(d.error());
  const auto recs = report::tune(*d, opt);
  std::fputs(report::format_tune(*d, recs).c_str(), stdout);
  if (!write_file.empty()) {
    if (auto w = write_file_atomic(write_file, report::tune_yaml(*d, recs)); !w) {
      return read_failed(w.error());
    }
    std::printf("\nsuggested settings written to %s\n", write_file.c_str());
  }
  return 0;
}

}  // namespace fanout::client
