-- Issue 28: a runner says when it is paused (it stays online, taking no job)
-- and when it quits (offline at once, not 40 s later). `paused` is a 0/1 flag
-- the runner sets with its hello.
ALTER TABLE runners ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
