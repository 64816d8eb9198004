//! Jobs: submit, read, list, cancel, logs, and the workspace budget.

use std::collections::HashMap;

use drover_wire::{self as wire, ErrorCode, JobState};
use serde::{Deserialize, Serialize};
use sqlx::{FromRow, Row};

use super::idempotency::{self, IdempotencyKey};
use super::model::{Job, Provenance, Usage};
use super::{
    Member, Placement, Store, Writer, bind_all, json_list, on_unique, only_result, placeholders,
    to_json,
};
use crate::batch::BatchError;
use crate::caps;
use crate::error::{Error, Result};
use crate::ids::{JobId, LeaseId, RunnerId, RuntimeId};
use crate::refs::RuntimeRef;

pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
const MAX_ATTEMPTS_LIMIT: u32 = 20;
const MAX_TIMEOUT_S: u64 = 7 * 24 * 3600;
const MAX_ARGS: usize = 4096;
const MAX_ENV: usize = 1024;

/// What a runner needs to execute a job, but its env; stored as JSON.
/// (The env is sealed in its own column: see `store::env`.)
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub script: Option<String>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub image: Option<String>,
}

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

/// A validated submission.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub runtime_ref: String,
    pub parsed_ref: RuntimeRef,
    pub spec: JobSpec,
    /// Sealed at submit, never part of `spec`.
    pub env: wire::Env,
    pub requires: Vec<String>,
    pub priority: i32,
    pub max_attempts: u32,
}

fn valid_env_name(k: &str) -> bool {
    let mut bytes = k.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && k.len() <= 256
}

impl NewJob {
    pub fn validate(req: wire::SubmitJob) -> Result<Self> {
        let parsed_ref =
            RuntimeRef::parse(&req.runtime).map_err(|e| Error::api(ErrorCode::InvalidRef, e.0))?;
        match (&req.command.is_empty(), &req.script) {
            (true, None) => {
                return Err(Error::bad_request(
                    "give a command (a non-empty array) or a script",
                ));
            }
            (false, Some(_)) => {
                return Err(Error::bad_request(
                    "give either command or script, not both",
                ));
            }
            _ => {}
        }
        if req.command.len() > MAX_ARGS {
            return Err(Error::bad_request(format!(
                "command has more than {MAX_ARGS} arguments"
            )));
        }
        if req.command.first().is_some_and(|c| c.is_empty()) {
            return Err(Error::bad_request("command[0] is empty"));
        }
        if req
            .command
            .iter()
            .chain(req.script.iter())
            .any(|a| a.contains('\0'))
        {
            return Err(Error::bad_request(
                "command and script may not contain NUL bytes",
            ));
        }
        if req.env.len() > MAX_ENV {
            return Err(Error::bad_request(format!("at most {MAX_ENV} env entries")));
        }
        if let Some((k, _)) = req
            .env
            .iter()
            .find(|(k, v)| !valid_env_name(k) || v.contains('\0'))
        {
            return Err(Error::bad_request(format!(
                "invalid env entry {k:?}: names are [A-Za-z_][A-Za-z0-9_]*, values have no NUL"
            )));
        }
        if let Some(t) = req.timeout_seconds
            && !(1..=MAX_TIMEOUT_S).contains(&t)
        {
            return Err(Error::bad_request(format!(
                "timeoutSeconds must be 1..={MAX_TIMEOUT_S}"
            )));
        }
        if !(-1000..=1000).contains(&req.priority) {
            return Err(Error::bad_request("priority must be -1000..=1000"));
        }
        let max_attempts = req.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if !(1..=MAX_ATTEMPTS_LIMIT).contains(&max_attempts) {
            return Err(Error::bad_request(format!(
                "maxAttempts must be 1..={MAX_ATTEMPTS_LIMIT}"
            )));
        }
        let mut requires = req.requires.clone();
        if let Some(image) = &req.image {
            if image.is_empty()
                || image.len() > 512
                || image.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(Error::bad_request("invalid image"));
            }
            requires.push("docker".into());
        }
        let requires = caps::normalize(&requires, "requires")?;
        Ok(Self {
            runtime_ref: req.runtime,
            parsed_ref,
            spec: JobSpec {
                command: req.command,
                script: req.script,
                timeout_seconds: req.timeout_seconds,
                image: req.image,
            },
            env: req.env,
            requires,
            priority: req.priority,
            max_attempts,
        })
    }
}

