-- Issue 13: a lease batch's reads in one round trip (PostgreSQL only; on
-- SQLite they already go as one command). The same statements the store ran
-- one by one, in the same order: the runners asking are locked first, and
-- each statement after takes a fresh snapshot (a VOLATILE function's do, under
-- READ COMMITTED), so the leases counted are those of any batch that held
-- these runners before us. Rows are tagged by kind as the store decodes them:
--   ('r', id, runtime_id, labels, detected, revoked_at, slots)
--   ('c', runner, '', '', '', leases held, NULL)
--   ('p', id, requires, pinned_runner_id, NULL, NULL, NULL)
--   ('q', id, requires, runtime_id, NULL, NULL, NULL), per pool in `pools`,
--        `limits` rows each (the head of its queue).
-- The lists come as JSON arrays (sqlx's `Any` driver binds no arrays).
CREATE FUNCTION drover_lease_reads(runner_list TEXT, pool_list TEXT, limit_list TEXT, pinned_limit BIGINT)
RETURNS TABLE (kind TEXT, id TEXT, a TEXT, b TEXT, c TEXT, n BIGINT, slots BIGINT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    runner_ids TEXT[] := ARRAY(SELECT jsonb_array_elements_text(runner_list::jsonb));
    pools TEXT[] := ARRAY(SELECT jsonb_array_elements_text(pool_list::jsonb));
    limits BIGINT[] := ARRAY(SELECT jsonb_array_elements_text(limit_list::jsonb)::BIGINT);
BEGIN
    RETURN QUERY
        SELECT 'r'::TEXT, r.id, r.runtime_id, r.labels, r.detected, r.revoked_at, r.slots
        FROM runners r WHERE r.id = ANY (runner_ids) ORDER BY r.id FOR NO KEY UPDATE;
    RETURN QUERY
        SELECT 'c'::TEXT, j.lease_runner_id, ''::TEXT, ''::TEXT, ''::TEXT, COUNT(*), NULL::BIGINT
        FROM jobs j WHERE j.lease_runner_id = ANY (runner_ids) AND j.state IN ('leased', 'running')
        GROUP BY j.lease_runner_id;
    RETURN QUERY
        SELECT 'p'::TEXT, j.id, j.requires, j.pinned_runner_id, NULL::TEXT, NULL::BIGINT, NULL::BIGINT
        FROM jobs j WHERE j.state = 'queued' AND j.pinned_runner_id = ANY (runner_ids)
        ORDER BY j.priority DESC, j.queue_pos, j.seq LIMIT pinned_limit FOR UPDATE SKIP LOCKED;
    FOR i IN 1 .. COALESCE(array_length(pools, 1), 0) LOOP
        RETURN QUERY
            SELECT 'q'::TEXT, j.id, j.requires, j.runtime_id, NULL::TEXT, NULL::BIGINT, NULL::BIGINT
            FROM jobs j WHERE j.state = 'queued' AND j.runtime_id = pools[i] AND j.pinned_runner_id IS NULL
            ORDER BY j.priority DESC, j.queue_pos, j.seq LIMIT limits[i] FOR UPDATE SKIP LOCKED;
    END LOOP;
END
$$;
