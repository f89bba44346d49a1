// The pages of `fanout dashboard`. See dashboard_pages.hpp and docs/observability.md.
#include "fanout/report/dashboard_pages.hpp"

#include <fmt/format.h>

#include <array>
#include <set>

#include "fanout/report/compare.hpp"
#include "fanout/report/html_report.hpp"
#include "fanout/report/job_figures.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/json.hpp"

namespace fanout::report {

namespace {

constexpr std::array<std::string_view, 5> kStates = {"running", "succeeded", "partial", "failed",
                                                     "cancelled"};

constexpr std::string_view kNav =
    "<nav class=\"note\"><a href=\"/\">jobs</a> · <a href=\"/compare\">compare</a> · "
    "fanout dashboard (read-only)</nav>\n";

// Keeps the job page live: polls the job's status every second and its figures when they
// changed (at most every 3 s), until the job has ended. Texts go in with textContent only.
constexpr std::string_view kLiveScript = R"js(
(function () {
  'use strict';
  const id = window.fanoutJobId;
  const $ = (x) => document.getElementById(x);
  let lastDone = -1, figuresAt = 0, reads = 0;
  const secs = (s) => s < 90 ? s.toFixed(0) + ' s' : s < 5400 ? (s / 60).toFixed(1) + ' min' :
    (s / 3600).toFixed(1) + ' h';
  function get(what) {
    return fetch('/api/jobs/' + id + '/' + what, {credentials: 'same-origin', cache: 'no-store'})
      .then((r) => { if (!r.ok) throw new Error(what + ': HTTP ' + r.status); return r.json(); });
  }
  function cells(tr, values) {
    values.forEach((v) => { const td = document.createElement('td'); td.textContent = String(v);
      tr.appendChild(td); });
  }
  function show(s) {
    const done = s.succeeded + s.failed;
    $('live-completed').textContent = String(done);
    $('live-total').textContent = s.total_known ? String(s.total) : s.total + '+';
    $('live-progress').max = Math.max(s.total, 1);
    $('live-progress').value = done;
    $('live-state').textContent = s.state + (s.reason ? ': ' + s.reason : '');
    $('live-state').className = 'state-' + s.state;
    $('live-counts').textContent = s.succeeded + ' succeeded, ' + s.failed + ' failed, ' +
      s.running + ' running, ' + s.pending + ' pending; ' + s.items_succeeded + ' items (' +
      s.items_failed + ' failed); ' + s.attempts + ' attempts (' + s.attempts_failed + ' failed)';
    $('live-rate').textContent = s.items_per_s.toFixed(1) + ' items/s, ' +
      s.minibatches_per_s.toFixed(2) + ' mini-batches/s over ' + secs(s.elapsed_s);
    $('live-eta').textContent = s.ended !== null ? 'ended' : s.eta_s >= 0 ? secs(s.eta_s) : '-';
    const pools = $('live-pools');
    pools.replaceChildren();
    s.pools.forEach((p) => { const tr = document.createElement('tr');
      cells(tr, [p.name, p.node, p.state, p.workers, p.attempts,
        p.heartbeat_age_s === null ? '-' : secs(p.heartbeat_age_s) + ' ago']);
      pools.appendChild(tr); });
    const errors = $('live-errors');
    errors.replaceChildren();
    s.last_errors.forEach((e) => { const tr = document.createElement('tr');
      cells(tr, [e.time, e.minibatch, e.attempt, e.status, e.process, e.message]);
      errors.appendChild(tr); });
    reads += 1;
    document.documentElement.setAttribute('data-live-reads', String(reads));
    document.documentElement.setAttribute('data-live-completed', String(done));
    return done;
  }
  function figures() {
    figuresAt = Date.now();
    return get('figures').then((f) => {
      $('fanout-body').innerHTML = f.html;
      window.fanoutDraw(f.data);
    });
  }
  function poll() {
    get('status').then((s) => {
      $('live-error').textContent = '';
      const done = show(s);
      const ended = s.ended !== null;
      const due = done !== lastDone && Date.now() - figuresAt > 3000;
      lastDone = done;
      const next = due || ended ? figures() : Promise.resolve();
      return next.then(() => { if (!ended) setTimeout(poll, 1000); });
    }).catch((e) => {
      $('live-error').textContent = 'cannot read the job: ' + e.message + ' (retrying)';
      setTimeout(poll, 3000);
    });
  }
  window.addEventListener('load', () => { figuresAt = Date.now(); poll(); });
})();
)js";

std::string time_text(double unix_s) { return unix_s > 0 ? iso_utc(unix_s) : std::string("-"); }

// A page: the navigation, `body`, and `data` for the drawing script (report.html's html_page).
std::string page(std::string_view title, std::string_view body, std::string_view data) {
  std::string b(kNav);
  b += body;
  return html_page(title, b, data);
}

std::string live_panel(const ReportData& d) {
  std::string o = fmt::format(
      "<h1>fanout job {}: {}</h1>\n<p>state <b id=\"live-state\" class=\"state-{}\">{}</b> "
      "<span id=\"live-error\" class=\"state-failed\"></span></p>\n",
      d.job_id, html_escape(d.name), html_escape(d.state), html_escape(d.state));
  o += fmt::format(
      "<p><progress id=\"live-progress\" max=\"{}\" value=\"{}\" style=\"width:60%\"></progress> "
      "<b id=\"live-completed\">{}</b> of <span id=\"live-total\">{}</span> mini-batches done; "
      "ETA <b id=\"live-eta\">-</b></p>\n",
      std::max<std::uint64_t>(d.total, 1), d.succeeded + d.failed, d.succeeded + d.failed, d.total);
  o += "<p id=\"live-counts\" class=\"note\"></p><p id=\"live-rate\" class=\"note\"></p>\n";
  o += "<div class=\"grid\"><div><h2>Pools</h2><table><thead><tr><th>pool</th><th>node</th>"
       "<th>state</th><th>workers</th><th>attempts</th><th>last heartbeat</th></tr></thead>"
       "<tbody id=\"live-pools\"></tbody></table>\n";
  o += "<p class=\"note\">Last heartbeat: the store's pools.last_seen, which the interchange "
       "keeps every few seconds while the pool is connected (then the time it was lost or "
       "left).</p>\n";
  o += "</div><div><h2>Last errors</h2><table><thead><tr><th>time</th>"
       "<th>mini-batch</th><th>try</th><th>status</th><th>process</th><th>message</th></tr>"
       "</thead><tbody id=\"live-errors\"></tbody></table></div></div>\n";
  o += fmt::format("<p><a href=\"/jobs/{}/tune\">tune this job</a></p>\n", d.job_id);
  return o;
}

void job_row(std::string& o, const store::JobSummary& j) {
  o += fmt::format(
      "<tr><td><input type=\"checkbox\" name=\"jobs\" value=\"{0}\"></td>"
      "<td class=\"n\"><a href=\"/jobs/{0}\">{0}</a></td><td><a href=\"/jobs/{0}\">{1}</a></td>"
      "<td class=\"state-{2}\">{2}</td><td>{3}</td><td>{4}</td>"
      "<td class=\"n\">{5} / {6}</td><td class=\"n\">{7}</td><td class=\"n\">{8}</td>"
      "<td class=\"n\">{9}</td><td><a href=\"/jobs/{0}/tune\">tune</a></td></tr>\n",
      j.id, html_escape(j.name), html_escape(j.state), time_text(j.created), time_text(j.ended),
      j.succeeded + j.failed, j.total, j.items_succeeded, j.failed, j.attempts_failed);
}

// An explore experiment's runs as one row that opens (a <details>) to the list of its runs.
void experiment_row(std::string& o, const std::string& exp,
                    const std::vector<store::JobSummary>& jobs) {
  std::string runs;
  std::size_t n = 0;
  std::uint64_t items = 0;
  for (const auto& j : jobs) {
    if (j.experiment != exp) continue;
    ++n;
    items += j.items_succeeded;
    runs += fmt::format(" <a href=\"/jobs/{0}\">{0}</a>&nbsp;<span class=\"state-{1}\">{1}</span>",
                        j.id, html_escape(j.state));
  }
  o += fmt::format(
      "<tr class=\"experiment\"><td></td><td>exp</td><td colspan=\"9\"><details><summary>"
      "{} (fanout explore): {} runs, {} items</summary>{}</details></td></tr>\n",
      html_escape(exp), n, items, runs);
}

}  // namespace

