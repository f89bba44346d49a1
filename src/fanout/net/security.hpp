// Who may connect: CurveZMQ on every tcp:// endpoint (unless --insecure on loopback), ZAP roles
// on the interchange, and private ipc:// folders for the embedded default. See docs/security.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fanout/net/socket.hpp"
#include "fanout/util/expected.hpp"
#include "fanout/util/log.hpp"

namespace fanout::net {

// The two doors of the interchange; each is a ZAP domain admitting the keys of one folder.
enum class Role : std::uint8_t {
  Client,  // ZAP domain "client": keys in authorized/clients/ may submit, cancel, follow
  Pool,    // ZAP domain "pool": keys in authorized/pools/ may register and take tasks
};

const char* to_string(Role role) noexcept;

// A process's security options, from its command line.
struct Security {
  std::string keys_dir{};  // the key folder (empty: default_keys_dir())
  std::string key_name{};  // a client's or pool's key pair in keys_dir (empty: "client"/"pool")
  bool insecure = false;   // plaintext TCP; accepted on loopback addresses only
};

// True for tcp:// endpoints on 127.0.0.0/8, ::1 or localhost.
bool is_loopback_endpoint(const std::string& endpoint);

// Whether `endpoint` is Curve-encrypted under `sec`: every tcp:// endpoint unless sec.insecure.
// Error{InvalidArgument} when sec.insecure is asked for a tcp:// endpoint that is not loopback.
// ipc:// and inproc:// are never encrypted: their file mode (or process) is their protection.
[[nodiscard]] Expected<bool> wants_curve(const std::string& endpoint, const Security& sec);

// Makes `sock` a Curve server for `role` when wants_curve(endpoint), then binds it; returns the
// resolved endpoint. With Role::Pool, the socket then fills Message::user_id (the peer key's
// fingerprint). Throws Failure naming the key file when the interchange's secret key is missing
// or readable by others, or when the bind fails. A ZapHandler must already run in the same
// Context: without one, libzmq 4.3 admits every key (ZMQ_ZAP_ENFORCE_DOMAIN is a draft option).
[[nodiscard]] std::string bind_secure(Socket& sock, const std::string& endpoint,
                                      const Security& sec, Role role);

// Makes `sock` a Curve client (its own key pair: sec.key_name, default by `role`; the server's
// public key: interchange.key) when wants_curve(endpoint), then connects. Throws Failure naming
// the key file when a key is missing or readable by others.
void connect_secure(Socket& sock, const std::string& endpoint, const Security& sec, Role role);

// Prints, once per process, the warning --insecure deserves; no-op without it.
void warn_if_insecure(const Security& sec, const Logger& log);

// The interchange's ZAP handler (RFC 27): its own thread answering on inproc://zeromq.zap.01 in
// `ctx`. Admits a Curve key on the domain of `role` only when a certificate with that public
// key is in authorized/clients/ or authorized/pools/ of `keys_dir`, read again for each
// connection (removing a file revokes new connections). Refusals are counted and logged at WARN
// once per key fingerprint, for the first 16 keys refused; later keys are only counted, so that
// fresh keys per connection grow neither the log nor memory. Owned by the interchange; destroy
// it before `ctx`.
class ZapHandler final {
 public:
  // Binds the handler's socket. Throws Failure when it cannot (another handler in `ctx`).
  ZapHandler(Context& ctx, std::string keys_dir, Logger log);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Connections refused since the start (any thread).
  [[nodiscard]] std::uint64_t refused() const noexcept {
    return refused_.load(std::memory_order_relaxed);
  }

 private:
  void serve();

  struct Impl;
  std::string keys_dir_;
  Logger log_;
  std::unique_ptr<Impl> impl_;  // the REP socket
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> refused_{0};
  std::thread thread_;
};

// Files: the store, run folders and logs are their owner's only (docs/security.md).
// Narrows folder `dir` to mode 0700 (0750 with `share_with_group`). Error{Io} naming it.
[[nodiscard]] Expected<void> restrict_folder(const std::string& dir, bool share_with_group);
// Creates `path` empty with mode 0600 (0640 with `share_with_group`), and its parent folders,
// unless a regular file exists there (then it is left as it is; Db checks its owner and mode).
// An empty file is a valid SQLite store, whose -wal and -shm files SQLite creates with the
// store's mode. Never follows a link: Error{Io} naming the path when a symbolic link (dangling
// or not) or anything but a regular file is there, or when it cannot be created.
[[nodiscard]] Expected<void> create_private_file(const std::string& path, bool share_with_group);

// The ZAP handler a server binding `endpoints` needs: started when one of them is Curve-encrypted
// under `sec`, else nullptr. Throws Failure as ZapHandler does.
[[nodiscard]] std::unique_ptr<ZapHandler> make_zap_handler(
    Context& ctx, const std::vector<std::string>& endpoints, const Security& sec, Logger log);

// A fresh folder, mode 0700, for the ipc:// endpoints of a private interchange: under
// $XDG_RUNTIME_DIR when set, else under /tmp/fanout-<uid>/ (made 0700; refused when it exists
// and is not ours or is open to others). Short, since ipc paths are limited to ~107 bytes.
// Error{Io} naming the folder otherwise.
[[nodiscard]] Expected<std::string> make_private_ipc_dir();

}  // namespace fanout::net
