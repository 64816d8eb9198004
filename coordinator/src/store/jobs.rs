//! Jobs: validate, read, list, cancel, logs, and the workspace budget
//! (submitting them is `submit`).

use drover_wire::{self as wire, ErrorCode, JobState};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::FromRow;

use super::audit::{Actor, record};
use super::model::{Job, Provenance};
use super::preview::{self, JobPage, ListRow};
use super::sqlite_writer::Cols;
use super::{Member, Store, json_list};
use crate::caps;
use crate::error::{Error, Result};
use crate::ids::{JobId, LeaseId, RunnerId, RuntimeId};
use crate::refs::RuntimeRef;
use crate::store::backend::FromCols;

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
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

pub(super) const JOB_COLUMNS: &str = "j.id, j.state, j.runtime_ref, j.runtime_id, j.pinned_runner_id, j.submitter_id,
    j.priority, j.requires, j.spec, j.attempt, j.max_attempts, j.exit_code, j.error, j.cancel_requested,
    j.ran_by, j.ran_by_owner, j.created_at, j.started_at, j.finished_at";

/// Jobs `member` may see (SPEC §9): a person (member or admin) sees their
/// own and any on a workspace-owned pool; a CI principal only the jobs its
/// repository submitted. Takes (workspace, member) as parameters `$first`
/// and `$first + 1`.
fn visible(first: usize, member: &Member) -> String {
    let (workspace, submitter) = (first, first + 1);
    if member.ci {
        return format!("j.workspace_id = ${workspace} AND j.submitter_id = ${submitter}");
    }
    format!(
        "j.workspace_id = ${workspace} AND (j.submitter_id = ${submitter} OR j.runtime_id IN
         (SELECT id FROM runtimes WHERE workspace_id = j.workspace_id AND owner_member_id IS NULL))"
    )
}

impl JobRow {
    /// A row of [`JOB_COLUMNS`], by position.
    pub fn from_cols(row: &impl Cols) -> Result<Self> {
        Ok(Self {
            id: row.col(0)?,
            state: row.col(1)?,
            runtime_ref: row.col(2)?,
            runtime_id: row.col(3)?,
            pinned_runner_id: row.col(4)?,
            submitter_id: row.col(5)?,
            priority: row.col(6)?,
            requires: row.col(7)?,
            spec: row.col(8)?,
            attempt: row.col(9)?,
            max_attempts: row.col(10)?,
            exit_code: row.col(11)?,
            error: row.col(12)?,
            cancel_requested: row.col(13)?,
            ran_by: row.col(14)?,
            ran_by_owner: row.col(15)?,
            created_at: row.col(16)?,
            started_at: row.col(17)?,
            finished_at: row.col(18)?,
        })
    }

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
            started_at: self.started_at,
            finished_at: self.finished_at,
            spec_truncated: false,
        })
    }
}