std::string dashboard_jobs_page(const std::vector<store::JobSummary>& jobs, std::string_view state,
                                std::string_view name) {
  std::string b =
      "<h1>fanout jobs</h1>\n<form method=\"get\" action=\"/\">state <select "
      "name=\"state\"><option value=\"\">any</option>";
  for (auto s : kStates) {
    b += fmt::format("<option{}>{}</option>", s == state ? " selected" : "", s);
  }
  b += fmt::format(
      "</select> name contains <input name=\"name\" value=\"{}\"> <button>filter</button>"
      "</form>\n",
      html_escape(name));
  b += "<form method=\"get\" action=\"/compare\"><table id=\"jobs\"><tr><th></th><th>job</th>"
       "<th>name</th><th>state</th><th>created</th><th>ended</th><th>mini-batches done</th>"
       "<th>items</th><th>failed</th><th>failed attempts</th><th></th></tr>\n";
  // An experiment's runs are one row, where its newest run is.
  std::set<std::string> shown;
  for (const auto& j : jobs) {
    if (j.experiment.empty()) {
      job_row(b, j);
    } else if (shown.insert(j.experiment).second) {
      experiment_row(b, j.experiment, jobs);
    }
  }
  b += "</table>\n";
  if (jobs.empty()) b += "<p class=\"note\">No job matches.</p>\n";
  b += "<button>compare the checked jobs</button></form>\n";
  return page("fanout jobs", b, "{\"kind\":\"list\"}");
}

