//! A submit batch's decision around the domain's (`drover_domain::submit`):
//! what to read for it, and once written, each request's answer.

use std::collections::HashMap;

use drover_domain::submit::{Ask, Decision, Reads};

use super::{SubmitRequest, Submitted};
use crate::ids::JobId;
use crate::store::error::{Error, Result};
use crate::store::job_row::JobRow;
use crate::store::model::Job;

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

/// Per request: the domain's decision, as the writes and the answers use it.
pub(super) fn decide(reqs: &[SubmitRequest], reads: &Reads) -> Decided {
    let asks: Vec<Ask<'_>> = reqs
        .iter()
        .map(|r| Ask {
            member: r.member.id.as_str(),
            workspace: r.member.workspace_id.as_str(),
            key: r
                .key
                .as_ref()
                .map(|k| (k.key_hash.as_str(), k.request_hash.as_str())),
            workspace_owned: r.placement.workspace_owned,
            pinned: r.placement.pinned_runner.as_ref().map(|p| p.as_str()),
            now: r.now,
        })
        .collect();
    let mut d = Decided {
        out: Vec::with_capacity(reqs.len()),
        queued: Vec::new(),
        replays: Vec::new(),
        repeats: Vec::new(),
    };
    for (i, decision) in drover_domain::submit::decide(&asks, reads)
        .into_iter()
        .enumerate()
    {
        d.out.push(match decision {
            Decision::Refuse(e) => Err(e.into()),
            Decision::Replay(job) => {
                d.replays.push((i, job));
                Err(Error::Internal("replayed below"))
            }
            Decision::Repeat(j) => {
                d.repeats.push((i, j));
                Err(Error::Internal("repeated below"))
            }
            Decision::Queue => {
                d.queued.push(i);
                // Filled in once the row is written.
                Err(Error::Internal("the job was not written"))
            }
        });
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
            Err(Error::Refused(r)) => Err(Error::Refused(r.clone())),
            Err(Error::Ambiguous) => Err(Error::Ambiguous),
            Err(_) => Err(Error::Internal("the request it repeats failed")),
        };
    }
    out
}
