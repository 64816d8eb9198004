//! The Drover coordinator: pools, dispatch, jobs and logs, billing, served
//! over REST. `main.rs` is a thin CLI over [`app::Application`] and [`admin`].

pub mod admin;
pub mod app;
pub mod dispatch;
pub mod error;
pub mod github;
pub mod http;
pub mod metrics;
pub mod retention;
pub mod secrets;
pub mod server;
pub mod service;
pub mod store;
pub mod tls;
pub mod trim;

// The domain (no I/O) is its own crate; its modules keep their paths here.
pub use drover_domain::{billing, caps, clock, ids, refs, wake};
