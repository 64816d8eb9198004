-- Issue 30, GitHub Actions on demand: a workspace pool serves a repository's
-- or an organization's workflow jobs with just-in-time Actions runners, one
-- Drover job each. See coordinator/src/store/on_demand.rs.

-- A pool turned on for a repository (repo = its name) or an organization
-- (repo = ''): the labels its workflows ask for, the runner group (orgs),
-- and at most max_runners Actions runners at once. Its Drover jobs are
-- submitted by principal_id, a members row of kind 'actions'.
CREATE TABLE github_on_demand (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id),
    runtime_id       TEXT NOT NULL REFERENCES runtimes (id),
    host             TEXT NOT NULL,
    owner            TEXT NOT NULL,   -- lower case
    repo             TEXT NOT NULL,   -- lower case; '' for an organization
    labels           TEXT NOT NULL,   -- JSON array, self-hosted first
    runner_group_id  BIGINT,
    max_runners      BIGINT NOT NULL,
    principal_id     TEXT NOT NULL REFERENCES members (id),
    created_by       TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    UNIQUE (host, owner, repo, runtime_id)
);
CREATE INDEX github_on_demand_by_workspace ON github_on_demand (workspace_id, created_at);

-- Each workflow job seen (by webhook or by polling), once: state 'queued'
-- (no Actions runner yet: at the cap, or not served yet), 'started' (a JIT
-- runner minted and its Drover job submitted: job_id, runner_id), 'done'.
CREATE TABLE github_workflow_jobs (
    host             TEXT NOT NULL,
    workflow_job_id  BIGINT NOT NULL,
    on_demand_id     TEXT NOT NULL REFERENCES github_on_demand (id) ON DELETE CASCADE,
    state            TEXT NOT NULL,
    job_id           TEXT,
    runner_id        BIGINT,
    runner_name      TEXT,
    ran_on           TEXT,            -- the runner GitHub says ran it (completed)
    error            TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    PRIMARY KEY (host, workflow_job_id)
);
CREATE INDEX github_workflow_jobs_live ON github_workflow_jobs (on_demand_id, state, created_at);

-- Webhook deliveries taken (X-GitHub-Delivery): a replay is refused.
CREATE TABLE github_deliveries (
    delivery     TEXT PRIMARY KEY,
    received_at  BIGINT NOT NULL
);
