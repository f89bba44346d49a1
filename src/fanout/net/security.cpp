// CurveZMQ endpoints, the ZAP handler and private ipc folders. See security.hpp and
// docs/security.md.
#include "fanout/net/security.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "fanout/net/keys.hpp"
#include "fanout/util/fs.hpp"
#include "fanout/util/user_text.hpp"

namespace fanout::net {

namespace {

const char* const kZapEndpoint = "inproc://zeromq.zap.01";  // fixed by RFC 27
// Refused keys logged in full; refusals beyond are counted only.
constexpr std::size_t kLoggedRefusedKeys = 16;
// How long a connection's key check waits for a free descriptor (wait_for_descriptors): well
// within the handshake timeout, so that the connection is still there to be admitted.
constexpr std::chrono::milliseconds kDescriptorWait{2000};

std::string keys_dir_of(const Security& sec) {
  return sec.keys_dir.empty() ? default_keys_dir() : sec.keys_dir;
}

// "tcp://HOST:PORT" -> HOST, without IPv6 brackets ("" when not tcp://).
std::string tcp_host(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0) return {};
  std::string rest = endpoint.substr(6);
  // A connect endpoint may name its source first: "tcp://src;dst".
  if (auto semi = rest.find(';'); semi != std::string::npos) rest = rest.substr(semi + 1);
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    return close == std::string::npos ? std::string() : rest.substr(1, close - 1);
  }
  return rest.substr(0, rest.rfind(':'));
}

}  // namespace

const char* to_string(Role role) noexcept { return role == Role::Client ? "client" : "pool"; }

bool is_loopback_endpoint(const std::string& endpoint) {
  const std::string host = tcp_host(endpoint);
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8: four dotted decimal parts, the first 127.
  if (host.rfind("127.", 0) != 0) return false;
  int parts = 2;  // "127" and what follows its dot
  for (std::size_t i = 4; i < host.size(); ++i) {
    if (host[i] == '.') {
      ++parts;
    } else if (!std::isdigit(static_cast<unsigned char>(host[i]))) {
      return false;
    }
  }
  return parts == 4;
}

Expected<bool> wants_curve(const std::string& endpoint, const Security& sec) {
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  if (!sec.insecure) return true;
  if (!is_loopback_endpoint(endpoint)) {
    return Unexpected{
        Error{ErrorCode::InvalidArgument,
              "--insecure: " + endpoint +
                  " is not a loopback address (127.0.0.0/8, ::1, localhost); plaintext is "
                  "accepted only there. Use keys (`fanout keygen`, docs/security.md)"}};
  }
  return false;
}

void warn_if_insecure(const Security& sec, const Logger& log) {
  if (!sec.insecure) return;
  log->warn(
      "--insecure: tcp:// endpoints are plaintext and unauthenticated; any local user can "
      "connect to them");
}

std::string bind_secure(Socket& sock, const std::string& endpoint, const Security& sec, Role role) {
  auto curve = wants_curve(endpoint, sec);
  if (!curve) throw Failure(curve.error());
  if (*curve) {
    const std::string dir = keys_dir_of(sec);
    const std::string file = secret_key_path(dir, "interchange");
    auto pair = read_secret_key(file);
    if (!pair) throw Failure(pair.error());
    void* s = sock.raw();
    int on = 1;
    unsigned char raw[32];
    const std::string domain = to_string(role);
    if (zmq_setsockopt(s, ZMQ_CURVE_SERVER, &on, sizeof on) != 0 ||
        zmq_z85_decode(raw, pair->secret_key.c_str()) == nullptr ||
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, raw, sizeof raw) != 0 ||
        zmq_setsockopt(s, ZMQ_ZAP_DOMAIN, domain.data(), domain.size()) != 0) {
      throw Failure(ErrorCode::Io, "curve server " + endpoint + ": " + zmq_strerror(zmq_errno()));
    }
    if (role == Role::Pool) sock.set_read_user_id(true);
  }
  return sock.bind(endpoint);
}

