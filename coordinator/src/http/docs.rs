//! `/openapi.json` (built from the catalogue) and a docs page that renders it with no network access.

use axum::Router;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;

use super::AppState;

const DOCS_HTML: &str = include_str!("docs.html");

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/openapi.json",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    super::openapi::document(),
                )
                    .into_response()
            }),
        )
        .route("/docs", get(|| async { Html(DOCS_HTML) }))
}
