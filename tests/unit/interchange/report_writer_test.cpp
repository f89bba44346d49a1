// Tests for ReportWriter (interchange/report_writer.hpp) over a real store: the report a job's
// attempts build while it runs, handed on by the store's writer after each commit, is the report
// written in one pass from the store afterwards (report::write_job_report, what `fanout report`
// runs), byte for byte; and when the thread cannot follow (too many attempts held above a hole,
// or handed on and not taken) it falls back to that one pass.
#include "interchange/report_writer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "../store/store_fixtures.hpp"
#include "fanout/report/job_report.hpp"
#include "fanout/store/task_store.hpp"
#include "scratch_dir.hpp"

using namespace fanout::test;  // NOLINT: the store fixtures
using fanout::ix::ReportWriter;
using fanout::store::TaskStore;
namespace proto = fanout::proto;
namespace fs = std::filesystem;

namespace {

// The interchange's wiring, without its sockets: the store hands each commit to the writer.
struct Bed {
  explicit Bed(ReportWriter::Limits limits)
      : db(dir.file("fanout.db")),
        logs(dir.file("logs")),
        store(db, quiet_logger()),
        reports(db, limits) {
    store.on_attempts_committed(
        [this](std::vector<fanout::store::CommittedAttempt>& b) { reports.committed(b); });
  }
  ~Bed() { store.on_attempts_committed(nullptr); }

  ReportWriter::Done end_job(std::uint64_t job_id) {
    store.finish_job(job_id, "succeeded", "", 2000.0);
    store.flush();
    reports.submit(job_id, logs);
    reports.wait_idle();
    auto done = reports.take_done();
    REQUIRE(done.size() == 1);
    return done[0];
  }

  ScratchDir dir;
  std::string db, logs;
  TaskStore store;
  ReportWriter reports;
};

AttemptRecord attempt(std::uint64_t id, std::uint64_t job, std::uint64_t index, std::uint32_t tries,
                      bool ok, const std::string& state) {
  auto rec = make_attempt(id, job, index, tries,
                          ok ? proto::AttemptStatus::RunDone : proto::AttemptStatus::RunException,
                          state, ok ? "row " + std::to_string(index) + "\n" : "", ok);
  rec.result.start = 1000.0 + static_cast<double>(id) / 8;
  if (!ok) rec.result.error_message = "ValueError: mini-batch " + std::to_string(index);
  return rec;
}

// A job of 12 mini-batches whose attempts commit out of id order, over several transactions:
// ids 1-3 before the first flush (their inputs go in with them), a task id never handed out (5)
// and one handed back unstarted (9), a retry, attempts of another job (2, not watched) between
// its ids, and results after a flush (inputs written earlier: their detail is read back).
void run_job(Bed& b) {
  proto::JobSpec spec = make_spec(b.dir.file("out/rows.txt"));
  spec.log_dir = b.logs;
  b.store.create_job(1, spec, 1000.0);
  b.store.create_job(2, make_spec(b.dir.file("out/other.txt")), 1000.0);
  std::vector<proto::MiniBatch> batches;
  for (std::uint64_t i = 0; i < 12; ++i) {
    batches.push_back(make_batch(i, {"/in/f" + std::to_string(i) + ".csv"}));
  }
  b.store.add_minibatches(1, std::move(batches));
  b.store.add_minibatches(2, {make_batch(0, {"/in/other.csv"})});
  b.store.set_submit_done(1, 12);
  b.reports.watch(1, b.logs, 1);
  b.store.record_attempt(attempt(2, 1, 1, 1, true, "succeeded"));
  b.store.record_attempt(attempt(1, 1, 0, 1, true, "succeeded"));
  b.store.record_attempt(attempt(3, 1, 2, 1, false, "pending"));  // retried as id 13
  b.reports.skip({5});
  b.store.flush();
  b.store.record_attempt(attempt(6, 2, 0, 1, true, "succeeded"));
  b.store.record_attempt(attempt(7, 1, 4, 1, true, "succeeded"));
  b.store.record_attempt(attempt(4, 1, 3, 1, true, "succeeded"));
  b.reports.skip({9});  // handed back: mini-batch 5 runs again as id 14
  for (std::uint64_t id = 10; id <= 12; ++id) {
    b.store.record_attempt(attempt(id, 1, id - 4, 1, true, "succeeded"));
  }
  b.store.flush();
  b.store.record_attempt(attempt(14, 1, 5, 1, true, "succeeded"));
  b.store.record_attempt(attempt(13, 1, 2, 2, true, "succeeded"));
  b.store.record_attempt(attempt(8, 1, 9, 1, true, "succeeded"));
  for (std::uint64_t id = 15; id <= 16; ++id) {
    b.store.record_attempt(attempt(id, 1, id - 5, 1, true, "succeeded"));
  }
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file `fanout report` writes for job 1 equals the one in b.logs (report.html but for the
// time it was generated); no temporary file is left.
void check_same_as_one_pass(Bed& b) {
  const std::string again = b.dir.file("again");
  auto r = fanout::report::write_job_report(b.db, 1, again, {.html = true});
  REQUIRE_MESSAGE(r.has_value(), r.error().message);
  const std::regex generated("store at [0-9T:.Z-]+");
  int compared = 0;
  for (const auto& e : fs::recursive_directory_iterator(again)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), again).string();
    CAPTURE(rel);
    std::string want = read_text(e.path());
    std::string got = read_text(fs::path(b.logs) / rel);
    if (rel == "report.html") {
      want = std::regex_replace(want, generated, "store at T");
      got = std::regex_replace(got, generated, "store at T");
    }
    CHECK(got == want);
    ++compared;
  }
  CHECK(compared >= 7);
  for (const auto& e : fs::recursive_directory_iterator(b.logs)) {
    CHECK_MESSAGE(e.path().filename().string().find(".tmp") == std::string::npos, e.path());
  }
  const std::string pm = read_text(fs::path(b.logs) / "sys/job_report/processed_mini-batches.csv");
  CHECK(std::count(pm.begin(), pm.end(), '\n') == 1 + 13);  // header + job 1's 13 attempts
}

// run_job() under `limits`, then its end: the report is written, built while the job ran or in
// one pass as `built_while_running` says, and equals the one-pass report.
void check_report(ReportWriter::Limits limits, bool built_while_running) {
  Bed b(limits);
  run_job(b);
  const auto done = b.end_job(1);
  CHECK(done.ok);
  CHECK(done.built_while_running == built_while_running);
  check_same_as_one_pass(b);
}

}  // namespace

TEST_CASE("interchange.report_writer.built_while_running_equals_one_pass") {
  check_report(ReportWriter::Limits{}, true);
}

TEST_CASE("interchange.report_writer.attempts_not_taken_in_time_fall_back_to_one_pass") {
  // A transaction of two attempts or more hands on more than the thread may have waiting.
  check_report(ReportWriter::Limits{.max_held = 200000, .max_inbox = 1}, false);
}

TEST_CASE("interchange.report_writer.too_many_held_above_a_hole_fall_back_to_one_pass") {
  // Ids 10-12 commit while 8 is still running: with room for 2 held, the thread gives up.
  check_report(ReportWriter::Limits{.max_held = 2, .max_inbox = 131072}, false);
}
