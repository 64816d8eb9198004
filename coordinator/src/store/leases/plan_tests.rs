//! The lease rules (SPEC §2.5, §2.6) as cases of [`plan`], with no database.

use std::collections::HashMap;

use super::LeaseRequest;
use super::plan::{LiveRunner, Pick, Plan, Planner, QueuedJob, plan};
use crate::ids::{RunnerId, RuntimeId};
use crate::wake::Wake;

fn req(runner: &str) -> LeaseRequest {
    LeaseRequest {
        runner: RunnerId::from_db(runner.to_owned()),
        runtime: RuntimeId::from_db("pool".to_owned()),
        now: 0,
        ttl_ms: 1000,
    }
}

fn reqs(runners: &[&str]) -> Vec<LeaseRequest> {
    runners.iter().map(|r| req(r)).collect()
}

/// Runners as `(id, pool, capabilities, slots, held)`.
fn runners(list: &[(&str, &str, &[&str], i64, i64)]) -> HashMap<String, LiveRunner> {
    list.iter()
        .map(|(id, pool, caps, slots, held)| {
            (
                id.to_string(),
                LiveRunner {
                    runtime: pool.to_string(),
                    capabilities: caps.iter().map(|c| c.to_string()).collect(),
                    slots: *slots,
                    held: *held,
                },
            )
        })
        .collect()
}

fn job(id: &str, requires: &[&str]) -> QueuedJob {
    QueuedJob {
        id: id.to_owned(),
        requires: requires.iter().map(|r| r.to_string()).collect(),
        pinned_runner: None,
    }
}

fn pinned(id: &str, runner: &str, requires: &[&str]) -> QueuedJob {
    QueuedJob {
        pinned_runner: Some(runner.to_owned()),
        ..job(id, requires)
    }
}

fn queues(list: Vec<(&str, Vec<QueuedJob>)>) -> HashMap<String, Vec<QueuedJob>> {
    list.into_iter().map(|(p, q)| (p.to_owned(), q)).collect()
}

/// The picks as short strings: a job id, `-` (nothing), `revoked`, `limit`.
fn picks(plan: &Plan) -> Vec<String> {
    plan.picks
        .iter()
        .map(|p| match p {
            Pick::Job(id) => id.clone(),
            Pick::Nothing => "-".into(),
            Pick::Revoked => "revoked".into(),
            Pick::Limited { .. } => "limit".into(),
        })
        .collect()
}

fn pool_wake(pool: &str, requires: &[&str]) -> Option<Wake> {
    Some(Wake::Pool {
        runtime: RuntimeId::from_db(pool.to_owned()),
        requires: requires.iter().map(|r| r.to_string()).collect(),
    })
}

const ANY: &[&str] = &[];

#[test]
fn fifo_in_request_order() {
    let rs = runners(&[("r1", "p", ANY, 1, 0), ("r2", "p", ANY, 1, 0)]);
    let q = queues(vec![("p", vec![job("j1", ANY), job("j2", ANY)])]);
    let p = plan(&reqs(&["r2", "r1"]), &rs, &[], &q);
    assert_eq!(
        picks(&p),
        ["j1", "j2"],
        "the earliest request gets the head"
    );
    assert_eq!(p.wakes, [None, None], "nothing waits behind");
}

#[test]
fn an_empty_queue_gives_nothing() {
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let p = plan(&reqs(&["r1"]), &rs, &[], &HashMap::new());
    assert_eq!(picks(&p), ["-"]);
}