#[derive(FromRow)]
pub(super) struct JobRow {
    pub id: String,
    pub state: String,
    pub runtime_ref: String,
    pub runtime_id: String,
    pub pinned_runner_id: Option<String>,
    pub submitter_id: String,
    pub priority: i64,
    pub requires: String,
    pub spec: String,
    pub attempt: i64,
    pub max_attempts: i64,
    pub exit_code: Option<i64>,
    pub error: Option<String>,
    pub cancel_requested: i64,
    pub ran_by: Option<String>,
    pub ran_by_owner: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

pub(super) const JOB_COLUMNS: &str = "j.id, j.state, j.runtime_ref, j.runtime_id, j.pinned_runner_id, j.submitter_id,
    j.priority, j.requires, j.spec, j.attempt, j.max_attempts, j.exit_code, j.error, j.cancel_requested,
    j.ran_by, j.ran_by_owner, j.created_at, j.finished_at";

/// Jobs a member may see: their own, and any on a workspace-owned pool.
/// Takes (workspace, member) as parameters `$first` and `$first + 1`.
fn visible(first: usize) -> String {
    format!(
        "j.workspace_id = ${first} AND (j.submitter_id = ${} OR j.runtime_id IN
         (SELECT id FROM runtimes WHERE workspace_id = j.workspace_id AND owner_member_id IS NULL))",
        first + 1
    )
}

impl JobRow {
    pub fn into_job(self) -> Result<Job> {
        let state = JobState::parse(&self.state)
            .ok_or_else(|| Error::Corrupt(format!("job state {}", self.state)))?;
        let spec: JobSpec = serde_json::from_str(&self.spec)?;
        let provenance = match (self.ran_by, self.ran_by_owner) {
            (Some(ran_by), Some(by)) => Some(Provenance {
                ran_by,
                by,
                attempt: self.attempt as u32,
            }),
            _ => None,
        };
        Ok(Job {
            id: JobId::from_db(self.id),
            state,
            runtime_ref: self.runtime_ref,
            runtime_id: RuntimeId::from_db(self.runtime_id),
            pinned_runner: self.pinned_runner_id.map(RunnerId::from_db),
            submitter_id: self.submitter_id,
            spec,
            requires: json_list(&self.requires)?,
            priority: self.priority as i32,
            attempt: self.attempt as u32,
            max_attempts: self.max_attempts as u32,
            exit_code: self.exit_code.map(|c| c as i32),
            error: self.error,
            cancel_requested: self.cancel_requested != 0,
            provenance,
            created_at: self.created_at,
            finished_at: self.finished_at,
        })
    }
}

/// What a cancel did.
#[derive(Debug)]
pub enum CancelOutcome {
    /// It was queued; now it is cancelled.
    Dequeued,
    /// It is on a runner; the runner is told through this lease.
    Signalled(LeaseId),
    /// It was already cancelled.
    AlreadyCancelled,
}

#[derive(FromRow, Debug)]
pub struct LogRow {
    pub attempt: i64,
    pub seq: i64,
    pub stream: String,
    pub data: String,
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
            let rows: Vec<(String, Option<i64>, i64)> = bind_all(
                sqlx::query_as(&format!(
                    "SELECT id, budget_ms, spent_ms FROM workspaces WHERE id IN ({})",
                    placeholders(1, paying.len())
                )),
                &paying,
            )
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
                out.push(Err(Error::api(
                    ErrorCode::BudgetExceeded,
                    format!(
                        "the workspace budget is spent ({}s of {}s)",
                        spent / 1000,
                        budget / 1000
                    ),
                )));
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

