// The logs folder of a job, from the store. See report.hpp and docs/store.md ("Reports").
#include "fanout/store/report.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string_view>

#include "fanout/store/db.hpp"
#include "fanout/store/task_store.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

namespace {

namespace fs = std::filesystem;

// One CSV file: its header and the query producing its rows, one column per header field.
// ?1 is the job id, ?2 the node (perf files only).
struct CsvSpec {
  const char* path;  // relative to the logs folder; "{node}" is replaced by the node's folder
  const char* header;
  const char* query;
};

constexpr CsvSpec kJobReports[] = {
    {"sys/job_report/processed_mini-batches.csv",
     "Mini-batch Id,Picked Count,Process,Process Start Time,Total,Succeeded,Failed,"
     "Elapsed Seconds,Process Seconds,Run Method Seconds,Status,Error Category,Error Message,"
     "Mini-batch Detail",
     "SELECT minibatch_id, picked_count, process, process_start_time, total, succeeded, failed, "
     "elapsed_seconds, process_seconds, run_method_seconds, status, error_category, "
     "error_message, minibatch_detail FROM processed_minibatches WHERE job_id = ?1 "
     "ORDER BY start, attempt_id"},
    {"sys/job_report/process_summary.csv",
     "Node,Process,Worker Starts,Attempts,Succeeded Attempts,Failed Attempts,Items,"
     "Items Succeeded,Items Failed,Elapsed Seconds,Process Seconds,Run Method Seconds,"
     "Average Run Method Seconds,Overhead Seconds,First Start Time,Last End Time",
     "SELECT node, process, worker_starts, attempts, succeeded_attempts, failed_attempts, items, "
     "items_succeeded, items_failed, elapsed_seconds, process_seconds, run_method_seconds, "
     "avg_run_method_seconds, overhead_seconds, first_start_time, last_end_time "
     "FROM process_summary WHERE job_id = ?1 ORDER BY node, process"},
    {"sys/job_report/node_summary.csv",
     "Node,Pools,Processes,Attempts,Succeeded Attempts,Failed Attempts,Items,Items Succeeded,"
     "Items Failed,Elapsed Seconds,Process Seconds,Run Method Seconds,First Start Time,"
     "Last End Time,Attempts Per Second",
     "SELECT node, pools, processes, attempts, succeeded_attempts, failed_attempts, items, "
     "items_succeeded, items_failed, elapsed_seconds, process_seconds, run_method_seconds, "
     "first_start_time, last_end_time, attempts_per_second "
     "FROM node_summary WHERE job_id = ?1 ORDER BY node"},
};

constexpr CsvSpec kPerfReports[] = {
    {"sys/perf/{node}/node_resource_usage.csv",
     "Time,Pool,Interval Seconds,CPU Percent,Total Memory MB,Available Memory MB,"
     "Used Memory MB,Disk Read Count,Disk Write Count,Disk Read MB,Disk Write MB,"
     "Network Sent MB,Network Received MB,TCP Connections,UDP Connections",
     "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', time, 'unixepoch'), pool, round(interval_s, 3), "
     "round(cpu_percent, 1), round(mem_total_mb, 1), round(mem_available_mb, 1), "
     "round(mem_used_mb, 1), disk_reads, disk_writes, round(disk_read_mb, 3), "
     "round(disk_write_mb, 3), round(net_sent_mb, 3), round(net_recv_mb, 3), tcp_connections, "
     "udp_connections FROM node_resource_samples WHERE job_id = ?1 AND node = ?2 "
     "ORDER BY time, id"},
    {"sys/perf/{node}/processes_resource_usage.csv",
     "Time,Pool,Process,PID,CPU Percent,RSS MB,Read Count,Write Count,Read MB,Write MB",
     "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', time, 'unixepoch'), pool, process, pid, "
     "round(cpu_percent, 1), round(rss_mb, 1), reads, writes, round(read_mb, 3), "
     "round(write_mb, 3) FROM process_resource_samples WHERE job_id = ?1 AND node = ?2 "
     "ORDER BY time, id"},
    {"sys/perf/{node}/node_disk_usage.csv", "Time,Pool,Mount,Total MB,Used MB,Free MB,Used Percent",
     "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', time, 'unixepoch'), pool, mount, round(total_mb, 1), "
     "round(used_mb, 1), round(free_mb, 1), round(used_percent, 1) FROM disk_usage_samples "
     "WHERE job_id = ?1 AND node = ?2 ORDER BY time, id"},
};

// The number of fields of a CSV header.
int field_count(std::string_view header) {
  int n = 1;
  for (char c : header) n += c == ',' ? 1 : 0;
  return n;
}

// A node name as a folder name: path separators and a leading dot are replaced.
std::string node_folder(std::string_view node) {
  std::string s(node);
  for (char& c : s) {
    if (c == '/' || c == '\\' || c == '\0') c = '_';
  }
  if (s.empty() || s == "." || s == "..") s = "_" + s;
  return s;
}

// A report file being written: into "<path>.tmp<pid>", renamed over `path` by commit(), removed
// if never committed. Lets a report stream a million rows to disk instead of holding them.
class PendingFile final {
 public:
  PendingFile(std::string rel, const std::string& out_dir)
      : rel_(std::move(rel)),
        path_(out_dir + "/" + rel_),
        tmp_(path_ + ".tmp" + std::to_string(::getpid())) {
    std::error_code ec;
    const fs::path parent = fs::path(path_).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    if (ec) {
      throw Failure(ErrorCode::Io, parent.string() + ": cannot create folder: " + ec.message());
    }
    out_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!out_) throw Failure(ErrorCode::Io, path_ + ": cannot be written");
  }
  ~PendingFile() {
    if (!committed_) {
      out_.close();
      std::error_code ec;
      fs::remove(tmp_, ec);
    }
  }
  PendingFile(const PendingFile&) = delete;
  PendingFile& operator=(const PendingFile&) = delete;

