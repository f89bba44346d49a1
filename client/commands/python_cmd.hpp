// `fanout python [FILE | -c CODE | -m MODULE] [ARGS...]`: a Python program run with the `fanout`
// package importable (python/fanout/, docs/python.md), from an installed tree or a build tree.
#pragma once

#include <string>
#include <vector>

namespace fanout::client {

// Where `fanout python` finds what it puts on PYTHONPATH.
struct PythonDirs {
  std::string package{};  // the folder holding fanout/ (the package); empty: none found
  std::string sdk{};      // the folder of the SDK-shaped modules only `fanout python` adds
  std::string python{};   // the interpreter of the environment this binary is in (a venv's
                          // bin/python3), else empty: python3 on PATH
};

// The folders beside this binary, tried in order: an installed tree (PREFIX/bin/fanout with
// PREFIX/lib/python3/dist-packages, or PREFIX/lib/pythonX.Y/site-packages as `pip install`
// makes, and PREFIX/share/fanout/python-sdk, or PREFIX/fanout/python-sdk from a wheel); else the
// source tree of the build tree the binary is in (read from the build's meson-info, so nothing
// about the source is compiled in). Fields not found are empty.
[[nodiscard]] PythonDirs find_python_dirs();

// The source folder of the meson build tree holding this binary (the `directories.source` of
// its meson-info/meson-info.json, found from the binary's folder upwards), else empty: an
// installed binary.
[[nodiscard]] std::string build_tree_source_dir();

// Replaces this process with the interpreter ($FANOUT_PYTHON, else the python3 of the venv the
// binary is in, else python3 on PATH) running `args` as `python3 ARGS...` would, with PYTHONPATH
// led by the package's folders and FANOUT_BIN naming this program (so the package drives this
// very `fanout`). Returns only when the interpreter cannot be started: the exit status, after
// printing why.
int exec_python(const std::vector<std::string>& args);

}  // namespace fanout::client
