//! The typed API client: every coordinator call the runner, the CLI, the
//! desktop app and the tests make goes through here.
//!
//! (Over 500 lines: one short typed method per coordinator endpoint over one request helper and one error mapping; split by resource they would only scatter that mapping.)

use std::fmt;
use std::time::Duration;

use drover_wire::op::{self, AnswerKind, Operation};
use drover_wire::text::percent_encode;
use drover_wire::{self as wire, ErrorBody, ErrorCode, PROTOCOL_HEADER, PROTOCOL_VERSION};
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize as _, Serialize};

mod tls;

pub use tls::{ClientOptions, cleartext_warning};

/// Requests other than long-polls give up after this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The coordinator answered with an error.
    #[error("{code:?} ({status}): {message}")]
    Api {
        status: u16,
        code: ErrorCode,
        message: String,
    },
    /// No answer: refused, reset, timed out. The message names the URL
    /// and the cause.
    #[error("cannot reach the coordinator: {0}")]
    Transport(String),
    /// An answer we could not read.
    #[error("unexpected answer from the coordinator: {0}")]
    Decode(String),
    /// Bad settings, found before any request: a malformed coordinator
    /// URL, an unreadable or empty CA file.
    #[error("{0}")]
    Config(String),
    /// The TLS handshake failed: `reason` says why in plain words (unknown
    /// issuer, expired, name mismatch, not TLS at all).
    #[error("TLS failure talking to {url}: {reason}")]
    Tls { url: String, reason: String },
    /// Something answered that is not a Drover coordinator (an HTML page,
    /// a proxy's error page): `what` describes the answer.
    #[error(
        "{url} is not a Drover coordinator: it answered {what}; check the URL (--url or DROVER_URL)"
    )]
    NotDrover {
        url: String,
        status: u16,
        what: String,
    },
    /// `426`: this client and the coordinator share no protocol
    /// (`UPGRADE_REQUIRED`: install the version the message names;
    /// `COORDINATOR_TOO_OLD`: upgrade the coordinator). Retrying cannot help.
    #[error("{message}")]
    VersionSkew { code: ErrorCode, message: String },
}

impl ClientError {
    /// Worth retrying after a pause? Exhaustive on purpose: a new variant
    /// must decide.
    pub fn is_recoverable(&self) -> bool {
        match self {
            Self::Transport(_) => true,
            Self::Api { status, .. } => *status >= 500 || *status == 429,
            // A proxy in front of a coordinator that is restarting.
            Self::NotDrover { status, .. } => matches!(status, 502..=504),
            Self::Decode(_) | Self::Config(_) | Self::Tls { .. } | Self::VersionSkew { .. } => {
                false
            }
        }
    }

    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Api { code, .. } | Self::VersionSkew { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// A bearer token; `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Token,
    /// Sent as `drover-surface` (the audit log names it): `cli`, `desktop`.
    surface: Option<&'static str>,
}

fn transport(e: reqwest::Error) -> ClientError {
    tls::classify(e)
}

/// A `426` answer: the coordinator's words, or (from something else that
/// answered 426) what this client speaks and where to look.
fn version_skew(body: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => ClientError::VersionSkew {
            code: match e.error.code {
                ErrorCode::Unknown => ErrorCode::UpgradeRequired,
                code => code,
            },
            message: e.error.message,
        },
        Err(_) => ClientError::VersionSkew {
            code: ErrorCode::UpgradeRequired,
            message: format!(
                "the coordinator does not serve this client ({}, protocol {PROTOCOL_VERSION}); its /healthz says which version it is",
                wire::CLIENT_ID
            ),
        },
    }
}

/// Which runner listing to fetch.
#[derive(Debug, Clone, Copy)]
pub enum RunnerListing {
    /// `GET /v1/me/runners`
    Mine,
    /// `GET /v1/workspace/runners`: the roster.
    Roster,
    /// `GET /v1/workspace/runners/owned`
    WorkspaceOwned,
}

/// Personal (`/v1/me/…`) or workspace (`/v1/workspace/…`) resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Me,
    Workspace,
}

impl Client {
    /// A client that trusts the operating system's roots.
    pub fn new(base_url: &str, token: Token) -> Result<Self, ClientError> {
        Self::with_options(base_url, token, &ClientOptions::default())
    }

