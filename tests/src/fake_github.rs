//! A fake GitHub for tests: a local HTTP server that behaves like the parts
//! of GitHub's REST API the coordinator calls, as GitHub documents them.
//!
//! - App JWTs: RS256, checked against the App's public key, with `iss` the
//!   App id, `iat` not in the future and `exp` at most ten minutes after it
//!   and not past.
//! - Installation tokens (`ghs_…`) and registration tokens expire; their
//!   permissions and repositories are checked on every call.
//! - Every API call must carry `Accept: application/vnd.github+json`,
//!   `X-GitHub-Api-Version: 2022-11-28` and a `User-Agent` (else 400/415).
//! - Answers 201 / 204 / 401 / 403 / 404 / 409 / 422 where GitHub does, and
//!   pages lists with `Link` headers.
//! - The OAuth code exchange (`POST /login/oauth/access_token`), and for
//!   the user behind the token `GET /user`, `GET /user/installations` and
//!   `GET /user/memberships/orgs/{org}` (404 when not a member). Users and
//!   organizations share one space of numeric ids, as on GitHub.
//! - `GET /repos/{owner}/{repo}` with an installation token: the
//!   repository's id (each repository has one; made again, a new one).
//! - The OIDC issuer: discovery, JWKS (every fetch counted; it can be made
//!   to fail), and Actions' ID-token endpoint.
//!
//! - Actions (`actions`): workflow jobs, their webhooks and polls, and a
//!   stand-in for the Actions runner's tarball.
//!
//! One server is one GitHub host; a GHE host serves its API under `/api/v3`.
//!
//! Over 500 lines: it is a small GitHub, and each documented behaviour the
//! tests rely on is here, next to the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rsa::pkcs1::EncodeRsaPrivateKey as _;
use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::signature::Verifier as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use rsa::traits::PublicKeyParts as _;
use rsa::{RsaPrivateKey, RsaPublicKey};
use serde_json::{Value, json};
use sha2::Sha256;

mod actions;

pub use actions::{FakeWorkflowJob, set_on_demand};

/// The App the tests configure: its id, slug and OAuth client.
pub const APP_ID: u64 = 4242;
pub const APP_SLUG: &str = "drover-test";
pub const CLIENT_ID: &str = "Iv1.drovertest";
pub const CLIENT_SECRET: &str = "fake-client-secret-0123456789";

/// The App's key pair: the coordinator signs with the private half, every
/// fake host verifies with the public half.
pub struct AppKeys {
    pub private_pem: String,
    public: RsaPublicKey,
}

