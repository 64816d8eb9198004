-- Drover schema, SQLite dialect (migrations/postgres mirrors it). Times are Unix
-- milliseconds; flags are 0/1 integers so one set of queries serves both backends.
-- Landed migrations are never edited; add a new file instead.

CREATE TABLE workspaces (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
        budget_ms     INTEGER,
    -- Runner-milliseconds charged so far: kept with each charge, so the
    -- budget check at submit never scans usage history.
    spent_ms      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL
);

CREATE TABLE members (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    email         TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    created_at    INTEGER NOT NULL,
    UNIQUE (workspace_id, email)
);

-- A runtime is a pool. owner_member_id NULL means the workspace owns it.
CREATE TABLE runtimes (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id),
    owner_member_id  TEXT REFERENCES members (id),
    name             TEXT NOT NULL,
    created_at       INTEGER NOT NULL
);
CREATE UNIQUE INDEX runtimes_by_owner_name
    ON runtimes (workspace_id, COALESCE(owner_member_id, ''), name);

CREATE TABLE runners (
    id               TEXT PRIMARY KEY,
    runtime_id       TEXT NOT NULL REFERENCES runtimes (id),
    name             TEXT NOT NULL,
    labels           TEXT NOT NULL,  -- JSON array set by whoever paired it
    detected         TEXT NOT NULL,  -- JSON array the runner announced
    created_at       INTEGER NOT NULL,
    last_seen_at     INTEGER,
    revoked_at       INTEGER
);
CREATE INDEX runners_by_runtime ON runners (runtime_id);

-- Credentials, stored only as SHA-256 of the token.
CREATE TABLE tokens (
    hash         TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('user', 'runner', 'join')),
    subject_id   TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER
);
CREATE INDEX tokens_by_subject ON tokens (subject_id);

CREATE TABLE jobs (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    id                TEXT NOT NULL UNIQUE,
    workspace_id      TEXT NOT NULL REFERENCES workspaces (id),
    submitter_id      TEXT NOT NULL REFERENCES members (id),
    runtime_ref       TEXT NOT NULL,
    runtime_id        TEXT NOT NULL REFERENCES runtimes (id),
    pinned_runner_id  TEXT REFERENCES runners (id),
    state             TEXT NOT NULL,
    priority          INTEGER NOT NULL,
    -- 0 for new jobs (then FIFO by seq); negative for re-queued jobs, which go to the front.
    queue_pos         INTEGER NOT NULL DEFAULT 0,
    requires          TEXT NOT NULL,  -- JSON array
    spec              TEXT NOT NULL,  -- JSON: command, script, env, timeout, image
    attempt           INTEGER NOT NULL DEFAULT 0,
    max_attempts      INTEGER NOT NULL,
    lease_id          TEXT,
    lease_runner_id   TEXT,
    lease_expires_at  INTEGER,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    exit_code         INTEGER,
    error             TEXT,
    ran_by            TEXT,
    ran_by_owner      TEXT,
    created_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER
);
-- The queues hold only queued rows, so finished history never slows a lease.
CREATE INDEX jobs_pool_queue ON jobs (runtime_id, priority DESC, queue_pos, seq)
    WHERE state = 'queued' AND pinned_runner_id IS NULL;
CREATE INDEX jobs_pinned_queue ON jobs (pinned_runner_id, priority DESC, queue_pos, seq)
    WHERE state = 'queued' AND pinned_runner_id IS NOT NULL;
CREATE INDEX jobs_live_leases ON jobs (lease_expires_at)
    WHERE state IN ('leased', 'running');
CREATE INDEX jobs_by_lease_runner ON jobs (lease_runner_id)
    WHERE state IN ('leased', 'running');
CREATE UNIQUE INDEX jobs_by_lease ON jobs (lease_id) WHERE lease_id IS NOT NULL;
CREATE INDEX jobs_by_workspace ON jobs (workspace_id, seq);

CREATE TABLE job_logs (
    job_id      TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    stream      TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    data        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
);

-- One row per finished attempt that ran on a runner.
CREATE TABLE usage (
    job_id        TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    workspace_id  TEXT NOT NULL,
    payer         TEXT NOT NULL,   -- ws:<workspace> or user:<subject>
    charged       INTEGER NOT NULL, -- 1 when the workspace pays
    runner_ms     INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX usage_by_workspace ON usage (workspace_id, charged);
