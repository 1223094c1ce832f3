//! The dashboard answers only to its own address: a `Host` header of exactly
//! `127.0.0.1:PORT` or `localhost:PORT`. A name an attacker's DNS points at 127.0.0.1 (DNS
//! rebinding) gets `421`, also one that starts like an allowed host, and even with the
//! token, which a rebinding page would not have but a leaked URL might give.

use std::io::{Read, Write};
use std::net::TcpStream;

use maos_tests::{Env, json_of};

/// The running dashboard, stopped when the test ends (also when it failed).
struct Dashboard<'a> {
    env: &'a Env,
    port: u16,
    token: String,
    pid: u32,
}

impl Drop for Dashboard<'_> {
    fn drop(&mut self) {
        let _ = self.env.maos(&["dashboard", "--stop"]);
        if maos_tests::alive(self.pid) {
            maos_tests::kill9(self.pid);
        }
    }
}

/// A GET of the page, with the token, under `host`: the status and the body.
fn get(d: &Dashboard, host: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", d.port)).expect("connect to the dashboard");
    s.set_read_timeout(Some(maos_tests::DEADLINE))
        .expect("timeout");
    let req = format!(
        "GET /?token={} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
        d.token
    );
    s.write_all(req.as_bytes()).expect("send");
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

#[test]
fn only_the_exact_host_is_answered_not_one_that_starts_like_it() {
    let env = Env::new();
    let v = json_of("maos dashboard", &env.maos(&["--json", "dashboard"]));
    let url = v["url"].as_str().expect("url");
    let d = Dashboard {
        env: &env,
        port: v["port"].as_u64().expect("port") as u16,
        pid: v["pid"].as_u64().expect("pid") as u32,
        token: url.split("token=").nth(1).expect("a token").to_string(),
    };
    let port = d.port;
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let (status, body) = get(&d, &host);
        assert_eq!(status, 200, "{host}: {body}");
    }
    for host in [
        format!("localhost.evil.example:{port}"),
        "127.0.0.1.evil.example".to_string(),
        format!("127.0.0.1.evil.example:{port}"),
        format!("localhost:{port}@evil.example"),
        format!("localhost:{port}.evil.example"),
        format!("localhost:{port}0"),
        "localhost".to_string(),
        format!("evil.example:{port}"),
    ] {
        let (status, body) = get(&d, &host);
        assert_eq!(status, 421, "{host}: {body}");
        assert!(body.contains("answers only to Host"), "{host}: {body}");
    }
}
