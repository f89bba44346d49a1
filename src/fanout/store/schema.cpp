// The schema migrations. See schema.hpp; docs/store.md describes the result.
#include "fanout/store/schema.hpp"

#include <iterator>
#include <string>

#include "fanout/store/db.hpp"
#include "fanout/util/error.hpp"

namespace fanout::store {

namespace {

// kMigrations[i] brings a store from user_version i to i + 1. Append only: a released script is
// never edited, since stores in the field already ran it. docs/store.md describes the result.
constexpr const char* kMigrations[] = {
    // 0 -> 1: the initial schema.
    R"sql(
CREATE TABLE jobs (
  id           INTEGER PRIMARY KEY,
  name         TEXT NOT NULL,
  state        TEXT NOT NULL,
  reason       TEXT NOT NULL DEFAULT '',
  spec_path    TEXT,
  runtime      TEXT,
  entry_script TEXT,
  output_path  TEXT,
  log_dir      TEXT,
  settings     TEXT,
  spec         BLOB,
  submit_done  INTEGER NOT NULL DEFAULT 0,
  total        INTEGER NOT NULL DEFAULT 0,
  created      REAL,
  started      REAL,
  ended        REAL
);
CREATE TABLE minibatches (
  job_id        INTEGER NOT NULL,
  id            INTEGER NOT NULL,
  state         TEXT NOT NULL,
  tries         INTEGER NOT NULL DEFAULT 0,
  items         INTEGER NOT NULL,
  succeeded     INTEGER NOT NULL DEFAULT 0,
  failed        INTEGER NOT NULL DEFAULT 0,
  rows          INTEGER NOT NULL DEFAULT 0,
  output_offset INTEGER,
  output_bytes  INTEGER,
  PRIMARY KEY (job_id, id)
) WITHOUT ROWID;
-- What a mini-batch holds, written once: kept out of minibatches so that the state updates of
-- the hot path rewrite a small row.
CREATE TABLE minibatch_inputs (
  job_id        INTEGER NOT NULL,
  minibatch_id  INTEGER NOT NULL,
  detail        TEXT,
  descriptor    BLOB,
  PRIMARY KEY (job_id, minibatch_id)
) WITHOUT ROWID;
CREATE TABLE attempts (
  id             INTEGER PRIMARY KEY,
  job_id         INTEGER NOT NULL,
  minibatch_id   INTEGER NOT NULL,
  attempt        INTEGER NOT NULL,
  status         TEXT NOT NULL,
  pool_id        INTEGER,
  pool           TEXT,
  node           TEXT,
  process        TEXT,
  worker_pid     INTEGER,
  start          REAL,
  elapsed_s      REAL,
  cpu_s          REAL,
  run_s          REAL,
  items          INTEGER,
  succeeded      INTEGER,
  failed         INTEGER,
  rows           INTEGER,
  error_category TEXT,
  error_message  TEXT
);
CREATE INDEX attempts_minibatch ON attempts (job_id, minibatch_id);
CREATE TABLE pools (
  id         INTEGER PRIMARY KEY,
  name       TEXT,
  node       TEXT,
  workers    INTEGER,
  prefetch   INTEGER,
  pid        INTEGER,
  build      TEXT,
  state      TEXT,
  registered REAL,
  last_seen  REAL
);
CREATE VIEW job_counts AS
SELECT j.id AS job_id,
       max(j.total, count(m.id)) AS total,
       count(m.id) AS submitted,
       coalesce(sum(m.state = 'succeeded'), 0) AS succeeded,
       coalesce(sum(m.state = 'failed'), 0) AS failed,
       coalesce(sum(m.state = 'pending'), 0) AS pending,
       coalesce(sum(m.state = 'running'), 0) AS running,
       coalesce(sum(CASE WHEN m.state = 'succeeded' THEN m.succeeded ELSE 0 END), 0)
         AS items_succeeded,
       coalesce(sum(CASE m.state WHEN 'succeeded' THEN m.failed
                                 WHEN 'failed' THEN m.items ELSE 0 END), 0) AS items_failed,
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id) AS attempts,
       (SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.status != 'RUN_DONE')
         AS attempts_failed
FROM jobs j LEFT JOIN minibatches m ON m.job_id = j.id
GROUP BY j.id;
)sql",
    // 1 -> 2: resource-monitor samples and the report views (docs/store.md, "Reports").
    R"sql(
CREATE TABLE node_resource_samples (
  id               INTEGER PRIMARY KEY,
  job_id           INTEGER NOT NULL,
  pool_id          INTEGER,
  pool             TEXT,
  node             TEXT,
  time             REAL NOT NULL,
  interval_s       REAL,
  cpu_percent      REAL,
  mem_total_mb     REAL,
  mem_available_mb REAL,
  mem_used_mb      REAL,
  disk_reads       INTEGER,
  disk_writes      INTEGER,
  disk_read_mb     REAL,
  disk_write_mb    REAL,
  net_sent_mb      REAL,
  net_recv_mb      REAL,
  tcp_connections  INTEGER,
  udp_connections  INTEGER
);
CREATE INDEX node_resource_samples_job ON node_resource_samples (job_id, node, time);
CREATE TABLE process_resource_samples (
  id          INTEGER PRIMARY KEY,
  job_id      INTEGER NOT NULL,
  pool_id     INTEGER,
  pool        TEXT,
  node        TEXT,
  time        REAL NOT NULL,
  process     TEXT,
  pid         INTEGER,
  cpu_percent REAL,
  rss_mb      REAL,
  reads       INTEGER,
  writes      INTEGER,
  read_mb     REAL,
  write_mb    REAL
);
CREATE INDEX process_resource_samples_job ON process_resource_samples (job_id, node, time);
CREATE TABLE disk_usage_samples (
  id           INTEGER PRIMARY KEY,
  job_id       INTEGER NOT NULL,
  pool_id      INTEGER,
  pool         TEXT,
  node         TEXT,
  time         REAL NOT NULL,
  mount        TEXT,
  total_mb     REAL,
  used_mb      REAL,
  free_mb      REAL,
  used_percent REAL
);
CREATE INDEX disk_usage_samples_job ON disk_usage_samples (job_id, node, time);
CREATE VIEW processed_minibatches AS
SELECT a.job_id AS job_id,
       a.minibatch_id AS minibatch_id,
       a.attempt AS picked_count,
       CASE WHEN coalesce(a.process, '') = '' THEN ''
            WHEN coalesce(a.pool, '') = '' THEN a.process
            ELSE a.pool || '/' || a.process END AS process,
       strftime('%Y-%m-%dT%H:%M:%fZ', a.start, 'unixepoch') AS process_start_time,
       a.items AS total,
       a.succeeded AS succeeded,
       a.failed AS failed,
       round(a.elapsed_s, 3) AS elapsed_seconds,
       round(a.cpu_s, 3) AS process_seconds,
       round(a.run_s, 3) AS run_method_seconds,
       a.status AS status,
       coalesce(a.error_category, '') AS error_category,
       coalesce(a.error_message, '') AS error_message,
       i.detail AS minibatch_detail,
       a.node AS node,
       a.pool AS pool,
       a.id AS attempt_id,
       a.start AS start
FROM attempts a
LEFT JOIN minibatch_inputs i ON i.job_id = a.job_id AND i.minibatch_id = a.minibatch_id;
CREATE VIEW process_summary AS
SELECT job_id,
       node,
       pool,
       CASE WHEN coalesce(pool, '') = '' THEN process ELSE pool || '/' || process END AS process,
       count(DISTINCT worker_pid) AS worker_starts,
       count(*) AS attempts,
       sum(status = 'RUN_DONE') AS succeeded_attempts,
       sum(status != 'RUN_DONE') AS failed_attempts,
       sum(items) AS items,
       sum(succeeded) AS items_succeeded,
       sum(failed) AS items_failed,
       round(sum(elapsed_s), 3) AS elapsed_seconds,
       round(sum(cpu_s), 3) AS process_seconds,
       round(sum(run_s), 3) AS run_method_seconds,
       round(avg(run_s), 4) AS avg_run_method_seconds,
       round(sum(elapsed_s) - sum(run_s), 3) AS overhead_seconds,
       strftime('%Y-%m-%dT%H:%M:%fZ', min(start), 'unixepoch') AS first_start_time,
       strftime('%Y-%m-%dT%H:%M:%fZ', max(start + elapsed_s), 'unixepoch') AS last_end_time
FROM attempts
WHERE coalesce(process, '') != ''
GROUP BY job_id, node, pool, process;
CREATE VIEW node_summary AS
SELECT job_id,
       node,
       count(DISTINCT pool) AS pools,
       count(DISTINCT coalesce(pool, '') || '/' || process) AS processes,
       count(*) AS attempts,
       sum(status = 'RUN_DONE') AS succeeded_attempts,
       sum(status != 'RUN_DONE') AS failed_attempts,
       sum(items) AS items,
       sum(succeeded) AS items_succeeded,
       sum(failed) AS items_failed,
       round(sum(elapsed_s), 3) AS elapsed_seconds,
       round(sum(cpu_s), 3) AS process_seconds,
       round(sum(run_s), 3) AS run_method_seconds,
       strftime('%Y-%m-%dT%H:%M:%fZ', min(start), 'unixepoch') AS first_start_time,
       strftime('%Y-%m-%dT%H:%M:%fZ', max(start + elapsed_s), 'unixepoch') AS last_end_time,
       round(count(*) / (max(start + elapsed_s) - min(start)), 3) AS attempts_per_second
FROM attempts
WHERE coalesce(node, '') != '' AND coalesce(process, '') != ''
GROUP BY job_id, node;
CREATE VIEW job_progress AS
SELECT job_id, name, state, reason, total, submitted, done, succeeded, failed, pending, running,
       CASE WHEN total > 0 THEN round(100.0 * done / total, 1) END AS percent_done,
       items_succeeded, items_failed, attempts, attempts_failed,
       strftime('%Y-%m-%dT%H:%M:%fZ', started, 'unixepoch') AS started_time,
       strftime('%Y-%m-%dT%H:%M:%fZ', ended, 'unixepoch') AS ended_time,
       round(elapsed, 3) AS elapsed_seconds,
       round(done / nullif(elapsed, 0), 3) AS minibatches_per_second,
       round((items_succeeded + items_failed) / nullif(elapsed, 0), 3) AS items_per_second,
       CASE WHEN ended IS NULL AND done > 0 AND total > done
            THEN round((total - done) * elapsed / done, 1) END AS eta_seconds
FROM (SELECT j.id AS job_id, j.name AS name, j.state AS state, j.reason AS reason,
             c.total AS total, c.submitted AS submitted, c.succeeded + c.failed AS done,
             c.succeeded AS succeeded, c.failed AS failed, c.pending AS pending,
             c.running AS running, c.items_succeeded AS items_succeeded,
             c.items_failed AS items_failed, c.attempts AS attempts,
             c.attempts_failed AS attempts_failed, j.started AS started, j.ended AS ended,
             coalesce(j.ended, (julianday('now') - 2440587.5) * 86400.0) - j.started AS elapsed
      FROM jobs j JOIN job_counts c ON c.job_id = j.id);
CREATE VIEW job_settings AS
SELECT j.id AS job_id, s.key AS key, s.value AS value, s.type AS type
FROM jobs j, json_each(CASE WHEN json_valid(j.settings) THEN j.settings ELSE '{}' END) s;
)sql",
    // 2 -> 3: the fingerprint of the Curve key each pool registered with (docs/security.md);
    // NULL for pools on ipc:// or --insecure endpoints, and for those recorded before.
    R"sql(
