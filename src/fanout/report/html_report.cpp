// report.html of a job. See html_report.hpp and docs/tuning.md.
#include "fanout/report/html_report.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "fanout/report/job_figures.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/json.hpp"

namespace fanout::report {

extern const unsigned char kChartJs[];  // generated from chart.min.js by tools/embed_file.py
extern const std::size_t kChartJsSize;

namespace {

constexpr std::string_view kStyle = R"css(
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1250px;padding:0 1em;color:#222}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left;
vertical-align:top;font-size:.9em}th{background:#f3f3f3}td.n{text-align:right}
.chart{position:relative;width:100%;margin:.5em 0 1em 0}.note{color:#666;font-size:.9em}
.state-succeeded{color:#1a7f37}.state-partial{color:#bc4c00}.state-failed{color:#cf222e}.state-cancelled{color:#9a6700}
.state-running{color:#0969da}.grid{display:grid;grid-template-columns:1fr 1fr;gap:1em}
pre{white-space:pre-wrap;font-size:.85em;margin:0}
)css";

// The drawing script: reads window.fanoutReport and draws every chart whose canvas is present.
constexpr std::string_view kScript = R"js(
(function () {
  'use strict';
  let R = window.fanoutReport;
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  const colours = {RUN_DONE: '#2da44e', FAILED: '#cf222e', RUN_EXCEPTION: '#cf222e',
    RUN_TIMEOUT: '#e16f24', LOAD_EXCEPTION: '#8250df', LOAD_TIMEOUT: '#bf3989',
    WORKER_LOST: '#953800', POOL_LOST: '#6e7781', CANCELLED: '#afb8c1'};
  const palette = ['#0969da', '#cf222e', '#2da44e', '#8250df', '#e16f24', '#1b7c83', '#bf3989',
    '#6e7781', '#9a6700', '#953800'];
  const colour = (s, i) => colours[s] || palette[i % palette.length];
  let drawn = 0;
  const charts = [];  // drawn so far: a redraw destroys them first
  function make(id, config, points) {
    const canvas = document.getElementById(id);
    if (!canvas) return;
    const chart = new Chart(canvas, config);
    charts.push(chart);
    canvas.setAttribute('data-points', String(points));
    // What a reader sees, for the page's own tests: the series and each axis's tick labels.
    canvas.setAttribute('data-series', chart.data.datasets.map((d) => d.label).join('|'));
    Object.entries(chart.scales).forEach(([key, scale]) => canvas.setAttribute('data-ticks-' + key,
      scale.ticks.map((t) => String(t.label)).join('|')));
    drawn += 1;
  }
  const xy = (t, v) => t.map((x, i) => ({x: x, y: v[i]}));
  const linear = (title) => ({type: 'linear', title: {display: true, text: title}});
  // An axis of counts: whole-number ticks only.
  const counting = (title) => Object.assign(linear(title), {beginAtZero: true, ticks: {precision: 0}});
  // Items done by the end of each bin (the job's end for the last), from 0 at the start.
  const progress = (t, done, w, end) => [{x: 0, y: 0}].concat(t.filter((x) => x < end || x === 0)
    .map((x, i) => ({x: Math.min(x + w, end), y: done[i]})));
  // Rates drawn at the middle of their bin; none for a bin after the job's end.
  const rate = (t, v, w, end) => t.map((x, i) => ({x: x + w / 2, y: v[i]}))
    .filter((p, i) => t[i] < end || i === 0);
  function lines(id, series, xtitle, ytitle, extra) {
    const points = series.reduce((n, s) => n + s.data.length, 0);
    const options = {scales: {x: linear(xtitle), y: Object.assign(linear(ytitle), {beginAtZero: true})},
      elements: {point: {radius: 0}}, plugins: {legend: {display: series.length <= 24}}};
    if (extra) extra(options);
    make(id, {type: 'line', data: {datasets: series}, options: options}, points);
  }
  // Bin centres in ms with as many digits as it takes to tell them apart (103.1, 103.2, not
  // 103, 103).
  function bin_labels(h) {
    const centres = h.counts.map((_, i) => 1000 * (h.lo + (i + 0.5) * h.width));
    for (let digits = 3; digits <= 9; digits += 1) {
      const labels = centres.map((c) => String(Number(c.toPrecision(digits))));
      if (new Set(labels).size === labels.length) return labels;
    }
    return centres.map(String);
  }
  function histogram(id, h, title) {
    if (!h || !h.counts.length) return;
    make(id, {type: 'bar', data: {labels: bin_labels(h), datasets: [{label: 'successful attempts',
      data: h.counts, backgroundColor: '#0969da', barPercentage: 1, categoryPercentage: 1}]},
      options: {scales: {x: {title: {display: true, text: title + ' (ms, bin centre)'}},
        y: counting('attempts')}}}, h.counts.length);
  }
  function job() {
    const T = R.timeline;
    if (T && T.segments.length) {
      const statuses = [...new Set(T.segments.map((s) => s[3]))];
      const span = T.segments.reduce((m, s) => Math.max(m, s[2]), 0) || 1;
      const minw = span / 1500;  // an instant attempt still shows
      const datasets = statuses.map((st, i) => ({label: st, backgroundColor: colour(st, i),
        grouped: false, barPercentage: 0.85, categoryPercentage: 1,
        data: T.segments.filter((s) => s[3] === st).map((s) => ({
          x: [s[1], Math.max(s[2], s[1] + minw)], y: R.workers[s[0]], n: s[4]}))}));
      make('chart-timeline', {type: 'bar', data: {labels: R.workers, datasets: datasets},
        options: {indexAxis: 'y', scales: {x: Object.assign(linear('seconds since the job started'),
          {min: 0}), y: {ticks: {autoSkip: R.workers.length > 60}}},
          plugins: {tooltip: {callbacks: {label: (c) => c.dataset.label + ' ' +
            c.raw.x[0].toFixed(3) + '..' + c.raw.x[1].toFixed(3) + ' s' +
            (T.binned ? ' (' + c.raw.n + ' attempts)' : ' mini-batch ' + c.raw.n)}}}}},
        T.segments.length);
    }
    const S = R.series;
    if (S && S.t.length && R.job.worker_attempts > 0) {
      // Rates on the left, all per second; the items done so far on the right. Mini-batches/s
      // only where it differs from items/s, failed attempts/s only where any failed.
      const end = R.job.duration_s > 0 ? R.job.duration_s : Infinity;
      const rates = [{label: 'items/s', data: rate(S.t, S.items_per_s, S.bin_s, end),
        borderColor: '#2da44e', yAxisID: 'y'}];
      if (S.minibatches_per_s.some((v, i) => v !== S.items_per_s[i])) {
        rates.push({label: 'mini-batches/s', data: rate(S.t, S.minibatches_per_s, S.bin_s, end),
          borderColor: '#0969da', yAxisID: 'y'});
      }
      if (S.failed_per_s.some((v) => v > 0)) {
        rates.push({label: 'failed attempts/s', data: rate(S.t, S.failed_per_s, S.bin_s, end),
          borderColor: '#cf222e', yAxisID: 'y'});
      }
      rates.push({label: 'items done', data: progress(S.t, S.items_done, S.bin_s, end),
        borderColor: '#1b7c83', borderWidth: 3, yAxisID: 'y1'});
      lines('chart-throughput', rates, 'seconds since the job started', 'per second', (o) => {
        o.scales.y1 = Object.assign(counting('items done'), {position: 'right',
          grid: {drawOnChartArea: false}});
      });
      lines('chart-inflight', [
        {label: 'running in workers', data: xy(S.t, S.running), borderColor: '#8250df', stepped: true},
        {label: 'queued (not finished, not running)', data: xy(S.t, S.queued), borderColor: '#e16f24', stepped: true}],
        'seconds since the job started', 'mini-batches', (o) => {
          o.scales.y = counting('mini-batches');
        });
    }
    const U = R.utilisation;
    if (U && U.length) {
      make('chart-utilisation', {type: 'bar', data: {labels: U.map((u) => u.name), datasets: [
        {label: '% of worker time inside run()', data: U.map((u) => u.run), backgroundColor: '#0969da'},
        {label: '% of worker time in an attempt', data: U.map((u) => u.busy), backgroundColor: '#afb8c1'}]},
        options: {scales: {y: {min: 0, max: 100, title: {display: true, text: '%'}}}}}, U.length);
    }
    histogram('chart-run-hist', R.run_hist, 'run() time');
    histogram('chart-overhead-hist', R.overhead_hist, 'overhead: attempt time - run() time');
    const F = R.failures;
    if (F && F.by_status.length) {
      make('chart-failures', {type: 'bar', data: {labels: F.by_status.map((s) => s[0]),
        datasets: [{label: 'failed attempts', data: F.by_status.map((s) => s[1]),
          backgroundColor: F.by_status.map((s, i) => colour(s[0], i))}]},
        options: {indexAxis: 'y', scales: {x: counting('failed attempts')},
          plugins: {legend: {display: false}}}}, F.by_status.length);
    }
    const N = R.nodes || [], P = R.processes || [], G = R.gpus || [];
    if (G.length) {
      lines('chart-gpu-util', G.map((g, i) => ({label: g.label, data: xy(g.t, g.util),
        borderColor: palette[i % palette.length]})), 'seconds since the job started', 'accelerator busy %');
      lines('chart-gpu-mem', G.map((g, i) => ({label: g.label + ' of ' + g.mem_total.toFixed(0) + ' MB',
        data: xy(g.t, g.mem), borderColor: palette[i % palette.length]})), 'seconds since the job started', 'accelerator memory MB');
    }
    if (N.length) {
      lines('chart-node-cpu', N.map((n, i) => ({label: n.node, data: xy(n.t, n.cpu),
        borderColor: palette[i % palette.length]})), 'seconds since the job started', 'node CPU % (all cores = 100)');
      lines('chart-node-mem', N.map((n, i) => ({label: n.node + ' used of ' + n.mem_total.toFixed(0) + ' MB',
        data: xy(n.t, n.mem), borderColor: palette[i % palette.length]})), 'seconds since the job started', 'MB');
    }
    if (P.length) {
      lines('chart-proc-cpu', P.map((p, i) => ({label: p.label, data: xy(p.t, p.cpu),
        borderColor: palette[i % palette.length]})), 'seconds since the job started', 'worker CPU % (one core = 100)');
      lines('chart-proc-rss', P.map((p, i) => ({label: p.label, data: xy(p.t, p.rss),
        borderColor: palette[i % palette.length]})), 'seconds since the job started', 'RSS MB');
    }
  }
  // One time axis for all the runs: what each has done so far (solid, left) and its rate
  // (dashed, right), in the run's colour; the title names the faster run.
  function compare_chart(id, J, what) {
    const series = [];
    J.forEach((j, i) => {
      const c = palette[i % palette.length], name = 'job ' + j.id + ' ' + j.name;
      const end = j.duration_s > 0 ? j.duration_s : Infinity;
      series.push({label: name + ': ' + what + ' done', data: progress(j.t, j[what + '_done'],
        j.bin_s, end), borderColor: c, borderWidth: 3, yAxisID: 'y'});
      series.push({label: name + ': ' + what + '/s', data: rate(j.t, j[what + '_per_s'], j.bin_s,
        end), borderColor: c, borderDash: [6, 4], borderWidth: 1, yAxisID: 'y1'});
    });
    lines(id, series, 'seconds since the job started', what + ' done', (o) => {
      o.scales.y = counting(what + ' done');
      o.scales.y1 = Object.assign(linear(what + '/s'), {position: 'right', beginAtZero: true,
        grid: {drawOnChartArea: false}});
      o.plugins.title = {display: !!R.faster, text: R.faster};
    });
  }
  function compare() {
    const J = R.jobs.filter((j) => j.t.length);
    if (!J.length) return;
    compare_chart('chart-compare-items', J, 'items');
    compare_chart('chart-compare-minibatches', J, 'minibatches');
  }
  // fanout explore: each factor's mean effect with its interval (a floating bar and a point),
  // best vs base, and per factor the pairs' before/after coloured by the other factors.
  function explore() {
    const E = R.effects;
    make('chart-explore-effects', {type: 'bar', data: {labels: E.map((e) => e.name), datasets: [
      {label: '95% interval', data: E.map((e) => [e.mean - e.half, e.mean + e.half]),
        backgroundColor: '#0969da55'},
      {label: 'mean', type: 'scatter', data: E.map((e) => ({x: e.name, y: e.mean})),
        backgroundColor: '#0969da'}]},
    options: {scales: {y: linear('time per item, % change per step up')}}}, E.length);
    const B = R.best;
    make('chart-explore-best', {type: 'bar', data: {labels: ["job's settings", 'best found'],
      datasets: [{label: 'seconds per item', data: [B.base, B.best],
        backgroundColor: ['#6e7781', '#2da44e']}]},
    options: {indexAxis: 'y', plugins: {title: {display: true,
      text: 'speed-up ' + B.speedup.toFixed(2) + 'x ± ' + B.half.toFixed(2)}}}}, 2);
    E.forEach((e) => {
      if (!e.before.length) return;
      const groups = {};
      e.before.forEach((b, i) => (groups[e.other[i]] = groups[e.other[i]] || []).push(
        {x: b, y: e.after[i]}));
      const hi = Math.max(...e.before, ...e.after);
      const series = Object.entries(groups).map(([label, data], i) => ({label: label, data: data,
        backgroundColor: palette[i % palette.length]}));
      series.push({label: 'no change', type: 'line', data: [{x: 0, y: 0}, {x: hi, y: hi}],
        borderColor: '#afb8c1', pointRadius: 0});
      make('chart-explore-factor-' + e.index, {type: 'scatter', data: {datasets: series},
        options: {plugins: {title: {display: true, text: e.name + ': lower level (x) vs higher (y)'}},
          scales: {x: linear('s/item before'), y: linear('s/item after')}}}, e.before.length);
    });
  }
  // Draws the charts of `data`, replacing any drawn before (the dashboard's live pages call it
  // again with new figures after replacing the page's body).
  function draw(data) {
    charts.splice(0).forEach((c) => c.destroy());
    R = data;
    drawn = 0;
    try {
      if (R.kind === 'compare') compare();
      else if (R.kind === 'explore') explore();
      else job();
    } finally {
      document.documentElement.setAttribute('data-rendered', String(drawn));
    }
  }
  window.fanoutDraw = draw;
  draw(R);
})();
)js";

// Counts the page's script errors on <html data-errors>, before anything else runs.
constexpr std::string_view kErrorHook = R"js(
window.fanoutErrors = [];
window.addEventListener('error', function (e) {
  window.fanoutErrors.push(String(e.message));
  document.documentElement.setAttribute('data-errors', String(window.fanoutErrors.length));
});
)js";

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  return fmt::format("{:.7g}", v);
}

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

std::string time_text(double unix_s) { return unix_s > 0 ? iso_utc(unix_s) : std::string("-"); }

void row(std::string& out, std::string_view key, std::string_view value) {
  out += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", html_escape(key), html_escape(value));
}

void canvas(std::string& out, std::string_view id, int height) {
  out += fmt::format(
      "<div class=\"chart\" style=\"height:{}px\"><canvas id=\"{}\" class=\"fanout-chart\">"
      "</canvas></div>\n",
      height, id);
}

std::string header_html(const ReportData& d, const JobFigures& f, bool with_title) {
  std::string o;
  if (with_title) o += fmt::format("<h1>fanout job {}: {}</h1>\n", d.job_id, html_escape(d.name));
  o += fmt::format("<p>state <b class=\"state-{0}\">{0}</b>{1}{2}</p>\n", html_escape(d.state),
                   d.reason.empty() ? "" : ": " + html_escape(d.reason),
                   d.ended > 0 ? ""
                               : fmt::format(" <span class=\"note\">(a snapshot at {})</span>",
                                             time_text(d.snapshot)));
  o += "<div class=\"grid\"><div><table>\n";
  row(o, "job file", d.spec_path);
  row(o, "runtime", d.runtime + (d.entry.empty() ? "" : ": " + d.entry));
  row(o, "output", d.output_path.empty() ? "(summary_only)" : d.output_path);
  row(o, "logs", d.log_dir);
  row(o, "started", time_text(d.started));
  row(o, "ended", d.ended > 0 ? time_text(d.ended) : std::string("- (running)"));
  row(o, "duration", fixed(f.duration_s, 3) + " s");
  row(o, "mini-batches",
      fmt::format("{} of {}{} done: {} succeeded, {} failed; {} running, {} pending",
                  d.succeeded + d.failed, d.total_known ? d.total : d.submitted,
                  d.total_known ? "" : "+", d.succeeded, d.failed, d.running, d.pending));
  row(o, "items", fmt::format("{} succeeded, {} failed", d.items_succeeded, d.items_failed));
  row(o, "attempts", fmt::format("{} ({} failed)", d.attempts, d.attempts_failed));
  row(o, "rate",
      fmt::format("{:.4g} items/s, {:.4g} mini-batches/s", f.items_per_s, f.minibatches_per_s));
  row(o, "workers",
      fmt::format("{} in {} pool(s); {:.1f}% of worker time inside run()", f.workers,
                  d.pools.size(), f.run_share * 100));
  row(o, "per mini-batch",
      f.measured > 0 ? fmt::format("run() {:.4g} ms, overhead {:.4g} ms ({:.1f}%), idle gap "
                                   "between tasks {:.4g} ms",
                                   f.mean_run_s * 1000, f.mean_overhead_s * 1000,
                                   f.overhead_share * 100, f.mean_gap_s * 1000)
                     : std::string("- (no successful attempt yet)"));
  o += "</table></div><div><table>\n<tr><th>setting</th><th>value</th></tr>\n";
  for (const auto& [k, v] : d.settings) {
    o += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", html_escape(k), html_escape(v));
  }
  if (d.settings.empty()) o += "<tr><td colspan=\"2\">(none recorded)</td></tr>\n";
  o += "</table></div></div>\n";
  return o;
}

std::string failures_html(const ReportData& d) {
  std::string o = "<h2>Failures</h2>\n";
  if (d.attempts_failed == 0) return o + "<p class=\"note\">No attempt failed.</p>\n";
  canvas(o, "chart-failures", 60 + 28 * static_cast<int>(d.by_status.size()));
  o += "<table><tr><th>category</th><th>failed attempts</th></tr>\n";
  for (const auto& [c, n] : d.by_category) {
    o += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td></tr>\n",
                     html_escape(c.empty() ? "(none)" : c), n);
  }
  o += "</table>\n<table><tr><th>status</th><th>category</th><th>attempts</th>"
       "<th>first messages</th></tr>\n";
  for (const auto& g : d.failures) {
    std::string msgs;
    for (const auto& m : g.first) msgs += html_escape(m) + "\n";
    o += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td><pre>{}</pre></td></tr>\n",
        html_escape(g.status), html_escape(g.category), g.count, msgs);
  }
  o += "</table>\n";
  o += fmt::format("<p>{} mini-batch(es) exhausted their tries.</p>\n", d.exhausted_count);
  if (!d.exhausted.empty()) {
    o += "<table><tr><th>mini-batch</th><th>tries</th><th>items</th><th>last attempt</th></tr>\n";
    for (const auto& e : d.exhausted) {
      o += fmt::format(
          "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
          "<td>{}</td></tr>\n",
          e.minibatch, e.tries, e.items, html_escape(e.last));
    }
    o += "</table>\n";
    if (d.exhausted_count > d.exhausted.size()) {
      o += fmt::format("<p class=\"note\">The first {} are listed.</p>\n", d.exhausted.size());
    }
  }
  return o;
}

