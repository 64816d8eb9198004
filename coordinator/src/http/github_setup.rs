//! GitHub's setup redirect (`GET /v1/github/setup`), after an admin
//! installed the App from an install link: the one-time state names the
//! workspace, and the OAuth code proves the installation is the user's to
//! give: `GET /user/installations` must list it, and the user must
//! administer its account (an active `admin` of the organization, per
//! `GET /user/memberships/orgs/{org}`, or, for a user account, that user,
//! per `GET /user`). Reaching an installation is not enough: a read-only
//! member of an organization reaches its installation too. It answers a page
//! a person reads.

use axum::Router;
use axum::extract::State;
use axum::extract::rejection::QueryRejection;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use drover_wire::ErrorCode;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{AppState, Routes as _};
use crate::error::{Error, Result};
use crate::service::github::app;
use crate::store::Member;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new().at(op::GithubSetup, setup)
}

/// GitHub's setup redirect after installing the App.
#[derive(Deserialize, JsonSchema)]
pub struct SetupParams {
    /// The installation GitHub says was made.
    pub installation_id: Option<i64>,
    /// `install`, `update` or `request`.
    pub setup_action: Option<String>,
    /// The install link's one-time state.
    pub state: Option<String>,
    /// The OAuth code (the App asks for user authorization on install).
    pub code: Option<String>,
}

fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Drover: {t}</title></head>\n<body><h1>{t}</h1><p>{x}</p></body></html>\n",
        t = esc(title),
        x = esc(text)
    );
    (status, Html(html)).into_response()
}

pub(super) async fn setup(
    State(st): State<AppState>,
    query: Result<axum::extract::Query<SetupParams>, QueryRejection>,
) -> Response {
    // A browser lands here: even a malformed query answers a page.
    let q = match query {
        Ok(axum::extract::Query(q)) => q,
        Err(rejection) => {
            let text = format!("{} (BAD_REQUEST)", rejection.body_text());
            return page(StatusCode::BAD_REQUEST, "GitHub App not linked", &text);
        }
    };
    match link(&st, q).await {
        Ok(text) => page(StatusCode::OK, "GitHub App linked", &text),
        Err(Error::Api { code, message }) => page(
            super::error::status_of(code),
            "GitHub App not linked",
            &format!("{message} ({})", code.as_str()),
        ),
        Err(other) => {
            tracing::error!(error = %other, "internal error");
            page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "GitHub App not linked",
                "something failed inside the coordinator; details are in its log (INTERNAL)",
            )
        }
    }
}

async fn link(st: &AppState, q: SetupParams) -> Result<String> {
    let app = app(st)?;
    if q.setup_action.as_deref() == Some("request") {
        return Ok("GitHub sent the installation to an owner of the account for approval; once approved, ask for a new install link to link it.".into());
    }
    let (Some(id), Some(state), Some(code)) = (q.installation_id, q.state, q.code) else {
        return Err(Error::bad_request(
            "GitHub's setup redirect must carry installation_id, state and code (the App must request user authorization during installation)",
        ));
    };
    let now = st.now();
    let linked_by = st.store.take_link_state(&state, now).await?;
    let host = app.host(&linked_by.host)?;
    let user_token = app.user_token(host, &code).await?;
    let reachable = app.user_installations(host, &user_token).await?;
    let Some(found) = reachable.iter().find(|i| i.id == id) else {
        return Err(Error::api(
            ErrorCode::Forbidden,
            format!(
                "installation {id} is not one the signing-in GitHub user can reach; nothing was linked"
            ),
        ));
    };
    administers(app, host, &user_token, found).await?;
    let linked = link_as(st, &linked_by.member, &host.name, found, now).await?;
    Ok(format!(
        "Installation {} on {} ({} {}) is linked to workspace {}. You can close this page.",
        linked.id,
        linked.host,
        linked.account_type,
        linked.account,
        linked_by.member.workspace_name
    ))
}

/// Refuses unless the user behind `user_token` administers the account
/// `found` is installed on; the refusal says who must finish the install.
async fn administers(
    app: &crate::github::GithubApp,
    host: &crate::github::Host,
    user_token: &crate::ids::Secret,
    found: &crate::github::UserInstallation,
) -> Result<()> {
    let (id, account) = (found.id, found.account.as_str());
    let me = app.user(host, user_token).await?;
    let refuse = |why: String, who: String| {
        Error::api(
            ErrorCode::Forbidden,
            format!(
                "installation {id} is on {why}; only {who} may link it, so nothing was linked. Ask {who} to finish the install from a new install link"
            ),
        )
    };
    match found.account_type.as_str() {
        "Organization" => {
            let who = format!("an admin (owner) of the organization {account}");
            match app.org_membership(host, user_token, account).await? {
                Some(m) if m.administers() => Ok(()),
                Some(m) => Err(refuse(
                    format!(
                        "the GitHub organization {account}, where {} is a {} ({})",
                        me.login, m.role, m.state
                    ),
                    who,
                )),
                None => Err(refuse(
                    format!(
                        "the GitHub organization {account}, of which {} is not a member",
                        me.login
                    ),
                    who,
                )),
            }
        }
        "User" => {
            let same = match found.account_id {
                Some(account_id) => account_id == me.id,
                None => account.eq_ignore_ascii_case(&me.login),
            };
            if same {
                Ok(())
            } else {
                Err(refuse(
                    format!(
                        "the GitHub user account {account}, and the install was finished by {}",
                        me.login
                    ),
                    format!("the GitHub user {account}"),
                ))
            }
        }
        other => Err(Error::api(
            ErrorCode::Forbidden,
            format!(
                "installation {id} is on {account}, a GitHub account of type {other:?}; Drover links installations on organizations and user accounts only, whose admins it can check, so nothing was linked"
            ),
        )),
    }
}

async fn link_as(
    st: &AppState,
    member: &Member,
    host: &str,
    found: &crate::github::UserInstallation,
    now: i64,
) -> Result<crate::store::Installation> {
    st.store
        .link_installation(
            member,
            host,
            found.id,
            &found.account,
            &found.account_type,
            now,
        )
        .await
        .map_err(Into::into)
}
