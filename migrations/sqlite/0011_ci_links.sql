-- Issue 12, CI links: per repository, where its workflow runs (`runs_on`,
-- GitHub runner labels) and where its Drover jobs go (`runtime`). A linked
-- repository's GitHub Actions OIDC tokens are a CI principal of the
-- workspace: a members row of kind 'ci' (id `ci:<owner>/<repo>`) that its
-- jobs name as their submitter. See coordinator/src/store/ci.rs.

ALTER TABLE members ADD COLUMN kind TEXT NOT NULL DEFAULT 'person';

CREATE TABLE ci_links (
    host           TEXT NOT NULL,
    repository     TEXT NOT NULL,   -- owner/name, lower case
    workspace_id   TEXT NOT NULL REFERENCES workspaces (id),
    member_id      TEXT NOT NULL REFERENCES members (id),
    runs_on        TEXT,            -- JSON array of labels
    runtime        TEXT,            -- a workspace runtime ref
    -- GitHub's id of the repository, pinned by the first OIDC token: a
    -- repository deleted and made again under the same name is refused.
    repository_id  INTEGER,
    updated_at     INTEGER NOT NULL,
    -- A repository is linked to one workspace at most.
    PRIMARY KEY (host, repository)
);
CREATE INDEX ci_links_by_workspace ON ci_links (workspace_id, repository);
