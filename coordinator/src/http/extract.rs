//! Extractors that answer bad input with our JSON errors, and the
//! authentication extractors for each kind of credential.

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use drover_wire::{ErrorCode, SURFACE_HEADER};
use futures_util::StreamExt as _;
use serde::de::DeserializeOwned;
use tokio::sync::OwnedSemaphorePermit;

use super::error::overloaded;
use super::{AppState, MAX_BODY_BYTES};
use crate::error::Error;
use crate::ids::{JoinTokenId, RuntimeId, Secret, TokenKind};
use crate::store::{CiLookup, Member, Principal, RunnerAuth, Surface};

/// A JSON object body, read within the body budget and the body timeout.
/// Refusals: BAD_REQUEST (not JSON, not an object, wrong shape),
/// PAYLOAD_TOO_LARGE, OVERLOADED (the budget is spent), REQUEST_TIMEOUT.
pub struct Json<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Json<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Error> {
        if !json_content_type(req.headers()) {
            return Err(Error::bad_request(
                "expected a request with Content-Type: application/json",
            ));
        }
        let (bytes, _permit) = read_body(req, state).await?;
        parse_object(&bytes).map(Self)
    }
}

/// A JSON body kept as the bytes that came (a webhook's signature covers
/// them), read within the body budget and the body timeout.
pub struct RawJson(pub Vec<u8>);

impl FromRequest<AppState> for RawJson {
    type Rejection = Error;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Error> {
        if !json_content_type(req.headers()) {
            return Err(Error::bad_request(
                "expected a request with Content-Type: application/json",
            ));
        }
        let (bytes, _permit) = read_body(req, state).await?;
        Ok(Self(bytes))
    }
}

/// A JSON object body that may be absent (an empty body means `T::default()`).
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default> FromRequest<AppState> for OptionalJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Error> {
        let (bytes, _permit) = read_body(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(T::default()));
        }
        parse_object(&bytes).map(Self)
    }
}

/// Reads a body of at most `limit` bytes into one buffer (of the announced
/// size, when there is one), dropping each chunk as it is copied: a slow
/// body then holds its own buffer only, not the connection buffers its
/// chunks were cut from (one allocation, returned whole when it ends).
async fn collect(body: Body, limit: usize, announced: bool) -> Result<Vec<u8>, Error> {
    let mut chunks = body.into_data_stream();
    // A large announced body holds its share of the body budget: one buffer
    // of that size, filled as it arrives. A small one (outside the budget)
    // grows as it arrives, so a stalled sender pins little.
    let mut buf = Vec::with_capacity(if announced && limit > SMALL_BODY_BYTES {
        limit
    } else {
        limit.min(16 * 1024)
    });
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| Error::bad_request(format!("reading the body: {e}")))?;
        if buf.len() + chunk.len() > limit {
            return Err(Error::api(
                ErrorCode::PayloadTooLarge,
                "the request body is too large",
            ));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

/// `application/json` or `application/<anything>+json`, any parameters.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (subtype.eq_ignore_ascii_case("json") || subtype.to_ascii_lowercase().ends_with("+json"))
}

/// Every request body is a JSON object: serde would also take an array
/// (`[null, null]`) for a struct, field by field.
fn parse_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Error::bad_request("the request body must be a JSON object"));
    }
    serde_json::from_slice(bytes).map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))
}

/// Bodies up to this size (a runner's log chunk is at most 64 KiB of text,
/// before JSON escapes) do not take from the body budget.
const SMALL_BODY_BYTES: usize = 128 * 1024;

/// The whole body. A large one holds its share of the body budget while it
/// is read and parsed: as many bytes as it announces (`Content-Length`), or
/// the largest body accepted when it does not say. Bodies over the budget
/// are refused at once (they would pin memory while their senders dawdle);
/// a body that does not arrive within the body timeout is refused too.
async fn read_body(
    req: Request,
    state: &AppState,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), Error> {
    let too_large = || Error::api(ErrorCode::PayloadTooLarge, "the request body is too large");
    let length = req.headers().get(header::CONTENT_LENGTH);
    let announced = match length {
        None => MAX_BODY_BYTES,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .ok_or_else(|| Error::bad_request("malformed Content-Length"))?,
    };
    let has_length = length.is_some();
    if announced > MAX_BODY_BYTES {
        return Err(too_large());
    }
    // Small bodies (a heartbeat, a submit) are bounded by the connection
    // cap, like the connections' own buffers: taking from the budget, they
    // would be refused whenever big slow uploads have spent it.
    let permit = if announced <= SMALL_BODY_BYTES {
        None
    } else {
        let permit = state
            .limits
            .body_bytes
            .clone()
            .try_acquire_many_owned(announced as u32)
            .map_err(|_| overloaded("too many large request bodies in flight"))?;
        Some(permit)
    };
    let read = collect(req.into_body(), announced, has_length);
    match tokio::time::timeout(state.limits.body_timeout, read).await {
        Ok(Ok(bytes)) => Ok((bytes, permit)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::api(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within {} ms",
                state.limits.body_timeout.as_millis()
            ),
        )),
    }
}

/// `axum::extract::Query` with rejections mapped to BAD_REQUEST.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Error> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|r: QueryRejection| Error::bad_request(r.body_text()))
    }
}

