// Which files SQLite may open for fanout: the store, its -wal, -shm and -journal, and the
// folder holding them. A file there decides what runs (a WAL holding another user's job would be
// resumed as ours), so none is followed through a link or taken from another user. See
// docs/security.md, "The store's files".
#pragma once

#include <cstdint>
#include <string>

#include "fanout/util/expected.hpp"

namespace fanout::store {

// Whose files this process may read as a store.
enum class StoreTrust : std::uint8_t {
  // The default, for every process that runs or resumes anything: files of the effective user
  // or root only.
  Owner,
  // For commands that only read and display a store (history, status, report, compare, tune,
  // dashboard): also the files of the store file's own owner, so that a group may read a store
  // shared with --share-with-group. Never for a process that runs anything.
  Reader,
};

// Sets this process's rule. Call it in main(), before the first store is opened.
void set_store_trust(StoreTrust trust) noexcept;
[[nodiscard]] StoreTrust store_trust() noexcept;

// Makes SQLite's unix VFS open every file through a check of the descriptor it opened (never
// following a link, a regular file with one name, of an owner the rule above admits, writable by
// its owner only). Db calls it once per process, before the first connection is opened.
// Error{Database} when the default VFS cannot take the check (not SQLite's unix VFS).
[[nodiscard]] Expected<void> install_file_checks();

// Checks, before SQLite opens the store at `path`: the store file and its -wal, -shm and
// -journal, those that exist (not links, regular, one name, of an admitted owner, writable by
// their owner only), and, under StoreTrust::Owner, its folder: not writable by group or others
// unless sticky (as /tmp: a sticky folder keeps others from replacing our files, and the checks
// above keep theirs out). Error{Io} naming the file or folder, its owner and mode, and the fix.
[[nodiscard]] Expected<void> check_store_files(const std::string& path);

// What the last refused open on this thread was ("<file>: <reason>"), and clears it; empty when
// none. SQLite reports a refused open as "unable to open database file": Db adds this.
[[nodiscard]] std::string take_refused_open();

}  // namespace fanout::store