// The run() and overhead histograms, with their figures and a note on any clamped overhead.
std::string histograms_html(const ReportData& d) {
  std::string o;
  o += "<h2>run() time and overhead per mini-batch</h2>\n";
  if (d.run_hist.n == 0) {
    o += "<p class=\"note\">No successful attempt yet.</p>\n";
  } else {
    o += fmt::format(
        "<p class=\"note\">{} successful attempts. run(): min {:.4g} ms, mean {:.4g} ms, max "
        "{:.4g} ms. Overhead (attempt time − run() time): min {:.4g} ms, mean {:.4g} ms, max "
        "{:.4g} ms.</p>\n",
        d.run_hist.n, d.run_hist.min * 1000, d.run_hist.mean * 1000, d.run_hist.max * 1000,
        d.overhead_hist.min * 1000, d.overhead_hist.mean * 1000, d.overhead_hist.max * 1000);
    if (d.overhead_hist.clamped > 0) {
      o += fmt::format(
          "<p class=\"note\" id=\"overhead-clamped\">{} attempt(s) had a run() time above their "
          "attempt time (run() is timed inside the worker, the attempt by the pool, each rounded "
          "when stored): their overhead counts as 0.</p>\n",
          d.overhead_hist.clamped);
    }
    o += "<div class=\"grid\"><div>";
    canvas(o, "chart-run-hist", 260);
    o += "</div><div>";
    canvas(o, "chart-overhead-hist", 260);
    o += "</div></div>\n";
  }
  return o;
}

