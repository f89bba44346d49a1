// `fanout compare JOB JOB...`: the settings that differ between runs and their measured effect
// (rate, overhead per mini-batch, utilisation, duration), as a text table and as an HTML page
// with the throughput curves overlaid. See docs/tuning.md.
#pragma once

#include <string>
#include <vector>

#include "fanout/report/report_data.hpp"

namespace fanout::report {

// The text table: the settings that differ (every setting when only one job is given), then
// one row per figure with a column per job. Pure.
std::string compare_text(const std::vector<ReportData>& jobs);

// The same tables as a self-contained page, with items/s and mini-batches/s of every job drawn
// over seconds since its start on one chart each. Pure.
std::string compare_html(const std::vector<ReportData>& jobs);

// The two halves of compare_html(), for pages that show the comparison inside their own (the
// dashboard): the body's HTML, and the figures' JSON the drawing script reads.
std::string compare_body_html(const std::vector<ReportData>& jobs);
std::string compare_data_json(const std::vector<ReportData>& jobs);

}  // namespace fanout::report