ALTER TABLE pools ADD COLUMN key_fingerprint TEXT;
)sql",
    // 3 -> 4: jobs.output_start, the output file's size when the job started (recovery never
    // cuts below it); jobs.reported, when its logs/ reports were written (jobs that ended
    // before count as reported); one pools row per pool name, counting its registrations,
    // instead of one per registration (the rows of a name merge into its first, with its latest
    // details, and the rows that pointed to the others point to it).
    R"sql(
ALTER TABLE jobs ADD COLUMN output_start INTEGER;
ALTER TABLE jobs ADD COLUMN reported REAL;
UPDATE jobs SET reported = ended WHERE ended IS NOT NULL;
ALTER TABLE pools ADD COLUMN registrations INTEGER NOT NULL DEFAULT 1;
ALTER TABLE pools ADD COLUMN last_registration INTEGER;
CREATE TEMP TABLE pool_merge AS
  SELECT p.id AS old_id, f.first_id AS new_id
  FROM pools p JOIN (SELECT name, min(id) AS first_id FROM pools GROUP BY name) f
    ON f.name IS p.name;
UPDATE pools SET
  registrations = (SELECT count(*) FROM pools q WHERE q.name IS pools.name),
  last_registration = (SELECT max(id) FROM pools q WHERE q.name IS pools.name);