// The workers and the timeline's bars: "workers":[...],"timeline":{...}.
void timeline_json(std::string& j, const ReportData& d) {
  j += ",\"workers\":[";
  for (std::size_t i = 0; i < d.workers.size(); ++i) {
    if (i) j += ",";
    // A worker placed on an accelerator names it in its timeline row.
    const auto& w = d.workers[i];
    json_quote(j, w.device.empty() ? w.pool + "/" + w.process
                                   : w.pool + "/" + w.process + " (device " + w.device + ")");
  }
  j += fmt::format("],\"timeline\":{{\"binned\":{},\"bin_s\":{},\"segments\":[",
                   d.timeline_binned ? "true" : "false", num(d.timeline_bin_s));
  for (std::size_t i = 0; i < d.segments.size(); ++i) {
    const auto& s = d.segments[i];
    if (i) j += ",";
    j += fmt::format("[{},{},{},", s.worker, num(s.t_start), num(s.t_end));
    json_quote(j, s.status);
    j += fmt::format(",{}]", d.timeline_binned ? s.attempts : s.minibatch);
  }
  j += "]}";
}

// The time series and the pools' utilisation: "series":{...},"utilisation":[...].
void series_json(std::string& j, const ReportData& d, const JobFigures& f) {
  // Time series: rates per bin, and the running and queued counts at each bin's start.
  std::vector<double> t, mb, items, failed, running, queued, items_done;
  const double w = d.bin_s > 0 ? d.bin_s : 1;
  std::uint64_t done = 0;
  for (const auto& b : d.bins) {
    t.push_back(b.t);
    mb.push_back(static_cast<double>(b.succeeded) / w);
    items.push_back(static_cast<double>(b.items) / w);
    done += b.items;
    items_done.push_back(static_cast<double>(done));
    failed.push_back(static_cast<double>(b.failed) / w);
    running.push_back(static_cast<double>(b.running));
    queued.push_back(static_cast<double>(b.queued));
  }
  j += fmt::format(",\"series\":{{\"bin_s\":{},\"t\":", num(d.bin_s));
  append_json_numbers(j, t);
  j += ",\"minibatches_per_s\":";
  append_json_numbers(j, mb);
  j += ",\"items_per_s\":";
  append_json_numbers(j, items);
  j += ",\"items_done\":";
  append_json_numbers(j, items_done);
  j += ",\"failed_per_s\":";
  append_json_numbers(j, failed);
  j += ",\"running\":";
  append_json_numbers(j, running);
  j += ",\"queued\":";
  append_json_numbers(j, queued);
  j += "},\"utilisation\":[";
  for (std::size_t i = 0; i < f.pools.size(); ++i) {
    j += i ? "," : "";
    j += "{\"name\":";
    json_quote(j, f.pools[i].name);
    j += fmt::format(",\"workers\":{},\"run\":{},\"busy\":{}}}", f.pools[i].workers,
                     num(100 * f.pools[i].run_share), num(100 * f.pools[i].busy_share));
  }
  if (!f.pools.empty()) {
    j += fmt::format(",{{\"name\":\"all pools\",\"workers\":{},\"run\":{},\"busy\":{}}}", f.workers,
                     num(100 * f.run_share), num(100 * f.busy_share));
  }
  j += "]";
}

