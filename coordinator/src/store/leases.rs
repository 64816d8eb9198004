//! The runner side of a job: lease, heartbeat, logs, complete, expiry.
//!
//! Every function here runs in one write transaction, and SQLite has one
//! writer, so a queued job moves to `leased` for exactly one runner.
//! The `WHERE state = 'queued'` guard on the update keeps that true even if
//! two writers ever raced (it is the only way a job leaves the queue).

use drover_wire::{self as wire, JobState, Outcome};
use sqlx::{AnyConnection, FromRow};

use super::jobs::JobSpec;
use super::pools::capabilities;
use super::{Dialect, Store, json_list};
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

#[derive(FromRow)]
struct Candidate {
    id: String,
    requires: String,
}

#[derive(FromRow)]
struct Held {
    id: String,
    state: String,
    runtime_id: String,
    pinned_runner_id: Option<String>,
    requires: String,
    attempt: i64,
    max_attempts: i64,
    cancel_requested: i64,
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

/// Puts jobs whose lease is gone back at the front of their queue, or ends
/// them: `cancelled` if a cancel was asked for, `lost` when out of attempts.
/// A lease that never reached `running` never ran (a runner heartbeats
/// before it starts the process), so it gives its attempt back.
/// Returns (job, who to wake) for each.
async fn release(
    conn: &mut AnyConnection,
    held: Vec<Held>,
    now: i64,
) -> Result<Vec<(JobId, Option<Wake>)>> {
    let mut out = Vec::with_capacity(held.len());
    for job in held {
        let started = job.state == JobState::Running.as_str();
        let (end_state, error) = if job.cancel_requested != 0 {
            (
                Some(JobState::Cancelled),
                "cancelled; the runner stopped answering",
            )
        } else if started && job.attempt >= job.max_attempts {
            (
                Some(JobState::Lost),
                "the runner stopped answering and the job is out of attempts",
            )
        } else {
            (None, "")
        };
        if let Some(state) = end_state {
            sqlx::query(
                "UPDATE jobs SET state = $1, error = $2, finished_at = $3, lease_id = NULL, lease_runner_id = NULL, lease_expires_at = NULL
                 WHERE id = $4 AND state IN ('leased', 'running')",
            )
            .bind(state.as_str())
            .bind(error)
            .bind(now)
            .bind(&job.id)
            .execute(&mut *conn)
            .await?;
            out.push((JobId::from_db(job.id), None));
        } else {
            sqlx::query(
                "UPDATE jobs SET state = 'queued', lease_id = NULL, lease_runner_id = NULL, lease_expires_at = NULL,
                    attempt = attempt - $1,
                    queue_pos = (SELECT COALESCE(MIN(q.queue_pos), 0) FROM jobs q WHERE q.state = 'queued' AND q.runtime_id = $2) - 1
                 WHERE id = $3 AND state IN ('leased', 'running')",
            )
            .bind(if started { 0i64 } else { 1 })
            .bind(&job.runtime_id)
            .bind(&job.id)
            .execute(&mut *conn)
            .await?;
            let wake = wake_for(
                &job.runtime_id,
                job.pinned_runner_id.as_deref(),
                &job.requires,
            )?;
            out.push((JobId::from_db(job.id), Some(wake)));
        }
    }
    Ok(out)
}

const HELD_COLUMNS: &str =
    "id, state, runtime_id, pinned_runner_id, requires, attempt, max_attempts, cancel_requested";
/// Releases every lease `runner` holds (it was revoked), waiting for any
/// transaction (a complete) that holds one of those rows.
pub(super) async fn release_leases_of_runner(
    conn: &mut AnyConnection,
    dialect: &Dialect,
    runner: &RunnerId,
    now: i64,
) -> Result<Vec<(JobId, Option<Wake>)>> {
    let held = sqlx::query_as::<_, Held>(&format!(
        "SELECT {HELD_COLUMNS} FROM jobs WHERE lease_runner_id = $1 AND state IN ('leased', 'running') {}",
        dialect.lock_for_update
    ))
    .bind(runner.as_str())
    .fetch_all(&mut *conn)
    .await?;
    release(conn, held, now).await
}

impl Store {
    /// Leases the next job for `runner`: jobs pinned to it first, then its
    /// pool's queue, each by priority then FIFO (re-queued jobs first),
    /// skipping jobs whose requirements the runner does not meet.
    pub async fn try_lease(
        &self,
        runner: &RunnerId,
        now: i64,
        ttl_ms: u64,
    ) -> Result<LeaseAttempt> {
        let mut tx = self.writer.begin().await?;
        let row: Option<(String, String, String, Option<i64>)> = sqlx::query_as(
            "SELECT runtime_id, labels, detected, revoked_at FROM runners WHERE id = $1",
        )
        .bind(runner.as_str())
        .fetch_optional(&mut *tx)
        .await?;
        let Some((runtime_id, labels, detected, None)) = row else {
            return Ok(LeaseAttempt::Revoked);
        };
        let caps = capabilities(&labels, &detected)?;

        let mut picked: Option<String> = None;
        let mut next: Option<Wake> = None;
        let d: &Dialect = self.dialect;
        let pinned = sqlx::query_as::<_, Candidate>(&format!(
            "SELECT id, requires FROM jobs WHERE state = 'queued' AND pinned_runner_id = $1
             ORDER BY priority DESC, queue_pos, seq LIMIT $2 {}",
            d.lock_skip_locked
        ))
        .bind(runner.as_str())
        .bind(d.lease_page)
        .fetch_all(&mut *tx)
        .await?;
        for c in &pinned {
            if picked.is_some() {
                next = Some(Wake::Runner {
                    runtime: RuntimeId::from_db(runtime_id.clone()),
                    runner: runner.clone(),
                });
                break;
            }
            if meets(&caps, &c.requires)? {
                picked = Some(c.id.clone());
            }
        }
        // Usually the head of the queue fits: read two rows (the job, and
        // whether another waits behind it), and page further only if not.
        let mut offset = 0;
        let mut limit = 2;
        while next.is_none() {
            let page = sqlx::query_as::<_, Candidate>(&format!(
                "SELECT id, requires FROM jobs WHERE state = 'queued' AND runtime_id = $1 AND pinned_runner_id IS NULL
                 ORDER BY priority DESC, queue_pos, seq LIMIT $2 OFFSET $3 {}",
                d.lock_skip_locked
            ))
                        .bind(&runtime_id)
            .bind(limit)
            .bind(offset)
            .fetch_all(&mut *tx)
            .await?;
            for c in &page {
                if picked.is_some() {
                    next = Some(Wake::Pool {
                        runtime: RuntimeId::from_db(runtime_id.clone()),
                        requires: json_list(&c.requires)?,
                    });
                    break;
                }
                if meets(&caps, &c.requires)? {
                    picked = Some(c.id.clone());
                }
            }
            if (page.len() as i64) < limit {
                break;
            }
            offset += limit;
            limit = d.lease_page;
        }
        let Some(job_id) = picked else {
            return Ok(LeaseAttempt::Empty);
        };

        let lease_id = LeaseId::generate();
        let taken: Option<(i64, String)> = sqlx::query_as(
            "UPDATE jobs SET state = 'leased', attempt = attempt + 1, lease_id = $1, lease_runner_id = $2,
                 lease_expires_at = $3, started_at = $4
             WHERE id = $5 AND state = 'queued' RETURNING attempt, spec",
        )
        .bind(lease_id.as_str())
        .bind(runner.as_str())
        .bind(now + ttl_ms as i64)
        .bind(now)
        .bind(&job_id)
        .fetch_optional(&mut *tx)
        .await?;
        // Only `WHERE state = 'queued'` moves a job out of the queue; with the
        // candidate locked (or the one writer) this always finds it.
        let Some((attempt, spec)) = taken else {
            return Ok(LeaseAttempt::Empty);
        };
        // (`last_seen_at` is kept by the lease handler, at most every few seconds.)
        tx.commit().await?;

        let spec: JobSpec = serde_json::from_str(&spec)?;
        Ok(LeaseAttempt::Leased {
            lease: Box::new(wire::Lease {
                lease_id: lease_id.to_string(),
                ttl_ms,
                job: wire::LeasedJob {
                    id: job_id,
                    attempt: attempt as u32,
                    command: spec.command,
                    script: spec.script,
                    env: spec.env,
                    timeout_seconds: spec.timeout_seconds,
                    image: spec.image,
                },
            }),
            next,
        })
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
        let cancel: Option<i64> = sqlx::query_scalar(
            "UPDATE jobs SET lease_expires_at = $1, state = CASE WHEN state = 'leased' THEN 'running' ELSE state END
             WHERE lease_id = $2 AND lease_runner_id = $3 AND state IN ('leased', 'running')
             RETURNING cancel_requested",
        )
        .bind(now + ttl_ms as i64)
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
    pub async fn complete(
        &self,
        runner: &RunnerId,
        lease: &str,
        done: &wire::Complete,
        now: i64,
    ) -> Result<Completion> {
        let mut tx = self.writer.begin().await?;
        #[derive(FromRow)]
        struct Row {
            id: String,
            state: String,
            lease_runner_id: Option<String>,
            attempt: i64,
            cancel_requested: i64,
            started_at: Option<i64>,
            workspace_id: String,
            owner_member_id: Option<String>,
            workspace_name: String,
        }
        let row = sqlx::query_as::<_, Row>(&format!(
            "SELECT j.id, j.state, j.lease_runner_id, j.attempt, j.cancel_requested, j.started_at, j.workspace_id,
                    rt.owner_member_id, w.name AS workspace_name
             FROM jobs j JOIN runners r ON r.id = j.lease_runner_id JOIN runtimes rt ON rt.id = r.runtime_id
                         JOIN workspaces w ON w.id = j.workspace_id
             WHERE j.lease_id = $1 {}",
            self.dialect.lock_job_row
        ))
        .bind(lease)
        .fetch_optional(&mut *tx)
        .await?
        .filter(|r| r.lease_runner_id.as_deref() == Some(runner.as_str()))
        .ok_or_else(Error::lease_lost)?;
        let current = JobState::parse(&row.state)
            .ok_or_else(|| Error::Corrupt(format!("job state {}", row.state)))?;
        if current.is_terminal() {
            return Ok(Completion {
                job_id: JobId::from_db(row.id),
                state: current,
                repeated: true,
            });
        }
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
        sqlx::query(
            "UPDATE jobs SET state = $1, exit_code = $2, error = $3, ran_by = $4, ran_by_owner = $5, finished_at = $6, lease_expires_at = NULL
             WHERE id = $7",
        )
        .bind(state.as_str())
        .bind(done.exit_code.map(i64::from))
        .bind(error)
        .bind(runner.as_str())
        .bind(&payer)
        .bind(now)
        .bind(&row.id)
        .execute(&mut *tx)
        .await?;
        let runner_ms = (now - row.started_at.unwrap_or(now)).max(0);
        let billed = sqlx::query(
            "INSERT INTO usage (job_id, attempt, workspace_id, payer, charged, runner_ms, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (job_id, attempt) DO NOTHING",
        )
        .bind(&row.id)
        .bind(row.attempt)
        .bind(&row.workspace_id)
        .bind(&payer)
        .bind(charged)
        .bind(runner_ms)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if billed.rows_affected() == 1 && charged == 1 {
            sqlx::query("UPDATE workspaces SET spent_ms = spent_ms + $1 WHERE id = $2")
                .bind(runner_ms)
                .bind(&row.workspace_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Completion {
            job_id: JobId::from_db(row.id),
            state,
            repeated: false,
        })
    }

    /// Releases every lease whose time ran out before `now`.
    pub async fn expire_leases(&self, now: i64) -> Result<Vec<(JobId, Option<Wake>)>> {
        let mut tx = self.writer.begin().await?;
        let held = sqlx::query_as::<_, Held>(&format!(
            "SELECT {HELD_COLUMNS} FROM jobs WHERE state IN ('leased', 'running') AND lease_expires_at < $1 {}",
            self.dialect.lock_skip_locked
        ))
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        if held.is_empty() {
            return Ok(Vec::new());
        }
        let out = release(&mut tx, held, now).await?;
        tx.commit().await?;
        Ok(out)
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

    /// When the next live lease expires, if any.
    pub async fn next_expiry(&self) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT MIN(lease_expires_at) FROM jobs WHERE state IN ('leased', 'running')",
        )
        .fetch_one(&self.reader)
        .await?)
    }
}
