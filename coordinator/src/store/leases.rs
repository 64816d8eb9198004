//! The runner side of a job: lease, heartbeat, logs, complete, expiry.
//!
//! Every function here runs in one write transaction, and SQLite has one
//! writer, so a queued job moves to `leased` for exactly one runner.
//! The `WHERE state = 'queued'` guard on the update keeps that true even if
//! two writers ever raced (it is the only way a job leaves the queue).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use drover_wire::{self as wire, ErrorCode, JobState, Outcome};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, FromRow, Row};

use super::jobs::JobSpec;
use super::pools::capabilities;
use super::{
    Backend, Dialect, Store, Writer, bind_all, bind_all_query, json_list, one, placeholders,
};
use crate::batch::BatchError;
use crate::caps;
use crate::error::{Error, Result};
use crate::ids::{JobId, LeaseId, RunnerId, RuntimeId};

/// Who should be woken because a job became leasable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// A waiter of this pool whose runner meets `requires`.
    Pool {
        runtime: RuntimeId,
        requires: Vec<String>,
    },
    /// A waiter of this one runner (a pinned job).
    Runner {
        runtime: RuntimeId,
        runner: RunnerId,
    },
}

#[derive(Debug)]
pub enum LeaseAttempt {
    Leased {
        lease: Box<wire::Lease>,
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

/// One runner's lease call, for a batch.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    pub runner: RunnerId,
    /// The runner's pool, as its credential says (a runner never moves).
    pub runtime: RuntimeId,
    pub now: i64,
    pub ttl_ms: u64,
}

/// One complete call, for a batch.
#[derive(Debug, Clone)]
pub struct CompleteRequest {
    pub runner: RunnerId,
    pub lease: String,
    pub done: wire::Complete,
    pub now: i64,
}

#[derive(FromRow)]
struct Pinned {
    id: String,
    requires: String,
    pinned_runner_id: String,
}

struct Candidate {
    id: String,
    requires: String,
}

fn wake_for(runtime_id: &str, pinned: Option<&str>, requires: &str) -> Result<Wake> {
    Ok(match pinned {
        Some(r) => Wake::Runner {
            runtime: RuntimeId::from_db(runtime_id.to_owned()),
            runner: RunnerId::from_db(r.to_owned()),
        },
        None => Wake::Pool {
            runtime: RuntimeId::from_db(runtime_id.to_owned()),
            requires: json_list(requires)?,
        },
    })
}

fn meets(caps: &[String], requires: &str) -> Result<bool> {
    Ok(requires == "[]" || caps::satisfies(caps, &json_list(requires)?))
}

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

/// Binds the rows of the usage insert (`value_rows(…, 6, ", $1")`).
fn bind_usage<'q>(mut q: AnyQuery<'q>, finishes: &'q [Finish]) -> AnyQuery<'q> {
    for f in finishes {
        q = q
            .bind(f.job.as_str())
            .bind(f.attempt)
            .bind(f.workspace_id.as_str())
            .bind(f.payer.as_str())
            .bind(f.charged)
            .bind(f.runner_ms);
    }
    q
}

/// A page of a pool's queue, as rows `('q', id, requires, runtime_id, NULL,
/// NULL)`; parameters `$first` (pool), `$first+1` (limit), `$first+2` (offset).
fn queue_page(d: &Dialect, first: usize) -> String {
    format!(
        "SELECT 'q', id, requires, runtime_id, CAST(NULL AS TEXT), CAST(NULL AS BIGINT) FROM jobs
         WHERE state = 'queued' AND runtime_id = ${first} AND pinned_runner_id IS NULL
         ORDER BY priority DESC, queue_pos, seq LIMIT ${} OFFSET ${} {}",
        first + 1,
        first + 2,
        d.lock_skip_locked
    )
}

/// `n` rows of `width` placeholders each, numbered from `$first`, each row
/// ending with `tail` (e.g. `", $1"` for a value shared by every row).
fn value_rows(first: usize, n: usize, width: usize, tail: &str) -> String {
    (0..n)
        .map(|k| format!("({}{tail})", placeholders(first + width * k, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Leases released per transaction: between chunks the writer is free for
/// everyone else (a submit, a heartbeat), however many leases expire at once.
const RELEASE_CHUNK: usize = 256;

const CANCELLED_GONE: &str = "cancelled; the runner stopped answering";
const LOST: &str = "the runner stopped answering and the job is out of attempts";

/// Puts jobs whose lease is gone back at the front of their queue, or ends
/// them: `cancelled` if a cancel was asked for, `lost` when out of attempts.
/// A lease that never reached `running` never ran (a runner heartbeats
/// before it starts the process), so it gives its attempt back.
/// Two statements, whatever the number of jobs: one for the endings, one
/// for the re-queues. A re-queued job's `queue_pos` is minus the time of
/// its release: before every new job (0), and before jobs re-queued
/// earlier, as if each went to the head of the queue in turn.
/// Returns (job, who to wake) for each job released.
async fn release(
    conn: &mut AnyConnection,
    dialect: &Dialect,
    jobs: &[String],
    now: i64,
) -> Result<Vec<(JobId, Option<Wake>)>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let now_sql = dialect.now("$1");
    let ended_sql = format!(
        "UPDATE jobs SET state = CASE WHEN cancel_requested <> 0 THEN 'cancelled' ELSE 'lost' END,
             error = CASE WHEN cancel_requested <> 0 THEN $2 ELSE $3 END,
             finished_at = {now_sql}, lease_id = NULL, lease_runner_id = NULL, lease_expires_at = NULL
         WHERE id IN ({}) AND state IN ('leased', 'running')
           AND (cancel_requested <> 0 OR (state = 'running' AND attempt >= max_attempts))
         RETURNING id",
        placeholders(4, jobs.len())
    );
    let mut q = sqlx::query_scalar::<_, String>(&ended_sql)
        .bind(now)
        .bind(CANCELLED_GONE)
        .bind(LOST);
    for job in jobs {
        q = q.bind(job.as_str());
    }
    let ended = q.fetch_all(&mut *conn).await?;

    let requeue_sql = format!(
        "UPDATE jobs SET state = 'queued', lease_id = NULL, lease_runner_id = NULL, lease_expires_at = NULL,
             attempt = attempt - CASE WHEN state = 'leased' THEN 1 ELSE 0 END,
             queue_pos = -({now_sql})
         WHERE id IN ({}) AND state IN ('leased', 'running')
         RETURNING id, runtime_id, pinned_runner_id, requires",
        placeholders(2, jobs.len())
    );
    let mut q =
        sqlx::query_as::<_, (String, String, Option<String>, String)>(&requeue_sql).bind(now);
    for job in jobs {
        q = q.bind(job.as_str());
    }
    let requeued = q.fetch_all(&mut *conn).await?;

    let mut out = Vec::with_capacity(ended.len() + requeued.len());
    out.extend(ended.into_iter().map(|id| (JobId::from_db(id), None)));
    for (id, runtime_id, pinned, requires) in requeued {
        let wake = wake_for(&runtime_id, pinned.as_deref(), &requires)?;
        out.push((JobId::from_db(id), Some(wake)));
    }
    Ok(out)
}

/// Releases every lease `runner` holds (it was revoked), waiting for any
/// transaction (a complete) that holds one of those rows.
pub(super) async fn release_leases_of_runner(
    conn: &mut AnyConnection,
    dialect: &Dialect,
    runner: &RunnerId,
    now: i64,
) -> Result<Vec<(JobId, Option<Wake>)>> {
    let held: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT id FROM jobs WHERE lease_runner_id = $1 AND state IN ('leased', 'running') ORDER BY id {}",
        dialect.lock_for_update
    ))
    .bind(runner.as_str())
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(held.len());
    for chunk in held.chunks(RELEASE_CHUNK) {
        out.extend(release(conn, dialect, chunk, now).await?);
    }
    Ok(out)
}

impl Store {
    /// A further page of `runtime`'s queue.
    async fn queue_page(
        &self,
        conn: &mut sqlx::AnyConnection,
        runtime: &str,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<Candidate>> {
        let rows = sqlx::query(&queue_page(self.dialect, 1))
            .bind(runtime)
            .bind(limit)
            .bind(offset)
            .fetch_all(conn)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(Candidate {
                    id: row.try_get(1)?,
                    requires: row.try_get(2)?,
                })
            })
            .collect()
    }

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
            None => one(self.lease_batch(&[req]).await?),
        }
    }

    /// Leases a job for each request, in one transaction. Requests are
    /// served in order, so within a pool the earliest request gets the head
    /// of the queue it can run. The same runner may ask more than once (one
    /// request per slot).
    pub(super) async fn lease_batch(
        &self,
        reqs: &[LeaseRequest],
    ) -> Result<Vec<Result<LeaseAttempt>>, BatchError> {
        let d: &Dialect = self.dialect;
        let now = reqs.iter().map(|r| r.now).max().unwrap_or_default();
        let ttl_ms = reqs.iter().map(|r| r.ttl_ms).max().unwrap_or_default();
        // Reads, then one UPDATE: no transaction needed on SQLite.
        let mut tx = self.single_write().await?;

        // The reads: who is asking (pool and capabilities, or revoked), the
        // jobs pinned to them, and the head of each of their pools' queues,
        // twice as many rows as requests (usually the head fits, and we see
        // how many wait behind). On SQLite in one round trip.
        let mut ids: Vec<&str> = reqs.iter().map(|r| r.runner.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut heads: Vec<(&str, i64)> = Vec::new();
        for r in reqs {
            match heads.iter_mut().find(|(rt, _)| *rt == r.runtime.as_str()) {
                Some((_, limit)) => *limit += 2,
                None => heads.push((r.runtime.as_str(), 2)),
            }
        }
        let (k, lock) = (ids.len(), d.lock_skip_locked);
        let who = format!(
            "SELECT 'r', id, runtime_id, labels, detected, revoked_at, slots
             FROM runners WHERE id IN ({}) ORDER BY id {}",
            placeholders(1, k),
            d.lock_runners
        );
        // The leases they hold. A statement of its own, after the lock above:
        // on PostgreSQL it then sees the leases of a batch that held these
        // runners before us (a statement sees what committed before it began).
        let held_sql = format!(
            "SELECT 'c', lease_runner_id, CAST('' AS TEXT), CAST('' AS TEXT), CAST('' AS TEXT), CAST(COUNT(*) AS BIGINT)
             FROM jobs WHERE lease_runner_id IN ({}) AND state IN ('leased', 'running') GROUP BY lease_runner_id",
            placeholders(1, k)
        );
        let pinned_sql = format!(
            "SELECT 'p', id, requires, pinned_runner_id, CAST(NULL AS TEXT), CAST(NULL AS BIGINT) FROM jobs
             WHERE state = 'queued' AND pinned_runner_id IN ({})
             ORDER BY priority DESC, queue_pos, seq LIMIT {} {lock}",
            placeholders(1, k),
            d.lease_page
        );
        let mut rows: Vec<AnyRow> = Vec::new();
        if d.backend == Backend::Sqlite {
            let mut sql = format!("{who}; {held_sql}; {pinned_sql}");
            for j in 0..heads.len() {
                sql.push_str("; ");
                sql.push_str(&queue_page(d, k + 1 + 3 * j));
            }
            let mut q = bind_all_query(sqlx::query(&sql), &ids);
            for (runtime, limit) in &heads {
                q = q.bind(*runtime).bind(*limit).bind(0i64);
            }
            rows = q.fetch_all(&mut *tx).await?;
        } else {
            for sql in [&who, &held_sql, &pinned_sql] {
                rows.extend(
                    bind_all_query(sqlx::query(sql), &ids)
                        .fetch_all(&mut *tx)
                        .await?,
                );
            }
            let page = queue_page(d, 1);
            for (runtime, limit) in &heads {
                let q = sqlx::query(&page).bind(*runtime).bind(*limit).bind(0i64);
                rows.extend(q.fetch_all(&mut *tx).await?);
            }
        }
        let mut runners: HashMap<String, (String, Vec<String>)> = HashMap::new();
        // Per runner: slots, and leases held.
        let mut slots: HashMap<String, i64> = HashMap::new();
        let mut held: HashMap<String, i64> = HashMap::new();
        let mut pinned: Vec<Pinned> = Vec::new();
        let mut first_pages: HashMap<String, Vec<Candidate>> = HashMap::new();
        for row in &rows {
            let kind: String = row.try_get(0)?;
            let id: String = row.try_get(1)?;
            let a: String = row.try_get(2)?;
            let b: String = row.try_get(3)?;
            match kind.as_str() {
                "r" => {
                    let detected: String = row.try_get(4)?;
                    if row.try_get::<Option<i64>, _>(5)?.is_none() {
                        slots.insert(id.clone(), row.try_get(6)?);
                        runners.insert(id, (a, capabilities(&b, &detected)?));
                    }
                }
                "c" => {
                    held.insert(id, row.try_get(5)?);
                }
                "p" => pinned.push(Pinned {
                    id,
                    requires: a,
                    pinned_runner_id: b,
                }),
                _ => first_pages
                    .entry(b)
                    .or_default()
                    .push(Candidate { id, requires: a }),
            }
        }

        // A runner leases at most as many jobs as it has slots: counting
        // what it holds, each request in this batch takes a slot, in order,
        // whether or not it then finds a job; a request with none left
        // leases nothing (`LEASE_LIMIT`).
        let mut limited: Vec<Option<(i64, i64)>> = vec![None; reqs.len()];
        let held_by = |id: &str| held.get(id).copied().unwrap_or(0);
        let mut room: HashMap<&str, i64> = slots
            .iter()
            .map(|(id, n)| (id.as_str(), n - held_by(id)))
            .collect();
        for (i, req) in reqs.iter().enumerate() {
            let id = req.runner.as_str();
            if let Some(left) = room.get_mut(id) {
                if *left > 0 {
                    *left -= 1;
                } else {
                    limited[i] = Some((slots[id], held_by(id)));
                }
            }
        }

        // picked[i]: the job for request i; next[i]: whom its handler wakes.
        let mut picked: Vec<Option<String>> = vec![None; reqs.len()];
        let mut next: Vec<Option<Wake>> = vec![None; reqs.len()];

        // Pinned jobs, usually none. Per runner only if that page came back full.
        if pinned.len() as i64 == d.lease_page {
            pinned.clear();
            for id in &ids {
                pinned.extend(
                    sqlx::query_as::<_, Pinned>(&format!(
                        "SELECT id, requires, pinned_runner_id FROM jobs WHERE state = 'queued' AND pinned_runner_id = $1
                         ORDER BY priority DESC, queue_pos, seq LIMIT $2 {lock}"
                    ))
                    .bind(*id)
                    .bind(reqs.len() as i64 + 1)
                    .fetch_all(&mut *tx)
                    .await?,
                );
            }
        }
        let mut taken = vec![false; pinned.len()];
        for (i, req) in reqs.iter().enumerate() {
            let Some((runtime_id, caps)) = runners.get(req.runner.as_str()) else {
                continue;
            };
            if limited[i].is_some() {
                continue;
            }
            for (c, job) in pinned.iter().enumerate() {
                if taken[c] || job.pinned_runner_id != req.runner.as_str() {
                    continue;
                }
                if picked[i].is_some() {
                    next[i] = Some(Wake::Runner {
                        runtime: RuntimeId::from_db(runtime_id.clone()),
                        runner: req.runner.clone(),
                    });
                    break;
                }
                if meets(caps, &job.requires)? {
                    picked[i] = Some(job.id.clone());
                    taken[c] = true;
                }
            }
        }

        // Each pool's queue, for the requests still unserved. Read twice as
        // many rows as there are requests (usually the head of the queue
        // fits), so we also see how many wait behind; page on only if not.
        let mut pools: Vec<&str> = Vec::new();
        for (i, req) in reqs.iter().enumerate() {
            if let (None, None, Some((runtime_id, _))) =
                (&picked[i], &limited[i], runners.get(req.runner.as_str()))
                && !pools.contains(&runtime_id.as_str())
            {
                pools.push(runtime_id);
            }
        }
        for runtime_id in pools {
            let mut waiting: Vec<usize> = (0..reqs.len())
                .filter(|&i| {
                    picked[i].is_none()
                        && limited[i].is_none()
                        && runners
                            .get(reqs[i].runner.as_str())
                            .is_some_and(|(rt, _)| rt == runtime_id)
                })
                .collect();
            let mut served: Vec<usize> = Vec::new();
            let mut behind: Vec<Wake> = Vec::new();
            // The first page was read above with the other reads.
            let read = heads.iter().find(|(rt, _)| *rt == runtime_id);
            let mut limit = read.map_or((2 * waiting.len()).max(2) as i64, |(_, l)| *l);
            let mut page = match read {
                Some(_) => first_pages.remove(runtime_id).unwrap_or_default(),
                None => self.queue_page(&mut tx, runtime_id, limit, 0).await?,
            };
            let mut offset = 0;
            loop {
                for c in &page {
                    if waiting.is_empty() {
                        behind.push(Wake::Pool {
                            runtime: RuntimeId::from_db(runtime_id.to_owned()),
                            requires: json_list(&c.requires)?,
                        });
                        continue;
                    }
                    // Later pages are separate statements (on PostgreSQL each
                    // sees new commits), so a page may repeat a row.
                    if picked.iter().any(|p| p.as_deref() == Some(c.id.as_str())) {
                        continue;
                    }
                    let mut fits = None;
                    for (w, &i) in waiting.iter().enumerate() {
                        let (_, caps) = &runners[reqs[i].runner.as_str()];
                        if meets(caps, &c.requires)? {
                            fits = Some(w);
                            break;
                        }
                    }
                    if let Some(w) = fits {
                        let i = waiting.remove(w);
                        picked[i] = Some(c.id.clone());
                        served.push(i);
                    }
                }
                if !behind.is_empty() || (page.len() as i64) < limit {
                    break;
                }
                offset += limit;
                limit = d.lease_page;
                page = self.queue_page(&mut tx, runtime_id, limit, offset).await?;
            }
            // One wake per job seen waiting behind, from the handlers served.
            for (i, wake) in served.into_iter().zip(behind) {
                next[i] = Some(wake);
            }
        }

        // Take every picked job in one statement; `WHERE state = 'queued'` is
        // the only way out of the queue (with the rows locked, or the one
        // writer, it always matches).
        let mut chosen: Vec<(usize, String, LeaseId)> = Vec::new();
        for (i, job) in picked.iter().enumerate() {
            if let Some(job) = job {
                chosen.push((i, job.clone(), LeaseId::generate()));
            }
        }
        // By lease id: the one the database holds for each job it moved.
        let mut taken: HashMap<String, AnyRow> = HashMap::with_capacity(chosen.len());
        if !chosen.is_empty() {
            let rows = (0..chosen.len())
                .map(|k| format!("(${}, ${}, ${})", 3 + 3 * k, 4 + 3 * k, 5 + 3 * k))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "UPDATE jobs SET state = 'leased', attempt = attempt + 1, lease_id = v.column2, lease_runner_id = v.column3,
                     lease_expires_at = {} + $2, started_at = $1
                 FROM (VALUES {rows}) AS v
                 WHERE jobs.id = v.column1 AND jobs.state = 'queued'
                 RETURNING lease_id, attempt, spec, env_sealed",
                d.now("$1")
            );
            let mut q = sqlx::query(&sql).bind(now).bind(ttl_ms as i64);
            for (i, job, lease) in &chosen {
                q = q
                    .bind(job.as_str())
                    .bind(lease.as_str())
                    .bind(reqs[*i].runner.as_str());
            }
            let rows = q.fetch_all(&mut *tx).await.map_err(|e| tx.write_error(e))?;
            for row in rows {
                let lease: String = row
                    .try_get(0)
                    .map_err(|e| BatchError::Ambiguous(e.into()))?;
                taken.insert(lease, row);
            }
        }
        tx.commit().await?;

        let mut out: Vec<Result<LeaseAttempt>> = reqs
            .iter()
            .zip(&limited)
            .map(|(r, limited)| match limited {
                Some((slots, held)) => Err(Error::api(
                    ErrorCode::LeaseLimit,
                    format!(
                        "this runner already holds {held} lease(s) or asks for more, and has {slots} slot(s); \
                         complete a job first (a runner declares its slots in hello)"
                    ),
                )),
                None if runners.contains_key(r.runner.as_str()) => Ok(LeaseAttempt::Empty),
                None => Ok(LeaseAttempt::Revoked),
            })
            .collect();
        // Written: from here an error is that request's alone (failing the
        // batch would retry it, and the job is already leased).
        let mut unreadable: Vec<(String, LeaseId)> = Vec::new();
        for (i, job_id, lease_id) in chosen {
            let Some(row) = taken.remove(lease_id.as_str()) else {
                continue;
            };
            let decoded = row
                .try_get::<i64, _>(1)
                .map_err(Error::from)
                .and_then(|attempt| {
                    let spec: String = row.try_get(2)?;
                    let sealed: Option<String> = row.try_get(3)?;
                    // The one place env is opened: into this lease.
                    let env = self.open_env(job_id.as_str(), &spec, sealed.as_deref())?;
                    Ok((attempt, serde_json::from_str::<JobSpec>(&spec)?, env))
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
                lease: Box::new(wire::Lease {
                    lease_id: lease_id.to_string(),
                    ttl_ms,
                    job: wire::LeasedJob {
                        id: job_id,
                        attempt: attempt as u32,
                        command: spec.command,
                        script: spec.script,
                        env,
                        timeout_seconds: spec.timeout_seconds,
                        image: spec.image,
                    },
                }),
                next: next[i].take(),
            });
        }
        for (job, lease) in unreadable {
            if let Err(e) = self.fail_unreadable(&job, &lease, now).await {
                tracing::error!(job = %job, error = %e, "could not fail an unreadable job");
            }
        }
        Ok(out)
    }

    /// Ends a leased job the coordinator cannot read (its env does not
    /// open: a key is missing or wrong), so it is not leased again forever.
    async fn fail_unreadable(&self, job: &str, lease: &LeaseId, now: i64) -> Result<()> {
        sqlx::query(
            "UPDATE jobs SET state = 'failed', finished_at = $1, lease_id = NULL, lease_runner_id = NULL,
                 lease_expires_at = NULL,
                 error = 'the coordinator cannot read this job (its env does not open with the keys it has); it was not run'
             WHERE id = $2 AND lease_id = $3 AND state = 'leased'",
        )
        .bind(now)
        .bind(job)
        .bind(lease.as_str())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Renews the lease (and marks the job running). Returns whether a cancel
    /// has been asked for.
    pub async fn heartbeat(
        &self,
        runner: &RunnerId,
        lease: &str,
        now: i64,
        ttl_ms: u64,
    ) -> Result<bool> {
        let cancel: Option<i64> = sqlx::query_scalar(&format!(
            "UPDATE jobs SET lease_expires_at = {} + $2, state = CASE WHEN state = 'leased' THEN 'running' ELSE state END
             WHERE lease_id = $3 AND lease_runner_id = $4 AND state IN ('leased', 'running')
             RETURNING cancel_requested",
            self.dialect.now("$1")
        ))
        .bind(now)
        .bind(ttl_ms as i64)
        .bind(lease)
        .bind(runner.as_str())
        .fetch_optional(&self.writer)
        .await?;
        cancel.map(|c| c != 0).ok_or_else(Error::lease_lost)
    }

    /// Is a cancel asked for on this live lease? (Read-only, for heartbeat waits.)
    pub async fn cancel_requested(&self, runner: &RunnerId, lease: &str) -> Result<bool> {
        let cancel: Option<i64> = sqlx::query_scalar(
            "SELECT cancel_requested FROM jobs WHERE lease_id = $1 AND lease_runner_id = $2 AND state IN ('leased', 'running')",
        )
        .bind(lease)
        .bind(runner.as_str())
        .fetch_optional(&self.reader)
        .await?;
        cancel.map(|c| c != 0).ok_or_else(Error::lease_lost)
    }

    /// Stores one log chunk; a chunk number already stored is ignored.
    pub async fn append_log(
        &self,
        runner: &RunnerId,
        lease: &str,
        chunk: &wire::LogChunk,
        now: i64,
    ) -> Result<JobId> {
        let mut tx = self.writer.begin().await?;
        let held: Option<(String, i64)> = sqlx::query_as(
            "SELECT id, attempt FROM jobs WHERE lease_id = $1 AND lease_runner_id = $2 AND state IN ('leased', 'running')",
        )
        .bind(lease)
        .bind(runner.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let (job, attempt) = held.ok_or_else(Error::lease_lost)?;
        let seq = i64::try_from(chunk.seq).map_err(|_| Error::bad_request("seq is too large"))?;
        sqlx::query(
            "INSERT INTO job_logs (job_id, attempt, seq, stream, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (job_id, attempt, seq) DO NOTHING",
        )
        .bind(&job)
        .bind(attempt)
        .bind(seq)
        .bind(match chunk.stream {
            wire::LogStream::Stdout => "stdout",
            wire::LogStream::Stderr => "stderr",
        })
        .bind(chunk.data.replace('\0', "\u{fffd}"))
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(JobId::from_db(job))
    }

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
            None => one(self.complete_batch(&[req]).await?),
        }
    }

    /// Completes each request's lease, in one transaction.
    pub(super) async fn complete_batch(
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
        }
        let now = reqs.iter().map(|r| r.now).max().unwrap_or_default();
        // SQLite: reads on the held writer, then all writes as one command.
        let mut tx = self.single_write().await?;
        let mut leases: Vec<&str> = reqs.iter().map(|r| r.lease.as_str()).collect();
        leases.sort_unstable();
        leases.dedup();
        // In id order, so concurrent batches on PostgreSQL lock rows in one order.
        let rows = bind_all(
            sqlx::query_as::<_, Row>(&format!(
                "SELECT j.id, j.lease_id, j.state, j.lease_runner_id, j.attempt, j.cancel_requested, j.started_at, j.workspace_id,
                        rt.owner_member_id, w.name AS workspace_name
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
            });
            out.push(Ok(Completion {
                job_id: JobId::from_db(row.id.clone()),
                state,
                repeated: false,
            }));
        }
        held.clear();

        if !finishes.is_empty() {
            // Usage adds to the workspace total by trigger (migration 0002).
            let n = finishes.len();
            let update = format!(
                "UPDATE jobs SET state = v.column2, exit_code = v.column3, error = v.column4, ran_by = v.column5,
                     ran_by_owner = v.column6, finished_at = $1, lease_expires_at = NULL
                 FROM (VALUES {}) AS v WHERE jobs.id = v.column1",
                value_rows(2, n, 6, "")
            );
            let usage = |first: usize| {
                format!(
                    "INSERT INTO usage (job_id, attempt, workspace_id, payer, charged, runner_ms, created_at)
                     VALUES {} ON CONFLICT (job_id, attempt) DO NOTHING",
                    value_rows(first, n, 6, ", $1")
                )
            };
            match &mut tx {
                Writer::Held(conn) => {
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
                Writer::Tx(t) => {
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

    /// Releases every lease whose time ran out before `now` (on PostgreSQL,
    /// before the database's now; see [`Dialect::now`]), in chunks of
    /// [`RELEASE_CHUNK`] jobs, one transaction each, the writer free between.
    pub async fn expire_leases(&self, now: i64) -> Result<Vec<(JobId, Option<Wake>)>> {
        let d = self.dialect;
        let now = match d.db_clock {
            Some(clock) => {
                let db_now: i64 = sqlx::query_scalar(&format!("SELECT {clock}"))
                    .fetch_one(&self.writer)
                    .await?;
                // For `next_expiry`, which answers in the coordinator's clock.
                self.clock_offset.store(now - db_now, Ordering::Relaxed);
                db_now
            }
            None => now,
        };
        let mut out = Vec::new();
        loop {
            let mut tx = self.writer.begin().await?;
            let expired: Vec<String> = sqlx::query_scalar(&format!(
                "SELECT id FROM jobs WHERE state IN ('leased', 'running') AND lease_expires_at < $1
                 ORDER BY lease_expires_at LIMIT $2 {}",
                d.lock_skip_locked
            ))
            .bind(now)
            .bind(RELEASE_CHUNK as i64)
            .fetch_all(&mut *tx)
            .await?;
            if expired.is_empty() {
                return Ok(out);
            }
            out.extend(release(&mut tx, d, &expired, now).await?);
            tx.commit().await?;
            if expired.len() < RELEASE_CHUNK {
                return Ok(out);
            }
            // Let whoever queued for the writer meanwhile go first.
            tokio::task::yield_now().await;
        }
    }

    /// On start-up: the coordinator was away, so no runner could heartbeat.
    /// Give every live lease a fresh TTL instead of punishing its runner.
    pub async fn extend_live_leases(&self, now: i64, ttl_ms: u64) -> Result<u64> {
        let done = sqlx::query(
            "UPDATE jobs SET lease_expires_at = $1 WHERE state IN ('leased', 'running')",
        )
        .bind(now + ttl_ms as i64)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }

    /// When the next live lease expires, if any, by the coordinator's clock
    /// (on PostgreSQL, shifted by how far it was from the database's at the
    /// last `expire_leases`).
    pub async fn next_expiry(&self) -> Result<Option<i64>> {
        let at: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(lease_expires_at) FROM jobs WHERE state IN ('leased', 'running')",
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(at.map(|at| at + self.clock_offset.load(Ordering::Relaxed)))
    }
}
