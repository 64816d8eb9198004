//! Version skew: every request that names its protocol (`drover-protocol`,
//! as runner-core's client sends with `drover-client: drover/<version>`) is
//! checked against the range this coordinator serves, before routing. Older
//! than [`OLDEST_PROTOCOL`]: `426 UPGRADE_REQUIRED`, naming the version to
//! install; newer than [`PROTOCOL_VERSION`]: `426 COORDINATOR_TOO_OLD`, so a
//! newer client is refused plainly rather than failing later on a field this
//! coordinator does not know. A request without the header (curl, scripts,
//! browsers, MCP clients) is served as ever, and `/healthz` always is: it is
//! where a client of any version reads the range.

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use drover_wire::{
    CLIENT_HEADER, ErrorCode, OLDEST_PROTOCOL, PROTOCOL_HEADER, PROTOCOL_VERSION, VERSION,
};

use super::error::error_response;

/// The route served whatever the client speaks.
const ALWAYS_SERVED: &str = "/healthz";

pub async fn refuse_skew(req: Request, next: Next) -> Response {
    if req.uri().path() == ALWAYS_SERVED {
        return next.run(req).await;
    }
    match refusal(req.headers()) {
        None => next.run(req).await,
        Some((code, message)) => {
            tracing::info!(
                code = code.as_str(),
                path = req.uri().path(),
                "refused a client of another version: {message}"
            );
            error_response(code, message)
        }
    }
}

/// Why a request with these headers is refused, if it is.
pub fn refusal(headers: &HeaderMap) -> Option<(ErrorCode, String)> {
    let value = headers.get(PROTOCOL_HEADER)?;
    let Some(protocol) = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
    else {
        return Some((
            ErrorCode::UnsupportedProtocol,
            format!(
                "the {PROTOCOL_HEADER} header {value:?} is not a protocol number; this coordinator (v{VERSION}) speaks {}",
                range()
            ),
        ));
    };
    let client = match client_id(headers) {
        Some(id) => format!("this client ({id}, protocol {protocol})"),
        None => format!("this client (protocol {protocol})"),
    };
    if protocol < OLDEST_PROTOCOL {
        Some((
            ErrorCode::UpgradeRequired,
            format!(
                "{client} is older than this coordinator (v{VERSION}) serves ({}): upgrade to drover {VERSION}",
                range()
            ),
        ))
    } else if protocol > PROTOCOL_VERSION {
        Some((
            ErrorCode::CoordinatorTooOld,
            format!(
                "this coordinator (v{VERSION}, {}) is older than {client} speaks: upgrade the coordinator, or use drover {VERSION}",
                range()
            ),
        ))
    } else {
        None
    }
}

/// The `drover-client` header, when it is short printable text (it is
/// quoted back, so nothing else is).
fn client_id(headers: &HeaderMap) -> Option<&str> {
    let id = headers.get(CLIENT_HEADER)?.to_str().ok()?.trim();
    let printable = id.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    (!id.is_empty() && id.len() <= 64 && printable).then_some(id)
}

/// `protocol 1`, or `protocols 1 to 3`.
fn range() -> String {
    if OLDEST_PROTOCOL == PROTOCOL_VERSION {
        format!("protocol {PROTOCOL_VERSION}")
    } else {
        format!("protocols {OLDEST_PROTOCOL} to {PROTOCOL_VERSION}")
    }
}
