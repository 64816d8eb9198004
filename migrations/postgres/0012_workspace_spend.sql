-- Issue 13: a workspace's spend of the month, striped. Every charged usage
-- line used to update its workspace's one row (spent_ms, spent_month), so
-- concurrent completes of one workspace queued on that row's lock, each for
-- the length of the one before it's commit. Now each connection adds to its
-- own stripe (its backend's pid mod 16), once per statement, in workspace
-- order; a submit's budget check sums a month's stripes (at most 16 rows).
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
ALTER TABLE workspaces DROP COLUMN spent_ms;
ALTER TABLE workspaces DROP COLUMN spent_month;

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
