//! `dstore serve` and `dstore ui`: the faces that speak HTTP, composed on
//! one listener over one store. The MCP tools at `/mcp` for many agents
//! (`mcp::http`), the web view at `/` for people (`web`).
//!
//! In front of every route sit the contract's guards: a bearer token when
//! one is set (401 without it; a page opened once with `?token=` keeps it
//! in a cookie), a Host that must be loopback while the server listens on
//! loopback, and the Origin check against DNS rebinding (403 for any origin
//! that is not loopback, `null` included).
//!
//! A stop (SIGTERM, Ctrl-C) stops accepting, lets the calls in flight
//! finish and answer, then ends.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clap::Args;

use crate::app::errors::{CmdResult, Failure};
use crate::app::form::{self, query_of};
use crate::app::stores::{close_outside_runtime, runtime, Stores};
use crate::{mcp, web};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The store: a path or a postgres:// URL.
    store: PathBuf,
    /// Address and port to listen on (port 0: any free one, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7411")]
    listen: String,
    /// A file whose text (surrounding whitespace trimmed) every request must
    /// carry as `Authorization: Bearer <token>`; or set DSTORE_TOKEN.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Serve the read tools only.
    #[arg(long)]
    read_only: bool,
    /// Serve the web view alone, without the MCP endpoint.
    #[arg(long)]
    ui_only: bool,
    /// Print the web view's link with the token in it (by default the token
    /// is left out: a log that keeps stderr would keep it).
    #[arg(long)]
    show_token: bool,
}

/// `dstore ui`: the web view of a store opened read-only, nothing else.
#[derive(Debug, Args)]
pub struct UiArgs {
    /// The store: a path or a postgres:// URL.
    store: PathBuf,
    /// Address and port to listen on (port 0: any free one, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7411")]
    listen: String,
    /// A file whose text every request must carry (as a bearer token, or
    /// once as `?token=`, after which the browser keeps it in a cookie); or set DSTORE_TOKEN.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Print the link with the token in it (by default the token is left out).
    #[arg(long)]
    show_token: bool,
}

impl From<UiArgs> for ServeArgs {
    fn from(a: UiArgs) -> Self {
        ServeArgs {
            store: a.store,
            listen: a.listen,
            token_file: a.token_file,
            read_only: true,
            ui_only: true,
            show_token: a.show_token,
        }
    }
}

/// The token from `--token-file` or `DSTORE_TOKEN`, if any.
fn token(a: &ServeArgs) -> Result<Option<String>, Failure> {
    let text = match &a.token_file {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|e| Failure::usage(format!("--token-file {}: {e}", file.display())))?,
        None => match std::env::var("DSTORE_TOKEN") {
            Ok(t) => t,
            Err(_) => return Ok(None),
        },
    };
    let token = text.trim();
    let from = || a.token_file.as_ref().map_or("DSTORE_TOKEN".to_owned(), |f| format!("--token-file {}", f.display()));
    if token.is_empty() {
        return Err(Failure::usage(format!("{}: the token is empty", from())));
    }
    // What a cookie value may hold (RFC 6265's cookie-octet): a browser keeps the token in one.
    if let Some(c) = token.chars().find(|&c| !c.is_ascii_graphic() || matches!(c, '"' | ',' | ';' | '\\')) {
        return Err(Failure::usage(format!(
            "{}: the token holds {c:?}, which a browser's cookie cannot keep; use letters, digits and \
             -._~+/= (`openssl rand -base64 32` makes one)",
            from()
        )));
    }
    Ok(Some(token.to_owned()))
}

