//! The answers that need more than a model: drover:// links (the public
//! URL), usage reports. The wire crate converts the domain's models
//! (`drover_wire`'s `domain.rs`); no module writes either twice.

use drover_wire as wire;
use drover_wire::text::percent_encode;

use crate::store::model;

/// A usage report's wire shape.
pub fn usage_report(report: crate::service::billing::Report) -> wire::UsageReport {
    wire::UsageReport {
        month: report.month.to_string(),
        by: report.by.as_str().to_owned(),
        lines: all(report.lines),
    }
}

/// A join token with its link, `drover://join?url=…&ref=…&token=…`.
pub fn join_token(t: model::JoinToken, public_url: &str) -> wire::JoinToken {
    let link = format!(
        "drover://join?url={}&ref={}&token={}",
        percent_encode(public_url),
        percent_encode(&t.runtime.reference),
        percent_encode(t.token.expose())
    );
    wire::JoinToken {
        id: Some(t.id.to_string()),
        token: t.token.expose().to_owned(),
        runtime: t.runtime.into(),
        expires_at: t.expires_at,
        link: Some(link),
    }
}

/// A pairing code with its link, `drover://pair?url=…&code=…`.
pub fn pairing_code(p: model::PairingCode, public_url: &str) -> wire::PairingCode {
    wire::PairingCode {
        link: format!(
            "drover://pair?url={}&code={}",
            percent_encode(public_url),
            percent_encode(p.code.expose())
        ),
        code: p.code.expose().to_owned(),
        expires_at: p.expires_at,
    }
}

/// An invite: the member and their one-time code, as a link.
pub fn invite(m: model::MemberInfo, code: model::PairingCode, public_url: &str) -> wire::Invite {
    let code = pairing_code(code, public_url);
    wire::Invite {
        member: m.into(),
        code: code.code,
        link: code.link,
        expires_at: code.expires_at,
    }
}

/// Who the caller is, with the token of the request.
pub fn me(m: crate::store::Member, token: Option<model::ApiToken>) -> wire::Me {
    wire::Me {
        workspace: m.workspace_name,
        email: m.email,
        subject: m.id.to_string(),
        role: m.role.as_str().to_owned(),
        token: token.map(wire::ApiToken::from),
    }
}

/// Converts each item of a list.
pub fn all<T, W: From<T>>(items: Vec<T>) -> Vec<W> {
    items.into_iter().map(W::from).collect()
}
