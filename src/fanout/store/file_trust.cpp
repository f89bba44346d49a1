// The checks on a store's files. See file_trust.hpp and docs/security.md, "The store's files".
#include "fanout/store/file_trust.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include "fanout/util/user_text.hpp"

namespace fanout::store {

namespace {

std::atomic<StoreTrust> g_trust{StoreTrust::Owner};
// Set by checked_open() on the thread whose SQLite call it refused; read by Db.
thread_local std::string t_refused;

// The names SQLite gives a store's companion files.
constexpr std::array<std::string_view, 3> kCompanions = {"-wal", "-shm", "-journal"};

// The store file a companion belongs to ("" when `path` is not a companion's name).
std::string store_of(std::string_view path) {
  for (std::string_view suffix : kCompanions) {
    if (path.size() > suffix.size() && path.substr(path.size() - suffix.size()) == suffix) {
      return std::string(path.substr(0, path.size() - suffix.size()));
    }
  }
  return {};
}

// Whether group `gid` is the private group of user `uid` (Debian gives each user one, and a umask
// of 002 to go with it): the user's primary group, with no other listed member. Its write bit
// then lets no one else write.
bool private_group(uid_t uid, gid_t gid) {
  struct passwd pw {};
  struct passwd* found_pw = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found_pw) != 0 || found_pw == nullptr ||
      pw.pw_gid != gid) {
    return false;
  }
  const std::string name = pw.pw_name;
  struct group gr {};
  struct group* found_gr = nullptr;
  char gbuf[16384];
  if (::getgrgid_r(gid, &gr, gbuf, sizeof gbuf, &found_gr) != 0 || found_gr == nullptr) {
    return false;
  }
  for (char** m = gr.gr_mem; m != nullptr && *m != nullptr; ++m) {
    if (name != *m) return false;
  }
  return true;
}

// Whether only the owner may write what `st` describes: no write bit for others, and none for the
// group unless it is the owner's private group.
bool owner_only_writes(const struct stat& st) {
  if ((st.st_mode & S_IWOTH) != 0) return false;
  return (st.st_mode & S_IWGRP) == 0 || private_group(st.st_uid, st.st_gid);
}

