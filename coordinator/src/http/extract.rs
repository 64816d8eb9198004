//! Extractors that answer bad input with our JSON errors, and the
//! authentication extractors for each kind of credential.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use drover_wire::{ErrorCode, PROTOCOL_HEADER, PROTOCOL_VERSION};
use serde::de::DeserializeOwned;

use super::AppState;
use crate::error::Error;
use crate::ids::{RuntimeId, Secret};
use crate::store::{Member, Principal, RunnerAuth};

/// `axum::Json`, with rejections mapped to BAD_REQUEST / PAYLOAD_TOO_LARGE.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Error> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> Error {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        Error::api(ErrorCode::PayloadTooLarge, "the request body is too large")
    } else {
        Error::bad_request(rejection.body_text())
    }
}

/// A JSON body that may be absent (an empty body means `T::default()`).
pub struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &S) -> Result<Self, Error> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|r| {
                if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    Error::api(ErrorCode::PayloadTooLarge, "the request body is too large")
                } else {
                    Error::bad_request(r.body_text())
                }
            })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(T::default()));
        }
        serde_json::from_slice(&bytes)
            .map(Self)
            .map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))
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
    if token.is_empty() || token.len() > 256 {
        return Err(unauthorized("malformed token"));
    }
    Ok(Secret::new(token.to_owned()))
}

async fn principal(parts: &Parts, state: &AppState) -> Result<Principal, Error> {
    authenticated(&bearer(parts)?, state).await
}

async fn authenticated(token: &Secret, state: &AppState) -> Result<Principal, Error> {
    state
        .store
        .authenticate(token, state.clock.now_ms())
        .await?
        .ok_or_else(|| Error::api(ErrorCode::Unauthorized, "unknown, expired or revoked token"))
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
        match principal(parts, state).await? {
            Principal::Member(m) => Ok(Self(m)),
            _ => Err(wrong_kind("member API")),
        }
    }
}

fn check_protocol(parts: &Parts) -> Result<(), Error> {
    match parts.headers.get(PROTOCOL_HEADER) {
        None => Ok(()),
        Some(v)
            if v.to_str().ok().and_then(|v| v.parse::<u32>().ok()) == Some(PROTOCOL_VERSION) =>
        {
            Ok(())
        }
        Some(v) => Err(Error::api(
            ErrorCode::UnsupportedProtocol,
            format!(
                "runner protocol {v:?} is not supported; this coordinator speaks {PROTOCOL_VERSION}"
            ),
        )),
    }
}

/// A runner's credential (`rnr_…`), on the runner protocol.
pub struct AuthRunner(pub RunnerAuth);

impl FromRequestParts<AppState> for AuthRunner {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Error> {
        check_protocol(parts)?;
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

/// A pool's join token (`djt_…`).
pub struct AuthJoin(pub RuntimeId);

impl FromRequestParts<AppState> for AuthJoin {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Error> {
        check_protocol(parts)?;
        match principal(parts, state).await? {
            Principal::Join { runtime_id } => Ok(Self(runtime_id)),
            _ => Err(wrong_kind("join")),
        }
    }
}
