//! Jobs: validate, read, list, cancel, logs, and the workspace budget
//! (submitting them is `submit`).

use drover_domain::job::JobState;
use serde_json::json;

use super::audit::{Actor, record};
use super::job_row::{JOB_COLUMNS, JobRow};
use super::model::Job;
use super::preview::{self, JobPage, ListRow};
use super::sqlite_writer::Cols;
use super::{Member, Store};
use crate::ids::{JobId, LeaseId};
use crate::store::backend::FromCols;
use crate::store::error::{Error, Result};

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

#[derive(Debug)]
pub struct LogRow {
    pub attempt: i64,
    pub seq: i64,
    pub stream: String,
    pub data: String,
}

impl FromCols for LogRow {
    fn from_cols(row: &impl Cols) -> Result<Self> {
        Ok(Self {
            attempt: row.col(0)?,
            seq: row.col(1)?,
            stream: row.col(2)?,
            data: row.col(3)?,
        })
    }
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
        const SQL: &str = "WITH picked AS (
                SELECT attempt, seq,
                       SUM(length(data)) OVER (ORDER BY attempt, seq) - length(data) AS earlier
                FROM job_logs
                WHERE job_id = $1 AND (attempt > $2 OR (attempt = $2 AND seq > $3))
                ORDER BY attempt, seq LIMIT $4)
             SELECT l.attempt, l.seq, l.stream, l.data
             FROM picked p JOIN job_logs l ON l.job_id = $1 AND l.attempt = p.attempt AND l.seq = p.seq
             WHERE p.earlier < $5
             ORDER BY l.attempt, l.seq";
        let (attempt, seq) = after.unwrap_or((-1, -1));
        let args = vec![
            job.into(),
            attempt.into(),
            seq.into(),
            i64::from(limit).into(),
            i64::try_from(max_chars).unwrap_or(i64::MAX).into(),
        ];
        self.engine.read(self, SQL, args).await
    }

    /// The job's state as seen now (for log followers).
    pub async fn job_state(&self, job: &str) -> Result<JobState> {
        Ok(self.job_state_and_exit(job).await?.0)
    }

    /// The job's state as seen now and its exit code (for log followers:
    /// a stream that ends with the job says how it ended).
    pub async fn job_state_and_exit(&self, job: &str) -> Result<(JobState, Option<i64>)> {
        const SQL: &str = "SELECT state, exit_code FROM jobs WHERE id = $1";
        let (state, exit_code): (String, Option<i64>) = self
            .engine
            .read(self, SQL, vec![job.into()])
            .await?
            .pop()
            .ok_or(Error::Internal("a job being followed is gone"))?;
        let state =
            JobState::parse(&state).ok_or_else(|| Error::Corrupt(format!("job state {state}")))?;
        Ok((state, exit_code))
    }
}
