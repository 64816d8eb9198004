-- Issue 13: a workspace's spend of the month, striped. Every charged usage
-- line used to update its workspace's one row (spent_ms, spent_month), so
-- concurrent completes of one workspace queued on that row's lock, each for
-- the length of the one before it's commit. Now a statement adds to the
-- stripe of its connection (the backend's pid mod 16), once, in workspace
-- order, so concurrent completes seldom share a row; a submit's budget check
-- sums a month's stripes (at most 16 rows). workspaces.spent_ms and
-- spent_month are no longer written (a later release drops them: replicas of
-- the previous one may still read them during an upgrade).
CREATE TABLE workspace_spend (
    workspace_id  TEXT NOT NULL,
    month         BIGINT NOT NULL,
    shard         BIGINT NOT NULL,
    spent_ms      BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, month, shard)
);
INSERT INTO workspace_spend (workspace_id, month, shard, spent_ms)
SELECT id, spent_month, 0, spent_ms FROM workspaces WHERE spent_month IS NOT NULL;

DROP TRIGGER usage_charges_workspace ON usage;
DROP FUNCTION usage_charges_workspace();

CREATE FUNCTION usage_charges_workspace() RETURNS trigger AS $$
BEGIN
    INSERT INTO workspace_spend AS s (workspace_id, month, shard, spent_ms)
    SELECT n.workspace_id, n.month, pg_backend_pid() % 16, SUM(n.runner_ms)
    FROM new_usage n WHERE n.charged = 1
    GROUP BY n.workspace_id, n.month ORDER BY n.workspace_id, n.month
    ON CONFLICT (workspace_id, month, shard) DO UPDATE SET spent_ms = s.spent_ms + EXCLUDED.spent_ms;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

-- The lines a statement inserted (not those its ON CONFLICT skipped).
CREATE TRIGGER usage_charges_workspace AFTER INSERT ON usage
REFERENCING NEW TABLE AS new_usage
FOR EACH STATEMENT EXECUTE FUNCTION usage_charges_workspace();
