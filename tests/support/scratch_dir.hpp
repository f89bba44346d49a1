// ScratchDir: a fresh folder for one unit test, and slurp() to read a file back. Header-only, so
// unit tests need nothing linked beyond doctest_main (integration tests use harness.hpp's
// TempDir).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fanout::test {

// A folder made under the system temp folder ("fanout-<tag>-XXXXXX"), removed with everything in
// it when the object goes. Throws std::runtime_error when it cannot be made.
class ScratchDir final {
 public:
  explicit ScratchDir(const std::string& tag = "unit") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / ("fanout-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot make a scratch folder " + pattern);
    }
    root_ = std::filesystem::canonical(pattern);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // The folder, or `rel` inside it.
  [[nodiscard]] std::string path(const std::string& rel = "") const {
    return rel.empty() ? root_.string() : (root_ / rel).string();
  }
  [[nodiscard]] std::string file(const std::string& name) const { return path(name); }
  // Writes `text` to `rel`, making its folders.
  void write(const std::string& rel, const std::string& text) const {
    std::filesystem::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel, std::ios::binary) << text;
  }
  void mkdir(const std::string& rel) const { std::filesystem::create_directories(root_ / rel); }

 private:
  std::filesystem::path root_;
};

// The bytes of a file ("" when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace fanout::test
