// fanout wait, cancel and resume. See follow.hpp.
#include "client/follow.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "client/embedded.hpp"
#include "client/progress.hpp"
#include "fanout/net/socket.hpp"
#include "fanout/protocol/codec.hpp"
#include "fanout/store/db.hpp"
#include "fanout/store/reader.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

namespace fs = std::filesystem;

namespace {

// How long `wait` keeps trying an interchange that does not answer before it gives up.
constexpr auto kNoAnswerLimit = std::chrono::seconds(60);
constexpr auto kProbeEvery = std::chrono::seconds(2);

bool is_ended(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

std::optional<store::JobSummary> job_in_store(const std::string& db, std::uint64_t job_id,
                                              std::string& error) {
  try {
    store::StoreReader reader(db);
    auto j = reader.job(job_id);
    if (!j) error = fmt::format("{}: no job {}", db, job_id);
    return j;
  } catch (const Failure& f) {
    error = f.what();
    return std::nullopt;
  }
}

int report_from_store(const store::JobSummary& j) {
  proto::JobEnded e;
  e.job_id = j.id;
  e.state = j.state;
  e.reason = j.reason;
  e.progress.job_id = j.id;
  e.progress.total = j.total;
  e.progress.submitted = j.total;
  e.progress.succeeded = j.succeeded;
  e.progress.failed = j.failed;
  e.progress.items_succeeded = j.items_succeeded;
  e.progress.items_failed = j.items_failed;
  return report_ended(e, j.output_path, j.log_dir);
}

// The client endpoint recorded in the job's run folder (the parent of its logs/ folder).
std::string endpoint_from_run_dir(const std::string& log_dir) {
  if (log_dir.empty()) return {};
  const std::string ready = fs::path(log_dir).parent_path().string() + "/interchange.ready";
  auto text = read_file(ready);
  if (!text) return {};
  for (std::size_t pos = 0; pos < text->size();) {
    auto nl = text->find('\n', pos);
    std::string line = text->substr(pos, nl - pos);
    pos = nl == std::string::npos ? text->size() : nl + 1;
    if (line.rfind("client=", 0) == 0) return line.substr(7);
  }
  return {};
}

// A number or string value of `key` in a flat JSON object written by settings_json(); "" when
// absent.
std::string json_value(const std::string& json, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  auto pos = json.find(needle);
  if (pos == std::string::npos) return {};
  pos += needle.size();
  if (pos < json.size() && json[pos] == '"') {
    auto end = json.find('"', pos + 1);
    return end == std::string::npos ? std::string() : json.substr(pos + 1, end - pos - 1);
  }
  auto end = json.find_first_of(",}", pos);
  return json.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

std::uint32_t json_u32(const std::string& json, const std::string& key, std::uint32_t fallback) {
  const std::string v = json_value(json, key);
  if (v.empty()) return fallback;
  try {
    return static_cast<std::uint32_t>(std::stoul(v));
  } catch (const std::exception&) {
    return fallback;
  }
}

// Attaches to (or cancels) job_id at `endpoint` and follows it to its end, reattaching when the
// interchange restarts. `emb`, when set, is the private interchange of `fanout resume`.
int follow_on(const std::string& endpoint, std::uint64_t job_id, const FollowOptions& opts,
              Embedded* emb, const Logger& log) {
  net::Context ctx;
  net::Socket sock(ctx, net::Socket::Kind::Dealer);
  sock.connect(endpoint);
  net::Poller poller;
  poller.add(sock);
  net::Message msg;
  ProgressPrinter printer(opts.quiet ? ProgressMode::Quiet : ProgressMode::Human);
  if (opts.cancel) {
    (void)sock.send(proto::encode(proto::CancelJob{job_id, "cancelled by fanout cancel"}), false);
  }
  (void)sock.send(proto::encode(proto::Attach{job_id}), false);
  auto last_heard = Clock::now();
  auto last_probe = last_heard;
  auto last_answer = last_heard;
  std::optional<proto::JobEnded> ended;
  std::string output_path, log_dir, store_error;
  if (auto j = job_in_store(opts.db, job_id, store_error)) {
    output_path = j->output_path;
    log_dir = j->log_dir;
  }
  while (!ended) {
    poller.wait(std::chrono::milliseconds(200));
    while (sock.recv(msg)) {
      last_heard = Clock::now();
      last_answer = last_heard;
      auto h = proto::read_header(msg.frame);
      if (!h) continue;
      if (h->type == proto::MsgType::JobProgress) {
        if (auto m = proto::decode<proto::JobProgress>(msg.frame); m && m->job_id == job_id) {
          printer.update(*m);
        }
      } else if (h->type == proto::MsgType::JobEnded) {
        if (auto m = proto::decode<proto::JobEnded>(msg.frame); m && m->job_id == job_id) {
          ended = *m;
        }
      } else if (h->type == proto::MsgType::Reject) {
        auto m = proto::decode<proto::Reject>(msg.frame);
        // Not known to this interchange: it may have ended under another one.
        std::string err;
        if (auto j = job_in_store(opts.db, job_id, err); j && is_ended(j->state)) {
          printer.finish();
          return report_from_store(*j);
        }
        printer.finish();
        std::fprintf(stderr, "error: interchange at %s: %s\n", endpoint.c_str(),
                     m ? m->reason.c_str() : "rejected");
        return 2;
      }
    }
    if (ended) break;
    if (emb != nullptr) {
      if (auto dead = emb->dead_child(); !dead.empty()) {
        printer.finish();
        std::fprintf(stderr, "error: %s\n", dead.c_str());
        return 3;
      }
    }
    const auto now = Clock::now();
    if (now - last_heard >= kProbeEvery && now - last_probe >= kProbeEvery) {
      last_probe = now;
      // The job may have ended while no interchange was there to tell us (an embedded one
      // exits once idle): the store has the final word.
      std::string err;
      if (auto j = job_in_store(opts.db, job_id, err); j && is_ended(j->state)) {
        printer.finish();
        return report_from_store(*j);
      }
      if (opts.cancel) {
        (void)sock.send(proto::encode(proto::CancelJob{job_id, "cancelled by fanout cancel"}));
      }
      (void)sock.send(proto::encode(proto::Attach{job_id}));
    }
    if (now - last_answer > kNoAnswerLimit) {
      printer.finish();
      std::fprintf(stderr,
                   "error: no answer from the interchange at %s for %lld s; if it is gone, "
                   "resume the job with: fanout resume %llu --db %s\n",
                   endpoint.c_str(), static_cast<long long>(kNoAnswerLimit.count()),
                   static_cast<unsigned long long>(job_id), opts.db.c_str());
      return 3;
    }
  }
  printer.update(ended->progress, true);
  printer.finish();
  log->debug("job {} ended: {}", job_id, ended->state);
  return report_ended(*ended, output_path, log_dir);
}

}  // namespace

void write_job_pointer(const std::string& run_dir, const std::string& endpoint,
                       std::uint64_t job_id) {
  const std::string path = run_dir + "/interchange.ready";
  if (fs::exists(path)) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "client=" << endpoint << "\njob=" << job_id << "\n";
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

int report_ended(const proto::JobEnded& ended, const std::string& output_path,
                 const std::string& log_dir) {
  const auto& p = ended.progress;
  std::fprintf(stderr,
               "fanout: job %llu %s: %s\n  mini-batches: %llu succeeded, %llu failed of %llu; "
               "items: %llu succeeded, %llu failed; failed attempts: %llu\n",
               static_cast<unsigned long long>(ended.job_id), ended.state.c_str(),
               ended.reason.c_str(), static_cast<unsigned long long>(p.succeeded),
               static_cast<unsigned long long>(p.failed),
               static_cast<unsigned long long>(p.submitted),
               static_cast<unsigned long long>(p.items_succeeded),
               static_cast<unsigned long long>(p.items_failed),
               static_cast<unsigned long long>(p.attempts_failed));
  if (!output_path.empty()) std::fprintf(stderr, "  output: %s\n", output_path.c_str());
  if (!log_dir.empty()) std::fprintf(stderr, "  logs: %s\n", log_dir.c_str());
  return ended.state == "succeeded" ? 0 : 1;
}

int follow_job(std::uint64_t job_id, const FollowOptions& opts, Logger log) {
  std::string error;
  auto job = job_in_store(opts.db, job_id, error);
  if (job && is_ended(job->state)) {
    if (opts.cancel) {
      std::fprintf(stderr, "fanout: job %llu already ended\n",
                   static_cast<unsigned long long>(job_id));
    }
    return report_from_store(*job);
  }
  std::string endpoint = opts.interchange;
  if (endpoint.empty()) {
    if (!job) {
      std::fprintf(stderr, "error: %s\n", error.c_str());
      return 2;
    }
    endpoint = endpoint_from_run_dir(job->log_dir);
    if (endpoint.empty()) {
      std::fprintf(stderr,
                   "error: job %llu: no interchange.ready beside %s; pass --interchange, or "
                   "resume the job with: fanout resume %llu --db %s\n",
                   static_cast<unsigned long long>(job_id), job->log_dir.c_str(),
                   static_cast<unsigned long long>(job_id), opts.db.c_str());
      return 3;
    }
  }
  return follow_on(endpoint, job_id, opts, nullptr, log);
}

int resume_job(std::uint64_t job_id, const ResumeOptions& opts, Logger log) {
  std::string error;
  auto job = job_in_store(opts.db, job_id, error);
  if (!job) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 2;
  }
  if (is_ended(job->state)) {
    std::fprintf(stderr, "fanout: job %llu already ended; nothing to resume\n",
                 static_cast<unsigned long long>(job_id));
    return report_from_store(*job);
  }
  // The settings the job was submitted with say how to run its pools.
  std::string settings;
  try {
    store::Db conn(opts.db, store::Db::Mode::ReadOnly);
    conn.exec("PRAGMA busy_timeout=5000");
    store::Statement st(conn, "SELECT coalesce(settings, '{}') FROM jobs WHERE id = ?1");
    st.bind(1, job_id);
    if (st.step()) settings = std::string(st.column_text(0));
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return 2;
  }
  config::JobConfig cfg;
  cfg.name = job->name;
  cfg.fanout.prefetch = json_u32(settings, "prefetch", 0);
  cfg.fanout.poll_ms = json_u32(settings, "poll_ms", 10);
  cfg.fanout.heartbeat_period_ms = json_u32(settings, "heartbeat_period_ms", 2000);
  cfg.fanout.heartbeat_threshold_ms = json_u32(settings, "heartbeat_threshold_ms", 10000);
  if (auto lvl = json_value(settings, "logging_level"); !lvl.empty()) cfg.logging_level = lvl;
  const std::uint32_t workers = opts.workers > 0
                                    ? opts.workers
                                    : json_u32(settings, "max_concurrency_per_instance",
                                               std::max(1u, std::thread::hardware_concurrency()));
  const std::uint32_t pools =
      opts.pools > 0 ? opts.pools : std::max(1u, json_u32(settings, "instance_count", 1));
  std::string python = opts.python;
  if (python.empty()) python = json_value(settings, "python");
  const std::string run_dir = fs::path(job->log_dir).parent_path().string();
  if (!opts.quiet) {
    std::fprintf(stderr, "fanout: resuming job %llu (%s) on %s, %u pool(s) x %u workers\n",
                 static_cast<unsigned long long>(job_id), job->name.c_str(), opts.db.c_str(), pools,
                 workers);
  }
  std::optional<Embedded> emb;
  try {
    emb.emplace(cfg, opts.db, run_dir, workers, pools, python, log);
  } catch (const Failure& f) {
    std::fprintf(stderr, "error: %s\n", f.what());
    return 3;
  }
  FollowOptions fo;
  fo.db = opts.db;
  fo.quiet = opts.quiet;
  const int rc = follow_on(emb->client_endpoint(), job_id, fo, &*emb, log);
  {
    // Other jobs the private interchange resumed stay unfinished in the store for a later resume.
    net::Context ctx;
    net::Socket sock(ctx, net::Socket::Kind::Dealer);
    sock.connect(emb->client_endpoint());
    (void)sock.send(proto::encode(proto::Shutdown{"fanout resume done", emb->shutdown_token()}));
    sock.set_linger(std::chrono::milliseconds(500));
  }
  emb->stop();
  return rc;
}

}  // namespace fanout::client