UPDATE pools SET (node, workers, prefetch, pid, build, state, last_seen, key_fingerprint) =
  (SELECT node, workers, prefetch, pid, build, state, last_seen, key_fingerprint
   FROM pools q WHERE q.id = pools.last_registration)
WHERE id IN (SELECT new_id FROM temp.pool_merge) AND last_registration != id;
UPDATE attempts SET pool_id = (SELECT new_id FROM temp.pool_merge WHERE old_id = attempts.pool_id)
WHERE pool_id IN (SELECT old_id FROM temp.pool_merge WHERE old_id != new_id);
UPDATE node_resource_samples
SET pool_id = (SELECT new_id FROM temp.pool_merge WHERE old_id = node_resource_samples.pool_id)
WHERE pool_id IN (SELECT old_id FROM temp.pool_merge WHERE old_id != new_id);
UPDATE process_resource_samples
SET pool_id = (SELECT new_id FROM temp.pool_merge WHERE old_id = process_resource_samples.pool_id)
WHERE pool_id IN (SELECT old_id FROM temp.pool_merge WHERE old_id != new_id);
UPDATE disk_usage_samples
SET pool_id = (SELECT new_id FROM temp.pool_merge WHERE old_id = disk_usage_samples.pool_id)
WHERE pool_id IN (SELECT old_id FROM temp.pool_merge WHERE old_id != new_id);
DELETE FROM pools WHERE id IN (SELECT old_id FROM temp.pool_merge WHERE old_id != new_id);
DROP TABLE temp.pool_merge;
CREATE UNIQUE INDEX pools_name ON pools (name);
)sql",
    // 4 -> 5: where each attempt's worker was placed (its device, CPUs and thread count; NULL
    // for attempts recorded before, or from an older pool), the accelerators' samples, and the
    // device in process_summary.
    R"sql(
