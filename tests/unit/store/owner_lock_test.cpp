// Tests for the store's owner lock (src/fanout/store/owner_lock.hpp): one live holder at a time,
// seen by other processes with what it published, released when the holder ends.
// fcntl locks belong to a process, so the other side is a forked child.
#include "fanout/store/owner_lock.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fanout/util/error.hpp"

#include "scratch_dir.hpp"

using fanout::ErrorCode;
using fanout::store::find_owner;
using fanout::store::OwnerLock;
using fanout::test::ScratchDir;

namespace {

// Runs `fn` in a forked child and returns its exit code.
template <class Fn>
int in_child(Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

}  // namespace

TEST_CASE("store.owner_lock.one_live_owner_others_see_it_and_its_endpoints") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  CHECK_FALSE(find_owner(db).value().has_value());
  {
    auto lock = OwnerLock::acquire(db);
    REQUIRE(lock.has_value());
    const std::string text =
        "client=ipc:///x/client\npool=ipc:///x/pool\npid=" + std::to_string(::getpid()) + "\n";
    REQUIRE(lock->publish(text).has_value());
    // Another process cannot take it, and is told who holds it.
    CHECK(in_child([&] {
            auto second = OwnerLock::acquire(db);
            if (second) return 1;
            if (second.error().code != ErrorCode::State) return 2;
            if (second.error().message.find(std::to_string(::getppid())) == std::string::npos) {
              return 3;
            }
            auto owner = find_owner(db).value();
            if (!owner || owner->pid != ::getppid()) return 4;
            return owner->text == text ? 0 : 5;
          }) == 0);
  }
  // Released with its holder: the next one takes it.
  CHECK(in_child([&] { return find_owner(db).value().has_value() ? 1 : 0; }) == 0);
  CHECK(in_child([&] { return OwnerLock::acquire(db).has_value() ? 0 : 1; }) == 0);
}

// Two `fanout resume`s after a crash: the second found the lock held by the first's new
// interchange, which had not published yet, and read the dead one's endpoints left in the file.
// Taking the lock empties the file, and text whose pid= is not the holder's is not returned.
TEST_CASE("store.owner_lock.a_dead_owners_text_is_never_returned") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  const std::string stale = "client=ipc:///dead/client\npool=ipc:///dead/pool\npid=999999999\n";
  {
    std::FILE* f = std::fopen(fanout::store::owner_file(db).c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(stale.c_str(), f);
    std::fclose(f);
  }
  auto lock = OwnerLock::acquire(db);
  REQUIRE(lock.has_value());
  CHECK(in_child([&] {
          auto owner = find_owner(db).value();
          return owner && owner->pid == ::getppid() && owner->text.empty() ? 0 : 1;
        }) == 0);
  // Whatever the file says, only the holder's own text counts.
  REQUIRE(lock->publish(stale).has_value());
  CHECK(in_child([&] {
          auto owner = find_owner(db).value();
          return owner && owner->text.empty() ? 0 : 1;
        }) == 0);
}

// The owner file in a shared folder: a symbolic link or a file others may write is refused by
// the owner and by those looking for it, with an error naming the file (and its mode).
TEST_CASE("store.owner_lock.untrusted_owner_files_are_refused") {
  ScratchDir dir;
  const std::string db = dir.file("fanout.db");
  const std::string file = fanout::store::owner_file(db);
  SUBCASE("a symbolic link") {
    const std::string target = dir.file("target");
    {
      std::FILE* f = std::fopen(target.c_str(), "w");
      REQUIRE(f != nullptr);
      std::fputs("precious\n", f);
      std::fclose(f);
    }
    REQUIRE(::symlink(target.c_str(), file.c_str()) == 0);
    auto lock = OwnerLock::acquire(db);
    REQUIRE_FALSE(lock.has_value());
    CHECK(lock.error().code == ErrorCode::Io);
    CHECK(lock.error().message.find(file) != std::string::npos);
    CHECK(lock.error().message.find("symbolic link") != std::string::npos);
    auto found = find_owner(db);
    REQUIRE_FALSE(found.has_value());
    CHECK(found.error().message.find(file) != std::string::npos);
    struct stat st {};
    REQUIRE(::stat(target.c_str(), &st) == 0);
    CHECK(st.st_size == 9);  // untouched
  }
  SUBCASE("writable by others") {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    ::fchmod(fd, 0666);
    ::close(fd);
    auto lock = OwnerLock::acquire(db);
    REQUIRE_FALSE(lock.has_value());
    CHECK(lock.error().message.find(file) != std::string::npos);
    CHECK(lock.error().message.find("mode 0666") != std::string::npos);
    auto found = find_owner(db);
    REQUIRE_FALSE(found.has_value());
    CHECK(found.error().message.find("mode 0666") != std::string::npos);
  }
}
