-- Issue 11, billing: budgets are per calendar month (UTC). Each usage line
-- carries its month (year * 12 + month - 1) and what it ran on and for whom,
-- so reports by pool, member or runner outlive the jobs retention purges.
-- The workspace's running total is the spend of `spent_month`: a charge in a
-- later month starts it afresh. Landed migrations are never edited.

ALTER TABLE usage ADD COLUMN month INTEGER;
ALTER TABLE usage ADD COLUMN runtime_id TEXT;
ALTER TABLE usage ADD COLUMN runner_id TEXT;
ALTER TABLE usage ADD COLUMN submitter_id TEXT;
UPDATE usage SET
    month = CAST(strftime('%Y', created_at / 1000, 'unixepoch') AS INTEGER) * 12
          + CAST(strftime('%m', created_at / 1000, 'unixepoch') AS INTEGER) - 1,
    runtime_id = (SELECT j.runtime_id FROM jobs j WHERE j.id = usage.job_id),
    runner_id = (SELECT j.ran_by FROM jobs j WHERE j.id = usage.job_id),
    submitter_id = (SELECT j.submitter_id FROM jobs j WHERE j.id = usage.job_id);
CREATE INDEX usage_by_month ON usage (workspace_id, month);

ALTER TABLE workspaces ADD COLUMN spent_month INTEGER;
UPDATE workspaces SET spent_month =
    (SELECT MAX(u.month) FROM usage u WHERE u.workspace_id = workspaces.id AND u.charged = 1);
UPDATE workspaces SET spent_ms = COALESCE((SELECT SUM(u.runner_ms) FROM usage u
    WHERE u.workspace_id = workspaces.id AND u.charged = 1 AND u.month = workspaces.spent_month), 0);

DROP TRIGGER usage_charges_workspace;
CREATE TRIGGER usage_charges_workspace AFTER INSERT ON usage
WHEN NEW.charged = 1
BEGIN
    UPDATE workspaces SET
        spent_ms = CASE
            WHEN spent_month = NEW.month THEN spent_ms + NEW.runner_ms
            WHEN spent_month IS NULL OR spent_month < NEW.month THEN NEW.runner_ms
            ELSE spent_ms END,
        spent_month = CASE
            WHEN spent_month IS NULL OR spent_month < NEW.month THEN NEW.month
            ELSE spent_month END
    WHERE id = NEW.workspace_id;
END;
