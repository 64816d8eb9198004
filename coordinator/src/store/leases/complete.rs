//! Complete: finishing the jobs of a batch of leases, with provenance and usage.

use std::collections::HashMap;

use drover_domain::job::{AttemptResult, JobState, Outcome};
use rusqlite::types::ToSql;

use super::{CompleteRequest, Completion};
use crate::billing::Month;
use crate::ids::{JobId, RunnerId};
use crate::store::batch::BatchError;
use crate::store::error::{Error, Result};
use std::sync::Arc;

use crate::store::backend::OnEngine;
use crate::store::backend::sqlite::SqliteEngine;
use crate::store::{Store, bind_all, only_result, placeholders, sqlite_writer};

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

/// A runner's error text as stored: at most 2,000 characters, and no NUL
/// (PostgreSQL text cannot hold it; neither backend stores it).
fn stored_error(e: &str) -> String {
    e.chars()
        .take(2000)
        .map(|c| if c == '\0' { '\u{fffd}' } else { c })
        .collect()
}

/// The state an outcome asks for (a cancel requested meanwhile may still
/// turn it into `cancelled`).
fn outcome_state(outcome: Outcome) -> JobState {
    match outcome {
        Outcome::Succeeded => JobState::Succeeded,
        Outcome::Failed => JobState::Failed,
        Outcome::Cancelled => JobState::Cancelled,
        Outcome::TimedOut => JobState::TimedOut,
    }
}

/// Values per usage row.
const USAGE_WIDTH: usize = 10;

/// The complete's statement (`complete.sql`); `{rows}` is its VALUES rows.
const COMPLETE_STATEMENT: &str = include_str!("complete.sql");

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
        done: &AttemptResult,
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

    /// Completes each request's lease: on PostgreSQL in one statement, on
    /// SQLite on its batch writer (see `sqlite_writer`).
    pub(crate) async fn complete_batch(
        &self,
        reqs: &[CompleteRequest],
    ) -> Result<Vec<Result<Completion>>, BatchError> {
        self.engine.run(self, CompleteBatch(reqs)).await
    }

    /// As `complete_batch`, in one statement (one round trip, autocommit):
    /// the jobs still held by these leases are finished and their usage
    /// written, the rule for a cancel requested meanwhile applied in SQL on
    /// the row as it is when updated. Only leases it did not finish (a
    /// repeat, or lost) are looked at again.
    async fn complete_in_one_statement(
        &self,
        reqs: &[CompleteRequest],
    ) -> Result<Vec<Result<Completion>>, BatchError> {
        let batch = PgCompletes::new(reqs);
        let sql = batch.ctes("$1", 2) + FINAL_SELECT;
        let mut conn = self.engine.hot(self).await?;
        let rows = batch
            .bind(sqlx::query(&sql).bind(batch.now))
            .fetch_all(&mut *conn)
            .await
            .map_err(BatchError::from_write)?;
        conn.done();
        let mut ended = Vec::with_capacity(rows.len());
        for row in &rows {
            ended.push(Ended::read(row, [0, 1, 2, 3])?);
        }
        batch.answers(self, ended).await
    }
}

/// `complete.sql` without its last line (from `WITH`) for `n` completes:
/// its CTEs, now bound as `now` and the VALUES rows' parameters from
/// `$first`.
pub(super) fn complete_ctes(n: usize, now: &str, first: usize) -> String {
    let sql = COMPLETE_STATEMENT
        .strip_suffix('\n')
        .unwrap_or(COMPLETE_STATEMENT)
        .strip_suffix(FINAL_SELECT)
        .expect("complete.sql ends with its SELECT");
    let sql = &sql[sql.find("WITH ").expect("complete.sql has its WITH")..];
    sql.replace("$1", now)
        .replace("{rows}", &value_rows(first, n, 7, ""))
}

/// The statement's last line: what it finished (job, lease, state, runner).
const FINAL_SELECT: &str = "SELECT id, lease_id, state, runner_id FROM done";

/// A job a complete statement finished: (job, lease, state, runner).
pub(super) struct Ended(String, String, JobState, String);

impl Ended {
    /// From a row, its columns at `at` (job, lease, state, runner).
    pub(super) fn read(row: &sqlx::any::AnyRow, at: [usize; 4]) -> Result<Self, BatchError> {
        use crate::store::sqlite_writer::Cols as _;
        let text = |i| row.col::<String>(i).map_err(BatchError::Ambiguous);
        let state = text(at[2])?;
        let state = JobState::parse(&state)
            .ok_or_else(|| BatchError::Ambiguous(Error::Corrupt(format!("job state {state}"))))?;
        Ok(Self(text(at[0])?, text(at[1])?, state, text(at[3])?))
    }
}

