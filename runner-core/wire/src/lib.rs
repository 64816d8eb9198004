//! The JSON shapes that cross the wire between the coordinator, runner-core
//! (the runner and the typed client) and the desktop UI. Nothing here does I/O.
//!
//! Field names are camelCase on the wire. Enums that a client branches on
//! (`ErrorCode`, `JobState`, `Outcome`) carry an `Unknown` arm where a newer
//! coordinator may send a value an older client does not know.
//!
//! (Over 500 lines: every JSON shape on the wire lives here and only here (ARCHITECTURE.md, Boundaries), so a reader finds each in one place.)

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod github;
pub mod integer;
pub mod text;

pub use github::*;

/// Version of the wire protocol (the runner protocol `/v1/runner/...` and the
/// member API alike) this build speaks: the newest a coordinator of this build
/// serves. Every request of runner-core's client (the runner, the CLI, the
/// desktop app) carries it in the [`PROTOCOL_HEADER`] header. Raise it when a
/// change would break an older peer (a new required field, a changed
/// meaning), not for additions an older peer ignores.
pub const PROTOCOL_VERSION: u32 = 1;
/// The oldest protocol a coordinator of this build still serves. A client
/// older than this is answered `426 UPGRADE_REQUIRED`, one newer than
/// [`PROTOCOL_VERSION`] `426 COORDINATOR_TOO_OLD`; a request without the
/// header (curl, scripts, browsers, MCP clients) is served.
pub const OLDEST_PROTOCOL: u32 = 1;
pub const PROTOCOL_HEADER: &str = "drover-protocol";
/// The client's name and version, `drover/0.1.0` ([`CLIENT_ID`]): what the
/// coordinator's refusals and logs name. Informative only; the protocol
/// number decides.
pub const CLIENT_HEADER: &str = "drover-client";
/// This build's version (the workspace's): the coordinator's, the `drover`
/// CLI's and the desktop app's are one number.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What this build sends as [`CLIENT_HEADER`]: `drover/<version>`.
pub const CLIENT_ID: &str = concat!("drover/", env!("CARGO_PKG_VERSION"));

/// The protocol range a coordinator serves, as `/healthz` reports it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProtocolRange {
    /// The oldest protocol served ([`OLDEST_PROTOCOL`]).
    pub oldest: u32,
    /// The newest protocol known ([`PROTOCOL_VERSION`]).
    pub newest: u32,
}

impl ProtocolRange {
    /// This build's range.
    pub const fn this_build() -> Self {
        Self {
            oldest: OLDEST_PROTOCOL,
            newest: PROTOCOL_VERSION,
        }
    }
}

/// Which surface a member request comes from, for the audit log: `cli`,
/// `desktop` or `rest` (the default when it is absent). The clients set it.
pub const SURFACE_HEADER: &str = "drover-surface";

/// Longest a lease long-poll may be held open by the coordinator.
pub const MAX_LEASE_WAIT_MS: u64 = 30_000;

// ---------------------------------------------------------------- env

/// A job's environment variables. On the wire a plain JSON object; in `Debug`
/// (so in every log line) only the names, each value printed as `***`.
#[derive(Serialize, Deserialize, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct Env(BTreeMap<String, String>);

impl Env {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn into_inner(self) -> BTreeMap<String, String> {
        self.0
    }
}

impl std::ops::Deref for Env {
    type Target = BTreeMap<String, String>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Env {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "***")))
            .finish()
    }
}

impl From<BTreeMap<String, String>> for Env {
    fn from(map: BTreeMap<String, String>) -> Self {
        Self(map)
    }
}

impl<const N: usize> From<[(String, String); N]> for Env {
    fn from(pairs: [(String, String); N]) -> Self {
        Self(pairs.into())
    }
}

