//! A complete that also leases the runner's next job (`next` with no wait),
//! as the runner asks after every job: on PostgreSQL one statement, so one
//! round trip and one commit a job instead of two of each.
//!
//! The statement (`complete_next.sql`, for one request) is `lease.sql`'s
//! rules for one runner with the complete (`complete.sql`'s CTEs) put in
//! after the runner is locked, so it takes locks in the order revocation
//! does (runner, then its job). Only a complete that finished its job here
//! asks for a lease (a repeat or a lost lease gets none), and the runner's
//! live leases count without the one it finished. When the lease half says
//! `again` (the cases `drover_lease` plans), the complete is written and the
//! lease is asked for again as a lease batch. A batch of several is the
//! completes, then a lease batch.

use std::sync::{Arc, LazyLock};

use super::complete::{Ended, PgCompletes, complete_ctes, complete_on_sqlite};
use super::{
    CompleteRequest, Completion, LeaseAttempt, LeaseRequest, lease_on_sqlite, now_and_ttl,
    one_call_written,
};
use crate::ids::{LeaseId, RunnerId, RuntimeId};
use crate::store::backend::OnEngine;
use crate::store::backend::sqlite::SqliteEngine;
use crate::store::batch::BatchError;
use crate::store::error::{Error, Result};
use crate::store::sqlite_writer::Cols as _;
use crate::store::{Store, only_result};
use drover_domain::job::AttemptResult;

/// One complete with its next lease, for a batch.
#[derive(Debug, Clone)]
pub struct CompleteNextRequest {
    pub complete: CompleteRequest,
    pub lease: LeaseRequest,
}

/// What a complete with its next lease did.
#[derive(Debug)]
pub struct CompletedNext {
    pub completion: Completion,
    /// The next lease; `None` for a repeat (its first answer may have
    /// carried one).
    pub next: Option<Result<LeaseAttempt>>,
}

impl Store {
    /// Completes `complete`'s lease and, unless it was a repeat, leases the
    /// runner's next job as `try_lease` would. Concurrent calls are written
    /// together (see `batch`).
    pub async fn complete_next(
        &self,
        runner: &RunnerId,
        runtime: &RuntimeId,
        lease: &str,
        done: &AttemptResult,
        now: i64,
        ttl_ms: u64,
    ) -> Result<CompletedNext> {
        let req = CompleteNextRequest {
            complete: CompleteRequest {
                runner: runner.clone(),
                lease: lease.to_owned(),
                done: done.clone(),
                now,
            },
            lease: LeaseRequest {
                runner: runner.clone(),
                runtime: runtime.clone(),
                now,
                ttl_ms,
            },
        };
        match &self.batches {
            Some(b) => b.complete_next.call(req).await,
            None => only_result(self.complete_next_batch(&[req]).await?),
        }
    }

    pub(crate) async fn complete_next_batch(
        &self,
        reqs: &[CompleteNextRequest],
    ) -> Result<Vec<Result<CompletedNext>>, BatchError> {
        self.engine.run(self, CompleteNextBatch(reqs)).await
    }

