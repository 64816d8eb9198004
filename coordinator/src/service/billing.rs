//! The monthly budget, this month's usage, and usage reports: a month's
//! usage by pool, member or runner, as data and as CSV (RFC 4180).

use drover_wire as wire;

use super::Services;
use crate::billing::Month;
use crate::error::{Error, Result};
use crate::store::model::UsageLine;
use crate::store::{Member, UsageBy, UsageOf};

/// A report's month, grouping and lines.
pub struct Report {
    pub month: Month,
    pub by: UsageBy,
    pub lines: Vec<UsageLine>,
}

/// Sets the workspace's budget per calendar month, in runner-minutes
/// (`None`: no limit); answers this month's usage with it.
pub async fn set_budget(svc: &Services, m: &Member, req: wire::SetBudget) -> Result<wire::Usage> {
    m.require_admin()?;
    let now = svc.now();
    svc.store.set_budget(m, req.monthly_minutes, now).await?;
    Ok(svc.store.usage(m, now).await?.into())
}

/// The workspace's usage this month, and its budget.
pub async fn usage(svc: &Services, m: &Member) -> Result<wire::Usage> {
    Ok(svc.store.usage(m, svc.now()).await?.into())
}

/// The workspace's report (admins) or the member's own jobs'.
pub async fn report(
    svc: &Services,
    member: &Member,
    of: UsageOf,
    q: &wire::UsageReportQuery,
) -> Result<Report> {
    if of == UsageOf::Workspace {
        member.require_admin()?;
    }
    let month = match q.month.as_deref() {
        None => Month::of(svc.now()),
        Some(s) => Month::parse(s).ok_or_else(|| {
            Error::bad_request(format!("month must be YYYY-MM (1970-9999), not {s:?}"))
        })?,
    };
    let by = match q.by.as_deref() {
        None => UsageBy::Pool,
        Some(s) => UsageBy::parse(s).ok_or_else(|| {
            Error::bad_request(format!("by must be pool, member or runner, not {s:?}"))
        })?,
    };
    let lines = svc.store.usage_report(member, of, month, by).await?;
    Ok(Report { month, by, lines })
}

/// A usage report as CSV (RFC 4180): a header, then one line per pool,
/// member or runner.
pub fn csv(report: &wire::UsageReport) -> String {
    fn field(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_owned()
        }
    }
    let mut out = format!(
        "month,{by}_id,{by},runner_ms,charged_ms,attempts\r\n",
        by = report.by
    );
    for l in &report.lines {
        out.push_str(&format!(
            "{},{},{},{},{},{}\r\n",
            report.month,
            field(&l.id),
            field(&l.name),
            l.runner_ms,
            l.charged_ms,
            l.attempts
        ));
    }
    out
}
