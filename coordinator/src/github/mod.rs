//! The workspace's GitHub App: its configuration, its RS256 JWTs, the
//! installation tokens they buy (cached in memory, never stored), and the
//! few GitHub REST calls the coordinator makes.
//!
//! Every call sends GitHub's `Accept` and `X-GitHub-Api-Version` headers.
//! No key, JWT or token is ever logged or put in an error: an error names
//! the call and what GitHub answered.

mod actions;
mod config;
mod jit;
mod jwt;
pub mod names;
mod oauth;
pub mod oidc;
mod repository;
pub mod script;
mod target;
pub mod webhook;
pub mod workflow;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover_wire::ErrorCode;
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::ids::Secret;

pub use config::{AppConfig, Host, base_url};
pub use jit::JitRunner;
pub use jwt::AppKey;
pub use oauth::{GithubUser, OrgMembership, UserInstallation};
pub use target::Target;
use target::TokenScope;

/// The host name of github.com, and the default of every `host` field.
pub use drover_domain::model::GITHUB_COM;

/// GitHub's REST API version this coordinator speaks.
const API_VERSION: &str = "2022-11-28";

/// An installation token is used until this long before it expires.
const TOKEN_MARGIN_MS: i64 = 5 * 60 * 1000;

/// Longest the coordinator waits for GitHub.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// Pages of a GitHub list read at most, per call that reads them all.
const MAX_PAGES: usize = 50;

/// A repository an installation may reach.
#[derive(Debug, Clone)]
pub struct Repo {
    pub owner: String,
    pub name: String,
    pub private: bool,
}

/// A self-hosted runner as GitHub lists it.
#[derive(Debug, Clone, Deserialize)]
pub struct GithubRunner {
    pub id: i64,
    pub name: String,
    #[serde(default)]
    pub busy: bool,
}

/// What `DELETE …/actions/runners/{id}` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// GitHub no longer has it (or never had it).
    Removed,
    /// It is running a job; GitHub keeps it until it is idle.
    Busy,
}

type TokenKey = (String, i64, TokenScope);

/// The App at work: signs JWTs, keeps installation tokens, calls GitHub.
pub struct GithubApp {
    pub config: AppConfig,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    /// Installation tokens and when they expire (Unix ms).
    tokens: Mutex<HashMap<TokenKey, (Secret, i64)>>,
    /// Per host, the installation rate limit GitHub last reported:
    /// calls left, and when it resets (Unix ms).
    limits: Mutex<HashMap<String, (i64, i64)>>,
}

/// The `Auth` of one call.
enum Auth<'a> {
    /// The App itself: a fresh JWT.
    App,
    /// An installation or user token.
    Token(&'a Secret),
}

fn github_error(what: &str, status: StatusCode, body: &[u8]) -> Error {
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect());
    Error::api(
        ErrorCode::GithubError,
        format!("GitHub answered {status} to {what}: {message}"),
    )
}

fn transport(what: &str, e: reqwest::Error) -> Error {
    // reqwest's errors name the URL, never a header: no token in them.
    Error::api(
        ErrorCode::GithubError,
        format!(
            "could not reach GitHub for {what}: {}",
            e.without_url()
                .to_string()
                .chars()
                .take(200)
                .collect::<String>()
        ),
    )
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let link = headers.get(reqwest::header::LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim() == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_owned()
            })
    })
}

/// GitHub's `expires_at` (`2026-07-11T22:14:10Z`) as Unix milliseconds.
fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let days = drover_wire::text::days_from_civil(n(0..4)?, n(5..7)? as u32, n(8..10)? as u32);
    Some(((days * 24 + n(11..13)?) * 60 + n(14..16)?) * 60_000 + n(17..19)? * 1000)
}

impl GithubApp {
    pub fn new(
        config: AppConfig,
        clock: Arc<dyn Clock>,
        roots: &crate::tls::OutboundRoots,
    ) -> anyhow::Result<Self> {
        let http = roots
            .builder()
            .user_agent(concat!("drover-coordinator/", env!("CARGO_PKG_VERSION")))
            .timeout(CALL_TIMEOUT)
            .build()?;
        Ok(Self {
            config,
            http,
            clock,
            tokens: Mutex::new(HashMap::new()),
            limits: Mutex::new(HashMap::new()),
        })
    }

