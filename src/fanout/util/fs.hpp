// Small file-system helpers shared by the client, pool and interchange.
#pragma once

#include <string>

#include "fanout/util/expected.hpp"

namespace fanout {

// Reads a whole file. Error{NotFound} when missing, Error{Io} otherwise; the message names it.
[[nodiscard]] Expected<std::string> read_file(const std::string& path);

// Creates `dir` and its parents. Error{Io} naming the folder on failure.
[[nodiscard]] Expected<void> make_dirs(const std::string& dir);

// Creates the folder holding `path`, if `path` names one (nothing for a bare file name).
// Error{Io} naming the folder on failure.
[[nodiscard]] Expected<void> make_parent_dirs(const std::string& path);

// `path` made absolute against `base` (when relative) and lexically normalised.
std::string resolve_path(const std::string& base, const std::string& path);

// This machine's host name ("localhost" if it cannot be read).
std::string host_name();

// The folder holding the running executable ("" if unknown).
std::string self_dir();

}  // namespace fanout
