//! Jobs: submit (with an optional idempotency key) and cancel.

use drover_wire as wire;

use super::Services;
use crate::error::{Error, Result};
use drover_wire::JobState;

use crate::store::{CancelOutcome, IdempotencyKey, JobPage, Member, NewJob, Submitted};
use crate::wake::{Signal, Wake};

/// Bytes of command and script a job carries: its answer holds them whole.
pub fn text_bytes(req: &wire::SubmitJob) -> usize {
    req.command.iter().map(String::len).sum::<usize>() + req.script.as_ref().map_or(0, String::len)
}

/// Validates, places and queues a job, and wakes a runner for it; with
/// `key`, the same key from the same member within 24 hours answers the
/// job the first call queued (`replayed`) instead of queueing another.
pub async fn submit(
    svc: &Services,
    member: &Member,
    req: wire::SubmitJob,
    key: Option<&str>,
) -> Result<Submitted> {
    let key = key.map(|k| IdempotencyKey::new(k, &req)).transpose()?;
    let started = std::time::Instant::now();
    let job = NewJob::validate(req.into())?;
    let placement = svc
        .store
        .place(member, &job.parsed_ref, &job.requires)
        .await?;
    let submitted = svc
        .store
        .submit_job(member, &job, &placement, key, svc.now())
        .await?;
    crate::metrics::get()
        .submit
        .observe(started.elapsed().as_secs_f64());
    exit_after_submit_for_tests();
    if !submitted.replayed {
        svc.announce(vec![Signal::from(match placement.pinned_runner {
            Some(runner) => Wake::Runner {
                runtime: placement.runtime_id,
                runner,
            },
            None => Wake::Pool {
                runtime: placement.runtime_id,
                requires: job.requires,
            },
        })]);
    }
    Ok(submitted)
}

/// Cancels a job (a queued one leaves the queue; a running one's runner is
/// told), and answers it as it is now.
pub async fn cancel(svc: &Services, member: &Member, id: &str) -> Result<crate::store::model::Job> {
    let mut signals = vec![Signal::Job { job: id.to_owned() }];
    match svc.store.cancel_job(member, id, svc.now()).await? {
        CancelOutcome::Signalled(lease) => signals.push(Signal::Cancel {
            lease: lease.to_string(),
        }),
        CancelOutcome::Dequeued | CancelOutcome::AlreadyCancelled => {}
    }
    svc.announce(signals);
    Ok(svc.store.get_job(member, id).await?)
}

/// Largest page of a job list, in bytes: a page ends before a job that
/// would pass it (it always holds one).
pub const LIST_BUDGET_BYTES: usize = 512 * 1024;

/// A page of the jobs the member may see, newest first, at most `limit`
/// and [`LIST_BUDGET_BYTES`] of JSON.
pub async fn list(svc: &Services, member: &Member, q: wire::JobListQuery) -> Result<wire::JobList> {
    let state = q
        .state
        .map(|s| {
            JobState::parse(&s).ok_or_else(|| Error::bad_request(format!("unknown state {s:?}")))
        })
        .transpose()?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(Error::bad_request("limit must be 1..=1000"));
    }
    let before = q
        .before
        .map(|b| {
            b.parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| Error::bad_request("before must be a page's nextBefore"))
        })
        .transpose()?;
    let page = svc
        .store
        .list_jobs(member, state, before, limit, LIST_BUDGET_BYTES)
        .await?;
    cut_page(page, LIST_BUDGET_BYTES)
}

/// A page, cut before the job that would take its JSON past `budget`.
fn cut_page(page: JobPage, budget: usize) -> Result<wire::JobList> {
    // `{"jobs":[],"nextBefore":"…"}` and the commas.
    const FRAME: usize = 64;
    let (mut jobs, mut used, mut next) = (Vec::new(), FRAME, page.next);
    let mut last = None;
    for listed in page.jobs {
        let job = wire::Job::from(listed.job);
        let mut size = Counter(0);
        serde_json::to_writer(&mut size, &job)?;
        if !jobs.is_empty() && used + size.0 + 1 > budget {
            next = last;
            break;
        }
        used += size.0 + 1;
        jobs.push(job);
        last = Some(listed.cursor);
    }
    Ok(wire::JobList {
        jobs,
        next_before: next.map(|n| n.to_string()),
    })
}

/// Counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub async fn get(svc: &Services, member: &Member, id: &str) -> Result<wire::Job> {
    Ok(svc.store.get_job(member, id).await?.into())
}

/// For the tests only: with `DROVER_TEST_EXIT_AFTER_SUBMIT=1` the process
/// dies as soon as a submit is written, before it answers (a crash between
/// write and answer, which an Idempotency-Key makes safe to retry).
fn exit_after_submit_for_tests() {
    static EXIT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *EXIT.get_or_init(|| std::env::var("DROVER_TEST_EXIT_AFTER_SUBMIT").as_deref() == Ok("1")) {
        tracing::warn!("DROVER_TEST_EXIT_AFTER_SUBMIT: exiting after the write, before the answer");
        std::process::exit(70);
    }
}
