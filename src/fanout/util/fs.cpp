// File-system helpers.
#include "fanout/util/fs.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace fanout {

namespace fs = std::filesystem;

Expected<std::string> read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error(ErrorCode::NotFound, path + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::Io, path + ": cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Expected<void> make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::Io, dir + ": cannot create folder: " + ec.message());
  return {};
}

Expected<void> make_parent_dirs(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return {};
  return make_dirs(parent.string());
}

std::string resolve_path(const std::string& base, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base) / p;
  if (p.is_relative()) {
    std::error_code ec;
    p = fs::absolute(p, ec);
  }
  std::string s = p.lexically_normal().string();
  if (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string self_dir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return p.parent_path().string();
}

}  // namespace fanout
