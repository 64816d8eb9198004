//! The setup redirect's proof of ownership: the OAuth code exchanged for a
//! user token, the installations that user may reach, who the user is, and
//! their role in an organization.

use drover_wire::ErrorCode;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::{Auth, GithubApp, Host, MAX_PAGES, github_error, next_link, transport};
use crate::error::{Error, Result};
use crate::ids::Secret;

/// An installation the user behind an OAuth token may reach.
#[derive(Debug, Clone)]
pub struct UserInstallation {
    pub id: i64,
    pub account: String,
    /// The account's numeric id (stable across renames), when GitHub gives it.
    pub account_id: Option<i64>,
    pub account_type: String,
}

/// The GitHub user behind an OAuth token (`GET /user`).
#[derive(Debug, Clone, Deserialize)]
pub struct GithubUser {
    pub login: String,
    pub id: i64,
}

/// A user's membership in an organization
/// (`GET /user/memberships/orgs/{org}`).
#[derive(Debug, Clone, Deserialize)]
pub struct OrgMembership {
    /// `active`, or `pending` (invited, not yet accepted).
    pub state: String,
    /// `admin` (an owner), `member` or `billing_manager`.
    pub role: String,
}

impl OrgMembership {
    /// An owner of the organization, who has accepted.
    pub fn administers(&self) -> bool {
        self.state == "active" && self.role == "admin"
    }
}

impl GithubApp {
    /// Exchanges an OAuth `code` (from the setup redirect) for a user token.
    pub async fn user_token(&self, host: &Host, code: &str) -> Result<Secret> {
        let what = "the OAuth code exchange";
        let url = format!("{}/login/oauth/access_token", host.web);
        let resp = self
            .http
            .post(&url)
            .header(reqwest::header::ACCEPT, "application/json")
            .form(&[
                ("client_id", self.config.client_id.as_str()),
                ("client_secret", self.config.client_secret.expose()),
                ("code", code),
            ])
            .send()
            .await
            .map_err(|e| transport(what, e))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| transport(what, e))?;
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        match v["access_token"].as_str() {
            Some(t) if status.is_success() => Ok(Secret::new(t.to_owned())),
            _ => Err(Error::api(
                ErrorCode::Forbidden,
                format!(
                    "GitHub did not accept the sign-in code ({}); start again from the install link",
                    v["error"].as_str().unwrap_or("no token in its answer")
                ),
            )),
        }
    }

    /// Every installation of this App the user behind `user_token` may
    /// reach (`GET /user/installations`, all its pages).
    pub async fn user_installations(
        &self,
        host: &Host,
        user_token: &Secret,
    ) -> Result<Vec<UserInstallation>> {
        let what = "GET /user/installations";
        let mut url = format!("{}/user/installations?per_page=100", host.api);
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let resp = self
                .send(Method::GET, &url, Auth::Token(user_token), None, what)
                .await?;
            let (status, headers) = (resp.status(), resp.headers().clone());
            let body = resp.bytes().await.map_err(|e| transport(what, e))?;
            if status != StatusCode::OK {
                return Err(github_error(what, status, &body));
            }
            #[derive(Deserialize)]
            struct Account {
                login: String,
                #[serde(default)]
                id: Option<i64>,
                #[serde(rename = "type", default)]
                kind: String,
            }
            #[derive(Deserialize)]
            struct I {
                id: i64,
                account: Account,
                #[serde(default)]
                app_id: Option<u64>,
            }
            #[derive(Deserialize)]
            struct Page {
                installations: Vec<I>,
            }
            let page: Page = serde_json::from_slice(&body)
                .map_err(|_| github_error(what, status, b"an unexpected answer"))?;
            out.extend(
                page.installations
                    .into_iter()
                    .filter(|i| i.app_id.is_none_or(|a| a == self.config.app_id))
                    .map(|i| UserInstallation {
                        id: i.id,
                        account: i.account.login,
                        account_id: i.account.id,
                        account_type: i.account.kind,
                    }),
            );
            match next_link(&headers) {
                Some(next) => url = next,
                None => return Ok(out),
            }
        }
        Ok(out)
    }

    /// The user behind `user_token` (`GET /user`).
    pub async fn user(&self, host: &Host, user_token: &Secret) -> Result<GithubUser> {
        let what = "GET /user";
        let url = format!("{}/user", host.api);
        let resp = self
            .send(Method::GET, &url, Auth::Token(user_token), None, what)
            .await?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| transport(what, e))?;
        if status != StatusCode::OK {
            return Err(github_error(what, status, &body));
        }
        serde_json::from_slice(&body)
            .map_err(|_| github_error(what, status, b"an unexpected answer"))
    }

    /// The membership in `org` of the user behind `user_token`, or `None`
    /// when they are not a member (GitHub answers 404).
    pub async fn org_membership(
        &self,
        host: &Host,
        user_token: &Secret,
        org: &str,
    ) -> Result<Option<OrgMembership>> {
        let what = "GET /user/memberships/orgs/{org}";
        let url = format!(
            "{}/user/memberships/orgs/{}",
            host.api,
            drover_wire::text::percent_encode(org)
        );
        let resp = self
            .send(Method::GET, &url, Auth::Token(user_token), None, what)
            .await?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| transport(what, e))?;
        match status {
            StatusCode::OK => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|_| github_error(what, status, b"an unexpected answer")),
            StatusCode::NOT_FOUND => Ok(None),
            StatusCode::FORBIDDEN => {
                let e = github_error(what, status, &body);
                Err(Error::api(
                    ErrorCode::GithubError,
                    format!(
                        "{e}; the App needs the organization permission \"Members: read\" to check who administers {org}, and the organization must not block it"
                    ),
                ))
            }
            _ => Err(github_error(what, status, &body)),
        }
    }
}
