// job_error.txt and user/error/. See job_error.hpp.
#include "fanout/report/job_error.hpp"

#include <fmt/format.h>

#include <string_view>

#include "fanout/report/job_report.hpp"

namespace fanout::report {

namespace {

// `text` with every line indented by four spaces, ending with a newline.
std::string indented(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    out += "    ";
    out += text.substr(0, nl);
    out += '\n';
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace

std::string format_job_error(std::uint64_t job_id, const store::ErrorSummary& s) {
  std::string out = fmt::format("job_id: {}\n", job_id);
  if (s.kinds.empty()) return out + "errors: none\n";
  std::uint64_t attempts = 0;
  for (const auto& k : s.kinds) attempts += k.attempts;
  out += fmt::format("errors: {} failed attempts of {} kinds\n", attempts, s.kinds.size());
  for (const auto& k : s.kinds) {
    out += fmt::format(
        "\n{}{}{}: {} attempts, {} mini-batches\n  first: mini-batch {} try {} on {} at {}\n",
        k.status, k.category.empty() ? "" : " ", k.category, k.attempts, k.minibatches,
        k.first_minibatch, k.first_try, k.first_process.empty() ? "-" : k.first_process,
        k.first_time.empty() ? "-" : k.first_time);
    out += indented(k.first_message);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> process_error_files(const store::ErrorSummary& s) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& p : s.processes) {
    std::string name = p.process;
    for (char& c : name) {
      if (c == '/') c = '.';
    }
    std::string text;
    for (const auto& e : p.errors) {
      text += fmt::format("{} mini-batch {} try {}: {}{}{}\n", e.time, e.minibatch, e.attempt,
                          e.status, e.category.empty() ? "" : ": ", e.category);
      text += indented(e.message);
    }
    if (p.total > p.errors.size()) {
      text +=
          fmt::format("... and {} more failed attempts (fanout status, or the attempts table)\n",
                      p.total - p.errors.size());
    }
    files.emplace_back(fmt::format("user/error/{}/{}.txt", node_folder(p.node), node_folder(name)),
                       text);
  }
  return files;
}

}  // namespace fanout::report