void connect_secure(Socket& sock, const std::string& endpoint, const Security& sec, Role role) {
  auto curve = wants_curve(endpoint, sec);
  if (!curve) throw Failure(curve.error());
  if (*curve) {
    const std::string dir = keys_dir_of(sec);
    const std::string name =
        sec.key_name.empty() ? std::string(role == Role::Client ? "client" : "pool") : sec.key_name;
    // Whoever may replace interchange.key can pose as the interchange to us.
    if (auto ok = check_key_path(public_key_path(dir, "interchange"), KeyPathKind::PublicKey);
        !ok && ok.error().code != ErrorCode::NotFound) {
      throw Failure(ok.error());
    }
    auto server = read_public_key(public_key_path(dir, "interchange"));
    if (!server) {
      throw Failure(ErrorCode::NotFound,
                    "cannot connect to " + endpoint + ": no interchange key (" +
                        server.error().message +
                        "); copy the key folder made by `fanout keygen`, see docs/security.md");
    }
    auto own = read_secret_key(secret_key_path(dir, name));
    if (!own) throw Failure(own.error());
    void* s = sock.raw();
    unsigned char srv[32], pub[32], sec_raw[32];
    if (zmq_z85_decode(srv, server->c_str()) == nullptr ||
        zmq_z85_decode(pub, own->public_key.c_str()) == nullptr ||
        zmq_z85_decode(sec_raw, own->secret_key.c_str()) == nullptr ||
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, srv, sizeof srv) != 0 ||
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, sizeof pub) != 0 ||
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec_raw, sizeof sec_raw) != 0) {
      throw Failure(ErrorCode::Io, "curve client " + endpoint + ": " + zmq_strerror(zmq_errno()));
    }
  }
  sock.connect(endpoint);
}

// ---------------------------------------------------------------- ZAP

struct ZapHandler::Impl {
  zmq::socket_t sock;
};

ZapHandler::ZapHandler(Context& ctx, std::string keys_dir, Logger log)
    : keys_dir_(std::move(keys_dir)), log_(std::move(log)) {
  // A key folder others may write lets them authorise their own key: refuse to start on it
  // rather than admit whatever they put there (serve() checks again for each connection).
  if (auto ok = check_key_folders(keys_dir_); !ok && ok.error().code != ErrorCode::NotFound) {
    throw Failure(ok.error());
  }
  try {
    auto& zctx = *static_cast<zmq::context_t*>(ctx.raw());
    impl_ = std::make_unique<Impl>(Impl{zmq::socket_t(zctx, zmq::socket_type::rep)});
    impl_->sock.set(zmq::sockopt::linger, 0);
    impl_->sock.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw Failure(ErrorCode::Io,
                  std::string("ZAP handler: bind ") + kZapEndpoint + ": " + e.what());
  }
  // The socket moves to the thread here; thread creation orders the accesses (zguide: sockets
  // may migrate between threads with a full memory barrier).
  thread_ = std::thread([this] { serve(); });
}

ZapHandler::~ZapHandler() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

