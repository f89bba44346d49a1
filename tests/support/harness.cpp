// Integration-test support. See harness.hpp.
#include "harness.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "fanout/net/keys.hpp"
#include "fanout/store/db.hpp"

namespace fanout::test {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& tag) {
  std::random_device rd;
  auto base = fs::temp_directory_path() /
              ("fanout-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(base);
  path_ = base.string();
}

TempDir::~TempDir() {
  if (std::getenv("FANOUT_KEEP_TMP") != nullptr) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string fanout_bin() { return env_or("FANOUT_BIN", "fanout"); }
std::string interchange_bin() { return env_or("FANOUT_INTERCHANGE_BIN", "fanout-interchange"); }
std::string pool_bin() { return env_or("FANOUT_POOL_BIN", "fanout-pool"); }
std::string python_bin() { return env_or("FANOUT_TEST_PYTHON", "python3"); }

void write_file(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string tail(const std::string& path, std::size_t lines) {
  auto all = read_lines(path);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += all[i] + "\n";
  }
  return out;
}

ChildProcess spawn(const std::vector<std::string>& argv, const std::string& out,
                   const std::string& err, const EnvList& env) {
  SpawnOptions so;
  so.argv = argv;
  so.env_set = env;
  so.stdin_file = "null";
  so.stdout_file = out;
  so.stderr_file = err;
  auto c = ChildProcess::spawn(so);
  if (!c) {
    throw std::runtime_error("cannot start " + (argv.empty() ? std::string("(nothing)") : argv[0]) +
                             ": " + c.error().message);
  }
  return std::move(*c);
}

RunResult run_capture(const std::vector<std::string>& argv, const std::string& dir,
                      const std::vector<std::pair<std::string, std::string>>& env,
                      std::chrono::seconds timeout) {
  static int counter = 0;
  ++counter;
  const std::string out = dir + "/cmd" + std::to_string(counter) + ".out";
  const std::string err = dir + "/cmd" + std::to_string(counter) + ".err";
  ChildProcess child = spawn(argv, out, err, env);
  RunResult r;
  auto st = child.wait_for(timeout);
  if (!st) {
    child.set_grace(std::chrono::milliseconds(2000));
    r.status = child.stop();
    r.status.code = -2;  // timed out
  } else {
    r.status = *st;
  }
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

RunResult fanout_run(const TempDir& dir, const std::string& job, const std::string& db,
                     const std::vector<std::string>& extra, std::chrono::seconds timeout) {
  std::vector<std::string> argv = {fanout_bin(), "run",      dir / job,    "--db",
                                   db,           "--python", python_bin(), "--quiet"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return run_capture(argv, dir.path(), {}, timeout);
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto step = std::chrono::milliseconds(2);
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(step);
    step = std::min(step * 2, std::chrono::milliseconds(50));
  }
}

std::vector<std::string> sql_column(const std::string& db, const std::string& query) {
  // The store's own read-only connection: tests read what users read with sqlite3.
  fanout::store::Db conn(db, fanout::store::Db::Mode::ReadOnly);
  conn.exec("PRAGMA busy_timeout=5000");
  fanout::store::Statement st(conn, query);
  std::vector<std::string> out;
  while (st.step()) out.emplace_back(st.column_text(0));
  return out;
}

long long sql_int(const std::string& db, const std::string& query) {
  auto col = sql_column(db, query);
  if (col.empty()) return -1;
  return std::stoll(col[0].empty() ? "0" : col[0]);
}

std::map<std::string, std::string> read_ready_file(const std::string& path) {
  std::map<std::string, std::string> kv;
  for (const auto& line : read_lines(path)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

const std::string& test_keys_dir() {
  static const std::string dir = [] {
    if (const char* e = std::getenv("FANOUT_KEYS"); e != nullptr && *e != '\0') {
      return std::string(e);
    }
    static TempDir keys("keys");  // removed at exit
    const std::string d = keys / "keys";
    auto made = fanout::net::make_key_folder(d);
    if (!made) throw std::runtime_error(made.error().message);
    auto peer = fanout::net::add_key(d, "peer", "pool");
    if (!peer) throw std::runtime_error(peer.error().message);
    fs::copy_file(fanout::net::public_key_path(d, "peer"),
                  fanout::net::authorized_clients_dir(d) + "/peer.key");
    ::setenv("FANOUT_KEYS", d.c_str(), 1);
    return d;
  }();
  return dir;
}

void Cluster::start_interchange(const std::string& dir, const std::string& db,
                                const std::vector<std::string>& extra) {
  (void)test_keys_dir();  // exported to the children
  const std::string ready = dir + "/ix.ready";
  std::error_code ec;
  fs::remove(ready, ec);
  ix_log = dir + "/interchange.log";
  SpawnOptions so;
  so.argv = {interchange_bin(), "--db", db, "--ready-file", ready, "--log-file", ix_log};
  so.argv.insert(so.argv.end(), extra.begin(), extra.end());
  so.stdin_file = "null";
  so.stderr_file = ix_log;
  auto c = ChildProcess::spawn(so);
  if (!c) throw std::runtime_error(c.error().message);
  interchange = std::move(*c);
  if (!wait_until([&] { return fs::exists(ready); }, std::chrono::seconds(20))) {
    throw std::runtime_error("interchange did not start:\n" + tail(ix_log));
  }
  auto kv = read_ready_file(ready);
  client_ep = kv["client"];
  pool_ep = kv["pool"];
}

void Cluster::restart_interchange(const std::string& dir, const std::string& db,
                                  std::vector<std::string> extra) {
  extra.insert(extra.end(), {"--client-endpoint", client_ep, "--pool-endpoint", pool_ep});
  start_interchange(dir, db, extra);
}

void Cluster::start_pool(const std::string& dir, const std::string& name, unsigned workers,
                         const std::vector<std::string>& extra) {
  const std::string log = dir + "/" + name + ".log";
  SpawnOptions so;
  so.argv = {pool_bin(),  "--interchange",         pool_ep,      "--name", name,
             "--workers", std::to_string(workers), "--log-file", log,      "--log-level",
             "debug"};
  so.argv.insert(so.argv.end(), extra.begin(), extra.end());
  so.stdin_file = "null";
  so.stderr_file = log;
  auto c = ChildProcess::spawn(so);
  if (!c) throw std::runtime_error(c.error().message);
  pools.push_back(std::move(*c));
  pool_logs.push_back(log);
}

std::string Cluster::logs() const {
  std::string s = "--- interchange log ---\n" + tail(ix_log);
  for (const auto& l : pool_logs) s += "--- " + l + " ---\n" + tail(l);
  return s;
}

void make_files(const std::string& dir, unsigned n) {
  fs::create_directories(dir);
  char name[64];
  for (unsigned i = 0; i < n; ++i) {
    std::snprintf(name, sizeof name, "file%05u.txt", i);
    std::ofstream(dir + "/" + name) << name << "\n";
  }
}

const char* const kCountingScript = R"PY(
import os, time
def run(mini_batch):
    name = os.path.basename(mini_batch[0])
    with open(os.environ["RUNS"], "a") as f:
        f.write(name + "\n")
    time.sleep(float(os.environ.get("NAP", "0.2")))
    return [name]
)PY";

}  // namespace fanout::test
