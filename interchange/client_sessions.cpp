// Client sessions. See client_sessions.hpp.
#include "interchange/client_sessions.hpp"

namespace fanout::ix {

namespace {
// A progress with nothing new goes out this often at most (each 5 s while a job runs).
constexpr std::chrono::seconds kQuietProgress{5};
}  // namespace

void ClientSessions::open(std::uint64_t job_id, Clock::time_point now) {
  live_[job_id].last_progress = now;
}

void ClientSessions::join(std::uint64_t job_id, const std::string& peer) {
  if (auto it = live_.find(job_id); it != live_.end()) it->second.clients.insert(peer);
}

ClientSessions::AttachReply ClientSessions::attach(std::uint64_t job_id, const std::string& peer) {
  if (auto it = live_.find(job_id); it != live_.end()) {
    it->second.clients.insert(peer);
    return {Attached::Live, nullptr};
  }
  if (auto r = reporting_.find(job_id); r != reporting_.end()) {
    r->second.clients.insert(peer);  // told when the report is written
    return {Attached::Reporting, nullptr};
  }
  if (auto e = ended_.find(job_id); e != ended_.end()) return {Attached::Ended, &e->second};
  return {Attached::Unknown, nullptr};
}

const ClientSet* ClientSessions::progress_due(std::uint64_t job_id, std::uint64_t finished,
                                              Clock::time_point now, bool force) {
  auto it = live_.find(job_id);
  if (it == live_.end() || it->second.clients.empty()) return nullptr;
  Session& s = it->second;
  // A quarter of the window finished since the last progress: the client gets its credit now,
  // or it would stall waiting for room to submit.
  const bool credit_due = finished - s.finished_at_last_progress >= window_ / 4;
  if (!force && !credit_due) {
    // Nothing new to tell: still once in a while, for a launcher that scales its pool jobs on
    // the idle pools it names (docs/cluster.md, section 6).
    if (finished == s.finished_at_last_progress && now - s.last_progress < kQuietProgress) {
      return nullptr;
    }
    if (now - s.last_progress < progress_interval_) return nullptr;
  }
  s.last_progress = now;
  s.finished_at_last_progress = finished;
  return &s.clients;
}

std::optional<Delivery> ClientSessions::close(proto::JobEnded ended, bool wait_for_report) {
  ClientSet clients;
  if (auto it = live_.find(ended.job_id); it != live_.end()) {
    clients = std::move(it->second.clients);
    live_.erase(it);
  }
  const auto id = ended.job_id;
  Delivery d{std::move(ended), std::move(clients)};
  if (!wait_for_report) return d;
  reporting_[id] = std::move(d);
  return std::nullopt;
}

std::optional<Delivery> ClientSessions::report_written(std::uint64_t job_id, double wall_s,
                                                       double cpu_s) {
  auto it = reporting_.find(job_id);
  if (it == reporting_.end()) return std::nullopt;
  Delivery d = std::move(it->second);
  reporting_.erase(it);
  d.ended.report_s = wall_s;
  d.ended.report_cpu_s = cpu_s;
  return d;
}

bool ClientSessions::followed_by_others(const std::string& peer) const {
  for (const auto& [id, session] : live_) {
    for (const auto& c : session.clients) {
      if (c != peer) return true;
    }
  }
  return false;
}

}  // namespace fanout::ix
