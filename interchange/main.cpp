// fanout-interchange: parses the CLI, sets up logging, runs the Interchange.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "fanout/net/security.hpp"
#include "fanout/protocol/exit_codes.hpp"
#include "fanout/store/owner_lock.hpp"
#include "fanout/util/cli_help.hpp"
#include "fanout/util/log.hpp"
#include "fanout/util/memory.hpp"
#include "interchange/interchange.hpp"

namespace {
fanout::ix::Interchange* g_ix = nullptr;
void on_signal(int) {
  if (g_ix != nullptr) g_ix->stop();
}

// What the command line sets besides Options.
struct CliValues {
  std::string log_level = "info";
  std::string log_file{};
  unsigned hb_ms = 2000;
  unsigned hb_threshold_ms = 10000;
  unsigned stats_ms = 30000;
  bool share_with_group = false;
};

void add_options(CLI::App& app, fanout::ix::Options& opts, CliValues& v) {
  app.add_option("--client-endpoint", opts.client_endpoint, "ZeroMQ endpoint for clients")
      ->capture_default_str();
  app.add_option("--pool-endpoint", opts.pool_endpoint, "ZeroMQ endpoint for pools")
      ->capture_default_str();
  app.add_option("--db", opts.db_path, "SQLite store")->required();
  app.add_option("--ready-file", opts.ready_file, "write bound endpoints here once ready");
  app.add_option("--heartbeat-period-ms", v.hb_ms, "heartbeat period towards pools")
      ->check(CLI::Range(1u, 3600000u))
      ->capture_default_str();
  app.add_option("--heartbeat-threshold-ms", v.hb_threshold_ms,
                 "a pool silent this long is lost (must exceed the period)")
      ->check(CLI::Range(1u, 86400000u))
      ->capture_default_str();
  app.add_option("--stats-interval-ms", v.stats_ms, "log a stats line this often")
      ->capture_default_str();
  app.add_option("--window", opts.window, "mini-batches a client may queue per job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--log-level", v.log_level, "log level")
      ->check(
          CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "critical", "off"},
                        CLI::ignore_case))
      ->capture_default_str();
  app.add_option("--log-file", v.log_file, "append logs here instead of stderr");
  app.add_option("--keys", opts.security.keys_dir,
                 "key folder for Curve on tcp:// endpoints (default: $FANOUT_KEYS, else "
                 "~/.config/fanout/keys; see docs/security.md)");
  app.add_flag("--insecure", opts.security.insecure,
               "plaintext, unauthenticated tcp:// (loopback addresses only)");
  app.add_option("--write-root", opts.write_roots,
                 "a folder in which clients may make this interchange write (a job's output file "
                 "and logs; repeatable; default: the store's folder; see docs/security.md)");
  app.add_flag("--share-with-group", v.share_with_group,
               "create the store readable by the group too (default: its owner only)");
  app.add_option("--metrics-listen", opts.metrics_listen,
                 "serve Prometheus metrics on HOST:PORT at /metrics (docs/observability.md)");
  app.add_flag("--exit-when-idle", opts.exit_when_idle,
               "embedded mode: exit once the last job ended");
  app.add_option("--reopen-failed", opts.reopen_failed,
                 "before resuming: put this job's failed mini-batches back to pending and the job "
                 "back to running (fanout resume --failed; repeatable)")
      ->check(CLI::PositiveNumber);
}

}  // namespace

int main(int argc, char** argv) {
  fanout::keep_freed_memory();
  // Named, so help and the man page say fanout-interchange, never the path it was started by.
  CLI::App app{"fanout-interchange: brokers mini-batches between clients and worker pools",
               "fanout-interchange"};
  app.set_version_flag("--version", FANOUT_VERSION);
  app.formatter(std::make_shared<fanout::HelpFormatter>());  // 80 columns, as fanout's
  fanout::ix::Options opts;
  CliValues v;
  add_options(app, opts, v);
  fanout::value_names(app, {{"--client-endpoint", "ENDPOINT"},
                            {"--pool-endpoint", "ENDPOINT"},
                            {"--db", "PATH"},
                            {"--ready-file", "PATH"},
                            {"--log-file", "PATH"},
                            {"--keys", "DIR"},
                            {"--write-root", "DIR"},
                            {"--metrics-listen", "ADDR"},
                            {"--reopen-failed", "JOB"}});
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every command-line error exits 2 (README, exit status).
    return app.exit(e) == 0 ? fanout::proto::kExitOk : fanout::proto::kExitUsage;
  }

  auto level = fanout::parse_log_level(v.log_level);
  if (!level) {
    std::fprintf(stderr, "error: --log-level: %s\n", level.error().message.c_str());
    return fanout::proto::kExitUsage;
  }
  if (v.hb_ms == 0 || v.hb_threshold_ms <= v.hb_ms) {
    std::fprintf(stderr, "error: --heartbeat-threshold-ms must exceed --heartbeat-period-ms > 0\n");
    return fanout::proto::kExitUsage;
  }
  if (const char* token = std::getenv("FANOUT_SHUTDOWN_TOKEN"); token != nullptr) {
    opts.shutdown_token = token;
  }
  opts.heartbeat_period = std::chrono::milliseconds(v.hb_ms);
  opts.heartbeat_threshold = std::chrono::milliseconds(v.hb_threshold_ms);
  opts.stats_interval = std::chrono::milliseconds(v.stats_ms);
  auto log = fanout::make_logger("interchange", *level, v.log_file, /*threaded=*/true);
  fanout::net::warn_if_insecure(opts.security, log);
  if (auto r = fanout::net::create_private_file(opts.db_path, v.share_with_group); !r) {
    log->critical("{}", r.error().message);
    return fanout::proto::kExitRuntime;
  }
  // One live interchange per store, taken before anything binds; exit code 4 says the store is
  // owned by another one (an embedded `fanout run` then attaches to it:
  // client/launch/embedded.cpp).
  auto owner = fanout::store::OwnerLock::acquire(opts.db_path);
  if (!owner) {
    log->critical("{}", owner.error().message);
    return owner.error().code == fanout::ErrorCode::State ? fanout::proto::kExitStoreOwned
                                                          : fanout::proto::kExitRuntime;
  }
  opts.owner = &*owner;
  try {
    fanout::ix::Interchange ix(opts, log);
    g_ix = &ix;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGPIPE, SIG_IGN);
    int rc = ix.run();
    g_ix = nullptr;
    return rc;
  } catch (const std::exception& e) {
    log->critical("{}", e.what());
    return fanout::proto::kExitRuntime;
  }
}
