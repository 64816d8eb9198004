//! Drover's domain, apart from how it is stored or asked for: prefixed ids
//! and secrets, billing months and the calendar, placement refs,
//! capabilities and their matching, the clock as a seam, whom a change
//! wakes, the job and member models and what the store returns, the rules
//! a new job must meet, the lease plan (which job each request of a batch
//! gets) and the submit decision, and the typed refusals (`error::Kind`). No I/O: the store and the services build on
//! it; it imports neither the wire shapes nor HTTP nor a database
//! (`coordinator/tests/layout.rs` reads its manifest).

pub mod billing;
pub mod calendar;
pub mod caps;
pub mod clock;
pub mod env;
pub mod error;
pub mod ids;
pub mod job;
pub mod lease;
pub mod member;
pub mod model;
pub mod refs;
pub mod submit;
pub mod wake;

pub use error::{Error, Result};
