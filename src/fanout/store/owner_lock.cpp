// The store's owner lock. See owner_lock.hpp.
#include "fanout/store/owner_lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fanout/util/fs.hpp"

namespace fanout::store {

namespace {

struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  return fl;
}

// The pid holding a write lock on `fd`'s file, or 0 when none.
pid_t holder(int fd) {
  struct flock fl = whole_file(F_WRLCK);
  if (::fcntl(fd, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK) return 0;
  return fl.l_pid;
}

}  // namespace

std::string owner_file(const std::string& db_path) { return db_path + ".owner"; }

Expected<OwnerLock> OwnerLock::acquire(const std::string& db_path) {
  OwnerLock lock;
  lock.path_ = owner_file(db_path);
  if (auto r = make_parent_dirs(lock.path_); !r) return Unexpected{r.error()};
  // The store's folder may be shared (/tmp): a file or link planted there by another user is
  // refused, or it could point this store's clients and pools at that user's interchange.
  auto fd = open_trusted(lock.path_, O_RDWR | O_CREAT, 0600);
  if (!fd) {
    return make_error(ErrorCode::Io, "the store's owner file " + fd.error().message);
  }
  lock.fd_ = std::move(*fd);
  struct flock fl = whole_file(F_WRLCK);
  if (::fcntl(lock.fd_.get(), F_SETLK, &fl) != 0) {
    if (errno == EACCES || errno == EAGAIN) {
      return make_error(ErrorCode::State, db_path +
                                              ": the store is owned by the live interchange pid " +
                                              std::to_string(holder(lock.fd_.get())) + " (lock " +
                                              lock.path_ + "); one interchange per store");
    }
    return make_error(ErrorCode::Io, lock.path_ + ": cannot lock: " + std::strerror(errno));
  }
  // What a dead owner published names endpoints nobody serves any more.
  if (::ftruncate(lock.fd_.get(), 0) != 0) {
    return make_error(ErrorCode::Io, lock.path_ + ": cannot empty: " + std::strerror(errno));
  }
  return lock;
}

Expected<void> OwnerLock::publish(const std::string& text) {
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return make_error(ErrorCode::Io, path_ + ": cannot write: " + std::strerror(errno));
  }
  return {};
}

Expected<std::optional<StoreOwner>> find_owner(const std::string& db_path) {
  const std::string path = owner_file(db_path);
  // Read-only: closing this descriptor never drops a lock this process holds on the file (it
  // holds none; the interchange does not call this).
  auto fd = open_trusted(path, O_RDONLY);
  if (!fd) {
    if (fd.error().code == ErrorCode::NotFound) return std::optional<StoreOwner>{};
    return make_error(ErrorCode::Io, "the store's owner file " + fd.error().message);
  }
  const pid_t pid = holder(fd->get());
  if (pid == 0) return std::optional<StoreOwner>{};
  StoreOwner owner;
  owner.pid = pid;
  // Read through the descriptor checked above, not the path (which could be replaced meanwhile).
  std::string text;
  char buf[4096];
  for (off_t off = 0;;) {
    const ssize_t n = ::pread(fd->get(), buf, sizeof buf, off);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
  // Only what the holder itself published: a new owner may not have published yet, and the
  // file may still hold its dead predecessor's endpoints.
  if (("\n" + text).find("\npid=" + std::to_string(pid) + "\n") != std::string::npos) {
    owner.text = text;
  }
  return std::optional<StoreOwner>{std::move(owner)};
}

}  // namespace fanout::store
