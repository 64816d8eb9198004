//! The one error every command fails with: `{code, message}`, like the
//! coordinator's REST errors (whose codes pass through unchanged).

use runner_core::client::ClientError;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct AppError {
    pub code: String,
    pub message: String,
}

impl AppError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new("INVALID_INPUT", message)
    }

    pub fn not_signed_in() -> Self {
        Self::new(
            "NOT_SIGNED_IN",
            "sign in first: open a pairing link, or paste an API token under Account",
        )
    }

    pub fn keychain(e: impl std::fmt::Display) -> Self {
        Self::new("KEYCHAIN", format!("the OS keychain: {e}"))
    }
}

impl From<ClientError> for AppError {
    fn from(e: ClientError) -> Self {
        match &e {
            ClientError::Api { code, message, .. } | ClientError::VersionSkew { code, message } => {
                Self::new(code.as_str(), message.clone())
            }
            ClientError::Transport(_) => Self::new("UNREACHABLE", e.to_string()),
            ClientError::Tls { .. } => Self::new("TLS", e.to_string()),
            ClientError::NotDrover { .. } => Self::new("NOT_DROVER", e.to_string()),
            ClientError::Config(_) => Self::new("INVALID_INPUT", e.to_string()),
            ClientError::Decode(_) => Self::new("INTERNAL", e.to_string()),
        }
    }
}

pub type AppResult<T> = Result<T, AppError>;
