//! The workspace's members, for its admins (`/v1/workspace/members`), and
//! its audit log (`/v1/workspace/audit`).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drover_wire as wire;

use super::dto;
use super::extract::{AuthMember, Json, Query};
use super::{AppState, Routes as _};
use crate::error::Result;
use crate::store::AuditQuery;
use crate::wake::Signal;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::ListMembers, list)
        .at(op::InviteMember, invite)
        .at(op::UpdateMember, update)
        .at(op::RemoveMember, remove)
        .at(op::ListAuditEvents, audit)
}

pub(super) async fn list(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::MemberList>> {
    m.require_admin()?;
    let members = st.store.list_members(&m, st.now()).await?;
    Ok(axum::Json(wire::MemberList {
        members: dto::all(members),
    }))
}

pub(super) async fn invite(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Json(req): Json<wire::InviteMember>,
) -> Result<impl IntoResponse> {
    m.require_admin()?;
    let (member, code) = st
        .store
        .invite_member(&m, &req.email, req.role.as_deref(), st.now())
        .await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(dto::invite(member, code, &st.public_url)),
    ))
}

pub(super) async fn update(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
    Json(req): Json<wire::UpdateMember>,
) -> Result<axum::Json<wire::Member>> {
    m.require_admin()?;
    let member = st.store.update_member(&m, &id, &req.role, st.now()).await?;
    Ok(axum::Json(member.into()))
}

/// Removes a member. Their tokens fail at once on every replica (member
/// tokens are read from the database on each request); their runners'
/// credentials are dropped from every replica's cache by the signals.
pub(super) async fn remove(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    m.require_admin()?;
    let removed = st.store.remove_member(&m, &id, st.now()).await?;
    let mut signals = Vec::new();
    for (job, wake) in removed.jobs {
        signals.push(Signal::Job {
            job: job.to_string(),
        });
        signals.extend(wake.map(Signal::from));
    }
    for lease in removed.cancels {
        signals.push(Signal::Cancel {
            lease: lease.to_string(),
        });
    }
    for runner in removed.runners {
        signals.push(Signal::Revoked {
            runner: runner.to_string(),
        });
    }
    st.announce(signals);
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn audit(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Query(q): Query<wire::AuditQuery>,
) -> Result<axum::Json<wire::AuditPage>> {
    m.require_admin()?;
    let query = AuditQuery {
        since: q.since,
        actor: q.actor,
        action: q.action,
        before: q.before,
        limit: q.limit,
    };
    let (events, next) = st.store.list_audit(&m, &query).await?;
    Ok(axum::Json(wire::AuditPage {
        events: dto::all(events),
        next_before: next.map(|n| n.to_string()),
    }))
}
