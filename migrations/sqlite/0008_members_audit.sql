-- Issue 11, members and the audit log (see coordinator/src/store/members.rs
-- and audit.rs). Landed migrations are never edited.

-- A removed member keeps their row (jobs and the audit log name them); a
-- re-invite brings the same member back. Invited members have not joined yet.
ALTER TABLE members ADD COLUMN removed_at INTEGER;
ALTER TABLE members ADD COLUMN joined_at INTEGER;
UPDATE members SET joined_at = created_at;

-- An invite is a one-time code like a pairing code, for the invitee's first token.
ALTER TABLE pairing_codes ADD COLUMN purpose TEXT NOT NULL DEFAULT 'pair';

-- Who did what, when, from which surface. Never a secret: targets are ids,
-- details are names, roles and limits.
CREATE TABLE audit_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    at            INTEGER NOT NULL,
    actor_kind    TEXT NOT NULL,
    actor_id      TEXT NOT NULL,
    actor_email   TEXT,
    surface       TEXT NOT NULL,
    action        TEXT NOT NULL,
    target        TEXT NOT NULL,
    detail        TEXT NOT NULL
);
CREATE INDEX audit_by_workspace ON audit_events (workspace_id, seq);
