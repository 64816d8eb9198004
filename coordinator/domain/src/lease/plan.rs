//! Which job each lease request of a batch gets: a decision over what was
//! read, with no I/O (read → plan → write; see `leases`).
//!
//! The rules (SPEC §2.5, §2.6):
//! - a runner leases at most as many jobs as it has slots, counting those it
//!   holds; each request takes a slot, in order, found a job or not;
//! - a runner serves jobs pinned to it first, then its pool's queue;
//! - each queue is read in lease order (priority, then FIFO, re-queued jobs
//!   first): the plan keeps that order, and within a pool the earliest
//!   request gets the first job it can run;
//! - a job is taken only by a runner whose capabilities meet its
//!   requirements; others skip it and it stays queued;
//! - a request served while more jobs wait behind it wakes someone for
//!   each (its handler passes the wake on).
//!
//! Cost: O(requests × candidates read), no allocation per comparison.
//!
//! SQLite plans here. PostgreSQL plans by the same rules inside the lease's
//! one function call, `drover_lease` (migrations/postgres/0015_lease_quiet.sql):
//! a change to the rules is made in both, and the table in `rules.rs`, run
//! against this function and against the store on each backend, holds them
//! to the same answers.

use std::collections::HashMap;

use super::LeaseRequest;
use crate::caps;
use crate::ids::RuntimeId;
use crate::wake::Wake;

/// A runner asking for work, as read (a revoked runner is not one).
#[derive(Debug, Clone)]
pub struct LiveRunner {
    /// Its pool.
    pub runtime: String,
    /// Labels and detected capabilities.
    pub capabilities: Vec<String>,
    /// How many leases it may hold at once.
    pub slots: i64,
    /// How many it holds now.
    pub held: i64,
}

/// A queued job, as read: one row of a queue page or of the pinned jobs.
#[derive(Debug, Clone)]
pub struct QueuedJob {
    pub id: String,
    pub requires: Vec<String>,
    /// The runner it is pinned to, if any.
    pub pinned_runner: Option<String>,
}

impl QueuedJob {
    fn runnable_by(&self, capabilities: &[String]) -> bool {
        self.requires.is_empty() || caps::satisfies(capabilities, &self.requires)
    }
}

/// What one request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// This job.
    Job(String),
    /// Nothing fits now.
    Nothing,
    /// Its runner is revoked (or unknown).
    Revoked,
    /// Its runner has no free slot: it holds `held` of `slots`.
    Limited { slots: i64, held: i64 },
}

/// The plan for a batch: per request, its pick and whom its handler wakes.
#[derive(Debug, Default)]
pub struct Plan {
    pub picks: Vec<Pick>,
    pub wakes: Vec<Option<Wake>>,
}

/// The plan, built from the pinned jobs and then one queue page at a time
/// (see [`Planner::offer`]): the caller reads further pages only when a
/// pool's page ran out with requests unserved.
pub struct Planner<'a> {
    reqs: &'a [LeaseRequest],
    runners: &'a HashMap<String, LiveRunner>,
    plan: Plan,
    /// Per pool still to serve: its requests waiting, in order.
    pools: Vec<PoolQueue<'a>>,
}

struct PoolQueue<'a> {
    runtime: &'a str,
    waiting: Vec<usize>,
    served: Vec<usize>,
    /// One wake per job seen waiting behind what was served.
    behind: Vec<Wake>,
}

