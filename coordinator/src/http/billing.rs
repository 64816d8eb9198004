//! The workspace's monthly budget, this month's usage, and usage reports
//! (JSON, or CSV with `Accept: text/csv`).

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use drover_wire as wire;

use super::extract::{AuthMember, Json, Query};
use super::{AppState, Routes as _};
use crate::error::Result;
use crate::service::billing;
use crate::service::dto;
use crate::store::UsageOf;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::SetBudget, set_budget)
        .at(op::GetUsage, usage)
        .at(op::GetWorkspaceUsageReport, workspace_report)
        .at(op::GetMyUsageReport, my_report)
}

pub(super) async fn set_budget(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::SetBudget>,
) -> Result<axum::Json<wire::Usage>> {
    Ok(axum::Json(billing::set_budget(&st, &m, req).await?))
}

pub(super) async fn usage(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::Usage>> {
    Ok(axum::Json(billing::usage(&st, &m).await?))
}

pub(super) async fn workspace_report(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    headers: HeaderMap,
    Query(q): Query<wire::UsageReportQuery>,
) -> Result<Response> {
    report(&st, &m, UsageOf::Workspace, &headers, q).await
}

pub(super) async fn my_report(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    headers: HeaderMap,
    Query(q): Query<wire::UsageReportQuery>,
) -> Result<Response> {
    report(&st, &m, UsageOf::Mine, &headers, q).await
}

async fn report(
    st: &AppState,
    m: &crate::store::Member,
    of: UsageOf,
    headers: &HeaderMap,
    q: wire::UsageReportQuery,
) -> Result<Response> {
    let report = dto::usage_report(billing::report(st, m, of, &q).await?);
    if wants_csv(headers) {
        let mut response = billing::csv(&report).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/csv; charset=utf-8"),
        );
        return Ok(response);
    }
    Ok(axum::Json(report).into_response())
}

/// `Accept: text/csv` (alone, or preferred over JSON by its place).
fn wants_csv(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    for kind in accept.split(',') {
        let essence = kind.split(';').next().unwrap_or("").trim();
        if essence.eq_ignore_ascii_case("text/csv") {
            return true;
        }
        if essence.eq_ignore_ascii_case("application/json") {
            return false;
        }
    }
    false
}
