-- Issue 29: a lease batch is one plain SQL statement
-- (coordinator/src/store/leases/lease.sql), which costs PostgreSQL about
-- half of what this function does: PL/pgSQL prepares each of its simple
-- expressions again in every transaction, and every lease is one. The
-- function stays for what the statement hands back to it (pinned jobs,
-- jobs that require capabilities, a batch that raced another).
--
-- The statement reads a runner's live leases in its own snapshot, taken
-- before it locks the runner; a batch that leased to that runner and
-- committed in between would go uncounted. So every batch that may lease
-- to a runner counts itself in `lease_seq`, under the runner's lock, and
-- the statement, which sees the latest row once it holds the lock, hands
-- the batch back when the count moved. This function counts too (its
-- body is 0015's with that UPDATE, its settings 0015's and 0021's).
ALTER TABLE runners ADD COLUMN lease_seq BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION drover_lease(req_runners TEXT[], req_leases TEXT[], ids TEXT[], now_ms BIGINT, ttl_ms BIGINT)
RETURNS TABLE (out_pick TEXT, out_job_id TEXT, out_attempt BIGINT, out_spec TEXT,
               out_env_sealed TEXT, out_slots BIGINT, out_held BIGINT, out_runtime TEXT,
               out_wake TEXT, out_wake_requires TEXT)
LANGUAGE plpgsql VOLATILE
-- Every statement here reads by index, in the index's order: plan them
-- once per connection (a custom plan each call cost more than the
-- statement), and never as a sort of the whole queue (a generic plan does
-- not know the page is short, and chose one once the queue was long).
SET plan_cache_mode = force_generic_plan
SET enable_sort = off
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
    n INT := COALESCE(array_length(req_runners, 1), 0);
    m INT := COALESCE(array_length(ids, 1), 0);
    -- Per request.
    picks TEXT[] := array_fill('nothing'::TEXT, ARRAY[n]);
    picked TEXT[] := array_fill(NULL::TEXT, ARRAY[n]);
    wakes TEXT[] := array_fill(NULL::TEXT, ARRAY[n]);
    wake_reqs TEXT[] := array_fill(NULL::TEXT, ARRAY[n]);
    attempts BIGINT[] := array_fill(NULL::BIGINT, ARRAY[n]);
    specs TEXT[] := array_fill(NULL::TEXT, ARRAY[n]);
    sealed TEXT[] := array_fill(NULL::TEXT, ARRAY[n]);
    -- Per request, its runner's place in `ids`.
    who INT[] := array_fill(0, ARRAY[n]);
    -- Per runner asking, by its place in `ids`.
    live BOOLEAN[] := array_fill(false, ARRAY[m]);
    pinned BOOLEAN[] := array_fill(false, ARRAY[m]);
    r_pool TEXT[] := array_fill(NULL::TEXT, ARRAY[m]);
    r_caps JSONB[] := array_fill(NULL::JSONB, ARRAY[m]);
    r_slots BIGINT[] := array_fill(NULL::BIGINT, ARRAY[m]);
    r_held BIGINT[] := array_fill(NULL::BIGINT, ARRAY[m]);
    room BIGINT[] := array_fill(0::BIGINT, ARRAY[m]);
    pools TEXT[] := '{}';
    pool TEXT;
    waiting INT[];
    served INT[];
    behind TEXT[];
    lim BIGINT;
    off BIGINT;
    got BIGINT;
    rec RECORD;
    i INT;
    k INT;
    w INT;
    quiet BOOLEAN;
BEGIN
    -- Nothing queued for these runners, the usual answer to a runner asking
    -- again after its last job: answered from plain reads. The runners'
    -- locks are writes (the transaction then has an id, and its commit
    -- waits for the WAL to reach the disk); finding nothing needs none. A
    -- job queued after this read wakes its runners, as after a locked look
    -- that found nothing; one a concurrent batch is leasing to these
    -- runners is still queued in this snapshot, so that batch is waited for.
    quiet := NOT EXISTS (SELECT 1 FROM jobs j
                         WHERE j.state = 'queued' AND j.pinned_runner_id = ANY (ids))
         -- A probe of each runner's pool (as a join, it was planned as a
         -- read of every queued job).
         AND NOT EXISTS (SELECT 1 FROM runners r,
                                LATERAL (SELECT 1 FROM jobs j
                                         WHERE j.runtime_id = r.runtime_id AND j.state = 'queued'
                                           AND j.pinned_runner_id IS NULL LIMIT 1) q
                         WHERE r.id = ANY (ids));
    IF NOT quiet THEN
        PERFORM 1 FROM runners r WHERE r.id = ANY (ids) ORDER BY r.id FOR NO KEY UPDATE;
        -- What the lease statement checks (0022): this batch may lease to
        -- these runners.
        UPDATE runners SET lease_seq = lease_seq + 1 WHERE id = ANY (ids);
    END IF;
    -- A fresh snapshot, after the locks: the leases a batch that held these
    -- runners before us wrote are counted.
    FOR rec IN
        SELECT r.id, r.runtime_id, r.labels::jsonb || r.detected::jsonb AS caps, r.revoked_at, r.slots,
               (SELECT COUNT(*) FROM jobs j
                WHERE j.lease_runner_id = r.id AND j.state IN ('leased', 'running')) AS held,
               EXISTS (SELECT 1 FROM jobs j
                       WHERE j.state = 'queued' AND j.pinned_runner_id = r.id) AS has_pinned
        FROM runners r WHERE r.id = ANY (ids)
    LOOP
        k := array_position(ids, rec.id);
        live[k] := rec.revoked_at IS NULL;
        pinned[k] := rec.has_pinned;
        r_pool[k] := rec.runtime_id;
        r_caps[k] := rec.caps;
        r_slots[k] := rec.slots;
        r_held[k] := rec.held;
        room[k] := rec.slots - rec.held;
    END LOOP;

    -- Slots: each request takes one, in order.
    FOR i IN 1 .. n LOOP
        k := array_position(ids, req_runners[i]);
        who[i] := k;
        IF NOT live[k] THEN
            picks[i] := 'revoked';
        ELSIF room[k] > 0 THEN
            room[k] := room[k] - 1;
        ELSE
            picks[i] := 'limited';
        END IF;
    END LOOP;

    -- Pinned jobs, usually none.
    FOR i IN 1 .. n LOOP
        CONTINUE WHEN picks[i] <> 'nothing' OR NOT pinned[who[i]];
        FOR rec IN
            SELECT j.id, j.requires FROM jobs j
            WHERE j.state = 'queued' AND j.pinned_runner_id = req_runners[i]
              AND j.id <> ALL (array_remove(picked, NULL))
            ORDER BY j.priority DESC, j.queue_pos, j.seq FOR UPDATE SKIP LOCKED
        LOOP
            IF picks[i] = 'job' THEN
                wakes[i] := 'runner';
                EXIT;
            END IF;
            CONTINUE WHEN rec.requires <> '[]' AND NOT drover_satisfies(r_caps[who[i]], rec.requires);
            picks[i] := 'job';
            picked[i] := rec.id;
        END LOOP;
    END LOOP;

    -- The pools of the requests still unserved, in order of first request.
    FOR i IN 1 .. n LOOP
        IF picks[i] = 'nothing' AND NOT quiet AND NOT r_pool[who[i]] = ANY (pools) THEN
            pools := pools || r_pool[who[i]];
        END IF;
    END LOOP;
    FOREACH pool IN ARRAY pools LOOP
        waiting := '{}';
        served := '{}';
        behind := '{}';
        FOR i IN 1 .. n LOOP
            IF picks[i] = 'nothing' AND r_pool[who[i]] = pool THEN
                waiting := waiting || i;
            END IF;
        END LOOP;
        -- A page at a time (each row read is locked): twice as many rows
        -- as requests first, more only while requests wait unserved.
        lim := 2 * cardinality(waiting);
        off := 0;
        LOOP
            got := 0;
            FOR rec IN
                SELECT j.id, j.requires FROM jobs j
                WHERE j.state = 'queued' AND j.runtime_id = pool AND j.pinned_runner_id IS NULL
                ORDER BY j.priority DESC, j.queue_pos, j.seq LIMIT lim OFFSET off FOR UPDATE SKIP LOCKED
            LOOP
                got := got + 1;
                IF cardinality(waiting) = 0 THEN
                    behind := behind || rec.requires;
                    CONTINUE;
                END IF;
                -- A later page sees new commits: it may repeat a row.
                CONTINUE WHEN rec.id = ANY (picked);
                w := NULL;
                FOR k IN 1 .. cardinality(waiting) LOOP
                    IF rec.requires = '[]' OR drover_satisfies(r_caps[who[waiting[k]]], rec.requires) THEN
                        w := k;
                        EXIT;
                    END IF;
                END LOOP;
                CONTINUE WHEN w IS NULL;
                i := waiting[w];
                picks[i] := 'job';
                picked[i] := rec.id;
                served := served || i;
                waiting := waiting[1 : w - 1] || waiting[w + 1 :];
            END LOOP;
            EXIT WHEN cardinality(behind) > 0 OR got < lim;
            off := off + lim;
            lim := 16;
        END LOOP;
        FOR k IN 1 .. LEAST(cardinality(served), cardinality(behind)) LOOP
            wakes[served[k]] := 'pool';
            wake_reqs[served[k]] := behind[k];
        END LOOP;
    END LOOP;

    -- The jobs picked are locked by this transaction: `state = 'queued'`,
    -- the only way out of the queue, holds for each. (By the primary key:
    -- a join to the picks was planned as a scan of every job.) Nothing
    -- picked, nothing written.
    IF cardinality(array_remove(picked, NULL)) > 0 THEN
        FOR rec IN
            UPDATE jobs SET state = 'leased', attempt = attempt + 1,
                   lease_id = req_leases[array_position(picked, jobs.id)],
                   lease_runner_id = req_runners[array_position(picked, jobs.id)],
                   started_at = now_ms,
                   lease_expires_at = CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) + ttl_ms
            WHERE jobs.id = ANY (array_remove(picked, NULL)) AND jobs.state = 'queued'
            RETURNING jobs.id, jobs.attempt, jobs.spec, jobs.env_sealed
        LOOP
            i := array_position(picked, rec.id);
            attempts[i] := rec.attempt;
            specs[i] := rec.spec;
            sealed[i] := rec.env_sealed;
        END LOOP;
    END IF;

    FOR i IN 1 .. n LOOP
        out_pick := CASE WHEN picks[i] = 'job' AND attempts[i] IS NULL THEN 'nothing' ELSE picks[i] END;
        out_job_id := CASE WHEN attempts[i] IS NULL THEN NULL ELSE picked[i] END;
        out_attempt := attempts[i];
        out_spec := specs[i];
        out_env_sealed := sealed[i];
        out_slots := r_slots[who[i]];
        out_held := r_held[who[i]];
        out_runtime := r_pool[who[i]];
        out_wake := wakes[i];
        out_wake_requires := wake_reqs[i];
        RETURN NEXT;
    END LOOP;
END
$$;
