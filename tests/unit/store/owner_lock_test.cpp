// Tests for the store's owner lock (src/fanout/store/owner_lock.hpp): one live holder at a time,
// seen by other processes with what it published, released when the holder ends (issue 18
// item 0). fcntl locks belong to a process, so the other side is a forked child.
#include "fanout/store/owner_lock.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

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
  CHECK_FALSE(find_owner(db).has_value());
  {
    auto lock = OwnerLock::acquire(db);
    REQUIRE(lock.has_value());
    REQUIRE(lock->publish("client=ipc:///x/client\npool=ipc:///x/pool\n").has_value());
    // Another process cannot take it, and is told who holds it.
    CHECK(in_child([&] {
            auto second = OwnerLock::acquire(db);
            if (second) return 1;
            if (second.error().code != ErrorCode::State) return 2;
            if (second.error().message.find(std::to_string(::getppid())) == std::string::npos) {
              return 3;
            }
            auto owner = find_owner(db);
            if (!owner || owner->pid != ::getppid()) return 4;
            return owner->text == "client=ipc:///x/client\npool=ipc:///x/pool\n" ? 0 : 5;
          }) == 0);
  }
  // Released with its holder: the next one takes it.
  CHECK(in_child([&] { return find_owner(db).has_value() ? 1 : 0; }) == 0);
  CHECK(in_child([&] { return OwnerLock::acquire(db).has_value() ? 0 : 1; }) == 0);
}
