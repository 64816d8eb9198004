//! The runner side of a job: lease, heartbeat, logs, complete, expiry.
//!
//! A lease batch goes in three stages: `read` (queries to typed rows), then
//! `plan` (which job each request gets: a pure function of what was read,
//! where the lease rules live), then one write here.
//!
//! Every function here runs in one write transaction, and SQLite has one
//! writer, so a queued job moves to `leased` for exactly one runner.
//! The `WHERE state = 'queued'` guard on the update keeps that true even if
//! two writers ever raced (it is the only way a job leaves the queue).

mod complete;
mod complete_next;
mod expiry;
mod read;
mod running;

use std::collections::HashMap;

use super::sqlite_writer::Cols;
use crate::store::error::Kind;
use drover_domain::job::{AttemptResult, JobState};

use super::model::{Lease, LeasedJob};
use super::{Dialect, Store, json_list, only_result, sqlite_writer, text_array};
use crate::ids::{JobId, LeaseId, RunnerId, RuntimeId};
use crate::store::batch::BatchError;
use crate::store::error::{Error, Result};
use drover_domain::job::JobSpec;
use std::sync::Arc;

use crate::store::backend::OnEngine;
use crate::store::backend::sqlite::SqliteEngine;
use crate::wake::Wake;
pub(in crate::store) use complete_next::complete_next_for_no_one;
pub use complete_next::{CompleteNextRequest, CompletedNext};
pub use drover_domain::lease::LeaseRequest;
use drover_domain::lease::plan::{self, Pick, Planner};
pub(crate) use expiry::release_leases_of_runner;

#[derive(Debug)]
pub enum LeaseAttempt {
    Leased {
        lease: Box<Lease>,
        /// Another job is queued behind this one: wake someone for it too.
        next: Option<Wake>,
    },
    Empty,
    /// The runner was revoked.
    Revoked,
}

/// What a complete did.
#[derive(Debug)]
pub struct Completion {
    pub job_id: JobId,
    pub state: JobState,
    /// True when this lease had already completed the job; nothing changed.
    pub repeated: bool,
}

/// One complete call, for a batch.
#[derive(Debug, Clone)]
pub struct CompleteRequest {
    pub runner: RunnerId,
    pub lease: String,
    pub done: AttemptResult,
    pub now: i64,
}

fn lease_limit(slots: i64, held: i64) -> Error {
    Error::refused(
        Kind::LeaseLimit,
        format!(
            "this runner already holds {held} lease(s) or asks for more, and has {slots} slot(s); \
             complete a job first (a runner declares its slots in hello)"
        ),
    )
}

impl Store {
    /// Leases the next job for `runner`: jobs pinned to it first, then its
    /// pool's queue, each by priority then FIFO (re-queued jobs first),
    /// skipping jobs whose requirements the runner does not meet.
    /// Concurrent calls are written together (see `batch`).
    pub async fn try_lease(
        &self,
        runner: &RunnerId,
        runtime: &RuntimeId,
        now: i64,
        ttl_ms: u64,
    ) -> Result<LeaseAttempt> {
        let req = LeaseRequest {
            runner: runner.clone(),
            runtime: runtime.clone(),
            now,
            ttl_ms,
        };
        match &self.batches {
            Some(b) => b.lease.call(req).await,
            None => only_result(self.lease_batch(&[req]).await?),
        }
    }

    /// Leases a job for each request, in one transaction. Requests are
    /// served in order, so within a pool the earliest request gets the head
    /// of the queue it can run. The same runner may ask more than once (one
    /// request per slot).
    pub(crate) async fn lease_batch(
        &self,
        reqs: &[LeaseRequest],
    ) -> Result<Vec<Result<LeaseAttempt>>, BatchError> {
        let (now, ttl_ms) = now_and_ttl(reqs);
        let written = self
            .engine
            .run(self, LeaseBatch { reqs, now, ttl_ms })
            .await?;
        Ok(self.hand_out(written, now, ttl_ms).await)
    }

