//! Submit: queueing a batch of jobs, within budget, with their idempotency keys.

mod decide;

use decide::{Asked, Decided, Wrote, assemble, decide};
use drover_domain::submit::Reads;

use crate::store::error::Kind;
use sqlx::{FromRow, Row};

use super::idempotency::{self, IdempotencyKey};
use super::job_row::{JOB_COLUMNS, JobRow};
use super::model::Job;
use super::preview;
use super::{
    Member, Placement, Store, bind_all, on_unique, only_result, placeholders, sqlite_writer,
    to_json,
};
use crate::billing::Month;
use crate::ids::JobId;
use crate::store::batch::BatchError;
use crate::store::error::{Error, Result};
use drover_domain::job::NewJob;
use std::sync::Arc;

use crate::store::backend::OnEngine;
use crate::store::backend::sqlite::SqliteEngine;

/// One submit call, for a batch.
#[derive(Debug, Clone)]
pub struct SubmitRequest {
    pub member: Member,
    pub job: NewJob,
    pub placement: Placement,
    pub now: i64,
    /// Its `Idempotency-Key`, if it sent one.
    pub key: Option<IdempotencyKey>,
}

/// What a submit did.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub job: Job,
    /// True when the `Idempotency-Key` named a job submitted before: this
    /// is that job, as it is now; nothing was queued.
    pub replayed: bool,
}

impl Store {
    /// Queues a job, or with a `key` seen before, answers the job it named.
    /// Concurrent submits are written together (see `batch`).
    pub async fn submit_job(
        &self,
        member: &Member,
        job: &NewJob,
        placement: &Placement,
        key: Option<IdempotencyKey>,
        now: i64,
    ) -> Result<Submitted> {
        let req = SubmitRequest {
            member: member.clone(),
            job: job.clone(),
            placement: placement.clone(),
            now,
            key,
        };
        match &self.batches {
            Some(b) => b.submit.call(req).await,
            None => only_result(self.submit_batch(&[req]).await?),
        }
    }

    /// Queues each request's job (those within budget), in one transaction,
    /// with the idempotency keys they came with: on SQLite's batch writer
    /// (see `sqlite_writer`), on PostgreSQL in a transaction.
    pub(super) async fn submit_batch(
        &self,
        reqs: &[SubmitRequest],
    ) -> Result<Vec<Result<Submitted>>, BatchError> {
        let now = reqs.iter().map(|r| r.now).max().unwrap_or_default();
        // Each request's job id and sealed env, before anything is written.
        let ids: Vec<JobId> = reqs.iter().map(|_| JobId::generate()).collect();
        let sealed = reqs
            .iter()
            .zip(&ids)
            .map(|(r, id)| self.seal_env(id.as_str(), &r.job.env))
            .collect::<Result<Vec<_>>>()
            .map_err(BatchError::BeforeWrite)?;
        let batch = SubmitBatch {
            reqs,
            ids: &ids,
            sealed,
            now,
        };
        let (decided, wrote) = self.engine.run(self, batch).await?;
        Ok(assemble(decided, wrote, &ids))
    }