ALTER TABLE attempts ADD COLUMN device TEXT;
ALTER TABLE attempts ADD COLUMN cpus TEXT;
ALTER TABLE attempts ADD COLUMN threads INTEGER;
CREATE TABLE gpu_samples (
  id           INTEGER PRIMARY KEY,
  job_id       INTEGER NOT NULL,
  pool_id      INTEGER,
  pool         TEXT,
  node         TEXT,
  time         REAL NOT NULL,
  device_index INTEGER,
  uuid         TEXT,
  name         TEXT,
  util_percent REAL,
  mem_used_mb  REAL,
  mem_total_mb REAL
);
CREATE INDEX gpu_samples_job ON gpu_samples (job_id, node, time);
DROP VIEW process_summary;
CREATE VIEW process_summary AS
SELECT job_id,
       node,
       pool,
       CASE WHEN coalesce(pool, '') = '' THEN process ELSE pool || '/' || process END AS process,
       count(DISTINCT worker_pid) AS worker_starts,
       count(*) AS attempts,
       sum(status = 'RUN_DONE') AS succeeded_attempts,
       sum(status != 'RUN_DONE') AS failed_attempts,
       sum(items) AS items,
       sum(succeeded) AS items_succeeded,
       sum(failed) AS items_failed,
       round(sum(elapsed_s), 3) AS elapsed_seconds,
       round(sum(cpu_s), 3) AS process_seconds,
       round(sum(run_s), 3) AS run_method_seconds,
       round(avg(run_s), 4) AS avg_run_method_seconds,
       round(sum(elapsed_s) - sum(run_s), 3) AS overhead_seconds,
       strftime('%Y-%m-%dT%H:%M:%fZ', min(start), 'unixepoch') AS first_start_time,
       strftime('%Y-%m-%dT%H:%M:%fZ', max(start + elapsed_s), 'unixepoch') AS last_end_time,
       coalesce(max(device), '') AS device,
       coalesce(max(cpus), '') AS cpus,
       coalesce(max(threads), 0) AS threads
