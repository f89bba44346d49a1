// The logs folder of a job, from the store. See job_report.hpp and docs/store.md, section 8.
#include "fanout/report/job_report.hpp"

#include <fmt/format.h>

#include <memory>

#include "fanout/report/csv.hpp"
#include "fanout/report/job_error.hpp"
#include "fanout/report/job_result.hpp"
#include "fanout/report/progress_overview.hpp"
#include "fanout/store/error_summary.hpp"
#include "fanout/store/report_source.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/error.hpp"

namespace fanout::report {

namespace {

using store::ReportTable;

// One CSV file: where it goes and its header, one field per column of its table.
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
     "Average Run Method Seconds,Overhead Seconds,First Start Time,Last End Time"},
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

Expected<std::vector<std::string>> write_job_report(const std::string& db_path,
                                                    std::uint64_t job_id,
                                                    const std::string& out_dir) {
  // Every file is written to its temporary name within one read transaction (so all of them
  // show the same committed state), then renamed into place.
  std::vector<std::unique_ptr<AtomicFile>> files;
  std::vector<std::string> written;  // relative paths, parallel to files
  auto add_file = [&](std::string rel) -> AtomicFile& {
    files.push_back(std::make_unique<AtomicFile>(out_dir + "/" + rel));
    written.push_back(std::move(rel));
    return *files.back();
  };
  try {
    store::ReportSource src(db_path);
    const auto job = src.job_result(job_id);
    if (!job) {
      src.finish();
      return make_error(ErrorCode::NotFound,
                        fmt::format("{}: no job {} in this store", db_path, job_id));
    }
    add_file("job_result.txt")
        .write(format_job_result(job_id, *job, src.first_failed_attempts(job_id, kFirstErrors)));
    const ProgressOverview ov =
        overview_from_store(job_id, src.progress(job_id).value_or(store::JobProgressRow{}));
    add_file(progress_overview_name(ov.started)).write(format_progress_overview(ov));

    for (const auto& f : kJobReports) {
      write_csv(src.rows(f.table, job_id), f.header, add_file(f.path));
    }

    const std::vector<std::string> nodes = src.sample_nodes(job_id);
    for (const auto& f : kPerfReports) {
      for (const auto& node : nodes) {
        std::string rel = f.path;
        rel.replace(rel.find("{node}"), 6, node_folder(node));
        write_csv(src.rows(f.table, job_id, node), f.header, add_file(std::move(rel)));
      }
    }
    src.finish();
    // ParallelRunStep's error summary. Read after the report's transaction: the job has ended
    // when the interchange writes it, so both reads see the same attempts.
    auto errors = store::read_error_summary(db_path, job_id);
    if (!errors) return Unexpected{errors.error()};
    add_file("job_error.txt").write(format_job_error(job_id, *errors));
    for (auto& [rel, text] : process_error_files(*errors)) add_file(std::move(rel)).write(text);
    for (auto& f : files) f->commit();
    return written;
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

}  // namespace fanout::report
