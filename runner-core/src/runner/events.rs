//! What a runner reports as it goes: the events a fleet's owner (the
//! `drover runner` log, the desktop app) shows.

use std::fmt;

use drover_wire::{JobState, Outcome};

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// How this runner's jobs are isolated (sent before `Online`);
    /// `contained` is false when a job's detached processes may outlive it.
    Isolation {
        summary: String,
        contained: bool,
    },
    Online,
    Leased {
        job: String,
        attempt: u32,
    },
    /// The lease is confirmed and the job is among the runner's current
    /// jobs (its process starting): `status().current_jobs` shows it.
    Started {
        job: String,
    },
    Finished {
        job: String,
        outcome: Outcome,
        exit_code: Option<i32>,
        state: JobState,
    },
    /// The coordinator would not take the result (lease lost, runner revoked).
    CompleteRefused {
        job: String,
        error: String,
        code: Option<drover_wire::ErrorCode>,
    },
    /// The coordinator leased something this runner cannot run (a lease
    /// that does not parse, a job with nothing to start): reported failed
    /// when its lease id could be read, else left to expire.
    Refused {
        job: Option<String>,
        error: String,
    },
    /// A forced stop killed the job; its lease will expire and it re-queues.
    Abandoned {
        job: String,
    },
    /// The lease was lost (expired, revoked, or not renewable for a TTL):
    /// the job was stopped or never started, and its result is not sent.
    LeaseLost {
        job: String,
        error: String,
    },
    /// What a finished job left (its directory, a process that would not
    /// die) could not be removed.
    CleanupFailed {
        job: String,
        error: String,
    },
    Disconnected {
        error: String,
    },
    Reconnected,
    /// The coordinator counts every slot of this runner as taken
    /// (`LEASE_LIMIT`): the runner tells it which leases it still holds,
    /// and asks again.
    Waiting {
        reason: String,
    },
    Draining,
    Stopped {
        error: Option<String>,
        /// The coordinator's code when it refused the runner for good.
        code: Option<drover_wire::ErrorCode>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub runner: String,
    pub kind: EventKind,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "runner {}: ", self.runner)?;
        match &self.kind {
            EventKind::Isolation { summary, .. } => write!(f, "{summary}"),
            EventKind::Online => write!(f, "online"),
            EventKind::Leased { job, attempt } => write!(f, "leased {job} (attempt {attempt})"),
            EventKind::Started { job } => write!(f, "running {job}"),
            EventKind::Finished {
                job,
                state,
                exit_code,
                ..
            } => match exit_code {
                Some(code) => write!(f, "{job} {} (exit {code})", state.as_str()),
                None => write!(f, "{job} {}", state.as_str()),
            },
            EventKind::CompleteRefused { job, error, .. } => {
                write!(f, "result of {job} refused: {error}")
            }
            EventKind::Refused { job, error } => {
                write!(f, "refused job {}: {error}", job.as_deref().unwrap_or("?"))
            }
            EventKind::Abandoned { job } => write!(f, "abandoned {job} (forced stop)"),
            EventKind::LeaseLost { job, error } => write!(f, "lost the lease on {job}: {error}"),
            EventKind::CleanupFailed { job, error } => {
                write!(f, "could not clean up after {job}: {error}")
            }
            EventKind::Disconnected { error } => write!(f, "disconnected: {error}; retrying"),
            EventKind::Reconnected => write!(f, "reconnected"),
            EventKind::Waiting { reason } => write!(
                f,
                "waiting for a free slot: {reason}; telling the coordinator which leases this runner still holds, and asking again"
            ),
            EventKind::Draining => write!(f, "draining: finishing running jobs"),
            EventKind::Stopped { error: None, .. } => write!(f, "stopped"),
            EventKind::Stopped { error: Some(e), .. } => write!(f, "stopped: {e}"),
        }
    }
}
