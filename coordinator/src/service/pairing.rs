//! Who the caller is, pairing codes for a new device, and the member's own
//! tokens. (Redeeming a code needs no member: it is the runner protocol's
//! kind of call, rate-limited per client in `http::pairing`.)

use drover_wire as wire;

use super::{Services, dto};
use crate::error::Result;
use crate::store::Member;

pub async fn me(svc: &Services, m: &Member) -> Result<wire::Me> {
    let token = svc.store.current_token(m).await?;
    Ok(dto::me(m.clone(), token))
}

/// A one-time pairing code (ten minutes) and its `drover://pair` link.
pub async fn create_code(svc: &Services, m: &Member) -> Result<wire::PairingCode> {
    let code = svc.store.create_pairing_code(m, svc.now()).await?;
    Ok(dto::pairing_code(code, &svc.public_url))
}

pub async fn tokens(svc: &Services, m: &Member) -> Result<wire::ApiTokenList> {
    let tokens = svc.store.list_member_tokens(m, svc.now()).await?;
    Ok(wire::ApiTokenList {
        tokens: dto::all(tokens),
    })
}

/// Revokes one of the member's tokens, and the runners its device paired
/// (dropped from every replica's cache by the signals).
pub async fn revoke_token(svc: &Services, m: &Member, id: &str) -> Result<()> {
    let removed = svc.store.revoke_member_token(m, id, svc.now()).await?;
    svc.announce(super::members::removed_signals(removed));
    Ok(())
}
