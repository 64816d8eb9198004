//! Budgets per calendar month (UTC) and usage reports. Each attempt a
//! runner completes is one usage line (`(job, attempt)` is its key, so a
//! retried complete adds nothing); a trigger adds workspace-paid lines to
//! the workspace's total for their month, which the budget check at submit
//! reads as one row (see `submit`).

use serde_json::json;

use super::audit::{Actor, record};
use super::model::{Usage, UsageLine};
use super::{Member, Store};
use crate::billing::Month;
use crate::store::error::{Error, Result};

/// What a usage report adds up by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageBy {
    Pool,
    Member,
    Runner,
}

impl UsageBy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pool" => Some(Self::Pool),
            "member" => Some(Self::Member),
            "runner" => Some(Self::Runner),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pool => "pool",
            Self::Member => "member",
            Self::Runner => "runner",
        }
    }
}

/// Whose usage a report covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageOf {
    /// The whole workspace (admins).
    Workspace,
    /// The jobs the member submitted, wherever they ran.
    Mine,
}

/// Largest monthly budget, in runner-minutes (about 190,000 runner-years).
const MAX_BUDGET_MINUTES: u64 = 100_000_000_000;

impl Store {
    /// Sets the workspace's monthly budget in runner-minutes (`None`: no limit).
    pub async fn set_budget(
        &self,
        member: &Member,
        monthly_minutes: Option<u64>,
        now: i64,
    ) -> Result<()> {
        if monthly_minutes.is_some_and(|m| m > MAX_BUDGET_MINUTES) {
            return Err(Error::bad_request(format!(
                "monthlyMinutes must be at most {MAX_BUDGET_MINUTES}"
            )));
        }
        let budget_ms = monthly_minutes.map(|m| m as i64 * 60_000);
        let mut tx = self.writer.begin().await?;
        sqlx::query("UPDATE workspaces SET budget_ms = $1 WHERE id = $2")
            .bind(budget_ms)
            .bind(member.workspace_id.as_str())
            .execute(&mut *tx)
            .await?;
        record(
            &mut tx,
            Actor::Member(member),
            "budget.set",
            member.workspace_id.as_str(),
            json!({ "monthlyMinutes": monthly_minutes }),
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The workspace's budget and what it used in the month of `now`.
    pub async fn usage(&self, member: &Member, now: i64) -> Result<Usage> {
        let month = Month::of(now);
        let (budget, charged_ms, own_ms, charged_n, own_n): (Option<i64>, i64, i64, i64, i64) =
            sqlx::query_as(
                "SELECT w.budget_ms,
                    CAST(COALESCE(SUM(CASE WHEN u.charged = 1 THEN u.runner_ms END), 0) AS BIGINT),
                    CAST(COALESCE(SUM(CASE WHEN u.charged = 0 THEN u.runner_ms END), 0) AS BIGINT),
                    COUNT(CASE WHEN u.charged = 1 THEN 1 END),
                    COUNT(CASE WHEN u.charged = 0 THEN 1 END)
                 FROM workspaces w LEFT JOIN usage u ON u.workspace_id = w.id AND u.month = $2
                 WHERE w.id = $1 GROUP BY w.id, w.budget_ms",
            )
            .bind(member.workspace_id.as_str())
            .bind(month.0)
            .fetch_one(&self.reader)
            .await?;
        Ok(Usage {
            workspace: member.workspace_name.clone(),
            month,
            budget_ms: budget,
            charged_ms: charged_ms as u64,
            own_pays_ms: own_ms as u64,
            jobs_charged: charged_n as u64,
            jobs_own_pays: own_n as u64,
        })
    }

    /// Usage in `month`, one line per pool, member or runner, largest first.
    pub async fn usage_report(
        &self,
        member: &Member,
        of: UsageOf,
        month: Month,
        by: UsageBy,
    ) -> Result<Vec<UsageLine>> {
        let (key, name, join) = match by {
            UsageBy::Pool => (
                "u.runtime_id",
                "CASE WHEN rt.owner_member_id IS NULL THEN 'self:ws:' || rt.name
                      ELSE 'self:' || rt.owner_member_id || ':' || rt.name END",
                "LEFT JOIN runtimes rt ON rt.id = u.runtime_id",
            ),
            UsageBy::Member => (
                "u.submitter_id",
                "m.email",
                "LEFT JOIN members m ON m.id = u.submitter_id",
            ),
            UsageBy::Runner => (
                "u.runner_id",
                "r.name",
                "LEFT JOIN runners r ON r.id = u.runner_id",
            ),
        };
        let mine = match of {
            UsageOf::Workspace => "",
            UsageOf::Mine => "AND u.submitter_id = $3",
        };
        let sql = format!(
            "SELECT COALESCE({key}, '') AS id, COALESCE(MAX({name}), '') AS name,
                    CAST(SUM(u.runner_ms) AS BIGINT) AS runner_ms,
                    CAST(SUM(CASE WHEN u.charged = 1 THEN u.runner_ms ELSE 0 END) AS BIGINT) AS charged_ms,
                    COUNT(*) AS attempts
             FROM usage u {join}
             WHERE u.workspace_id = $1 AND u.month = $2 {mine}
             GROUP BY {key} ORDER BY runner_ms DESC, id"
        );
        let mut q = sqlx::query_as::<_, (String, String, i64, i64, i64)>(&sql)
            .bind(member.workspace_id.as_str())
            .bind(month.0);
        if of == UsageOf::Mine {
            q = q.bind(member.id.as_str());
        }
        let rows = q.fetch_all(&self.reader).await?;
        Ok(rows
            .into_iter()
            .map(|(id, name, runner_ms, charged_ms, attempts)| UsageLine {
                id,
                name,
                runner_ms: runner_ms.max(0) as u64,
                charged_ms: charged_ms.max(0) as u64,
                attempts: attempts.max(0) as u64,
            })
            .collect())
    }
}
