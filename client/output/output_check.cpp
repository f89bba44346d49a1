// Output checks before a run starts. See output_check.hpp.
#include "client/output/output_check.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fanout::client {

namespace {

// The line of the job file that sets append_row_to (0 when not found): JobConfig keeps the
// resolved path only.
int append_row_to_line(const std::string& spec_path) {
  std::ifstream in(spec_path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const auto key = line.find_first_not_of(" \t");
    if (key != std::string::npos && line.compare(key, 14, "append_row_to:") == 0) return n;
  }
  return 0;
}

}  // namespace

Expected<void> check_output_writable(const config::JobConfig& cfg) {
  namespace fs = std::filesystem;
  if (cfg.append_row_to.empty()) return {};
  const fs::path out(cfg.append_row_to);
  auto bad = [&](const std::string& why) {
    const int line = append_row_to_line(cfg.spec_path);
    return make_error(ErrorCode::InvalidArgument,
                      cfg.spec_path + (line > 0 ? ":" + std::to_string(line) : std::string()) +
                          ": task.append_row_to: " + out.string() + ": " + why);
  };
  std::error_code ec;
  const auto st = fs::status(out, ec);
  if (fs::exists(st)) {
    if (fs::is_directory(st)) return bad("is a folder; expected a file");
    if (::access(out.c_str(), W_OK) != 0) return bad("cannot be written (permission denied)");
    return {};
  }
  // The nearest existing ancestor must be a folder we may create entries in.
  fs::path dir = out.parent_path();
  while (!dir.empty() && !fs::exists(fs::status(dir, ec))) dir = dir.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(fs::status(dir, ec))) {
    return bad("cannot be created: " + dir.string() + " is not a folder");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return bad("cannot be created: folder " + dir.string() + " is not writable");
  }
  return {};
}

}  // namespace fanout::client