    /// The configured host called `name`.
    pub fn host(&self, name: &str) -> Result<&Host> {
        let name = name.to_ascii_lowercase();
        self.config
            .hosts
            .iter()
            .find(|h| h.name == name)
            .ok_or_else(|| {
                let known: Vec<&str> = self.config.hosts.iter().map(|h| h.name.as_str()).collect();
                Error::bad_request(format!(
                    "unknown GitHub host {name:?}; this coordinator knows {}",
                    known.join(", ")
                ))
            })
    }

    /// The App's install page on `host`, carrying `state`.
    pub fn install_url(&self, host: &Host, state: &str) -> String {
        format!(
            "{}/{}/{}/installations/new?state={state}",
            host.web,
            host.apps_path(),
            self.config.slug
        )
    }

    async fn send(
        &self,
        method: Method,
        url: &str,
        auth: Auth<'_>,
        body: Option<&Value>,
        what: &str,
    ) -> Result<reqwest::Response> {
        let bearer = match auth {
            Auth::App => self
                .config
                .key
                .jwt(self.config.app_id, self.clock.now_ms() / 1000),
            Auth::Token(t) => t.expose().to_owned(),
        };
        let mut req = self
            .http
            .request(method, url)
            .header(reqwest::header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .bearer_auth(bearer);
        if let Some(body) = body {
            req = req.json(body);
        }
        req.send().await.map_err(|e| transport(what, e))
    }

    /// An installation token for `scope`, from the cache while it has more
    /// than five minutes left, else freshly minted.
    async fn installation_token(
        &self,
        host: &Host,
        installation: i64,
        scope: &TokenScope,
    ) -> Result<Secret> {
        let key = (host.name.clone(), installation, scope.clone());
        let now = self.clock.now_ms();
        if let Some((token, expires)) = self.tokens.lock().expect("tokens").get(&key)
            && *expires - TOKEN_MARGIN_MS > now
        {
            return Ok(token.clone());
        }
        let what = format!("an installation token for installation {installation}");
        let url = format!(
            "{}/app/installations/{installation}/access_tokens",
            host.api
        );
        let resp = self
            .send(Method::POST, &url, Auth::App, Some(&scope.body()), &what)
            .await?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| transport(&what, e))?;
        if status == StatusCode::NOT_FOUND {
            return Err(Error::not_found(format!(
                "the GitHub App's installation {installation} on {} is gone; install the App again",
                host.name
            )));
        }
        if status != StatusCode::CREATED {
            return Err(github_error(&what, status, &body));
        }
        #[derive(Deserialize)]
        struct Minted {
            token: String,
            expires_at: String,
        }
        let minted: Minted = serde_json::from_slice(&body)
            .map_err(|_| github_error(&what, status, b"an unexpected answer"))?;
        let expires = parse_time(&minted.expires_at).unwrap_or(now + 60 * 60 * 1000);
        let token = Secret::new(minted.token);
        self.tokens
            .lock()
            .expect("tokens")
            .insert(key, (token.clone(), expires));
        Ok(token)
    }

    fn forget_token(&self, host: &Host, installation: i64, scope: &TokenScope) {
        let key = (host.name.clone(), installation, scope.clone());
        self.tokens.lock().expect("tokens").remove(&key);
    }

