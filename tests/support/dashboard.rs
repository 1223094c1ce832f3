//! A running `maos dashboard` as the tests start it (through the real `maos`), and plain
//! HTTP/1.1 requests to it: each test sees the status and the body a browser would.

use std::io::{Read, Write};
use std::net::TcpStream;

use crate::{DEADLINE, Env, json_of};

/// The running dashboard, stopped when the test ends (also when it failed).
pub struct Dashboard<'a> {
    env: &'a Env,
    /// The URL `maos dashboard` prints, with its token.
    pub url: String,
    pub port: u16,
    /// The token of the URL.
    pub token: String,
    /// `maos-dash`'s process.
    pub pid: u32,
}

impl Dashboard<'_> {
    /// Starts the dashboard of `env` (or finds the running one) with `maos --json dashboard`
    /// and reads its URL, port, token and pid.
    pub fn start(env: &Env) -> Dashboard<'_> {
        let v = json_of("maos dashboard", &env.maos(&["--json", "dashboard"]));
        let url = v["url"].as_str().expect("url").to_string();
        let token = url.split("token=").nth(1).expect("a token").to_string();
        Dashboard {
            env,
            port: v["port"].as_u64().expect("port") as u16,
            pid: v["pid"].as_u64().expect("pid") as u32,
            url,
            token,
        }
    }
}

impl Drop for Dashboard<'_> {
    fn drop(&mut self) {
        let _ = self.env.maos(&["dashboard", "--stop"]);
        if crate::alive(self.pid) {
            crate::kill9(self.pid);
        }
    }
}

/// One HTTP/1.1 request to the dashboard on `port`, under the `Host` header `host`: the
/// status and the body.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    http_with(port, method, path, host, headers, b"")
}

/// [`http`] with a body.
pub fn http_with(
    port: u16,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the dashboard");
    s.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes).expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// `v` with `%`-escapes, for a query value or the dashboard's address of a project.
pub fn enc(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
