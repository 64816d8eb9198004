//! Pairing a device, and a member's API tokens.

use serde::{Deserialize, Serialize};

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