    /// A client with `options` (e.g. a private CA). The URL is checked
    /// here, before any request: `http(s)://host[:port][/path]`.
    pub fn with_options(
        base_url: &str,
        token: Token,
        options: &ClientOptions,
    ) -> Result<Self, ClientError> {
        let base = tls::check_url(base_url)?;
        // A plain-HTTP coordinator needs no roots: reading the system's
        // (a file per CA) is most of a short-lived CLI's start-up. (A
        // redirect to HTTPS elsewhere would lose the token anyway.)
        let http = options
            .http_builder()?
            .tls_built_in_root_certs(base.starts_with("https:"))
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            // Below the coordinator's idle timeout (its header timeout, 10 s
            // by default): a connection it may be closing is never reused.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .map_err(transport)?;
        Ok(Self {
            http,
            base,
            token,
            surface: None,
        })
    }

    /// Names the surface this client's member requests come from (`cli`
    /// or `desktop`), for the coordinator's audit log.
    pub fn with_surface(mut self, surface: &'static str) -> Self {
        self.surface = Some(surface);
        self
    }

    /// The same connection pool with another credential.
    pub fn with_token(&self, token: Token) -> Self {
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            token,
            surface: self.surface,
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str, timeout: Duration) -> reqwest::RequestBuilder {
        let req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token.expose())
            .header(PROTOCOL_HEADER, PROTOCOL_VERSION)
            .header(wire::CLIENT_HEADER, wire::CLIENT_ID)
            .timeout(timeout);
        match self.surface {
            Some(surface) => req.header(wire::SURFACE_HEADER, surface),
            None => req,
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, ClientError> {
        let resp = req.send().await.map_err(transport)?;
        let html = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("text/html"));
        let status = resp.status();
        if status.is_success() && !html {
            return Ok(resp);
        }
        let body = resp.bytes().await.map_err(transport)?;
        if status == StatusCode::UPGRADE_REQUIRED {
            return Err(version_skew(&body));
        }
        Err(match serde_json::from_slice::<ErrorBody>(&body) {
            Ok(e) if !status.is_success() => ClientError::Api {
                status: status.as_u16(),
                code: e.error.code,
                message: e.error.message,
            },
            _ => ClientError::NotDrover {
                url: self.base.clone(),
                status: status.as_u16(),
                what: tls::describe_answer(status, html, &body),
            },
        })
    }

    /// A request for the declared operation `O`: its method, and its path
    /// with `params` (percent-encoded) in its `{…}` segments, in order.
    fn request_for<O: Operation>(&self, params: &[&str], timeout: Duration) -> RequestBuilder {
        let method = match O::METHOD {
            op::Method::Get => Method::GET,
            op::Method::Post => Method::POST,
            op::Method::Put => Method::PUT,
            op::Method::Patch => Method::PATCH,
            op::Method::Delete => Method::DELETE,
        };
        self.request(method, &fill(O::PATH, params), timeout)
    }

    /// Calls `O` with `query` and `body` (each sent only when `O` takes
    /// one) and reads its answer.
    pub async fn call<O: Operation>(
        &self,
        params: &[&str],
        query: &O::Query,
        body: &O::Body,
    ) -> Result<O::Answer, ClientError>
    where
        O::Query: Serialize,
        O::Body: Serialize,
        O::Answer: DeserializeOwned,
    {
        self.call_within::<O>(params, query, body, REQUEST_TIMEOUT)
            .await
    }

    /// [`Client::call`], giving up after `timeout` (long-polls).
    async fn call_within<O: Operation>(
        &self,
        params: &[&str],
        query: &O::Query,
        body: &O::Body,
        timeout: Duration,
    ) -> Result<O::Answer, ClientError>
    where
        O::Query: Serialize,
        O::Body: Serialize,
        O::Answer: DeserializeOwned,
    {
        let mut req = self.request_for::<O>(params, timeout);
        if O::HAS_QUERY {
            req = req.query(query);
        }
        if O::HAS_BODY {
            req = req.json(body);
        }
        let resp = self.send(req).await?;
        let bytes = resp.bytes().await.map_err(transport)?;
        decode::<O>(&bytes)
    }

    // ------------------------------------------------------------ jobs

    pub async fn submit(&self, job: &wire::SubmitJob) -> Result<wire::Job, ClientError> {
        self.call::<op::SubmitJob>(&[], &(), job).await
    }