  // Appends `text`. Throws Failure{Io} naming the file when the write fails.
  void write(std::string_view text) {
    out_.write(text.data(), static_cast<std::streamsize>(text.size()));
    if (!out_) throw Failure(ErrorCode::Io, path_ + ": cannot be written");
  }
  // Closes the file and renames it into place. Throws Failure{Io} naming the file.
  void commit() {
    out_.close();
    if (!out_) throw Failure(ErrorCode::Io, path_ + ": cannot be written");
    std::error_code ec;
    fs::rename(tmp_, path_, ec);
    if (ec) throw Failure(ErrorCode::Io, path_ + ": cannot be written: " + ec.message());
    committed_ = true;
  }
  [[nodiscard]] const std::string& rel() const noexcept { return rel_; }

 private:
  std::string rel_, path_, tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

// Writes the CSV of `spec` from the rows of `st`, in chunks.
void render_csv(Statement& st, const CsvSpec& spec, PendingFile& file) {
  constexpr std::size_t kChunk = 1 << 20;
  std::string out = spec.header;
  out += '\n';
  const int n = field_count(spec.header);
  while (st.step()) {
    for (int c = 0; c < n; ++c) {
      if (c > 0) out += ',';
      if (!st.is_null(c)) append_csv_field(out, st.column_text(c));
    }
    out += '\n';
    if (out.size() >= kChunk) {
      file.write(out);
      out.clear();
    }
  }
  st.reset();
  file.write(out);
}

std::string utc_text(double unix_seconds) {
  return unix_seconds > 0 ? iso_utc(unix_seconds) : std::string("-");
}

// job_result.txt: the job's end as key: value lines, then its first failed attempts.
std::string job_result_text(Db& db, std::uint64_t job_id) {
  Statement job(db,
                "SELECT j.name, j.state, j.reason, coalesce(j.started, 0), coalesce(j.ended, 0), "
                "c.total, c.succeeded, c.failed, c.items_succeeded, c.items_failed, "
                "c.attempts, c.attempts_failed, coalesce(j.output_path, ''), "
                "coalesce(j.spec_path, '') "
                "FROM jobs j JOIN job_counts c ON c.job_id = j.id WHERE j.id = ?1");
  job.bind(1, job_id);
  if (!job.step()) return {};
  const double started = job.column_double(3);
  const double ended = job.column_double(4);
  std::string out = fmt::format(
      "job_id: {}\nname: {}\nstate: {}\nreason: {}\nspec: {}\nstarted: {}\nended: {}\n"
      "elapsed_seconds: {}\nmini_batches_total: {}\nmini_batches_succeeded: {}\n"
      "mini_batches_failed: {}\nitems_succeeded: {}\nitems_failed: {}\nattempts: {}\n"
      "failed_attempts: {}\noutput: {}\n",
      job_id, job.column_text(0), job.column_text(1), job.column_text(2), job.column_text(13),
      utc_text(started), ended > 0 ? utc_text(ended) : std::string("-"),
      ended > 0 ? fmt::format("{:.3f}", ended - started) : std::string("-"), job.column_int64(5),
      job.column_int64(6), job.column_int64(7), job.column_int64(8), job.column_int64(9),
      job.column_int64(10), job.column_int64(11),
      job.column_text(12).empty() ? std::string("(summary_only)")
                                  : std::string(job.column_text(12)));
  job.reset();

  // The first errors, in the order they happened: enough to see what went wrong without SQL.
  Statement errors(db,
                   "SELECT minibatch_id, picked_count, status, error_message, process "
                   "FROM processed_minibatches "
                   "WHERE job_id = ?1 AND status != 'RUN_DONE' ORDER BY start, attempt_id "
                   "LIMIT 10");
  errors.bind(1, job_id);
  out += "first_errors:";
  bool any = false;
  while (errors.step()) {
    std::string_view msg = errors.column_text(3);
    msg = msg.substr(0, msg.find('\n'));
    if (msg.size() > 300) msg = msg.substr(0, 300);
    out += fmt::format(
        "\n  mini-batch {} try {} on {}: {}: {}", errors.column_int64(0), errors.column_int64(1),
        errors.column_text(4).empty() ? std::string_view("-") : errors.column_text(4),
        errors.column_text(2), msg);
    any = true;
  }
  errors.reset();
  out += any ? "\n" : " none\n";
  return out;
}

ProgressOverview overview_from_store(Db& db, std::uint64_t job_id) {
  Statement st(db,
               "SELECT j.name, j.state, j.submit_done, c.total, c.succeeded, c.failed, "
               "c.items_succeeded, c.items_failed, c.attempts_failed, coalesce(j.started, 0), "
               "coalesce(j.ended, 0) FROM jobs j JOIN job_counts c ON c.job_id = j.id "
               "WHERE j.id = ?1");
  st.bind(1, job_id);
  ProgressOverview p;
  if (!st.step()) return p;
  p.job_id = job_id;
  p.name = st.column_text(0);
  p.state = st.column_text(1);
  p.total_known = st.column_int64(2) != 0;
  p.total = st.column_uint64(3);
  p.succeeded = st.column_uint64(4);
  p.failed = st.column_uint64(5);
  p.items_succeeded = st.column_uint64(6);
  p.items_failed = st.column_uint64(7);
  p.attempts_failed = st.column_uint64(8);
  p.started = st.column_double(9);
  // A job still running is shown as of its last committed row: regenerating it is then
  // repeatable too (the live file the interchange writes is a separate snapshot).
  p.now = st.column_double(10);
  st.reset();
  return p;
}

}  // namespace