    /// One call with an installation token. A 401 means GitHub no longer
    /// takes the cached token (expired early, or revoked): it is dropped,
    /// and the call is made once more with a new one.
    #[allow(clippy::too_many_arguments)]
    async fn with_installation(
        &self,
        host: &Host,
        installation: i64,
        scope: &TokenScope,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<(StatusCode, reqwest::header::HeaderMap, axum::body::Bytes)> {
        let url = if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", host.api)
        };
        for attempt in 0..2 {
            let token = self.installation_token(host, installation, scope).await?;
            let resp = self
                .send(method.clone(), &url, Auth::Token(&token), body, what)
                .await?;
            let (status, headers) = (resp.status(), resp.headers().clone());
            self.note_rate_limit(host, &headers);
            let body = resp.bytes().await.map_err(|e| transport(what, e))?;
            if status == StatusCode::UNAUTHORIZED && attempt == 0 {
                tracing::info!(installation, host = %host.name, "GitHub refused a cached installation token; minting a new one");
                self.forget_token(host, installation, scope);
                continue;
            }
            return Ok((status, headers, body));
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// A runner registration token for `target` (returned once, never stored).
    pub async fn registration_token(
        &self,
        host: &Host,
        installation: i64,
        target: &Target,
    ) -> Result<Secret> {
        let path = format!("{}/actions/runners/registration-token", target.api_prefix());
        let what = format!("POST {path}");
        let (status, _, body) = self
            .with_installation(
                host,
                installation,
                &target.token_scope(),
                Method::POST,
                &path,
                None,
                &what,
            )
            .await?;
        if status != StatusCode::CREATED {
            return Err(github_error(&what, status, &body));
        }
        #[derive(Deserialize)]
        struct Registration {
            token: String,
        }
        let r: Registration = serde_json::from_slice(&body)
            .map_err(|_| github_error(&what, status, b"an unexpected answer"))?;
        Ok(Secret::new(r.token))
    }

    /// The self-hosted runner called `name` on `target`, if GitHub has it.
    pub async fn find_runner(
        &self,
        host: &Host,
        installation: i64,
        target: &Target,
        name: &str,
    ) -> Result<Option<GithubRunner>> {
        let path = format!(
            "{}/actions/runners?name={name}&per_page=100",
            target.api_prefix()
        );
        let what = format!("GET {}/actions/runners", target.api_prefix());
        let (status, _, body) = self
            .with_installation(
                host,
                installation,
                &target.token_scope(),
                Method::GET,
                &path,
                None,
                &what,
            )
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if status != StatusCode::OK {
            return Err(github_error(&what, status, &body));
        }
        #[derive(Deserialize)]
        struct Runners {
            runners: Vec<GithubRunner>,
        }
        let list: Runners = serde_json::from_slice(&body)
            .map_err(|_| github_error(&what, status, b"an unexpected answer"))?;
        Ok(list.runners.into_iter().find(|r| r.name == name))
    }

    /// Removes the runner called `name` from `target`.
    pub async fn remove_runner(
        &self,
        host: &Host,
        installation: i64,
        target: &Target,
        name: &str,
    ) -> Result<Removal> {
        let Some(runner) = self.find_runner(host, installation, target, name).await? else {
            return Ok(Removal::Removed);
        };
        self.remove_runner_id(host, installation, target, runner.id)
            .await
    }

    /// One page of the repositories `installation` may reach, and whether
    /// there is a next one.
    pub async fn installation_repos(
        &self,
        host: &Host,
        installation: i64,
        page: u32,
        per_page: u32,
    ) -> Result<(Vec<Repo>, bool)> {
        let path = format!("/installation/repositories?per_page={per_page}&page={page}");
        let what = "GET /installation/repositories";
        let (status, headers, body) = self
            .with_installation(
                host,
                installation,
                &TokenScope::METADATA,
                Method::GET,
                &path,
                None,
                what,
            )
            .await?;
        if status != StatusCode::OK {
            return Err(github_error(what, status, &body));
        }
        #[derive(Deserialize)]
        struct Owner {
            login: String,
        }
        #[derive(Deserialize)]
        struct R {
            name: String,
            owner: Owner,
            #[serde(default)]
            private: bool,
        }
        #[derive(Deserialize)]
        struct Page {
            repositories: Vec<R>,
        }
        let p: Page = serde_json::from_slice(&body)
            .map_err(|_| github_error(what, status, b"an unexpected answer"))?;
        let repos = p
            .repositories
            .into_iter()
            .map(|r| Repo {
                owner: r.owner.login,
                name: r.name,
                private: r.private,
            })
            .collect();
        Ok((repos, next_link(&headers).is_some()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_headers_and_times() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            reqwest::header::LINK,
            "<https://api.github.com/x?page=2>; rel=\"next\", <https://api.github.com/x?page=5>; rel=\"last\""
                .parse()
                .unwrap(),
        );
        assert_eq!(
            next_link(&h).as_deref(),
            Some("https://api.github.com/x?page=2")
        );
        h.insert(
            reqwest::header::LINK,
            "<https://a/x?page=1>; rel=\"prev\"".parse().unwrap(),
        );
        assert_eq!(next_link(&h), None);
        assert_eq!(parse_time("1970-01-02T00:00:01Z"), Some(86_401_000));
        assert_eq!(parse_time("2016-07-11T22:14:10Z"), Some(1_468_275_250_000));
        assert_eq!(parse_time("soon"), None);
    }
}