    /// Each request's answer from what its batch wrote: the leased jobs
    /// read (env opened into the lease), with whom to wake.
    async fn hand_out(&self, written: Written, now: i64, ttl_ms: u64) -> Vec<Result<LeaseAttempt>> {
        let Written {
            plan,
            chosen,
            mut taken,
        } = written;
        let mut wakes = plan.wakes;
        let mut out: Vec<Result<LeaseAttempt>> = plan
            .picks
            .iter()
            .map(|pick| match pick {
                Pick::Limited { slots, held } => Err(lease_limit(*slots, *held)),
                Pick::Revoked => Ok(LeaseAttempt::Revoked),
                Pick::Job(_) | Pick::Nothing => Ok(LeaseAttempt::Empty),
            })
            .collect();
        // Written: from here an error is that request's alone (failing the
        // batch would retry it, and the job is already leased).
        let mut unreadable: Vec<(String, LeaseId)> = Vec::new();
        for (i, job_id, lease_id) in chosen {
            let Some(row) = taken.remove(lease_id.as_str()) else {
                continue;
            };
            let decoded = row.and_then(|t| {
                // The one place env is opened: into this lease.
                let env = self.open_env(job_id.as_str(), &t.spec, t.sealed.as_deref())?;
                Ok((t.attempt, serde_json::from_str::<JobSpec>(&t.spec)?, env))
            });
            let (attempt, spec, env) = match decoded {
                Ok(d) => d,
                Err(e) => {
                    // Leased again, it would fail again, every TTL: it
                    // fails now instead, and the runner asks again.
                    tracing::error!(job = %job_id, error = %e, "a leased job cannot be read; failing it");
                    unreadable.push((job_id, lease_id));
                    out[i] = Ok(LeaseAttempt::Empty);
                    continue;
                }
            };
            out[i] = Ok(LeaseAttempt::Leased {
                lease: Box::new(Lease {
                    id: lease_id,
                    ttl_ms,
                    job: LeasedJob {
                        id: JobId::from_db(job_id),
                        attempt: attempt as u32,
                        spec,
                        env,
                    },
                }),
                next: wakes[i].take(),
            });
        }
        for (job, lease) in unreadable {
            if let Err(e) = self.fail_unreadable(&job, &lease, now).await {
                tracing::error!(job = %job, error = %e, "could not fail an unreadable job");
            }
        }
        out
    }

    /// A lease batch on PostgreSQL: reads, plan and write in one statement
    /// (`lease.sql`), one round trip in a transaction of its own. It plans
    /// by the rules `plan` states; the runners asking are locked first,
    /// which keeps replicas apart (unless nothing is queued for them: then
    /// it only reads). A batch the statement hands back (pinned jobs, jobs
    /// that require capabilities, a race with another batch) goes to
    /// `drover_lease` (migration 0022), which plans every case.
    async fn lease_in_one_call(
        &self,
        reqs: &[LeaseRequest],
        now: i64,
        ttl_ms: u64,
    ) -> Result<Written, BatchError> {
        let runners: Vec<&str> = reqs.iter().map(|r| r.runner.as_str()).collect();
        let leases: Vec<LeaseId> = reqs.iter().map(|_| LeaseId::generate()).collect();
        let mut ids = runners.clone();
        ids.sort_unstable();
        ids.dedup();
        // The `Any` driver binds no arrays: they go as array literals.
        let (runners, leases_bound, ids) = (
            text_array(runners.iter().copied()),
            text_array(leases.iter().map(LeaseId::as_str)),
            text_array(ids),
        );
        let query = |sql: &'static str| {
            sqlx::query(sql)
                .bind(runners.clone())
                .bind(leases_bound.clone())
                .bind(ids.clone())
                .bind(now)
                .bind(ttl_ms as i64)
        };
        let mut conn = self.engine.hot(self).await?;
        let mut rows = query(LEASE_STATEMENT)
            .fetch_all(&mut *conn)
            .await
            .map_err(BatchError::from_write)?;
        if rows
            .first()
            .and_then(|r| r.col::<String>(0).ok())
            .as_deref()
            == Some("again")
        {
            rows = query(
                "SELECT * FROM drover_lease(CAST($1 AS TEXT[]), CAST($2 AS TEXT[]), CAST($3 AS TEXT[]), $4, $5)",
            )
            .fetch_all(&mut *conn)
            .await
            .map_err(BatchError::from_write)?;
        }
        conn.done();
        one_call_written(&rows, reqs, leases)
    }
}

