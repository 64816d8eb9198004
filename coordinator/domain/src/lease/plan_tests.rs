//! The lease rules (SPEC §2.5, §2.6) as cases of [`plan`], with no
//! database: the table in `rules.rs` (which the store also runs, on both
//! backends), and how the planner reads a queue page by page.

use std::collections::HashMap;

use super::LeaseRequest;
use super::plan::{LiveRunner, Pick, Plan, Planner, QueuedJob, plan};
use super::rules::{CASES, Job, wake_text};
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

/// Every case of the table, against `plan()` alone.
#[test]
fn every_lease_rule_holds_for_the_plan() {
    for case in CASES {
        let live = runners(
            &case
                .runners
                .iter()
                .filter(|r| !r.revoked)
                .map(|r| (r.name, r.pool, r.caps, r.slots as i64, r.held as i64))
                .collect::<Vec<_>>(),
        );
        // The reads hand over each queue by priority, then submission.
        let mut jobs: Vec<(usize, &Job)> = case.jobs.iter().enumerate().collect();
        jobs.sort_by_key(|(i, j)| (-j.priority, *i));
        let queued = |j: &Job| QueuedJob {
            id: j.name.to_owned(),
            requires: j.requires.iter().map(|r| r.to_string()).collect(),
            pinned_runner: j.pinned.map(str::to_owned),
        };
        let pins: Vec<QueuedJob> = jobs
            .iter()
            .filter(|(_, j)| j.pinned.is_some())
            .map(|(_, j)| queued(j))
            .collect();
        let mut q: HashMap<String, Vec<QueuedJob>> = HashMap::new();
        for (_, j) in jobs.iter().filter(|(_, j)| j.pinned.is_none()) {
            q.entry(j.pool.to_owned()).or_default().push(queued(j));
        }
        let requests: Vec<LeaseRequest> = case
            .requests
            .iter()
            .map(|name| {
                let pool = case.runners.iter().find(|r| r.name == *name).unwrap().pool;
                LeaseRequest {
                    runtime: RuntimeId::from_db(pool.to_owned()),
                    ..req(name)
                }
            })
            .collect();
        let p = plan(&requests, &live, &pins, &q);
        assert_eq!(picks(&p), case.picks, "{}: picks", case.name);
        let wakes: Vec<String> = p
            .wakes
            .iter()
            .map(|w| wake_text(w.as_ref(), str::to_owned, str::to_owned))
            .collect();
        assert_eq!(wakes, case.wakes, "{}: wakes", case.name);
    }
}

#[test]
fn a_limited_pick_says_how_many_slots_are_held() {
    let rs = runners(&[("r1", "p", ANY, 2, 1)]);
    let q = queues(vec![("p", vec![job("j1", ANY), job("j2", ANY)])]);
    let p = plan(&reqs(&["r1", "r1"]), &rs, &[], &q);
    assert_eq!(p.picks[1], Pick::Limited { slots: 2, held: 1 });
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
