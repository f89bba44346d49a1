// The rules of net/security and net/keys: which endpoints are encrypted, where --insecure is
// accepted, and how key files are written and refused. See docs/security.md.
#include "fanout/net/security.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "fanout/net/keys.hpp"
#include "scratch_dir.hpp"

using namespace fanout;
using net::Security;

TEST_CASE("net.security.loopback_endpoints") {
  for (const char* ep : {"tcp://127.0.0.1:5555", "tcp://127.0.0.1:*", "tcp://127.1.2.3:1",
                         "tcp://localhost:80", "tcp://[::1]:5555", "tcp://eth0;127.0.0.1:9"}) {
    CAPTURE(ep);
    CHECK(net::is_loopback_endpoint(ep));
  }
  for (const char* ep : {"tcp://0.0.0.0:5555", "tcp://*:5555", "tcp://10.0.0.1:1",
                         "tcp://127.example.com:1", "tcp://1127.0.0.1:1", "tcp://127.0.0:1",
                         "tcp://[::]:1", "ipc:///tmp/x", "tcp://localhost.evil:1"}) {
    CAPTURE(ep);
    CHECK(!net::is_loopback_endpoint(ep));
  }
}

TEST_CASE("net.security.curve_on_every_tcp_endpoint_unless_insecure_on_loopback") {
  CHECK(net::wants_curve("tcp://0.0.0.0:1", Security{}).value());
  CHECK(net::wants_curve("tcp://127.0.0.1:1", Security{}).value());
  CHECK(!net::wants_curve("ipc:///tmp/fo-x/client", Security{}).value());
  CHECK(!net::wants_curve("inproc://x", Security{}).value());
  Security insecure;
  insecure.insecure = true;
  CHECK(!net::wants_curve("tcp://127.0.0.1:1", insecure).value());
  auto open = net::wants_curve("tcp://0.0.0.0:1", insecure);
  REQUIRE(!open.has_value());
  CHECK(open.error().code == ErrorCode::InvalidArgument);
  CHECK(open.error().message.find("tcp://0.0.0.0:1") != std::string::npos);
}

TEST_CASE("net.keys.folder_round_trip_and_modes") {
  test::ScratchDir dir;
  const std::string keys = dir.file("keys");
  REQUIRE(net::make_key_folder(keys).has_value());
  struct stat st {};
  REQUIRE(::stat(keys.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  auto pair = net::read_secret_key(net::secret_key_path(keys, "pool"));
  REQUIRE(pair.has_value());
  CHECK(pair->public_key.size() == 40);
  CHECK(pair->secret_key.size() == 40);
  CHECK(net::read_public_key(net::public_key_path(keys, "pool")).value() == pair->public_key);
  CHECK(net::read_public_key(net::authorized_pools_dir(keys) + "/pool.key").value() ==
        pair->public_key);
  // Never overwritten.
  CHECK(!net::make_key_folder(keys).has_value());
  SUBCASE("a secret key others can read is refused, naming the file and the fix") {
    const std::string file = net::secret_key_path(keys, "client");
    REQUIRE(::chmod(file.c_str(), 0644) == 0);
    auto r = net::read_secret_key(file);
    REQUIRE(!r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find("chmod 600 " + file) != std::string::npos);
  }
  SUBCASE("bad names and files") {
    CHECK(!net::add_key(keys, "../x", "pool").has_value());
    CHECK(!net::add_key(keys, "interchange", "client").has_value());
    CHECK(!net::add_key(keys, "ok", "admin").has_value());
    const std::string junk = dir.file("junk.key");
    {
      std::FILE* f = std::fopen(junk.c_str(), "w");
      std::fputs("curve\n    public-key = \"short\"\n", f);
      std::fclose(f);
    }
    auto r = net::read_public_key(junk);
    REQUIRE(!r.has_value());
    CHECK(r.error().message.find(junk) != std::string::npos);
  }
}

TEST_CASE("net.keys.key_paths_others_may_write_are_refused") {
  test::ScratchDir dir;
  const std::string keys = dir.file("keys");
  REQUIRE(net::make_key_folder(keys).has_value());
  // keygen's own folders pass, whatever the umask was.
  CHECK(net::check_key_folders(keys).has_value());
  using K = net::KeyPathKind;
  struct Case {
    const char* what;
    std::string path;
    K kind;
    mode_t mode;
    const char* fix;  // nullptr: accepted
  };
  const std::string clients = net::authorized_clients_dir(keys);
  const std::string pub = clients + "/client.key";
  const std::string sec = net::secret_key_path(keys, "client");
  const std::vector<Case> cases = {
      {"private folder", clients, K::Folder, 0700, nullptr},
      {"folder others may read", clients, K::Folder, 0755, nullptr},
      {"group-writable folder", clients, K::Folder, 0775, "chmod go-w "},
      {"world-writable folder", clients, K::Folder, 0777, "chmod go-w "},
      {"others-writable folder", clients, K::Folder, 0703, "chmod go-w "},
      {"sticky world-writable folder", clients, K::Folder, 01777, "chmod go-w "},
      {"public key", pub, K::PublicKey, 0644, nullptr},
      {"group-writable public key", pub, K::PublicKey, 0664, "chmod go-w "},
      {"world-writable public key", pub, K::PublicKey, 0666, "chmod go-w "},
      {"secret key", sec, K::SecretKey, 0600, nullptr},
      {"group-readable secret key", sec, K::SecretKey, 0640, "chmod 600 "},
      {"group-writable secret key", sec, K::SecretKey, 0620, "chmod 600 "},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    REQUIRE(::chmod(c.path.c_str(), c.mode) == 0);
    auto r = net::check_key_path(c.path, c.kind);
    if (c.fix == nullptr) {
      CHECK(r.has_value());
    } else {
      REQUIRE_FALSE(r.has_value());
      CHECK(r.error().code == ErrorCode::InvalidArgument);
      CHECK(r.error().message.find(c.path) != std::string::npos);
      CHECK(r.error().message.find(std::string(c.fix) + c.path) != std::string::npos);
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(c.mode));
      CHECK(r.error().message.find(std::string("mode ") + mode) != std::string::npos);
    }
    REQUIRE(::chmod(c.path.c_str(), c.kind == K::Folder      ? 0700
                                    : c.kind == K::PublicKey ? 0644
                                                             : 0600) == 0);
  }
  CHECK(net::check_key_path(dir.file("nope"), K::Folder).error().code == ErrorCode::NotFound);

  SUBCASE("each folder of the key folder is checked; a missing role folder is none") {
    for (const std::string& folder :
         {keys, keys + "/authorized", clients, net::authorized_pools_dir(keys)}) {
      CAPTURE(folder);
      REQUIRE(::chmod(folder.c_str(), 0777) == 0);
      auto r = net::check_key_folders(keys);
      REQUIRE_FALSE(r.has_value());
      CHECK(r.error().message.find("key folder " + folder + " is writable by group or others") !=
            std::string::npos);
      REQUIRE(::chmod(folder.c_str(), 0700) == 0);
    }
    std::filesystem::remove_all(net::authorized_pools_dir(keys));
    CHECK(net::check_key_folders(keys).has_value());
  }
  SUBCASE("a secret key in a folder others may write is refused") {
    REQUIRE(::chmod(keys.c_str(), 0777) == 0);
    auto r = net::read_secret_key(sec);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message.find("chmod go-w " + keys) != std::string::npos);
  }
}