FROM attempts
WHERE coalesce(process, '') != ''
GROUP BY job_id, node, pool, process;
)sql",
    // 5 -> 6: `fanout explore`'s experiments and their runs (each run a job of `jobs`). Applies
    // after the pool_jobs migration when both are merged (then it is the next version).
    R"sql(
CREATE TABLE experiments (
  id        TEXT PRIMARY KEY,
  created   REAL NOT NULL,
  job_file  TEXT NOT NULL,
  budget_s  REAL NOT NULL,
  sample    TEXT NOT NULL,
  factors   TEXT NOT NULL,
  state     TEXT NOT NULL
);
CREATE TABLE experiment_runs (
  experiment       TEXT NOT NULL REFERENCES experiments(id),
  seq              INTEGER NOT NULL,
  job_id           INTEGER,
  treatment        TEXT NOT NULL,
  seconds_per_item REAL,
  wall_s           REAL NOT NULL,
  ok               INTEGER NOT NULL,
  PRIMARY KEY (experiment, seq)
);
)sql",
    // 6 -> 7: each job's counts kept in job_tallies, maintained by triggers in the transaction
    // that changes its mini-batches and attempts (every writer of those rows: the hot path,
    // recovery, resume, cancel), so that job_counts reads one row per job instead of scanning
    // the job's rows; existing jobs are counted once here.
    R"sql(
CREATE TABLE job_tallies (
  job_id          INTEGER PRIMARY KEY,
  submitted       INTEGER NOT NULL DEFAULT 0,
  pending         INTEGER NOT NULL DEFAULT 0,
  running         INTEGER NOT NULL DEFAULT 0,
  succeeded       INTEGER NOT NULL DEFAULT 0,
  failed          INTEGER NOT NULL DEFAULT 0,
  items_succeeded INTEGER NOT NULL DEFAULT 0,
  items_failed    INTEGER NOT NULL DEFAULT 0,
  attempts        INTEGER NOT NULL DEFAULT 0,
  attempts_failed INTEGER NOT NULL DEFAULT 0
);
INSERT INTO job_tallies (job_id, submitted, pending, running, succeeded, failed, items_succeeded,
                         items_failed)
SELECT j.id, count(m.id),
       coalesce(sum(m.state = 'pending'), 0), coalesce(sum(m.state = 'running'), 0),
       coalesce(sum(m.state = 'succeeded'), 0), coalesce(sum(m.state = 'failed'), 0),
       coalesce(sum(CASE WHEN m.state = 'succeeded' THEN m.succeeded ELSE 0 END), 0),
       coalesce(sum(CASE m.state WHEN 'succeeded' THEN m.failed
                                 WHEN 'failed' THEN m.items ELSE 0 END), 0)
FROM jobs j LEFT JOIN minibatches m ON m.job_id = j.id
GROUP BY j.id;
UPDATE job_tallies SET
  attempts = (SELECT count(*) FROM attempts a WHERE a.job_id = job_tallies.job_id),
  attempts_failed = (SELECT count(*) FROM attempts a
                     WHERE a.job_id = job_tallies.job_id AND a.status != 'RUN_DONE');
CREATE TRIGGER job_tallies_job AFTER INSERT ON jobs BEGIN
  INSERT INTO job_tallies (job_id) SELECT new.id
  WHERE NOT EXISTS (SELECT 1 FROM job_tallies WHERE job_id = new.id);
END;
CREATE TRIGGER job_tallies_job_gone AFTER DELETE ON jobs BEGIN
  DELETE FROM job_tallies WHERE job_id = old.id;
END;
CREATE TRIGGER job_tallies_minibatch AFTER INSERT ON minibatches BEGIN
  UPDATE job_tallies SET
    submitted = submitted + 1,
    pending = pending + (new.state = 'pending'),
    running = running + (new.state = 'running'),
    succeeded = succeeded + (new.state = 'succeeded'),
    failed = failed + (new.state = 'failed'),
    items_succeeded = items_succeeded + CASE new.state WHEN 'succeeded' THEN new.succeeded
                                                        ELSE 0 END,
    items_failed = items_failed + CASE new.state WHEN 'succeeded' THEN new.failed
                                                  WHEN 'failed' THEN new.items ELSE 0 END
  WHERE job_id = new.job_id;
