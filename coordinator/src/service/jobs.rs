//! Jobs: submit (with an optional idempotency key) and cancel.

use drover_wire as wire;

use super::Services;
use crate::error::{Error, Result};
use crate::store::{CancelOutcome, IdempotencyKey, Member, NewJob, Submitted};
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
    let job = NewJob::validate(req)?;
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

/// An `Idempotency-Key` as a header gives it: printable ASCII.
pub fn header_key(value: &[u8]) -> Result<&str> {
    std::str::from_utf8(value)
        .ok()
        .filter(|v| v.bytes().all(|b| (b' '..=b'~').contains(&b)))
        .ok_or_else(|| Error::bad_request("Idempotency-Key must be printable ASCII"))
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
    svc.store.get_job(member, id).await
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