impl FromCols for JobRow {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        JobRow::from_cols(row)
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
    pub async fn get_job(&self, member: &Member, id: &str) -> Result<Job> {
        let not_found = || Error::not_found(format!("no job {id:?}"));
        let id = JobId::parse(id).ok_or_else(not_found)?;
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs j WHERE j.id = $1 AND {}",
            visible(2, member)
        );
        let (workspace, submitter) = (member.workspace_id.as_str(), member.id.as_str());
        let args = vec![id.as_str().into(), workspace.into(), submitter.into()];
        let row = self.engine.read::<JobRow>(self, &sql, args).await?.pop();
        row.ok_or_else(not_found)?.into_job()
    }

    /// A page of the jobs `member` may see, newest first: at most `limit`
    /// of them, and fewer when their text would pass `budget` bytes. Each
    /// carries a preview of its command or script (see `preview`): its
    /// summary, or a small spec whole, or an older job's spec's first
    /// characters; a page never reads a whole megabyte command. `before`:
    /// the previous page's `next`.
    pub async fn list_jobs(
        &self,
        member: &Member,
        state: Option<JobState>,
        before: Option<i64>,
        limit: u32,
        budget: usize,
    ) -> Result<JobPage> {
        use futures_util::TryStreamExt as _;
        let filter = if state.is_some() {
            "AND j.state = $5"
        } else {
            ""
        };
        let head = preview::SPEC_PREFIX_CHARS;
        let sql = format!(
            "SELECT {}, j.seq, j.summary,
                    CAST(CASE WHEN j.summary IS NULL THEN length(j.spec) ELSE 0 END AS BIGINT) AS spec_chars
             FROM jobs j
             WHERE {} AND j.seq < $3 {filter} ORDER BY j.seq DESC LIMIT $4",
            JOB_COLUMNS.replace(
                "j.spec,",
                &format!("CASE WHEN j.summary IS NULL THEN substr(j.spec, 1, {head}) ELSE '' END AS spec,")
            ),
            visible(1, member)
        );
        let mut q = sqlx::query_as::<_, ListRow>(&sql)
            .bind(member.workspace_id.as_str())
            .bind(member.id.as_str())
            .bind(before.unwrap_or(i64::MAX))
            .bind(i64::from(limit) + 1);
        if let Some(state) = state {
            q = q.bind(state.as_str());
        }
        // Row by row, so that a page past its budget stops reading.
        let mut rows = q.fetch(&self.reader);
        let (mut jobs, mut used, mut more) = (Vec::new(), 0, false);
        while let Some(row) = rows.try_next().await? {
            let size = row.approx_size();
            if jobs.len() == limit as usize || (!jobs.is_empty() && used + size > budget) {
                more = true;
                break;
            }
            used += size;
            jobs.push(row.into_listed()?);
        }
        let next = if more {
            jobs.last().map(|j: &preview::ListedJob| j.cursor)
        } else {
            None
        };
        Ok(JobPage { jobs, next })
    }

    pub async fn cancel_job(&self, member: &Member, id: &str, now: i64) -> Result<CancelOutcome> {
        let job = self.get_job(member, id).await?; // visibility check, 404 otherwise
        let mut tx = self.writer.begin().await?;
        let dequeued = sqlx::query("UPDATE jobs SET state = 'cancelled', finished_at = $1, cancel_requested = 1 WHERE id = $2 AND state = 'queued'")
            .bind(now)
            .bind(job.id.as_str())
            .execute(&mut *tx)
            .await?;
        let audit = |was: &'static str| json!({ "was": was });
        if dequeued.rows_affected() == 1 {
            let (who, id) = (Actor::Member(member), job.id.as_str());
            record(&mut tx, who, "job.cancelled", id, audit("queued"), now).await?;
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
            let (who, id) = (Actor::Member(member), job.id.as_str());
            record(&mut tx, who, "job.cancelled", id, audit("running"), now).await?;
            tx.commit().await?;
            return Ok(CancelOutcome::Signalled(LeaseId::from_db(lease)));
        }
        // Gone since it was read: retention purged it meanwhile.
        let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
            .bind(job.id.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| Error::not_found(format!("no job {:?}", job.id.as_str())))?;
        if state == JobState::Cancelled.as_str() {
            Ok(CancelOutcome::AlreadyCancelled)
        } else {
            Err(Error::conflict(format!(
                "job {} already finished ({state})",
                job.id
            )))
        }
    }

    /// Log chunks after `after` (attempt, seq), in order: at most `limit`
    /// of them, and no more once `max_chars` characters are reached (one
    /// at least), so that a batch of big chunks is not read at once.
    pub async fn read_logs(
        &self,
        job: &str,
        after: Option<(i64, i64)>,
        limit: u32,
        max_chars: usize,
    ) -> Result<Vec<LogRow>> {
        let (attempt, seq) = after.unwrap_or((-1, -1));
        Ok(sqlx::query_as::<_, LogRow>(
            "WITH picked AS (
                SELECT attempt, seq,
                       SUM(length(data)) OVER (ORDER BY attempt, seq) - length(data) AS earlier
                FROM job_logs
                WHERE job_id = $1 AND (attempt > $2 OR (attempt = $2 AND seq > $3))
                ORDER BY attempt, seq LIMIT $4)
             SELECT l.attempt, l.seq, l.stream, l.data
             FROM picked p JOIN job_logs l ON l.job_id = $1 AND l.attempt = p.attempt AND l.seq = p.seq
             WHERE p.earlier < $5
             ORDER BY l.attempt, l.seq",
        )
        .bind(job)
        .bind(attempt)
        .bind(seq)
        .bind(i64::from(limit))
        .bind(i64::try_from(max_chars).unwrap_or(i64::MAX))
        .fetch_all(&self.reader)
        .await?)
    }

    /// The job's state as seen now (for log followers).
    pub async fn job_state(&self, job: &str) -> Result<JobState> {
        const SQL: &str = "SELECT state FROM jobs WHERE id = $1";
        let state: String = self
            .engine
            .read(self, SQL, vec![job.into()])
            .await?
            .pop()
            .ok_or(Error::Internal("a job being followed is gone"))?;
        JobState::parse(&state).ok_or_else(|| Error::Corrupt(format!("job state {state}")))
    }
}
