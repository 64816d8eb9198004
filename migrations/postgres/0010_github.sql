-- Issue 12, GitHub: the App's installations linked to workspaces, the
-- one-time states of install links, and the GitHub runners registered beside
-- workspace runners (see coordinator/src/store/github.rs).
-- No GitHub token is ever stored: installation tokens live in memory,
-- registration tokens are handed out once.

CREATE TABLE github_installations (
    host             TEXT NOT NULL,
    installation_id  BIGINT NOT NULL,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id),
    account          TEXT NOT NULL,
    account_type     TEXT NOT NULL,
    linked_at        BIGINT NOT NULL,
    -- An installation belongs to one workspace at most.
    PRIMARY KEY (host, installation_id)
);
CREATE INDEX github_installations_by_workspace ON github_installations (workspace_id, linked_at);

-- Install-link states, stored only as SHA-256 of the state.
CREATE TABLE github_link_states (
    hash          TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    member_id     TEXT NOT NULL REFERENCES members (id),
    host          TEXT NOT NULL,
    expires_at    BIGINT NOT NULL,
    used_at       BIGINT
);

-- A GitHub Actions runner registered beside a workspace runner. `removing`
-- is set when the Drover runner is revoked, until GitHub lets it go.
CREATE TABLE github_runners (
    runner_id     TEXT PRIMARY KEY REFERENCES runners (id),
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id),
    host          TEXT NOT NULL,
    owner         TEXT NOT NULL,
    repo          TEXT,            -- NULL: an organization-level runner
    name          TEXT NOT NULL,
    removing      BIGINT NOT NULL DEFAULT 0,
    removed_at    BIGINT,
    last_error    TEXT
);
CREATE INDEX github_runners_removing ON github_runners (removing) WHERE removing = 1;