    /// Submits with an `Idempotency-Key`: sending the same key again (say,
    /// after a lost answer) returns the job the first call made, not a second
    /// one. Make one key per job with [`idempotency_key`].
    pub async fn submit_with_key(
        &self,
        job: &wire::SubmitJob,
        key: &str,
    ) -> Result<wire::Job, ClientError> {
        let req = self
            .request_for::<op::SubmitJob>(&[], REQUEST_TIMEOUT)
            .header(IDEMPOTENCY_KEY, key)
            .json(job);
        let resp = self.send(req).await?;
        let bytes = resp.bytes().await.map_err(transport)?;
        decode::<op::SubmitJob>(&bytes)
    }

    pub async fn job(&self, id: &str) -> Result<wire::Job, ClientError> {
        self.call::<op::GetJob>(&[id], &(), &()).await
    }

    /// The newest `limit` jobs (or all there are), over as many pages as
    /// the coordinator's page budget takes; `next_before` continues after.
    pub async fn jobs(
        &self,
        state: Option<wire::JobState>,
        limit: u32,
    ) -> Result<wire::JobList, ClientError> {
        let mut list = self.jobs_page(state, limit, None).await?;
        while let Some(before) = list.next_before.take() {
            let left = limit.saturating_sub(list.jobs.len() as u32);
            if left == 0 {
                list.next_before = Some(before);
                break;
            }
            let page = self.jobs_page(state, left, Some(&before)).await?;
            list.jobs.extend(page.jobs);
            list.next_before = page.next_before;
        }
        Ok(list)
    }

    /// One page of jobs, older than `before` (a page's `next_before`).
    pub async fn jobs_page(
        &self,
        state: Option<wire::JobState>,
        limit: u32,
        before: Option<&str>,
    ) -> Result<wire::JobList, ClientError> {
        let query = wire::JobListQuery {
            state: state.map(|s| s.as_str().to_owned()),
            limit: Some(limit),
            before: before.map(str::to_owned),
        };
        self.call::<op::ListJobs>(&[], &query, &()).await
    }

    pub async fn cancel(&self, id: &str) -> Result<wire::Job, ClientError> {
        self.call::<op::CancelJob>(&[id], &(), &()).await
    }

    /// The whole log so far.
    pub async fn logs(&self, id: &str) -> Result<String, ClientError> {
        self.call::<op::GetJobLogs>(&[id], &wire::LogQuery::default(), &())
            .await
    }

