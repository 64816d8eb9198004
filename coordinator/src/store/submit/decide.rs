//! What a submit batch decides from what it read (no I/O): per request, a
//! replay of a stored key, a repeat of an earlier request in the batch, over
//! budget, pinned to a runner that is gone, or queued; and, once written,
//! each request's answer.

use std::collections::{HashMap, HashSet};

use drover_wire::ErrorCode;
use drover_wire::text::runner_minutes;

use super::{SubmitRequest, Submitted};
use crate::billing::Month;
use crate::error::{Error, Result};
use crate::ids::JobId;
use crate::store::idempotency;
use crate::store::jobs::JobRow;
use crate::store::model::Job;

/// The same `Idempotency-Key` came with a different request.
fn key_reused() -> Error {
    Error::conflict(
        "this Idempotency-Key was used in the last 24 hours with a different request; \
         use a new key for a new job",
    )
}

/// `402 BUDGET_EXCEEDED`: the budget, what was spent, and when it resets.
fn budget_spent(budget_ms: i64, spent_ms: i64, now: i64) -> Error {
    let month = Month::of(now);
    Error::api(
        ErrorCode::BudgetExceeded,
        format!(
            "the workspace's budget for {month} is spent: {} of {} runner-minutes used; \
             it resets at {} 00:00 UTC (jobs on members' own runners are not limited)",
            runner_minutes(spent_ms.max(0) as u64),
            runner_minutes(budget_ms.max(0) as u64),
            month.next().first_day(),
        ),
    )
}

/// Who and what a submit batch reads about.
pub(super) struct Asked<'a> {
    /// (key hash, member) of the requests that came with a key.
    pub keyed: Vec<(&'a str, &'a str)>,
    /// The workspaces paying for jobs on their pools, once each.
    pub paying: Vec<&'a str>,
    /// The runners jobs are pinned to, once each, in id order.
    pub pinned: Vec<&'a str>,
}

impl<'a> Asked<'a> {
    pub fn of(reqs: &'a [SubmitRequest]) -> Self {
        let keyed = reqs
            .iter()
            .filter_map(|r| Some((r.key.as_ref()?.key_hash.as_str(), r.member.id.as_str())))
            .collect();
        let mut paying: Vec<&str> = reqs
            .iter()
            .filter(|r| r.placement.workspace_owned)
            .map(|r| r.member.workspace_id.as_str())
            .collect();
        paying.sort_unstable();
        paying.dedup();
        let mut pinned: Vec<&str> = reqs
            .iter()
            .filter_map(|r| r.placement.pinned_runner.as_ref().map(|p| p.as_str()))
            .collect();
        pinned.sort_unstable();
        pinned.dedup();
        Self {
            keyed,
            paying,
            pinned,
        }
    }
}

/// What a submit batch reads before it decides.
#[derive(Default)]
pub(super) struct Reads {
    /// Live keys, by (member, key hash).
    pub stored: HashMap<(String, String), idempotency::Stored>,
    /// By paying workspace: (its budget, spent this month).
    pub budgets: HashMap<String, (Option<i64>, i64)>,
    /// The pinned runners still live.
    pub live: HashSet<String>,
}

/// What a submit batch decided, before it writes.
pub(super) struct Decided {
    /// Per request: its error, or a placeholder filled in once written.
    pub out: Vec<Result<Submitted>>,
    /// The requests whose job is written.
    pub queued: Vec<usize>,
    /// Requests whose key named a job: (request, job id).
    pub replays: Vec<(usize, String)>,
    /// Requests repeating an earlier one of this batch: (request, earlier).
    pub repeats: Vec<(usize, usize)>,
}

/// What the writes and the reads after them gave back, by job id.
#[derive(Default)]
pub(super) struct Wrote {
    /// The jobs written, decoded one by one after the write: an error is
    /// that job's alone (failing the batch would retry it, and the job is
    /// already queued).
    pub written: HashMap<String, Result<JobRow>>,
    /// The jobs keys named before, as they are now.
    pub named: HashMap<String, Result<JobRow>>,
}

