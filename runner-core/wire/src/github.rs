//! The shapes of the GitHub App surface: linking installations, registering
//! a GitHub Actions runner next to a Drover runner, and CI links.

use serde::{Deserialize, Serialize};

use crate::Runner;

/// The capability a Drover runner offers when it can run GitHub's Actions
/// runner (`drover runner --github-actions`); on-demand jobs require it.
pub const ACTIONS_CAPABILITY: &str = "github-actions";

/// The env var the Actions runner reads its `--jitconfig` from: an
/// on-demand job carries its just-in-time config in it.
pub const ACTIONS_JIT_CONFIG_ENV: &str = "ACTIONS_RUNNER_INPUT_JITCONFIG";

/// The actions/runner release Drover installs (`github-install`'s script)
/// and runs on demand, and its linux-x64 tarball's SHA-256 as GitHub
/// publishes it.
pub const ACTIONS_RUNNER_VERSION: &str = "2.319.1";
pub const ACTIONS_RUNNER_SHA256_LINUX_X64: &str =
    "3f6efb7488a183e291fc2c62876e14c9ee732864173734facc85a1bfb1744464";

/// `POST /v1/workspace/github-app/install-link`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GithubInstallLinkRequest {
    /// The GitHub host to install on: `github.com` (the default) or a
    /// GitHub Enterprise Server host the coordinator is configured with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Where an admin installs the workspace's GitHub App.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubInstallLink {
    /// The App's install page, carrying a one-time `state` bound to this
    /// workspace. GitHub's setup redirect brings it back.
    pub url: String,
    pub host: String,
    /// Unix time in milliseconds after which the link no longer links.
    pub expires_at: i64,
}

/// An installation of the GitHub App linked to this workspace.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubInstallation {
    /// `github.com` or a GitHub Enterprise Server host.
    pub host: String,
    pub installation_id: i64,
    /// The user or organization the App is installed on.
    pub account: String,
    /// `User` or `Organization`.
    pub account_type: String,
    /// Unix time in milliseconds.
    pub linked_at: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GithubInstallationList {
    pub installations: Vec<GithubInstallation>,
}

/// A repository the App may reach through one of the linked installations.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubRepo {
    pub host: String,
    pub owner: String,
    pub name: String,
    /// `owner/name`.
    pub full_name: String,
    pub private: bool,
    pub installation_id: i64,
}

/// One page of repositories, in GitHub's order: installations in the order
/// they were linked, each one's repositories as GitHub lists them.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubRepoList {
    pub repos: Vec<GithubRepo>,
    /// The page to ask for next, if there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page: Option<u32>,
}

/// `POST /v1/workspace/runners/github-install`: give exactly one of
/// `repository` or `org`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GithubInstallRequest {
    /// `owner/name`: register a repository-level runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$"))
    )]
    pub repository: Option<String>,
    /// An organization login: register an organization-level runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$"))
    )]
    pub org: Option<String>,
    /// Only this host's installation is used (`github.com` or a GitHub
    /// Enterprise Server host). Omitted: github.com's, else any host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The organization's runner group (only with `org`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_group: Option<String>,
    /// More labels for the GitHub runner, after `self-hosted,drover-<pool>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The GitHub runner takes one job, then unregisters.
    #[serde(default)]
    pub ephemeral: bool,
    /// Name or id of the workspace pool (default: the workspace's default pool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
}

/// What a workflow writes to run on the new runner's pool.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkflowHint {
    /// `[self-hosted, drover-<pool id>]`.
    pub runs_on: Vec<String>,
    /// The Drover runtime ref of the pool: `self:ws:<pool id>`.
    pub runtime: String,
    /// The two as workflow YAML, to paste.
    pub yaml: String,
}

/// The GitHub Actions runner the script registers.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubRunnerTarget {
    pub host: String,
    /// The repository's or organization's URL that `config.sh --url` names.
    pub url: String,
    /// The GitHub runner's name: `drover-<runner id>`.
    pub name: String,
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_group: Option<String>,
    pub ephemeral: bool,
}

/// A workspace runner paired for a build server, with its install script.
/// The script holds the runner's token and a GitHub registration token:
/// both are shown here once and never stored.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubInstall {
    pub runner: Runner,
    pub github: GithubRunnerTarget,
    /// A POSIX shell script for a Linux build server, to run as root.
    pub script: String,
    pub workflow_hint: WorkflowHint,
}

/// What revoking a runner registered with GitHub did on GitHub.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubRunnerRemoval {
    /// The GitHub runner's name.
    pub name: String,
    /// True when GitHub no longer has it.
    pub removed: bool,
    /// What happened, for a person (e.g. that it is busy and removal is retried).
    pub message: String,
}

