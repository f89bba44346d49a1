// parallel_run_step.settings.json. JSON is read with yaml-cpp (JSON is YAML), which lives only in
// config/*.cpp. See row_settings.hpp.
#include "fanout/config/row_settings.hpp"

#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "fanout/util/fs.hpp"

namespace fanout::config {

Expected<RowSettings> load_row_settings(const std::string& path) {
  RowSettings s;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return s;
  auto text = read_file(path);
  if (!text) return Unexpected{text.error()};
  auto where = [&](const YAML::Node& n) {
    return path + (n.Mark().line >= 0 ? ":" + std::to_string(n.Mark().line + 1) : "") + ": ";
  };
  try {
    YAML::Node root = YAML::Load(*text);
    if (!root.IsMap()) {
      return make_error(ErrorCode::InvalidArgument, path + ": expected a JSON object");
    }
    if (YAML::Node n = root["append_row_separator"]; n.IsDefined()) {
      if (!n.IsScalar() || n.Scalar().empty()) {
        return make_error(ErrorCode::InvalidArgument,
                          where(n) + "append_row_separator: expected a non-empty string");
      }
      s.separator = n.Scalar();
    }
    if (YAML::Node n = root["append_row_header"]; n.IsDefined()) {
      const std::string v = n.IsScalar() ? n.Scalar() : "";
      if (v != "true" && v != "false") {
        return make_error(
            ErrorCode::InvalidArgument,
            where(n) + "append_row_header: expected true or false (got \"" + v + "\")");
      }
      s.header = v == "true";
    }
  } catch (const YAML::Exception& e) {
    std::string w = path;
    if (e.mark.line >= 0) w += ":" + std::to_string(e.mark.line + 1);
    return make_error(ErrorCode::InvalidArgument, w + ": not valid JSON: " + e.msg);
  }
  return s;
}

}  // namespace fanout::config
