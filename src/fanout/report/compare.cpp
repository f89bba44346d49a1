// Run comparison. See compare.hpp.
#include "fanout/report/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "fanout/report/html_report.hpp"
#include "fanout/report/job_figures.hpp"
#include "fanout/util/json.hpp"

namespace fanout::report {

namespace {

// A table as rows of cells; the first row is the header.
using Table = std::vector<std::vector<std::string>>;

Table settings_table(const std::vector<ReportData>& jobs) {
  std::set<std::string> keys;
  for (const auto& j : jobs) {
    for (const auto& kv : j.settings) keys.insert(kv.first);
  }
  Table t;
  t.push_back({"setting"});
  for (const auto& j : jobs) t[0].push_back(fmt::format("job {}", j.job_id));
  for (const auto& k : keys) {
    std::vector<std::string> row{k};
    for (const auto& j : jobs) row.push_back(j.setting(k, "-"));
    const bool differ =
        std::any_of(row.begin() + 2, row.end(), [&](const std::string& v) { return v != row[1]; });
    if (differ || jobs.size() == 1) t.push_back(std::move(row));
  }
  return t;
}

Table figures_table(const std::vector<ReportData>& jobs) {
  std::vector<JobFigures> f;
  for (const auto& j : jobs) f.push_back(job_figures(j));
  Table t;
  t.push_back({"measured"});
  for (const auto& j : jobs) t[0].push_back(fmt::format("job {}", j.job_id));
  auto add = [&](std::string name, auto cell) {
    std::vector<std::string> row{std::move(name)};
    for (std::size_t i = 0; i < jobs.size(); ++i) row.push_back(cell(jobs[i], f[i]));
    t.push_back(std::move(row));
  };
  using D = const ReportData&;
  using F = const JobFigures&;
  add("name", [](D d, F) { return d.name; });
  add("state", [](D d, F) { return d.state; });
  add("mini-batches done", [](D d, F) { return std::to_string(d.succeeded + d.failed); });
  add("items done", [](D d, F) { return std::to_string(d.items_succeeded + d.items_failed); });
  add("failed attempts", [](D d, F) { return std::to_string(d.attempts_failed); });
  add("duration s", [](D, F x) { return fmt::format("{:.3f}", x.duration_s); });
  add("items/s", [](D, F x) { return fmt::format("{:.4g}", x.items_per_s); });
  add("mini-batches/s", [](D, F x) { return fmt::format("{:.4g}", x.minibatches_per_s); });
  add("workers", [](D, F x) { return std::to_string(x.workers); });
  add("% worker time in run()", [](D, F x) { return fmt::format("{:.1f}", 100 * x.run_share); });
  add("mean run() ms", [](D, F x) { return fmt::format("{:.4g}", 1000 * x.mean_run_s); });
  add("overhead/mini-batch ms",
      [](D, F x) { return fmt::format("{:.4g}", 1000 * x.mean_overhead_s); });
  add("overhead % of run()", [](D, F x) { return fmt::format("{:.1f}", 100 * x.overhead_share); });
  add("idle gap between tasks ms",
      [](D, F x) { return fmt::format("{:.4g}", 1000 * x.mean_gap_s); });
  add("idle tail % of worker time",
      [](D, F x) { return fmt::format("{:.1f}", 100 * x.tail_share); });
  return t;
}

std::string text_table(const Table& t) {
  std::vector<std::size_t> width;
  for (const auto& row : t) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : t) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += c == 0 ? fmt::format("{:<{}}", row[c], width[c])
                     : fmt::format("  {:>{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string html_table(const Table& t) {
  std::string o = "<table>\n";
  for (std::size_t r = 0; r < t.size(); ++r) {
    o += "<tr>";
    for (const auto& cell : t[r]) {
      const char* tag = r == 0 ? "th" : "td";
      o += fmt::format("<{0}>{1}</{0}>", tag, html_escape(cell));
    }
    o += "</tr>\n";
  }
  return o + "</table>\n";
}

// Which run was faster, by items done per second of its duration: "job 4 (b) was the faster:
// 48.2 items/s, 1.38x job 3 (a)" (the next fastest); empty when fewer than two runs did items.
std::string faster_run(const std::vector<ReportData>& jobs) {
  std::vector<std::pair<double, const ReportData*>> rates;
  for (const auto& d : jobs) {
    const double r = job_figures(d).items_per_s;
    if (r > 0) rates.emplace_back(r, &d);
  }
  if (rates.size() < 2) return {};
  std::stable_sort(rates.begin(), rates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const auto& [r0, a] = rates[0];
  const auto& [r1, b] = rates[1];
  return fmt::format(
      "job {} ({}) was the {}: {:.4g} items/s, {:.3g}x job {} ({}) at {:.4g} items/s", a->job_id,
      a->name, rates.size() > 2 ? "fastest" : "faster", r0, r0 / r1, b->job_id, b->name, r1);
}

}  // namespace

std::string compare_text(const std::vector<ReportData>& jobs) {
  const Table s = settings_table(jobs);
  std::string out = s.size() > 1 ? text_table(s) : std::string("no setting differs\n");
  out += "\n" + text_table(figures_table(jobs));
  if (const std::string f = faster_run(jobs); !f.empty()) out += "\n" + f + "\n";
  return out;
}

std::string compare_body_html(const std::vector<ReportData>& jobs) {
  std::string b = "<h1>fanout compare:";
  for (const auto& j : jobs) b += fmt::format(" job {}", j.job_id);
  b += "</h1>\n<h2>Settings that differ</h2>\n";
  const Table s = settings_table(jobs);
  b += s.size() > 1 ? html_table(s) : std::string("<p>No setting differs.</p>\n");
  b += "<h2>Measured</h2>\n" + html_table(figures_table(jobs));
  b += "<h2>Progress and rate over time</h2>\n";
  const std::string faster = faster_run(jobs);
  if (!faster.empty()) b += "<p id=\"faster\"><b>" + html_escape(faster) + "</b></p>\n";
  b += "<p class=\"note\">Each run from its own start: the thick line is what it has done so "
       "far (left axis), the dashed one its rate (right axis).</p>\n";
  b += "<div class=\"chart\" style=\"height:320px\"><canvas id=\"chart-compare-items\" "
       "class=\"fanout-chart\"></canvas></div>\n"
       "<div class=\"chart\" style=\"height:320px\"><canvas id=\"chart-compare-minibatches\" "
       "class=\"fanout-chart\"></canvas></div>\n";
  return b;
}

std::string compare_data_json(const std::vector<ReportData>& jobs) {
  std::string j = "{\"kind\":\"compare\",\"jobs\":[";
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& d = jobs[i];
    std::vector<double> t, items, mb, items_done, mb_done;
    const double w = d.bin_s > 0 ? d.bin_s : 1;
    if (d.worker_attempts > 0) {
      for (const auto& bin : d.bins) {
        t.push_back(bin.t);
        items.push_back(static_cast<double>(bin.items) / w);
        mb.push_back(static_cast<double>(bin.succeeded) / w);
        items_done.push_back((items_done.empty() ? 0 : items_done.back()) +
                             static_cast<double>(bin.items));
        mb_done.push_back((mb_done.empty() ? 0 : mb_done.back()) +
                          static_cast<double>(bin.succeeded));
      }
    }
    j += fmt::format("{}{{\"id\":{},\"name\":", i ? "," : "", d.job_id);
    json_quote(j, d.name);
    j += fmt::format(",\"bin_s\":{},\"duration_s\":{},\"t\":", w, job_figures(d).duration_s);
    append_json_numbers(j, t);
    j += ",\"items_per_s\":";
    append_json_numbers(j, items);
    j += ",\"minibatches_per_s\":";
    append_json_numbers(j, mb);
    j += ",\"items_done\":";
    append_json_numbers(j, items_done);
    j += ",\"minibatches_done\":";
    append_json_numbers(j, mb_done);
    j += "}";
  }
  j += "],\"faster\":";
  json_quote(j, faster_run(jobs));
  j += "}";
  return j;
}

std::string compare_html(const std::vector<ReportData>& jobs) {
  std::string title = "fanout compare";
  for (const auto& d : jobs) title += fmt::format(" {}", d.job_id);
  return html_page(title, compare_body_html(jobs), compare_data_json(jobs));
}

}  // namespace fanout::report
