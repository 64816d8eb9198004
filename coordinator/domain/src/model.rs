//! What the store returns: pools, runners, jobs, tokens, usage and the
//! audit log as the coordinator knows them. The wire crate converts them
//! to its shapes (`From` impls in its `domain.rs`); value enums the wire
//! shows as they are (`JobState`, `Env`) are the domain's.

use crate::billing::Month;
use crate::env::Env;
use crate::ids::{JobId, JoinTokenId, LeaseId, MemberId, RunnerId, RuntimeId, Secret, TokenId};
use crate::job::{JobSpec, JobState};
use crate::member::{Member, Role};

/// A job as a member sees it.
#[derive(Debug, Clone)]
pub struct Job {
    pub id: JobId,
    pub state: JobState,
    /// The ref it was submitted with.
    pub runtime_ref: String,
    pub runtime_id: RuntimeId,
    pub pinned_runner: Option<RunnerId>,
    /// The member who submitted it.
    pub submitter_id: String,
    /// What it runs (never its env).
    pub spec: JobSpec,
    pub requires: Vec<String>,
    pub priority: i32,
    pub attempt: u32,
    pub max_attempts: u32,
    pub exit_code: Option<i32>,
    pub error: Option<String>,
    pub cancel_requested: bool,
    /// Who ran it, once it finished on a runner.
    pub provenance: Option<Provenance>,
    pub created_at: i64,
    /// When its latest attempt was leased (kept when a lost lease puts it
    /// back in the queue).
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// In a list, `spec` is a preview: true when it left something out.
    pub spec_truncated: bool,
}

/// Who ran a finished job (SPEC §2.7).
#[derive(Debug, Clone)]
pub struct Provenance {
    /// The runner that ran it.
    pub ran_by: String,
    /// That runner's owner, `user:<subject>` or `ws:<workspace>`.
    pub by: String,
    pub attempt: u32,
}

/// A workspace's monthly budget and what its jobs used in one month.
#[derive(Debug, Clone)]
pub struct Usage {
    pub workspace: String,
    pub month: Month,
    pub budget_ms: Option<i64>,
    pub charged_ms: u64,
    pub own_pays_ms: u64,
    pub jobs_charged: u64,
    pub jobs_own_pays: u64,
}

/// One line of a usage report.
#[derive(Debug, Clone)]
pub struct UsageLine {
    pub id: String,
    pub name: String,
    pub runner_ms: u64,
    pub charged_ms: u64,
    pub attempts: u64,
}

/// A runner is online if it has talked to the coordinator this recently.
pub const ONLINE_WINDOW_MS: i64 = 40_000;
/// Who owns a pool, seen from inside the caller's workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Member(MemberId),
    Workspace,
}

impl Owner {
    pub fn member_id(&self) -> Option<&str> {
        match self {
            Self::Member(id) => Some(id.as_str()),
            Self::Workspace => None,
        }
    }
}

/// `user:<subject>` or `ws:<workspace>`.
pub fn owner_label(member: &Member, owner_member_id: Option<&str>) -> String {
    match owner_member_id {
        Some(id) => format!("user:{id}"),
        None => format!("ws:{}", member.workspace_name),
    }
}

/// A pool.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub id: RuntimeId,
    pub name: String,
    /// `user:<subject>` or `ws:<workspace>`.
    pub owner: String,
    /// Its canonical ref (`self:<subject>:<name>` or `ws:<workspace>:<name>`).
    pub reference: String,
    /// Runners not revoked.
    pub runners: u32,
    pub created_at: i64,
}

/// The host name of github.com: the GitHub a CI link or an installation
/// names when it names none.
pub const GITHUB_COM: &str = "github.com";

/// Most slots (leases held at once) a runner may declare.
pub const MAX_SLOTS: u32 = 256;

