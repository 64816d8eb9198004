//! Runners as members and admins see them.

use serde::{Deserialize, Serialize};

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
    /// Online, but paused by its owner: it asks for no job.
    #[serde(default)]
    pub paused: bool,
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
