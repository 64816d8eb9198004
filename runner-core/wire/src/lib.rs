//! The JSON shapes that cross the wire between the coordinator, runner-core
//! (the runner and the typed client) and the desktop UI. Nothing here does I/O.
//!
//! Field names are camelCase on the wire. Enums that a client branches on
//! (`ErrorCode`, `JobState`, `Outcome`) carry an `Unknown` arm where a newer
//! coordinator may send a value an older client does not know.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Version of the runner wire protocol (`/v1/runner/...`), sent by runners in
/// the [`PROTOCOL_HEADER`] header. The coordinator refuses versions it does not speak.
pub const PROTOCOL_VERSION: u32 = 1;
pub const PROTOCOL_HEADER: &str = "drover-protocol";

/// Longest a lease long-poll may be held open by the coordinator.
pub const MAX_LEASE_WAIT_MS: u64 = 30_000;

// ---------------------------------------------------------------- errors

/// The stable error codes. Clients branch on these, never on messages.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// The runner speaks a protocol version the coordinator does not.
    UnsupportedProtocol,
    /// Something failed inside the coordinator; details are in its log only.
    Internal,
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
            Self::Internal => "INTERNAL",
            Self::Unknown => "UNKNOWN",
        }
    }
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
}

// ---------------------------------------------------------------- jobs

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubmitJob {
    pub runtime: String,
    /// Program and arguments. Exactly one of `command` and `script` is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// A shell script run with `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Capabilities or labels a runner must have: `docker`, `gpu`, `os=linux`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub priority: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Run inside this container image (implies `requires: ["docker"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// The runner that actually ran the job.
    pub ran_by: String,
    /// That runner's owner: `user:<subject>` or `ws:<workspace>`.
    pub by: String,
    pub ran_on: String,
    pub attempt: u32,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: String,
    pub state: JobState,
    /// The ref as submitted.
    pub runtime: String,
    /// The pool the ref resolved to.
    pub runtime_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_runner: Option<String>,
    pub submitted_by: String,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    #[serde(default)]
    pub requires: Vec<String>,
    pub priority: i32,
    pub attempt: u32,
    pub max_attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default)]
    pub cancel_requested: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    pub created_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct JobList {
    pub jobs: Vec<Job>,
}

// ---------------------------------------------------------------- runtimes (pools)

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRuntime {
    pub name: String,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    pub id: String,
    pub name: String,
    /// `user:<subject>` or `ws:<workspace>`.
    pub owner: String,
    /// The canonical ref that targets this pool.
    #[serde(rename = "ref")]
    pub reference: String,
    pub runners: u32,
    pub created_at: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RuntimeList {
    pub runtimes: Vec<Runtime>,
}

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateJoinToken {
    /// Lifetime of the token; default one day, at most thirty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct JoinToken {
    /// Shown once.
    pub token: String,
    pub runtime: Runtime,
    pub expires_at: i64,
}

// ---------------------------------------------------------------- runners

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PairRunner {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Name or id of the pool to join; the owner's default pool when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Runner {
    pub id: String,
    pub name: String,
    /// `user:<subject>` or `ws:<workspace>`.
    pub owner: String,
    pub runtime_id: String,
    pub runtime_name: String,
    pub capabilities: Vec<String>,
    pub online: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<i64>,
    #[serde(default)]
    pub current_jobs: Vec<String>,
    pub created_at: i64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct RunnerList {
    pub runners: Vec<Runner>,
}

/// A runner and its credential. The token is shown once.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct PairedRunner {
    pub runner: Runner,
    pub token: String,
}

// ---------------------------------------------------------------- runner protocol

/// `POST /v1/runner/join` with the pool's join token as bearer.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinRequest {
    /// The ref the operator gave; it must name the join token's pool.
    #[serde(rename = "ref")]
    pub reference: String,
    pub name: String,
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// The answer to a join: the new runner's id and credential (shown once).
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct JoinedRunner {
    pub runner_id: String,
    pub runtime_id: String,
    pub token: String,
}

/// Most slots a runner may declare in [`Hello`].
pub const MAX_SLOTS: u32 = 256;

/// `POST /v1/runner/hello`: a runner announces the capabilities it detected.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Hello {
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Jobs the runner runs at once (`--max-concurrent`), 1..=256: the
    /// coordinator lets it hold that many leases and lease long-polls.
    /// Runners that do not say have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct HelloResponse {
    pub runner_id: String,
    pub runtime_id: String,
}

/// `POST /v1/runner/lease`
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseRequest {
    /// How long the coordinator may hold the request open waiting for a job.
    pub wait_ms: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct LeaseResponse {
    /// `None` when the wait ended without a job.
    pub lease: Option<Lease>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub lease_id: String,
    /// The lease ends this long after the last heartbeat.
    pub ttl_ms: u64,
    pub job: LeasedJob,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct LeasedJob {
    pub id: String,
    pub attempt: u32,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub image: Option<String>,
}

/// `POST /v1/runner/leases/{lease}/heartbeat`: renews the lease, then waits up
/// to `waitMs` for a cancel signal before answering.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Heartbeat {
    pub wait_ms: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatResponse {
    pub cancel: bool,
    pub ttl_ms: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    Stdout,
    Stderr,
}

/// `POST /v1/runner/leases/{lease}/logs`. Chunks are numbered from 0 per
/// attempt; re-sending a chunk with a number already stored changes nothing.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogChunk {
    pub seq: u64,
    pub stream: LogStream,
    pub data: String,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
}

/// `POST /v1/runner/leases/{lease}/complete`. Idempotent per lease.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Complete {
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Also lease the next job, in the same round trip: the answer's `next`
    /// is what `POST /v1/runner/lease` with this request would have given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<LeaseRequest>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct CompleteResponse {
    pub state: JobState,
    /// This lease had already completed the job; nothing changed.
    pub repeated: bool,
    /// Present when the complete asked for `next`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<LeaseResponse>,
}

// ---------------------------------------------------------------- billing

#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetBudget {
    /// Runner-seconds the workspace may spend; `null` removes the limit.
    pub limit_seconds: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub workspace: String,
    pub limit_seconds: Option<u64>,
    /// Runner-milliseconds charged to the workspace (workspace-owned runners).
    pub charged_ms: u64,
    /// Runner-milliseconds members ran on their own runners (own-pays, never charged).
    pub own_pays_ms: u64,
    pub jobs_charged: u64,
    pub jobs_own_pays: u64,
}

// ---------------------------------------------------------------- admin

/// What `drover-coordinator admin bootstrap|add-member --json` prints.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct MemberCredential {
    pub workspace: String,
    pub email: String,
    pub subject: String,
    pub role: String,
    pub token: String,
}