// The resource series: "nodes":[...],"processes":[...].
void resources_json(std::string& j, const ReportData& d) {
  j += ",\"nodes\":[";
  for (std::size_t i = 0; i < d.node_series.size(); ++i) {
    const auto& s = d.node_series[i];
    j += i ? ",{\"node\":" : "{\"node\":";
    json_quote(j, s.node);
    j += fmt::format(",\"mem_total\":{},\"t\":", num(s.mem_total));
    append_json_numbers(j, s.t);
    j += ",\"cpu\":";
    append_json_numbers(j, s.cpu);
    j += ",\"mem\":";
    append_json_numbers(j, s.mem);
    j += "}";
  }
  j += "],\"processes\":[";
  for (std::size_t i = 0; i < d.process_series.size(); ++i) {
    const auto& s = d.process_series[i];
    j += i ? ",{\"label\":" : "{\"label\":";
    json_quote(j, s.pool + "/" + s.process);
    j += ",\"t\":";
    append_json_numbers(j, s.t);
    j += ",\"cpu\":";
    append_json_numbers(j, s.cpu);
    j += ",\"rss\":";
    append_json_numbers(j, s.mem);
    j += "}";
  }
  j += "],\"gpus\":[";
  for (std::size_t i = 0; i < d.gpu_series.size(); ++i) {
    const auto& s = d.gpu_series[i];
    j += i ? ",{\"label\":" : "{\"label\":";
    json_quote(j, s.node + " " + s.process);
    j += fmt::format(",\"mem_total\":{},\"t\":", num(s.mem_total));
    append_json_numbers(j, s.t);
    j += ",\"util\":";
    append_json_numbers(j, s.cpu);
    j += ",\"mem\":";
    append_json_numbers(j, s.mem);
    j += "}";
  }
}