END;
CREATE TRIGGER job_tallies_minibatch_changed
AFTER UPDATE OF job_id, state, items, succeeded, failed ON minibatches
WHEN old.job_id != new.job_id OR old.state != new.state OR old.items != new.items
  OR old.succeeded != new.succeeded OR old.failed != new.failed
BEGIN
  UPDATE job_tallies SET
    submitted = submitted - 1,
    pending = pending - (old.state = 'pending'),
    running = running - (old.state = 'running'),
    succeeded = succeeded - (old.state = 'succeeded'),
    failed = failed - (old.state = 'failed'),
    items_succeeded = items_succeeded - CASE old.state WHEN 'succeeded' THEN old.succeeded
                                                        ELSE 0 END,
    items_failed = items_failed - CASE old.state WHEN 'succeeded' THEN old.failed
                                                  WHEN 'failed' THEN old.items ELSE 0 END
  WHERE job_id = old.job_id;
  UPDATE job_tallies SET
    submitted = submitted + 1,
    pending = pending + (new.state = 'pending'),
    running = running + (new.state = 'running'),
    succeeded = succeeded + (new.state = 'succeeded'),
    failed = failed + (new.state = 'failed'),
    items_succeeded = items_succeeded + CASE new.state WHEN 'succeeded' THEN new.succeeded
                                                        ELSE 0 END,
    items_failed = items_failed + CASE new.state WHEN 'succeeded' THEN new.failed
                                                  WHEN 'failed' THEN new.items ELSE 0 END
  WHERE job_id = new.job_id;
END;
CREATE TRIGGER job_tallies_minibatch_gone AFTER DELETE ON minibatches BEGIN
  UPDATE job_tallies SET
    submitted = submitted - 1,
    pending = pending - (old.state = 'pending'),
    running = running - (old.state = 'running'),
    succeeded = succeeded - (old.state = 'succeeded'),
    failed = failed - (old.state = 'failed'),
    items_succeeded = items_succeeded - CASE old.state WHEN 'succeeded' THEN old.succeeded
                                                        ELSE 0 END,
    items_failed = items_failed - CASE old.state WHEN 'succeeded' THEN old.failed
                                                  WHEN 'failed' THEN old.items ELSE 0 END
  WHERE job_id = old.job_id;
END;
CREATE TRIGGER job_tallies_attempt AFTER INSERT ON attempts BEGIN
  UPDATE job_tallies SET attempts = attempts + 1,
                         attempts_failed = attempts_failed + (new.status != 'RUN_DONE')
  WHERE job_id = new.job_id;
END;
CREATE TRIGGER job_tallies_attempt_changed AFTER UPDATE OF job_id, status ON attempts
WHEN old.job_id != new.job_id OR old.status != new.status
BEGIN
  UPDATE job_tallies SET attempts = attempts - 1,
                         attempts_failed = attempts_failed - (old.status != 'RUN_DONE')
  WHERE job_id = old.job_id;
  UPDATE job_tallies SET attempts = attempts + 1,
                         attempts_failed = attempts_failed + (new.status != 'RUN_DONE')
  WHERE job_id = new.job_id;
END;
CREATE TRIGGER job_tallies_attempt_gone AFTER DELETE ON attempts BEGIN
  UPDATE job_tallies SET attempts = attempts - 1,
                         attempts_failed = attempts_failed - (old.status != 'RUN_DONE')
  WHERE job_id = old.job_id;
END;
DROP VIEW job_counts;
CREATE VIEW job_counts AS
SELECT j.id AS job_id,
       max(j.total, coalesce(t.submitted, 0)) AS total,
       coalesce(t.submitted, 0) AS submitted,
       coalesce(t.succeeded, 0) AS succeeded,
       coalesce(t.failed, 0) AS failed,
       coalesce(t.pending, 0) AS pending,
       coalesce(t.running, 0) AS running,
       coalesce(t.items_succeeded, 0) AS items_succeeded,
       coalesce(t.items_failed, 0) AS items_failed,
       coalesce(t.attempts, 0) AS attempts,
       coalesce(t.attempts_failed, 0) AS attempts_failed