// Owners need root (chown). The other owner is a bare uid: no user account is needed for it.
TEST_CASE("net.keys.key_paths_of_another_owner_are_refused") {
  if (::geteuid() != 0) {
    MESSAGE("SKIP: needs root to chown files to another uid");
    return;
  }
  constexpr uid_t kOther = 54321;
  test::ScratchDir dir;
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);  // the other uid may reach the keys below
  const std::string keys = dir.file("keys");
  REQUIRE(net::make_key_folder(keys).has_value());
  const std::string clients = net::authorized_clients_dir(keys);
  const std::string sec = net::secret_key_path(keys, "client");
  using K = net::KeyPathKind;

  SUBCASE("a 0600 secret key of another user is refused, naming owner and fix") {
    REQUIRE(::chown(sec.c_str(), kOther, static_cast<gid_t>(-1)) == 0);
    auto r = net::read_secret_key(sec);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find("secret key file " + sec + " is not owned by the user running") !=
          std::string::npos);
    CHECK(r.error().message.find("uid 54321") != std::string::npos);
    CHECK(r.error().message.find("mode 0600") != std::string::npos);
    CHECK(r.error().message.find("chown 0 " + sec) != std::string::npos);
  }
  SUBCASE("a folder or public key of another user is refused") {
    for (const auto& [path, kind] : std::vector<std::pair<std::string, K>>{
             {keys, K::Folder}, {clients, K::Folder}, {clients + "/client.key", K::PublicKey}}) {
      CAPTURE(path);
      REQUIRE(::chown(path.c_str(), kOther, static_cast<gid_t>(-1)) == 0);
      auto r = net::check_key_path(path, kind);
      REQUIRE_FALSE(r.has_value());
      CHECK(r.error().message.find(" is not owned by root or the user running") !=
            std::string::npos);
      REQUIRE(::chown(path.c_str(), 0, static_cast<gid_t>(-1)) == 0);
    }
    REQUIRE(::chown(clients.c_str(), kOther, static_cast<gid_t>(-1)) == 0);
    CHECK_FALSE(net::check_key_folders(keys).has_value());
  }
  SUBCASE("as another user: root's folders and public keys are trusted, root's secret key not") {
    REQUIRE(::chmod(keys.c_str(), 0755) == 0);
    const std::string mine = keys + "/mine.key_secret";
    REQUIRE(net::write_certificate(mine, net::new_key_pair().value()).has_value());
    REQUIRE(::chown(mine.c_str(), kOther, static_cast<gid_t>(-1)) == 0);
    REQUIRE(::seteuid(kOther) == 0);
    const bool folder_ok = net::check_key_path(keys, K::Folder).has_value();
    const bool public_ok = net::check_key_path(keys + "/client.key", K::PublicKey).has_value();
    const bool own_secret_ok = net::read_secret_key(mine).has_value();
    const bool root_secret = net::check_key_path(sec, K::SecretKey).has_value();
    REQUIRE(::seteuid(0) == 0);
    CHECK(folder_ok);
    CHECK(public_ok);
    CHECK(own_secret_ok);
    CHECK_FALSE(root_secret);
  }
}

// A link at the store's path (dangling or not) was followed: `stat` found its target missing,
// O_EXCL's EEXIST was taken for "another process made it", and SQLite then created the target.
TEST_CASE("net.security.create_private_file_refuses_a_link") {
  test::ScratchDir dir;
  const std::string target = dir.file("target.db");
  const std::string link = dir.file("store.db");
  std::filesystem::create_symlink(target, link);
  auto r = net::create_private_file(link, false);
  REQUIRE(!r.has_value());
  CHECK(r.error().message.find(link + ": is a symbolic link") != std::string::npos);
  CHECK(!std::filesystem::exists(target));
  // A regular file there is left as it is; a missing one is made 0600.
  CHECK(net::create_private_file(dir.file("new/fresh.db"), false).has_value());
  struct stat st {};
  REQUIRE(::lstat(dir.file("new/fresh.db").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(net::create_private_file(dir.file("new/fresh.db"), false).has_value());
}