impl AppKeys {
    pub fn generate() -> Self {
        let private = RsaPrivateKey::new(&mut rand_core::OsRng, 2048).expect("an RSA key");
        let public = private.to_public_key();
        let private_pem = private
            .to_pkcs1_pem(rsa::pkcs1::LineEnding::LF)
            .expect("PEM")
            .to_string();
        Self {
            private_pem,
            public,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FakeInstallation {
    pub id: i64,
    pub account: String,
    /// `User` or `Organization`.
    pub account_type: String,
    pub repos: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct FakeRunner {
    pub id: i64,
    pub name: String,
    pub labels: Vec<String>,
    pub busy: bool,
    /// `owner/repo`, or the org.
    pub target: String,
    pub runner_group: Option<String>,
}

#[derive(Debug, Clone)]
struct Minted {
    installation: i64,
    permissions: HashMap<String, String>,
    /// `None`: every repository of the installation.
    repositories: Option<Vec<String>>,
    expires_at_s: i64,
}

#[derive(Debug, Clone)]
struct Registration {
    /// `owner/repo`, or the org.
    target: String,
    expires_at_s: i64,
}

#[derive(Default)]
struct World {
    /// The next user or organization id.
    next_account_id: i64,
    installations: Vec<FakeInstallation>,
    /// OAuth code → the user's login; each code works once.
    codes: HashMap<String, String>,
    /// User token → login.
    users: HashMap<String, String>,
    /// Login → installation ids the user may reach.
    reach: HashMap<String, Vec<i64>>,
    /// Lowercased login (user or organization) → its numeric id.
    account_ids: HashMap<String, i64>,
    /// (organization, user), both lowercased → (state, role).
    memberships: HashMap<(String, String), (String, String)>,
    tokens: HashMap<String, Minted>,
    registrations: HashMap<String, Registration>,
    runners: Vec<FakeRunner>,
    /// Just-in-time configs handed out: encoded config → the runner's id.
    jit_configs: HashMap<String, i64>,
    next_id: i64,
    /// How long installation tokens live, in seconds (GitHub: an hour).
    token_lifetime_s: i64,
    /// Every API call: `METHOD path`.
    calls: Vec<String>,
    /// Installation tokens minted, in order (their requested bodies).
    mints: Vec<Value>,
    /// Why the fake refused a call, for a failing test's message.
    refusals: Vec<String>,
    /// The OIDC issuer's signing keys, newest last: (kid, key).
    oidc_keys: Vec<(String, RsaPrivateKey)>,
    /// Actions' ID-token request tokens → (repository, repository id).
    actions: HashMap<String, (String, i64)>,
    /// `owner/name` (lower case) → GitHub's id of the repository.
    repo_ids: HashMap<String, i64>,
    /// Requests to the OIDC issuer's discovery document and JWKS.
    oidc_fetches: usize,
    /// The issuer answers its discovery and JWKS with a 503.
    oidc_failing: bool,
    /// Requests to the issuer being held (see `stall_oidc_issuer`).
    oidc_held: usize,
    workflow: actions::ActionsWorld,
}

impl World {
    /// The numeric id of the user or organization `login` (made on first use).
    fn account_id(&mut self, login: &str) -> i64 {
        let next = &mut self.next_account_id;
        *self
            .account_ids
            .entry(login.to_ascii_lowercase())
            .or_insert_with(|| {
                *next += 1;
                *next
            })
    }

    /// The login behind a user token.
    fn user_of(&self, h: &HeaderMap) -> Option<String> {
        self.users.get(&Ctx::bearer(h)?).cloned()
    }
}

/// One fake host; clones share it, and it stops when the last one goes.
#[derive(Clone)]
pub struct FakeGithub {
    /// The web base (`http://127.0.0.1:P`).
    pub web: String,
    /// The API base: the web base, or `…/api/v3` for a GHE host.
    pub api: String,
    world: Arc<Mutex<World>>,
    stalled: tokio::sync::watch::Sender<bool>,
    ctx: Ctx,
    _task: Arc<Serving>,
}

struct Serving(tokio::task::JoinHandle<()>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Clone)]
struct Ctx {
    world: Arc<Mutex<World>>,
    public: RsaPublicKey,
    /// True while the OIDC issuer holds its answers.
    stalled: tokio::sync::watch::Sender<bool>,
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn iso(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = drover_wire::text::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn random_token(prefix: &str) -> String {
    let mut b = [0u8; 20];
    super::getrandom_fill(&mut b);
    format!(
        "{prefix}{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    )
}

fn message(status: StatusCode, text: &str) -> Response {
    (
        status,
        axum::Json(json!({ "message": text, "documentation_url": "https://docs.github.com/rest" })),
    )
        .into_response()
}

/// A refusal, boxed: a `Response` is large to carry in every `Result`.
type Refused = Box<Response>;

impl Ctx {
    /// A refusal the fake records (the tests read them back), answered as
    /// GitHub answers it.
    fn refuse(&self, status: StatusCode, why: &str) -> Response {
        self.world.lock().unwrap().refusals.push(why.to_owned());
        message(status, why)
    }

    fn refused(&self, status: StatusCode, why: &str) -> Refused {
        Box::new(self.refuse(status, why))
    }

    /// GitHub's headers, on every API call.
    fn check_headers(&self, h: &HeaderMap, call: String) -> Result<(), Refused> {
        self.world.lock().unwrap().calls.push(call);
        let has = |name: &str, want: &str| h.get(name).and_then(|v| v.to_str().ok()) == Some(want);
        if !has("accept", "application/vnd.github+json") {
            return Err(self.refused(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "missing Accept: application/vnd.github+json",
            ));
        }
        if !has("x-github-api-version", "2022-11-28") {
            return Err(self.refused(
                StatusCode::BAD_REQUEST,
                "missing X-GitHub-Api-Version: 2022-11-28",
            ));
        }
        if h.get("user-agent").is_none() {
            return Err(self.refused(StatusCode::FORBIDDEN, "missing User-Agent"));
        }
        Ok(())
    }

    fn bearer(h: &HeaderMap) -> Option<String> {
        let v = h.get("authorization")?.to_str().ok()?;
        v.strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("token "))
            .map(str::to_owned)
    }

    /// The App's JWT, verified as GitHub does.
    fn check_jwt(&self, h: &HeaderMap) -> Result<(), Refused> {
        let unauthorized = |why: &str| self.refused(StatusCode::UNAUTHORIZED, why);
        let jwt = Self::bearer(h).ok_or_else(|| unauthorized("no JWT"))?;
        let parts: Vec<&str> = jwt.split('.').collect();
        let [header, claims, sig] = parts[..] else {
            return Err(unauthorized("A JSON web token could not be decoded"));
        };
        let decode = |s: &str| URL_SAFE_NO_PAD.decode(s).ok();
        let header: Value = decode(header)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| unauthorized("bad JWT header"))?;
        if header["alg"] != "RS256" {
            return Err(unauthorized("the JWT must be RS256"));
        }
        let signature = decode(sig)
            .and_then(|b| Signature::try_from(b.as_slice()).ok())
            .ok_or_else(|| unauthorized("bad JWT signature encoding"))?;
        let signing_input = &jwt[..jwt.rfind('.').unwrap()];
        VerifyingKey::<Sha256>::new(self.public.clone())
            .verify(signing_input.as_bytes(), &signature)
            .map_err(|_| {
                unauthorized("'Issuer' claim ('iss') must be an Integer: signature does not verify")
            })?;
        let claims: Value = decode(claims)
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(|| unauthorized("bad JWT claims"))?;
        let iss_ok = claims["iss"] == json!(APP_ID.to_string()) || claims["iss"] == json!(APP_ID);
        let (Some(iat), Some(exp)) = (claims["iat"].as_i64(), claims["exp"].as_i64()) else {
            return Err(unauthorized("the JWT needs iat and exp"));
        };
        let now = now_s();
        if !iss_ok {
            return Err(unauthorized("'iss' is not this App"));
        }
        if iat > now + 5 {
            return Err(unauthorized(
                "'Issued at' claim ('iat') must be an Integer representing a time in the past",
            ));
        }
        if exp - iat > 600 {
            return Err(unauthorized(
                "'Expiration time' claim ('exp') is too far in the future",
            ));
        }
        if exp <= now {
            return Err(unauthorized(
                "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires",
            ));
        }
        Ok(())
    }

    /// The installation token behind the call, if live.
    fn token(&self, h: &HeaderMap) -> Result<Minted, Refused> {
        let token = Self::bearer(h)
            .ok_or_else(|| self.refused(StatusCode::UNAUTHORIZED, "Requires authentication"))?;
        let found = self.world.lock().unwrap().tokens.get(&token).cloned();
        match found {
            Some(m) if m.expires_at_s > now_s() => Ok(m),
            _ => Err(self.refused(StatusCode::UNAUTHORIZED, "Bad credentials")),
        }
    }

    fn installation(&self, id: i64) -> Option<FakeInstallation> {
        self.world
            .lock()
            .unwrap()
            .installations
            .iter()
            .find(|i| i.id == id)
            .cloned()
    }

    /// May `m` administer runners of `target` (`owner/repo` or an org)?
    fn may_register(&self, m: &Minted, owner: &str, repo: Option<&str>) -> Result<(), Refused> {
        let inst = self
            .installation(m.installation)
            .ok_or_else(|| message(StatusCode::NOT_FOUND, "Not Found"))?;
        if !inst.account.eq_ignore_ascii_case(owner) {
            return Err(self.refused(
                StatusCode::NOT_FOUND,
                "Not Found: not this installation's account",
            ));
        }
        match repo {
            Some(repo) => {
                if !inst.repos.iter().any(|r| r == repo) {
                    return Err(Box::new(message(StatusCode::NOT_FOUND, "Not Found")));
                }
                if m.repositories
                    .as_ref()
                    .is_some_and(|rs| !rs.iter().any(|r| r == repo))
                {
                    return Err(self.refused(
                        StatusCode::FORBIDDEN,
                        "Resource not accessible by integration: token not for this repository",
                    ));
                }
                if m.permissions.get("administration").map(String::as_str) != Some("write") {
                    return Err(self.refused(
                        StatusCode::FORBIDDEN,
                        "Resource not accessible by integration: needs administration: write",
                    ));
                }
            }
            None => {
                if inst.account_type != "Organization" {
                    return Err(Box::new(message(StatusCode::NOT_FOUND, "Not Found")));
                }
                if m.permissions
                    .get("organization_self_hosted_runners")
                    .map(String::as_str)
                    != Some("write")
                {
                    return Err(self.refused(StatusCode::FORBIDDEN, "Resource not accessible by integration: needs organization_self_hosted_runners: write"));
                }
            }
        }
        Ok(())
    }
}

async fn access_tokens(
    State(c): State<Ctx>,
    Path(id): Path<i64>,
    h: HeaderMap,
    body: Option<axum::Json<Value>>,
) -> Response {
    if let Err(r) = c.check_headers(&h, format!("POST /app/installations/{id}/access_tokens")) {
        return *r;
    }
    if let Err(r) = c.check_jwt(&h) {
        return *r;
    }
    let Some(inst) = c.installation(id) else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    let body = body.map(|b| b.0).unwrap_or(json!({}));
    let allowed = [
        "administration",
        "organization_self_hosted_runners",
        "metadata",
        "actions",
        "checks",
    ];
    let mut permissions = HashMap::new();
    if let Some(p) = body["permissions"].as_object() {
        for (k, v) in p {
            if !allowed.contains(&k.as_str()) {
                return c.refuse(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    &format!("The permissions requested are not granted to this installation: {k}"),
                );
            }
            permissions.insert(k.clone(), v.as_str().unwrap_or("").to_owned());
        }
    } else {
        for k in allowed {
            permissions.insert(k.to_owned(), "write".to_owned());
        }
    }
    let repositories = body["repositories"].as_array().map(|rs| {
        rs.iter()
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    });
    if let Some(rs) = &repositories
        && rs.iter().any(|r| !inst.repos.contains(r))
    {
        return c.refuse(StatusCode::UNPROCESSABLE_ENTITY, "There is at least one repository that does not exist or is not accessible to the parent installation.");
    }
    let token = random_token("ghs_");
    let mut w = c.world.lock().unwrap();
    let expires_at_s = now_s() + w.token_lifetime_s;
    w.mints.push(body);
    w.tokens.insert(
        token.clone(),
        Minted {
            installation: id,
            permissions,
            repositories,
            expires_at_s,
        },
    );
    (
        StatusCode::CREATED,
        axum::Json(json!({ "token": token, "expires_at": iso(expires_at_s) })),
    )
        .into_response()
}

/// Pages `items` as GitHub does: `per_page` (default 30, at most 100),
/// `page` from 1, and a `Link` header with `next` and `last`.
fn paged(url: &str, q: &HashMap<String, String>, items: Vec<Value>, key: &str) -> Response {
    let per_page: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    let page: usize = q
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let total = items.len();
    let last = total.div_ceil(per_page).max(1);
    let slice: Vec<Value> = items
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let mut resp = axum::Json(json!({ "total_count": total, key: slice })).into_response();
    if page < last {
        let link = format!(
            "<{url}?per_page={per_page}&page={}>; rel=\"next\", <{url}?per_page={per_page}&page={last}>; rel=\"last\"",
            page + 1
        );
        resp.headers_mut().insert("link", link.parse().unwrap());
    }
    resp
}

async fn installation_repos(
    State(c): State<Ctx>,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = c.check_headers(&h, "GET /installation/repositories".into()) {
        return *r;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(r) => return *r,
    };
    let inst = c.installation(m.installation).unwrap();
    let items = inst
        .repos
        .iter()
        .filter(|r| m.repositories.as_ref().is_none_or(|rs| rs.contains(r)))
        .map(|r| {
            json!({
                "name": r, "full_name": format!("{}/{r}", inst.account), "private": r.starts_with("private"),
                "owner": { "login": inst.account, "type": inst.account_type },
            })
        })
        .collect();
    let url = format!("{}/installation/repositories", api_base(&h));
    paged(&url, &q, items, "repositories")
}

/// `GET /repos/{owner}/{repo}`: the repository, when the installation
/// token reaches it (404 otherwise, as GitHub hides what it may not see).
async fn repository(
    State(c): State<Ctx>,
    Path((o, r)): Path<(String, String)>,
    h: HeaderMap,
) -> Response {
    if let Err(resp) = c.check_headers(&h, format!("GET /repos/{o}/{r}")) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    let inst = c.installation(m.installation).unwrap();
    let reaches = inst.account.eq_ignore_ascii_case(&o)
        && inst.repos.iter().any(|x| x.eq_ignore_ascii_case(&r))
        && m.repositories
            .as_ref()
            .is_none_or(|rs| rs.iter().any(|x| x.eq_ignore_ascii_case(&r)));
    let full = format!("{o}/{r}").to_ascii_lowercase();
    let id = c.world.lock().unwrap().repo_ids.get(&full).copied();
    match id {
        Some(id) if reaches => axum::Json(json!({
            "id": id, "name": r, "full_name": format!("{}/{r}", inst.account),
            "private": r.starts_with("private"),
            "owner": { "login": inst.account, "type": inst.account_type },
        }))
        .into_response(),
        _ => c.refuse(
            StatusCode::NOT_FOUND,
            "Not Found: the installation does not reach that repository",
        ),
    }
}

/// The API base the caller used (for `Link` URLs).
fn api_base(h: &HeaderMap) -> String {
    let host = h
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let prefix = h
        .get("x-fake-prefix")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    format!("http://{host}{prefix}")
}

fn registration(c: &Ctx, target: String) -> Response {
    let token = random_token("AABF");
    let expires_at_s = now_s() + 3600;
    c.world.lock().unwrap().registrations.insert(
        token.clone(),
        Registration {
            target,
            expires_at_s,
        },
    );
    (
        StatusCode::CREATED,
        axum::Json(json!({ "token": token, "expires_at": iso(expires_at_s) })),
    )
        .into_response()
}

async fn repo_registration(
    State(c): State<Ctx>,
    Path((o, r)): Path<(String, String)>,
    h: HeaderMap,
) -> Response {
    if let Err(resp) = c.check_headers(
        &h,
        format!("POST /repos/{o}/{r}/actions/runners/registration-token"),
    ) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &o, Some(&r)) {
        return *resp;
    }
    registration(&c, format!("{o}/{r}"))
}

async fn org_registration(State(c): State<Ctx>, Path(org): Path<String>, h: HeaderMap) -> Response {
    if let Err(resp) = c.check_headers(
        &h,
        format!("POST /orgs/{org}/actions/runners/registration-token"),
    ) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &org, None) {
        return *resp;
    }
    registration(&c, org)
}

fn list_runners(c: &Ctx, target: &str, q: &HashMap<String, String>, url: String) -> Response {
    let items = c
        .world
        .lock()
        .unwrap()
        .runners
        .iter()
        .filter(|r| r.target == target && q.get("name").is_none_or(|n| *n == r.name))
        .map(|r| {
            json!({ "id": r.id, "name": r.name, "os": "linux", "status": "online", "busy": r.busy,
            "labels": r.labels.iter().map(|l| json!({ "name": l })).collect::<Vec<_>>() })
        })
        .collect();
    paged(&url, q, items, "runners")
}

async fn repo_runners(
    State(c): State<Ctx>,
    Path((o, r)): Path<(String, String)>,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(resp) = c.check_headers(&h, format!("GET /repos/{o}/{r}/actions/runners")) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &o, Some(&r)) {
        return *resp;
    }
    let url = format!("{}/repos/{o}/{r}/actions/runners", api_base(&h));
    list_runners(&c, &format!("{o}/{r}"), &q, url)
}

async fn org_runners(
    State(c): State<Ctx>,
    Path(org): Path<String>,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(resp) = c.check_headers(&h, format!("GET /orgs/{org}/actions/runners")) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &org, None) {
        return *resp;
    }
    let url = format!("{}/orgs/{org}/actions/runners", api_base(&h));
    list_runners(&c, &org, &q, url)
}

