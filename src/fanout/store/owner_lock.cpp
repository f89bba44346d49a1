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
  lock.fd_ = UniqueFd(::open(lock.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock.fd_.valid()) {
    return make_error(ErrorCode::Io, lock.path_ + ": cannot open: " + std::strerror(errno));
  }
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
  return lock;
}

Expected<void> OwnerLock::publish(const std::string& text) {
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return make_error(ErrorCode::Io, path_ + ": cannot write: " + std::strerror(errno));
  }
  return {};
}

std::optional<StoreOwner> find_owner(const std::string& db_path) {
  const std::string path = owner_file(db_path);
  // Read-only: closing this descriptor never drops a lock this process holds on the file (it
  // holds none; the interchange does not call this).
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  const pid_t pid = holder(fd.get());
  if (pid == 0) return std::nullopt;
  StoreOwner owner;
  owner.pid = pid;
  auto text = read_file(path);
  if (text) owner.text = *text;
  return owner;
}

}  // namespace fanout::store
