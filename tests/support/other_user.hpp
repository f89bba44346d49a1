// A second local user for the tests that play another user's attacks (docs/security.md): made
// with useradd when constructed, removed with its home folder when destroyed (also when a check
// fails). Constructing one exits the test process with 77 (SKIP), saying why, unless it runs as
// root.
#pragma once

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "harness.hpp"

namespace fanout::test {

class OtherUser final {
 public:
  explicit OtherUser(std::string name) : name_(std::move(name)) {
    if (::geteuid() != 0) {
      std::fprintf(stderr,
                   "SKIP: needs root to create another local user (useradd) and switch to it\n");
      std::_Exit(77);
    }
    remove();
    const std::string add =
        "useradd --create-home --shell /usr/sbin/nologin " + name_ + " >/dev/null";
    if (std::system(add.c_str()) != 0) {
      std::fprintf(stderr, "SKIP: useradd %s failed\n", name_.c_str());
      std::_Exit(77);
    }
    auto id_of = [&](const char* flag) {
      auto r = run_capture({"id", flag, name_}, "/tmp");
      return static_cast<unsigned>(std::stoul(r.out.empty() ? "0" : r.out));
    };
    uid_ = id_of("-u");
    gid_ = id_of("-g");
  }
  ~OtherUser() { remove(); }
  OtherUser(const OtherUser&) = delete;
  OtherUser& operator=(const OtherUser&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] uid_t uid() const { return uid_; }
  [[nodiscard]] gid_t gid() const { return gid_; }

  // Makes this (forked) process this user, for good; exits 100 when it cannot.
  void become() const {
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid_) != 0 || ::setuid(uid_) != 0) {
      std::_Exit(100);
    }
  }

  // Runs `fn` in a forked child as this user; returns its result (its exit code), or -1.
  [[nodiscard]] int run(const std::function<int()>& fn) const {
    const pid_t pid = ::fork();
    if (pid == 0) {
      become();
      std::_Exit(fn());
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  void remove() const { (void)std::system(("userdel -r " + name_ + " >/dev/null 2>&1").c_str()); }

  std::string name_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

// A folder open to everyone and sticky (mode 1777), owned by `owner`: a shared place such as
// /tmp (owned by root there).
inline void make_sticky_folder(const std::string& dir, uid_t owner, gid_t group) {
  std::filesystem::create_directories(dir);
  if (::chown(dir.c_str(), owner, group) != 0 || ::chmod(dir.c_str(), 01777) != 0) {
    throw std::runtime_error("cannot make " + dir + " a shared folder");
  }
}

}  // namespace fanout::test