    /// Follows a job's log to its end, handing each piece to `sink`.
    /// Returns how the job ended when the stream says so in its trailers
    /// (a proxy may drop them: then ask for the job).
    pub async fn follow_logs(
        &self,
        id: &str,
        mut sink: impl FnMut(&[u8]),
    ) -> Result<Option<wire::LogEnd>, ClientError> {
        use http_body_util::BodyExt as _;
        let req = self
            .request_for::<op::GetJobLogs>(&[id], Duration::from_secs(7 * 24 * 3600))
            .header(reqwest::header::TE, "trailers")
            .query(&wire::LogQuery { follow: true });
        let mut body = reqwest::Body::from(self.send(req).await?);
        let mut end = None;
        while let Some(frame) = body.frame().await {
            match frame.map_err(transport)?.into_data() {
                Ok(chunk) => sink(&chunk),
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        let field = |name| trailers.get(name).and_then(|v| v.to_str().ok());
                        end = wire::LogEnd::parse(
                            field(wire::LOG_END_STATE),
                            field(wire::LOG_END_EXIT_CODE),
                        );
                    }
                }
            }
        }
        Ok(end)
    }

    // ------------------------------------------------------------ runners and pools

    pub async fn pair_runner(
        &self,
        scope: Scope,
        req: &wire::PairRunner,
    ) -> Result<wire::PairedRunner, ClientError> {
        match scope {
            Scope::Me => self.call::<op::PairRunnerMine>(&[], &(), req).await,
            Scope::Workspace => self.call::<op::PairRunnerWorkspace>(&[], &(), req).await,
        }
    }

    pub async fn runners(&self, listing: RunnerListing) -> Result<wire::RunnerList, ClientError> {
        match listing {
            RunnerListing::Mine => self.call::<op::ListRunnersMine>(&[], &(), &()).await,
            RunnerListing::Roster => self.call::<op::ListRunnerRoster>(&[], &(), &()).await,
            RunnerListing::WorkspaceOwned => {
                self.call::<op::ListRunnersWorkspace>(&[], &(), &()).await
            }
        }
    }

    pub async fn revoke_runner(&self, scope: Scope, id: &str) -> Result<(), ClientError> {
        match scope {
            Scope::Me => self.call::<op::RevokeRunnerMine>(&[id], &(), &()).await,
            Scope::Workspace => self.revoke_workspace_runner(id).await.map(drop),
        }
    }

    pub async fn create_runtime(
        &self,
        scope: Scope,
        name: &str,
    ) -> Result<wire::Runtime, ClientError> {
        let req = wire::CreateRuntime { name: name.into() };
        match scope {
            Scope::Me => self.call::<op::CreateRuntimeMine>(&[], &(), &req).await,
            Scope::Workspace => {
                self.call::<op::CreateRuntimeWorkspace>(&[], &(), &req)
                    .await
            }
        }
    }

    pub async fn runtimes(&self, scope: Scope) -> Result<wire::RuntimeList, ClientError> {
        match scope {
            Scope::Me => self.call::<op::ListRuntimesMine>(&[], &(), &()).await,
            Scope::Workspace => self.call::<op::ListRuntimesWorkspace>(&[], &(), &()).await,
        }
    }

    /// A join token for the pool `runtime` (name or id) of `scope`, good
    /// for the coordinator's default lifetime (one day).
    pub async fn join_token(
        &self,
        scope: Scope,
        runtime: &str,
    ) -> Result<wire::JoinToken, ClientError> {
        self.join_token_for(scope, runtime, None).await
    }

    /// A join token good for `ttl_seconds` (at most 30 days; `None`: one day).
    pub async fn join_token_for(
        &self,
        scope: Scope,
        runtime: &str,
        ttl_seconds: Option<u64>,
    ) -> Result<wire::JoinToken, ClientError> {
        let req = wire::CreateJoinToken { ttl_seconds };
        match scope {
            Scope::Me => {
                self.call::<op::CreateJoinTokenMine>(&[runtime], &(), &req)
                    .await
            }
            Scope::Workspace => {
                self.call::<op::CreateJoinTokenWorkspace>(&[runtime], &(), &req)
                    .await
            }
        }
    }

    /// The join tokens of `scope`'s pools that have not expired (never
    /// the tokens themselves); the workspace's need the admin role.
    pub async fn join_tokens(&self, scope: Scope) -> Result<wire::JoinTokenList, ClientError> {
        match scope {
            Scope::Me => self.call::<op::ListJoinTokensMine>(&[], &(), &()).await,
            Scope::Workspace => {
                self.call::<op::ListJoinTokensWorkspace>(&[], &(), &())
                    .await
            }
        }
    }

    /// Revokes one join token of `scope`'s pools (`jt_…`), at once.
    pub async fn revoke_join_token(&self, scope: Scope, id: &str) -> Result<(), ClientError> {
        match scope {
            Scope::Me => self.call::<op::RevokeJoinTokenMine>(&[id], &(), &()).await,
            Scope::Workspace => {
                self.call::<op::RevokeJoinTokenWorkspace>(&[id], &(), &())
                    .await
            }
        }
    }

    // ------------------------------------------------------------ pairing

    /// A one-time pairing code (ten minutes) and its `drover://pair` link.
    pub async fn pairing_code(&self) -> Result<wire::PairingCode, ClientError> {
        self.call::<op::CreatePairingCode>(&[], &(), &()).await
    }

    /// Redeems a pairing code for this device's own member token. The
    /// code is the credential: this client's token is not needed.
    pub async fn redeem_pairing_code(
        &self,
        code: &str,
        device_name: &str,
    ) -> Result<wire::DeviceToken, ClientError> {
        let req = wire::RedeemPairingCode {
            device_name: device_name.into(),
        };
        self.call::<op::RedeemPairingCode>(&[code], &(), &req).await
    }

    /// Who this client's member token belongs to, with the token itself.
    pub async fn me(&self) -> Result<wire::Me, ClientError> {
        self.call::<op::GetMe>(&[], &(), &()).await
    }

    /// The signed-in member's API tokens.
    pub async fn tokens(&self) -> Result<wire::ApiTokenList, ClientError> {
        self.call::<op::ListTokensMine>(&[], &(), &()).await
    }

    /// Revokes one of the signed-in member's API tokens.
    pub async fn revoke_token(&self, id: &str) -> Result<(), ClientError> {
        self.call::<op::RevokeTokenMine>(&[id], &(), &()).await
    }

    // ------------------------------------------------------------ billing

    /// Sets the workspace's budget per calendar month, in runner-minutes
    /// (`None`: no limit).
    pub async fn set_budget(
        &self,
        monthly_minutes: Option<u64>,
    ) -> Result<wire::Usage, ClientError> {
        let req = wire::SetBudget { monthly_minutes };
        self.call::<op::SetBudget>(&[], &(), &req).await
    }

    /// The workspace's usage this month, and its budget.
    pub async fn usage(&self) -> Result<wire::Usage, ClientError> {
        self.call::<op::GetUsage>(&[], &(), &()).await
    }

    fn report_request(
        &self,
        scope: Scope,
        month: Option<&str>,
        by: Option<&str>,
    ) -> RequestBuilder {
        let query = wire::UsageReportQuery {
            month: month.map(str::to_owned),
            by: by.map(str::to_owned),
        };
        match scope {
            Scope::Workspace => {
                self.request_for::<op::GetWorkspaceUsageReport>(&[], REQUEST_TIMEOUT)
            }
            Scope::Me => self.request_for::<op::GetMyUsageReport>(&[], REQUEST_TIMEOUT),
        }
        .query(&query)
    }

    /// A usage report for a month (`YYYY-MM`; default this one), by pool,
    /// member or runner: the workspace's (admins) or the caller's own jobs'.
    pub async fn usage_report(
        &self,
        scope: Scope,
        month: Option<&str>,
        by: Option<&str>,
    ) -> Result<wire::UsageReport, ClientError> {
        let resp = self.send(self.report_request(scope, month, by)).await?;
        let bytes = resp.bytes().await.map_err(transport)?;
        decode::<op::GetMyUsageReport>(&bytes)
    }

    /// The same report as CSV.
    pub async fn usage_csv(
        &self,
        scope: Scope,
        month: Option<&str>,
        by: Option<&str>,
    ) -> Result<String, ClientError> {
        let req = self
            .report_request(scope, month, by)
            .header(reqwest::header::ACCEPT, "text/csv");
        let resp = self.send(req).await?;
        resp.text().await.map_err(transport)
    }

    // ------------------------------------------------------------ members

    /// The workspace's members (admins only).
    pub async fn members(&self) -> Result<wire::MemberList, ClientError> {
        self.call::<op::ListMembers>(&[], &(), &()).await
    }

    /// Invites `email` as `role` (default member): a one-time code for them.
    pub async fn invite_member(
        &self,
        email: &str,
        role: Option<&str>,
    ) -> Result<wire::Invite, ClientError> {
        let req = wire::InviteMember {
            email: email.into(),
            role: role.map(str::to_owned),
        };
        self.call::<op::InviteMember>(&[], &(), &req).await
    }

    pub async fn update_member(&self, id: &str, role: &str) -> Result<wire::Member, ClientError> {
        let req = wire::UpdateMember { role: role.into() };
        self.call::<op::UpdateMember>(&[id], &(), &req).await
    }

    /// Removes a member: their tokens, runners and queued jobs go at once.
    pub async fn remove_member(&self, id: &str) -> Result<(), ClientError> {
        self.call::<op::RemoveMember>(&[id], &(), &()).await
    }

    /// A page of the workspace's audit log, newest first.
    pub async fn audit(&self, q: &wire::AuditQuery) -> Result<wire::AuditPage, ClientError> {
        self.call::<op::ListAuditEvents>(&[], q, &()).await
    }

    // ------------------------------------------------------------- github

    /// The workspace GitHub App's install page, with a one-time state.
    pub async fn github_install_link(
        &self,
        host: Option<&str>,
    ) -> Result<wire::GithubInstallLink, ClientError> {
        let req = wire::GithubInstallLinkRequest {
            host: host.map(str::to_owned),
        };
        self.call::<op::CreateGithubInstallLink>(&[], &(), &req)
            .await
    }

    pub async fn github_installations(&self) -> Result<wire::GithubInstallationList, ClientError> {
        self.call::<op::ListGithubInstallations>(&[], &(), &())
            .await
    }

    pub async fn github_repos(
        &self,
        page: u32,
        per_page: u32,
    ) -> Result<wire::GithubRepoList, ClientError> {
        let query = wire::GithubRepoQuery {
            page: Some(page),
            per_page: Some(per_page),
        };
        self.call::<op::ListGithubRepos>(&[], &query, &()).await
    }

    /// Pairs a workspace runner for a build server and registers a GitHub
    /// Actions runner beside it: the install script and workflow hint.
    pub async fn github_install(
        &self,
        req: &wire::GithubInstallRequest,
    ) -> Result<wire::GithubInstall, ClientError> {
        self.call::<op::InstallGithubWorkspaceRunner>(&[], &(), req)
            .await
    }

    /// Revokes a workspace runner; for one registered with GitHub, what
    /// GitHub did with its GitHub runner (a `204` when there was none).
    pub async fn revoke_workspace_runner(
        &self,
        id: &str,
    ) -> Result<Option<wire::RevokedRunner>, ClientError> {
        let req = self.request_for::<op::RevokeRunnerWorkspace>(&[id], REQUEST_TIMEOUT);
        let resp = self.send(req).await?;
        let bytes = resp.bytes().await.map_err(transport)?;
        if bytes.is_empty() {
            return Ok(None);
        }
        decode::<op::RevokeRunnerWorkspace>(&bytes).map(Some)
    }

    /// Links a repository for CI (or updates its link).
    pub async fn set_ci_link(
        &self,
        req: &wire::CiLinkRequest,
    ) -> Result<wire::CiLink, ClientError> {
        self.call::<op::SetCiLink>(&[], &(), req).await
    }

    pub async fn ci_links(&self) -> Result<wire::CiLinkList, ClientError> {
        self.call::<op::ListCiLinks>(&[], &(), &()).await
    }

    pub async fn remove_ci_link(
        &self,
        repository: &str,
        host: Option<&str>,
    ) -> Result<(), ClientError> {
        let (owner, repo) = repository.split_once('/').unwrap_or((repository, ""));
        let query = wire::CiLinkQuery {
            host: host.map(str::to_owned),
        };
        self.call::<op::RemoveCiLink>(&[owner, repo], &query, &())
            .await
    }

    /// The workflow file (YAML) of a linked repository.
    pub async fn ci_workflow(
        &self,
        repository: &str,
        host: Option<&str>,
    ) -> Result<String, ClientError> {
        let (owner, repo) = repository.split_once('/').unwrap_or((repository, ""));
        let query = wire::CiLinkQuery {
            host: host.map(str::to_owned),
        };
        self.call::<op::GetCiWorkflow>(&[owner, repo], &query, &())
            .await
    }

    // ------------------------------------------------------------ runner protocol

    /// The pool this client's join token joins.
    pub async fn join_token_info(&self) -> Result<wire::JoinTokenInfo, ClientError> {
        self.call::<op::RunnerJoinTokenInfo>(&[], &(), &()).await
    }

    /// This runner revokes itself: its credential stops working at once,
    /// and any job it holds goes back to the queue.
    pub async fn leave(&self) -> Result<(), ClientError> {
        self.call::<op::RunnerLeave>(&[], &(), &()).await
    }

    /// This runner is stopping: shown offline at once (it stays paired).
    pub async fn bye(&self) -> Result<(), ClientError> {
        self.call::<op::RunnerBye>(&[], &(), &()).await
    }

    /// Exchanges this client's join token for a runner credential.
    pub async fn join(&self, req: &wire::JoinRequest) -> Result<wire::JoinedRunner, ClientError> {
        self.call::<op::RunnerJoin>(&[], &(), req).await
    }

    /// Announces capabilities; answers who this runner is.
    pub async fn hello(&self, capabilities: &[String]) -> Result<wire::HelloResponse, ClientError> {
        let hello = wire::Hello {
            capabilities: capabilities.to_vec(),
            slots: None,
            paused: false,
        };
        self.call::<op::RunnerHello>(&[], &(), &hello).await
    }

    /// Announces capabilities and how many jobs this runner runs at once
    /// (the leases the coordinator lets it hold). A coordinator too old to
    /// know `slots` refuses the field: then says hello without it.
    pub async fn hello_with_slots(
        &self,
        capabilities: &[String],
        slots: u32,
    ) -> Result<wire::HelloResponse, ClientError> {
        self.hello_as(capabilities, slots, false).await
    }

    /// Hello, saying besides whether the runner's owner paused it (a
    /// coordinator too old to know `slots` or `paused` gets a plain hello).
    pub async fn hello_as(
        &self,
        capabilities: &[String],
        slots: u32,
        paused: bool,
    ) -> Result<wire::HelloResponse, ClientError> {
        let hello = wire::Hello {
            capabilities: capabilities.to_vec(),
            slots: Some(slots),
            paused,
        };
        match self.call::<op::RunnerHello>(&[], &(), &hello).await {
            Err(e) if e.code() == Some(ErrorCode::BadRequest) => self.hello(capabilities).await,
            r => r,
        }
    }

    /// Long-polls up to `wait` for a job.
    pub async fn lease(&self, wait: Duration) -> Result<Option<wire::Lease>, ClientError> {
        match self.offer(wait).await? {
            None => Ok(None),
            Some(Offer::Lease(lease)) => Ok(Some(*lease)),
            Some(Offer::Unreadable { error, .. }) => Err(ClientError::Decode(error)),
        }
    }

    /// Long-polls up to `wait` for a job, like [`Client::lease`]; a lease
    /// this runner cannot read is answered as [`Offer::Unreadable`] rather
    /// than as an error, so the runner can give it back and go on.
    pub async fn offer(&self, wait: Duration) -> Result<Option<Offer>, ClientError> {
        self.offer_holding(wait, None).await
    }

    /// [`Client::offer`], saying which leases this runner still holds
    /// (`held`): the coordinator first releases the others it counts for it.
    pub async fn offer_holding(
        &self,
        wait: Duration,
        held: Option<Vec<String>>,
    ) -> Result<Option<Offer>, ClientError> {
        let body = wire::LeaseRequest {
            wait_ms: wait.as_millis() as u64,
            held,
        };
        // Read as JSON first: a lease this runner cannot read is an offer
        // to give back, not an error.
        let req = self
            .request_for::<op::RunnerLease>(&[], wait + REQUEST_TIMEOUT)
            .json(&body);
        let resp: serde_json::Value = self.json(req).await?;
        read_offer(resp.get("lease"))
    }

    /// Renews the lease; waits up to `wait` for a cancel.
    pub async fn heartbeat(
        &self,
        lease: &str,
        wait: Duration,
    ) -> Result<wire::HeartbeatResponse, ClientError> {
        let body = wire::Heartbeat {
            wait_ms: wait.as_millis() as u64,
        };
        self.call_within::<op::RunnerHeartbeat>(&[lease], &(), &body, wait + REQUEST_TIMEOUT)
            .await
    }

    pub async fn log(&self, lease: &str, chunk: &wire::LogChunk) -> Result<(), ClientError> {
        self.call::<op::RunnerLogs>(&[lease], &(), chunk).await
    }

    /// Reports the result; with `done.next`, also leases the next job.
    pub async fn complete(
        &self,
        lease: &str,
        done: &wire::Complete,
    ) -> Result<wire::CompleteResponse, ClientError> {
        let (resp, next) = self.complete_and_offer(lease, done).await?;
        let lease = match next {
            None => None,
            Some(Offer::Lease(lease)) => Some(*lease),
            Some(Offer::Unreadable { error, .. }) => return Err(ClientError::Decode(error)),
        };
        Ok(wire::CompleteResponse {
            next: resp.next.map(|_| wire::LeaseResponse { lease }),
            ..resp
        })
    }

    /// [`Client::complete`], with the next lease (if one came) as an [`Offer`]:
    /// the result was recorded even when that lease cannot be read.
    pub async fn complete_and_offer(
        &self,
        lease: &str,
        done: &wire::Complete,
    ) -> Result<(wire::CompleteResponse, Option<Offer>), ClientError> {
        let wait = Duration::from_millis(done.next.as_ref().map_or(0, |n| n.wait_ms));
        let req = self
            .request_for::<op::RunnerComplete>(&[lease], wait + REQUEST_TIMEOUT)
            .json(done);
        let mut resp: serde_json::Value = self.json(req).await?;
        // The next lease is read on its own, so a bad one cannot hide the result.
        let next = resp
            .as_object_mut()
            .and_then(|o| o.remove("next"))
            .filter(|n| !n.is_null());
        let mut complete: wire::CompleteResponse =
            serde_json::from_value(resp).map_err(|e| ClientError::Decode(e.to_string()))?;
        let offer = match &next {
            Some(n) => {
                complete.next = Some(wire::LeaseResponse { lease: None });
                read_offer(n.get("lease"))?
            }
            None => None,
        };
        Ok((complete, offer))
    }

    /// Sends `req` and reads its answer as JSON of any shape.
    async fn json<T: DeserializeOwned>(&self, req: RequestBuilder) -> Result<T, ClientError> {
        let resp = self.send(req).await?;
        let bytes = resp.bytes().await.map_err(transport)?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()))
    }
}

