-- Issue 24: join tokens are a managed credential. Each has an id (`jt_…`,
-- listed and revoked by it; never the token), the member who minted it, and
-- how often and when it was last used to join a runner. One-time codes
-- remember who made them, so removing a member revokes the join tokens
-- and the unused invites they made (coordinator/src/store/members.rs).

ALTER TABLE tokens ADD COLUMN minted_by TEXT;
-- Runners joined with this token (join tokens only).
ALTER TABLE tokens ADD COLUMN uses INTEGER NOT NULL DEFAULT 0;

-- Join tokens minted before this migration: an id from their hash (the
-- hash is all the database has), and their minter from the audit entry
-- written in the same transaction (same pool, same instant).
UPDATE tokens SET id = 'jt_' || substr(hash, 1, 26) WHERE kind = 'join';
UPDATE tokens SET minted_by = (
    SELECT a.actor_id FROM audit_events a
    WHERE a.action = 'join_token.created' AND a.actor_kind = 'member'
      AND a.target = tokens.subject_id AND a.at = tokens.created_at
    ORDER BY a.seq DESC LIMIT 1
) WHERE kind = 'join';
CREATE INDEX tokens_by_minter ON tokens (minted_by);

ALTER TABLE pairing_codes ADD COLUMN created_by TEXT;
UPDATE pairing_codes SET created_by = member_id WHERE purpose = 'pair';
UPDATE pairing_codes SET created_by = (
    SELECT a.actor_id FROM audit_events a
    WHERE a.action = 'member.invited' AND a.actor_kind = 'member'
      AND a.target = pairing_codes.member_id AND a.at = pairing_codes.created_at
    ORDER BY a.seq DESC LIMIT 1
) WHERE purpose = 'invite';
CREATE INDEX pairing_codes_by_creator ON pairing_codes (created_by);