fn delete_runner(c: &Ctx, target: &str, id: i64) -> Response {
    let mut w = c.world.lock().unwrap();
    let Some(i) = w
        .runners
        .iter()
        .position(|r| r.target == target && r.id == id)
    else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    if w.runners[i].busy {
        let name = w.runners[i].name.clone();
        drop(w);
        return c.refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("Bad request - Runner \"{name}\" is still running a job\""),
        );
    }
    w.runners.remove(i);
    w.workflow.changed.notify_waiters();
    StatusCode::NO_CONTENT.into_response()
}

async fn delete_repo_runner(
    State(c): State<Ctx>,
    Path((o, r, id)): Path<(String, String, i64)>,
    h: HeaderMap,
) -> Response {
    if let Err(resp) = c.check_headers(&h, format!("DELETE /repos/{o}/{r}/actions/runners/{id}")) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &o, Some(&r)) {
        return *resp;
    }
    delete_runner(&c, &format!("{o}/{r}"), id)
}

async fn delete_org_runner(
    State(c): State<Ctx>,
    Path((org, id)): Path<(String, i64)>,
    h: HeaderMap,
) -> Response {
    if let Err(resp) = c.check_headers(&h, format!("DELETE /orgs/{org}/actions/runners/{id}")) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &org, None) {
        return *resp;
    }
    delete_runner(&c, &org, id)
}

