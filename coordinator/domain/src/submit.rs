//! The submit decision (no I/O): for each request of a submit batch, from
//! what the store read for the batch, a replay of a stored idempotency key,
//! a repeat of an earlier request of the batch, a refusal (a key reused
//! with another request, a spent budget, a pinned runner gone), or queued.

use std::collections::{HashMap, HashSet};

use crate::billing::{Month, runner_minutes};
use crate::error::{Error, Kind};

/// One request of the batch, as the decision sees it.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    pub member: &'a str,
    /// The caller's workspace: it pays for jobs on its pools.
    pub workspace: &'a str,
    /// Its idempotency key's hash and its request's hash, if it sent a key.
    pub key: Option<(&'a str, &'a str)>,
    /// The job goes to a workspace-owned pool (the workspace pays).
    pub workspace_owned: bool,
    /// The runner it is pinned to, if any.
    pub pinned: Option<&'a str>,
    pub now: i64,
}

/// A key already stored: its request's hash and its job.
#[derive(Debug, Clone)]
pub struct Stored {
    pub request_hash: String,
    pub job_id: String,
}

/// What the store read for the batch.
#[derive(Debug, Default)]
pub struct Reads {
    /// Live keys, by (member, key hash).
    pub stored: HashMap<(String, String), Stored>,
    /// By paying workspace: (its budget, spent this month), in runner-ms.
    pub budgets: HashMap<String, (Option<i64>, i64)>,
    /// The pinned runners still live.
    pub live: HashSet<String>,
}

/// What becomes of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write its job.
    Queue,
    /// Answer the job its key named before (by id), as it is now.
    Replay(String),
    /// Answer what the earlier request of the batch (by index) gets.
    Repeat(usize),
    Refuse(Error),
}

/// One decision per request, in order.
pub fn decide(asks: &[Ask<'_>], reads: &Reads) -> Vec<Decision> {
    let mut out = Vec::with_capacity(asks.len());
    // Keys first seen in this batch: (member, key hash) → the request.
    let mut first_with: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, a) in asks.iter().enumerate() {
        if let Some((key_hash, request_hash)) = a.key {
            let id = (a.member, key_hash);
            let earlier = reads
                .stored
                .get(&(id.0.to_owned(), id.1.to_owned()))
                .map(|s| (s.request_hash.as_str(), Decision::Replay(s.job_id.clone())))
                .or_else(|| {
                    first_with.get(&id).map(|&j| {
                        let (_, first) = asks[j].key.expect("keyed");
                        (first, Decision::Repeat(j))
                    })
                });
            match earlier {
                Some((hash, _)) if hash != request_hash => {
                    out.push(Decision::Refuse(key_reused()));
                    continue;
                }
                Some((_, same)) => {
                    out.push(same);
                    continue;
                }
                None => {
                    first_with.insert(id, i);
                }
            }
        }
        if a.workspace_owned
            && let Some(&(Some(budget), spent)) = reads.budgets.get(a.workspace)
            && spent >= budget
        {
            out.push(Decision::Refuse(budget_spent(budget, spent, a.now)));
            continue;
        }
        if let Some(runner) = a.pinned
            && !reads.live.contains(runner)
        {
            out.push(Decision::Refuse(Error::not_found(format!(
                "no runner {runner}"
            ))));
            continue;
        }
        out.push(Decision::Queue);
    }
    out
}

/// The same `Idempotency-Key` came with a different request.
fn key_reused() -> Error {
    Error::conflict(
        "this Idempotency-Key was used in the last 24 hours with a different request; \
         use a new key for a new job",
    )
}

/// The budget, what was spent, and when it resets.
fn budget_spent(budget_ms: i64, spent_ms: i64, now: i64) -> Error {
    let month = Month::of(now);
    Error::new(
        Kind::BudgetExceeded,
        format!(
            "the workspace's budget for {month} is spent: {} of {} runner-minutes used; \
             it resets at {} 00:00 UTC (jobs on members' own runners are not limited)",
            runner_minutes(spent_ms.max(0) as u64),
            runner_minutes(budget_ms.max(0) as u64),
            month.next().first_day(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask<'a>(member: &'a str, key: Option<(&'a str, &'a str)>) -> Ask<'a> {
        Ask {
            member,
            workspace: "ws_1",
            key,
            workspace_owned: true,
            pinned: None,
            now: 0,
        }
    }

    #[test]
    fn keys_replay_repeat_or_refuse_and_budgets_and_pins_refuse() {
        let mut reads = Reads::default();
        reads.stored.insert(
            ("usr_a".into(), "k1".into()),
            Stored {
                request_hash: "r1".into(),
                job_id: "job_1".into(),
            },
        );
        let asks = [
            ask("usr_a", Some(("k1", "r1"))), // stored, same request
            ask("usr_a", Some(("k1", "r2"))), // stored, another request
            ask("usr_b", Some(("k1", "r9"))), // another member's key: new
            ask("usr_b", Some(("k1", "r9"))), // the same again in the batch
            ask("usr_b", Some(("k1", "r8"))), // the same key, another request
            Ask {
                pinned: Some("rn_gone"),
                ..ask("usr_c", None)
            },
        ];
        let d = decide(&asks, &reads);
        assert_eq!(d[0], Decision::Replay("job_1".into()));
        assert!(matches!(&d[1], Decision::Refuse(e) if e.kind == Kind::Conflict));
        assert_eq!(d[2], Decision::Queue);
        assert_eq!(d[3], Decision::Repeat(2));
        assert!(matches!(&d[4], Decision::Refuse(e) if e.kind == Kind::Conflict));
        assert!(matches!(&d[5], Decision::Refuse(e) if e.kind == Kind::NotFound));

        reads.budgets.insert("ws_1".into(), (Some(60_000), 60_000));
        let d = decide(&[ask("usr_c", None)], &reads);
        assert!(
            matches!(&d[0], Decision::Refuse(e) if e.kind == Kind::BudgetExceeded
                && e.message.contains("1.0 of 1.0 runner-minutes")),
            "{d:?}"
        );
        let own = Ask {
            workspace_owned: false,
            ..ask("usr_c", None)
        };
        assert_eq!(decide(&[own], &reads), vec![Decision::Queue]);
    }
}
