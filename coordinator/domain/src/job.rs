//! Jobs as the domain knows them: their states and outcomes, what they run,
//! and the rules a new job must meet.

use serde::{Deserialize, Serialize};

use crate::caps;
use crate::env::Env;
use crate::error::{Error, Kind, Result};
use crate::refs::RuntimeRef;

/// `queued`, `leased` and `running` are live; `succeeded`, `failed`, `cancelled`, `timed_out` and `lost` are terminal. Clients should tolerate states they do not know.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Leased,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
    Lost,
    #[serde(other)]
    Unknown,
}

impl JobState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Cancelled | Self::TimedOut | Self::Lost
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Leased => "leased",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Lost => "lost",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "queued" => Self::Queued,
            "leased" => Self::Leased,
            "running" => Self::Running,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            "timed_out" => Self::TimedOut,
            "lost" => Self::Lost,
            _ => return None,
        })
    }
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    Cancelled,
    TimedOut,
}

#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    Stdout,
    Stderr,
}

/// How one attempt ended, as its runner reports it.
#[derive(Debug, Clone)]
pub struct AttemptResult {
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    /// Why it failed, as the runner says (stored shortened).
    pub error: Option<String>,
}

/// A job as submitted, before it is checked ([`NewJob::validate`]).
#[derive(Debug, Clone, Default)]
pub struct Submission {
    pub runtime: String,
    pub command: Vec<String>,
    pub script: Option<String>,
    pub env: Env,
    pub requires: Vec<String>,
    pub timeout_seconds: Option<u64>,
    pub priority: i32,
    pub max_attempts: Option<u32>,
    pub image: Option<String>,
}

pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
const MAX_ATTEMPTS_LIMIT: u32 = 20;
const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;
const MAX_ARGS: usize = 4096;
const MAX_ENV: usize = 1024;

/// What a runner needs to execute a job, but its env; stored as JSON.
/// (The env is sealed in its own column: see `store::env`.)
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub image: Option<String>,
}

/// A validated submission.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub runtime_ref: String,
    pub parsed_ref: RuntimeRef,
    pub spec: JobSpec,
    /// Sealed at submit, never part of `spec`.
    pub env: Env,
    pub requires: Vec<String>,
    pub priority: i32,
    pub max_attempts: u32,
}

fn valid_env_name(k: &str) -> bool {
    let mut bytes = k.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && k.len() <= 256
}

impl NewJob {
    pub fn validate(req: Submission) -> Result<Self> {
        let parsed_ref =
            RuntimeRef::parse(&req.runtime).map_err(|e| Error::new(Kind::InvalidRef, e.0))?;
        match (&req.command.is_empty(), &req.script) {
            (true, None) => {
                return Err(Error::invalid(
                    "give a command (a non-empty array) or a script",
                ));
            }
            (false, Some(_)) => {
                return Err(Error::invalid("give either command or script, not both"));
            }
            _ => {}
        }
        if req.command.len() > MAX_ARGS {
            return Err(Error::invalid(format!(
                "command has more than {MAX_ARGS} arguments"
            )));
        }
        if req.command.first().is_some_and(|c| c.is_empty()) {
            return Err(Error::invalid("command[0] is empty"));
        }
        if req
            .command
            .iter()
            .chain(req.script.iter())
            .any(|a| a.contains('\0'))
        {
            return Err(Error::invalid(
                "command and script may not contain NUL bytes",
            ));
        }
        if req.env.len() > MAX_ENV {
            return Err(Error::invalid(format!("at most {MAX_ENV} env entries")));
        }
        if let Some((k, _)) = req
            .env
            .iter()
            .find(|(k, v)| !valid_env_name(k) || v.contains('\0'))
        {
            return Err(Error::invalid(format!(
                "invalid env entry {k:?}: names are [A-Za-z_][A-Za-z0-9_]*, values have no NUL"
            )));
        }
        if let Some(t) = req.timeout_seconds
            && !(1..=MAX_TIMEOUT_S).contains(&t)
        {
            return Err(Error::invalid(format!(
                "timeoutSeconds must be 1..={MAX_TIMEOUT_S}"
            )));
        }
        if !(-1000..=1000).contains(&req.priority) {
            return Err(Error::invalid("priority must be -1000..=1000"));
        }
        let max_attempts = req.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&max_attempts) {
            return Err(Error::invalid(format!(
                "maxAttempts must be 1..={MAX_ATTEMPTS_LIMIT}"
            )));
        }
        let mut requires = req.requires.clone();
        if let Some(image) = &req.image {
            if image.is_empty()
                || image.len() > 512
                || image.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(Error::invalid("invalid image"));
            }
            requires.push("docker".into());
        }
        let requires = caps::normalize(&requires, "requires")?;
        Ok(Self {
            runtime_ref: req.runtime,
            parsed_ref,
            spec: JobSpec {
                command: req.command,
                script: req.script,
                timeout_seconds: req.timeout_seconds,
                image: req.image,
            },
            env: req.env,
            requires,
            priority: req.priority,
            max_attempts,
        })
    }
}