std::string data_json(const ReportData& d, const JobFigures& f) {
  std::string j = "{\"kind\":\"job\",\"job\":{\"id\":";
  j += fmt::format("{},\"name\":", d.job_id);
  json_quote(j, d.name);
  j += ",\"state\":";
  json_quote(j, d.state);
  j += fmt::format(",\"worker_attempts\":{},\"attempts\":{},\"duration_s\":{}}}", d.worker_attempts,
                   d.attempts, num(f.duration_s));
  timeline_json(j, d);
  series_json(j, d, f);
  auto hist = [&](const char* key, const ReportData::Histogram& h) {
    j += fmt::format(",\"{}\":{{\"lo\":{},\"width\":{},\"n\":{},\"counts\":[", key, num(h.lo),
                     num(h.width), h.n);
    for (std::size_t i = 0; i < h.counts.size(); ++i)
      j += fmt::format("{}{}", i ? "," : "", h.counts[i]);
    j += "]}";
  };
  hist("run_hist", d.run_hist);
  hist("overhead_hist", d.overhead_hist);
  j += ",\"failures\":{\"by_status\":[";
  for (std::size_t i = 0; i < d.by_status.size(); ++i) {
    j += i ? ",[" : "[";
    json_quote(j, d.by_status[i].first);
    j += fmt::format(",{}]", d.by_status[i].second);
  }
  j += fmt::format("],\"exhausted\":{}}}", d.exhausted_count);
  resources_json(j, d);
  j += "]}";
  return j;
}

}  // namespace

