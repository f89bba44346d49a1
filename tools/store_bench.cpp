// fanout-store-bench: the store alone, for the hot path's budget (docs/performance.md). Queues
// what the interchange queues for N no-op mini-batches (add, mark_running, record_attempt, in
// the interleaving of a window of W unfinished mini-batches), flushes, and prints the writer
// thread's CPU and wall time per mini-batch. Usage: fanout-store-bench [--tasks N] [--db PATH]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "fanout/store/task_store.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/log.hpp"

int main(int argc, char** argv) {
  CLI::App app{"benchmark the SQLite store alone"};
  std::uint64_t tasks = 200000;
  std::uint64_t window = 20000;
  std::string db = "/tmp/fanout-store-bench.db";
  app.add_option("-n,--tasks", tasks, "mini-batches");
  app.add_option("--window", window, "unfinished mini-batches (submission runs this far ahead)");
  app.add_option("--db", db, "store file (removed first)");
  CLI11_PARSE(app, argc, argv);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);

  auto log = fanout::make_logger("bench", spdlog::level::debug, {}, true);
  const auto t0 = std::chrono::steady_clock::now();
  {
    fanout::store::TaskStore store(db, log);
    fanout::proto::JobSpec spec;
    spec.name = "bench";
    spec.runtime = "native";
    store.create_job(1, spec, fanout::unix_now());
    std::uint64_t added = 0;
    auto add_up_to = [&](std::uint64_t end) {
      while (added < end) {
        std::vector<fanout::proto::MiniBatch> mbs;
        for (std::uint64_t i = 0; i < 1024 && added < end; ++i, ++added) {
          mbs.push_back(fanout::proto::MiniBatch{added, {"item-" + std::to_string(added)}, {}});
        }
        store.add_minibatches(1, std::move(mbs));
      }
    };
    for (std::uint64_t i = 0; i < tasks; ++i) {
      // As fanout perf's client does: it submits once half the window is free, in frames of
      // up to 1,024 mini-batches (one add each), so results come in runs between adds.
      if (added < tasks && added < i + window / 2) add_up_to(std::min(tasks, i + window));
      store.mark_running(1, i, 1);
      fanout::proto::TaskResult r;
      r.task_id = i + 1;
      r.job_id = 1;
      r.index = i;
      r.status = 1;
      r.items = r.succeeded = 1;
      r.node = "node";
      r.process = "process001";
      r.worker_pid = 4242;
      r.start = 1.0e9 + static_cast<double>(i) * 1e-5;
      r.elapsed_s = r.cpu_s = r.run_s = 1e-6;
      store.record_attempt(
          fanout::store::AttemptRecord{1, "pool01", std::move(r), "succeeded", false});
    }
    store.finish_job(1, "succeeded", "bench", fanout::unix_now());
    store.flush();
  }  // the store logs its writer CPU at debug when closed
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rate=%.0f mini-batches/s wall, %.2f us per mini-batch\n",
              static_cast<double>(tasks) / wall, wall * 1e6 / static_cast<double>(tasks));
  return 0;
}