impl FromIterator<(String, String)> for Env {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Env {
    type Item = (&'a String, &'a String);
    type IntoIter = std::collections::btree_map::Iter<'a, String, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for Env {
    type Item = (String, String);
    type IntoIter = std::collections::btree_map::IntoIter<String, String>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

// ---------------------------------------------------------------- errors

/// The stable error codes. Clients branch on these, never on messages.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// The request body or query could not be parsed, or a field is invalid.
    BadRequest,
    /// A runtime ref does not follow the grammar.
    InvalidRef,
    /// No credential, or an unknown, expired or revoked one.
    Unauthorized,
    /// The credential is valid but may not do this (e.g. a member on an admin route).
    Forbidden,
    /// The thing does not exist, or exists in another tenant (existence never leaks).
    NotFound,
    /// The target pool exists but no runner has ever joined it.
    NoRunners,
    /// A pinned runner lacks a capability the job requires.
    CapabilityMismatch,
    /// The state does not allow this (e.g. cancelling a finished job).
    Conflict,
    /// The lease is no longer held by this runner (expired, re-queued or revoked).
    LeaseLost,
    /// The runner already holds (or asks for) as many leases as it declared
    /// slots; it should finish a job first.
    LeaseLimit,
    /// The body is larger than the coordinator accepts.
    PayloadTooLarge,
    /// The workspace's budget is spent.
    BudgetExceeded,
    /// The `drover-protocol` header is not a protocol number.
    UnsupportedProtocol,
    /// 426: the client speaks a protocol older than the oldest this
    /// coordinator serves; the message names the version to install.
    UpgradeRequired,
    /// 426: the client speaks a protocol newer than this coordinator knows;
    /// the message says to upgrade the coordinator (or use its version).
    CoordinatorTooOld,
    /// The coordinator is busy (too many requests, connections or bodies in
    /// flight); try again after the `Retry-After` header's seconds.
    Overloaded,
    /// `/readyz`: the coordinator cannot serve yet (its database does not
    /// answer, its migrations are not this build's, or it is shutting down).
    NotReady,
    /// The route exists, but not with this method.
    MethodNotAllowed,
    /// The request body did not arrive in time.
    RequestTimeout,
    /// Something failed inside the coordinator; details are in its log only.
    Internal,
    /// The pairing code was already redeemed (each works once).
    PairingCodeUsed,
    /// The pairing code is older than its ten minutes.
    PairingCodeExpired,
    /// Too many wrong pairing codes from this client, or too many large
    /// answers (job lists, jobs, log batches) in flight to this member; try
    /// again after the `Retry-After` header's seconds.
    RateLimited,
    /// The change would leave the workspace without an admin.
    LastAdmin,
    /// The coordinator has no GitHub App configured (`--github-app-id` …).
    GithubNotConfigured,
    /// GitHub refused or failed a call the coordinator made; the message
    /// says what GitHub answered.
    GithubError,
    /// The install link's `state` was already used (each works once).
    StateUsed,
    /// The install link's `state` is older than its ten minutes.
    StateExpired,
    /// A CI token (GitHub Actions OIDC) whose ref or event its CI link does
    /// not allow (`refs`, `events`; `pull_request` only when listed), or a
    /// CI job for a pool other than its link's `runtime`.
    CiNotAllowed,
    /// A browser page of another site (its `Origin` header) called `/mcp`.
    ForbiddenOrigin,
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "BAD_REQUEST",
            Self::InvalidRef => "INVALID_REF",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Forbidden => "FORBIDDEN",
            Self::NotFound => "NOT_FOUND",
            Self::NoRunners => "NO_RUNNERS",
            Self::CapabilityMismatch => "CAPABILITY_MISMATCH",
            Self::Conflict => "CONFLICT",
            Self::LeaseLost => "LEASE_LOST",
            Self::LeaseLimit => "LEASE_LIMIT",
            Self::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Self::BudgetExceeded => "BUDGET_EXCEEDED",
            Self::UnsupportedProtocol => "UNSUPPORTED_PROTOCOL",
            Self::UpgradeRequired => "UPGRADE_REQUIRED",
            Self::CoordinatorTooOld => "COORDINATOR_TOO_OLD",
            Self::Overloaded => "OVERLOADED",
            Self::NotReady => "NOT_READY",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::RequestTimeout => "REQUEST_TIMEOUT",
            Self::Internal => "INTERNAL",
            Self::PairingCodeUsed => "PAIRING_CODE_USED",
            Self::PairingCodeExpired => "PAIRING_CODE_EXPIRED",
            Self::RateLimited => "RATE_LIMITED",
            Self::LastAdmin => "LAST_ADMIN",
            Self::GithubNotConfigured => "GITHUB_NOT_CONFIGURED",
            Self::GithubError => "GITHUB_ERROR",
            Self::StateUsed => "STATE_USED",
            Self::StateExpired => "STATE_EXPIRED",
            Self::CiNotAllowed => "CI_NOT_ALLOWED",
            Self::ForbiddenOrigin => "FORBIDDEN_ORIGIN",
            Self::Unknown => "UNKNOWN",
        }
    }
}

