// The console's summary of an ended job (client/session/end_summary.hpp): ParallelRunStep's
// counting, worded so that run() returning fewer results than items does not read as failures.
#include "client/session/end_summary.hpp"

#include <doctest/doctest.h>

#include <string>

using fanout::client::end_summary;
using fanout::client::grouped;

namespace {

fanout::proto::JobEnded ended(std::uint64_t ok_batches, std::uint64_t failed_batches,
                              std::uint64_t items_ok, std::uint64_t items_failed) {
  fanout::proto::JobEnded e;
  e.job_id = 3;
  e.state = "succeeded";
  e.reason = "all mini-batches finished";
  e.progress.succeeded = ok_batches;
  e.progress.failed = failed_batches;
  e.progress.submitted = ok_batches + failed_batches;
  e.progress.items_succeeded = items_ok;
  e.progress.items_failed = items_failed;
  e.progress.attempts_failed = 2;
  return e;
}

}  // namespace

TEST_CASE("client.end_summary.grouped") {
  CHECK(grouped(0) == "0");
  CHECK(grouped(999) == "999");
  CHECK(grouped(11979) == "11,979");
  CHECK(grouped(1234567) == "1,234,567");
}

TEST_CASE("client.end_summary.run_returning_no_rows_is_not_worded_as_failures") {
  const std::string s = end_summary(ended(1198, 0, 0, 11979));
  CAPTURE(s);
  CHECK(s.find("run() returned 0 results for 11,979 items") != std::string::npos);
  CHECK(s.find("0 succeeded, 11979 failed") == std::string::npos);
  CHECK(s.find("attempts: 1,200 (2 failed)") != std::string::npos);
}

TEST_CASE("client.end_summary.failed_mini_batches_keep_the_plain_counts") {
  const std::string s = end_summary(ended(8, 2, 80, 20));
  CAPTURE(s);
  CHECK(s.find("fanout: job 3 succeeded: all mini-batches finished\n") == 0);
  CHECK(s.find("mini-batches: 8 succeeded, 2 failed of 10; items: 80 succeeded, 20 failed;") !=
        std::string::npos);
}