fn bearer(parts: &Parts) -> Result<Secret, Error> {
    let unauthorized = |m: &str| Error::api(ErrorCode::Unauthorized, m);
    let value = parts
        .headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| unauthorized("missing Authorization: Bearer <token>"))?
        .to_str()
        .map_err(|_| unauthorized("malformed Authorization header"))?;
    let token = value
        .strip_prefix("Bearer ")
        .ok_or_else(|| unauthorized("the Authorization header must be Bearer <token>"))?
        .trim();
    let longest = if crate::github::oidc::looks_like_jwt(token) {
        crate::github::oidc::MAX_TOKEN_LEN
    } else {
        256
    };
    if token.is_empty() || token.len() > longest {
        return Err(unauthorized("malformed token"));
    }
    Ok(Secret::new(token.to_owned()))
}

async fn principal(parts: &Parts, state: &AppState) -> Result<Principal, Error> {
    authenticated(&bearer(parts)?, state).await
}

async fn authenticated(token: &Secret, state: &AppState) -> Result<Principal, Error> {
    if let Some(principal) = state
        .store
        .authenticate(token, state.clock.now_ms())
        .await?
    {
        return Ok(principal);
    }
    // A device whose member token was revoked is told by whom, from
    // where and when (the one who presents it held it).
    let revoked = match TokenKind::of(token.expose()) {
        Some(TokenKind::User) => state.store.token_revocation(token).await?,
        _ => None,
    };
    Err(Error::api(
        ErrorCode::Unauthorized,
        revoked.unwrap_or_else(|| "unknown, expired or revoked token".to_owned()),
    ))
}

fn wrong_kind(want: &str) -> Error {
    Error::api(
        ErrorCode::Forbidden,
        format!("this endpoint needs a {want} token"),
    )
}

/// A member's API token.
pub struct AuthMember(pub Member);

impl FromRequestParts<AppState> for AuthMember {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Error> {
        let surface = match parts.headers.get(SURFACE_HEADER) {
            None => Surface::Rest,
            Some(v) => v
                .to_str()
                .ok()
                .and_then(Surface::from_header)
                .ok_or_else(|| {
                    Error::bad_request(format!("{SURFACE_HEADER} must be rest, cli or desktop"))
                })?,
        };
        let token = bearer(parts)?;
        if crate::github::oidc::looks_like_jwt(token.expose()) {
            return ci_principal(parts, &token, state).await.map(Self);
        }
        match authenticated(&token, state).await? {
            Principal::Member(m) => Ok(Self(Member { surface, ..m })),
            _ => Err(wrong_kind("member API")),
        }
    }
}

/// A GitHub Actions OIDC token of a linked repository: a CI principal of
/// the workspace that links it, on the job routes only.
async fn ci_principal(parts: &Parts, token: &Secret, state: &AppState) -> Result<Member, Error> {
    if !parts.uri.path().starts_with("/v1/jobs") {
        return Err(Error::api(
            ErrorCode::Forbidden,
            "a CI token (GitHub Actions OIDC) may only submit jobs, and read, follow and cancel its repository's own jobs",
        ));
    }
    let unauthorized = |m: String| Error::api(ErrorCode::Unauthorized, m);
    let claims = state
        .oidc
        .verify(token.expose())
        .await
        .map_err(unauthorized)?;
    match state
        .store
        .ci_principal(
            crate::github::GITHUB_COM,
            &claims.repository,
            claims.repository_id,
        )
        .await?
    {
        CiLookup::Principal(m, policy) => {
            match policy.refusal(claims.git_ref.as_deref(), claims.event_name.as_deref()) {
                None => Ok(m),
                Some(why) => Err(Error::api(ErrorCode::CiNotAllowed, why)),
            }
        }
        CiLookup::NotLinked => Err(unauthorized(format!(
            "{} is not linked to a workspace for CI (PUT /v1/workspace/ci/links)",
            claims.repository
        ))),
        CiLookup::OtherRepository => Err(unauthorized(format!(
            "{} is not the repository that was linked (its id changed: it was deleted and made again); link it again",
            claims.repository
        ))),
        CiLookup::Unpinned => Err(unauthorized(format!(
            "{} was linked before its repository id was pinned at link time; link it again",
            claims.repository
        ))),
    }
}

/// A runner's credential (`rnr_…`), on the runner protocol.
pub struct AuthRunner(pub RunnerAuth);

impl FromRequestParts<AppState> for AuthRunner {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Error> {
        let token = bearer(parts)?;
        let (hash, now) = (token.hash(), state.clock.now_ms());
        if let Some(r) = state.runners.get(&hash, now) {
            return Ok(Self(r));
        }
        match authenticated(&token, state).await? {
            Principal::Runner(r) => {
                state.runners.put(hash, r.clone(), now);
                Ok(Self(r))
            }
            _ => Err(wrong_kind("runner")),
        }
    }
}

/// A pool's join token (`djt_…`): its pool, and its id.
pub struct AuthJoin(pub RuntimeId, pub JoinTokenId);

impl FromRequestParts<AppState> for AuthJoin {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Error> {
        match principal(parts, state).await? {
            Principal::Join {
                runtime_id,
                token_id,
            } => Ok(Self(runtime_id, token_id)),
            _ => Err(wrong_kind("join")),
        }
    }
}

/// The member behind an MCP request: the same bearer token as REST, with
/// `mcp` as the surface the audit log names.
pub async fn mcp_member(parts: &Parts, state: &AppState) -> Result<Member, Error> {
    match principal(parts, state).await? {
        Principal::Member(m) => Ok(Member {
            surface: Surface::Mcp,
            ..m
        }),
        _ => Err(wrong_kind("member API")),
    }
}