impl<'a> Planner<'a> {
    /// Applies the slot limits and the pinned jobs (`pinned`: every queued
    /// job pinned to a runner asking, in lease order).
    pub fn new(
        reqs: &'a [LeaseRequest],
        runners: &'a HashMap<String, LiveRunner>,
        pinned: &[QueuedJob],
    ) -> Self {
        let mut plan = Plan {
            picks: Vec::with_capacity(reqs.len()),
            wakes: vec![None; reqs.len()],
        };
        // Slots: each request takes one, in order.
        let mut room: HashMap<&str, i64> = runners
            .iter()
            .map(|(id, r)| (id.as_str(), r.slots - r.held))
            .collect();
        for req in reqs {
            let id = req.runner.as_str();
            plan.picks.push(match (runners.get(id), room.get_mut(id)) {
                (Some(_), Some(left)) if *left > 0 => {
                    *left -= 1;
                    Pick::Nothing
                }
                (Some(r), _) => Pick::Limited {
                    slots: r.slots,
                    held: r.held,
                },
                (None, _) => Pick::Revoked,
            });
        }

        // Pinned jobs, usually none.
        let mut taken = vec![false; pinned.len()];
        for (i, req) in reqs.iter().enumerate() {
            if plan.picks[i] != Pick::Nothing {
                continue;
            }
            let runner = &runners[req.runner.as_str()];
            for (c, job) in pinned.iter().enumerate() {
                if taken[c] || job.pinned_runner.as_deref() != Some(req.runner.as_str()) {
                    continue;
                }
                if plan.picks[i] != Pick::Nothing {
                    // Another pinned job waits behind this one.
                    plan.wakes[i] = Some(Wake::Runner {
                        runtime: RuntimeId::from_db(runner.runtime.clone()),
                        runner: req.runner.clone(),
                    });
                    break;
                }
                if job.runnable_by(&runner.capabilities) {
                    plan.picks[i] = Pick::Job(job.id.clone());
                    taken[c] = true;
                }
            }
        }

        // The pools of the requests still unserved, in order of first request.
        let mut pools: Vec<PoolQueue<'a>> = Vec::new();
        for (i, req) in reqs.iter().enumerate() {
            if plan.picks[i] != Pick::Nothing {
                continue;
            }
            let runtime = runners[req.runner.as_str()].runtime.as_str();
            match pools.iter_mut().find(|p| p.runtime == runtime) {
                Some(p) => p.waiting.push(i),
                None => pools.push(PoolQueue {
                    runtime,
                    waiting: vec![i],
                    served: Vec::new(),
                    behind: Vec::new(),
                }),
            }
        }
        Self {
            reqs,
            runners,
            plan,
            pools,
        }
    }

    /// The pools whose queue the plan still needs, each with the number of
    /// requests waiting on it.
    pub fn pools(&self) -> Vec<(&'a str, usize)> {
        self.pools
            .iter()
            .map(|p| (p.runtime, p.waiting.len()))
            .collect()
    }

    /// Offers the next page of `runtime`'s queue, in lease order. `full`:
    /// the page had as many rows as asked for, so more may follow. Returns
    /// whether the plan wants the next page (requests wait unserved and the
    /// queue may go on).
    pub fn offer(&mut self, runtime: &str, page: &[QueuedJob], full: bool) -> bool {
        let Some(pool) = self.pools.iter_mut().find(|p| p.runtime == runtime) else {
            return false;
        };
        for job in page {
            if pool.waiting.is_empty() {
                pool.behind.push(Wake::Pool {
                    runtime: RuntimeId::from_db(runtime.to_owned()),
                    requires: job.requires.clone(),
                });
                continue;
            }
            // Later pages are separate statements, so a page may repeat a
            // row (as `drover_lease`'s do on PostgreSQL, seeing new commits).
            if self
                .plan
                .picks
                .iter()
                .any(|p| matches!(p, Pick::Job(id) if *id == job.id))
            {
                continue;
            }
            let fits = pool.waiting.iter().position(|&i| {
                job.runnable_by(&self.runners[self.reqs[i].runner.as_str()].capabilities)
            });
            if let Some(w) = fits {
                let i = pool.waiting.remove(w);
                self.plan.picks[i] = Pick::Job(job.id.clone());
                pool.served.push(i);
            }
        }
        pool.behind.is_empty() && full
    }

    pub fn finish(mut self) -> Plan {
        for pool in self.pools {
            for (i, wake) in pool.served.into_iter().zip(pool.behind) {
                self.plan.wakes[i] = Some(wake);
            }
        }
        self.plan
    }
}

/// The whole decision at once, when every page is at hand (how the tests
/// state the rules; a batch feeds a [`Planner`] page by page as it reads):
/// `heads` holds each pool's queue.
#[cfg(test)]
pub fn plan(
    reqs: &[LeaseRequest],
    runners: &HashMap<String, LiveRunner>,
    pinned: &[QueuedJob],
    heads: &HashMap<String, Vec<QueuedJob>>,
) -> Plan {
    let mut planner = Planner::new(reqs, runners, pinned);
    for (runtime, _) in planner.pools() {
        if let Some(page) = heads.get(runtime) {
            planner.offer(runtime, page, false);
        }
    }
    planner.finish()
}
