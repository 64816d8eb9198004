//! The runner protocol (`/v1/runner/…`): hello, lease, heartbeat, log, complete.

use serde::{Deserialize, Serialize};

pub use drover_domain::job::{LogStream, Outcome};

use crate::{Env, JobState, integer};

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
/// Most slots a runner may declare in [`Hello`] (the domain's limit).
pub use drover_domain::model::MAX_SLOTS;

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
    /// Its owner paused it: it stays online but asks for no job, and
    /// listings say `paused`. A paused runner says hello again at least
    /// every 15 s, so it stays online; the hello after its resume clears it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HelloResponse {
    pub runner_id: String,
    pub runtime_id: String,
    /// The runner's name, as listings show it.
    #[serde(default)]
    pub name: String,
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
