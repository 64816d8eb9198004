-- Workspace-paid usage adds to the workspace's running total as it is
-- recorded, in the same statement: the budget check reads one row, and a
-- complete writes its usage without a separate statement for the total.
CREATE TRIGGER usage_charges_workspace AFTER INSERT ON usage
WHEN NEW.charged = 1
BEGIN
    UPDATE workspaces SET spent_ms = spent_ms + NEW.runner_ms WHERE id = NEW.workspace_id;
END;