/// `DELETE /v1/workspace/runners/{id}` of a runner that has a GitHub runner
/// beside it (other revokes answer 204 with no body).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RevokedRunner {
    pub github: GithubRunnerRemoval,
}

/// `PUT /v1/workspace/ci/links`: link a repository for CI (again: update it).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CiLinkRequest {
    /// `owner/name`.
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$"))
    )]
    pub repository: String,
    /// `github.com` (the default) or a GitHub Enterprise Server host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The GitHub runner labels the workflow runs on (default `[self-hosted]`),
    /// e.g. a workflow hint's `runsOn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_on: Option<Vec<String>>,
    /// The workspace runtime ref its Drover jobs go to (default `self:ws`),
    /// e.g. a workflow hint's `runtime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The refs whose workflow runs may act (the OIDC token's `ref`), e.g.
    /// `refs/heads/main`, `refs/tags/v*` (a trailing `*` matches any rest);
    /// absent: any ref. 1-20 patterns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<Vec<String>>,
    /// The events whose workflow runs may act (the OIDC token's
    /// `event_name`), e.g. `push`, `workflow_dispatch`, `pull_request`;
    /// absent: any event but `pull_request` and `pull_request_target` (a
    /// pull request's code is written by whoever opens it, forks included:
    /// list them to allow them). 1-20 names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
}

/// A repository linked for CI: its GitHub Actions OIDC tokens may submit
/// jobs to the workspace's pools.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CiLink {
    /// `owner/name`, lower case.
    pub repository: String,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_on: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The refs allowed to act; absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refs: Option<Vec<String>>,
    /// The events allowed to act; absent: any but `pull_request` and
    /// `pull_request_target`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    /// GitHub's id of the repository, read through the App when it was
    /// linked: tokens of another repository of that name are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository_id: Option<i64>,
    /// The submitter its jobs name: `ci:<owner>/<repo>`.
    pub principal: String,
    /// Unix time in milliseconds.
    pub updated_at: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CiLinkList {
    pub links: Vec<CiLink>,
}

/// The query of `GET /v1/workspace/github-app/repos`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GithubRepoQuery {
    /// The page, from 1 (default 1).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 10000)))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Repositories a page, 1-100 (default 30, as GitHub's).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 100)))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_page: Option<u32>,
}

/// The host a CI link route names (`?host=`).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CiLinkQuery {
    /// `github.com` (the default) or a GitHub Enterprise Server host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// `PUT /v1/workspace/github/on-demand`: a workspace pool serves a
/// repository's or an organization's workflow jobs with just-in-time,
/// ephemeral GitHub Actions runners (again: update it).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GithubOnDemandRequest {
    /// The workspace pool (its name or `rt_…` id) whose runners start the
    /// Actions runners.
    pub pool: String,
    /// `owner/name` for a repository, or an organization's name.
    pub target: String,
    /// `github.com` (the default) or a GitHub Enterprise Server host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Labels besides `self-hosted` and `drover-<pool>` that the workflows
    /// ask for (`runs-on`), 0-10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// The organization's runner group the Actions runners join (default
    /// 1, GitHub's default group). Organizations only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_group_id: Option<i64>,
    /// Most Actions runners of this pool at once (1-1000, default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    pub max_runners: Option<u32>,
}

/// A workspace pool serving a repository's or an organization's workflow
/// jobs with just-in-time Actions runners.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubOnDemand {
    /// `god_…`.
    pub id: String,
    /// The pool's name.
    pub pool: String,
    pub pool_id: String,
    pub host: String,
    /// `owner/name`, or the organization, lower case.
    pub target: String,
    /// Every label a workflow job must ask for to be served here, as its
    /// `runs-on` lists them: `self-hosted`, `drover-<pool>`, then the
    /// custom ones.
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_group_id: Option<i64>,
    pub max_runners: u32,
    /// The submitter its Drover jobs name (`actions:<target>`).
    pub principal: String,
    /// Who turned it on.
    pub created_by: String,
    /// Unix time in milliseconds.
    pub created_at: i64,
    /// What a workflow writes to run here.
    pub workflow_hint: String,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GithubOnDemandList {
    pub pools: Vec<GithubOnDemand>,
}

/// What the coordinator did with a webhook delivery.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct GithubWebhookReceipt {
    /// The delivery (`X-GitHub-Delivery`).
    pub delivery: String,
    /// `queued` (a workflow job to serve, queued for the background),
    /// `finished` (a workflow job's runner released), `ignored` (no
    /// on-demand pool matches, or not a `workflow_job` event).
    pub outcome: String,
}
