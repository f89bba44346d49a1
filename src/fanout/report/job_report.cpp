// The logs folder of a job, from the store. See job_report.hpp and docs/store.md, section 8.
#include "fanout/report/job_report.hpp"

#include <fmt/format.h>

#include <memory>

#include "fanout/report/csv.hpp"
#include "fanout/report/html_report.hpp"
#include "fanout/report/job_error.hpp"
#include "fanout/report/job_result.hpp"
#include "fanout/report/progress_overview.hpp"
#include "fanout/report/report_pass.hpp"
#include "fanout/store/error_summary.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/error.hpp"

namespace fanout::report {

namespace {

using store::ReportTable;

// One CSV file: where it goes and its header, one field per column of its table (the job
// reports' tables are not read as tables: ReportPass builds them).
struct CsvFile {
  ReportTable table;
  const char* path;  // relative to the logs folder; "{node}" is replaced by the node's folder
  const char* header;
};

constexpr CsvFile kJobReports[] = {
    {ReportTable::ProcessedMiniBatches, "sys/job_report/processed_mini-batches.csv",
     "Mini-batch Id,Picked Count,Process,Process Start Time,Total,Succeeded,Failed,"
     "Elapsed Seconds,Process Seconds,Run Method Seconds,Status,Error Category,Error Message,"
     "Mini-batch Detail"},
    {ReportTable::ProcessSummary, "sys/job_report/process_summary.csv",
     "Node,Process,Worker Starts,Attempts,Succeeded Attempts,Failed Attempts,Items,"
     "Items Succeeded,Items Failed,Elapsed Seconds,Process Seconds,Run Method Seconds,"
     "Average Run Method Seconds,Overhead Seconds,First Start Time,Last End Time,Device,CPUs,"
     "Threads"},
    {ReportTable::NodeSummary, "sys/job_report/node_summary.csv",
     "Node,Pools,Processes,Attempts,Succeeded Attempts,Failed Attempts,Items,Items Succeeded,"
     "Items Failed,Elapsed Seconds,Process Seconds,Run Method Seconds,First Start Time,"
     "Last End Time,Attempts Per Second"},
};

constexpr CsvFile kPerfReports[] = {
    {ReportTable::NodeResourceUsage, "sys/perf/{node}/node_resource_usage.csv",
     "Time,Pool,Interval Seconds,CPU Percent,Total Memory MB,Available Memory MB,"
     "Used Memory MB,Disk Read Count,Disk Write Count,Disk Read MB,Disk Write MB,"
     "Network Sent MB,Network Received MB,TCP Connections,UDP Connections"},
    {ReportTable::ProcessResourceUsage, "sys/perf/{node}/processes_resource_usage.csv",
     "Time,Pool,Process,PID,CPU Percent,RSS MB,Read Count,Write Count,Read MB,Write MB"},
    {ReportTable::NodeDiskUsage, "sys/perf/{node}/node_disk_usage.csv",
     "Time,Pool,Mount,Total MB,Used MB,Free MB,Used Percent"},
};

}  // namespace

std::string node_folder(std::string_view node) {
  std::string s(node);
  for (char& c : s) {
    if (c == '/' || c == '\\' || c == '\0') c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

JobReportBuilder::JobReportBuilder(std::uint64_t job_id, std::string out_dir)
    : job_id_(job_id),
      out_dir_(std::move(out_dir)),
      processed_(std::make_unique<AtomicFile>(out_dir_ + "/" + kJobReports[0].path)),
      csv_(std::make_unique<ReportPass>(*processed_, kJobReports[0].header, kFirstErrors)) {}

JobReportBuilder::~JobReportBuilder() = default;

void JobReportBuilder::add(const store::AttemptRow& a) {
  csv_->add(a);
  figures_.add(a);
}

std::vector<std::string> JobReportBuilder::finish(store::ReportSource& src, bool html) {
  // The files in their fixed order; each under its temporary name until all are written.
  std::vector<std::unique_ptr<AtomicFile>> files;
  std::vector<std::string> written;  // relative paths, parallel to files
  auto add_file = [&](std::string rel) -> AtomicFile& {
    files.push_back(std::make_unique<AtomicFile>(out_dir_ + "/" + rel));
    written.push_back(std::move(rel));
    return *files.back();
  };
  csv_->finish_processed();
  const ReportData d = figures_.finish(src, job_id_, {});

  store::JobResultRow job;
  job.name = d.name;
  job.state = d.state;
  job.reason = d.reason;
  job.spec_path = d.spec_path;
  job.output_path = d.output_path;
  job.started = d.job_started;
  job.ended = d.ended;
  job.total = static_cast<std::int64_t>(d.total);
  job.succeeded = static_cast<std::int64_t>(d.succeeded);
  job.failed = static_cast<std::int64_t>(d.failed);
  job.items_succeeded = static_cast<std::int64_t>(d.items_succeeded);
  job.items_failed = static_cast<std::int64_t>(d.items_failed);
  job.attempts = static_cast<std::int64_t>(d.attempts);
  job.attempts_failed = static_cast<std::int64_t>(d.attempts_failed);
  add_file("job_result.txt").write(format_job_result(job_id_, job, csv_->first_failed()));

  store::JobProgressRow prog;
  prog.name = d.name;
  prog.state = d.state;
  prog.submit_done = d.total_known;
  prog.total = d.total;
  prog.succeeded = d.succeeded;
  prog.failed = d.failed;
  prog.items_succeeded = d.items_succeeded;
  prog.items_failed = d.items_failed;
  prog.attempts_failed = d.attempts_failed;
  prog.started = d.job_started;
  prog.ended = d.ended;
  const ProgressOverview ov = overview_from_store(job_id_, prog);
  add_file(progress_overview_name(ov.started)).write(format_progress_overview(ov));

  files.push_back(std::move(processed_));
  written.emplace_back(kJobReports[0].path);
  add_file(kJobReports[1].path).write(csv_->process_summary(kJobReports[1].header));
  add_file(kJobReports[2].path).write(csv_->node_summary(kJobReports[2].header));

  const std::vector<std::string> nodes = src.sample_nodes(job_id_);
  for (const auto& f : kPerfReports) {
    for (const auto& node : nodes) {
      std::string rel = f.path;
      rel.replace(rel.find("{node}"), 6, node_folder(node));
      write_csv(src.rows(f.table, job_id_, node), f.header, add_file(std::move(rel)));
    }
  }
  if (html) add_file("report.html").write(render_job_html(d));
  // ParallelRunStep's error summary; a job without failed attempts needs no query for it (the
  // job's end stays as fast as its middle).
  const store::ErrorSummary errors =
      d.attempts_failed > 0 ? store::read_error_summary(src, job_id_) : store::ErrorSummary{};
  add_file("job_error.txt").write(format_job_error(job_id_, errors));
  for (auto& [rel, text] : process_error_files(errors)) add_file(std::move(rel)).write(text);
  for (auto& f : files) f->commit();
  return written;
}

Expected<std::vector<std::string>> write_job_report(const std::string& db_path,
                                                    std::uint64_t job_id,
                                                    const std::string& out_dir,
                                                    const JobReportOptions& options) {
  // Every file is written within one read transaction (so all of them show the same committed
  // state), from one scan of the job's attempts.
  try {
    store::ReportSource src(db_path);
    if (!src.has_job(job_id)) {
      src.finish();
      return make_error(ErrorCode::NotFound,
                        fmt::format("{}: no job {} in this store", db_path, job_id));
    }
    JobReportBuilder b(job_id, out_dir);
    src.each_attempt(job_id, [&](const store::AttemptRow& a) { b.add(a); });
    auto written = b.finish(src, options.html);
    src.finish();
    return written;
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

}  // namespace fanout::report
