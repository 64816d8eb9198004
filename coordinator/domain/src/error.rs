//! What the domain refuses. The coordinator maps each kind to its stable
//! error code where it answers (`coordinator::error`), never here.

/// Input that breaks a rule of the domain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Too many items, or one of the wrong shape (a capability, a label):
    /// the caller's to fix (`BAD_REQUEST`).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
