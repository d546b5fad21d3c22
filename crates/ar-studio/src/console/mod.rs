//! The console: one server-rendered page, one stylesheet and one small script of our own, embedded in the binary (no CDN, no build step).
//!
//! The page talks to the people API under `/api/` and, when the studio is embedded in a
//! service, to the run views under `/studio/api/` (transcript, tool calls, interactions,
//! live timeline). A token for hosted use is read from the page URL's fragment
//! (`/studio#token=…`) and kept in the tab's session storage.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// `/studio` (the page), `/studio/app.js` and `/studio/app.css`. They carry no data, so
/// they need no token; everything they show comes from the guarded APIs.
pub fn routes() -> Router {
    Router::new()
        .route("/studio", get(index))
        .route("/studio/", get(index))
        .route("/studio/app.js", get(script))
        .route("/studio/app.css", get(style))
}

async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        INDEX,
    )
}

async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SCRIPT,
    )
}

async fn style() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        STYLE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for text in [INDEX, SCRIPT, STYLE] {
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "offline only"
            );
        }
        assert!(INDEX.contains("/studio/app.js") && INDEX.contains("/studio/app.css"));
    }
}
