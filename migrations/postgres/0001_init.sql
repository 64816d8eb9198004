-- Drover schema, PostgreSQL dialect: the same tables as migrations/sqlite,
-- with BIGINT integers and flags as 0/1 so one set of queries serves both.
-- Times are Unix milliseconds. Landed migrations are never edited.

CREATE TABLE workspaces (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
        budget_ms     BIGINT,
    spent_ms      BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL
);

CREATE TABLE members (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    email         TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    created_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, email)
);

CREATE TABLE runtimes (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id),
    owner_member_id  TEXT REFERENCES members (id),
    name             TEXT NOT NULL,
    created_at       BIGINT NOT NULL
);
CREATE UNIQUE INDEX runtimes_by_owner_name
    ON runtimes (workspace_id, COALESCE(owner_member_id, ''), name);

CREATE TABLE runners (
    id               TEXT PRIMARY KEY,
    runtime_id       TEXT NOT NULL REFERENCES runtimes (id),
    name             TEXT NOT NULL,
    labels           TEXT NOT NULL,
    detected         TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    last_seen_at     BIGINT,
    revoked_at       BIGINT
);
CREATE INDEX runners_by_runtime ON runners (runtime_id);

CREATE TABLE tokens (
    hash         TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('user', 'runner', 'join')),
    subject_id   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT
);
CREATE INDEX tokens_by_subject ON tokens (subject_id);

CREATE TABLE jobs (
    seq               BIGSERIAL PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    workspace_id      TEXT NOT NULL REFERENCES workspaces (id),
    submitter_id      TEXT NOT NULL REFERENCES members (id),
    runtime_ref       TEXT NOT NULL,
    runtime_id        TEXT NOT NULL REFERENCES runtimes (id),
    pinned_runner_id  TEXT REFERENCES runners (id),
    state             TEXT NOT NULL,
    priority          BIGINT NOT NULL,
    queue_pos         BIGINT NOT NULL DEFAULT 0,
    requires          TEXT NOT NULL,
    spec              TEXT NOT NULL,
    attempt           BIGINT NOT NULL DEFAULT 0,
    max_attempts      BIGINT NOT NULL,
    lease_id          TEXT,
    lease_runner_id   TEXT,
    lease_expires_at  BIGINT,
    cancel_requested  BIGINT NOT NULL DEFAULT 0,
    exit_code         BIGINT,
    error             TEXT,
    ran_by            TEXT,
    ran_by_owner      TEXT,
    created_at        BIGINT NOT NULL,
    started_at        BIGINT,
    finished_at       BIGINT
);
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
    attempt     BIGINT NOT NULL,
    seq         BIGINT NOT NULL,
    stream      TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    data        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (job_id, attempt, seq)
);

CREATE TABLE usage (
    job_id        TEXT NOT NULL,
    attempt       BIGINT NOT NULL,
    workspace_id  TEXT NOT NULL,
    payer         TEXT NOT NULL,
    charged       BIGINT NOT NULL,
    runner_ms     BIGINT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX usage_by_workspace ON usage (workspace_id, charged);
