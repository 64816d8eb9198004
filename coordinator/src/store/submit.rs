//! Submit: queueing a batch of jobs, within budget, with their idempotency keys.

use std::collections::HashMap;

use drover_wire::ErrorCode;
use sqlx::{FromRow, Row};

use super::idempotency::{self, IdempotencyKey};
use super::jobs::{JOB_COLUMNS, JobRow, NewJob};
use super::model::Job;
use super::{
    Member, Placement, Store, Writer, bind_all, on_unique, only_result, placeholders, to_json,
};
use crate::batch::BatchError;
use crate::billing::Month;
use crate::error::{Error, Result};
use crate::ids::JobId;
use drover_wire::text::runner_minutes;

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

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Binds the rows of the jobs insert, eleven columns each.
fn bind_jobs<'q>(
    mut q: AnyQuery<'q>,
    reqs: &'q [SubmitRequest],
    queued: &'q [(usize, JobId)],
    sealed: &'q [Option<String>],
) -> AnyQuery<'q> {
    for ((i, id), sealed) in queued.iter().zip(sealed) {
        let r = &reqs[*i];
        q = q
            .bind(id.as_str())
            .bind(r.member.workspace_id.as_str())
            .bind(r.member.id.as_str())
            .bind(r.job.runtime_ref.as_str())
            .bind(r.placement.runtime_id.as_str())
            .bind(r.placement.pinned_runner.as_ref().map(|r| r.as_str()))
            .bind(i64::from(r.job.priority))
            .bind(to_json(&r.job.requires))
            .bind(to_json(&r.job.spec))
            .bind(i64::from(r.job.max_attempts))
            .bind(r.now)
            .bind(sealed.as_deref());
    }
    q
}

/// The same `Idempotency-Key` came with a different request.
fn key_reused() -> Error {
    Error::conflict(
        "this Idempotency-Key was used in the last 24 hours with a different request; \
         use a new key for a new job",
    )
}

