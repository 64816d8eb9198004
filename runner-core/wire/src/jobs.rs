//! Jobs: what a member submits, what the coordinator answers about them, their logs.

use serde::{Deserialize, Serialize};

pub use drover_domain::job::JobState;

use crate::{Env, integer};

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
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 604_800)))]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "integer::optional"
    )]
    pub timeout_seconds: Option<u64>,
    /// Higher runs first; equal priorities run first-in first-out.
    #[cfg_attr(feature = "schema", schemars(range(min = -1000, max = 1000)))]
    #[serde(default, deserialize_with = "integer::required")]
    pub priority: i32,
    /// Attempts before a job whose runner stops answering is `lost`; 1..=20, default 3.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 20)))]
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

/// The query of `GET /v1/jobs`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobListQuery {
    /// Only jobs in this state.
    #[cfg_attr(feature = "schema", schemars(with = "Option<JobState>"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// At most this many jobs, 1-1000 (default 50).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Only jobs older than this: the previous page's `nextBefore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
}

/// The query of `GET /v1/jobs/{id}/logs`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// Keep streaming new output until the job reaches a terminal state.
    #[serde(default)]
    pub follow: bool,
}

/// The trailer fields a log stream ends with once it has read the whole
/// log of a job that ended (declared in its `Trailer` header, sent where
/// the request says `TE: trailers`): the job's state and exit code, so that
/// `drover submit --wait` need not ask for the job again.
pub const LOG_END_STATE: &str = "drover-job-state";
pub const LOG_END_EXIT_CODE: &str = "drover-exit-code";

/// How a followed job ended, from its log stream's trailers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEnd {
    pub state: JobState,
    pub exit_code: Option<i32>,
}

impl LogEnd {
    /// The trailers' values, or `None` if the state is missing, not a
    /// terminal state this build knows, or the exit code is not a number.
    pub fn parse(state: Option<&str>, exit_code: Option<&str>) -> Option<Self> {
        let state = JobState::parse(state?).filter(|s| s.is_terminal())?;
        let exit_code = match exit_code {
            None => None,
            Some(code) => Some(code.parse().ok()?),
        };
        Some(Self { state, exit_code })
    }
}

impl From<SubmitJob> for drover_domain::job::Submission {
    fn from(req: SubmitJob) -> Self {
        Self {
            runtime: req.runtime,
            command: req.command,
            script: req.script,
            env: req.env,
            requires: req.requires,
            timeout_seconds: req.timeout_seconds,
            priority: req.priority,
            max_attempts: req.max_attempts,
            image: req.image,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_end_is_a_terminal_state_and_a_number_or_nothing() {
        let end = |state, code| LogEnd::parse(state, code);
        assert_eq!(
            end(Some("failed"), Some("3")),
            Some(LogEnd {
                state: JobState::Failed,
                exit_code: Some(3)
            })
        );
        assert_eq!(
            end(Some("cancelled"), None),
            Some(LogEnd {
                state: JobState::Cancelled,
                exit_code: None
            })
        );
        // Not an end this client can act on: it asks for the job instead.
        for (state, code) in [
            (None, Some("0")),
            (Some("running"), None),
            (Some("archived"), None),
            (Some("failed"), Some("three")),
        ] {
            assert_eq!(end(state, code), None, "{state:?} {code:?}");
        }
    }
}