FROM jobs j LEFT JOIN job_tallies t ON t.job_id = j.id;
)sql",
    // 7 -> 8: the pool jobs a batch launcher submitted for a job (docs/cluster.md, section 6):
    // the scheduler's id, when it was submitted, started and ended (Unix seconds, as
    // jobs.started), and why it ended.
    R"sql(
CREATE TABLE pool_jobs (
  id           INTEGER PRIMARY KEY,
  job_id       INTEGER NOT NULL,
  scheduler    TEXT NOT NULL,
  sched_job_id TEXT NOT NULL,
  submitted    REAL NOT NULL,
  started      REAL,
  ended        REAL,
  end_reason   TEXT,
  UNIQUE (job_id, scheduler, sched_job_id)
);
)sql",
    // 8 -> 9: job_tallies is kept by the store's writer (detail/tallies.hpp), which knows each
    // change it makes, in the same transaction; the triggers on minibatches and attempts cost a
    // quarter of the writer's time per mini-batch. The triggers that add and remove a job's row
    // stay (once per job). Every job is counted again once.
    R"sql(
DROP TRIGGER IF EXISTS job_tallies_minibatch;
DROP TRIGGER IF EXISTS job_tallies_minibatch_changed;
DROP TRIGGER IF EXISTS job_tallies_minibatch_gone;
DROP TRIGGER IF EXISTS job_tallies_attempt;
DROP TRIGGER IF EXISTS job_tallies_attempt_changed;
DROP TRIGGER IF EXISTS job_tallies_attempt_gone;
DELETE FROM job_tallies;
INSERT INTO job_tallies (job_id, submitted, pending, running, succeeded, failed, items_succeeded,
                         items_failed)
SELECT j.id, count(m.id),
       coalesce(sum(m.state = 'pending'), 0), coalesce(sum(m.state = 'running'), 0),
       coalesce(sum(m.state = 'succeeded'), 0), coalesce(sum(m.state = 'failed'), 0),
       coalesce(sum(CASE WHEN m.state = 'succeeded' THEN m.succeeded ELSE 0 END), 0),
       coalesce(sum(CASE m.state WHEN 'succeeded' THEN m.failed
                                 WHEN 'failed' THEN m.items ELSE 0 END), 0)
FROM jobs j LEFT JOIN minibatches m ON m.job_id = j.id
GROUP BY j.id;
UPDATE job_tallies SET
  attempts = (SELECT count(*) FROM attempts a WHERE a.job_id = job_tallies.job_id),
  attempts_failed = (SELECT count(*) FROM attempts a
                     WHERE a.job_id = job_tallies.job_id AND a.status != 'RUN_DONE');
)sql",
    // 9 -> 10: jobs.owner_uid, the user the interchange that accepted the job ran as: an
    // interchange resumes only its own user's jobs. NULL for jobs recorded before (taken as
    // the store's owner's: the store's files pass the owner checks before anything is read).
    R"sql(
ALTER TABLE jobs ADD COLUMN owner_uid INTEGER;
)sql",
};

static_assert(std::size(kMigrations) == static_cast<std::size_t>(kSchemaVersion),
              "one migration script per schema version");

}  // namespace

void apply_migrations(Db& db, const Logger& log) {
  auto version = db.query_int("PRAGMA user_version");
  if (version > kSchemaVersion) {
    throw Failure(ErrorCode::Version,
                  db.path() + ": store schema version " + std::to_string(version) +
                      " is newer than this fanout supports (" + std::to_string(kSchemaVersion) +
                      "); use a newer fanout or another --db");
  }
  while (version < kSchemaVersion) {
    Transaction tx(db);
    // Read again under the write lock: another process may have migrated in the meantime.
    version = db.query_int("PRAGMA user_version");
    if (version >= kSchemaVersion) break;
    const std::string what = "migration to schema version " + std::to_string(version + 1);
    db.exec(kMigrations[version], what.c_str());
    db.exec(("PRAGMA user_version = " + std::to_string(version + 1)).c_str(), what.c_str());
    tx.commit();
    ++version;
    log->info("store {}: schema migrated to version {}", db.path(), version);
  }
}

}  // namespace fanout::store