#[test]
fn jobs_behind_wake_one_waiter_each() {
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let q = queues(vec![(
        "p",
        vec![job("j1", ANY), job("j2", &["gpu"]), job("j3", ANY)],
    )]);
    let p = plan(&reqs(&["r1"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["j1"]);
    // One served request passes on one wake: for the next job in line.
    assert_eq!(p.wakes, [pool_wake("p", &["gpu"])]);
}

#[test]
fn a_runner_skips_jobs_it_cannot_run() {
    let rs = runners(&[("plain", "p", ANY, 1, 0)]);
    let q = queues(vec![("p", vec![job("gpu-job", &["gpu"]), job("j2", ANY)])]);
    let p = plan(&reqs(&["plain"]), &rs, &[], &q);
    assert_eq!(
        picks(&p),
        ["j2"],
        "the gpu job stays queued for a capable runner"
    );
}

#[test]
fn capabilities_route_each_job_to_a_runner_that_meets_it() {
    let rs = runners(&[
        ("plain", "p", ANY, 1, 0),
        ("gpu", "p", &["gpu", "os=linux"], 1, 0),
    ]);
    let q = queues(vec![(
        "p",
        vec![job("needs-gpu", &["gpu"]), job("any", ANY)],
    )]);
    // The plain runner asked first, but cannot take the head.
    let p = plan(&reqs(&["plain", "gpu"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["any", "needs-gpu"]);
}

#[test]
fn a_bare_requirement_is_met_by_any_value() {
    let rs = runners(&[("linux", "p", &["os=linux"], 1, 0)]);
    let q = queues(vec![(
        "p",
        vec![job("mac", &["os=macos"]), job("any-os", &["os"])],
    )]);
    let p = plan(&reqs(&["linux"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["any-os"]);
}

#[test]
fn nobody_capable_leaves_the_job_queued() {
    let rs = runners(&[("a", "p", ANY, 1, 0), ("b", "p", &["docker"], 1, 0)]);
    let q = queues(vec![("p", vec![job("gpu-job", &["gpu"])])]);
    let p = plan(&reqs(&["a", "b"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["-", "-"]);
    assert_eq!(p.wakes, [None, None]);
}

#[test]
fn pinned_jobs_come_before_the_pool() {
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let q = queues(vec![("p", vec![job("pool-job", ANY)])]);
    let p = plan(&reqs(&["r1"]), &rs, &[pinned("mine", "r1", ANY)], &q);
    assert_eq!(picks(&p), ["mine"]);
}

#[test]
fn a_pinned_job_goes_only_to_its_runner() {
    let rs = runners(&[("r1", "p", ANY, 1, 0), ("r2", "p", ANY, 1, 0)]);
    let q = queues(vec![("p", vec![job("pool-job", ANY)])]);
    let p = plan(
        &reqs(&["r1", "r2"]),
        &rs,
        &[pinned("for-r2", "r2", ANY)],
        &q,
    );
    assert_eq!(picks(&p), ["pool-job", "for-r2"]);
}

#[test]
fn a_second_pinned_job_wakes_its_runner() {
    let rs = runners(&[("r1", "p", ANY, 2, 0)]);
    let pins = [pinned("first", "r1", ANY), pinned("second", "r1", ANY)];
    let p = plan(&reqs(&["r1"]), &rs, &pins, &HashMap::new());
    assert_eq!(picks(&p), ["first"]);
    assert_eq!(
        p.wakes,
        [Some(Wake::Runner {
            runtime: RuntimeId::from_db("p".into()),
            runner: RunnerId::from_db("r1".into()),
        })]
    );
}

#[test]
fn one_runner_with_two_slots_takes_two_pinned_jobs() {
    let rs = runners(&[("r1", "p", ANY, 2, 0)]);
    let pins = [pinned("first", "r1", ANY), pinned("second", "r1", ANY)];
    let p = plan(&reqs(&["r1", "r1"]), &rs, &pins, &HashMap::new());
    assert_eq!(picks(&p), ["first", "second"]);
}

#[test]
fn a_pinned_job_the_runner_cannot_run_is_skipped() {
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let pins = [pinned("gpu", "r1", &["gpu"])];
    let q = queues(vec![("p", vec![job("pool-job", ANY)])]);
    let p = plan(&reqs(&["r1"]), &rs, &pins, &q);
    assert_eq!(picks(&p), ["pool-job"]);
}

#[test]
fn slots_limit_the_requests_of_one_runner() {
    let rs = runners(&[("r1", "p", ANY, 2, 1)]);
    let q = queues(vec![("p", vec![job("j1", ANY), job("j2", ANY)])]);
    let p = plan(&reqs(&["r1", "r1"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["j1", "limit"]);
    assert_eq!(p.picks[1], Pick::Limited { slots: 2, held: 1 });
}

#[test]
fn a_request_takes_its_slot_even_when_it_finds_nothing() {
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let p = plan(&reqs(&["r1", "r1"]), &rs, &[], &HashMap::new());
    assert_eq!(picks(&p), ["-", "limit"]);
}

#[test]
fn a_full_runner_leases_nothing() {
    let rs = runners(&[("r1", "p", ANY, 1, 1), ("r2", "p", ANY, 1, 0)]);
    let q = queues(vec![("p", vec![job("j1", ANY)])]);
    let p = plan(&reqs(&["r1", "r2"]), &rs, &[], &q);
    assert_eq!(
        picks(&p),
        ["limit", "j1"],
        "the job goes to the runner with room"
    );
}

#[test]
fn a_revoked_runner_gets_nothing() {
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let q = queues(vec![("p", vec![job("j1", ANY)])]);
    let p = plan(&reqs(&["gone", "r1"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["revoked", "j1"]);
}

#[test]
fn requests_compete_for_one_job() {
    let rs = runners(&[
        ("r1", "p", ANY, 1, 0),
        ("r2", "p", ANY, 1, 0),
        ("r3", "p", ANY, 1, 0),
    ]);
    let q = queues(vec![("p", vec![job("only", ANY)])]);
    let p = plan(&reqs(&["r3", "r1", "r2"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["only", "-", "-"], "one job, one lease");
}

#[test]
fn pools_are_served_from_their_own_queues() {
    let rs = runners(&[("a1", "a", ANY, 1, 0), ("b1", "b", ANY, 1, 0)]);
    let q = queues(vec![
        ("a", vec![job("a-job", ANY)]),
        ("b", vec![job("b-job", ANY), job("b-next", ANY)]),
    ]);
    let p = plan(&reqs(&["b1", "a1"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["b-job", "a-job"]);
    assert_eq!(p.wakes, [pool_wake("b", ANY), None]);
}

#[test]
fn priority_is_the_order_the_queue_was_read_in() {
    // The queue arrives in lease order (priority, then FIFO): the plan keeps it.
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let q = queues(vec![("p", vec![job("urgent", ANY), job("older", ANY)])]);
    let p = plan(&reqs(&["r1"]), &rs, &[], &q);
    assert_eq!(picks(&p), ["urgent"]);
}

#[test]
fn more_pages_are_asked_for_only_while_requests_wait() {
    let rs = runners(&[("plain", "p", ANY, 1, 0)]);
    let rq = reqs(&["plain"]);
    let mut planner = Planner::new(&rq, &rs, &[]);
    assert_eq!(planner.pools(), [("p", 1)]);
    // A full page the runner can run none of: ask for the next.
    assert!(planner.offer("p", &[job("g1", &["gpu"]), job("g2", &["gpu"])], true));
    // The next page serves it, and shows one more waiting behind: enough.
    assert!(!planner.offer(
        "p",
        &[job("g2", &["gpu"]), job("j", ANY), job("k", ANY)],
        true
    ));
    let p = planner.finish();
    assert_eq!(picks(&p), ["j"]);
    assert_eq!(p.wakes, [pool_wake("p", ANY)]);
}

#[test]
fn a_short_page_ends_the_queue() {
    let rs = runners(&[("plain", "p", ANY, 1, 0)]);
    let rq = reqs(&["plain"]);
    let mut planner = Planner::new(&rq, &rs, &[]);
    assert!(!planner.offer("p", &[job("g1", &["gpu"])], false));
    assert_eq!(picks(&planner.finish()), ["-"]);
}

#[test]
fn a_row_repeated_by_a_later_page_is_taken_once() {
    let rs = runners(&[("a", "p", &["gpu"], 1, 0), ("b", "p", ANY, 1, 0)]);
    let rq = reqs(&["a", "b"]);
    let mut planner = Planner::new(&rq, &rs, &[]);
    assert!(planner.offer("p", &[job("g", &["gpu"])], true));
    planner.offer("p", &[job("g", &["gpu"]), job("j", ANY)], false);
    assert_eq!(picks(&planner.finish()), ["g", "j"]);
}

#[test]
fn a_served_pool_wants_no_pages() {
    let rs = runners(&[("r1", "p", ANY, 1, 0)]);
    let rq = reqs(&["r1"]);
    let planner = Planner::new(&rq, &rs, &[pinned("mine", "r1", ANY)]);
    assert!(planner.pools().is_empty(), "served by its pinned job");
}
