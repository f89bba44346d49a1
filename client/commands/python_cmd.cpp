// fanout python. See python_cmd.hpp.
#include "client/commands/python_cmd.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "fanout/protocol/exit_codes.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

PythonDirs find_python_dirs() {
  const std::string self = self_dir();
  std::error_code ec;
  const fs::path installed = fs::path(self) / "../lib/python3/dist-packages";
  if (!self.empty() && fs::exists(installed / "fanout/__init__.py", ec)) {
    return {.package = installed.lexically_normal().string(),
            .sdk = (fs::path(self) / "../share/fanout/python-sdk").lexically_normal().string()};
  }
  // A build tree: the source tree's python/ (beside tools/, whose path the build compiled in).
  const fs::path source = (fs::path(FANOUT_TOOLS_DIR) / "../python").lexically_normal();
  return {.package = source.string(), .sdk = (source / "sdk").string()};
}

int exec_python(const std::vector<std::string>& args) {
  const PythonDirs dirs = find_python_dirs();
  std::string path = dirs.package + ":" + dirs.sdk;
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0') {
    path += std::string(":") + old;
  }
  ::setenv("PYTHONPATH", path.c_str(), 1);
  // The package runs this very program (not another `fanout` on PATH).
  std::error_code ec;
  const fs::path me = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) ::setenv("FANOUT_BIN", me.c_str(), 1);
  const char* env_python = std::getenv("FANOUT_PYTHON");
  const std::string python = env_python != nullptr && *env_python != '\0' ? env_python : "python3";
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(python.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(python.c_str(), argv.data());
  std::fprintf(stderr,
               "error: python: cannot run the interpreter '%s' ($FANOUT_PYTHON, else "
               "python3 on PATH): %s\n",
               python.c_str(), std::strerror(errno));
  return proto::kExitUsage;
}

}  // namespace fanout::client