/// A runner as its members see it.
#[derive(Debug, Clone)]
pub struct Runner {
    pub id: RunnerId,
    pub name: String,
    /// `user:<subject>` or `ws:<workspace>`.
    pub owner: String,
    pub runtime_id: RuntimeId,
    pub runtime_name: String,
    pub capabilities: Vec<String>,
    pub online: bool,
    /// Online, and paused by its owner (it asks for no job).
    pub paused: bool,
    pub last_seen_at: Option<i64>,
    /// Jobs it holds a lease on.
    pub current_jobs: Vec<String>,
    pub created_at: i64,
}

/// A runner to pair into a pool: its name (`runner` when none), the pool
/// (`default` when none) and its labels.
#[derive(Debug, Clone, Default)]
pub struct NewRunner {
    pub name: Option<String>,
    pub pool: Option<String>,
    pub labels: Vec<String>,
}

/// A join token, shown once.
#[derive(Debug, Clone)]
pub struct JoinToken {
    pub id: JoinTokenId,
    pub token: Secret,
    pub runtime: Runtime,
    pub expires_at: i64,
}

/// A join token as listed: never the token itself.
#[derive(Debug, Clone)]
pub struct ListedJoinToken {
    pub id: JoinTokenId,
    pub runtime_id: RuntimeId,
    pub pool: String,
    /// The pool's canonical ref.
    pub reference: String,
    /// Who minted it: their id and email (unknown for tokens minted
    /// before minters were recorded).
    pub minted_by: Option<MemberId>,
    pub minted_by_email: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    pub last_used_at: Option<i64>,
    /// Runners joined with it.
    pub uses: u64,
}

/// A runner just paired, with its token (shown once).
#[derive(Debug, Clone)]
pub struct PairedRunner {
    pub runner: Runner,
    pub token: Secret,
}

/// A lease handed to a runner.
#[derive(Debug)]
pub struct Lease {
    pub id: LeaseId,
    pub ttl_ms: u64,
    pub job: LeasedJob,
}

/// The leased job: what the runner needs to run it.
#[derive(Debug)]
pub struct LeasedJob {
    pub id: JobId,
    pub attempt: u32,
    pub spec: JobSpec,
    /// Opened for this lease only.
    pub env: Env,
}

/// A pairing code, shown once.
#[derive(Debug, Clone)]
pub struct PairingCode {
    pub code: Secret,
    pub expires_at: i64,
}

/// A device's member API token, from a redeemed pairing code (shown once).
#[derive(Debug, Clone)]
pub struct DeviceToken {
    pub token: Secret,
    pub token_id: TokenId,
    pub name: String,
    pub member: Member,
}

/// One of a member's API tokens (never its secret).
#[derive(Debug, Clone)]
pub struct ApiToken {
    pub id: TokenId,
    pub name: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    /// The token of the request that listed it.
    pub current: bool,
}

/// A member of a workspace, as an admin sees them.
#[derive(Debug, Clone)]
pub struct MemberInfo {
    pub id: MemberId,
    pub email: String,
    pub role: Role,
    /// False until their invite is accepted.
    pub joined: bool,
    pub created_at: i64,
    /// Their API tokens (`current` is always false here).
    pub tokens: Vec<ApiToken>,
}

/// What removing a member changed, for the waiters and the other replicas.
#[derive(Debug, Default)]
pub struct Removed {
    /// Jobs that changed state, and who to wake for them.
    pub jobs: Vec<(JobId, Option<crate::wake::Wake>)>,
    /// Leases of their jobs still running elsewhere: told to cancel.
    pub cancels: Vec<LeaseId>,
    /// Their personal runners, revoked.
    pub runners: Vec<RunnerId>,
}

/// One entry of the audit log.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    pub seq: i64,
    pub at: i64,
    pub actor_kind: String,
    pub actor_id: String,
    pub actor_email: Option<String>,
    pub surface: String,
    pub action: String,
    pub target: String,
    pub detail: serde_json::Value,
}

/// Every action the audit log records.
pub const AUDIT_ACTIONS: &[&str] = &[
    "budget.set",
    "ci_link.removed",
    "ci_link.set",
    "github.install_link_created",
    "github.installation_linked",
    "github.jit_runner_minted",
    "github.on_demand_removed",
    "github.on_demand_set",
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