/// Per request: a replay of a stored key, a repeat of an earlier request in
/// this batch, over budget, pinned to a runner that is gone, or queued.
pub(super) fn decide(reqs: &[SubmitRequest], reads: &Reads) -> Decided {
    let mut d = Decided {
        out: Vec::with_capacity(reqs.len()),
        queued: Vec::new(),
        replays: Vec::new(),
        repeats: Vec::new(),
    };
    // Keys first seen in this batch: (member, key hash) → the request.
    let mut first_with: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, r) in reqs.iter().enumerate() {
        if let Some(key) = &r.key {
            let id = (r.member.id.as_str(), key.key_hash.as_str());
            let earlier = reads
                .stored
                .get(&(id.0.to_owned(), id.1.to_owned()))
                .map(|s| (s.request_hash.as_str(), Err(s.job_id.clone())))
                .or_else(|| {
                    first_with.get(&id).map(|&j| {
                        let first = reqs[j].key.as_ref().expect("keyed");
                        (first.request_hash.as_str(), Ok(j))
                    })
                });
            match earlier {
                Some((hash, _)) if hash != key.request_hash => {
                    d.out.push(Err(key_reused()));
                    continue;
                }
                Some((_, Err(job))) => {
                    d.out.push(Err(Error::Internal("replayed below")));
                    d.replays.push((i, job));
                    continue;
                }
                Some((_, Ok(j))) => {
                    d.out.push(Err(Error::Internal("repeated below")));
                    d.repeats.push((i, j));
                    continue;
                }
                None => {
                    first_with.insert(id, i);
                }
            }
        }
        if r.placement.workspace_owned
            && let Some(&(Some(budget), spent)) = reads.budgets.get(r.member.workspace_id.as_str())
            && spent >= budget
        {
            d.out.push(Err(budget_spent(budget, spent, r.now)));
            continue;
        }
        if let Some(runner) = &r.placement.pinned_runner
            && !reads.live.contains(runner.as_str())
        {
            d.out
                .push(Err(Error::not_found(format!("no runner {runner}"))));
            continue;
        }
        // Filled in once the row is written.
        d.out.push(Err(Error::Internal("the job was not written")));
        d.queued.push(i);
    }
    d
}

/// Each request's answer, from what was decided and written.
pub(super) fn assemble(
    decided: Decided,
    mut wrote: Wrote,
    ids: &[JobId],
) -> Vec<Result<Submitted>> {
    let Decided {
        mut out,
        queued,
        mut replays,
        repeats,
    } = decided;
    for i in queued {
        if let Some(row) = wrote.written.remove(ids[i].as_str()) {
            out[i] = row.and_then(JobRow::into_job).map(|job| Submitted {
                job,
                replayed: false,
            });
        }
    }
    // Sorted by job: several requests may name the same one.
    replays.sort_by(|a, b| a.1.cmp(&b.1));
    let mut last: Option<(String, Job)> = None;
    for (i, id) in replays {
        if last.as_ref().is_none_or(|(named_id, _)| *named_id != id) {
            last = None;
            match wrote
                .named
                .remove(&id)
                .map(|row| row.and_then(JobRow::into_job))
            {
                Some(Ok(job)) => last = Some((id, job)),
                Some(Err(e)) => {
                    out[i] = Err(e);
                    continue;
                }
                None => {
                    out[i] = Err(Error::Internal("the job an idempotency key named is gone"));
                    continue;
                }
            }
        }
        if let Some((_, job)) = &last {
            out[i] = Ok(Submitted {
                job: job.clone(),
                replayed: true,
            });
        }
    }
    for (i, j) in repeats {
        out[i] = match &out[j] {
            Ok(first) => Ok(Submitted {
                job: first.job.clone(),
                replayed: true,
            }),
            Err(e) => Err(Error::api(e.code(), e.to_string())),
        };
    }
    out
}
