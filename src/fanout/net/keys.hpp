// CurveZMQ key pairs and the key folder made by `fanout keygen`. See docs/security.md.
// Files use ZeroMQ's certificate text format (zcert): NAME.key holds the public key,
// NAME.key_secret both keys; both in Z85 (40 characters).
#pragma once

#include <cstdint>
#include <string>

#include "fanout/util/expected.hpp"

namespace fanout::net {

// A Curve key pair in Z85 text (40 characters each). secret_key is empty for a public key.
struct KeyPair {
  std::string public_key{};
  std::string secret_key{};
};

// The key folder: $FANOUT_KEYS, else $XDG_CONFIG_HOME/fanout/keys, else ~/.config/fanout/keys.
std::string default_keys_dir();

// The files of key NAME in `dir`: DIR/NAME.key and DIR/NAME.key_secret.
std::string public_key_path(const std::string& dir, const std::string& name);
std::string secret_key_path(const std::string& dir, const std::string& name);
// The folders of authorised public keys, one per role.
std::string authorized_clients_dir(const std::string& dir);
std::string authorized_pools_dir(const std::string& dir);

// A fresh key pair (zmq_curve_keypair). Error{Io} when libzmq was built without Curve.
[[nodiscard]] Expected<KeyPair> new_key_pair();

// Writes a public certificate (mode 0644) or, when pair.secret_key is set, a secret one (mode
// 0600, created so: never readable by others, not even for a moment). Error{Io} naming the file
// when it exists already or cannot be written.
[[nodiscard]] Expected<void> write_certificate(const std::string& path, const KeyPair& pair);

// Reads the public key of a certificate. Error{NotFound} when missing, Error{InvalidArgument}
// naming the file when it holds no valid `public-key`.
[[nodiscard]] Expected<std::string> read_public_key(const std::string& path);

// Reads a secret certificate, refusing it (Error{InvalidArgument} naming the file and the
// `chmod 600` that fixes it) when group or others may read it, as ssh does, and when it or its
// folder fails check_key_path() (another owner, writable by others).
[[nodiscard]] Expected<KeyPair> read_secret_key(const std::string& path);

// Error{InvalidArgument} naming `path` when group or others may read it; Error{NotFound} when
// it does not exist.
[[nodiscard]] Expected<void> check_owner_only(const std::string& path);

// What a path checked by check_key_path() holds.
enum class KeyPathKind : std::uint8_t {
  Folder,     // the key folder, authorized/, authorized/clients/, authorized/pools/
  PublicKey,  // a public certificate: interchange.key, authorized/*/*
  SecretKey,  // a secret certificate (NAME.key_secret)
};

// Whether `path` (symbolic links followed) may be trusted, as ssh checks ~/.ssh: whoever may
// write a key folder or a public key can authorise a key or swap the interchange's. A folder or
// public key must be owned by the running (effective) user or root and not writable by group
// or others; a secret key must be owned by the running user and neither readable nor writable
// by group or others. Error{NotFound} when it is missing; Error{InvalidArgument} naming the
// path, its owner and mode, and the command that fixes it (chmod or chown) otherwise.
[[nodiscard]] Expected<void> check_key_path(const std::string& path, KeyPathKind kind);

// check_key_path() over the folders of the key folder `dir` that exist: `dir`, authorized/,
// authorized/clients/ and authorized/pools/ (a missing one authorises nothing). The first
// failure, as check_key_path() words it; Error{NotFound} when `dir` itself is missing.
[[nodiscard]] Expected<void> check_key_folders(const std::string& dir);

// What identifies a key in logs, the store and ZAP's User-Id: its public key in Z85, the text
// found in its certificate (so `grep -r FINGERPRINT authorized/` finds the file).
std::string fingerprint_of(const unsigned char (&raw_public_key)[32]);

// Makes the key folder: the interchange's, one client's (`client`) and one pool's (`pool`)
// key pairs, the two public ones authorised. The folder is mode 0700. Error{Io} naming the file
// when a key exists already (keys are never overwritten) or cannot be written.
[[nodiscard]] Expected<void> make_key_folder(const std::string& dir);

// Adds a key pair NAME to an existing key folder and authorises it for `role` ("client" or
// "pool"). Error{InvalidArgument} for a bad name, Error{Io} as above.
[[nodiscard]] Expected<void> add_key(const std::string& dir, const std::string& name,
                                     const std::string& role);

}  // namespace fanout::net
