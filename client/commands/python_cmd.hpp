// `fanout python [FILE | -c CODE | -m MODULE] [ARGS...]`: a Python program run with the `fanout`
// package importable (python/fanout/, docs/python.md), from an installed tree or a build tree.
#pragma once

#include <string>
#include <vector>

namespace fanout::client {

// Where `fanout python` finds what it puts on PYTHONPATH.
struct PythonDirs {
  std::string package{};  // the folder holding fanout/ (the package)
  std::string sdk{};      // the folder of the SDK-shaped modules only `fanout python` adds
};

// The installed folders beside this binary (../lib/python3/dist-packages and
// ../share/fanout/python-sdk) when they hold the package, else the source tree's.
[[nodiscard]] PythonDirs find_python_dirs();

// Replaces this process with the interpreter ($FANOUT_PYTHON, else python3 on PATH) running
// `args` as `python3 ARGS...` would, with PYTHONPATH led by the package's folders and FANOUT_BIN
// naming this program (so the package drives this very `fanout`). Returns only when the
// interpreter cannot be started: the exit status, after printing why.
int exec_python(const std::vector<std::string>& args);

}  // namespace fanout::client
