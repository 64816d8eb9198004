//! What a GitHub runner registers on (a repository or an organization) and
//! the installation token each call asks for.

use serde_json::{Value, json};

use super::Host;

/// A runner's registration target: a repository or an organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Repo { owner: String, repo: String },
    Org { org: String },
}

impl Target {
    pub fn owner(&self) -> &str {
        match self {
            Self::Repo { owner, .. } => owner,
            Self::Org { org } => org,
        }
    }

    /// The REST path prefix of its runners: `/repos/o/r` or `/orgs/o`.
    pub(super) fn api_prefix(&self) -> String {
        match self {
            Self::Repo { owner, repo } => format!("/repos/{owner}/{repo}"),
            Self::Org { org } => format!("/orgs/{org}"),
        }
    }

    /// What `config.sh --url` names.
    pub fn web_url(&self, host: &Host) -> String {
        match self {
            Self::Repo { owner, repo } => format!("{}/{owner}/{repo}", host.web),
            Self::Org { org } => format!("{}/{org}", host.web),
        }
    }

    /// The installation token's scope: `administration: write` on that
    /// one repository, or `organization_self_hosted_runners: write`.
    pub(super) fn token_scope(&self) -> TokenScope {
        match self {
            Self::Repo { repo, .. } => TokenScope::repo("administration", "write", repo),
            Self::Org { .. } => TokenScope {
                permission: "organization_self_hosted_runners",
                level: "write",
                repository: None,
            },
        }
    }
}

/// What an installation token is asked for: one permission at one level
/// (`read`, `write`), on one repository or all the installation has.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct TokenScope {
    permission: &'static str,
    level: &'static str,
    repository: Option<String>,
}

impl TokenScope {
    pub(super) const METADATA: Self = Self {
        permission: "metadata",
        level: "read",
        repository: None,
    };

    /// `permission: level` on the one repository `repo` (its name).
    pub(super) fn repo(permission: &'static str, level: &'static str, repo: &str) -> Self {
        Self {
            permission,
            level,
            repository: Some(repo.to_owned()),
        }
    }

    pub(super) fn body(&self) -> Value {
        let mut body = json!({ "permissions": { self.permission: self.level } });
        if let Some(repo) = &self.repository {
            body["repositories"] = json!([repo]);
        }
        body
    }
}
