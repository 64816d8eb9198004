//! What a change tells the waiters: the vocabulary shared by `store` (which
//! says whom a write should wake) and `dispatch` (which wakes them).
//!
//! A leaf: it imports neither, so neither imports the other.

use serde::{Deserialize, Serialize};

use crate::ids::{RunnerId, RuntimeId};

/// Who should be woken because a job became leasable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// A waiter of this pool whose runner meets `requires`.
    Pool {
        runtime: RuntimeId,
        requires: Vec<String>,
    },
    /// A waiter of this one runner (a pinned job).
    Runner {
        runtime: RuntimeId,
        runner: RunnerId,
    },
}

/// Something waiters may need to hear about. Applied to the local hub and,
/// with PostgreSQL, sent to the other replicas (`store::signals`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "k", rename_all = "camelCase")]
pub enum Signal {
    /// A job became leasable in a pool, for runners meeting `requires`.
    Pool {
        runtime: String,
        requires: Vec<String>,
    },
    /// A job pinned to `runner` became leasable.
    Runner { runtime: String, runner: String },
    /// The runner was revoked: its waiters should find out.
    Revoked { runner: String },
    /// The runner said hello with new capabilities: what was cached of it
    /// is stale. `paused`: its owner paused it, so its waiting lease
    /// requests end (absent from a replica that predates it: false).
    Hello {
        runner: String,
        #[serde(default)]
        paused: bool,
    },
    /// A cancel was asked for on this lease, or it ended: its heartbeat
    /// looks again.
    Cancel { lease: String },
    /// A job's log or state changed.
    Job { job: String },
    /// A replica that was alone, and so signalled nothing, found others:
    /// every waiter and follower looks at the database again.
    LookAgain,
}

impl From<Wake> for Signal {
    fn from(wake: Wake) -> Self {
        match wake {
            Wake::Pool { runtime, requires } => Self::Pool {
                runtime: runtime.to_string(),
                requires,
            },
            Wake::Runner { runtime, runner } => Self::Runner {
                runtime: runtime.to_string(),
                runner: runner.to_string(),
            },
        }
    }
}
