// job_result.txt. See job_result.hpp.
#include "fanout/report/job_result.hpp"

#include <fmt/format.h>

#include <string_view>

#include "fanout/report/format.hpp"

namespace fanout::report {

std::string format_job_result(std::uint64_t job_id, const store::JobResultRow& job,
                              const std::vector<store::FailedAttemptRow>& errors) {
  std::string out = fmt::format(
      "job_id: {}\nname: {}\nstate: {}\nreason: {}\nspec: {}\nstarted: {}\nended: {}\n"
      "elapsed_seconds: {}\nmini_batches_total: {}\nmini_batches_succeeded: {}\n"
      "mini_batches_failed: {}\nitems_succeeded: {}\nitems_failed: {}\nattempts: {}\n"
      "failed_attempts: {}\noutput: {}\n",
      job_id, job.name, job.state, job.reason, job.spec_path, utc_text(job.started),
      job.ended > 0 ? utc_text(job.ended) : std::string("-"),
      job.ended > 0 ? fmt::format("{:.3f}", job.ended - job.started) : std::string("-"), job.total,
      job.succeeded, job.failed, job.items_succeeded, job.items_failed, job.attempts,
      job.attempts_failed,
      job.output_path.empty() ? std::string("(summary_only)") : job.output_path);

  // The first errors, in the order they happened: enough to see what went wrong without SQL.
  out += "first_errors:";
  for (const auto& e : errors) {
    std::string_view msg = e.message;
    msg = msg.substr(0, msg.find('\n'));
    if (msg.size() > 300) msg = msg.substr(0, 300);
    out += fmt::format("\n  mini-batch {} try {} on {}: {}: {}", e.minibatch, e.picked_count,
                       e.process.empty() ? std::string_view("-") : std::string_view(e.process),
                       e.status, msg);
  }
  out += errors.empty() ? " none\n" : "\n";
  return out;
}

}  // namespace fanout::report
