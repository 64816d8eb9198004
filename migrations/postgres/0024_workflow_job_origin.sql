-- Issue 30: where each workflow job comes from, so the coordinator can ask
-- GitHub about it (polling, for coordinators webhooks cannot reach) and tell
-- GitHub when a spent budget refused it (a failed check run on head_sha, its
-- run cancelled). State 'refusing': refused, GitHub not told yet.
ALTER TABLE github_workflow_jobs ADD COLUMN repository TEXT NOT NULL DEFAULT '';  -- owner/name
ALTER TABLE github_workflow_jobs ADD COLUMN run_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE github_workflow_jobs ADD COLUMN head_sha TEXT NOT NULL DEFAULT '';
