//! The error envelope and the stable error codes.

use serde::{Deserialize, Serialize};

/// The stable error codes. Clients branch on these, never on messages.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// The `drover-protocol` header is not a protocol number.
    UnsupportedProtocol,
    /// 426: the client speaks a protocol older than the oldest this
    /// coordinator serves; the message names the version to install.
    UpgradeRequired,
    /// 426: the client speaks a protocol newer than this coordinator knows;
    /// the message says to upgrade the coordinator (or use its version).
    CoordinatorTooOld,
    /// The coordinator is busy (too many requests, connections or bodies in
    /// flight); try again after the `Retry-After` header's seconds.
    Overloaded,
    /// `/readyz`: the coordinator cannot serve yet (its database does not
    /// answer, its migrations are not this build's, or it is shutting down).
    NotReady,
    /// The route exists, but not with this method.
    MethodNotAllowed,
    /// The request body did not arrive in time.
    RequestTimeout,
    /// Something failed inside the coordinator; details are in its log only.
    Internal,
    /// The pairing code was already redeemed (each works once).
    PairingCodeUsed,
    /// The pairing code is older than its ten minutes.
    PairingCodeExpired,
    /// Too many wrong pairing codes from this client, or too many large
    /// answers (job lists, jobs, log batches) in flight to this member; try
    /// again after the `Retry-After` header's seconds.
    RateLimited,
    /// The change would leave the workspace without an admin.
    LastAdmin,
    /// The coordinator has no GitHub App configured (`--github-app-id` …).
    GithubNotConfigured,
    /// GitHub refused or failed a call the coordinator made; the message
    /// says what GitHub answered.
    GithubError,
    /// The install link's `state` was already used (each works once).
    StateUsed,
    /// The install link's `state` is older than its ten minutes.
    StateExpired,
    /// A CI token (GitHub Actions OIDC) whose ref or event its CI link does
    /// not allow (`refs`, `events`; `pull_request` only when listed), or a
    /// CI job for a pool other than its link's `runtime`.
    CiNotAllowed,
    /// A browser page of another site (its `Origin` header) called `/mcp`.
    ForbiddenOrigin,
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
            Self::UpgradeRequired => "UPGRADE_REQUIRED",
            Self::CoordinatorTooOld => "COORDINATOR_TOO_OLD",
            Self::Overloaded => "OVERLOADED",
            Self::NotReady => "NOT_READY",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::RequestTimeout => "REQUEST_TIMEOUT",
            Self::Internal => "INTERNAL",
            Self::PairingCodeUsed => "PAIRING_CODE_USED",
            Self::PairingCodeExpired => "PAIRING_CODE_EXPIRED",
            Self::RateLimited => "RATE_LIMITED",
            Self::LastAdmin => "LAST_ADMIN",
            Self::GithubNotConfigured => "GITHUB_NOT_CONFIGURED",
            Self::GithubError => "GITHUB_ERROR",
            Self::StateUsed => "STATE_USED",
            Self::StateExpired => "STATE_EXPIRED",
            Self::CiNotAllowed => "CI_NOT_ALLOWED",
            Self::ForbiddenOrigin => "FORBIDDEN_ORIGIN",
            Self::Unknown => "UNKNOWN",
        }
    }
}

/// Every error response: `{"error": {"code", "message"}}`.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorDetail {
    pub code: ErrorCode,
    /// Human-readable; safe to show the caller.
    pub message: String,
}