/// `POST …/actions/runners/generate-jitconfig`: registers an ephemeral
/// runner at once and answers its encoded config (base64 JSON here; an
/// opaque secret to the coordinator).
fn jit_config(c: &Ctx, target: &str, org: bool, body: Option<Value>) -> Response {
    let body = body.unwrap_or(json!({}));
    let (Some(name), Some(group), Some(labels)) = (
        body["name"].as_str(),
        body["runner_group_id"].as_i64(),
        body["labels"].as_array(),
    ) else {
        return c.refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid request: name, runner_group_id and labels are required",
        );
    };
    let labels: Vec<String> = labels
        .iter()
        .filter_map(|l| l.as_str().map(str::to_owned))
        .collect();
    if labels.is_empty() || labels.len() > 100 || !(1..=64).contains(&name.len()) {
        return c.refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid request: labels or name",
        );
    }
    if group < 1 || (!org && group != 1) {
        return c.refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid request: no such runner group",
        );
    }
    let mut w = c.world.lock().unwrap();
    if w.runners
        .iter()
        .any(|r| r.target == target && r.name == name)
    {
        drop(w);
        return c.refuse(
            StatusCode::CONFLICT,
            &format!("Already exists - A runner with the name {name} already exists."),
        );
    }
    w.next_id += 1;
    let id = w.next_id;
    w.runners.push(FakeRunner {
        id,
        name: name.into(),
        labels: labels.clone(),
        busy: false,
        target: target.into(),
        runner_group: Some(group.to_string()),
    });
    let config = base64::engine::general_purpose::STANDARD.encode(
        json!({ "runner_id": id, "name": name, "target": target, "secret": random_token("jit_") })
            .to_string(),
    );
    w.jit_configs.insert(config.clone(), id);
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "runner": { "id": id, "name": name, "os": "unknown", "status": "offline", "busy": false,
                "labels": labels.iter().map(|l| json!({ "name": l })).collect::<Vec<_>>() },
            "encoded_jit_config": config,
        })),
    )
        .into_response()
}

async fn repo_jit_config(
    State(c): State<Ctx>,
    Path((o, r)): Path<(String, String)>,
    h: HeaderMap,
    body: Option<axum::Json<Value>>,
) -> Response {
    if let Err(resp) = c.check_headers(
        &h,
        format!("POST /repos/{o}/{r}/actions/runners/generate-jitconfig"),
    ) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &o, Some(&r)) {
        return *resp;
    }
    jit_config(&c, &format!("{o}/{r}"), false, body.map(|b| b.0))
}

async fn org_jit_config(
    State(c): State<Ctx>,
    Path(org): Path<String>,
    h: HeaderMap,
    body: Option<axum::Json<Value>>,
) -> Response {
    if let Err(resp) = c.check_headers(
        &h,
        format!("POST /orgs/{org}/actions/runners/generate-jitconfig"),
    ) {
        return *resp;
    }
    let m = match c.token(&h) {
        Ok(m) => m,
        Err(resp) => return *resp,
    };
    if let Err(resp) = c.may_register(&m, &org, None) {
        return *resp;
    }
    jit_config(&c, &org, true, body.map(|b| b.0))
}

async fn oauth(
    State(c): State<Ctx>,
    axum::Form(f): axum::Form<HashMap<String, String>>,
) -> Response {
    let ok = f.get("client_id").map(String::as_str) == Some(CLIENT_ID)
        && f.get("client_secret").map(String::as_str) == Some(CLIENT_SECRET);
    if !ok {
        return axum::Json(json!({ "error": "incorrect_client_credentials" })).into_response();
    }
    let mut w = c.world.lock().unwrap();
    let Some(login) = f.get("code").and_then(|code| w.codes.remove(code)) else {
        return axum::Json(json!({ "error": "bad_verification_code" })).into_response();
    };
    let token = random_token("ghu_");
    w.users.insert(token.clone(), login);
    axum::Json(json!({ "access_token": token, "token_type": "bearer", "scope": "" }))
        .into_response()
}

