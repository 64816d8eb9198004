-- Issue 10, pairing: a member's API tokens get an id, a name and a
-- last-use time, so they can be listed and revoked one by one; one-time
-- pairing codes give a new device its own token (see
-- coordinator/src/store/pairing.rs). Landed migrations are never edited.

ALTER TABLE tokens ADD COLUMN id TEXT;
ALTER TABLE tokens ADD COLUMN name TEXT;
-- Updated at most once a minute per token.
ALTER TABLE tokens ADD COLUMN last_used_at BIGINT;

-- Tokens minted before this migration: an id from their hash (not the
-- token: the hash is all the database ever had), and a plain name.
UPDATE tokens SET id = 'tok_' || substr(hash, 1, 26), name = 'api token' WHERE kind = 'user';

CREATE UNIQUE INDEX tokens_by_id ON tokens (id);

-- One-time codes, stored only as SHA-256 of the code.
CREATE TABLE pairing_codes (
    hash         TEXT PRIMARY KEY,
    member_id    TEXT NOT NULL REFERENCES members (id),
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    used_at      BIGINT
);
CREATE INDEX pairing_codes_by_member ON pairing_codes (member_id);
