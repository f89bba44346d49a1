// The rows behind report.html, compare and tune. See report_queries.hpp.
#include "fanout/store/report_queries.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "fanout/store/db.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

ReportJobRow read_report_job(ReportSource& src, std::uint64_t job_id) {
  Db& db = src.db();
  Statement job(db,
                "SELECT j.name, j.state, j.reason, coalesce(j.spec_path, ''), "
                "coalesce(j.runtime, ''), coalesce(j.entry_script, ''), "
                "coalesce(j.output_path, ''), coalesce(j.log_dir, ''), j.submit_done, "
                "coalesce(j.started, j.created, 0), coalesce(j.ended, 0), j.total, "
                "coalesce(j.started, 0), coalesce(j.settings, '{}') FROM jobs j WHERE j.id = ?1");
  job.bind(1, job_id);
  if (!job.step()) {
    throw Failure(ErrorCode::NotFound,
                  fmt::format("{}: no job {} in this store", db.path(), job_id));
  }
  ReportJobRow r;
  r.name = job.column_text(0);
  r.state = job.column_text(1);
  r.reason = job.column_text(2);
  r.spec_path = job.column_text(3);
  r.runtime = job.column_text(4);
  r.entry = job.column_text(5);
  r.output_path = job.column_text(6);
  r.log_dir = job.column_text(7);
  r.total_known = job.column_int64(8) != 0;
  r.started = job.column_double(9);
  r.ended = job.column_double(10);
  r.total = job.column_uint64(11);
  r.job_started = job.column_double(12);
  r.settings_json = job.column_text(13);

  Statement settings(db, "SELECT key, value FROM job_settings WHERE job_id = ?1 ORDER BY key");
  settings.bind(1, job_id);
  while (settings.step()) {
    r.settings.emplace_back(std::string(settings.column_text(0)),
                            std::string(settings.column_text(1)));
  }
  return r;
}

MinibatchCounts read_minibatch_counts(ReportSource& src, std::uint64_t job_id) {
  Statement c(src.db(),
              "SELECT count(*), coalesce(sum(state = 'succeeded'), 0), "
              "coalesce(sum(state = 'failed'), 0), coalesce(sum(state = 'pending'), 0), "
              "coalesce(sum(state = 'running'), 0), "
              "coalesce(sum(CASE WHEN state = 'succeeded' THEN succeeded ELSE 0 END), 0), "
              "coalesce(sum(CASE state WHEN 'succeeded' THEN failed "
              "WHEN 'failed' THEN items ELSE 0 END), 0) FROM minibatches WHERE job_id = ?1");
  c.bind(1, job_id);
  MinibatchCounts m;
  if (!c.step()) return m;
  m.submitted = c.column_uint64(0);
  m.succeeded = c.column_uint64(1);
  m.failed = c.column_uint64(2);
  m.pending = c.column_uint64(3);
  m.running = c.column_uint64(4);
  m.items_succeeded = c.column_uint64(5);
  m.items_failed = c.column_uint64(6);
  return m;
}

std::optional<PoolRow> read_pool_row(ReportSource& src, std::uint64_t pool_id) {
  Statement p(src.db(),
              "SELECT coalesce(state, ''), coalesce(workers, 0), coalesce(prefetch, 0) "
              "FROM pools WHERE id = ?1");
  p.bind(1, pool_id);
  if (!p.step()) return std::nullopt;
  return PoolRow{.state = std::string(p.column_text(0)),
                 .workers = p.column_uint64(1),
                 .prefetch = p.column_uint64(2)};
}

std::vector<ExhaustedRow> read_exhausted(ReportSource& src, std::uint64_t job_id,
                                         std::uint32_t limit) {
  Statement e(src.db(),
              "SELECT m.id, m.tries, m.items, (SELECT a.status || ': ' || "
              "coalesce(a.error_message, '') FROM attempts a WHERE a.job_id = m.job_id AND "
              "a.minibatch_id = m.id ORDER BY a.attempt DESC LIMIT 1), (SELECT a.status FROM "
              "attempts a WHERE a.job_id = m.job_id AND a.minibatch_id = m.id ORDER BY a.attempt "
              "DESC LIMIT 1) FROM minibatches m "
              "WHERE m.job_id = ?1 AND m.state = 'failed' ORDER BY m.id LIMIT ?2");
  e.bind(1, job_id).bind(2, static_cast<std::int64_t>(limit));
  std::vector<ExhaustedRow> rows;
  while (e.step()) {
    rows.push_back({.minibatch = e.column_uint64(0),
                    .tries = e.column_uint64(1),
                    .items = e.column_uint64(2),
                    .last = std::string(e.column_text(3)),
                    .status = std::string(e.column_text(4))});
  }
  return rows;
}