async fn user_installations(
    State(c): State<Ctx>,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(resp) = c.check_headers(&h, "GET /user/installations".into()) {
        return *resp;
    }
    let mut w = c.world.lock().unwrap();
    let Some(login) = w.user_of(&h) else {
        drop(w);
        return c.refuse(StatusCode::UNAUTHORIZED, "Bad credentials");
    };
    let reach = w.reach.get(&login).cloned().unwrap_or_default();
    let reached: Vec<FakeInstallation> = w
        .installations
        .iter()
        .filter(|i| reach.contains(&i.id))
        .cloned()
        .collect();
    let items = reached
        .iter()
        .map(|i| {
            json!({ "id": i.id, "app_id": APP_ID, "app_slug": APP_SLUG,
            "account": { "login": i.account, "id": w.account_id(&i.account), "type": i.account_type } })
        })
        .collect();
    drop(w);
    let url = format!("{}/user/installations", api_base(&h));
    paged(&url, &q, items, "installations")
}

/// Counts a request to the issuer and holds it while the issuer is
/// stalled; the 503 it answers while failing.
async fn issuer_down(c: &Ctx) -> Option<Response> {
    c.world.lock().unwrap().oidc_fetches += 1;
    let mut stalled = c.stalled.subscribe();
    if *stalled.borrow_and_update() {
        c.world.lock().unwrap().oidc_held += 1;
        let _ = stalled.wait_for(|s| !*s).await;
        c.world.lock().unwrap().oidc_held -= 1;
    }
    c.world
        .lock()
        .unwrap()
        .oidc_failing
        .then(|| message(StatusCode::SERVICE_UNAVAILABLE, "the issuer is down"))
}

/// `GET /user`: the user behind the token.
async fn user(State(c): State<Ctx>, h: HeaderMap) -> Response {
    if let Err(resp) = c.check_headers(&h, "GET /user".into()) {
        return *resp;
    }
    let mut w = c.world.lock().unwrap();
    let Some(login) = w.user_of(&h) else {
        drop(w);
        return c.refuse(StatusCode::UNAUTHORIZED, "Bad credentials");
    };
    let id = w.account_id(&login);
    axum::Json(json!({ "login": login, "id": id, "type": "User", "site_admin": false }))
        .into_response()
}

/// `GET /user/memberships/orgs/{org}`: the user's membership in `org`, or
/// 404 when they have none (as GitHub answers a user not affiliated with it).
async fn user_membership(State(c): State<Ctx>, Path(org): Path<String>, h: HeaderMap) -> Response {
    if let Err(resp) = c.check_headers(&h, format!("GET /user/memberships/orgs/{org}")) {
        return *resp;
    }
    let mut w = c.world.lock().unwrap();
    let Some(login) = w.user_of(&h) else {
        drop(w);
        return c.refuse(StatusCode::UNAUTHORIZED, "Bad credentials");
    };
    let key = (org.to_ascii_lowercase(), login.to_ascii_lowercase());
    let Some((state, role)) = w.memberships.get(&key).cloned() else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    let (org_id, user_id) = (w.account_id(&org), w.account_id(&login));
    drop(w);
    let base = api_base(&h);
    axum::Json(json!({
        "url": format!("{base}/orgs/{org}/memberships/{login}"),
        "state": state, "role": role,
        "organization_url": format!("{base}/orgs/{org}"),
        "organization": { "login": org, "id": org_id },
        "user": { "login": login, "id": user_id, "type": "User" },
    }))
    .into_response()
}

/// The OIDC issuer's discovery document (the issuer is `{web}/oidc`).
async fn oidc_discovery(State(c): State<Ctx>, h: HeaderMap) -> Response {
    if let Some(down) = issuer_down(&c).await {
        return down;
    }
    let issuer = format!("{}/oidc", api_base_web(&h));
    axum::Json(json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/.well-known/jwks"),
        "response_types_supported": ["id_token"],
        "id_token_signing_alg_values_supported": ["RS256"],
    }))
    .into_response()
}

fn api_base_web(h: &HeaderMap) -> String {
    let host = h
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

async fn oidc_jwks(State(c): State<Ctx>) -> Response {
    if let Some(down) = issuer_down(&c).await {
        return down;
    }
    let keys: Vec<Value> = c
        .world
        .lock()
        .unwrap()
        .oidc_keys
        .iter()
        .map(|(kid, k)| {
            let public = k.to_public_key();
            json!({ "kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
                "n": URL_SAFE_NO_PAD.encode(public.n().to_bytes_be()),
                "e": URL_SAFE_NO_PAD.encode(public.e().to_bytes_be()) })
        })
        .collect();
    axum::Json(json!({ "keys": keys })).into_response()
}

/// What a GitHub Actions runner's ID-token endpoint does: a token for the
/// job's repository, for the audience asked.
async fn actions_token(
    State(c): State<Ctx>,
    h: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let bearer = Ctx::bearer(&h).or_else(|| {
        let v = h.get("authorization")?.to_str().ok()?;
        v.strip_prefix("bearer ").map(str::to_owned)
    });
    let found = bearer.and_then(|b| c.world.lock().unwrap().actions.get(&b).cloned());
    let Some((repository, id)) = found else {
        return message(StatusCode::UNAUTHORIZED, "Bad credentials");
    };
    let issuer = format!("{}/oidc", api_base_web(&h));
    let audience = q.get("audience").cloned().unwrap_or_default();
    let claims = OidcClaims::new(&issuer, &repository, id, &audience);
    let token = sign_oidc(&c.world, &claims.0, None);
    axum::Json(json!({ "count": 1, "value": token })).into_response()
}

/// The claims of a GitHub Actions OIDC token, as GitHub documents them.
pub struct OidcClaims(pub Value);

impl OidcClaims {
    pub fn new(issuer: &str, repository: &str, repository_id: i64, audience: &str) -> Self {
        let now = now_s();
        let owner = repository.split('/').next().unwrap_or("");
        Self(json!({
            "iss": issuer, "aud": audience,
            "sub": format!("repo:{repository}:ref:refs/heads/main"),
            "repository": repository, "repository_id": repository_id.to_string(),
            "repository_owner": owner, "ref": "refs/heads/main", "event_name": "push",
            "workflow": "Drover", "run_id": "1", "actor": "octocat",
            "iat": now, "nbf": now, "exp": now + 300,
        }))
    }
}

/// `claims` signed with the issuer's newest key (or the one named `kid`).
fn sign_oidc(world: &Arc<Mutex<World>>, claims: &Value, kid: Option<&str>) -> String {
    sign_oidc_as(world, claims, kid, None)
}

/// [`sign_oidc`], with `header_kid` (when given) as the header's `kid`.
fn sign_oidc_as(
    world: &Arc<Mutex<World>>,
    claims: &Value,
    kid: Option<&str>,
    header_kid: Option<&str>,
) -> String {
    let w = world.lock().unwrap();
    let (kid, key) = match kid {
        Some(k) => w
            .oidc_keys
            .iter()
            .find(|(id, _)| id == k)
            .expect("that key"),
        None => w.oidc_keys.last().expect("an OIDC key"),
    };
    let kid = header_kid.unwrap_or(kid);
    let header =
        URL_SAFE_NO_PAD.encode(json!({ "alg": "RS256", "typ": "JWT", "kid": kid }).to_string());
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let input = format!("{header}.{body}");
    let signature = rsa::pkcs1v15::SigningKey::<Sha256>::new(key.clone()).sign(input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.to_vec()))
}

