-- Issue 29: a complete adds its usage to the workspace's spend in its own
-- statement (complete.sql's `spent`), no longer through
-- usage_charges_workspace, a PL/pgSQL trigger for every statement that
-- inserts into usage (the function call and its INSERT's executor start, even
-- for no line: 0.15-0.5 CPU-ms of PostgreSQL's per complete, measured turn by
-- turn with psql). A line inserted with `spent` = 1 was added by the statement
-- that inserted it; any other charged line (a lease lost while running, or a
-- line from a replica of the previous release during an upgrade) is added by
-- a row trigger, whose WHEN costs the rest nothing.
ALTER TABLE usage ADD COLUMN spent BIGINT NOT NULL DEFAULT 0;

DROP TRIGGER usage_charges_workspace ON usage;
DROP FUNCTION usage_charges_workspace();

CREATE FUNCTION usage_charges_workspace() RETURNS trigger AS $$
BEGIN
    INSERT INTO workspace_spend AS s (workspace_id, month, shard, spent_ms)
    VALUES (NEW.workspace_id, NEW.month, pg_backend_pid() % 16, NEW.runner_ms)
    ON CONFLICT (workspace_id, month, shard) DO UPDATE SET spent_ms = s.spent_ms + EXCLUDED.spent_ms;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER usage_charges_workspace AFTER INSERT ON usage
FOR EACH ROW WHEN (NEW.charged = 1 AND NEW.spent = 0) EXECUTE FUNCTION usage_charges_workspace();
