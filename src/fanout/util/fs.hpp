// Small file-system helpers shared by the client, pool and interchange.
#pragma once

#include <sys/types.h>

#include <string>

#include "fanout/util/expected.hpp"
#include "fanout/util/fd.hpp"

namespace fanout {

// Reads a whole file. Error{NotFound} when missing, Error{Io} otherwise; the message names it.
[[nodiscard]] Expected<std::string> read_file(const std::string& path);

// Creates `dir` and its parents. Error{Io} naming the folder on failure.
[[nodiscard]] Expected<void> make_dirs(const std::string& dir);

// Creates the folder holding `path`, if `path` names one (nothing for a bare file name).
// Error{Io} naming the folder on failure.
[[nodiscard]] Expected<void> make_parent_dirs(const std::string& path);

// Opens `path` (with `flags`, plus O_NOFOLLOW and O_CLOEXEC; created with `create_mode` when
// `flags` has O_CREAT) and checks that the file opened is one this user can trust: a regular
// file owned by this user or by root, not writable by group or others. A file another local user
// planted in a shared folder (/tmp), or a symbolic link there, is refused instead of being read,
// written or followed. Error{NotFound} when missing; Error{Io} naming the file otherwise: "is a
// symbolic link (not followed)", or its owner and mode.
[[nodiscard]] Expected<UniqueFd> open_trusted(const std::string& path, int flags,
                                              mode_t create_mode = 0600);

// `path` made absolute against `base` (when relative) and lexically normalised.
std::string resolve_path(const std::string& base, const std::string& path);

// This machine's host name ("localhost" if it cannot be read).
std::string host_name();

// The folder holding the running executable ("" if unknown).
std::string self_dir();

}  // namespace fanout
