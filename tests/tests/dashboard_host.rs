//! The dashboard answers only to its own address: a `Host` header of exactly
//! `127.0.0.1:PORT` or `localhost:PORT`. A name an attacker's DNS points at 127.0.0.1 (DNS
//! rebinding) gets `421`, also one that starts like an allowed host, and even with the
//! token, which a rebinding page would not have but a leaked URL might give.

use maos_tests::Env;
use maos_tests::dashboard::{Dashboard, http};

/// A GET of the page, with the token, under `host`: the status and the body.
fn get(d: &Dashboard, host: &str) -> (u16, String) {
    http(d.port, "GET", &format!("/?token={}", d.token), host, &[])
}

#[test]
fn only_the_exact_host_is_answered_not_one_that_starts_like_it() {
    let env = Env::new();
    let d = Dashboard::start(&env);
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
