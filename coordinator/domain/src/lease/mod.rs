//! Leasing: one runner's request, and the plan of a batch of them.

pub mod plan;
#[cfg(test)]
mod plan_tests;
#[cfg(any(test, feature = "rules"))]
pub mod rules;

use crate::ids::{RunnerId, RuntimeId};

/// One runner's lease call, for a batch.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    pub runner: RunnerId,
    /// The runner's pool, as its credential says (a runner never moves).
    pub runtime: RuntimeId,
    pub now: i64,
    pub ttl_ms: u64,
}
