//! The JSON shapes that cross the wire between the coordinator, runner-core
//! (the runner and the typed client) and the desktop UI. Nothing here does I/O.
//!
//! Field names are camelCase on the wire. Enums that a client branches on
//! (`ErrorCode`, `JobState`, `Outcome`) carry an `Unknown` arm where a newer
//! coordinator may send a value an older client does not know.
//!
//! One module per resource; every shape is re-exported at the crate root,
//! so clients name them `drover_wire::SubmitJob` wherever they live.

use serde::{Deserialize, Serialize};

pub mod github;
pub mod integer;
pub mod op;
pub mod text;

mod admin;
mod audit;
mod billing;
mod domain;
mod env;
mod error;
mod jobs;
mod members;
mod pairing;
mod protocol;
mod runners;
mod runtimes;

pub use admin::*;
pub use audit::*;
pub use billing::*;
pub use env::*;
pub use error::*;
pub use github::*;
pub use jobs::*;
pub use members::*;
pub use pairing::*;
pub use protocol::*;
pub use runners::*;
pub use runtimes::*;

/// Version of the wire protocol (the runner protocol `/v1/runner/...` and the
/// member API alike) this build speaks: the newest a coordinator of this build
/// serves. Every request of runner-core's client (the runner, the CLI, the
/// desktop app) carries it in the [`PROTOCOL_HEADER`] header. Raise it when a
/// change would break an older peer (a new required field, a changed
/// meaning), not for additions an older peer ignores.
pub const PROTOCOL_VERSION: u32 = 1;
/// The oldest protocol a coordinator of this build still serves. A client
/// older than this is answered `426 UPGRADE_REQUIRED`, one newer than
/// [`PROTOCOL_VERSION`] `426 COORDINATOR_TOO_OLD`; a request without the
/// header (curl, scripts, browsers, MCP clients) is served.
pub const OLDEST_PROTOCOL: u32 = 1;
pub const PROTOCOL_HEADER: &str = "drover-protocol";
/// The client's name and version, `drover/0.1.0` ([`CLIENT_ID`]): what the
/// coordinator's refusals and logs name. Informative only; the protocol
/// number decides.
pub const CLIENT_HEADER: &str = "drover-client";
/// This build's version (the workspace's): the coordinator's, the `drover`
/// CLI's and the desktop app's are one number.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What this build sends as [`CLIENT_HEADER`]: `drover/<version>`.
pub const CLIENT_ID: &str = concat!("drover/", env!("CARGO_PKG_VERSION"));

/// The protocol range a coordinator serves, as `/healthz` reports it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProtocolRange {
    /// The oldest protocol served ([`OLDEST_PROTOCOL`]).
    pub oldest: u32,
    /// The newest protocol known ([`PROTOCOL_VERSION`]).
    pub newest: u32,
}

impl ProtocolRange {
    /// This build's range.
    pub const fn this_build() -> Self {
        Self {
            oldest: OLDEST_PROTOCOL,
            newest: PROTOCOL_VERSION,
        }
    }
}

/// Which surface a member request comes from, for the audit log: `cli`,
/// `desktop` or `rest` (the default when it is absent). The clients set it.
pub const SURFACE_HEADER: &str = "drover-surface";

/// Longest a lease long-poll may be held open by the coordinator.
pub const MAX_LEASE_WAIT_MS: u64 = 30_000;