/// Every error response: `{"error": {"code", "message"}}`.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorDetail {
    pub code: ErrorCode,
    /// Human-readable; safe to show the caller.
    pub message: String,
}

// ---------------------------------------------------------------- jobs

/// `queued`, `leased` and `running` are live; `succeeded`, `failed`, `cancelled`, `timed_out` and `lost` are terminal. Clients should tolerate states they do not know.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Leased,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
    Lost,
    #[serde(other)]
    Unknown,
}

impl JobState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Cancelled | Self::TimedOut | Self::Lost
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Leased => "leased",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Lost => "lost",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => Self::Queued,
            "leased" => Self::Leased,
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            "timed_out" => Self::TimedOut,
            "lost" => Self::Lost,
            _ => return None,
        })
    }
}

/// `POST /v1/jobs`
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(
    feature = "schema",
    schemars(extend("oneOf" = [{"required": ["command"]}, {"required": ["script"]}]))
)]
pub struct SubmitJob {
    /// A runtime ref: where the job runs.
    ///
    /// | ref | meaning |
    /// |---|---|
    /// | `self` | the submitter's default personal pool (`default`) |
    /// | `self:<name>` | the submitter's personal pool `<name>` (a pool name or pool id `rt_…`), or one of the submitter's runners by id (`rn_…`, pins the job to it) |
    /// | `self:<subject>:<name>` | canonical personal form; `<subject>` (a member id, `usr_…`) must be the caller |
    /// | `self:ws` | the workspace's default pool (`default`) |
    /// | `self:ws:<name>` | workspace pool `<name>` (name or `rt_…` id), or a workspace-owned runner by id (`rn_…`, pins the job to it) |
    /// | `ws:<workspace>:<name>` | canonical workspace form; `<workspace>` (name or id) must be the caller's workspace |
    ///
    /// Segments are separated by `:`; each is 1-64 of `[A-Za-z0-9._-]` starting with a letter or digit. A ref that breaks the grammar is refused with 400 `INVALID_REF`. A ref that parses but names nothing the caller can see (another member's personal pool, another workspace, an unknown pool or runner) is 404 `NOT_FOUND`; a pool with no runner is 404 `NO_RUNNERS` (jobs never fall back to another pool); a pinned runner lacking a capability in `requires` is 422 `CAPABILITY_MISMATCH`.
    pub runtime: String,
    /// Program and arguments. Exactly one of `command` and `script` is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// A shell script run with `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Encrypted at rest, handed only to the runner that leases the job, and
    /// erased when the job ends; never in a job read.
    #[serde(default, skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// Capabilities or labels a runner must have: `docker`, `gpu`, `os=linux`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// Run time limit, 1..=604800 (seven days). No limit when absent.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integer::optional"
    )]
    pub timeout_seconds: Option<u64>,
    /// Higher runs first; equal priorities run first-in first-out.
    #[serde(default, deserialize_with = "integer::required")]
    pub priority: i32,
    /// Attempts before a job whose runner stops answering is `lost`; 1..=20, default 3.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integer::optional"
    )]
    pub max_attempts: Option<u32>,
    /// Run inside this container image (implies `requires: ["docker"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

/// Who actually ran the job.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The runner that actually ran the job.
    pub ran_by: String,
    /// That runner's owner: `user:<subject>` or `ws:<workspace>`.
    pub by: String,
    /// Where it ran; `self-hosted`.
    pub ran_on: String,
    /// The attempt that produced the result.
    pub attempt: u32,
}