    /// The reads, decisions and writes of a submit batch in a transaction
    /// (PostgreSQL: its locks keep replicas apart).
    async fn submit_in_transaction(
        &self,
        reqs: &[SubmitRequest],
        ids: &[JobId],
        sealed: &[Option<String>],
        now: i64,
    ) -> Result<(Decided, Wrote), BatchError> {
        let mut conn = self.engine.hot(self).await?;
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        let asked = Asked::of(reqs);
        let mut reads = Reads {
            stored: idempotency::find(&mut tx, &asked.keyed, now).await?,
            ..Reads::default()
        };
        if !asked.paying.is_empty() {
            let rows: Vec<(String, Option<i64>, i64)> = bind_all(
                sqlx::query_as(&budgets_sql(asked.paying.len())),
                &asked.paying,
            )
            .bind(Month::of(now).0)
            .fetch_all(&mut *tx)
            .await?;
            reads.budgets.extend(
                rows.into_iter()
                    .map(|(id, budget, spent)| (id, (budget, spent))),
            );
        }
        if !asked.pinned.is_empty() {
            let sql = live_runners_sql(self.dialect.lock_for_update, asked.pinned.len());
            let rows: Vec<(String,)> = bind_all(sqlx::query_as(&sql), &asked.pinned)
                .fetch_all(&mut *tx)
                .await?;
            reads.live.extend(rows.into_iter().map(|(id,)| id));
        }
        let decided = decide(reqs, &reads);
        let mut wrote = Wrote::default();
        if !decided.queued.is_empty() {
            let keys = keys_of(reqs, ids, &decided.queued);
            if !keys.is_empty() {
                sqlx::query(&idempotency::purge_sql(1))
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            let values: Vec<JobValues> = decided
                .queued
                .iter()
                .map(|&i| JobValues::of(&reqs[i], &ids[i], &sealed[i]))
                .collect();
            let sql = insert_jobs_sql(values.len());
            let mut q = sqlx::query(&sql);
            for v in &values {
                q = q
                    .bind(v.id)
                    .bind(v.workspace)
                    .bind(v.submitter)
                    .bind(v.runtime_ref)
                    .bind(v.runtime)
                    .bind(v.pinned)
                    .bind(v.priority)
                    .bind(v.requires.as_str())
                    .bind(v.spec.as_str())
                    .bind(v.summary.as_deref())
                    .bind(v.max_attempts)
                    .bind(v.created_at)
                    .bind(v.sealed);
            }
            for row in q.fetch_all(&mut *tx).await? {
                let id: String = row.try_get("id")?;
                wrote
                    .written
                    .insert(id, JobRow::from_row(&row).map_err(Error::from));
            }
            if !keys.is_empty() {
                // Another replica's batch wrote the same key just now:
                // nothing is written here; alone, the request hears to
                // retry; in a batch, its retry finds the job.
                let insert_keys = idempotency::insert_sql(1, keys.len());
                idempotency::bind(sqlx::query(&insert_keys), &keys)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| match on_unique(e, idempotency::in_flight) {
                        // Retryable (503): the retry is answered with the
                        // job the other request wrote.
                        Error::Refused(r) => Error::refused(Kind::Overloaded, r.message),
                        other => other,
                    })?;
            }
        }
        let named = replayed_jobs(&decided);
        if !named.is_empty() {
            // A failed statement aborts the transaction (its COMMIT would
            // quietly roll back what was inserted): the batch fails whole.
            let rows = bind_all(
                sqlx::query_as::<_, JobRow>(&replays_sql(named.len())),
                &named,
            )
            .fetch_all(&mut *tx)
            .await?;
            wrote
                .named
                .extend(rows.into_iter().map(|r| (r.id.clone(), Ok(r))));
        }
        tx.commit().await.map_err(BatchError::from_write)?;
        conn.done();
        Ok((decided, wrote))
    }
}

