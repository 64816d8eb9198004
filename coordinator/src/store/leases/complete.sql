-- A batch of completes on PostgreSQL, in one statement: each lease's job
-- finished (or cancelled, when a cancel was asked and it did not succeed),
-- and each attempt metered once. complete.rs fills in the VALUES list, a
-- row per complete, ($2 … $8) for the first: lease, runner, outcome, exit
-- code, error, now, month; $1 now.
WITH v (lease_id, runner_id, outcome, exit_code, error, now, month) AS (
    SELECT column1, column2, column3, CAST(column4 AS BIGINT), column5,
           CAST(column6 AS BIGINT), CAST(column7 AS BIGINT) FROM (VALUES {rows}) AS x),
-- Each lease's job, by the lease's own (unique) index: one lookup per
-- lease, behind LIMIT so that no plan makes it a join. A generic plan made
-- while few jobs were leased read a whole index instead, for every lease:
-- the lease's (every job ever leased), or the runner's partial one (an
-- entry for every job it ran, until VACUUM).
found AS (
    SELECT f.id, v.lease_id, v.runner_id FROM v
    CROSS JOIN LATERAL (SELECT j.id FROM jobs j WHERE j.lease_id = v.lease_id LIMIT 1) f),
-- Locked in id order, as lease expiry and revocation lock theirs, found by
-- the primary key alone. The lease, its runner and a live state are checked
-- on the row as locked, in terms no partial index's predicate follows from
-- (IS NOT DISTINCT FROM is = here, as neither is NULL; the CASE is the IN),
-- so that no plan reads one of those indexes whole either.
held AS (
    SELECT j.id, found.lease_id, found.runner_id FROM found
    JOIN jobs j ON j.id = found.id
    WHERE j.lease_id IS NOT DISTINCT FROM found.lease_id
      AND j.lease_runner_id IS NOT DISTINCT FROM found.runner_id
      AND CASE WHEN j.state IN ('leased', 'running') THEN true ELSE false END
    ORDER BY j.id FOR UPDATE OF j),
done AS (
    UPDATE jobs SET
        state = CASE WHEN jobs.cancel_requested <> 0 AND v.outcome <> 'succeeded'
                     THEN 'cancelled' ELSE v.outcome END,
        exit_code = v.exit_code, error = v.error, ran_by = v.runner_id,
        ran_by_owner = CASE WHEN rt.owner_member_id IS NULL THEN 'ws:' || w.name
                            ELSE 'user:' || rt.owner_member_id END,
        finished_at = $1, lease_expires_at = NULL
    FROM held JOIN v ON v.lease_id = held.lease_id AND v.runner_id = held.runner_id
         JOIN runners r ON r.id = v.runner_id JOIN runtimes rt ON rt.id = r.runtime_id,
         workspaces w
    -- By the primary key alone: held locked the row and checked it.
    WHERE jobs.id = held.id AND w.id = jobs.workspace_id
    RETURNING jobs.id, jobs.lease_id, jobs.state, jobs.attempt, jobs.workspace_id,
        jobs.ran_by_owner, CASE WHEN rt.owner_member_id IS NULL THEN 1 ELSE 0 END AS charged,
        GREATEST(v.now - COALESCE(jobs.started_at, v.now), 0) AS runner_ms, v.month,
        jobs.runtime_id, v.runner_id, jobs.submitter_id),
billed AS (
    INSERT INTO usage (job_id, attempt, workspace_id, payer, charged, runner_ms,
        month, runtime_id, runner_id, submitter_id, created_at)
    SELECT id, attempt, workspace_id, ran_by_owner, charged, runner_ms,
        month, runtime_id, runner_id, submitter_id, $1 FROM done
    ON CONFLICT (job_id, attempt) DO NOTHING)
SELECT id, lease_id, state, runner_id FROM done