/// Optional fields are omitted when they have no value.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// Job id (`job_…`).
    pub id: String,
    pub state: JobState,
    /// The ref as submitted.
    pub runtime: String,
    /// The pool the ref resolved to.
    pub runtime_id: String,
    /// The runner the job is pinned to (`rn_…`), when the ref named a runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_runner: Option<String>,
    /// `user:<subject>`.
    pub submitted_by: String,
    /// Empty when the job is a script.
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Normalized requirements (sorted, de-duplicated; includes `docker` when an image was given).
    #[serde(default)]
    pub requires: Vec<String>,
    pub priority: i32,
    /// Attempts started so far (0 while never leased).
    pub attempt: u32,
    pub max_attempts: u32,
    /// The process's exit code, as reported by the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why the job failed or ended (at most 2000 characters from the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub cancel_requested: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// When it was queued: Unix time in milliseconds.
    pub created_at: i64,
    /// When its latest attempt was leased to a runner (absent while queued):
    /// Unix time in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When it ended: Unix time in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// In a list, `command` and `script` are a preview (512 bytes at most);
    /// `true` when it leaves something out. `GET /v1/jobs/{id}` has them whole.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A page of jobs, newest first.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobList {
    /// Newest first. Each job's command or script is a preview (see `truncated`).
    pub jobs: Vec<Job>,
    /// Pass as `before` for the next (older) page; `None` at the end. A page
    /// can hold fewer jobs than `limit` (it ends at a size budget) and still
    /// have a next one.
    #[serde(default)]
    pub next_before: Option<String>,
}

// ---------------------------------------------------------------- runtimes (pools)

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRuntime {
    /// 1-64 of `[A-Za-z0-9._-]`, starting with a letter or digit; not `ws` and not shaped like a pool id (`rt_…`) or runner id (`rn_…`). Unique per owner.
    pub name: String,
}

/// A pool of runners.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    /// Pool id (`rt_…`).
    pub id: String,
    pub name: String,
    /// `user:<subject>` or `ws:<workspace>`.
    pub owner: String,
    /// The canonical ref that targets this pool.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Runners in the pool that are not revoked.
    pub runners: u32,
    /// Unix time in milliseconds.
    pub created_at: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RuntimeList {
    /// Sorted by name.
    pub runtimes: Vec<Runtime>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateJoinToken {
    /// Lifetime of the token; default one day, at most thirty.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integer::optional"
    )]
    pub ttl_seconds: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JoinToken {
    /// `jt_…`: how it is listed and revoked (older coordinators do not
    /// send it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Shown once.
    pub token: String,
    pub runtime: Runtime,
    /// Unix time in milliseconds.
    pub expires_at: i64,
    /// `drover://join?url=…&ref=…&token=…` (older coordinators do
    /// not send it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

/// A join token as listed (never the token itself).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JoinTokenSummary {
    /// `jt_…`
    pub id: String,
    /// The pool it joins: its id, name and canonical ref.
    pub runtime_id: String,
    pub pool: String,
    #[serde(rename = "ref")]
    pub reference: String,
    /// The member who minted it (`usr_…`) and their email; `None` for a
    /// token minted before coordinators recorded it.
    pub minted_by: Option<String>,
    pub minted_by_email: Option<String>,
    /// Unix time in milliseconds.
    pub created_at: i64,
    pub expires_at: i64,
    /// When a runner last joined with it.
    pub last_used_at: Option<i64>,
    /// How many runners joined with it.
    pub uses: u64,
}

/// Join tokens that have not expired, oldest first.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JoinTokenList {
    pub join_tokens: Vec<JoinTokenSummary>,
}

// ---------------------------------------------------------------- runners

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairRunner {
    /// Runner name: 1-64 of `[A-Za-z0-9._-]`, starting with a letter or digit. Default `runner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Name or id of the pool to join; the owner's default pool when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Labels added to the runner's capabilities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Runner {
    /// Runner id (`rn_…`).
    pub id: String,
    pub name: String,
    /// `user:<subject>` or `ws:<workspace>`.
    pub owner: String,
    pub runtime_id: String,
    pub runtime_name: String,
    /// Labels set at pairing together with what the runner detected (sorted, de-duplicated).
    pub capabilities: Vec<String>,
    /// The runner talked to the coordinator in the last 40 seconds.
    pub online: bool,
    /// Unix time in milliseconds. Omitted if the runner never connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<i64>,
    /// Jobs the runner holds a lease on (empty right after pairing).
    #[serde(default)]
    pub current_jobs: Vec<String>,
    /// Unix time in milliseconds.
    pub created_at: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunnerList {
    pub runners: Vec<Runner>,
}

/// A runner and its credential. The token is shown once.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PairedRunner {
    pub runner: Runner,
    /// The runner credential (`rnr_…`). Shown once.
    pub token: String,
}

