//! `maos dashboard` (issue 16, its first step): the real `maos-dash` started or found by the
//! real `maos`, asked over real HTTP on 127.0.0.1: a request without the token, with a wrong
//! one, with a wrong `Host`, or an action with the token only in the URL is refused with a
//! status and one line; with the token, the page and the JSON API answer from the daemon.

use std::io::{Read, Write};
use std::net::TcpStream;

use maos_tests::{Env, Value, describe, json_of};

/// The running dashboard, stopped when the test ends (also when it failed).
struct Dashboard<'a> {
    env: &'a Env,
    url: String,
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

fn start(env: &Env) -> Dashboard<'_> {
    let out = env.maos(&["--json", "dashboard"]);
    let v = json_of("maos dashboard", &out);
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

/// One HTTP/1.1 request: the status and the body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the dashboard");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Content-Length: 0\r\n\r\n");
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
fn the_dashboard_answers_with_its_token_and_refuses_everything_else() {
    let env = Env::new();
    env.session("Show it in a browser", &[]);
    let d = start(&env);
    assert!(
        d.url
            .starts_with(&format!("http://127.0.0.1:{}/?token=", d.port)),
        "{}",
        d.url
    );
    assert_eq!(d.token.len(), 32, "a 128-bit token: {}", d.token);
    let host = format!("127.0.0.1:{}", d.port);
    let with = [("X-Maos-Token", d.token.as_str())];

    // The page, by its URL's token, and the API, by the header.
    let (status, page) = http(d.port, "GET", &format!("/?token={}", d.token), &host, &[]);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<title>maos dashboard</title>"), "{page}");
    assert!(
        !page.contains("https://"),
        "nothing from elsewhere: it works offline"
    );
    let (status, body) = http(d.port, "GET", "/api/projects", &host, &with);
    assert_eq!(status, 200, "{body}");
    let projects: Value = serde_json::from_str(&body).expect("JSON");
    let root = Env::project_root(&env.project);
    assert!(
        projects["projects"]
            .as_array()
            .is_some_and(|p| p.iter().any(|p| p["root"] == root)),
        "{projects}"
    );
    let q = format!("/api/sessions?project={}", root.replace('/', "%2F"));
    let (status, body) = http(d.port, "GET", &q, &host, &with);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Show it in a browser"), "{body}");

    // Refused, each with a status and one line, and nothing served.
    let wrong = "0".repeat(32);
    /// What is wrong, method, path, headers, the status, a word the refusal says.
    type Case<'a> = (
        &'a str,
        String,
        String,
        Vec<(&'a str, &'a str)>,
        u16,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "no token",
            "GET".into(),
            "/api/projects".into(),
            vec![],
            401,
            "token",
        ),
        (
            "a wrong token",
            "GET".into(),
            format!("/api/projects?token={wrong}"),
            vec![],
            401,
            "token",
        ),
        (
            "a wrong token in the header",
            "GET".into(),
            "/api/projects".into(),
            vec![("X-Maos-Token", wrong.as_str())],
            401,
            "token",
        ),
        (
            "an action with the token in the URL only",
            "POST".into(),
            format!("/api/projects?token={}", d.token),
            vec![],
            401,
            "X-Maos-Token",
        ),
    ];
    for (what, method, path, headers, code, says) in cases {
        let (status, body) = http(d.port, &method, &path, &host, &headers);
        assert_eq!(status, code, "{what}: {body}");
        assert!(
            body.contains(says) && body.trim().lines().count() == 1,
            "{what}: {body}"
        );
        assert!(!body.contains("Show it"), "{what}: {body}");
    }
    // A name that resolves to 127.0.0.1 (DNS rebinding) reaches nothing.
    let (status, body) = http(
        d.port,
        "GET",
        &format!("/?token={}", d.token),
        &format!("evil.example:{}", d.port),
        &[],
    );
    assert_eq!(status, 421, "{body}");
    assert!(body.contains("evil.example"), "{body}");
    // Bad input to the API: a 4xx with one sentence, as JSON.
    for (path, code) in [
        ("/api/sessions".to_string(), 400),
        ("/api/sessions?project=%2Fnowhere".to_string(), 404),
        ("/no/such/page".to_string(), 404),
    ] {
        let (status, body) = http(d.port, "GET", &path, &host, &with);
        assert_eq!(status, code, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{path}: {body}"));
        assert!(
            v["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{path}: {body}"
        );
    }
    // No CORS: another origin's script cannot read an answer.
    let mut s = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
    let req = format!(
        "GET /api/projects HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example\r\nX-Maos-Token: {}\r\nConnection: close\r\n\r\n",
        d.token
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    assert!(
        !answer.to_ascii_lowercase().contains("access-control-allow"),
        "{answer}"
    );
}

#[test]
fn maos_dashboard_finds_the_running_one_and_stops_it() {
    let env = Env::new();
    let d = start(&env);
    let again = env.maos(&["--json", "dashboard"]);
    let v = json_of("maos dashboard again", &again);
    assert_eq!(v["url"], d.url.as_str(), "the same dashboard");
    assert_eq!(v["started"], false);
    let file = env.home.join("dashboard.json");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file)
            .expect("dashboard.json")
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "the token is the user's only");

    let out = env.maos(&["dashboard", "--stop"]);
    assert!(out.status.success(), "{}", describe(&out));
    maos_tests::wait_until(maos_tests::DEADLINE, "the dashboard gone", || {
        !maos_tests::alive(d.pid)
    });
    assert!(!file.exists(), "it says it is gone");
    assert!(
        TcpStream::connect(("127.0.0.1", d.port)).is_err(),
        "nothing listens"
    );

    // A new start has a new token.
    let next = start(&env);
    assert_ne!(next.token, d.token);
    // A dashboard killed without a word is found dead, and replaced.
    maos_tests::kill9(next.pid);
    maos_tests::wait_until(maos_tests::DEADLINE, "the killed dashboard gone", || {
        !maos_tests::alive(next.pid)
    });
    let third = start(&env);
    assert_ne!(third.pid, next.pid);
    let (status, _) = http(
        third.port,
        "GET",
        "/api/projects",
        &format!("127.0.0.1:{}", third.port),
        &[("X-Maos-Token", &third.token)],
    );
    assert_eq!(status, 200);
    // --project means nothing here: refused with one line.
    let out = env.maos(&["dashboard", "--project", "."]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

/// Headless Chromium (Debian's `chromium`; `.ci/run` installs it), run once on `url`: the DOM
/// after the page's script ran (`--virtual-time-budget` lets its requests finish), or with
/// `screenshot` a PNG written there.
fn chromium(env: &Env, url: &str, screenshot: Option<&std::path::Path>) -> String {
    let mut cmd = std::process::Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--virtual-time-budget=5000",
        "--window-size=1000,500",
    ])
    .arg(format!(
        "--user-data-dir={}",
        env.root().join("chromium").display()
    ));
    match screenshot {
        Some(png) => cmd.arg(format!("--screenshot={}", png.display())),
        None => cmd.arg("--dump-dom"),
    };
    cmd.arg(url);
    let out = maos_tests::run_with_timeout(cmd, std::time::Duration::from_secs(60));
    assert!(out.status.success(), "{}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// In a real browser: the page lists the project and its session; without the token it is
/// refused. A screenshot is kept in `target/tmp/dashboard.png` to look at.
#[test]
fn a_real_browser_shows_the_sessions_and_is_refused_without_the_token() {
    if !maos_tests::have_tool("chromium", "chromium") {
        return;
    }
    let env = Env::new();
    let sid = env.session("Show it in a browser", &[]);
    let d = start(&env);
    let dom = chromium(&env, &d.url, None);
    let root = Env::project_root(&env.project);
    assert!(
        dom.contains(&format!("<section data-project=\"{root}\">")),
        "{dom}"
    );
    assert!(
        dom.contains(&format!("<tr data-session=\"{sid}\">"))
            && dom.contains("Show it in a browser"),
        "{dom}"
    );
    assert!(
        dom.contains(r#"<p id="status" role="status" aria-live="polite" class=""></p>"#),
        "loaded, nothing to report: {dom}"
    );
    assert!(
        !dom.contains("token="),
        "the token leaves the address bar: {dom}"
    );

    let refused = chromium(&env, &format!("http://127.0.0.1:{}/", d.port), None);
    assert!(refused.contains("missing or wrong token"), "{refused}");
    assert!(!refused.contains("Show it in a browser"), "{refused}");

    let png = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    chromium(&env, &d.url, Some(&png));
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG");
}