fn new_oidc_key(n: usize) -> (String, RsaPrivateKey) {
    (
        format!("kid-{n}"),
        RsaPrivateKey::new(&mut rand_core::OsRng, 2048).expect("an RSA key"),
    )
}

impl FakeGithub {
    /// A github.com (API at the root) or, with `ghe`, a GHE host (API
    /// under `/api/v3`).
    pub async fn start(keys: &AppKeys, ghe: bool) -> Self {
        let world = Arc::new(Mutex::new(World {
            next_id: 1000,
            next_account_id: 500,
            token_lifetime_s: 3600,
            oidc_keys: vec![new_oidc_key(1)],
            ..World::default()
        }));
        let ctx = Ctx {
            world: world.clone(),
            public: keys.public.clone(),
            stalled: tokio::sync::watch::channel(false).0,
        };
        let stalled = ctx.stalled.clone();
        let kept = ctx.clone();
        let api = Router::new()
            .route("/repos/{o}/{r}/actions/runs", get(actions::queued_runs))
            .route(
                "/repos/{o}/{r}/actions/runs/{id}/jobs",
                get(actions::run_jobs),
            )
            .route("/repos/{o}/{r}/actions/jobs/{id}", get(actions::one_job))
            .route(
                "/repos/{o}/{r}/actions/runs/{id}/cancel",
                post(actions::cancel_run),
            )
            .route("/repos/{o}/{r}/check-runs", post(actions::check_run))
            .route("/app/installations/{id}/access_tokens", post(access_tokens))
            .route("/installation/repositories", get(installation_repos))
            .route(
                "/repos/{o}/{r}/actions/runners/registration-token",
                post(repo_registration),
            )
            .route(
                "/orgs/{org}/actions/runners/registration-token",
                post(org_registration),
            )
            .route("/repos/{o}/{r}/actions/runners", get(repo_runners))
            .route(
                "/repos/{o}/{r}/actions/runners/generate-jitconfig",
                post(repo_jit_config),
            )
            .route(
                "/orgs/{org}/actions/runners/generate-jitconfig",
                post(org_jit_config),
            )
            .route("/orgs/{org}/actions/runners", get(org_runners))
            .route(
                "/repos/{o}/{r}/actions/runners/{id}",
                delete(delete_repo_runner),
            )
            .route(
                "/orgs/{org}/actions/runners/{id}",
                delete(delete_org_runner),
            )
            .route("/user/installations", get(user_installations))
            .route("/repos/{o}/{r}", get(repository))
            .route("/user", get(user))
            .route("/user/memberships/orgs/{org}", get(user_membership));
        let prefix = if ghe { "/api/v3" } else { "" };
        let api = api.layer(axum::middleware::from_fn(
            move |mut req: axum::extract::Request, next: axum::middleware::Next| async move {
                req.headers_mut()
                    .insert("x-fake-prefix", prefix.parse().unwrap());
                next.run(req).await
            },
        ));
        let web = Router::new()
            .route("/login/oauth/access_token", post(oauth))
            .route(
                "/oidc/.well-known/openid-configuration",
                get(oidc_discovery),
            )
            .route("/oidc/.well-known/jwks", get(oidc_jwks))
            .route("/oidc/_actions/token", get(actions_token))
            .route("/_fake/actions-runner.tar.gz", get(actions::tarball))
            .route("/_fake/actions-runner/run", post(actions::runner_run));
        let app = if ghe {
            web.nest("/api/v3", api)
        } else {
            web.merge(api)
        }
        .with_state(ctx);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            api: format!("{base}{prefix}"),
            web: base,
            world,
            stalled,
            ctx: kept,
            _task: Arc::new(Serving(task)),
        }
    }

    fn ctx(&self) -> Ctx {
        self.ctx.clone()
    }

    /// The OIDC issuer this host plays (GitHub Actions' token service).
    pub fn oidc_issuer(&self) -> String {
        format!("{}/oidc", self.web)
    }

    /// An OIDC token with these claims, signed by the issuer's newest key,
    /// or by the key `kid`.
    pub fn oidc_token(&self, claims: &OidcClaims, kid: Option<&str>) -> String {
        sign_oidc(&self.world, &claims.0, kid)
    }

    /// A token signed by the issuer's newest key whose header names `kid`,
    /// a key the issuer never had.
    pub fn oidc_token_claiming_kid(&self, claims: &OidcClaims, kid: &str) -> String {
        sign_oidc_as(&self.world, &claims.0, None, Some(kid))
    }

    /// The issuer starts signing with a new key (listed in its JWKS with
    /// the old ones); the new key's id.
    pub fn rotate_oidc_key(&self) -> String {
        let mut w = self.world.lock().unwrap();
        let key = new_oidc_key(w.oidc_keys.len() + 1);
        let kid = key.0.clone();
        w.oidc_keys.push(key);
        kid
    }

    /// What a GitHub Actions job of `repository` sees: the
    /// ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN to ask for its OIDC token.
    pub fn actions_job(&self, repository: &str, repository_id: i64) -> (String, String) {
        let token = random_token("actions_");
        self.world
            .lock()
            .unwrap()
            .actions
            .insert(token.clone(), (repository.to_owned(), repository_id));
        (
            format!("{}/oidc/_actions/token?api-version=2.0", self.web),
            token,
        )
    }

    /// Installs the App on `account` with these repositories; its id.
    pub fn install(&self, account: &str, account_type: &str, repos: &[&str]) -> i64 {
        let mut w = self.world.lock().unwrap();
        w.next_id += 1;
        let id = w.next_id;
        w.installations.push(FakeInstallation {
            id,
            account: account.into(),
            account_type: account_type.into(),
            repos: repos.iter().map(|r| (*r).to_owned()).collect(),
        });
        for repo in repos {
            let full = format!("{account}/{repo}").to_ascii_lowercase();
            if !w.repo_ids.contains_key(&full) {
                w.next_id += 1;
                let repo_id = w.next_id;
                w.repo_ids.insert(full, repo_id);
            }
        }
        id
    }

    /// GitHub's id of repository `owner/name` (one the App was installed on).
    pub fn repo_id(&self, repository: &str) -> i64 {
        self.world.lock().unwrap().repo_ids[&repository.to_ascii_lowercase()]
    }

    /// The repository is deleted and made again under the same name: it
    /// has a new id, which this returns.
    pub fn recreate_repo(&self, repository: &str) -> i64 {
        let mut w = self.world.lock().unwrap();
        w.next_id += 1;
        let id = w.next_id;
        w.repo_ids.insert(repository.to_ascii_lowercase(), id);
        id
    }

    /// The OIDC issuer answers its discovery document and JWKS with a 503
    /// (`true`) or serves them again (`false`).
    pub fn fail_oidc_issuer(&self, failing: bool) {
        self.world.lock().unwrap().oidc_failing = failing;
    }

    /// The OIDC issuer holds every answer (`true`) until released (`false`).
    pub fn stall_oidc_issuer(&self, stalled: bool) {
        self.stalled.send_replace(stalled);
    }

    /// Requests the stalled OIDC issuer holds now.
    pub fn oidc_held(&self) -> usize {
        self.world.lock().unwrap().oidc_held
    }

    /// How many requests the OIDC issuer's discovery document and JWKS had.
    pub fn oidc_fetches(&self) -> usize {
        self.world.lock().unwrap().oidc_fetches
    }

    /// A one-time OAuth code for `login`, who may reach `installations`.
    pub fn sign_in(&self, login: &str, installations: &[i64]) -> String {
        let mut w = self.world.lock().unwrap();
        let code = random_token("code_");
        w.codes.insert(code.clone(), login.into());
        w.reach.insert(login.into(), installations.to_vec());
        code
    }

    /// `login`'s membership in organization `org`: `state` `active` or
    /// `pending`, `role` `admin` (an owner), `member` or `billing_manager`.
    pub fn set_membership(&self, org: &str, login: &str, state: &str, role: &str) {
        self.world.lock().unwrap().memberships.insert(
            (org.to_ascii_lowercase(), login.to_ascii_lowercase()),
            (state.into(), role.into()),
        );
    }

    /// The installation `id`, if the App is installed there.
    pub fn installation(&self, id: i64) -> Option<FakeInstallation> {
        let w = self.world.lock().unwrap();
        w.installations.iter().find(|i| i.id == id).cloned()
    }

    /// What `config.sh` does with a registration token: registers a runner
    /// (refused when the token is unknown, expired, or for another target).
    pub fn register_runner(
        &self,
        token: &str,
        target: &str,
        name: &str,
        labels: &[&str],
        runner_group: Option<&str>,
    ) -> Result<i64, String> {
        let mut w = self.world.lock().unwrap();
        let reg = w
            .registrations
            .get(token)
            .cloned()
            .ok_or("unknown registration token")?;
        if reg.expires_at_s <= now_s() {
            return Err("expired registration token".into());
        }
        if reg.target != target {
            return Err(format!("the token is for {}, not {target}", reg.target));
        }
        w.runners
            .retain(|r| !(r.target == target && r.name == name));
        w.next_id += 1;
        let id = w.next_id;
        w.runners.push(FakeRunner {
            id,
            name: name.into(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            busy: false,
            target: target.into(),
            runner_group: runner_group.map(str::to_owned),
        });
        Ok(id)
    }

    pub fn set_busy(&self, name: &str, busy: bool) {
        let mut w = self.world.lock().unwrap();
        for r in w.runners.iter_mut().filter(|r| r.name == name) {
            r.busy = busy;
        }
    }

    pub fn runners(&self) -> Vec<FakeRunner> {
        self.world.lock().unwrap().runners.clone()
    }

    /// The runner a just-in-time config was minted for, if it was.
    pub fn jit_runner_of(&self, config: &str) -> Option<i64> {
        self.world.lock().unwrap().jit_configs.get(config).copied()
    }

    /// How many just-in-time configs were minted.
    pub fn jit_configs_minted(&self) -> usize {
        self.world.lock().unwrap().jit_configs.len()
    }

    /// Every installation token minted so far is past its expiry (as if an
    /// hour went by), whatever the coordinator's cache thinks.
    pub fn expire_installation_tokens(&self) {
        let mut w = self.world.lock().unwrap();
        for m in w.tokens.values_mut() {
            m.expires_at_s = now_s() - 1;
        }
    }

    /// Every registration token handed out so far is past its expiry.
    pub fn expire_registration_tokens(&self) {
        let mut w = self.world.lock().unwrap();
        for r in w.registrations.values_mut() {
            r.expires_at_s = now_s() - 1;
        }
    }

    /// The bodies of the installation-token requests, in order.
    pub fn mints(&self) -> Vec<Value> {
        self.world.lock().unwrap().mints.clone()
    }

    /// Every API call so far, as `METHOD path`.
    pub fn calls(&self) -> Vec<String> {
        self.world.lock().unwrap().calls.clone()
    }

    /// Why the fake refused calls so far.
    pub fn refusals(&self) -> Vec<String> {
        self.world.lock().unwrap().refusals.clone()
    }

    /// The registration tokens handed out (to scan logs and databases for).
    pub fn registration_tokens(&self) -> Vec<String> {
        self.world
            .lock()
            .unwrap()
            .registrations
            .keys()
            .cloned()
            .collect()
    }

    /// The installation and user tokens handed out.
    pub fn access_tokens(&self) -> Vec<String> {
        let w = self.world.lock().unwrap();
        w.tokens.keys().chain(w.users.keys()).cloned().collect()
    }
}