// ---------------------------------------------------------------- runner protocol

/// `POST /v1/runner/join` with the pool's join token as bearer.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinRequest {
    /// The ref the operator gave; it must name the join token's pool.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Runner name: 1-64 of `[A-Za-z0-9._-]`, starting with a letter or digit.
    pub name: String,
    /// What the runner detected about its host (`os=`, `arch=`, `docker`, ...).
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// The answer to a join: the new runner's id and credential (shown once).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JoinedRunner {
    /// `rn_…`
    pub runner_id: String,
    /// `rt_…`
    pub runtime_id: String,
    /// The runner credential (`rnr_…`). Shown once.
    pub token: String,
}

/// `GET /v1/runner/join-token` with a join token as bearer: the pool it joins.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct JoinTokenInfo {
    /// `rt_…`
    pub runtime_id: String,
    /// The pool's canonical ref (`ws:<workspace>:<name>` or `self:<subject>:<name>`).
    #[serde(rename = "ref")]
    pub reference: String,
}
/// Most slots a runner may declare in [`Hello`].
pub const MAX_SLOTS: u32 = 256;

/// `POST /v1/runner/hello`: a runner announces the capabilities it detected.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hello {
    /// What the runner detected about its host (`os=`, `arch=`, `docker`, ...); replaces what it announced before.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Jobs the runner runs at once (`--max-concurrent`), 1..=256: the
    /// coordinator lets it hold that many leases and lease long-polls.
    /// Runners that do not say have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HelloResponse {
    pub runner_id: String,
    pub runtime_id: String,
}

/// `POST /v1/runner/lease`
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseRequest {
    /// How long the coordinator may hold the request open waiting for a job.
    #[serde(deserialize_with = "integer::required")]
    pub wait_ms: u64,
    /// The leases this runner still holds (jobs it runs, or whose result it
    /// has yet to report). When given, the coordinator first releases every
    /// other lease it counts for this runner, as if it had expired: a
    /// runner that restarted, or reconnected after losing its leases, so
    /// gets its slots back at once. At most `MAX_SLOTS` ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Vec<String>>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LeaseResponse {
    /// `None` when the wait ended without a job.
    pub lease: Option<Lease>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    /// `lse_…`; the `{lease}` of the `/v1/runner/leases/{lease}/…` routes.
    pub lease_id: String,
    /// The lease ends this long after the last heartbeat.
    pub ttl_ms: u64,
    pub job: LeasedJob,
}

/// What the runner needs to execute the job. `script`, `timeoutSeconds` and `image` are `null` when unset.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LeasedJob {
    /// `job_…`
    pub id: String,
    /// This attempt's number, from 1.
    pub attempt: u32,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub script: Option<String>,
    /// The job's environment variables, decrypted for this lease only.
    #[serde(default)]
    pub env: Env,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub image: Option<String>,
}

/// `POST /v1/runner/leases/{lease}/heartbeat`: renews the lease, then waits up
/// to `waitMs` for a cancel signal before answering.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Heartbeat {
    /// After renewing, wait up to this long for a cancel before answering; capped at half the lease TTL. 0 answers at once.
    #[serde(deserialize_with = "integer::required")]
    pub wait_ms: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatResponse {
    /// A cancel was requested: stop the job and complete with `cancelled`.
    pub cancel: bool,
    /// The lease now ends this long after this heartbeat.
    pub ttl_ms: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    Stdout,
    Stderr,
}

/// `POST /v1/runner/leases/{lease}/logs`. Chunks are numbered from 0 per
/// attempt; re-sending a chunk with a number already stored changes nothing.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogChunk {
    /// Chunk number within the attempt.
    #[serde(deserialize_with = "integer::required")]
    pub seq: u64,
    pub stream: LogStream,
    pub data: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
}

/// `POST /v1/runner/leases/{lease}/complete`. Idempotent per lease.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Complete {
    /// How the attempt ended. If a cancel was requested, any outcome but `succeeded` ends the job `cancelled`.
    pub outcome: Outcome,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integer::optional"
    )]
    pub exit_code: Option<i32>,
    /// Why it failed; stored truncated to 2000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Also lease the next job, in the same round trip: the answer's `next`
    /// is what `POST /v1/runner/lease` with this request would have given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<LeaseRequest>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompleteResponse {
    /// The job's final state.
    pub state: JobState,
    /// This lease had already completed the job; nothing changed.
    pub repeated: bool,
    /// Present when the complete asked for `next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<LeaseResponse>,
}

