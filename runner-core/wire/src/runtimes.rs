//! Runtimes (pools): refs, scopes, join tokens.

use serde::{Deserialize, Serialize};

use crate::integer;

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