/// The host name the tests give the GHE fake.
pub const GHE: &str = "ghe.test";

/// The App on a fake github.com and a fake GHE host (`GHE`), with its key
/// and OAuth secret in files, for a coordinator's `serve` flags.
pub struct GithubApp {
    pub com: FakeGithub,
    pub ghe: FakeGithub,
    files: super::TempDir,
}

impl GithubApp {
    pub async fn start() -> Self {
        let keys = AppKeys::generate();
        let com = FakeGithub::start(&keys, false).await;
        let ghe = FakeGithub::start(&keys, true).await;
        let files = super::TempDir::new("github-app");
        std::fs::write(files.path().join("app.pem"), &keys.private_pem).unwrap();
        std::fs::write(files.path().join("client-secret"), CLIENT_SECRET).unwrap();
        std::fs::write(files.path().join("webhook-secret"), WEBHOOK_SECRET).unwrap();
        Self { com, ghe, files }
    }

    /// `serve` flags that configure the App on both hosts, with removals of
    /// busy GitHub runners retried every 100 ms.
    pub fn serve_args(&self) -> Vec<String> {
        let file = |name: &str| self.files.path().join(name).display().to_string();
        [
            "--github-app-id",
            &APP_ID.to_string(),
            "--github-app-slug",
            APP_SLUG,
            "--github-app-key-file",
            &file("app.pem"),
            "--github-client-id",
            CLIENT_ID,
            "--github-client-secret-file",
            &file("client-secret"),
            "--github-api",
            &self.com.api,
            "--github-web",
            &self.com.web,
            "--github-host",
            &format!("{GHE}={}", self.ghe.api),
            "--github-retry-ms",
            "100",
            "--github-webhook-secret-file",
            &file("webhook-secret"),
            "--github-on-demand-ms",
            "100",
            "--github-oidc-issuer",
            &self.com.oidc_issuer(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

/// The App's webhook secret (`GithubApp::serve_args` gives its file).
pub const WEBHOOK_SECRET: &str = "whsec-for-the-fake-app";

/// `X-Hub-Signature-256` for `body` under `secret`: `sha256=` and the hex
/// HMAC-SHA256 (RFC 2104), as GitHub signs its deliveries.
pub fn sign_webhook(secret: &str, body: &[u8]) -> String {
    use sha2::Digest as _;
    let mut key = [0u8; 64];
    if secret.len() > 64 {
        key[..32].copy_from_slice(&Sha256::digest(secret.as_bytes()));
    } else {
        key[..secret.len()].copy_from_slice(secret.as_bytes());
    }
    let pad = |b: u8| key.iter().map(|k| k ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(body)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    let hex: String = outer.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// One webhook delivery to coordinator `url`, as GitHub sends it: `event`
/// (`X-GitHub-Event`), `delivery` (`X-GitHub-Delivery`), `signature`
/// (`X-Hub-Signature-256`, none when `None`). (status, answer).
pub async fn deliver(
    url: &str,
    event: &str,
    delivery: &str,
    signature: Option<&str>,
    body: &[u8],
) -> (u16, Value) {
    let http = reqwest::Client::new();
    let mut req = http
        .post(format!("{url}/v1/github/webhook"))
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", delivery)
        .body(body.to_vec());
    if let Some(sig) = signature {
        req = req.header("x-hub-signature-256", sig);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A `workflow_job` event's body: `action` on job `id` of `owner/repo`,
/// asking for `labels`, run on `runner` (once it ran).
pub fn workflow_job(
    action: &str,
    id: i64,
    repository: &str,
    labels: &[&str],
    runner: Option<&str>,
    conclusion: Option<&str>,
) -> Vec<u8> {
    let (owner, name) = repository.split_once('/').expect("owner/name");
    json!({
        "action": action,
        "workflow_job": { "id": id, "run_id": id * 10, "name": "build", "labels": labels,
            "status": action, "runner_name": runner, "conclusion": conclusion },
        "repository": { "id": 1, "name": name, "full_name": repository, "owner": { "login": owner } },
    })
    .to_string()
    .into_bytes()
}

/// GitHub's setup redirect to coordinator `url`: (status, page).
pub async fn setup_redirect(url: &str, query: &str) -> (u16, String) {
    // The system's roots, plus DROVER_CA_FILE's (the desktop e2e's
    // coordinator serves HTTPS with a throwaway CA).
    let http = runner_core::client::ClientOptions {
        ca_file: std::env::var_os("DROVER_CA_FILE").map(Into::into),
    }
    .http_builder()
    .expect("DROVER_CA_FILE")
    .build()
    .unwrap();
    let resp = http
        .get(format!("{url}/v1/github/setup?{query}"))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// Links installation `id` of `fake` to `admin`'s workspace as GitHub's
/// install flow does (an install link, then the setup redirect with an
/// OAuth code of a user who administers its account: the user account
/// itself, or `octocat`, an active admin of the organization); the setup
/// page.
pub async fn link(
    url: &str,
    admin: &super::Member,
    fake: &FakeGithub,
    host: Option<&str>,
    id: i64,
) -> String {
    link_with(url, &admin.client, fake, host, id).await
}

/// [`link`], with an admin's client.
pub async fn link_with(
    url: &str,
    admin: &runner_core::client::Client,
    fake: &FakeGithub,
    host: Option<&str>,
    id: i64,
) -> String {
    let install = admin.github_install_link(host).await.unwrap();
    let state = install
        .url
        .split_once("state=")
        .expect("a state in the link")
        .1;
    let installed = fake.installation(id).expect("an installation of the App");
    let login = if installed.account_type == "Organization" {
        fake.set_membership(&installed.account, "octocat", "active", "admin");
        "octocat"
    } else {
        installed.account.as_str()
    };
    let code = fake.sign_in(login, &[id]);
    let (status, page) = setup_redirect(
        url,
        &format!("installation_id={id}&setup_action=install&state={state}&code={code}"),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    page
}

/// Installs the App on `owner` with `repos` and links the installation to
/// `admin`'s workspace; then links each `owner/repo` for CI (the link pins
/// the repository's id, read through the App). GitHub's ids of the
/// repositories, in order.
pub async fn link_ci(
    url: &str,
    admin: &super::Member,
    fake: &FakeGithub,
    owner: &str,
    repos: &[&str],
) -> Vec<i64> {
    let id = fake.install(owner, "User", repos);
    link(url, admin, fake, None, id).await;
    let mut ids = Vec::new();
    for repo in repos {
        let repository = format!("{owner}/{repo}");
        let linked = admin
            .client
            .set_ci_link(&drover_wire::CiLinkRequest {
                repository: repository.clone(),
                ..Default::default()
            })
            .await
            .expect("link for CI");
        assert_eq!(linked.repository_id, Some(fake.repo_id(&repository)));
        ids.push(fake.repo_id(&repository));
    }
    ids
}