    /// One request as one statement (see the module's doc).
    async fn complete_next_in_one_statement(
        &self,
        req: &CompleteNextRequest,
    ) -> Result<Vec<Result<CompletedNext>>, BatchError> {
        let completes = [req.complete.clone()];
        let batch = PgCompletes::new(&completes);
        let runner = req.lease.runner.as_str();
        let lease = LeaseId::generate();
        let mut conn = self.engine.hot(self).await?;
        let rows = batch
            .bind(
                sqlx::query(&STATEMENT)
                    .bind(runner)
                    .bind(lease.as_str())
                    .bind(batch.now)
                    .bind(req.lease.ttl_ms as i64),
            )
            .fetch_all(&mut *conn)
            .await
            .map_err(BatchError::from_write)?;
        conn.done();

        // Written, the complete and the lease alike: from here an error is
        // the request's, as ambiguous (never run again).
        let mut ended = Vec::new();
        let mut asked = Vec::new();
        for row in rows {
            match row
                .col::<String>(0)
                .map_err(BatchError::Ambiguous)?
                .as_str()
            {
                "done" => ended.push(Ended::read(&row, [1, 3, 4, 7])?),
                _ => asked.push(row),
            }
        }
        let completions = batch.answers(self, ended).await?;
        // No lease row: the complete finished nothing here (a repeat, or lost).
        let next = match asked.first().map(|r| r.col::<String>(0)) {
            None => return Ok(join(completions, Vec::new(), Vec::new())),
            // Nothing was leased: ask as a lease batch does.
            Some(Ok(pick)) if pick == "again" => self
                .lease_batch(std::slice::from_ref(&req.lease))
                .await
                .unwrap_or_else(|e| {
                    let e = e.into_error();
                    tracing::error!(error = %e, "leasing the next job after a complete");
                    vec![Err(next_failed())]
                }),
            Some(_) => {
                let reqs = std::slice::from_ref(&req.lease);
                let written = one_call_written(&asked, reqs, vec![lease])?;
                self.hand_out(written, req.lease.now, req.lease.ttl_ms)
                    .await
            }
        };
        Ok(join(completions, vec![0], next))
    }
}

/// The error a request's next lease gets when its batch's lease failed
/// (its complete was written).
fn next_failed() -> Error {
    Error::Internal("the next job could not be leased; ask again")
}

/// Each request's answer: its completion, and the lease of those in `sub`.
fn join(
    completions: Vec<Result<Completion>>,
    sub: Vec<usize>,
    next: Vec<Result<LeaseAttempt>>,
) -> Vec<Result<CompletedNext>> {
    let mut next_of: Vec<Option<Result<LeaseAttempt>>> = completions.iter().map(|_| None).collect();
    for (k, n) in sub.into_iter().zip(next) {
        next_of[k] = Some(n);
    }
    completions
        .into_iter()
        .zip(next_of)
        .map(|(c, n)| {
            c.map(|completion| CompletedNext {
                next: match completion.repeated {
                    true => None,
                    // Finished here, but not leased for (its lease part
                    // failed before it was asked): it asks again.
                    false => Some(n.unwrap_or_else(|| Err(next_failed()))),
                },
                completion,
            })
        })
        .collect()
}

/// `complete_next.sql` with the complete's CTEs in it, built once.
static STATEMENT: LazyLock<String> = LazyLock::new(|| {
    const AT: &str = "-- (complete_next.rs puts the complete here.)\n";
    let completes = once(
        &complete_ctes(1, "$3", 5),
        // The runner first, then its job (as revocation locks them).
        "\n    ORDER BY j.id FOR UPDATE OF j)",
        "\n      AND (SELECT COUNT(*) FROM locked) >= 0\n    ORDER BY j.id FOR UPDATE OF j)",
    );
    let completes = completes.strip_prefix("WITH ").unwrap_or(&completes);
    once(
        include_str!("complete_next.sql"),
        AT,
        &format!("{completes},\n"),
    )
});

/// The statement for a runner and lease that are no one's: it finds
/// nothing and writes nothing (to prepare it on a new connection).
pub(in crate::store) fn complete_next_for_no_one() -> super::complete::AnyQuery<'static> {
    let mut q = sqlx::query(&STATEMENT)
        .bind("-")
        .bind("-")
        .bind(0i64)
        .bind(0i64);
    q = q.bind("-").bind("-").bind("succeeded").bind(0i64);
    q.bind(None::<&str>).bind(0i64).bind(0i64)
}

/// `text` with `from`, which it holds once, replaced by `to` (the statements
/// are constants: a test that runs one finds a change that broke this).
fn once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} once in a statement"
    );
    text.replacen(from, to, 1)
}

/// A batch of completes with their next leases, as each database runs it.
struct CompleteNextBatch<'a>(&'a [CompleteNextRequest]);

