// Committed attempts as rows. See committed_attempt.hpp.
#include "fanout/store/committed_attempt.hpp"

#include <cmath>

namespace fanout::store {

AttemptRow CommittedAttempt::row() const {
  AttemptRow r;
  r.id = id;
  r.job_id = job_id;
  r.minibatch_id = minibatch_id;
  r.attempt = attempt;
  r.status = status;
  r.has_pool_id = true;
  r.pool_id = pool_id;
  r.has_pool = !pool.empty();  // bound text-or-null
  r.pool = pool;
  r.has_node = !node.empty();
  r.node = node;
  r.process = process;
  r.has_pid = true;
  r.worker_pid = worker_pid;
  // sqlite3_bind_double() stores a NaN as NULL, which reads back as 0.
  auto real = [](double v, bool& has) {
    has = !std::isnan(v);
    return has ? v : 0.0;
  };
  r.start = real(start, r.has_start);
  r.elapsed_s = real(elapsed_s, r.has_elapsed);
  r.cpu_s = real(cpu_s, r.has_cpu);
  r.run_s = real(run_s, r.has_run);
  r.has_items = r.has_succeeded = r.has_failed = true;
  r.items = items;
  r.succeeded = succeeded;
  r.failed = failed;
  r.error_category = error_category;
  r.error_message = error_message;
  r.has_detail = has_detail;
  r.detail = detail;
  r.device = device;
  r.cpus = cpus;
  r.threads = threads;
  return r;
}

}  // namespace fanout::store