/// `402 BUDGET_EXCEEDED`: the budget, what was spent, and when it resets.
fn budget_spent(budget_ms: i64, spent_ms: i64, now: i64) -> Error {
    let month = Month::of(now);
    Error::api(
        ErrorCode::BudgetExceeded,
        format!(
            "the workspace's budget for {month} is spent: {} of {} runner-minutes used; \
             it resets at {} 00:00 UTC (jobs on members' own runners are not limited)",
            runner_minutes(spent_ms.max(0) as u64),
            runner_minutes(budget_ms.max(0) as u64),
            month.next().first_day(),
        ),
    )
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
    /// with the idempotency keys they came with.
    pub(super) async fn submit_batch(
        &self,
        reqs: &[SubmitRequest],
    ) -> Result<Vec<Result<Submitted>>, BatchError> {
        let now = reqs.iter().map(|r| r.now).max().unwrap_or_default();
        // Reads, then one INSERT (or with keys, one transaction).
        let mut tx = self.batch_writer().await?;
        let keyed: Vec<(&str, &str)> = reqs
            .iter()
            .filter_map(|r| Some((r.key.as_ref()?.key_hash.as_str(), r.member.id.as_str())))
            .collect();
        let stored = idempotency::find(&mut tx, &keyed, now).await?;
        let mut paying: Vec<&str> = reqs
            .iter()
            .filter(|r| r.placement.workspace_owned)
            .map(|r| r.member.workspace_id.as_str())
            .collect();
        paying.sort_unstable();
        paying.dedup();
        let mut budgets: HashMap<String, (Option<i64>, i64)> = HashMap::new();
        if !paying.is_empty() {
            // Spent this month: the month's stripes (migration 0012).
            let rows: Vec<(String, Option<i64>, i64)> = bind_all(
                sqlx::query_as(&format!(
                    "SELECT w.id, w.budget_ms, CAST(COALESCE((SELECT SUM(s.spent_ms) FROM workspace_spend s
                         WHERE s.workspace_id = w.id AND s.month = ${}), 0) AS BIGINT)
                     FROM workspaces w WHERE w.id IN ({})",
                    paying.len() + 1,
                    placeholders(1, paying.len())
                )),
                &paying,
            )
            .bind(Month::of(now).0)
            .fetch_all(&mut *tx)
            .await?;
            budgets.extend(
                rows.into_iter()
                    .map(|(id, budget, spent)| (id, (budget, spent))),
            );
        }
        // Pinned runners still live, locked (in id order, as a lease batch
        // locks runners) so a revoke cannot slip in before the commit.
        let mut pinned: Vec<&str> = reqs
            .iter()
            .filter_map(|r| r.placement.pinned_runner.as_ref().map(|p| p.as_str()))
            .collect();
        pinned.sort_unstable();
        pinned.dedup();
        let mut live: std::collections::HashSet<String> = std::collections::HashSet::new();
        if !pinned.is_empty() {
            let ids: Vec<String> = bind_all(
                sqlx::query_as::<_, (String,)>(&format!(
                    "SELECT id FROM runners WHERE id IN ({}) AND revoked_at IS NULL ORDER BY id {}",
                    placeholders(1, pinned.len()),
                    self.dialect.lock_for_update
                )),
                &pinned,
            )
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
            live.extend(ids);
        }
        let mut out: Vec<Result<Submitted>> = Vec::with_capacity(reqs.len());
        let mut queued: Vec<(usize, JobId)> = Vec::new();
        // Requests whose key named a job: (request, job id).
        let mut replays: Vec<(usize, String)> = Vec::new();
        // Keys first seen in this batch: (member, key hash) → the request.
        let mut first_with: HashMap<(&str, &str), usize> = HashMap::new();
        // Requests repeating an earlier one of this batch: (request, earlier).
        let mut repeats: Vec<(usize, usize)> = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            if let Some(key) = &r.key {
                let id = (r.member.id.as_str(), key.key_hash.as_str());
                let earlier = stored
                    .get(&(id.0.to_owned(), id.1.to_owned()))
                    .map(|s| (s.request_hash.as_str(), Err(s.job_id.clone())))
                    .or_else(|| {
                        first_with.get(&id).map(|&j| {
                            let first = reqs[j].key.as_ref().expect("keyed");
                            (first.request_hash.as_str(), Ok(j))
                        })
                    });
                match earlier {
                    Some((hash, _)) if hash != key.request_hash => {
                        out.push(Err(key_reused()));
                        continue;
                    }
                    Some((_, Err(job))) => {
                        out.push(Err(Error::Internal("replayed below")));
                        replays.push((i, job));
                        continue;
                    }
                    Some((_, Ok(j))) => {
                        out.push(Err(Error::Internal("repeated below")));
                        repeats.push((i, j));
                        continue;
                    }
                    None => {
                        first_with.insert(id, i);
                    }
                }
            }
            if r.placement.workspace_owned
                && let Some(&(Some(budget), spent)) = budgets.get(r.member.workspace_id.as_str())
                && spent >= budget
            {
                out.push(Err(budget_spent(budget, spent, r.now)));
                continue;
            }
            if let Some(runner) = &r.placement.pinned_runner
                && !live.contains(runner.as_str())
            {
                out.push(Err(Error::not_found(format!("no runner {runner}"))));
                continue;
            }
            // Filled in below, once the row is written.
            out.push(Err(Error::Internal("the job was not written")));
            queued.push((i, JobId::generate()));
        }
        let mut written: HashMap<String, Result<JobRow>> = HashMap::new();
        if !queued.is_empty() {
            let keys: Vec<(&str, &IdempotencyKey, &str, i64)> = queued
                .iter()
                .filter_map(|(i, id)| {
                    let r = &reqs[*i];
                    Some((r.member.id.as_str(), r.key.as_ref()?, id.as_str(), r.now))
                })
                .collect();
            // Sealed before anything is written.
            let sealed = queued
                .iter()
                .map(|(i, id)| self.seal_env(id.as_str(), &reqs[*i].job.env))
                .collect::<Result<Vec<_>>>()
                .map_err(BatchError::BeforeWrite)?;
            const COLUMNS: usize = 12;
            // Parameters: `$1` now, then the jobs, then the keys.
            let insert_jobs = format!(
                "INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, pinned_runner_id, priority,
                                   requires, spec, max_attempts, created_at, env_sealed, state)
                 VALUES {} RETURNING {}",
                (0..queued.len())
                    .map(|k| format!("({}, 'queued')", placeholders(2 + COLUMNS * k, COLUMNS)))
                    .collect::<Vec<_>>()
                    .join(", "),
                JOB_COLUMNS.replace("j.", "")
            );
            let insert_keys = idempotency::insert_sql(2 + COLUMNS * queued.len(), keys.len());
            let rows = match &mut tx {
                // One statement, or one command holding its own transaction.
                Writer::SoleConnection(conn) => {
                    let sql = if keys.is_empty() {
                        // `$1` unused: a no-op keeps the numbering.
                        format!("{insert_jobs}; SELECT $1 WHERE 0")
                    } else {
                        format!(
                            "BEGIN IMMEDIATE; {}; {insert_jobs}; {insert_keys}; COMMIT",
                            idempotency::purge_sql(1)
                        )
                    };
                    let q = idempotency::bind(
                        bind_jobs(sqlx::query(&sql).bind(now), reqs, &queued, &sealed),
                        &keys,
                    );
                    match q.fetch_all(&mut **conn).await {
                        Ok(rows) => rows,
                        Err(e) => {
                            // Never hand back the writer inside an open transaction.
                            if !keys.is_empty()
                                && sqlx::query("ROLLBACK").execute(&mut **conn).await.is_err()
                            {
                                conn.close_on_drop();
                            }
                            return Err(BatchError::from_write(e));
                        }
                    }
                }
                Writer::Transaction(t) => {
                    if keys.is_empty() {
                        bind_jobs(sqlx::query(&insert_jobs).bind(now), reqs, &queued, &sealed)
                            .fetch_all(&mut **t)
                            .await?
                    } else {
                        sqlx::query(&idempotency::purge_sql(1))
                            .bind(now)
                            .execute(&mut **t)
                            .await?;
                        let rows =
                            bind_jobs(sqlx::query(&insert_jobs).bind(now), reqs, &queued, &sealed)
                                .fetch_all(&mut **t)
                                .await?;
                        // Another replica's batch wrote the same key just
                        // now: nothing is written here; alone, the request
                        // hears to retry; in a batch, its retry finds the job.
                        let insert_keys = idempotency::insert_sql(1, keys.len());
                        idempotency::bind(sqlx::query(&insert_keys), &keys)
                            .execute(&mut **t)
                            .await
                            .map_err(|e| match on_unique(e, idempotency::in_flight) {
                                // Retryable (503): the retry is answered
                                // with the job the other request wrote.
                                Error::Api { message, .. } => {
                                    Error::api(ErrorCode::Overloaded, message)
                                }
                                other => other,
                            })?;
                        rows
                    }
                }
            };
            // Decoded one by one after the write: an error is that job's alone
            // (failing the batch would retry it, and the job is already queued).
            for row in rows {
                let id: String = row
                    .try_get("id")
                    .map_err(|e| BatchError::Ambiguous(e.into()))?;
                written.insert(id, JobRow::from_row(&row).map_err(Error::from));
            }
        }
        // The jobs keys named before, as they are now.
        let mut named: HashMap<String, Result<JobRow>> = HashMap::new();
        replays.sort_by(|a, b| a.1.cmp(&b.1));
        if !replays.is_empty() {
            let ids: Vec<&str> = replays.iter().map(|(_, id)| id.as_str()).collect();
            let rows = bind_all(
                sqlx::query_as::<_, JobRow>(&format!(
                    "SELECT {JOB_COLUMNS} FROM jobs j WHERE j.id IN ({})",
                    placeholders(1, ids.len())
                )),
                &ids,
            )
            .fetch_all(&mut *tx)
            .await;
            match rows {
                Ok(rows) => named.extend(rows.into_iter().map(|r| (r.id.clone(), Ok(r)))),
                // Past the write: this error is the replays' alone.
                Err(e) if !queued.is_empty() => {
                    tracing::error!(error = %e, "reading the jobs idempotency keys named");
                }
                Err(e) => return Err(e.into()),
            }
        }
        tx.commit().await?;
        for (i, id) in queued {
            if let Some(row) = written.remove(id.as_str()) {
                out[i] = row.and_then(JobRow::into_job).map(|job| Submitted {
                    job,
                    replayed: false,
                });
            }
        }
        // Sorted by job: several requests may name the same one.
        let mut last: Option<(String, Job)> = None;
        for (i, id) in replays {
            if last.as_ref().is_none_or(|(named_id, _)| *named_id != id) {
                last = None;
                match named.remove(&id).map(|row| row.and_then(JobRow::into_job)) {
                    Some(Ok(job)) => last = Some((id, job)),
                    Some(Err(e)) => {
                        out[i] = Err(e);
                        continue;
                    }
                    None => {
                        out[i] = Err(Error::Internal("the job an idempotency key named is gone"));
                        continue;
                    }
                }
            }
            if let Some((_, job)) = &last {
                out[i] = Ok(Submitted {
                    job: job.clone(),
                    replayed: true,
                });
            }
        }
        for (i, j) in repeats {
            out[i] = match &out[j] {
                Ok(first) => Ok(Submitted {
                    job: first.job.clone(),
                    replayed: true,
                }),
                Err(e) => Err(Error::api(e.code(), e.to_string())),
            };
        }
        Ok(out)
    }
}
