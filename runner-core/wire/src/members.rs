//! Members and invites.

use serde::{Deserialize, Serialize};

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
