//! The gate every request passes: the `Host` header must name this server, and the token must
//! come with it (`?token=` or `X-Maos-Token` for reads; the header only for actions). A refusal
//! is a status and one line saying what is wrong.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The header that carries the token.
pub const TOKEN_HEADER: &str = "x-maos-token";

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a `Host` header names this server: exactly `127.0.0.1:PORT` or `localhost:PORT`,
/// the whole value compared (a prefix match would let `localhost.evil.example:PORT` in, a
/// name an attacker's DNS can point at 127.0.0.1: DNS rebinding).
fn host_allowed(host: &str, port: u16) -> bool {
    host == format!("127.0.0.1:{port}") || host == format!("localhost:{port}")
}

/// The `token` parameter of a query string, if any.
fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

/// What the guard checks every request against: the port the dashboard listens on (the only
/// `Host` it answers) and its token.
pub struct Dash {
    pub port: u16,
    pub token: String,
}

pub async fn guard(State(dash): State<Arc<Dash>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let port = dash.port;
    if !host_allowed(host, port) {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "this dashboard answers only to Host 127.0.0.1:{port} or localhost:{port}, not {host:?}\n"
            ),
        )
            .into_response();
    }
    let in_header = req
        .headers()
        .get(TOKEN_HEADER)
        .and_then(|h| h.to_str().ok());
    let given = if req.method() == Method::GET {
        in_header.or_else(|| query_token(req.uri().query()))
    } else {
        in_header
    };
    match given {
        Some(t) if same(t.as_bytes(), dash.token.as_bytes()) => {
            let method = req.method().clone();
            let answer = next.run(req).await;
            if answer.status() == StatusCode::METHOD_NOT_ALLOWED {
                // axum says nothing with its 405: say which method the address takes.
                let post = matches!(method, Method::GET | Method::HEAD);
                let takes = if post { "POST" } else { "GET" };
                return crate::api::ApiError(
                    StatusCode::METHOD_NOT_ALLOWED,
                    format!("{method} is not taken here: this address takes {takes}"),
                )
                .into_response();
            }
            answer
        }
        None if req.method() != Method::GET => (
            StatusCode::UNAUTHORIZED,
            "an action needs the token in the X-Maos-Token header\n",
        )
            .into_response(),
        _ => (
            StatusCode::UNAUTHORIZED,
            "missing or wrong token: open the URL `maos dashboard` prints\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole_and_come_from_the_query() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert_eq!(query_token(Some("a=1&token=xyz")), Some("xyz"));
        assert_eq!(query_token(Some("tokens=xyz")), None);
        assert_eq!(query_token(None), None);
    }

    #[test]
    fn the_host_must_be_this_server_exactly_not_a_name_that_starts_like_it() {
        let port = 8731;
        assert!(host_allowed("127.0.0.1:8731", port));
        assert!(host_allowed("localhost:8731", port));
        for host in [
            "evil.example",
            "evil.example:8731",
            "localhost.evil.example:8731",
            "localhost.evil.example",
            "127.0.0.1.evil.example:8731",
            "127.0.0.1.evil.example",
            "localhost:8731@evil.example",
            "localhost:8731.evil.example",
            "127.0.0.1:8731.evil.example",
            "localhost:87310",
            "127.0.0.1:87310",
            "localhost:873",
            "localhost",
            "127.0.0.1",
            "localhost:8732",
            "evil.localhost:8731",
            "xlocalhost:8731",
            " localhost:8731",
            "localhost:8731 ",
            "[::1]:8731",
            "",
        ] {
            assert!(!host_allowed(host, port), "{host:?} must be refused");
        }
    }
}
