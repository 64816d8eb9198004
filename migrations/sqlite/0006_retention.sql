-- Issue 9, retention: finished jobs older than `serve --retain-finished` are
-- purged in the background, oldest first (see coordinator/src/store/retention.rs).
-- Landed migrations are never edited.

-- The purge finds the oldest finished jobs here; live jobs (no finish time)
-- are not in it.
CREATE INDEX jobs_by_finish ON jobs (finished_at) WHERE finished_at IS NOT NULL;

-- A purged job's idempotency keys go with it (a key must never name a job
-- that is gone).
CREATE INDEX idempotency_keys_by_job ON idempotency_keys (job_id);
