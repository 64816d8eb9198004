-- Issue 13: a workspace's spend of the month, striped (see the PostgreSQL
-- migration: there connections add to stripes of their own so concurrent
-- completes seldom queue on one row). SQLite has one writer: one stripe, 0.
-- workspaces.spent_ms and spent_month are no longer written.
CREATE TABLE workspace_spend (
    workspace_id  TEXT NOT NULL,
    month         INTEGER NOT NULL,
    shard         INTEGER NOT NULL,
    spent_ms      INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, month, shard)
);
INSERT INTO workspace_spend (workspace_id, month, shard, spent_ms)
SELECT id, spent_month, 0, spent_ms FROM workspaces WHERE spent_month IS NOT NULL;

DROP TRIGGER usage_charges_workspace;

CREATE TRIGGER usage_charges_workspace AFTER INSERT ON usage
WHEN NEW.charged = 1
BEGIN
    INSERT INTO workspace_spend (workspace_id, month, shard, spent_ms)
    VALUES (NEW.workspace_id, NEW.month, 0, NEW.runner_ms)
    ON CONFLICT (workspace_id, month, shard) DO UPDATE SET spent_ms = spent_ms + excluded.spent_ms;
END;
