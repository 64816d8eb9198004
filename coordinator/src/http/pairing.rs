//! Pairing a device: `/v1/me/pairing-codes`, their redemption (which needs
//! no other credential), who the caller is (`/v1/me`), and the member's own
//! tokens (`/v1/me/tokens`).

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, get, post};
use drover_wire as wire;

use super::AppState;
use super::dto;
use super::extract::{AuthMember, Json};
use crate::error::Result;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/me", get(me))
        .route("/v1/me/pairing-codes", post(create_code))
        .route("/v1/pairing-codes/{code}/redeem", post(redeem))
        .route("/v1/me/tokens", get(list_tokens))
        .route("/v1/me/tokens/{id}", delete(revoke_token))
}

async fn me(State(st): State<AppState>, AuthMember(m): AuthMember) -> Result<axum::Json<wire::Me>> {
    let token = st.store.current_token(&m).await?;
    Ok(axum::Json(dto::me(m, token)))
}

async fn create_code(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<impl IntoResponse> {
    let code = st.store.create_pairing_code(&m, st.now()).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(dto::pairing_code(code, &st.public_url)),
    ))
}

async fn redeem(
    State(st): State<AppState>,
    Path(code): Path<String>,
    Json(req): Json<wire::RedeemPairingCode>,
) -> Result<impl IntoResponse> {
    let device = st
        .store
        .redeem_pairing_code(&code, &req.device_name, st.now())
        .await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(wire::DeviceToken::from(device)),
    ))
}

async fn list_tokens(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
) -> Result<axum::Json<wire::ApiTokenList>> {
    let tokens = st.store.list_member_tokens(&m, st.now()).await?;
    Ok(axum::Json(wire::ApiTokenList {
        tokens: dto::all(tokens),
    }))
}

async fn revoke_token(
    State(st): State<AppState>,
    AuthMember(m): AuthMember,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    st.store.revoke_member_token(&m, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