void append_csv_field(std::string& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += field;
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

std::string format_progress_overview(const ProgressOverview& p) {
  const std::uint64_t done = p.succeeded + p.failed;
  const double elapsed = p.now > p.started ? p.now - p.started : 0.0;
  std::string total = p.total_known ? std::to_string(p.total) : fmt::format("{}+", p.total);
  std::string pct = p.total_known && p.total > 0
                        ? fmt::format(" ({:.1f}%)", 100.0 * static_cast<double>(done) /
                                                        static_cast<double>(p.total))
                        : std::string();
  std::string out = fmt::format(
      "job {} ({}): {}\nmini-batches: {} of {} done{}: {} succeeded, {} failed\n"
      "items: {} succeeded, {} failed\nfailed attempts: {}\nstarted: {}\nelapsed_seconds: {:.3f}\n",
      p.job_id, p.name, p.state, done, total, pct, p.succeeded, p.failed, p.items_succeeded,
      p.items_failed, p.attempts_failed, utc_text(p.started), elapsed);
  if (elapsed > 0) {
    out += fmt::format("rate: {:.3f} mini-batches/s, {:.3f} items/s\n",
                       static_cast<double>(done) / elapsed,
                       static_cast<double>(p.items_succeeded + p.items_failed) / elapsed);
  } else {
    out += "rate: -\n";
  }
  if (p.total_known && done > 0 && done < p.total && p.state == "running") {
    out += fmt::format("eta_seconds: {:.1f}\n",
                       static_cast<double>(p.total - done) * elapsed / static_cast<double>(done));
  } else {
    out += "eta_seconds: -\n";
  }
  return out;
}

std::string progress_overview_name(double started) {
  const auto t = static_cast<std::time_t>(std::floor(started));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H", &tm);
  return std::string("job_progress_overview.") + buf + ".txt";
}

Expected<void> write_file_atomic(const std::string& path, const std::string& text) {
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) {
    fs::create_directories(p.parent_path(), ec);
    if (ec) {
      return make_error(ErrorCode::Io,
                        p.parent_path().string() + ": cannot create folder: " + ec.message());
    }
  }
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return make_error(ErrorCode::Io, path + ": cannot be written");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return make_error(ErrorCode::Io, path + ": cannot be written: " + ec.message());
  }
  return {};
}

