//! What the domain and the store refuse, typed by kind. The coordinator
//! gives each kind its stable error code and HTTP status where it answers
//! (`coordinator::error`), never here.

/// Why a request was refused: each kind is one stable error code at the
/// API's edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Input of the wrong shape or out of range: the caller's to fix.
    Invalid,
    /// A placement ref that does not parse.
    InvalidRef,
    NotFound,
    /// The state of things does not allow it (a name taken, a job already finished).
    Conflict,
    /// No credential, or an unknown, expired or revoked one.
    Unauthorized,
    /// A credential without the right (a member doing an admin's work).
    Forbidden,
    /// A runner's lease that it no longer holds.
    LeaseLost,
    /// A runner asking for more leases than its slots.
    LeaseLimit,
    /// A sign-in state already spent, or out of date.
    StateUsed,
    StateExpired,
    /// A pairing code already redeemed, or out of date.
    PairingCodeUsed,
    PairingCodeExpired,
    /// Too many requests of one kind waiting at once: retry.
    Overloaded,
    /// No runner of the pool could ever run the job.
    NoRunners,
    /// The one change that would leave a workspace without an admin.
    LastAdmin,
    /// A CI principal asking for what only people may.
    CiNotAllowed,
    /// A job pinned to a runner that lacks what it requires.
    CapabilityMismatch,
    /// The workspace's budget for the month is spent.
    BudgetExceeded,
}

/// A refusal: its kind and a message safe to show the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: Kind,
    pub message: String,
}

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Kind::Invalid, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, message)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