std::string dashboard_jobs_json(const std::vector<store::JobSummary>& jobs) {
  std::string j = "[";
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& s = jobs[i];
    j += fmt::format("{}{{\"id\":{},\"name\":", i ? "," : "", s.id);
    json_quote(j, s.name);
    j += ",\"state\":";
    json_quote(j, s.state);
    j += fmt::format(
        ",\"created\":{:.3f},\"ended\":{:.3f},\"total\":{},\"succeeded\":{},\"failed\":{},"
        "\"items_succeeded\":{},\"items_failed\":{},\"attempts\":{},\"attempts_failed\":{},"
        "\"experiment\":",
        s.created, s.ended, s.total, s.succeeded, s.failed, s.items_succeeded, s.items_failed,
        s.attempts, s.attempts_failed);
    if (s.experiment.empty()) {
      j += "null}";
    } else {
      json_quote(j, s.experiment);
      j += "}";
    }
  }
  return j + "]";
}

std::string dashboard_job_page(const ReportData& d) {
  const JobFigures f = job_figures(d);
  std::string b = live_panel(d);
  // The live panel names the job: the body under it, redrawn on each refresh, does not again.
  b += "<div id=\"fanout-body\">\n" + job_body_html(d, f, false) + "</div>\n";
  b += fmt::format("<script>window.fanoutJobId = {};</script>\n<script>", d.job_id);
  b += kLiveScript;
  b += "</script>\n";
  return page(fmt::format("fanout job {}: {}", d.job_id, d.name), b, job_data_json(d, f));
}

std::string dashboard_figures_json(const ReportData& d) {
  const JobFigures f = job_figures(d);
  std::string j = "{\"html\":";
  json_quote(j, job_body_html(d, f, false));
  j += ",\"data\":";
  j += job_data_json(d, f);
  return j + "}";
}

std::string dashboard_compare_page(const std::vector<store::JobSummary>& choices,
                                   const std::vector<ReportData>& jobs) {
  std::string b = "<form method=\"get\" action=\"/compare\"><p>Pick the jobs to compare:</p>\n";
  for (const auto& c : choices) {
    bool picked = false;
    for (const auto& j : jobs) picked = picked || j.job_id == c.id;
    b += fmt::format(
        "<label><input type=\"checkbox\" name=\"jobs\" value=\"{}\"{}> job {} {} "
        "({})</label><br>\n",
        c.id, picked ? " checked" : "", c.id, html_escape(c.name), html_escape(c.state));
  }
  b += "<button>compare</button></form>\n";
  if (jobs.empty()) return page("fanout compare", b, "{\"kind\":\"compare\",\"jobs\":[]}");
  b += compare_body_html(jobs);
  std::string title = "fanout compare";
  for (const auto& d : jobs) title += fmt::format(" {}", d.job_id);
  return page(title, b, compare_data_json(jobs));
}

std::string dashboard_tune_page(const ReportData& d, const std::vector<Recommendation>& recs) {
  // Each setting's advice rests on one figure of the job page; that chart is drawn beside it.
  auto chart_of = [](const std::string& setting) -> std::pair<std::string_view, int> {
    if (setting == "mini_batch_size") return {"chart-overhead-hist", 260};
    if (setting == "workers") return {"chart-utilisation", 260};
    if (setting == "prefetch") return {"chart-inflight", 260};
    if (setting == "poll_ms") return {"chart-run-hist", 260};
    return {"chart-throughput", 300};
  };
  std::string b = fmt::format(
      "<h1>fanout tune: job <a href=\"/jobs/{0}\">{0}</a> {1}</h1>\n<p>state <b "
      "class=\"state-{2}\">{2}</b>. The rules and their thresholds: docs/tuning.md; "
      "<code>fanout tune {0} --write FILE</code> writes the suggested settings.</p>\n",
      d.job_id, html_escape(d.name), html_escape(d.state));
  for (const auto& r : recs) {
    b += fmt::format("<h2>{}: {}</h2>\n<table>", html_escape(r.setting),
                     html_escape(to_string(r.verdict)));
    b += fmt::format("<tr><th>now</th><td>{}</td></tr>", html_escape(r.current));
    if (r.verdict == Verdict::Change) {
      b += fmt::format("<tr><th>suggested</th><td>{}</td></tr>", html_escape(r.suggested));
    }
    if (!r.figure.empty()) {
      b += fmt::format("<tr><th>measured</th><td>{}</td></tr>", html_escape(r.figure));
    }
    b += fmt::format("<tr><th>{}</th><td>{}</td></tr></table>\n",
                     r.verdict == Verdict::NoData ? "why" : "effect", html_escape(r.effect));
    // Without a successful attempt there is no figure to draw (and the advice says so).
    if (d.run_hist.n > 0) {
      const auto [id, height] = chart_of(r.setting);
      chart_canvas(b, id, height);
    }
  }
  const JobFigures f = job_figures(d);
  return page(fmt::format("fanout tune {}", d.job_id), b, job_data_json(d, f));
}

std::string dashboard_message_page(std::string_view title, std::string_view message) {
  return page(title,
              fmt::format("<h1>{}</h1>\n<p>{}</p>\n", html_escape(title), html_escape(message)),
              "{\"kind\":\"list\"}");
}

}  // namespace fanout::report
