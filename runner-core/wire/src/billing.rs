//! Billing: budgets and usage by calendar month.

use serde::{Deserialize, Serialize};

use crate::integer;

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

/// The query of the usage reports (`GET /v1/workspace/billing/usage`,
/// `GET /v1/me/usage`).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UsageReportQuery {
    /// The month, `YYYY-MM` (UTC); this month by default.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9]{4}-[0-9]{2}$")))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub month: Option<String>,
    /// Add up by `pool` (the default), `member` or `runner`.
    #[cfg_attr(
        feature = "schema",
        schemars(extend("enum" = ["pool", "member", "runner"]))
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}