/// What the lease statement or `drover_lease` wrote, from its rows (one per
/// request, in order; `leases` the new lease ids bound for them).
fn one_call_written(
    rows: &[sqlx::any::AnyRow],
    reqs: &[LeaseRequest],
    leases: Vec<LeaseId>,
) -> Result<Written, BatchError> {
    // Written: a row that cannot be read is its request's error alone.
    if rows.len() != reqs.len() {
        return Err(BatchError::Ambiguous(Error::Corrupt(format!(
            "drover_lease answered {} rows for {} requests",
            rows.len(),
            reqs.len()
        ))));
    }
    let mut plan = plan::Plan::default();
    let mut chosen = Vec::new();
    let mut taken = HashMap::new();
    for ((i, row), lease) in rows.iter().enumerate().zip(leases) {
        let pick = one_call_pick(row).map_err(BatchError::Ambiguous)?;
        if let Pick::Job(job) = &pick {
            taken.insert(lease.as_str().to_owned(), taken_row(row, 2));
            chosen.push((i, job.clone(), lease));
        }
        plan.picks.push(pick);
        plan.wakes.push(one_call_wake(row, &reqs[i]));
    }
    Ok(Written {
        plan,
        chosen,
        taken,
    })
}

/// The usual lease batch on PostgreSQL, as one statement.
pub(in crate::store) const LEASE_STATEMENT: &str = include_str!("lease.sql");

/// What a lease batch decided and wrote.
struct Written {
    plan: plan::Plan,
    /// Per job picked: (request, job, its new lease).
    chosen: Vec<(usize, String, LeaseId)>,
    /// By lease id: the job the database moved under it, as it returned it.
    taken: HashMap<String, Result<Taken>>,
}

/// A leased job's row, as the lease's write returned it.
struct Taken {
    attempt: i64,
    spec: String,
    sealed: Option<String>,
}

/// A leased job's row, its columns from `first`: attempt, spec, sealed env.
fn taken_row(row: &impl Cols, first: usize) -> Result<Taken> {
    Ok(Taken {
        attempt: row.col(first)?,
        spec: row.col(first + 1)?,
        sealed: row.col(first + 2)?,
    })
}

/// A request's pick, from its row of the lease statement or `drover_lease`.
fn one_call_pick(row: &sqlx::any::AnyRow) -> Result<Pick> {
    let pick: String = row.col(0)?;
    Ok(match pick.as_str() {
        "job" => Pick::Job(row.col(1)?),
        "nothing" => Pick::Nothing,
        "revoked" => Pick::Revoked,
        "limited" => Pick::Limited {
            slots: row.col(5)?,
            held: row.col(6)?,
        },
        other => return Err(Error::Corrupt(format!("drover_lease pick {other}"))),
    })
}

/// Whom a request's handler wakes, from its row of `drover_lease`. A wake
/// that cannot be read is dropped (the waiters look again in time).
fn one_call_wake(row: &sqlx::any::AnyRow, req: &LeaseRequest) -> Option<Wake> {
    read_wake(row, req).unwrap_or_else(|e| {
        tracing::error!(error = %e, "a lease's wake cannot be read");
        None
    })
}

fn read_wake(row: &sqlx::any::AnyRow, req: &LeaseRequest) -> Result<Option<Wake>> {
    let wake = row.col::<Option<String>>(8)?;
    let Some(wake) = wake.as_deref() else {
        return Ok(None);
    };
    let runtime = RuntimeId::from_db(row.col(7)?);
    Ok(match wake {
        "runner" => Some(Wake::Runner {
            runtime,
            runner: req.runner.clone(),
        }),
        "pool" => Some(Wake::Pool {
            runtime,
            requires: json_list(&row.col::<String>(9)?)?,
        }),
        _ => None,
    })
}

/// The jobs the plan picked, each with a new lease id.
fn choose(plan: &plan::Plan) -> Vec<(usize, String, LeaseId)> {
    let mut chosen = Vec::new();
    for (i, pick) in plan.picks.iter().enumerate() {
        if let Pick::Job(job) = pick {
            chosen.push((i, job.clone(), LeaseId::generate()));
        }
    }
    chosen
}

/// A pool's first page, if the reads brought it (and its row limit), or
/// the limit to read it with.
fn first_page(
    heads: &mut Vec<(String, i64, Vec<plan::QueuedJob>)>,
    runtime: &str,
    waiting: usize,
) -> (i64, Option<Vec<plan::QueuedJob>>) {
    match heads.iter().position(|(rt, ..)| rt == runtime) {
        Some(k) => {
            let (_, limit, page) = heads.swap_remove(k);
            (limit, Some(page))
        }
        None => ((2 * waiting).max(2) as i64, None),
    }
}