namespace {

// True when a certificate in role folder `dir` of key folder `keys_dir` carries the public key
// `z85`. A folder on the way or a certificate that fails check_key_path() authorises nothing:
// `unsafe` gets its error (the caller logs it).
template <typename OnUnsafe>
bool authorised(const std::string& keys_dir, const std::string& dir, const std::string& z85,
                OnUnsafe&& unsafe) {
  for (const std::string& folder : {keys_dir, keys_dir + "/authorized", dir}) {
    if (auto ok = check_key_path(folder, KeyPathKind::Folder); !ok) {
      if (ok.error().code != ErrorCode::NotFound) unsafe(ok.error());
      return false;
    }
  }
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (auto ok = check_key_path(dir + "/" + name, KeyPathKind::PublicKey); !ok) {
      unsafe(ok.error());
      continue;
    }
    auto key = read_public_key(dir + "/" + name);
    if (key && *key == z85) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

// Waits, up to `limit`, until this process can open two more files (the key folder and a key):
// while a flood of connections holds every descriptor (the interchange closes them at its
// handshake timeout), the folder could not be read and a listed key would be refused. Returns
// at once when a descriptor is free, or the error is another.
void wait_for_descriptors(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int b = a < 0 ? -1 : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    const int err = errno;
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
    if (b >= 0 || (err != EMFILE && err != ENFILE)) return;
    if (std::chrono::steady_clock::now() >= end) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string part_text(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

}  // namespace

void ZapHandler::serve() {
  auto& s = impl_->sock;
  std::set<std::string> warned;         // fingerprints refused and logged once
  std::set<std::string> unsafe_warned;  // unsafe key paths, logged once each
  auto unsafe = [&](const Error& e) {
    if (unsafe_warned.insert(e.message).second) {
      log_->warn("ZAP: skipped: {} (further skips of it are not logged)", e.message);
    }
  };
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop_.load(std::memory_order_relaxed)) {
    try {
      // Poll with a timeout so that the destructor's stop is seen within 100 ms.
      if (zmq::poll(&item, 1, std::chrono::milliseconds(100)) == 0) continue;
      // RFC 27 request: version, request id, domain, address, routing id, mechanism, credentials.
      std::vector<zmq::message_t> req;
      do {
        zmq::message_t part;
        if (!s.recv(part, zmq::recv_flags::none)) break;
        req.push_back(std::move(part));
      } while (req.back().more());
      const std::string request_id = req.size() > 1 ? part_text(req[1]) : std::string();
      std::string status = "400", text = "refused", user_id;
      std::string domain = req.size() > 2 ? part_text(req[2]) : std::string();
      std::string address = req.size() > 3 ? part_text(req[3]) : std::string();
      std::string fp;
      if (req.size() >= 7 && part_text(req[0]) == "1.0" && part_text(req[5]) == "CURVE" &&
          req[6].size() == 32) {
        unsigned char raw[32];
        std::memcpy(raw, req[6].data(), 32);
        fp = fingerprint_of(raw);
        // Each door admits its own folder only: a pool key cannot submit, a client key cannot
        // register. The folder is read again for each connection: removing a file revokes.
        std::string dir;
        if (domain == "client") dir = authorized_clients_dir(keys_dir_);
        if (domain == "pool") dir = authorized_pools_dir(keys_dir_);
        if (!dir.empty() && !fp.empty()) wait_for_descriptors(kDescriptorWait);
        if (!dir.empty() && !fp.empty() && authorised(keys_dir_, dir, fp, unsafe)) {
          status = "200";
          text = "OK";
          user_id = fp;
        }
      }
      if (status != "200") {
        refused_.fetch_add(1, std::memory_order_relaxed);
        // Logged once per key, for the first kLoggedRefusedKeys keys only: a peer making a fresh
        // key per connection must grow neither the log nor this set. The rest are counted
        // ("refused peers" in the interchange's stats line).
        if (warned.size() < kLoggedRefusedKeys && warned.insert(fp).second) {
          log_->warn(
              "refused a {} connection from {}: key {} is not in {}/authorized/{}s/ (further "
              "refusals of this key{} are counted)",
              domain.empty() ? "?" : domain, address, fp.empty() ? "(none)" : fp, keys_dir_,
              domain == "pool" ? "pool" : "client",
              warned.size() == kLoggedRefusedKeys ? ", and of any other key from now on," : "");
        }
      }
      // RFC 27 reply: version, request id, status code, status text, user id, metadata.
      s.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
      s.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
      s.send(zmq::buffer(status), zmq::send_flags::sndmore);
      s.send(zmq::buffer(text), zmq::send_flags::sndmore);
      s.send(zmq::buffer(user_id), zmq::send_flags::sndmore);
      s.send(zmq::message_t(), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() != EINTR) log_->warn("ZAP handler: {}", e.what());
    }
  }
}

std::unique_ptr<ZapHandler> make_zap_handler(Context& ctx,
                                             const std::vector<std::string>& endpoints,
                                             const Security& sec, Logger log) {
  for (const auto& ep : endpoints) {
    // A refused --insecure is reported by bind_secure, with its endpoint.
    if (auto curve = wants_curve(ep, sec); curve && *curve) {
      return std::make_unique<ZapHandler>(ctx, keys_dir_of(sec), std::move(log));
    }
  }
  return nullptr;
}

// ---------------------------------------------------------------- private files

namespace {

// What create_private_file() accepts at a path that exists: a regular file, whose owner and mode
// Db checks when it opens it (store/file_trust.hpp); never a link or anything else.
Expected<void> existing_file(const std::string& path, const struct stat& st) {
  if (S_ISLNK(st.st_mode)) {
    return Unexpected{
        Error{ErrorCode::Io, path + ": is a symbolic link (owner " + describe_uid(st.st_uid) +
                                 "); fanout does not follow links to a store: remove it, or name "
                                 "the file it leads to"}};
  }
  if (!S_ISREG(st.st_mode)) {
    return Unexpected{Error{ErrorCode::Io, path + ": exists and is not a regular file"}};
  }
  return {};
}

}  // namespace

Expected<void> restrict_folder(const std::string& dir, bool share_with_group) {
  if (::chmod(dir.c_str(), share_with_group ? 0750 : 0700) != 0) {
    return Unexpected{Error{ErrorCode::Io, "chmod " + dir + ": " + std::strerror(errno)}};
  }
  return {};
}

Expected<void> create_private_file(const std::string& path, bool share_with_group) {
  // lstat, never stat: a link at the store's path is refused, not followed. A root interchange
  // once created the link's target (mode 0644), taking O_EXCL's EEXIST, which a link (dangling
  // too) also gives, for "another process made it".
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return existing_file(path, st);
  const auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (auto r = make_dirs(path.substr(0, slash)); !r) return r;
  }
  const mode_t mode = share_with_group ? 0640 : 0600;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    const int err = errno;
    // Something appeared at the path since the lstat: another process of ours made the store,
    // or another user planted a link. Look again.
    if (err == EEXIST && ::lstat(path.c_str(), &st) == 0) return existing_file(path, st);
    return Unexpected{Error{ErrorCode::Io, "create " + path + ": " + std::strerror(err)}};
  }
  (void)::fchmod(fd, mode);  // whatever the umask
  ::close(fd);
  return {};
}

