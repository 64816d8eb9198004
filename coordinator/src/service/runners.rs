//! Pairing, listing and revoking runners.

use drover_wire as wire;

use super::{Scope, Services, dto};
use crate::error::Result;
use crate::ids::JobId;
use crate::store::{Member, Owner, RunnerScope};
use crate::wake::{Signal, Wake};

/// Pairs a runner to one of the member's pools, or (admins) the
/// workspace's: its credential, shown once.
pub async fn pair(
    svc: &Services,
    m: &Member,
    scope: Scope,
    req: wire::PairRunner,
) -> Result<wire::PairedRunner> {
    let owner = scope.admin_owner(m)?;
    let paired = svc
        .store
        .pair_runner(m, &owner, &req.into(), svc.now())
        .await?;
    Ok(paired.into())
}

/// The member's own runners, the workspace's roster (every runner the
/// member may see), or the workspace-owned runners.
pub async fn list(svc: &Services, m: &Member, which: RunnerScope) -> Result<wire::RunnerList> {
    let runners = svc.store.list_runners(m, which, svc.now()).await?;
    Ok(wire::RunnerList {
        runners: dto::all(runners),
    })
}

/// Revokes a runner; a workspace runner registered with GitHub loses its
/// GitHub runner too, and the answer says what GitHub did.
pub async fn revoke(
    svc: &Services,
    m: &Member,
    scope: Scope,
    id: &str,
) -> Result<Option<wire::RevokedRunner>> {
    let owner = scope.admin_owner(m)?;
    let github = match owner {
        Owner::Workspace => svc.store.github_runner(&m.workspace_id, id).await?,
        Owner::Member(_) => None,
    };
    let changed = svc.store.revoke_runner(m, &owner, id, svc.now()).await?;
    svc.announce(revoked_signals(changed, id));
    Ok(match github {
        None => None,
        Some(row) => Some(wire::RevokedRunner {
            github: super::github::remove_github_runner(svc, &row).await,
        }),
    })
}

/// What revoking runner `id` tells this coordinator and the others: the
/// jobs that changed, who to wake for them, and that its credential is gone
/// (so no cache keeps it).
pub fn revoked_signals(changed: Vec<(JobId, Option<Wake>)>, id: &str) -> Vec<Signal> {
    let mut signals = Vec::new();
    for (job, wake) in changed {
        signals.push(Signal::Job {
            job: job.to_string(),
        });
        signals.extend(wake.map(Signal::from));
    }
    signals.push(Signal::Revoked {
        runner: id.to_owned(),
    });
    signals
}
