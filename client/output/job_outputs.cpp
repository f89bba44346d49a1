// A job's outputs on the client's side. See job_outputs.hpp.
#include "client/output/job_outputs.hpp"

#include <filesystem>
#include <system_error>

#include "fanout/config/mltable.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/atomic_file.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

std::string output_folder(const config::JobConfig& cfg) {
  if (!cfg.append_row_to.empty()) return fs::path(cfg.append_row_to).parent_path().string();
  for (const auto& o : cfg.outputs) {
    if (o.is_folder() && !o.path.empty()) return o.path;
  }
  return {};
}

std::string summary_output(const std::string& output_path, const store::JobSettings& recorded) {
  return output_path.empty() ? recorded.output_dir : output_path;
}

Expected<void> make_output_folders(const config::JobConfig& cfg) {
  for (const auto& o : cfg.outputs) {
    if (o.path.empty()) continue;
    const std::string dir = o.is_folder() ? o.path : fs::path(o.path).parent_path().string();
    if (auto r = make_dirs(dir); !r) {
      return make_error(ErrorCode::Io,
                        cfg.spec_path + ": outputs." + o.name + ": " + r.error().message);
    }
  }
  if (!cfg.append_row_to.empty()) return make_parent_dirs(cfg.append_row_to);
  return {};
}

Expected<void> claim_row_file(const config::JobConfig& cfg, const std::string& db, bool overwrite) {
  if (cfg.append_row_to.empty()) return {};
  std::error_code ec;
  // An unfinished job's file is never removed, --overwrite or not: it is that job's to finish.
  if (fs::exists(db, ec)) {
    try {
      store::StoreReader reader(db);
      for (const auto& j : reader.history(0, "running")) {
        if (fs::path(j.output_path).lexically_normal() !=
            fs::path(cfg.append_row_to).lexically_normal()) {
          continue;
        }
        return make_error(ErrorCode::InvalidArgument,
                          cfg.spec_path + ": append_row_to: " + cfg.append_row_to +
                              " is the output of unfinished job " + std::to_string(j.id) +
                              "; finish it with fanout resume " + std::to_string(j.id) +
                              " or stop it with fanout cancel " + std::to_string(j.id));
      }
    } catch (const Failure&) {
      // A store that cannot be read is reported when the job is submitted.
    }
  }
  const auto size = fs::file_size(cfg.append_row_to, ec);
  if (ec || size == 0) return {};  // absent or empty: nothing of an earlier job is lost
  if (!overwrite) {
    return make_error(ErrorCode::InvalidArgument,
                      cfg.spec_path + ": append_row_to: " + cfg.append_row_to + " holds " +
                          std::to_string(size) +
                          " bytes of an earlier job's rows; a new job writes a fresh file. Move "
                          "it away, or run with --overwrite to replace it (fanout resume JOB "
                          "continues an unfinished job's own file)");
  }
  if (!fs::remove(cfg.append_row_to, ec) || ec) {
    return make_error(ErrorCode::Io, cfg.spec_path + ": append_row_to: cannot remove " +
                                         cfg.append_row_to + ": " + ec.message());
  }
  return {};
}

Expected<void> write_output_mltables(const config::JobConfig& cfg) {
  for (const auto& o : cfg.outputs) {
    if (o.type != "mltable" || o.path.empty()) continue;
    const std::string text = config::output_mltable_text(
        o.path, cfg.append_row_to, cfg.fanout.row_separator, cfg.fanout.row_header);
    if (auto r = write_file_atomic(o.path + "/MLTable", text); !r) return r;
  }
  return {};
}

}  // namespace fanout::client