// ---------------------------------------------------------------- private ipc folders

Expected<std::string> make_private_ipc_dir() {
  const uid_t uid = ::getuid();
  std::string base;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x != '\0') {
    struct stat st {};
    // Only a runtime folder that is ours and closed to others (as the spec requires) is used.
    if (::stat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid && (st.st_mode & 077) == 0) {
      base = x;
    }
  }
  if (base.empty()) {
    base = "/tmp/fanout-" + std::to_string(uid);
    if (::mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) {
      return Unexpected{Error{ErrorCode::Io, "mkdir " + base + ": " + std::strerror(errno)}};
    }
    struct stat st {};
    // lstat: a symlink planted by another user in /tmp is refused, not followed.
    if (::lstat(base.c_str(), &st) != 0) {
      return Unexpected{Error{ErrorCode::Io, base + ": " + std::strerror(errno)}};
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077) != 0) {
      return Unexpected{
          Error{ErrorCode::Io, base + " is not a folder of ours closed to others (owner, mode "
                                      "0700); remove it or set XDG_RUNTIME_DIR"}};
    }
  }
  std::string tmpl = base + "/fo-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {  // mode 0700
    return Unexpected{Error{ErrorCode::Io, "mkdtemp " + tmpl + ": " + std::strerror(errno)}};
  }
  return tmpl;
}

}  // namespace fanout::net
