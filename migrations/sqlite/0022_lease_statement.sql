-- Issue 29: PostgreSQL's lease statement counts each batch that may lease
-- to a runner here (migrations/postgres/0022). SQLite has one writer, so
-- no batch races another and nothing reads it: the column keeps the two
-- schemas the same.
ALTER TABLE runners ADD COLUMN lease_seq INTEGER NOT NULL DEFAULT 0;