// Whether `owner` may own a file of the store at or beside `path`: this user and root always;
// under StoreTrust::Reader also the owner of the store file itself.
bool admitted_owner(uid_t owner, const std::string& path) {
  if (owner == ::geteuid() || owner == 0) return true;
  if (g_trust.load(std::memory_order_relaxed) != StoreTrust::Reader) return false;
  const std::string store = store_of(path);
  if (store.empty()) return true;  // the store file: its owner is the store's owner
  struct stat st {};
  return ::lstat(store.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == owner;
}

// Why a file with status `st` at `path` may not be part of a store; empty when it may.
std::string untrusted(const struct stat& st, const std::string& path) {
  const bool regular = S_ISREG(st.st_mode);
  const bool owner_ok = admitted_owner(st.st_uid, path);
  const bool narrow = owner_only_writes(st);
  if (regular && owner_ok && narrow && st.st_nlink == 1) return {};
  std::string why;
  if (!regular) {
    why = "not a regular file";
  } else if (!owner_ok) {
    why = "owned by another user";
  } else if (!narrow) {
    why = "writable by group or others";
  } else {
    why = fmt::format("has {} names (hard links)", st.st_nlink);
  }
  return fmt::format(
      "{}: not trusted as a file of the store: {} (owner {}, mode {:04o}); expected a regular "
      "file of {} (or root) with one name, writable by its owner only. Another local user may "
      "have planted it beside the store, to run their job as you: remove it",
      path, why, describe_uid(st.st_uid), st.st_mode & 07777, describe_uid(::geteuid()));
}

std::string link_refusal(const std::string& path, uid_t owner) {
  return fmt::format(
      "{}: is a symbolic link (owner {}); fanout does not follow links to a store's files: "
      "remove it, or name the file it leads to",
      path, describe_uid(owner));
}

// SQLite's unix VFS opens every file through this (its "open" system call): the store, its
// companions, temporary files, the store's folder (to sync it) and /dev/urandom.
int checked_open(const char* path, int flags, int mode) {
  const int fd = ::open(path, flags | O_NOFOLLOW, static_cast<mode_t>(mode));
  if (fd < 0) {
    if (errno != ELOOP) return -1;
    // The store's folder may well be reached through a link; it is opened read-only, to sync.
    if ((flags & (O_ACCMODE | O_CREAT)) == O_RDONLY) {
      const int dir = ::open(path, flags | O_DIRECTORY);
      if (dir >= 0) return dir;
    }
    struct stat lst {};
    t_refused = link_refusal(path, ::lstat(path, &lst) == 0 ? lst.st_uid : 0);
    errno = ELOOP;
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  // A folder holds no rows; character devices (/dev/urandom, /dev/null) are root's.
  if (S_ISDIR(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_uid == 0)) return fd;
  std::string why = untrusted(st, path);
  if (why.empty()) return fd;
  ::close(fd);
  t_refused = std::move(why);
  // SQLite retries a refused read-write open read-only, which is refused the same way, and
  // then reports SQLITE_CANTOPEN.
  errno = EACCES;
  return -1;
}

// A folder others may write lets them rename, remove and replace the store's files, unless it is
// sticky: then they may only add files of their own, which untrusted() refuses.
Expected<void> check_folder(const std::string& store) {
  std::string folder = std::filesystem::path(store).parent_path().string();
  if (folder.empty()) folder = ".";
  struct stat st {};
  // stat, not lstat: what counts is the folder a link leads to.
  if (::stat(folder.c_str(), &st) != 0) return {};  // SQLite says what is missing
  const std::string found =
      fmt::format("owner {}, mode {:04o}", describe_uid(st.st_uid), st.st_mode & 07777);
  if (!owner_only_writes(st) && (st.st_mode & S_ISVTX) == 0) {
    return make_error(
        ErrorCode::Io,
        fmt::format("{}: the store's folder {} is writable by group or others and not sticky "
                    "({}): another user could replace the store's files; use a folder only you "
                    "can write, or make it sticky (chmod +t {}, as /tmp is)",
                    store, folder, found, folder));
  }
  return {};
}

}  // namespace

void set_store_trust(StoreTrust trust) noexcept { g_trust.store(trust, std::memory_order_relaxed); }

StoreTrust store_trust() noexcept { return g_trust.load(std::memory_order_relaxed); }

Expected<void> install_file_checks() {
  sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  if (vfs == nullptr || vfs->iVersion < 3 || vfs->xSetSystemCall == nullptr ||
      vfs->xSetSystemCall(vfs, "open", reinterpret_cast<sqlite3_syscall_ptr>(&checked_open)) !=
          SQLITE_OK) {
    return make_error(ErrorCode::Database,
                      std::string("SQLite's default VFS (") +
                          (vfs != nullptr ? vfs->zName : "none") +
                          ") does not let fanout check the files it opens; a unix VFS is needed");
  }
  return {};
}

Expected<void> check_store_files(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return {};
  if (store_trust() == StoreTrust::Owner) {
    if (auto ok = check_folder(path); !ok) return ok;
  }
  for (std::string_view suffix :
       {std::string_view(), kCompanions[0], kCompanions[1], kCompanions[2]}) {
    const std::string file = path + std::string(suffix);
    struct stat st {};
    if (::lstat(file.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return make_error(ErrorCode::Io, file + ": " + std::strerror(errno));
    }
    if (S_ISLNK(st.st_mode)) return make_error(ErrorCode::Io, link_refusal(file, st.st_uid));
    if (std::string why = untrusted(st, file); !why.empty()) {
      return make_error(ErrorCode::Io, std::move(why));
    }
  }
  return {};
}

std::string take_refused_open() { return std::exchange(t_refused, std::string()); }

}  // namespace fanout::store