/// Serves until SIGTERM or Ctrl-C.
pub fn serve(a: &ServeArgs) -> CmdResult {
    let addr: SocketAddr =
        a.listen.parse().map_err(|e| Failure::usage(format!("--listen {}: {e} (e.g. 127.0.0.1:7411)", a.listen)))?;
    let token = token(a)?;
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(Failure::usage(format!(
            "--listen {addr}: serving beyond loopback needs a token (--token-file FILE or DSTORE_TOKEN)"
        )));
    }
    let stores = Arc::new(Stores::open(&a.store, a.read_only)?);
    let (web_stores, mcp_stores) = (stores.clone(), stores.clone());
    let rt = runtime()?;
    let served = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Failure::environment(format!("--listen {addr}: {e}")))?;
        let bound = listener.local_addr().map_err(|e| Failure::environment(format!("--listen {addr}: {e}")))?;
        let mut app = web::routes(web_stores);
        if !a.ui_only {
            app = app.merge(mcp::http::routes(mcp_stores, !addr.ip().is_loopback()));
            eprintln!(
                "dstore serve: {} at http://{bound}/mcp ({}{})",
                a.store.display(),
                if a.read_only { "read-only" } else { "read-write" },
                if token.is_some() { ", token required" } else { "" }
            );
        }
        let gate = Gate { token: token.clone(), loopback_hosts: addr.ip().is_loopback() };
        let app = app.layer(axum::middleware::from_fn_with_state(Arc::new(gate), guard));
        let web = match &token {
            Some(t) if a.show_token => format!("http://{bound}/?token={}", form::encode(t)),
            // A log that keeps stderr must not keep the token.
            Some(_) => format!("http://{bound}/?token=<the token> (--show-token prints it here)"),
            None => format!("http://{bound}/"),
        };
        let command = if a.ui_only && a.read_only { "ui" } else { "serve" };
        eprintln!("dstore {command}: the web view of {} (read-only): open {web}", a.store.display());
        axum::serve(listener, app)
            .with_graceful_shutdown(stop_signal())
            .await
            .map_err(|e| Failure::environment(format!("serve: {e}")))?;
        Ok(0)
    });
    drop(rt);
    close_outside_runtime(stores);
    eprintln!("dstore serve: stopped");
    served
}

/// Resolves at SIGTERM or Ctrl-C.
async fn stop_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

/// The cookie that keeps the token in a browser, once a page was opened with `?token=`.
const COOKIE: &str = "dstore_token";

/// What the guard checks.
struct Gate {
    token: Option<String>,
    /// Listening on loopback: a request must name a loopback host (a page
    /// of another site whose name was rebound to 127.0.0.1 names its own).
    loopback_hosts: bool,
}

/// The token, Host and Origin rules, before anything else sees the request.
async fn guard(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    if gate.loopback_hosts {
        let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| is_loopback_origin(&format!("http://{h}"))) {
            return (StatusCode::FORBIDDEN, "the Host must be a loopback name (localhost, 127.0.0.1, [::1])\n")
                .into_response();
        }
    }
    if let Some(token) = gate.token.as_deref() {
        let headers = request.headers();
        let bearer =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|c| c.trim().strip_prefix(COOKIE).and_then(|c| c.strip_prefix('=')));
        let ok = [bearer, cookie].into_iter().flatten().any(|g| same(g.trim().as_bytes(), token.as_bytes()));
        if !ok {
            // A page opened with the token once (the URL printed at start):
            // the token goes into a cookie, and out of the address bar.
            let given = request.uri().query().and_then(|q| query_of(q, "token"));
            if request.method() == axum::http::Method::GET
                && given.as_deref().is_some_and(|g| same(g.as_bytes(), token.as_bytes()))
            {
                let rest: Vec<&str> = request
                    .uri()
                    .query()
                    .unwrap_or("")
                    .split('&')
                    .filter(|p| !p.starts_with("token=") && !p.is_empty())
                    .collect();
                let to = if rest.is_empty() {
                    request.uri().path().to_owned()
                } else {
                    format!("{}?{}", request.uri().path(), rest.join("&"))
                };
                let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
                return (StatusCode::SEE_OTHER, [(header::LOCATION, to), (header::SET_COOKIE, cookie)]).into_response();
            }
            return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "a bearer token is required\n")
                .into_response();
        }
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        if !origin.to_str().is_ok_and(is_loopback_origin) {
            return (StatusCode::FORBIDDEN, "requests from a page of another origin are refused\n").into_response();
        }
    }
    next.run(request).await
}

/// Compares in time that does not depend on where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `http(s)://` and a loopback host (`localhost`, 127.0.0.0/8, `[::1]`), any port.
fn is_loopback_origin(origin: &str) -> bool {
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split_once(']').map(|(h, _)| h),
        None => rest.split(':').next(),
    };
    match host {
        Some("localhost") => true,
        Some(h) => h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_origins_pass() {
        for ok in [
            "http://localhost",
            "http://localhost:3000",
            "https://127.0.0.1:8443",
            "http://[::1]:80",
            "http://127.1.2.3",
        ] {
            assert!(is_loopback_origin(ok), "{ok}");
        }
        for refused in
            ["null", "http://example.com", "http://localhost.evil.com", "file://", "http://10.0.0.1", "ws://localhost"]
        {
            assert!(!is_loopback_origin(refused), "{refused}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
    }
}
