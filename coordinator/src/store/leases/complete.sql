-- A batch of completes on PostgreSQL, in one statement: each lease's job
-- finished (or cancelled, when a cancel was asked and it did not succeed),
-- and each attempt metered once. complete.rs fills in the VALUES list, a
-- row per complete, ($2 … $8) for the first: lease, runner, outcome, exit
-- code, error, now, month; $1 now.
WITH v (lease_id, runner_id, outcome, exit_code, error, now, month) AS (
    SELECT column1, column2, column3, CAST(column4 AS BIGINT), column5,
           CAST(column6 AS BIGINT), CAST(column7 AS BIGINT) FROM (VALUES {rows}) AS x),
held AS (
    -- Locked first, in id order, as lease expiry and revocation
    -- lock theirs: concurrent writers never wait on each other in a cycle.
    -- Found by the lease's own (unique) index, one lookup per
    -- lease (LATERAL: a plan with jobs outside read the whole
    -- index, every job ever leased, when generic plans were made
    -- while it was small). Not by the runner's: a partial index
    -- whose entries for every job it ever ran stay until VACUUM,
    -- and a plan that read it fetched each of them. IS NOT
    -- DISTINCT FROM is = here (neither is NULL) and is not an
    -- index condition.
    SELECT j.id, v.lease_id, v.runner_id FROM v
    CROSS JOIN LATERAL (
        SELECT j.id FROM jobs j
        WHERE j.lease_id = v.lease_id
          AND j.lease_runner_id IS NOT DISTINCT FROM v.runner_id
          AND j.state IN ('leased', 'running')) j
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
    WHERE jobs.id = held.id AND jobs.lease_id = v.lease_id AND jobs.lease_runner_id = v.runner_id
      AND jobs.state IN ('leased', 'running') AND w.id = jobs.workspace_id
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