/// A submit batch on SQLite's writer: reads, decisions and writes in one
/// `BEGIN IMMEDIATE` transaction, on the connection's thread.
fn submit_on_sqlite(
    conn: &mut rusqlite::Connection,
    reqs: &[SubmitRequest],
    ids: &[JobId],
    sealed: &[Option<String>],
    now: i64,
) -> Result<(Decided, Wrote), BatchError> {
    use rusqlite::types::ToSql;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let asked = Asked::of(reqs);
    let mut reads = Reads::default();
    if !asked.keyed.is_empty() {
        let since = now - idempotency::KEY_TTL_MS;
        let mut args: Vec<&dyn ToSql> = vec![&since];
        args.extend(asked.keyed.iter().map(|(key, _)| key as &dyn ToSql));
        let rows = sqlite_writer::rows(
            &tx,
            &idempotency::find_sql(asked.keyed.len()),
            &args,
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )?;
        reads.stored = idempotency::found(rows, &asked.keyed);
    }
    if !asked.paying.is_empty() {
        let month = Month::of(now).0;
        let mut args: Vec<&dyn ToSql> = asked.paying.iter().map(|w| w as &dyn ToSql).collect();
        args.push(&month);
        let rows = sqlite_writer::rows(&tx, &budgets_sql(asked.paying.len()), &args, |row| {
            Ok((row.get::<_, String>(0)?, (row.get(1)?, row.get(2)?)))
        })?;
        reads.budgets.extend(rows);
    }
    if !asked.pinned.is_empty() {
        let args: Vec<&dyn ToSql> = asked.pinned.iter().map(|r| r as &dyn ToSql).collect();
        let sql = live_runners_sql("", asked.pinned.len());
        reads.live.extend(sqlite_writer::rows(
            &tx,
            &sql,
            &args,
            |row| Ok(row.get(0)?),
        )?);
    }
    let decided = decide(reqs, &reads);
    let mut wrote = Wrote::default();
    if !decided.queued.is_empty() {
        let keys = keys_of(reqs, ids, &decided.queued);
        if !keys.is_empty() {
            sqlite_writer::execute(&tx, &idempotency::purge_sql(1), &[&now])?;
        }
        let values: Vec<JobValues> = decided
            .queued
            .iter()
            .map(|&i| JobValues::of(&reqs[i], &ids[i], &sealed[i]))
            .collect();
        let mut args: Vec<&dyn ToSql> = Vec::with_capacity(JOB_VALUES * values.len());
        for v in &values {
            args.extend([
                &v.id as &dyn ToSql,
                &v.workspace,
                &v.submitter,
                &v.runtime_ref,
                &v.runtime,
                &v.pinned,
                &v.priority,
                &v.requires,
                &v.spec,
                &v.summary,
                &v.max_attempts,
                &v.created_at,
                &v.sealed,
            ]);
        }
        for (id, row) in sqlite_writer::rows(&tx, &insert_jobs_sql(values.len()), &args, |row| {
            Ok((row.get::<_, String>(0)?, JobRow::from_cols(row)))
        })? {
            wrote.written.insert(id, row);
        }
        if !keys.is_empty() {
            let mut args: Vec<&dyn ToSql> = Vec::with_capacity(5 * keys.len());
            for (member, key, job, now) in &keys {
                args.extend([
                    member as &dyn ToSql,
                    &key.key_hash,
                    &key.request_hash,
                    job,
                    now,
                ]);
            }
            sqlite_writer::execute(&tx, &idempotency::insert_sql(1, keys.len()), &args)?;
        }
    }
    let named = replayed_jobs(&decided);
    if !named.is_empty() {
        let args: Vec<&dyn ToSql> = named.iter().map(|id| id as &dyn ToSql).collect();
        let rows = sqlite_writer::rows(&tx, &replays_sql(named.len()), &args, |row| {
            JobRow::from_cols(row)
        })?;
        wrote
            .named
            .extend(rows.into_iter().map(|r| (r.id.clone(), Ok(r))));
    }
    tx.commit().map_err(sqlite_writer::commit_failed)?;
    Ok((decided, wrote))
}

/// Spent this month, per workspace: the month's stripes (migration 0012).
/// Parameters: the `n` workspaces, then the month.
fn budgets_sql(n: usize) -> String {
    format!(
        "SELECT w.id, w.budget_ms, CAST(COALESCE((SELECT SUM(s.spent_ms) FROM workspace_spend s
             WHERE s.workspace_id = w.id AND s.month = ${}), 0) AS BIGINT)
         FROM workspaces w WHERE w.id IN ({})",
        n + 1,
        placeholders(1, n)
    )
}

/// Which of `n` runners are live, locked with `lock` (in id order, as a
/// lease batch locks runners) so a revoke cannot slip in before the commit.
fn live_runners_sql(lock: &str, n: usize) -> String {
    format!(
        "SELECT id FROM runners WHERE id IN ({}) AND revoked_at IS NULL ORDER BY id {lock}",
        placeholders(1, n)
    )
}