/// A batch of completes as PostgreSQL writes it (`complete.sql`): the
/// first request for each lease is written; a repeat of it in the same
/// batch hears what the first one did.
pub(super) struct PgCompletes<'a> {
    reqs: &'a [CompleteRequest],
    first: HashMap<(&'a str, &'a str), usize>,
    /// The requests written, in order.
    written: Vec<usize>,
    errors: Vec<Option<String>>,
    /// The batch's now.
    pub(super) now: i64,
}

impl<'a> PgCompletes<'a> {
    pub(super) fn new(reqs: &'a [CompleteRequest]) -> Self {
        let mut first: HashMap<(&str, &str), usize> = HashMap::new();
        for (i, r) in reqs.iter().enumerate() {
            first
                .entry((r.lease.as_str(), r.runner.as_str()))
                .or_insert(i);
        }
        let mut written: Vec<usize> = first.values().copied().collect();
        written.sort_unstable();
        let errors = written
            .iter()
            .map(|&i| reqs[i].done.error.as_deref().map(stored_error))
            .collect();
        Self {
            reqs,
            first,
            written,
            errors,
            now: reqs.iter().map(|r| r.now).max().unwrap_or_default(),
        }
    }

    /// Is request `i` the one written for its lease (not a repeat)?
    pub(super) fn is_first(&self, i: usize) -> bool {
        let r = &self.reqs[i];
        self.first[&(r.lease.as_str(), r.runner.as_str())] == i
    }

    /// The statement's CTEs for this batch (see `complete_ctes`).
    pub(super) fn ctes(&self, now: &str, first: usize) -> String {
        complete_ctes(self.written.len(), now, first)
    }

    /// Binds the VALUES rows (`ctes`' parameters from `first`), in order.
    pub(super) fn bind<'q>(&'q self, mut q: AnyQuery<'q>) -> AnyQuery<'q> {
        for (&i, error) in self.written.iter().zip(&self.errors) {
            let r = &self.reqs[i];
            q = q
                .bind(r.lease.as_str())
                .bind(r.runner.as_str())
                .bind(outcome_state(r.done.outcome).as_str())
                .bind(r.done.exit_code.map(i64::from))
                .bind(error.as_deref())
                .bind(r.now)
                .bind(Month::of(r.now).0);
        }
        q
    }

    /// Each request's answer, given what the statement finished. Leases it
    /// did not finish (a repeat, or lost) are read back.
    pub(super) async fn answers(
        &self,
        store: &Store,
        ended: Vec<Ended>,
    ) -> Result<Vec<Result<Completion>>, BatchError> {
        let reqs = self.reqs;
        // By lease: the job, the state it ended in, the runner that held it.
        let ended: HashMap<String, (String, JobState, String)> = ended
            .into_iter()
            .map(|Ended(job, lease, state, runner)| (lease, (job, state, runner)))
            .collect();
        // Not finished here: already finished by this lease (a repeat), or lost.
        let mut others: Vec<&str> = self
            .written
            .iter()
            .map(|&i| reqs[i].lease.as_str())
            .filter(|l| !ended.contains_key(*l))
            .collect();
        others.sort_unstable();
        type Earlier = HashMap<String, (String, String, Option<String>)>;
        let earlier: Option<Earlier> = if others.is_empty() {
            Some(HashMap::new())
        } else {
            bind_all(
                sqlx::query_as::<_, (String, String, String, Option<String>)>(&format!(
                    "SELECT lease_id, id, state, lease_runner_id FROM jobs WHERE lease_id IN ({})",
                    placeholders(1, others.len())
                )),
                &others,
            )
            .fetch_all(&store.reader)
            .await
            .map(|rows| {
                rows.into_iter()
                    .map(|(l, id, st, by)| (l, (id, st, by)))
                    .collect()
            })
            // Those requests alone fail (the others were written): a retry is
            // safe, a repeated complete changes nothing.
            .inspect_err(
                |e| tracing::error!(error = %e, "reading back leases a complete did not finish"),
            )
            .ok()
        };
        Ok(reqs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if let Some((job, state, runner)) = ended.get(r.lease.as_str()) {
                    return match runner == r.runner.as_str() {
                        true => Ok(Completion {
                            job_id: JobId::from_db(job.clone()),
                            state: *state,
                            repeated: !self.is_first(i),
                        }),
                        false => Err(Error::lease_lost()),
                    };
                }
                let earlier = earlier.as_ref().ok_or(Error::Internal(
                    "could not read back a lease this complete did not finish; retry",
                ))?;
                match earlier.get(r.lease.as_str()) {
                    Some((job, state, by)) if by.as_deref() == Some(r.runner.as_str()) => {
                        match JobState::parse(state).filter(|s| s.is_terminal()) {
                            Some(state) => Ok(Completion {
                                job_id: JobId::from_db(job.clone()),
                                state,
                                repeated: true,
                            }),
                            None => Err(Error::lease_lost()),
                        }
                    }
                    _ => Err(Error::lease_lost()),
                }
            })
            .collect())
    }
}

