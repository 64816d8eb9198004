-- One complete with the runner's next lease on PostgreSQL, in one
-- statement: lease.sql's rules for a batch of one request, with
-- complete.sql's CTEs put in after the runner is locked (complete_next.rs
-- does), so locks are taken as revocation takes them: the runner, then its
-- jobs. $1 the runner, $2 the new lease's id, $3 now, $4 the lease TTL (ms),
-- the complete's VALUES row from $5. Rows: the lease's (as lease.sql's,
-- numbered 1), only when the complete finished its job here (not for a
-- repeat or a lost lease), then 'done' for what the complete finished. The
-- lease's row says 'again', having leased nothing, for what lease.sql would
-- hand to drover_lease (a pinned job queued for the runner, a head job that
-- requires capabilities, a batch that leased to it since this statement's
-- snapshot): the complete is written all the same.
--
-- lease.sql over many requests would do the same; this one is leaner for
-- the call every runner makes after every job (no window over requests,
-- pools or slots; PostgreSQL's executor sets up each plan node on every
-- call): in one-runner drains, turn by turn, PostgreSQL spent 1.08-1.45
-- CPU-ms a job, against 1.31-1.58 with lease.sql around the complete.
WITH
-- A job pinned to this runner is queued (drover_lease's case).
busy AS (
    SELECT EXISTS (SELECT 1 FROM jobs j
                   WHERE j.state = 'queued' AND j.pinned_runner_id = $1) AS pinned
),
-- The runner as it is now, locked, counted. Always (lease.sql first looks
-- for a queued job, to write nothing when there is none; this statement
-- writes anyway, and the pool's queue is read once, by cand: a drain leaves
-- an entry in the queue's index for every job it leased, until VACUUM, and
-- each read walks them).
locked AS (
    UPDATE runners r SET lease_seq = r.lease_seq + 1
    WHERE r.id = $1 AND NOT (SELECT pinned FROM busy)
    RETURNING r.id, r.lease_seq, r.revoked_at, r.slots
),
-- (complete_next.rs puts the complete here.)
-- The runner and its live leases as of the snapshot, less the one finished
-- here; its slots and revocation as locked.
run AS (
    SELECT r.runtime_id,
           (SELECT COUNT(*) FROM jobs j
            WHERE j.lease_runner_id = r.id AND j.state IN ('leased', 'running'))
           - (SELECT COUNT(*) FROM done) AS held,
           CASE WHEN l.id IS NULL THEN r.slots ELSE l.slots END AS slots,
           CASE WHEN l.id IS NULL THEN r.revoked_at ELSE l.revoked_at END AS revoked_at,
           l.id IS NOT NULL AS locked,
           l.id IS NOT NULL AND l.lease_seq <> r.lease_seq + 1 AS stale
    FROM runners r LEFT JOIN locked l ON true
    WHERE r.id = $1
),
-- The request, when the complete finished its job here.
slot AS (
    SELECT r.runtime_id, r.slots, r.held, r.locked, r.stale,
           CASE WHEN r.runtime_id IS NULL OR r.revoked_at IS NOT NULL THEN 'revoked'
                WHEN r.held < r.slots THEN 'nothing'
                ELSE 'limited' END AS pick
    FROM (SELECT 1) one LEFT JOIN run r ON true
    WHERE EXISTS (SELECT 1 FROM done)
),
-- The two queued jobs at the head of the pool, locked (rows another batch
-- holds are skipped), numbered.
cand AS MATERIALIZED (
    SELECT c.id, c.requires,
           row_number() OVER (ORDER BY c.priority DESC, c.queue_pos, c.seq) AS nth
    FROM slot s CROSS JOIN LATERAL (
        SELECT j.id, j.requires, j.priority, j.queue_pos, j.seq FROM jobs j
        WHERE j.state = 'queued' AND j.runtime_id = s.runtime_id AND j.pinned_runner_id IS NULL
        ORDER BY j.priority DESC, j.queue_pos, j.seq LIMIT 2 FOR UPDATE SKIP LOCKED) c
    WHERE s.pick = 'nothing' AND s.locked AND NOT s.stale AND NOT (SELECT pinned FROM busy)
),
odd AS (
    SELECT (SELECT pinned FROM busy) OR EXISTS (SELECT 1 FROM slot WHERE stale)
           OR EXISTS (SELECT 1 FROM cand WHERE nth = 1 AND requires <> '[]') AS yes
),
-- The head job is the runner's; the one behind it wakes another runner.
leased AS (
    UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, lease_id = $2,
           lease_runner_id = $1, started_at = $3,
           lease_expires_at = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) + $4
    FROM cand c
    WHERE jobs.id = c.id AND c.nth = 1 AND NOT (SELECT yes FROM odd) AND jobs.state = 'queued'
    RETURNING jobs.id, jobs.attempt, jobs.spec, jobs.env_sealed
)
SELECT CASE WHEN o.yes THEN 'again' WHEN l.id IS NOT NULL THEN 'job' ELSE s.pick END,
       l.id, l.attempt, l.spec, l.env_sealed, s.slots, s.held, s.runtime_id,
       CASE WHEN l.id IS NOT NULL AND b.id IS NOT NULL THEN 'pool' END,
       CASE WHEN l.id IS NOT NULL THEN b.requires END, CAST(1 AS BIGINT)
FROM slot s CROSS JOIN odd o LEFT JOIN leased l ON true LEFT JOIN cand b ON b.nth = 2
UNION ALL
SELECT 'done', d.id, NULL, d.lease_id, d.state, NULL, NULL, d.runner_id, NULL, NULL, NULL
FROM done d