std::string_view chart_js() { return {reinterpret_cast<const char*>(kChartJs), kChartJsSize}; }

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void append_json_numbers(std::string& out, const std::vector<double>& v) {
  out += "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += ",";
    out += num(v[i]);
  }
  out += "]";
}

std::string html_page(std::string_view title, std::string_view body, std::string_view data_json) {
  // Inside a <script>, "</" could end the element early: JSON and JS strings may spell it "<\/".
  auto script_safe = [](std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      out += s[i];
      if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') out += '\\';
    }
    return out;
  };
  std::string o;
  o.reserve(chart_js().size() + body.size() + data_json.size() + 16384);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  o += html_escape(title);
  o += "</title>\n<style>";
  o += kStyle;
  o += "</style>\n<script>";
  o += kErrorHook;
  o += "</script>\n</head>\n<body>\n";
  o += body;
  o += "<script>\nwindow.fanoutReport = ";
  o += script_safe(data_json);
  o += ";\n</script>\n<script>\n";
  o += script_safe(chart_js());
  o += "\n</script>\n<script>";
  o += kScript;
  o += "</script>\n</body>\n</html>\n";
  return o;
}

std::string job_body_html(const ReportData& d, const JobFigures& f, bool with_title) {
  std::string b = header_html(d, f, with_title);
  b += "<h2>Timeline per worker</h2>\n";
  if (d.segments.empty()) {
    b += "<p class=\"note\">No attempt has reached a worker.</p>\n";
  } else {
    b += d.timeline_binned
             ? fmt::format(
                   "<p class=\"note\">{} attempts, drawn in bins of {:.4g} s: each bar is "
                   "the share of the bin the worker was busy; red when an attempt in it "
                   "failed.</p>\n",
                   d.worker_attempts, d.timeline_bin_s)
             : std::string(
                   "<p class=\"note\">One bar per attempt, coloured by status; the gaps "
                   "are the worker's idle time.</p>\n");
    canvas(b, "chart-timeline",
           90 + 20 * static_cast<int>(std::min<std::size_t>(d.workers.size(), 200)));
  }
  b += "<h2>Throughput and in flight</h2>\n";
  if (d.worker_attempts == 0) {
    b += "<p class=\"note\">No attempt yet.</p>\n";
  } else {
    b += fmt::format(
        "<p class=\"note\">Rates in bins of {:.4g} s (from the job's duration, and never "
        "shorter than the median attempt, so that a bin holds several completions); the thick "
        "line, on the right axis, is the items done so far.</p>\n",
        d.bin_s);
    canvas(b, "chart-throughput", 300);
    canvas(b, "chart-inflight", 260);
  }
  b += "<h2>Worker utilisation</h2>\n";
  if (f.pools.empty()) {
    b += "<p class=\"note\">No worker has run an attempt.</p>\n";
  } else {
    b += fmt::format(
        "<p class=\"note\">Worker time is workers × {:.4g} s, from the first "
        "attempt's start to the last one's end.</p>\n",
        f.span_s);
    canvas(b, "chart-utilisation", 260);
  }
  b += histograms_html(d);
  b += failures_html(d);
  b += "<h2>Resources</h2>\n";
  if (d.node_series.empty() && d.process_series.empty()) {
    b += "<p class=\"note\">No resource samples: run with --resource_monitor_interval N in "
         "program_arguments.</p>\n";
  } else {
    if (!d.node_series.empty()) {
      b += "<div class=\"grid\"><div>";
      canvas(b, "chart-node-cpu", 260);
      b += "</div><div>";
      canvas(b, "chart-node-mem", 260);
      b += "</div></div>\n";
    }
    if (!d.process_series.empty()) {
      b += "<div class=\"grid\"><div>";
      canvas(b, "chart-proc-cpu", 300);
      b += "</div><div>";
      canvas(b, "chart-proc-rss", 300);
      b += "</div></div>\n";
    }
    if (!d.gpu_series.empty()) {  // NVML's samples of the accelerators (docs/resources.md)
      b += "<div class=\"grid\"><div>";
      canvas(b, "chart-gpu-util", 260);
      b += "</div><div>";
      canvas(b, "chart-gpu-mem", 260);
      b += "</div></div>\n";
    }
  }
  b += fmt::format(
      "<p class=\"note\">Generated by fanout from the store at {}. How to read it: "
      "docs/tuning.md.</p>\n",
      time_text(d.snapshot));
  return b;
}

std::string job_data_json(const ReportData& d, const JobFigures& f) { return data_json(d, f); }

void chart_canvas(std::string& out, std::string_view id, int height) { canvas(out, id, height); }

std::string render_job_html(const ReportData& d) {
  const JobFigures f = job_figures(d);
  return html_page(fmt::format("fanout job {}: {}", d.job_id, d.name), job_body_html(d, f),
                   job_data_json(d, f));
}

Expected<void> write_job_html(const std::string& db_path, std::uint64_t job_id,
                              const std::string& out_file) {
  auto d = read_report_data(db_path, job_id);
  if (!d) return make_error(d.error().code, d.error().message);
  return write_file_atomic(out_file, render_job_html(*d));
}

}  // namespace fanout::report