/// `path` with each `{…}` segment replaced by the next of `params`,
/// percent-encoded (a `/` in a value stays inside its segment).
fn fill(path: &str, params: &[&str]) -> String {
    let mut params = params.iter();
    path.split('/')
        .map(|segment| {
            if segment.starts_with('{') && segment.ends_with('}') {
                percent_encode(params.next().copied().unwrap_or_default())
            } else {
                segment.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A successful answer of `O`, read as it declares it.
fn decode<O: Operation>(bytes: &[u8]) -> Result<O::Answer, ClientError>
where
    O::Answer: DeserializeOwned,
{
    let decoded = match O::ANSWER {
        AnswerKind::Json | AnswerKind::JsonOrCsv => serde_json::from_slice(bytes),
        AnswerKind::Empty => serde_json::from_value(serde_json::Value::Null),
        AnswerKind::Text | AnswerKind::Html => serde_json::from_value(serde_json::Value::String(
            String::from_utf8_lossy(bytes).into_owned(),
        )),
    };
    decoded.map_err(|e| ClientError::Decode(e.to_string()))
}

/// The header that makes a submit safe to retry.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// A fresh idempotency key: 128 random bits, in hex.
pub fn idempotency_key() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A job the coordinator leased to this runner.
#[derive(Debug, Clone)]
pub enum Offer {
    Lease(Box<wire::Lease>),
    /// A lease this runner cannot read (a newer or broken coordinator): what
    /// could be read of it, to report it failed, and why.
    Unreadable {
        lease_id: Option<String>,
        job_id: Option<String>,
        error: String,
    },
}

/// Reads the `lease` of a lease answer: absent or `null` is no job; a lease
/// that does not parse, or asks for something impossible, is `Unreadable`.
pub fn read_offer(lease: Option<&serde_json::Value>) -> Result<Option<Offer>, ClientError> {
    let Some(value) = lease.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_owned);
    let unreadable = |error: String| Offer::Unreadable {
        lease_id: text(value.get("leaseId")),
        job_id: text(value.get("job").and_then(|j| j.get("id"))),
        error,
    };
    Ok(Some(
        match wire::Lease::deserialize(value).map_err(|e| e.to_string()) {
            Ok(lease) => match crate::exec::validate(&lease.job) {
                Ok(()) => Offer::Lease(Box::new(lease)),
                Err(e) => unreadable(e),
            },
            Err(e) => unreadable(format!("the runner cannot read this lease: {e}")),
        },
    ))
}

/// HTTP status of an error, for callers that care.
pub fn status_of(e: &ClientError) -> Option<StatusCode> {
    match e {
        ClientError::Api { status, .. } => StatusCode::from_u16(*status).ok(),
        ClientError::VersionSkew { .. } => Some(StatusCode::UPGRADE_REQUIRED),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn offer(v: serde_json::Value) -> Option<Offer> {
        read_offer(Some(&v)).expect("never an error")
    }

    #[test]
    fn a_lease_that_does_not_parse_is_unreadable_not_an_error() {
        assert!(read_offer(None).unwrap().is_none());
        assert!(offer(json!(null)).is_none());
        let good = json!({"leaseId": "ls_1", "ttlMs": 2000,
            "job": {"id": "job_1", "attempt": 1, "command": ["true"]}});
        assert!(matches!(offer(good), Some(Offer::Lease(l)) if l.job.command == ["true"]));

        let bad_shape = json!({"leaseId": "ls_2", "ttlMs": "soon", "job": {"id": "job_2"}});
        let Some(Offer::Unreadable {
            lease_id,
            job_id,
            error,
        }) = offer(bad_shape)
        else {
            panic!("unreadable");
        };
        assert_eq!(
            (lease_id.as_deref(), job_id.as_deref()),
            (Some("ls_2"), Some("job_2"))
        );
        assert!(error.contains("cannot read this lease"), "{error}");

        let nothing_to_run = json!({"leaseId": "ls_3", "ttlMs": 2000,
            "job": {"id": "job_3", "attempt": 1, "command": [], "script": null}});
        let Some(Offer::Unreadable {
            lease_id, error, ..
        }) = offer(nothing_to_run)
        else {
            panic!("unreadable");
        };
        assert_eq!(lease_id.as_deref(), Some("ls_3"));
        assert_eq!(error, "the job has neither a command nor a script");

        let Some(Offer::Unreadable {
            lease_id, job_id, ..
        }) = offer(json!([1, 2]))
        else {
            panic!("unreadable");
        };
        assert_eq!((lease_id, job_id), (None, None));
    }

    #[test]
    fn idempotency_keys_are_fresh_128_bit_hex() {
        let (a, b) = (idempotency_key(), idempotency_key());
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
