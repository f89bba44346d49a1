// Job spec checks. See job_checks.hpp.
#include "interchange/job_checks.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <string>

namespace fanout::ix {

Expected<void> check_job_spec(const proto::JobSpec& spec) {
  namespace fs = std::filesystem;
  auto bad = [](const std::string& field, const std::string& what) {
    return make_error(ErrorCode::InvalidArgument, "SubmitJob: " + field + ": " + what);
  };
  if (spec.name.empty()) return bad("name", "must not be empty");
  if (spec.runtime != "python" && spec.runtime != "command" && spec.runtime != "native") {
    return bad("runtime", "expected python, command or native (got '" + spec.runtime + "')");
  }
  if (spec.max_tries == 0) return bad("max_tries", "must be >= 1");
  // fs::path only parses here: nothing touches the file system.
  if (!fs::path(spec.code_dir).is_absolute()) {
    return bad("code_dir", "expected an existing absolute folder (got '" + spec.code_dir + "')");
  }
  if (!spec.log_dir.empty() && !fs::path(spec.log_dir).is_absolute()) {
    return bad("log_dir", "expected an absolute path (got '" + spec.log_dir + "')");
  }
  if (!spec.output_path.empty()) {
    const fs::path out(spec.output_path);
    if (!out.is_absolute() || !out.has_filename()) {
      return bad("output_path", "expected an absolute file path (got '" + spec.output_path + "')");
    }
  }
  return {};
}

Expected<void> check_output_free(const proto::JobSpec& spec, const JobLedger::Jobs& jobs) {
  if (spec.output_path.empty()) return {};
  const auto normal = [](const std::string& p) {
    return std::filesystem::path(p).lexically_normal().string();
  };
  const std::string mine = normal(spec.output_path);
  for (const auto& [id, job] : jobs) {
    if (job.spec.output_path.empty() || normal(job.spec.output_path) != mine) continue;
    return make_error(ErrorCode::InvalidArgument,
                      fmt::format("SubmitJob: output_path: {} is the append_row output of running "
                                  "job {} ({}); two jobs must not append to one file: wait for "
                                  "it to end, or choose another output",
                                  spec.output_path, id, job.spec.name));
  }
  return {};
}

Expected<void> check_output_fresh(const proto::JobSpec& spec) {
  if (spec.output_path.empty()) return {};
  std::error_code ec;
  const auto size = std::filesystem::file_size(spec.output_path, ec);
  if (ec || size == 0) return {};  // absent or empty: nothing of an earlier job is lost
  return make_error(
      ErrorCode::InvalidArgument,
      fmt::format("SubmitJob: output_path: {} holds {} bytes of an earlier job's rows; a new job "
                  "writes a fresh file. Move it away, or run with --overwrite to replace it "
                  "(fanout resume JOB continues an unfinished job's own file)",
                  spec.output_path, size));
}

}  // namespace fanout::ix
