-- Issue 29: every read of usage is a workspace's month (the usage screen,
-- the report by pool, member or runner: `usage_by_month`); nothing has read
-- it by (workspace_id, charged) since monthly billing (0009). Each complete
-- wrote that index all the same: one insert fewer per attempt metered.
DROP INDEX usage_by_workspace;
