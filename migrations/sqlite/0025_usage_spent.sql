-- Issue 29: on PostgreSQL a complete adds its usage to the workspace's spend
-- in its own statement and marks the line `spent`. SQLite's trigger adds
-- every charged line, as before; the column is here so both schemas match.
ALTER TABLE usage ADD COLUMN spent INTEGER NOT NULL DEFAULT 0;
