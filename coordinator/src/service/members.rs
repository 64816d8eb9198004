//! The workspace's members, for its admins, and its audit log.

use drover_wire as wire;

use super::{Services, dto};
use crate::error::Result;
use crate::store::model::Removed;
use crate::store::{AuditQuery, Member};
use crate::wake::Signal;

pub async fn list(svc: &Services, m: &Member) -> Result<wire::MemberList> {
    m.require_admin()?;
    let members = svc.store.list_members(m, svc.now()).await?;
    Ok(wire::MemberList {
        members: dto::all(members),
    })
}

/// A one-time invite code (and link) for `req.email`.
pub async fn invite(svc: &Services, m: &Member, req: wire::InviteMember) -> Result<wire::Invite> {
    m.require_admin()?;
    let (member, code) = svc
        .store
        .invite_member(m, &req.email, req.role.as_deref(), svc.now())
        .await?;
    Ok(dto::invite(member, code, &svc.public_url))
}

pub async fn update(
    svc: &Services,
    m: &Member,
    id: &str,
    req: wire::UpdateMember,
) -> Result<wire::Member> {
    m.require_admin()?;
    let member = svc.store.update_member(m, id, &req.role, svc.now()).await?;
    Ok(member.into())
}

/// Removes a member. Their tokens fail at once on every replica (member
/// tokens are read from the database on each request); their runners'
/// credentials are dropped from every replica's cache by the signals.
pub async fn remove(svc: &Services, m: &Member, id: &str) -> Result<()> {
    m.require_admin()?;
    let removed = svc.store.remove_member(m, id, svc.now()).await?;
    svc.announce(removed_signals(removed));
    Ok(())
}

/// What revoking runners and jobs tells this coordinator and the others.
pub(super) fn removed_signals(removed: Removed) -> Vec<Signal> {
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
    signals
}

pub async fn audit(svc: &Services, m: &Member, q: wire::AuditQuery) -> Result<wire::AuditPage> {
    m.require_admin()?;
    let query = AuditQuery {
        since: q.since,
        actor: q.actor,
        action: q.action,
        before: q.before,
        limit: q.limit,
    };
    let (events, next) = svc.store.list_audit(m, &query).await?;
    Ok(wire::AuditPage {
        events: dto::all(events),
        next_before: next.map(|n| n.to_string()),
    })
}
