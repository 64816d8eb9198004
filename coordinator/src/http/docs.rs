//! `/openapi.json` (built from the catalogue) and a docs page that renders it with no network access.

use axum::Router;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use drover_wire::op;

use super::{AppState, Routes as _};

const DOCS_HTML: &str = include_str!("docs.html");

pub fn router() -> Router<AppState> {
    Router::new()
        .at(op::GetOpenApi, || async {
            (
                [(header::CONTENT_TYPE, "application/json")],
                super::openapi::document(),
            )
                .into_response()
        })
        .at(op::GetDocs, || async { Html(DOCS_HTML) })
}
