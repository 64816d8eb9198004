-- Issue 24, CI links scoped: which refs and which events a linked
-- repository's OIDC tokens may act on. `refs` is a JSON array of ref
-- patterns (`refs/heads/main`, `refs/tags/v*`; NULL: any ref); `events` a
-- JSON array of GitHub event names (NULL: any event but `pull_request` and
-- `pull_request_target`, whose code anyone who opens a pull request
-- writes). `repository_id` is now pinned when the link is made (GitHub's
-- id of the repository, read through the App) and again on every relink;
-- a link made before this migration has none and is refused until it is
-- linked again. See coordinator/src/store/ci.rs.

ALTER TABLE ci_links ADD COLUMN refs TEXT;
ALTER TABLE ci_links ADD COLUMN events TEXT;
