-- Issue 30: where each workflow job comes from, so the coordinator can ask
-- GitHub about it (polling, for coordinators webhooks cannot reach) and tell
-- GitHub when a spent budget refused it (a failed check run on head_sha, its
-- run cancelled). State 'refusing': refused, GitHub not told yet.
ALTER TABLE github_workflow_jobs ADD COLUMN repository TEXT NOT NULL DEFAULT '';  -- owner/name
ALTER TABLE github_workflow_jobs ADD COLUMN run_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE github_workflow_jobs ADD COLUMN head_sha TEXT NOT NULL DEFAULT '';
-- How many times it was claimed to be served (JIT runners minted, or tried):
-- retries back off with it, and a workflow job whose runners keep going
-- before they take it is refused after a few. State 'closing': a replica is
-- deleting its unused JIT runner.
ALTER TABLE github_workflow_jobs ADD COLUMN tries INTEGER NOT NULL DEFAULT 0;