/// Takes `n` picked jobs in one statement; parameters `$1` now, `$2` the
/// TTL, then (job, lease, runner) per job. `WHERE state = 'queued'` is the
/// only way out of the queue (with the rows locked, or the one writer, it
/// always matches).
fn take_sql(d: &Dialect, n: usize) -> String {
    let rows = (0..n)
        .map(|k| format!("(${}, ${}, ${})", 3 + 3 * k, 4 + 3 * k, 5 + 3 * k))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "UPDATE jobs SET state = 'leased', attempt = attempt + 1, lease_id = v.column2, lease_runner_id = v.column3,
             lease_expires_at = {} + $2, started_at = $1
         FROM (VALUES {rows}) AS v
         WHERE jobs.id = v.column1 AND jobs.state = 'queued'
         RETURNING lease_id, attempt, spec, env_sealed",
        d.now("$1")
    )
}

/// A lease batch's time and TTL: its latest request's, its longest.
fn now_and_ttl(reqs: &[LeaseRequest]) -> (i64, u64) {
    let now = reqs.iter().map(|r| r.now).max().unwrap_or_default();
    let ttl_ms = reqs.iter().map(|r| r.ttl_ms).max().unwrap_or_default();
    (now, ttl_ms)
}

/// A lease batch on SQLite's writer (see `sqlite_writer`): reads, plan and
/// write in one `BEGIN IMMEDIATE` transaction, on the connection's thread.
fn lease_on_sqlite(
    conn: &mut rusqlite::Connection,
    d: &Dialect,
    reqs: &[LeaseRequest],
    now: i64,
    ttl_ms: u64,
) -> Result<Written, BatchError> {
    use rusqlite::types::ToSql;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let reads = read::lease_reads_sqlite(&tx, d, reqs)?;
    let mut planner = Planner::new(reqs, &reads.runners, &reads.pinned);
    let mut heads = reads.heads;
    for (runtime, waiting) in planner.pools() {
        let (mut limit, page) = first_page(&mut heads, runtime, waiting);
        let mut page = match page {
            Some(page) => page,
            None => read::queue_page_sqlite(&tx, runtime, limit, 0)?,
        };
        let mut offset = 0;
        while planner.offer(runtime, &page, page.len() as i64 >= limit) {
            offset += limit;
            limit = d.lease_page;
            page = read::queue_page_sqlite(&tx, runtime, limit, offset)?;
        }
    }
    let plan = planner.finish();
    let chosen = choose(&plan);
    let mut taken = HashMap::with_capacity(chosen.len());
    if !chosen.is_empty() {
        let ttl = ttl_ms as i64;
        let values: Vec<[&str; 3]> = chosen
            .iter()
            .map(|(i, job, lease)| [job.as_str(), lease.as_str(), reqs[*i].runner.as_str()])
            .collect();
        let mut args: Vec<&dyn ToSql> = vec![&now, &ttl];
        args.extend(values.iter().flatten().map(|v| v as &dyn ToSql));
        for (lease, row) in sqlite_writer::rows(&tx, &take_sql(d, chosen.len()), &args, |row| {
            Ok((row.col::<String>(0)?, taken_row(row, 1)))
        })? {
            taken.insert(lease, row);
        }
    }
    tx.commit().map_err(sqlite_writer::commit_failed)?;
    Ok(Written {
        plan,
        chosen,
        taken,
    })
}

/// A lease batch, as each database runs it.
struct LeaseBatch<'a> {
    reqs: &'a [LeaseRequest],
    now: i64,
    ttl_ms: u64,
}

impl OnEngine for LeaseBatch<'_> {
    type Out = Result<Written, BatchError>;

    async fn on_sqlite(self, store: &Store, engine: &Arc<SqliteEngine>) -> Self::Out {
        let (d, reqs, now, ttl_ms) = (store.dialect, self.reqs.to_vec(), self.now, self.ttl_ms);
        engine
            .on_writer(store, move |conn| {
                lease_on_sqlite(conn, d, &reqs, now, ttl_ms)
            })
            .await?
    }

    async fn on_postgres(self, store: &Store) -> Self::Out {
        store
            .lease_in_one_call(self.reqs, self.now, self.ttl_ms)
            .await
    }
}
