//! Drover's domain, apart from how it is stored or asked for: prefixed ids
//! and secrets, billing months and the calendar, placement refs, capabilities and their matching, the clock
//! as a seam, whom a change wakes, and the lease plan (which job each
//! request of a batch gets). No I/O: the store and the services build on
//! it; it imports neither the wire shapes nor HTTP nor a database
//! (`coordinator/tests/layout.rs` reads its manifest).

pub mod billing;
pub mod calendar;
pub mod caps;
pub mod clock;
pub mod error;
pub mod ids;
pub mod lease;
pub mod refs;
pub mod wake;

pub use error::{Error, Result};
