//! Pairing a device: `/v1/me/pairing-codes`, their redemption (which needs
//! no other credential), who the caller is (`/v1/me`), and the member's own
//! tokens (`/v1/me/tokens`).

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router};
use drover_wire::{self as wire, ErrorCode};

use super::error::error_response;
use super::extract::{AuthMember, Json};
use super::{AppState, Routes as _, created};
use crate::error::{Error, Result};
use crate::service::pairing;
use drover_wire::op;

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::GetMe, me)
        .at(op::CreatePairingCode, create_code)
        .at(op::RedeemPairingCode, redeem)
        .at(op::ListTokensMine, list_tokens)
        .at(op::RevokeTokenMine, revoke_token)
}

pub(super) async fn me(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::Me>> {
    Ok(axum::Json(pairing::me(&st, &m).await?))
}

pub(super) async fn create_code(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<impl IntoResponse> {
    Ok(created(pairing::create_code(&st, &m).await?))
}

/// Redeems a code. A wrong code (unknown, used or expired) costs its client
/// a token of the redeem limit, before any lookup: out of tokens, it is
/// answered `429 RATE_LIMITED` with `Retry-After`.
async fn redeem(
    State(st): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(code): Path<String>,
    Json(req): Json<wire::RedeemPairingCode>,
) -> Response {
    let ip = peer.map(|Extension(ConnectInfo(addr))| addr.ip());
    if let Err(seconds) = st.redeem_limit.take(ip, Instant::now()) {
        let mut response = error_response(
            ErrorCode::RateLimited,
            format!("too many wrong pairing codes from your address; retry after {seconds} s"),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return response;
    }
    let redeemed = st
        .store
        .redeem_pairing_code(&code, &req.device_name, st.now())
        .await
        .map_err(Error::from);
    let wrong_code = matches!(
        &redeemed,
        Err(Error::Api { code, .. }) if matches!(
            code,
            ErrorCode::NotFound | ErrorCode::PairingCodeUsed | ErrorCode::PairingCodeExpired
        )
    );
    if !wrong_code {
        st.redeem_limit.give_back(ip, Instant::now());
    }
    match redeemed {
        Ok(device) => (
            StatusCode::CREATED,
            axum::Json(wire::DeviceToken::from(device)),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

pub(super) async fn list_tokens(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::ApiTokenList>> {
    Ok(axum::Json(pairing::tokens(&st, &m).await?))
}

pub(super) async fn revoke_token(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    pairing::revoke_token(&st, &m, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
