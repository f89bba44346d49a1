// The pages of `fanout dashboard` (client/commands/dashboard.*): the job list, a job's live page,
// compare and tune, each built from the same pieces as report.html (html_report.hpp,
// compare.hpp, tune.hpp) inside the dashboard's navigation. Pure: no I/O. What each page shows:
// docs/observability.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/report/report_data.hpp"
#include "fanout/report/tune.hpp"
#include "fanout/store/reader.hpp"

namespace fanout::report {

// The job list: `jobs` (newest first) as a table with links, and the filter form showing
// `state` and `name` (the filters the rows were chosen by).
std::string dashboard_jobs_page(const std::vector<store::JobSummary>& jobs, std::string_view state,
                                std::string_view name);

// The job list as JSON, for /api/jobs: an array of objects with the JobSummary fields.
std::string dashboard_jobs_json(const std::vector<store::JobSummary>& jobs);

// A job's page: report.html's body and figures, plus a live panel the page keeps up to date
// by polling /api/jobs/ID/status (counts, progress, ETA, rates, pools, last errors) and
// /api/jobs/ID/figures (the charts), without reloading.
std::string dashboard_job_page(const ReportData& d);

// The body and figures of a job's page as one JSON object {"html": ..., "data": ...}, for
// /api/jobs/ID/figures: the page puts "html" in place and redraws with "data".
std::string dashboard_figures_json(const ReportData& d);

// The compare page: a form to pick jobs among `choices`, then the comparison of `jobs` (none
// picked: the form only).
std::string dashboard_compare_page(const std::vector<store::JobSummary>& choices,
                                   const std::vector<ReportData>& jobs);

// The tune page of job `d`: each recommendation with the chart of the figure it rests on.
std::string dashboard_tune_page(const ReportData& d, const std::vector<Recommendation>& recs);

// A page that only says `message` (an unknown job, a store error), with the navigation.
std::string dashboard_message_page(std::string_view title, std::string_view message);

}  // namespace fanout::report