// ---------------------------------------------------------------- billing

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetBudget {
    /// Runner-minutes the workspace may spend on its own pools each
    /// calendar month (UTC); `null` removes the limit.
    #[serde(default, deserialize_with = "integer::optional")]
    pub monthly_minutes: Option<u64>,
}

/// What the workspace used this month (UTC), and its budget.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Workspace name.
    pub workspace: String,
    /// `YYYY-MM`.
    pub month: String,
    /// The budget in runner-minutes per month; `null` when there is no limit.
    pub monthly_minutes: Option<u64>,
    /// Runner-milliseconds charged to the workspace (workspace-owned runners).
    pub charged_ms: u64,
    /// Runner-milliseconds members ran on their own runners (own-pays, never charged).
    pub own_pays_ms: u64,
    /// Attempts metered, each once.
    pub jobs_charged: u64,
    /// Attempts metered this month on members' own runners.
    pub jobs_own_pays: u64,
    /// When the month ends and the budget starts afresh (Unix ms).
    pub resets_at: i64,
}

/// One line of a usage report: a pool, a member or a runner.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageLine {
    /// The pool's, member's or runner's id.
    pub id: String,
    /// The pool's ref, the member's email, or the runner's name.
    pub name: String,
    pub runner_ms: u64,
    /// The part the workspace pays (its own pools).
    pub charged_ms: u64,
    /// Attempts metered, each once.
    pub attempts: u64,
}

/// `GET /v1/workspace/billing/usage` and `GET /v1/me/usage`.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// `YYYY-MM`.
    pub month: String,
    /// `pool`, `member` or `runner`.
    pub by: String,
    /// Largest first.
    pub lines: Vec<UsageLine>,
}

// ---------------------------------------------------------------- pairing

/// A one-time code that pairs a device to the member who asked for it.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct PairingCode {
    /// Shown once; works once, for ten minutes.
    pub code: String,
    /// `drover://pair?url=<coordinator>&code=<code>`.
    pub link: String,
    /// Unix time in milliseconds: ten minutes after it was made.
    pub expires_at: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedeemPairingCode {
    /// Names the device's token: 1-64 characters, no control characters.
    pub device_name: String,
}

/// A device's own member API token, from a redeemed pairing code. The
/// member fields are those of [`MemberCredential`].
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeviceToken {
    /// Shown once.
    pub token: String,
    /// Its id (`tok_…`), for `DELETE /v1/me/tokens/{id}`.
    pub token_id: String,
    /// The device's name.
    pub name: String,
    pub workspace: String,
    pub email: String,
    /// The member's id (`usr_…`).
    pub subject: String,
    pub role: String,
}

/// One of a member's API tokens (never its secret).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApiToken {
    /// `tok_…`
    pub id: String,
    pub name: String,
    /// Unix time in milliseconds.
    pub created_at: i64,
    /// Within a minute.
    pub last_used_at: Option<i64>,
    /// Whether this is the token the request came with.
    pub current: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ApiTokenList {
    pub tokens: Vec<ApiToken>,
}

/// Who the caller is (`GET /v1/me`): the member behind a member API token.
/// The member fields are those of [`MemberCredential`].
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub workspace: String,
    pub email: String,
    /// The member's id (`usr_…`).
    pub subject: String,
    pub role: String,
    /// The token of this request (`current: true`); `None` for a token
    /// without an id.
    pub token: Option<ApiToken>,
}

// ---------------------------------------------------------------- members

/// `POST /v1/workspace/members`: invite someone by email.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InviteMember {
    /// The invitee's email.
    pub email: String,
    /// `admin` or `member` (the default).
    #[serde(default)]
    pub role: Option<String>,
}

/// `PATCH /v1/workspace/members/{id}`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateMember {
    /// `admin` or `member`.
    pub role: String,
}

