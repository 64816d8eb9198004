-- Issue 24: what a job list shows of a job whose spec is large (over 4096
-- bytes of JSON): its command or script cut to a preview, as JSON
-- ({"command", "script", "truncated"}), written at submit. A list reads this
-- instead of the spec, so listing never reads a megabyte command. NULL for
-- small specs (a list reads those whole) and for jobs submitted before this
-- migration (a list reads the first 4096 characters of their spec).
ALTER TABLE jobs ADD COLUMN summary TEXT;
