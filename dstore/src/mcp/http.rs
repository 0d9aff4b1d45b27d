//! The MCP endpoint over Streamable HTTP, for `serve` to mount at `/mcp`:
//! the SDK's service, stateless, answering each request with one JSON
//! response (no session to keep), behind the 4 MiB body limit, and
//! JSON-RPC's parse error for a body that is not JSON. The token, Host
//! and Origin rules are `serve`'s, for every route alike.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::Server;
use crate::app::stores::Stores;

/// The largest request body served.
pub const BODY_LIMIT: usize = 4 << 20;

/// `/mcp`: the tools over `stores`. `any_host`: served beyond loopback,
/// reached by any name (the token guards it); on loopback the SDK also
/// refuses a Host header that is not loopback.
pub fn routes(stores: Arc<Stores>, any_host: bool) -> Router {
    let server = Server::new(stores);
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(BODY_LIMIT);
    if any_host {
        config = config.disable_allowed_hosts();
    }
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(LocalSessionManager::default()), config);
    Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn(json_body))
}

/// Reads a POST's body here, within the limit (413 past it, counted as the
/// body streams in, chunked or not), so that a body that is not JSON gets
/// JSON-RPC's parse error rather than the SDK's 415.
async fn json_body(request: Request, next: Next) -> Response {
    if request.method() != axum::http::Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, BODY_LIMIT).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, format!("a request body may hold at most {BODY_LIMIT} bytes\n"))
            .into_response();
    };
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        let error = serde_json::json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": format!("Parse error: {e}")}});
        return (StatusCode::BAD_REQUEST, [(header::CONTENT_TYPE, "application/json")], error.to_string())
            .into_response();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await
}
