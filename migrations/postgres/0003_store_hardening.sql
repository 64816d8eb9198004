-- Issue 8, the store's part: lease slots, look-alike workspace names,
-- idempotent submits. Landed migrations are never edited.

-- A runner holds at most this many leases at once; it declares them in
-- hello (`slots`, its --max-concurrent). Runners that never said: one.
ALTER TABLE runners ADD COLUMN slots BIGINT NOT NULL DEFAULT 1;

-- Workspace names compare case-insensitively, so `ACME` cannot sit beside
-- `acme`. Look-alikes created before this keep working under a new name:
-- every one but the oldest gets `.<its id>` appended (its first 40
-- characters kept, so the name stays within 64).
UPDATE workspaces SET name = substr(name, 1, 40) || '.' || id
WHERE EXISTS (
    SELECT 1 FROM workspaces older
    WHERE lower(older.name) = lower(workspaces.name)
      AND (older.created_at, older.id) < (workspaces.created_at, workspaces.id)
);
CREATE UNIQUE INDEX workspaces_by_lower_name ON workspaces (lower(name));

-- `Idempotency-Key` on POST /v1/jobs: the first job submitted with a key,
-- per member, for 24 hours. Written in the same transaction as the job.
-- Only hashes are kept: of the key, and of the key with the request.
CREATE TABLE idempotency_keys (
    member_id     TEXT NOT NULL,
    key_hash      TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    job_id        TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (key_hash, member_id)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
