// fanout python. See python_cmd.hpp.
#include "client/commands/python_cmd.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "fanout/protocol/exit_codes.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

// The package folder of an installed tree at `prefix` when it holds fanout/: Debian's
// lib/python3/dist-packages (meson install, the .deb) or lib/pythonX.Y/site-packages (`pip
// install`, a venv).
std::string installed_package_dir(const fs::path& prefix) {
  std::error_code ec;
  const fs::path deb = prefix / "lib/python3/dist-packages";
  if (fs::exists(deb / "fanout/__init__.py", ec)) return deb.lexically_normal().string();
  for (auto it = fs::directory_iterator(prefix / "lib", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (it->path().filename().string().rfind("python3.", 0) != 0) continue;
    const fs::path site = it->path() / "site-packages";
    if (fs::exists(site / "fanout/__init__.py", ec)) return site.lexically_normal().string();
  }
  return {};
}

}  // namespace

std::string build_tree_source_dir() {
  const std::string self = self_dir();
  if (self.empty()) return {};
  // The programs sit one level below the build root (build/client/fanout); the tools too.
  for (const fs::path& root : {fs::path(self), fs::path(self) / ".."}) {
    const auto text = read_file((root / "meson-info/meson-info.json").string());
    if (!text) continue;
    const auto info = nlohmann::json::parse(*text, nullptr, false);
    if (info.is_discarded() || !info.contains("directories")) continue;
    const auto& dirs = info["directories"];
    if (!dirs.contains("source") || !dirs["source"].is_string()) continue;
    const std::string source = dirs["source"].get<std::string>();
    std::error_code ec;
    if (fs::is_directory(source, ec)) return source;
  }
  return {};
}

PythonDirs find_python_dirs() {
  PythonDirs dirs;
  const std::string self = self_dir();
  std::error_code ec;
  if (!self.empty()) {
    const fs::path prefix = (fs::path(self) / "..").lexically_normal();
    dirs.package = installed_package_dir(prefix);
    if (!dirs.package.empty()) {
      // PREFIX/share/fanout (meson install), or PREFIX/fanout where meson-python's wheels put
      // meson's datadir (`pip install`).
      dirs.sdk = (prefix / "share/fanout/python-sdk").string();
      if (!fs::exists(dirs.sdk, ec) && fs::exists(prefix / "fanout/python-sdk", ec)) {
        dirs.sdk = (prefix / "fanout/python-sdk").string();
      }
      // A venv (pyvenv.cfg at its top): its own interpreter has the package and its packages.
      if (fs::exists(prefix / "pyvenv.cfg", ec) && fs::exists(fs::path(self) / "python3", ec)) {
        dirs.python = (fs::path(self) / "python3").string();
      }
      return dirs;
    }
  }
  // A build tree: the source tree's python/.
  const std::string source = build_tree_source_dir();
  if (!source.empty()) {
    dirs.package = (fs::path(source) / "python").string();
    dirs.sdk = (fs::path(source) / "python/sdk").string();
  }
  return dirs;
}

int exec_python(const std::vector<std::string>& args) {
  const PythonDirs dirs = find_python_dirs();
  const char* env_python = std::getenv("FANOUT_PYTHON");
  const bool chosen = env_python != nullptr && *env_python != '\0';
  const bool own_env = !chosen && !dirs.python.empty();
  const std::string python = chosen ? env_python : (own_env ? dirs.python : "python3");
  std::string path;
  // The venv's own interpreter already imports the package from its site-packages, which on
  // PYTHONPATH would go before the standard library.
  if (!own_env && !dirs.package.empty()) path = dirs.package;
  if (!dirs.sdk.empty()) path += (path.empty() ? "" : ":") + dirs.sdk;
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') {
    path += (path.empty() ? "" : ":") + std::string(old);
  }
  if (!path.empty()) ::setenv("PYTHONPATH", path.c_str(), 1);
  // The package runs this very program (not another `fanout` on PATH).
  std::error_code ec;
  const fs::path me = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) ::setenv("FANOUT_BIN", me.c_str(), 1);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(python.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(python.c_str(), argv.data());
  std::fprintf(stderr,
               "error: python: cannot run the interpreter '%s' ($FANOUT_PYTHON, else the venv's "
               "python3 beside this program, else python3 on PATH): %s\n",
               python.c_str(), std::strerror(errno));
  return proto::kExitUsage;
}

}  // namespace fanout::client
