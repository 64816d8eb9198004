//! The wire shapes of the domain's models (`drover_domain::model`): what
//! the coordinator answers is built from what its store returns here, so
//! the services convert with `.into()` and no module writes it twice.

use drover_domain::model;

use crate as wire;

impl From<model::Job> for wire::Job {
    fn from(job: model::Job) -> Self {
        Self {
            id: job.id.to_string(),
            state: job.state,
            runtime: job.runtime_ref,
            runtime_id: job.runtime_id.to_string(),
            pinned_runner: job.pinned_runner.map(|r| r.to_string()),
            // A CI principal's id is already `ci:<owner>/<repo>`.
            submitted_by: if job.submitter_id.as_str().starts_with("ci:") {
                job.submitter_id.to_string()
            } else {
                format!("user:{}", job.submitter_id)
            },
            command: job.spec.command,
            script: job.spec.script,
            requires: job.requires,
            priority: job.priority,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            exit_code: job.exit_code,
            error: job.error,
            cancel_requested: job.cancel_requested,
            provenance: job.provenance.map(|p| wire::Provenance {
                ran_by: p.ran_by,
                by: p.by,
                ran_on: "self-hosted".into(),
                attempt: p.attempt,
            }),
            created_at: job.created_at,
            // A queued job (again, after a lost lease) has not started.
            started_at: job
                .started_at
                .filter(|_| job.state != wire::JobState::Queued),
            finished_at: job.finished_at,
            truncated: job.spec_truncated,
        }
    }
}

impl From<model::Usage> for wire::Usage {
    fn from(u: model::Usage) -> Self {
        Self {
            workspace: u.workspace,
            month: u.month.to_string(),
            monthly_minutes: u.budget_ms.map(|b| (b / 60_000) as u64),
            resets_at: u.month.next().start_ms(),
            charged_ms: u.charged_ms,
            own_pays_ms: u.own_pays_ms,
            jobs_charged: u.jobs_charged,
            jobs_own_pays: u.jobs_own_pays,
        }
    }
}

impl From<model::UsageLine> for wire::UsageLine {
    fn from(l: model::UsageLine) -> Self {
        Self {
            id: l.id,
            name: l.name,
            runner_ms: l.runner_ms,
            charged_ms: l.charged_ms,
            attempts: l.attempts,
        }
    }
}

impl From<model::Runtime> for wire::Runtime {
    fn from(r: model::Runtime) -> Self {
        Self {
            id: r.id.to_string(),
            name: r.name,
            owner: r.owner,
            reference: r.reference,
            runners: r.runners,
            created_at: r.created_at,
        }
    }
}

impl From<model::Runner> for wire::Runner {
    fn from(r: model::Runner) -> Self {
        Self {
            id: r.id.to_string(),
            name: r.name,
            owner: r.owner,
            runtime_id: r.runtime_id.to_string(),
            runtime_name: r.runtime_name,
            capabilities: r.capabilities,
            online: r.online,
            paused: r.paused,
            last_seen_at: r.last_seen_at,
            current_jobs: r.current_jobs,
            created_at: r.created_at,
        }
    }
}

impl From<model::ListedJoinToken> for wire::JoinTokenSummary {
    fn from(t: model::ListedJoinToken) -> Self {
        Self {
            id: t.id.to_string(),
            runtime_id: t.runtime_id.to_string(),
            pool: t.pool,
            reference: t.reference,
            minted_by: t.minted_by.map(|m| m.to_string()),
            minted_by_email: t.minted_by_email,
            created_at: t.created_at,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
            uses: t.uses,
        }
    }
}

impl From<model::DeviceToken> for wire::DeviceToken {
    fn from(d: model::DeviceToken) -> Self {
        Self {
            token: d.token.expose().to_owned(),
            token_id: d.token_id.to_string(),
            name: d.name,
            workspace: d.member.workspace_name,
            email: d.member.email,
            subject: d.member.id.to_string(),
            role: d.member.role.as_str().to_owned(),
        }
    }
}

impl From<model::ApiToken> for wire::ApiToken {
    fn from(t: model::ApiToken) -> Self {
        Self {
            id: t.id.to_string(),
            name: t.name,
            created_at: t.created_at,
            last_used_at: t.last_used_at,
            current: t.current,
        }
    }
}

impl From<model::MemberInfo> for wire::Member {
    fn from(m: model::MemberInfo) -> Self {
        Self {
            id: m.id.to_string(),
            email: m.email,
            role: m.role.as_str().to_owned(),
            status: if m.joined { "active" } else { "invited" }.to_owned(),
            created_at: m.created_at,
            tokens: m
                .tokens
                .into_iter()
                .map(|t| wire::MemberToken {
                    id: t.id.to_string(),
                    name: t.name,
                    created_at: t.created_at,
                    last_used_at: t.last_used_at,
                })
                .collect(),
        }
    }
}

impl From<model::AuditEvent> for wire::AuditEvent {
    fn from(e: model::AuditEvent) -> Self {
        Self {
            id: e.seq.to_string(),
            at: e.at,
            actor: wire::AuditActor {
                kind: e.actor_kind,
                id: e.actor_id,
                email: e.actor_email,
            },
            surface: e.surface,
            action: e.action,
            target: e.target,
            detail: e.detail,
        }
    }
}

impl From<model::PairedRunner> for wire::PairedRunner {
    fn from(p: model::PairedRunner) -> Self {
        Self {
            runner: p.runner.into(),
            token: p.token.expose().to_owned(),
        }
    }
}

impl From<model::Lease> for wire::Lease {
    fn from(l: model::Lease) -> Self {
        Self {
            lease_id: l.id.to_string(),
            ttl_ms: l.ttl_ms,
            job: wire::LeasedJob {
                id: l.job.id.to_string(),
                attempt: l.job.attempt,
                command: l.job.spec.command,
                script: l.job.spec.script,
                env: l.job.env,
                timeout_seconds: l.job.spec.timeout_seconds,
                image: l.job.spec.image,
            },
        }
    }
}

impl From<wire::PairRunner> for model::NewRunner {
    fn from(req: wire::PairRunner) -> Self {
        Self {
            name: req.name,
            pool: req.runtime,
            labels: req.labels,
        }
    }
}

impl From<&wire::Complete> for drover_domain::job::AttemptResult {
    fn from(done: &wire::Complete) -> Self {
        Self {
            outcome: done.outcome,
            exit_code: done.exit_code,
            error: done.error.clone(),
        }
    }
}