/// Values per job row of [`insert_jobs_sql`].
const JOB_VALUES: usize = 13;

/// Inserts `n` queued jobs, returning [`JOB_COLUMNS`].
fn insert_jobs_sql(n: usize) -> String {
    format!(
        "INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, pinned_runner_id, priority,
                           requires, spec, summary, max_attempts, created_at, env_sealed, state)
         VALUES {} RETURNING {}",
        (0..n)
            .map(|k| format!("({}, 'queued')", placeholders(1 + JOB_VALUES * k, JOB_VALUES)))
            .collect::<Vec<_>>()
            .join(", "),
        JOB_COLUMNS.replace("j.", "")
    )
}

fn replays_sql(n: usize) -> String {
    format!(
        "SELECT {JOB_COLUMNS} FROM jobs j WHERE j.id IN ({})",
        placeholders(1, n)
    )
}

/// The values of one job row of [`insert_jobs_sql`].
struct JobValues<'a> {
    id: &'a str,
    workspace: &'a str,
    submitter: &'a str,
    runtime_ref: &'a str,
    runtime: &'a str,
    pinned: Option<&'a str>,
    priority: i64,
    requires: String,
    spec: String,
    /// What a list shows of a large spec (`store::preview`).
    summary: Option<String>,
    max_attempts: i64,
    created_at: i64,
    sealed: Option<&'a str>,
}

impl<'a> JobValues<'a> {
    fn of(r: &'a SubmitRequest, id: &'a JobId, sealed: &'a Option<String>) -> Self {
        let spec = to_json(&r.job.spec);
        Self {
            id: id.as_str(),
            workspace: r.member.workspace_id.as_str(),
            submitter: r.member.id.as_str(),
            runtime_ref: r.job.runtime_ref.as_str(),
            runtime: r.placement.runtime_id.as_str(),
            pinned: r.placement.pinned_runner.as_ref().map(|p| p.as_str()),
            priority: i64::from(r.job.priority),
            requires: to_json(&r.job.requires),
            summary: preview::summary(&spec),
            spec,
            max_attempts: i64::from(r.job.max_attempts),
            created_at: r.now,
            sealed: sealed.as_deref(),
        }
    }
}

/// The keys to store: (member, key, job, now) per queued request with one.
fn keys_of<'a>(
    reqs: &'a [SubmitRequest],
    ids: &'a [JobId],
    queued: &[usize],
) -> Vec<(&'a str, &'a IdempotencyKey, &'a str, i64)> {
    queued
        .iter()
        .filter_map(|&i| {
            let r = &reqs[i];
            Some((
                r.member.id.as_str(),
                r.key.as_ref()?,
                ids[i].as_str(),
                r.now,
            ))
        })
        .collect()
}

/// The jobs keys named before, once each, sorted.
fn replayed_jobs(decided: &Decided) -> Vec<&str> {
    let mut ids: Vec<&str> = decided.replays.iter().map(|(_, id)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// A submit batch, as each database runs it.
struct SubmitBatch<'a> {
    reqs: &'a [SubmitRequest],
    ids: &'a [JobId],
    sealed: Vec<Option<String>>,
    now: i64,
}

impl OnEngine for SubmitBatch<'_> {
    type Out = Result<(Decided, Wrote), BatchError>;

    async fn on_sqlite(self, store: &Store, engine: &Arc<SqliteEngine>) -> Self::Out {
        let (reqs, ids, sealed, now) =
            (self.reqs.to_vec(), self.ids.to_vec(), self.sealed, self.now);
        engine
            .on_writer(store, move |conn| {
                submit_on_sqlite(conn, &reqs, &ids, &sealed, now)
            })
            .await?
    }

    async fn on_postgres(self, store: &Store) -> Self::Out {
        store
            .submit_in_transaction(self.reqs, self.ids, &self.sealed, self.now)
            .await
    }
}