    pub async fn get_job(&self, member: &Member, id: &str) -> Result<Job> {
        let not_found = || Error::not_found(format!("no job {id:?}"));
        let id = JobId::parse(id).ok_or_else(not_found)?;
        sqlx::query_as::<_, JobRow>(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs j WHERE j.id = $1 AND {}",
            visible(2)
        ))
        .bind(id.as_str())
        .bind(member.workspace_id.as_str())
        .bind(member.id.as_str())
        .fetch_optional(&self.reader)
        .await?
        .ok_or_else(not_found)?
        .into_job()
    }

    /// Newest first.
    pub async fn list_jobs(
        &self,
        member: &Member,
        state: Option<JobState>,
        limit: u32,
    ) -> Result<Vec<Job>> {
        let (filter, limit_param) = if state.is_some() {
            ("AND j.state = $3", "$4")
        } else {
            ("", "$3")
        };
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs j WHERE {} {filter} ORDER BY j.seq DESC LIMIT {limit_param}",
            visible(1)
        );
        let mut q = sqlx::query_as::<_, JobRow>(&sql)
            .bind(member.workspace_id.as_str())
            .bind(member.id.as_str());
        if let Some(state) = state {
            q = q.bind(state.as_str());
        }
        let rows = q.bind(i64::from(limit)).fetch_all(&self.reader).await?;
        rows.into_iter().map(JobRow::into_job).collect()
    }

    pub async fn cancel_job(&self, member: &Member, id: &str, now: i64) -> Result<CancelOutcome> {
        let job = self.get_job(member, id).await?; // visibility check, 404 otherwise
        let mut tx = self.writer.begin().await?;
        let dequeued = sqlx::query("UPDATE jobs SET state = 'cancelled', finished_at = $1, cancel_requested = 1 WHERE id = $2 AND state = 'queued'")
            .bind(now)
            .bind(job.id.as_str())
            .execute(&mut *tx)
            .await?;
        if dequeued.rows_affected() == 1 {
            tx.commit().await?;
            return Ok(CancelOutcome::Dequeued);
        }
        let lease: Option<String> = sqlx::query_scalar(
            "UPDATE jobs SET cancel_requested = 1 WHERE id = $1 AND state IN ('leased', 'running') RETURNING lease_id",
        )
        .bind(job.id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(lease) = lease {
            tx.commit().await?;
            return Ok(CancelOutcome::Signalled(LeaseId::from_db(lease)));
        }
        let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
            .bind(job.id.as_str())
            .fetch_one(&mut *tx)
            .await?;
        if state == JobState::Cancelled.as_str() {
            Ok(CancelOutcome::AlreadyCancelled)
        } else {
            Err(Error::conflict(format!(
                "job {} already finished ({state})",
                job.id
            )))
        }
    }

    /// Log chunks after `after` (attempt, seq), in order.
    pub async fn read_logs(
        &self,
        job: &str,
        after: Option<(i64, i64)>,
        limit: u32,
    ) -> Result<Vec<LogRow>> {
        let (attempt, seq) = after.unwrap_or((-1, -1));
        Ok(sqlx::query_as::<_, LogRow>(
            "SELECT attempt, seq, stream, data FROM job_logs
             WHERE job_id = $1 AND (attempt > $2 OR (attempt = $2 AND seq > $3))
             ORDER BY attempt, seq LIMIT $4",
        )
        .bind(job)
        .bind(attempt)
        .bind(seq)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
        .await?)
    }

    /// The job's state as seen now (for log followers).
    pub async fn job_state(&self, job: &str) -> Result<JobState> {
        let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&self.reader)
            .await?;
        JobState::parse(&state).ok_or_else(|| Error::Corrupt(format!("job state {state}")))
    }

    pub async fn set_budget(&self, member: &Member, limit_seconds: Option<u64>) -> Result<()> {
        let limit_ms = limit_seconds
            .map(|s| {
                i64::try_from(s.saturating_mul(1000))
                    .map_err(|_| Error::bad_request("limitSeconds is too large"))
            })
            .transpose()?;
        sqlx::query("UPDATE workspaces SET budget_ms = $1 WHERE id = $2")
            .bind(limit_ms)
            .bind(member.workspace_id.as_str())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    pub async fn usage(&self, member: &Member) -> Result<Usage> {
        let (budget, charged_ms, own_ms, charged_n, own_n): (Option<i64>, i64, i64, i64, i64) =
            sqlx::query_as(
                "SELECT w.budget_ms,
                    CAST(COALESCE(SUM(CASE WHEN u.charged = 1 THEN u.runner_ms END), 0) AS BIGINT),
                    CAST(COALESCE(SUM(CASE WHEN u.charged = 0 THEN u.runner_ms END), 0) AS BIGINT),
                    COUNT(CASE WHEN u.charged = 1 THEN 1 END),
                    COUNT(CASE WHEN u.charged = 0 THEN 1 END)
             FROM workspaces w LEFT JOIN usage u ON u.workspace_id = w.id
             WHERE w.id = $1 GROUP BY w.id, w.budget_ms",
            )
            .bind(member.workspace_id.as_str())
            .fetch_one(&self.reader)
            .await?;
        Ok(Usage {
            workspace: member.workspace_name.clone(),
            budget_ms: budget,
            charged_ms: charged_ms as u64,
            own_pays_ms: own_ms as u64,
            jobs_charged: charged_n as u64,
            jobs_own_pays: own_n as u64,
        })
    }
}