namespace {

// Opens a store read-only for a report, checking its schema version.
std::unique_ptr<Db> open_for_report(const std::string& db_path) {
  std::error_code ec;
  if (!fs::exists(db_path, ec)) throw Failure(ErrorCode::NotFound, db_path + ": no such store");
  auto conn = std::make_unique<Db>(db_path, Db::Mode::ReadOnly);
  Db& db = *conn;
  db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
  const auto version = db.query_int("PRAGMA user_version");
  if (version != kSchemaVersion) {
    throw Failure(ErrorCode::Version,
                  fmt::format("{}: store schema version {}; this fanout reads version {} (open "
                              "it once with this fanout-interchange to migrate it)",
                              db_path, version, kSchemaVersion));
  }
  return conn;
}

}  // namespace

Expected<JobStatus> read_job_status(const std::string& db_path, std::uint64_t job_id) {
  try {
    const auto conn = open_for_report(db_path);
    Db& db = *conn;
    db.exec("BEGIN", "begin a read transaction");
    JobStatus s;
    {
      Statement st(db,
                   "SELECT p.name, p.state, p.reason, coalesce(j.log_dir, ''), "
                   "coalesce(j.output_path, ''), j.submit_done, p.total, p.succeeded, p.failed, "
                   "p.pending, p.running, p.items_succeeded, p.items_failed, p.attempts, "
                   "p.attempts_failed, coalesce(j.started, 0), coalesce(j.ended, 0), "
                   "coalesce(p.elapsed_seconds, 0), coalesce(p.minibatches_per_second, 0), "
                   "coalesce(p.items_per_second, 0), coalesce(p.eta_seconds, -1) "
                   "FROM job_progress p JOIN jobs j ON j.id = p.job_id WHERE p.job_id = ?1");
      st.bind(1, job_id);
      if (!st.step()) {
        return make_error(ErrorCode::NotFound,
                          fmt::format("{}: no job {} in this store", db_path, job_id));
      }
      s.id = job_id;
      s.name = st.column_text(0);
      s.state = st.column_text(1);
      s.reason = st.column_text(2);
      s.log_dir = st.column_text(3);
      s.output_path = st.column_text(4);
      s.total_known = st.column_int64(5) != 0;
      s.total = st.column_uint64(6);
      s.succeeded = st.column_uint64(7);
      s.failed = st.column_uint64(8);
      s.pending = st.column_uint64(9);
      s.running = st.column_uint64(10);
      s.items_succeeded = st.column_uint64(11);
      s.items_failed = st.column_uint64(12);
      s.attempts = st.column_uint64(13);
      s.attempts_failed = st.column_uint64(14);
      s.started = st.column_double(15);
      s.ended = st.column_double(16);
      s.elapsed_s = st.column_double(17);
      s.minibatches_per_s = st.column_double(18);
      s.items_per_s = st.column_double(19);
      s.eta_s = st.column_double(20);
    }
    {
      Statement st(db,
                   "SELECT coalesce(p.name, a.pool, ''), coalesce(p.node, a.node, ''), "
                   "coalesce(p.state, ''), coalesce(p.workers, 0), count(*) "
                   "FROM attempts a LEFT JOIN pools p ON p.id = a.pool_id "
                   "WHERE a.job_id = ?1 AND a.pool_id != 0 GROUP BY a.pool_id ORDER BY a.pool_id");
      st.bind(1, job_id);
      while (st.step()) {
        s.pools.push_back(JobStatus::PoolUse{
            std::string(st.column_text(0)), std::string(st.column_text(1)),
            std::string(st.column_text(2)), st.column_uint64(3), st.column_uint64(4)});
      }
    }
    {
      Statement st(db,
                   "SELECT count(DISTINCT coalesce(pool, '') || '/' || process) FROM attempts "
                   "WHERE job_id = ?1 AND coalesce(process, '') != ''");
      st.bind(1, job_id);
      if (st.step()) s.processes = st.column_uint64(0);
    }
    {
      Statement st(db,
                   "SELECT minibatch_id, picked_count, process, status, error_message, "
                   "process_start_time FROM processed_minibatches "
                   "WHERE job_id = ?1 AND status != 'RUN_DONE' "
                   "ORDER BY start DESC, attempt_id DESC LIMIT 5");
      st.bind(1, job_id);
      while (st.step()) {
        std::string_view msg = st.column_text(4);
        msg = msg.substr(0, msg.find('\n'));
        s.last_errors.push_back(
            JobStatus::ErrorLine{st.column_uint64(0), st.column_uint64(1),
                                 std::string(st.column_text(2)), std::string(st.column_text(3)),
                                 std::string(msg.substr(0, 300)), std::string(st.column_text(5))});
      }
    }
    db.exec("COMMIT", "end a read transaction");
    return s;
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

Expected<std::vector<std::string>> write_job_report(const std::string& db_path,
                                                    std::uint64_t job_id,
                                                    const std::string& out_dir) {
  // Every file is written to its temporary name within one read transaction (so all of them
  // show the same committed state), then renamed into place.
  std::vector<std::unique_ptr<PendingFile>> files;
  auto add_file = [&](std::string rel) -> PendingFile& {
    files.push_back(std::make_unique<PendingFile>(std::move(rel), out_dir));
    return *files.back();
  };
  try {
    const auto conn = open_for_report(db_path);
    Db& db = *conn;
    db.exec("BEGIN", "begin the report's read transaction");
    const std::string result = job_result_text(db, job_id);
    if (result.empty()) {
      db.exec("COMMIT");
      return make_error(ErrorCode::NotFound,
                        fmt::format("{}: no job {} in this store", db_path, job_id));
    }
    add_file("job_result.txt").write(result);
    const ProgressOverview ov = overview_from_store(db, job_id);
    add_file(progress_overview_name(ov.started)).write(format_progress_overview(ov));

    for (const auto& spec : kJobReports) {
      Statement st(db, spec.query);
      st.bind(1, job_id);
      render_csv(st, spec, add_file(spec.path));
    }

    Statement nodes(db,
                    "SELECT node FROM node_resource_samples WHERE job_id = ?1 UNION "
                    "SELECT node FROM process_resource_samples WHERE job_id = ?1 UNION "
                    "SELECT node FROM disk_usage_samples WHERE job_id = ?1 ORDER BY 1");
    nodes.bind(1, job_id);
    std::vector<std::string> node_names;
    while (nodes.step()) node_names.emplace_back(nodes.column_text(0));
    nodes.reset();
    for (const auto& spec : kPerfReports) {
      Statement st(db, spec.query);
      for (const auto& node : node_names) {
        st.bind(1, job_id).bind(2, node);
        std::string rel = spec.path;
        rel.replace(rel.find("{node}"), 6, node_folder(node));
        render_csv(st, spec, add_file(std::move(rel)));
      }
    }
    db.exec("COMMIT", "end the report's read transaction");
    std::vector<std::string> written;
    for (auto& f : files) {
      f->commit();
      written.push_back(f->rel());
    }
    return written;
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

}  // namespace fanout::store