/// A query on sqlx's `Any` driver, its parameters being bound.
pub(super) type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// A complete batch on SQLite's writer: reads, then the writes, in one
/// `BEGIN IMMEDIATE` transaction on the connection's thread (the reference
/// for `complete_in_one_statement`).
pub(super) fn complete_on_sqlite(
    conn: &mut rusqlite::Connection,
    reqs: &[CompleteRequest],
) -> Result<Vec<Result<Completion>>, BatchError> {
    /// A job held by one of the batch's leases, as read.
    struct Held {
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
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let now = reqs.iter().map(|r| r.now).max().unwrap_or_default();
    let mut leases: Vec<&str> = reqs.iter().map(|r| r.lease.as_str()).collect();
    leases.sort_unstable();
    leases.dedup();
    let args: Vec<&dyn ToSql> = leases.iter().map(|l| l as &dyn ToSql).collect();
    let rows = sqlite_writer::rows(
        &tx,
        &format!(
            "SELECT j.id, j.lease_id, j.state, j.lease_runner_id, j.attempt, j.cancel_requested, j.started_at, j.workspace_id,
                    rt.owner_member_id, w.name, j.runtime_id, j.submitter_id
             FROM jobs j JOIN runners r ON r.id = j.lease_runner_id JOIN runtimes rt ON rt.id = r.runtime_id
                         JOIN workspaces w ON w.id = j.workspace_id
             WHERE j.lease_id IN ({})",
            placeholders(1, leases.len()),
        ),
        &args,
        |row| {
            Ok(Held {
                id: row.get(0)?,
                lease_id: row.get(1)?,
                state: row.get(2)?,
                lease_runner_id: row.get(3)?,
                attempt: row.get(4)?,
                cancel_requested: row.get(5)?,
                started_at: row.get(6)?,
                workspace_id: row.get(7)?,
                owner_member_id: row.get(8)?,
                workspace_name: row.get(9)?,
                runtime_id: row.get(10)?,
                submitter_id: row.get(11)?,
            })
        },
    )?;
    let held: HashMap<&str, &Held> = rows.iter().map(|r| (r.lease_id.as_str(), r)).collect();

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
            outcome => outcome_state(outcome),
        };
        let (payer, charged) = match &row.owner_member_id {
            Some(member) => (format!("user:{member}"), 0i64),
            None => (format!("ws:{}", row.workspace_name), 1i64),
        };
        decided.insert(req.lease.as_str(), state);
        finishes.push(Finish {
            job: row.id.clone(),
            state,
            exit_code: done.exit_code.map(i64::from),
            error: done.error.as_deref().map(stored_error),
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

    if !finishes.is_empty() {
        let n = finishes.len();
        let states: Vec<&str> = finishes.iter().map(|f| f.state.as_str()).collect();
        let mut args: Vec<&dyn ToSql> = vec![&now];
        for (f, state) in finishes.iter().zip(&states) {
            args.extend([
                &f.job as &dyn ToSql,
                state,
                &f.exit_code,
                &f.error,
                &f.runner,
                &f.payer,
            ]);
        }
        sqlite_writer::execute(
            &tx,
            &format!(
                "UPDATE jobs SET state = v.column2, exit_code = v.column3, error = v.column4, ran_by = v.column5,
                     ran_by_owner = v.column6, finished_at = $1, lease_expires_at = NULL
                 FROM (VALUES {}) AS v WHERE jobs.id = v.column1",
                value_rows(2, n, 6, "")
            ),
            &args,
        )?;
        // Usage adds to the workspace's month by trigger (migration 0012).
        let mut args: Vec<&dyn ToSql> = vec![&now];
        for f in &finishes {
            args.extend([
                &f.job as &dyn ToSql,
                &f.attempt,
                &f.workspace_id,
                &f.payer,
                &f.charged,
                &f.runner_ms,
                &f.month,
                &f.runtime_id,
                &f.runner,
                &f.submitter_id,
            ]);
        }
        sqlite_writer::execute(
            &tx,
            &format!(
                "INSERT INTO usage (job_id, attempt, workspace_id, payer, charged, runner_ms,
                     month, runtime_id, runner_id, submitter_id, created_at)
                 VALUES {} ON CONFLICT (job_id, attempt) DO NOTHING",
                value_rows(2, n, USAGE_WIDTH, ", $1")
            ),
            &args,
        )?;
    }
    tx.commit().map_err(sqlite_writer::commit_failed)?;
    Ok(out)
}

/// A complete batch, as each database runs it.
struct CompleteBatch<'a>(&'a [CompleteRequest]);

impl OnEngine for CompleteBatch<'_> {
    type Out = Result<Vec<Result<Completion>>, BatchError>;

    async fn on_sqlite(self, store: &Store, engine: &Arc<SqliteEngine>) -> Self::Out {
        let reqs = self.0.to_vec();
        engine
            .on_writer(store, move |conn| complete_on_sqlite(conn, &reqs))
            .await?
    }

    async fn on_postgres(self, store: &Store) -> Self::Out {
        store.complete_in_one_statement(self.0).await
    }
}
