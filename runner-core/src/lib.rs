//! runner-core: the Drover runner as a library, shared by the headless
//! `drover` binary and the desktop app, plus the typed API client.
//!
//! No process-global state and no printing: callers observe runners through
//! [`runner::Event`]s and [`fleet::Fleet::status`].

pub mod actions;
pub mod backoff;
pub mod client;
pub mod credentials;
pub mod exec;
pub mod fleet;
pub mod host;
pub mod isolation;
mod platform;
pub mod runner;
pub mod workdir;

pub use drover_wire as wire;