impl OnEngine for CompleteNextBatch<'_> {
    type Out = Result<Vec<Result<CompletedNext>>, BatchError>;

    /// SQLite writes both in one turn of its one writer: the completes,
    /// then the leases (two transactions, with no other write between).
    async fn on_sqlite(self, store: &Store, engine: &Arc<SqliteEngine>) -> Self::Out {
        let reqs = self.0.to_vec();
        let d = store.dialect;
        let (completions, sub, leased) = engine
            .on_writer(store, move |conn| {
                let completes: Vec<CompleteRequest> =
                    reqs.iter().map(|r| r.complete.clone()).collect();
                let completions = complete_on_sqlite(conn, &completes)?;
                let sub = finished_here(&completions);
                let leases: Vec<LeaseRequest> =
                    sub.iter().map(|&k| reqs[k].lease.clone()).collect();
                let (now, ttl_ms) = now_and_ttl(&leases);
                let leased = (!sub.is_empty()).then(|| {
                    lease_on_sqlite(conn, d, &leases, now, ttl_ms).map(|w| (w, now, ttl_ms))
                });
                Ok::<_, BatchError>((completions, sub, leased))
            })
            .await??;
        let next = match leased {
            None => Vec::new(),
            Some(Ok((written, now, ttl_ms))) => store.hand_out(written, now, ttl_ms).await,
            Some(Err(e)) => next_lease_failed(e, &sub),
        };
        Ok(join(completions, sub, next))
    }

    /// One request (a runner's usual call) as one statement. A batch of
    /// several as two, the completes then the leases: the fused statement
    /// over many rows held its locks longer and drained 64 runners slower
    /// (1,555 against 2,210 jobs/s, turn by turn, no steal).
    async fn on_postgres(self, store: &Store) -> Self::Out {
        match self.0 {
            [one] => store.complete_next_in_one_statement(one).await,
            _ => in_turn(store, self.0).await,
        }
    }
}

/// The completes, then a lease batch for those that finished their job
/// (not a repeat): two writes.
async fn in_turn(
    store: &Store,
    reqs: &[CompleteNextRequest],
) -> Result<Vec<Result<CompletedNext>>, BatchError> {
    let completes: Vec<CompleteRequest> = reqs.iter().map(|r| r.complete.clone()).collect();
    let completions = store.complete_batch(&completes).await?;
    let sub = finished_here(&completions);
    let sub_reqs: Vec<LeaseRequest> = sub.iter().map(|&k| reqs[k].lease.clone()).collect();
    let next = match sub.is_empty() {
        true => Vec::new(),
        false => store
            .lease_batch(&sub_reqs)
            .await
            .unwrap_or_else(|e| next_lease_failed(e, &sub)),
    };
    Ok(join(completions, sub, next))
}

/// The requests whose complete finished their job here (not a repeat):
/// those that ask for their next lease.
fn finished_here(completions: &[Result<Completion>]) -> Vec<usize> {
    (0..completions.len())
        .filter(|&k| matches!(&completions[k], Ok(c) if !c.repeated))
        .collect()
}

/// Each of `sub`'s answers when their lease batch failed (their completes
/// are written).
fn next_lease_failed(e: BatchError, sub: &[usize]) -> Vec<Result<LeaseAttempt>> {
    let e = e.into_error();
    tracing::error!(error = %e, "leasing the next jobs after a batch of completes");
    sub.iter().map(|_| Err(next_failed())).collect()
}

#[cfg(test)]
mod tests {
    /// `bench/complete_next.sql` is the statement for one request, as
    /// built here (bench/plans.sh explains it); `DROVER_UPDATE_SQL=1`
    /// writes it again.
    #[test]
    fn the_statement_for_one_request_is_the_one_bench_explains() {
        let built = &*super::STATEMENT;
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/complete_next.sql");
        let header = "-- Generated by complete_next.rs (a test keeps it current): the statement\n\
                      -- a complete with its next lease runs on PostgreSQL, for one request.\n";
        let want = format!("{header}{built}\n");
        if std::env::var_os("DROVER_UPDATE_SQL").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let kept = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            kept == want,
            "bench/complete_next.sql is not the statement built now: run this test with DROVER_UPDATE_SQL=1"
        );
    }
}
