-- A lease batch on PostgreSQL, in one statement: the rules of
-- drover_domain::lease::plan, for the usual batch. $1 the runner of each
-- request, $2 each request's new lease id, $3 the runners asking (sorted,
-- once each), $4 now, $5 the lease TTL (ms). One row per request, in order:
-- pick ('job', 'nothing', 'revoked', 'limited'), then the job's id, attempt,
-- spec and sealed env, the runner's slots, held leases and pool, and whom to
-- wake ('pool', with the requires of the job behind), and the request's
-- number (from 1). Every row says
-- 'again' when the batch is one for drover_lease (migration 0022) instead,
-- having leased nothing: a pinned job is queued for these runners, a job
-- that would be handed out requires capabilities, or another batch leased
-- to one of these runners after this statement's snapshot was taken.
--
-- Each runner's live leases are counted in that snapshot, so a batch that
-- leased to it and committed since must be noticed: every batch counts
-- itself in `lease_seq` under the runner's lock, and the lock hands this
-- statement the runner's latest row. Only the runners that have a job
-- queued are locked (finding nothing writes nothing), in id order.
WITH
-- Anything queued for these runners at all (each read keeps to its index's
-- order, so a plan never walks the finished jobs).
busy AS (
    SELECT EXISTS (SELECT 1 FROM jobs j
                   WHERE j.state = 'queued' AND j.pinned_runner_id = ANY (CAST($3 AS TEXT[]))) AS pinned,
           EXISTS (SELECT 1 FROM runners r,
                          LATERAL (SELECT 1 FROM jobs j
                                   WHERE j.runtime_id = r.runtime_id AND j.state = 'queued'
                                     AND j.pinned_runner_id IS NULL
                                   ORDER BY j.priority DESC, j.queue_pos, j.seq LIMIT 1) q
                   WHERE r.id = ANY (CAST($3 AS TEXT[]))) AS pooled
),
-- The runners as they are now, locked, each batch that may lease counted.
locked AS (
    UPDATE runners r SET lease_seq = r.lease_seq + 1
    FROM (SELECT o.id FROM runners o WHERE o.id = ANY (CAST($3 AS TEXT[]))
          ORDER BY o.id FOR NO KEY UPDATE) o
    WHERE r.id = o.id AND (SELECT pooled AND NOT pinned FROM busy)
    RETURNING r.id, r.lease_seq, r.revoked_at, r.slots
),
-- The requests, in order.
req AS (
    SELECT q.runner, q.lease, q.i
    FROM unnest(CAST($1 AS TEXT[]), CAST($2 AS TEXT[])) WITH ORDINALITY AS q (runner, lease, i)
),
-- The runners and their live leases, as of the snapshot.
seen AS (
    SELECT r.id, r.runtime_id, r.slots, r.revoked_at, r.lease_seq,
           (SELECT COUNT(*) FROM jobs j
            WHERE j.lease_runner_id = r.id AND j.state IN ('leased', 'running')) AS held
    FROM runners r WHERE r.id = ANY (CAST($3 AS TEXT[]))
),
run AS (
    SELECT s.id, s.runtime_id, s.held,
           CASE WHEN l.id IS NULL THEN s.slots ELSE l.slots END AS slots,
           CASE WHEN l.id IS NULL THEN s.revoked_at ELSE l.revoked_at END AS revoked_at,
           l.id IS NOT NULL AS locked,
           l.id IS NOT NULL AND l.lease_seq <> s.lease_seq + 1 AS stale
    FROM seen s LEFT JOIN locked l ON l.id = s.id
),
-- Slots: each request takes one, in order.
slot AS (
    SELECT q.i, q.runner, q.lease, r.runtime_id, r.slots, r.held, r.locked,
           CASE WHEN r.id IS NULL OR r.revoked_at IS NOT NULL THEN 'revoked'
                WHEN row_number() OVER (PARTITION BY q.runner ORDER BY q.i) <= r.slots - r.held THEN 'nothing'
                ELSE 'limited' END AS pick
    FROM req q LEFT JOIN run r ON r.id = q.runner
),
settled AS (
    SELECT (SELECT pinned FROM busy) OR EXISTS (SELECT 1 FROM run WHERE stale) AS no
),
-- The requests still unserved, numbered within their pool.
waiting AS (
    SELECT s.i, s.runner, s.lease, s.runtime_id,
           row_number() OVER (PARTITION BY s.runtime_id ORDER BY s.i) AS nth
    FROM slot s WHERE s.pick = 'nothing' AND s.locked AND NOT (SELECT no FROM settled)
),
pools AS (SELECT w.runtime_id, COUNT(*) AS w FROM waiting w GROUP BY w.runtime_id),
-- Twice as many queued jobs as requests, from the head of each pool,
-- locked (rows another batch holds are skipped), numbered.
cand AS MATERIALIZED (
    SELECT p.runtime_id, p.w, c.id, c.requires,
           row_number() OVER (PARTITION BY p.runtime_id ORDER BY c.priority DESC, c.queue_pos, c.seq) AS nth
    FROM pools p CROSS JOIN LATERAL (
        SELECT j.id, j.requires, j.priority, j.queue_pos, j.seq FROM jobs j
        WHERE j.state = 'queued' AND j.runtime_id = p.runtime_id AND j.pinned_runner_id IS NULL
        ORDER BY j.priority DESC, j.queue_pos, j.seq LIMIT 2 * p.w FOR UPDATE SKIP LOCKED) c
),
odd AS (
    SELECT (SELECT no FROM settled) OR EXISTS (SELECT 1 FROM cand c WHERE c.nth <= c.w AND c.requires <> '[]') AS yes
),
-- The n-th request of a pool gets its n-th job; the n-th served wakes
-- another runner for the job n places behind the last one handed out.
assign AS (
    SELECT w.i, w.runner, w.lease, c.id
    FROM waiting w JOIN cand c ON c.runtime_id = w.runtime_id AND c.nth = w.nth
    WHERE NOT (SELECT yes FROM odd)
),
leased AS (
    UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, lease_id = a.lease,
           lease_runner_id = a.runner, started_at = $4,
           lease_expires_at = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) + $5
    FROM assign a WHERE jobs.id = a.id AND jobs.state = 'queued'
    RETURNING a.i, jobs.id, jobs.attempt, jobs.spec, jobs.env_sealed
),
behind AS (
    SELECT w.i, c.requires FROM waiting w
    JOIN cand c ON c.runtime_id = w.runtime_id AND c.nth = c.w + w.nth
)
SELECT CASE WHEN o.yes THEN 'again' WHEN l.id IS NOT NULL THEN 'job'
            WHEN s.pick = 'nothing' THEN 'nothing' ELSE s.pick END,
       l.id, l.attempt, l.spec, l.env_sealed, s.slots, s.held, s.runtime_id,
       CASE WHEN l.id IS NOT NULL AND b.i IS NOT NULL THEN 'pool' END,
       CASE WHEN l.id IS NOT NULL THEN b.requires END, s.i
FROM slot s CROSS JOIN odd o LEFT JOIN leased l ON l.i = s.i LEFT JOIN behind b ON b.i = s.i
ORDER BY s.i
