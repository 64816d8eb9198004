//! A job's row, as every reader of jobs decodes it (`JOB_COLUMNS`).

use drover_domain::job::{JobSpec, JobState};
use sqlx::FromRow;

use super::json_list;
use super::model::{Job, Provenance};
use super::sqlite_writer::Cols;
use crate::ids::{JobId, RunnerId, RuntimeId};
use crate::store::backend::FromCols;
use crate::store::error::{Error, Result};

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
