//! Complete: finishing the jobs of a batch of leases, with provenance and usage.

use std::collections::HashMap;

use drover_wire::{self as wire, JobState, Outcome};
use sqlx::FromRow;

use super::{CompleteRequest, Completion};
use crate::batch::BatchError;
use crate::billing::Month;
use crate::error::{Error, Result};
use crate::ids::{JobId, RunnerId};
use crate::store::{Store, Writer, bind_all, only_result, placeholders};

/// One job a complete batch finishes.
struct Finish {
    job: String,
    state: JobState,
    exit_code: Option<i64>,
    error: Option<String>,
    runner: String,
    payer: String,
    charged: i64,
    runner_ms: i64,
    attempt: i64,
    workspace_id: String,
    /// The billing month of this usage line (see `billing::Month`).
    month: i64,
    runtime_id: String,
    submitter_id: String,
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Binds the rows of the job update (`value_rows(…, 6, "")`).
fn bind_updates<'q>(mut q: AnyQuery<'q>, finishes: &'q [Finish]) -> AnyQuery<'q> {
    for f in finishes {
        q = q
            .bind(f.job.as_str())
            .bind(f.state.as_str())
            .bind(f.exit_code)
            .bind(f.error.as_deref())
            .bind(f.runner.as_str())
            .bind(f.payer.as_str());
    }
    q
}

/// Binds the rows of the usage insert (`value_rows(…, USAGE_WIDTH, ", $1")`).
fn bind_usage<'q>(mut q: AnyQuery<'q>, finishes: &'q [Finish]) -> AnyQuery<'q> {
    for f in finishes {
        q = q
            .bind(f.job.as_str())
            .bind(f.attempt)
            .bind(f.workspace_id.as_str())
            .bind(f.payer.as_str())
            .bind(f.charged)
            .bind(f.runner_ms)
            .bind(f.month)
            .bind(f.runtime_id.as_str())
            .bind(f.runner.as_str())
            .bind(f.submitter_id.as_str());
    }
    q
}

/// Values per usage row.
const USAGE_WIDTH: usize = 10;

/// `n` rows of `width` placeholders each, numbered from `$first`, each row
/// ending with `tail` (e.g. `", $1"` for a value shared by every row).
/// `n` rows of `width` placeholders each, numbered from `$first`, each row
/// ending with `tail` (e.g. `", $1"` for a value shared by every row).
fn value_rows(first: usize, n: usize, width: usize, tail: &str) -> String {
    (0..n)
        .map(|k| format!("({}{tail})", placeholders(first + width * k, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Store {
    /// Finishes the job held by `lease`, records provenance and usage.
    /// Idempotent: a repeat for a lease that already completed changes nothing.
    /// Concurrent calls are written together (see `batch`).
    pub async fn complete(
        &self,
        runner: &RunnerId,
        lease: &str,
        done: &wire::Complete,
        now: i64,
    ) -> Result<Completion> {
        let req = CompleteRequest {
            runner: runner.clone(),
            lease: lease.to_owned(),
            done: done.clone(),
            now,
        };
        match &self.batches {
            Some(b) => b.complete.call(req).await,
            None => only_result(self.complete_batch(&[req]).await?),
        }
    }

    /// Completes each request's lease, in one transaction.
    pub(crate) async fn complete_batch(
        &self,
        reqs: &[CompleteRequest],
    ) -> Result<Vec<Result<Completion>>, BatchError> {
        #[derive(FromRow)]
        struct Row {
            id: String,
            lease_id: String,
            state: String,
            lease_runner_id: Option<String>,
            attempt: i64,
            cancel_requested: i64,
            started_at: Option<i64>,
            workspace_id: String,
            owner_member_id: Option<String>,
            workspace_name: String,
            runtime_id: String,
            submitter_id: String,
        }
        let now = reqs.iter().map(|r| r.now).max().unwrap_or_default();
        // SQLite: reads on the held writer, then all writes as one command.
        let mut tx = self.batch_writer().await?;
        let mut leases: Vec<&str> = reqs.iter().map(|r| r.lease.as_str()).collect();
        leases.sort_unstable();
        leases.dedup();
        // In id order, so concurrent batches on PostgreSQL lock rows in one order.
        let rows = bind_all(
            sqlx::query_as::<_, Row>(&format!(
                "SELECT j.id, j.lease_id, j.state, j.lease_runner_id, j.attempt, j.cancel_requested, j.started_at, j.workspace_id,
                        rt.owner_member_id, w.name AS workspace_name, j.runtime_id, j.submitter_id
                 FROM jobs j JOIN runners r ON r.id = j.lease_runner_id JOIN runtimes rt ON rt.id = r.runtime_id
                             JOIN workspaces w ON w.id = j.workspace_id
                 WHERE j.lease_id IN ({}) ORDER BY j.id {}",
                placeholders(1, leases.len()),
                self.dialect.lock_job_row
            )),
            &leases,
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut held: HashMap<String, Row> =
            rows.into_iter().map(|r| (r.lease_id.clone(), r)).collect();

        let mut finishes: Vec<Finish> = Vec::new();
        // Terminal states decided in this batch, for a repeat within it.
        let mut decided: HashMap<&str, JobState> = HashMap::new();
        let mut out = Vec::with_capacity(reqs.len());
        for req in reqs {
            let Some(row) = held
                .get(req.lease.as_str())
                .filter(|r| r.lease_runner_id.as_deref() == Some(req.runner.as_str()))
            else {
                out.push(Err(Error::lease_lost()));
                continue;
            };
            let current = JobState::parse(&row.state)
                .ok_or_else(|| Error::Corrupt(format!("job state {}", row.state)))?;
            let repeat = decided
                .get(req.lease.as_str())
                .copied()
                .or(current.is_terminal().then_some(current));
            if let Some(state) = repeat {
                out.push(Ok(Completion {
                    job_id: JobId::from_db(row.id.clone()),
                    state,
                    repeated: true,
                }));
                continue;
            }
            let done = &req.done;
            let state = match done.outcome {
                _ if row.cancel_requested != 0 && done.outcome != Outcome::Succeeded => {
                    JobState::Cancelled
                }
                Outcome::Succeeded => JobState::Succeeded,
                Outcome::Failed => JobState::Failed,
                Outcome::Cancelled => JobState::Cancelled,
                Outcome::TimedOut => JobState::TimedOut,
            };
            let (payer, charged) = match &row.owner_member_id {
                Some(member) => (format!("user:{member}"), 0i64),
                None => (format!("ws:{}", row.workspace_name), 1i64),
            };
            // PostgreSQL text cannot hold NUL; neither backend stores it.
            let error = done.error.as_deref().map(|e| {
                e.chars()
                    .take(2000)
                    .map(|c| if c == '\0' { '\u{fffd}' } else { c })
                    .collect::<String>()
            });
            decided.insert(req.lease.as_str(), state);
            finishes.push(Finish {
                job: row.id.clone(),
                state,
                exit_code: done.exit_code.map(i64::from),
                error,
                runner: req.runner.to_string(),
                payer,
                charged,
                runner_ms: (req.now - row.started_at.unwrap_or(req.now)).max(0),
                attempt: row.attempt,
                workspace_id: row.workspace_id.clone(),
                month: Month::of(req.now).0,
                runtime_id: row.runtime_id.clone(),
                submitter_id: row.submitter_id.clone(),
            });
            out.push(Ok(Completion {
                job_id: JobId::from_db(row.id.clone()),
                state,
                repeated: false,
            }));
        }
        held.clear();

        if !finishes.is_empty() {
            // Usage adds to the workspace's month by trigger (migration 0009).
            let n = finishes.len();
            let update = format!(
                "UPDATE jobs SET state = v.column2, exit_code = v.column3, error = v.column4, ran_by = v.column5,
                     ran_by_owner = v.column6, finished_at = $1, lease_expires_at = NULL
                 FROM (VALUES {}) AS v WHERE jobs.id = v.column1",
                value_rows(2, n, 6, "")
            );
            let usage = |first: usize| {
                format!(
                    "INSERT INTO usage (job_id, attempt, workspace_id, payer, charged, runner_ms,
                         month, runtime_id, runner_id, submitter_id, created_at)
                     VALUES {} ON CONFLICT (job_id, attempt) DO NOTHING",
                    value_rows(first, n, USAGE_WIDTH, ", $1")
                )
            };
            match &mut tx {
                Writer::SoleConnection(conn) => {
                    // One command to the connection's thread, one transaction.
                    let sql = format!("BEGIN IMMEDIATE; {update}; {}; COMMIT", usage(2 + 6 * n));
                    let q = bind_usage(
                        bind_updates(sqlx::query(&sql).bind(now), &finishes),
                        &finishes,
                    );
                    if let Err(e) = q.execute(&mut **conn).await {
                        // Never hand back the writer inside an open transaction.
                        if sqlx::query("ROLLBACK").execute(&mut **conn).await.is_err() {
                            conn.close_on_drop();
                        }
                        return Err(BatchError::from_write(e));
                    }
                }
                Writer::Transaction(t) => {
                    bind_updates(sqlx::query(&update).bind(now), &finishes)
                        .execute(&mut **t)
                        .await?;
                    let usage = usage(2);
                    bind_usage(sqlx::query(&usage).bind(now), &finishes)
                        .execute(&mut **t)
                        .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(out)
    }
}
