// Cancelling a job in a store no interchange owns. See offline_cancel.hpp.
#include "fanout/store/offline_cancel.hpp"

#include <filesystem>

#include "fanout/store/db.hpp"
#include "fanout/store/detail/tallies.hpp"
#include "fanout/store/owner_lock.hpp"
#include "fanout/util/clock.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

Expected<bool> cancel_unowned(const std::string& db_path, std::uint64_t job_id,
                              const std::string& reason) {
  // Held until the end: an interchange started meanwhile waits for it, then finds the job
  // cancelled (and does not resume it).
  std::error_code ec;
  if (!std::filesystem::exists(db_path, ec)) {
    return make_error(ErrorCode::NotFound, db_path + ": no such store");
  }
  auto lock = OwnerLock::acquire(db_path);
  if (!lock) return Unexpected{lock.error()};
  try {
    Db db(db_path, Db::Mode::ReadWriteCreate);
    db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
    Transaction tx(db);
    Statement state(db, "SELECT state FROM jobs WHERE id = ?1");
    state.bind(1, job_id);
    if (!state.step()) {
      return make_error(ErrorCode::NotFound, db_path + ": no job " + std::to_string(job_id));
    }
    const std::string was(state.column_text(0));
    state.reset();
    if (was != "pending" && was != "running") return false;
    Statement requeue(db,
                      "UPDATE minibatches SET state = 'pending', tries = max(tries - 1, 0) "
                      "WHERE job_id = ?1 AND state = 'running'");
    requeue.bind(1, job_id).run();
    if (db.query_int("SELECT changes()") > 0) detail::recount_tallies(db, job_id);
    Statement cancel(db,
                     "UPDATE jobs SET state = 'cancelled', reason = ?2, ended = ?3 WHERE id = ?1");
    cancel.bind(1, job_id).bind(2, reason).bind(3, unix_now()).run();
    tx.commit();
    return true;
  } catch (const Failure& f) {
    return Unexpected{f.error()};
  }
}

}  // namespace fanout::store
