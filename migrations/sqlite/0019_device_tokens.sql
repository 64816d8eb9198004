-- Issue 28: a device token means the device. A runner paired with a member
-- token remembers which (`paired_by`, the token's id), so revoking the token
-- (or removing the member) revokes the runners that device paired. A revoked
-- member token leaves a row here (its hash only, never the token) so the
-- device presenting it is told who signed it out, from where and when.
ALTER TABLE runners ADD COLUMN paired_by TEXT;
CREATE INDEX runners_by_pairing_token ON runners (paired_by);
CREATE TABLE token_revocations (
    hash        TEXT PRIMARY KEY,
    member_id   TEXT NOT NULL,
    revoked_at  INTEGER NOT NULL,
    revoked_by  TEXT NOT NULL,
    surface     TEXT NOT NULL,
    reason      TEXT NOT NULL CHECK (reason IN ('revoked', 'removed'))
);
CREATE INDEX token_revocations_by_time ON token_revocations (revoked_at);
