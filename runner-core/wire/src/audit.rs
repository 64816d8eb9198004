//! The audit log.

use serde::{Deserialize, Serialize};

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

/// Every action the audit log records (the domain's list).
pub use drover_domain::model::AUDIT_ACTIONS;

/// The query of `GET /v1/workspace/audit`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only entries at or after this time (Unix milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<i64>,
    /// Only this actor: a member's id or email, a runner's id, or a join token's pool id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Only this action.
    #[cfg_attr(feature = "schema", schemars(extend("enum" = AUDIT_ACTIONS)))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Only entries older than this id: the previous page's `nextBefore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// Entries per page, 1-500 (default 100).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 500)))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}