/// A member's token as an admin sees it: its name and use, never its secret.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct MemberToken {
    /// `tok_…`
    pub id: String,
    pub name: String,
    /// Unix time in milliseconds.
    pub created_at: i64,
    /// Unix time in milliseconds, to within a minute; `null` if never used.
    pub last_used_at: Option<i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Member {
    /// `usr_…`: the member's subject, as in `self:<subject>` refs.
    pub id: String,
    pub email: String,
    pub role: String,
    /// `invited` until the invite is accepted, then `active`.
    pub status: String,
    /// Unix time in milliseconds.
    pub created_at: i64,
    pub tokens: Vec<MemberToken>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemberList {
    pub members: Vec<Member>,
}

/// An invite: the member (`invited`) and a one-time code for their first
/// token, shown once. The code is redeemed like a pairing code
/// (`POST /v1/pairing-codes/{code}/redeem`, or the link in the desktop app).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Invite {
    pub member: Member,
    /// `dpc_…`, shown once; works once, for seven days.
    pub code: String,
    /// `drover://pair?url=<coordinator>&code=<code>`.
    pub link: String,
    /// Unix time in milliseconds.
    pub expires_at: i64,
}

// ---------------------------------------------------------------- audit

/// Who did something: a member, a runner (leaving), or a pool's join token.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditActor {
    /// `member`, `runner` or `join_token`.
    pub kind: String,
    /// The member's or runner's id, or the join token's pool id.
    pub id: String,
    pub email: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Increasing: a later event has a larger id.
    pub id: String,
    /// Unix time in milliseconds.
    pub at: i64,
    pub actor: AuditActor,
    /// `rest`, `cli`, `desktop` or `mcp`.
    pub surface: String,
    /// E.g. `member.invited`; see [`AUDIT_ACTIONS`].
    pub action: String,
    /// What it was done to: an id (`usr_…`, `rn_…`, `rt_…`, `tok_…`, `job_…`, `ws_…`).
    pub target: String,
    /// What else there is to know (a role, a name, a limit); never a secret.
    pub detail: serde_json::Value,
}

/// A page of the audit log, newest first.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    pub events: Vec<AuditEvent>,
    /// Pass as `before` for the next (older) page; `None` at the end.
    pub next_before: Option<String>,
}

/// Every action the audit log records.
pub const AUDIT_ACTIONS: &[&str] = &[
    "budget.set",
    "ci_link.removed",
    "ci_link.set",
    "github.install_link_created",
    "github.installation_linked",
    "github.runner_installed",
    "invite.accepted",
    "invite.revoked",
    "job.cancelled",
    "join_token.created",
    "join_token.revoked",
    "member.invited",
    "member.removed",
    "member.updated",
    "pairing_code.created",
    "pairing_code.redeemed",
    "runner.joined",
    "runner.left",
    "runner.paired",
    "runner.revoked",
    "runtime.created",
    "token.revoked",
];

// ---------------------------------------------------------------- admin

/// What `drover-coordinator admin bootstrap|add-member --json` prints.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MemberCredential {
    pub workspace: String,
    pub email: String,
    pub subject: String,
    pub role: String,
    pub token: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_debug_shows_names_never_values() {
        let env = Env::from([("TOKEN".to_owned(), "s3cr3t-value".to_owned())]);
        let job = SubmitJob {
            runtime: "self:ws".into(),
            script: Some("true".into()),
            env: env.clone(),
            ..SubmitJob::default()
        };
        for shown in [format!("{env:?}"), format!("{job:?}"), format!("{job:#?}")] {
            assert!(shown.contains("TOKEN"), "{shown}");
            assert!(!shown.contains("s3cr3t"), "{shown}");
        }
        assert_eq!(format!("{env:?}"), r#"{"TOKEN": "***"}"#);
    }

    #[test]
    fn env_is_a_plain_json_object_on_the_wire() {
        let env: Env = serde_json::from_str(r#"{"A":"1","B":"2"}"#).unwrap();
        assert_eq!(env.get("B").map(String::as_str), Some("2"));
        assert_eq!(serde_json::to_string(&env).unwrap(), r#"{"A":"1","B":"2"}"#);
        let job: SubmitJob = serde_json::from_str(r#"{"runtime":"r","script":"x"}"#).unwrap();
        assert!(job.env.is_empty());
        assert!(!serde_json::to_string(&job).unwrap().contains("env"));
    }
}
