// report.html: one self-contained page per job (Chart.js inlined, no network, no server) showing
// the job's header, a timeline per worker, throughput, in-flight and queued mini-batches,
// utilisation, run() and overhead histograms, failures and resource plots. The figures come from
// read_report_data(); what each chart shows: docs/tuning.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "fanout/report/job_figures.hpp"
#include "fanout/report/report_data.hpp"
#include "fanout/util/expected.hpp"

namespace fanout::report {

// Chart.js 3.9 (Debian's libjs-chart.js), embedded into the binary at build time.
std::string_view chart_js();

// `s` with & < > " ' escaped for HTML text and attribute values.
std::string html_escape(std::string_view s);

// A complete page: `body` (HTML), the figures as `window.fanoutReport = <data_json>`, Chart.js
// and the drawing script. Every chart is a <canvas class="fanout-chart" data-points="N"> once
// drawn; <html data-rendered="N" data-errors="E"> counts the charts drawn and the script
// errors, so a headless browser can check the page (tests/integration/report_html_check.py).
std::string html_page(std::string_view title, std::string_view body, std::string_view data_json);

// The report.html of one job. Pure: no I/O.
std::string render_job_html(const ReportData& d);

// The two halves of render_job_html(), for pages that show the job inside their own (the
// dashboard): the body's HTML (header, charts' canvases, failures), and the figures' JSON the
// drawing script reads (window.fanoutReport; window.fanoutDraw(data) redraws with new ones).
// `with_title` false leaves out the <h1> naming the job (a page that names it already).
std::string job_body_html(const ReportData& d, const JobFigures& f, bool with_title = true);
std::string job_data_json(const ReportData& d, const JobFigures& f);

// A chart's <div><canvas id="ID" class="fanout-chart"></div> of `height` px, which the drawing
// script fills when the data for `id` is present.
void chart_canvas(std::string& out, std::string_view id, int height);

// Reads job `job_id` from the store at `db_path` and writes its report.html to `out_file`
// through a temporary file and a rename. Errors: as read_report_data(), and Io naming
// the file.
[[nodiscard]] Expected<void> write_job_html(const std::string& db_path, std::uint64_t job_id,
                                            const std::string& out_file);

// A JSON array of numbers, each with up to 7 significant digits.
void append_json_numbers(std::string& out, const std::vector<double>& v);

}  // namespace fanout::report