namespace {

// One series per node: bin `b` of width `w` from `lo`, as a point at the bin's middle.
void read_node_series(Db& db, std::uint64_t job_id, double t0, double lo, double w,
                      std::vector<ResourceSeries>& out) {
  Statement node(db,
                 "SELECT node, CAST((time - ?2) / ?3 AS INTEGER) AS b, avg(cpu_percent), "
                 "avg(mem_used_mb), max(mem_total_mb) FROM node_resource_samples "
                 "WHERE job_id = ?1 GROUP BY node, b ORDER BY node, b");
  node.bind(1, job_id).bind(2, lo).bind(3, w);
  while (node.step()) {
    if (out.empty() || out.back().node != node.column_text(0)) {
      out.push_back({});
      out.back().node = node.column_text(0);
    }
    auto& s = out.back();
    s.t.push_back(lo - t0 + (static_cast<double>(node.column_int64(1)) + 0.5) * w);
    s.cpu.push_back(node.column_double(2));
    s.mem.push_back(node.column_double(3));
    s.mem_total = std::max(s.mem_total, node.column_double(4));
  }
}

// One series per worker process, as read_node_series(), at most `max` of them.
void read_process_series(Db& db, std::uint64_t job_id, double t0, double lo, double w,
                         std::size_t max, std::vector<ResourceSeries>& out) {
  Statement proc(db,
                 "SELECT node, coalesce(pool, ''), process, CAST((time - ?2) / ?3 AS INTEGER) "
                 "AS b, avg(cpu_percent), avg(rss_mb) FROM process_resource_samples "
                 "WHERE job_id = ?1 GROUP BY node, pool, process, b ORDER BY node, pool, "
                 "process, b");
  proc.bind(1, job_id).bind(2, lo).bind(3, w);
  while (proc.step()) {
    if (out.empty() || out.back().node != proc.column_text(0) ||
        out.back().pool != proc.column_text(1) || out.back().process != proc.column_text(2)) {
      if (out.size() >= max) break;
      out.push_back({});
      out.back().node = proc.column_text(0);
      out.back().pool = proc.column_text(1);
      out.back().process = proc.column_text(2);
    }
    auto& s = out.back();
    s.t.push_back(lo - t0 + (static_cast<double>(proc.column_int64(3)) + 0.5) * w);
    s.cpu.push_back(proc.column_double(4));
    s.mem.push_back(proc.column_double(5));
  }
}

// One series per accelerator (node, device index), as read_node_series().
void read_gpu_series(Db& db, std::uint64_t job_id, double t0, double lo, double w,
                     std::vector<ResourceSeries>& out) {
  Statement gpu(db,
                "SELECT node, device_index, max(coalesce(name, '')), CAST((time - ?2) / ?3 AS "
                "INTEGER) AS b, avg(util_percent), avg(mem_used_mb), max(mem_total_mb), "
                "count(*) FROM gpu_samples WHERE job_id = ?1 GROUP BY node, device_index, b "
                "ORDER BY node, device_index, b");
  gpu.bind(1, job_id).bind(2, lo).bind(3, w);
  std::int64_t index = -1;
  double samples = 0;
  while (gpu.step()) {
    if (out.empty() || out.back().node != gpu.column_text(0) || index != gpu.column_int64(1)) {
      if (!out.empty() && samples > 0) out.back().mean_cpu /= samples;
      samples = 0;
      index = gpu.column_int64(1);
      out.push_back({});
      out.back().node = gpu.column_text(0);
      const std::string name(gpu.column_text(2));
      out.back().process = "GPU " + std::to_string(index) + (name.empty() ? "" : " " + name);
    }
    auto& s = out.back();
    s.t.push_back(lo - t0 + (static_cast<double>(gpu.column_int64(3)) + 0.5) * w);
    s.cpu.push_back(gpu.column_double(4));
    s.mem.push_back(gpu.column_double(5));
    s.mem_total = std::max(s.mem_total, gpu.column_double(6));
    const double n = gpu.column_double(7);
    s.mean_cpu += gpu.column_double(4) * n;  // weighted by the bin's samples
    samples += n;
  }
  if (!out.empty() && samples > 0) out.back().mean_cpu /= samples;
}

}  // namespace

ResourceSeriesRows read_resource_series(ReportSource& src, std::uint64_t job_id, double t0,
                                        std::uint32_t nbins, std::size_t max_processes) {
  ResourceSeriesRows r;
  Statement range(src.db(),
                  "SELECT min(time), max(time), count(*) FROM node_resource_samples "
                  "WHERE job_id = ?1");
  range.bind(1, job_id);
  if (!range.step() || range.column_int64(2) == 0) return r;
  // The bins span the node samples; process samples outside them fall into bins past the ends.
  const double lo = std::min(range.column_double(0), t0);
  const double w = std::max(range.column_double(1) - lo, 1e-3) / nbins;
  read_node_series(src.db(), job_id, t0, lo, w, r.nodes);
  read_process_series(src.db(), job_id, t0, lo, w, max_processes, r.processes);
  read_gpu_series(src.db(), job_id, t0, lo, w, r.gpus);
  return r;
}

}  // namespace fanout::store
