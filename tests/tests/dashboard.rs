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

/// A page following the events (an open event stream) does not keep the dashboard from
/// stopping: `maos dashboard --stop` ends it (it used to wait for every stream to close, i.e.
/// forever, fail after 10 s and leave the process running and following the daemon).
#[test]
fn maos_dashboard_stops_while_a_page_follows_the_events() {
    let env = Env::new();
    env.session("watched", &[]);
    let d = start(&env);
    let root = Env::project_root(&env.project);
    let q = format!("/api/events?project={}", root.replace('/', "%2F"));
    let mut live = Stream::open(&d, &q);
    live.until("the stream's headers", |s| s.contains("text/event-stream"));
    let out = env.maos(&["dashboard", "--stop"]);
    assert!(out.status.success(), "{}", describe(&out));
    maos_tests::wait_until(maos_tests::DEADLINE, "the dashboard gone", || {
        !maos_tests::alive(d.pid)
    });
    assert!(
        !env.home.join("dashboard.json").exists(),
        "it says it is gone"
    );
}

/// In a real browser (headless Chromium through chromedriver): the page lists the project
/// and its session, shows a session created after it loaded without a reload (the live
/// stream), and without the token is refused. A screenshot is kept in
/// `target/tmp/dashboard.png` to look at.
#[test]
fn a_real_browser_shows_the_sessions_live_and_is_refused_without_the_token() {
    if !maos_tests::webdriver::available() {
        return;
    }
    let env = Env::new();
    let sid = env.session("Show it in a browser", &[]);
    let d = start(&env);
    let browser = maos_tests::webdriver::Browser::start(&env.root().join("chromium"));
    browser.open(&d.url);
    let root = Env::project_root(&env.project);
    let html = browser.until("the session's row", |h| {
        h.contains(&format!("<tr data-session=\"{sid}\">"))
    });
    assert!(
        html.contains(&format!("<section data-project=\"{root}\">")),
        "{html}"
    );
    assert!(html.contains("Show it in a browser"), "{html}");
    assert_eq!(
        browser.eval("return location.search"),
        "",
        "the token leaves the address bar"
    );
    // Live: a session made now appears without a reload.
    let later = env.session("Made while the page was open", &[]);
    browser.until("the new session's row", |h| {
        h.contains(&format!("<tr data-session=\"{later}\">"))
    });
    let png = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    browser.screenshot(&png);
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "a PNG");

    browser.open(&format!("http://127.0.0.1:{}/", d.port));
    let refused = browser.until("the refusal", |h| h.contains("missing or wrong token"));
    assert!(!refused.contains("Show it in a browser"), "{refused}");
}

/// A page left for another one closes its event stream: kept open in the browser's
/// back-forward cache, five or six of them took the browser's six connections to the
/// dashboard and the next page waited about a minute for one.
#[test]
fn pages_left_behind_do_not_hold_the_browsers_connections() {
    if !maos_tests::webdriver::available() {
        return;
    }
    let env = Env::new();
    let sid = env.session("Opened again and again", &[]);
    let d = start(&env);
    let browser = maos_tests::webdriver::Browser::start(&env.root().join("chromium"));
    let root = Env::project_root(&env.project);
    let url = format!("{}#/session/{}/{sid}", d.url, root.replace('/', "%2F"));
    for i in 1..=8 {
        browser.open("about:blank");
        let t = std::time::Instant::now();
        browser.open(&url);
        // Drawn, and following the events (its stream holds a connection).
        maos_tests::wait_until(
            maos_tests::DEADLINE,
            &format!("the session page drawn and live, load {i}"),
            || {
                browser.eval(
                    "return performance.getEntriesByName('maos-ready').length > 0 && \
                     streams.size > 0 && [...streams.values()].every(s => s.src.readyState === 1)",
                ) == Value::Bool(true)
            },
        );
        // The page itself waited for a free connection (in `open`), not only its requests.
        assert!(
            t.elapsed() < maos_tests::DEADLINE,
            "load {i} took {:?}",
            t.elapsed()
        );
    }
}

/// A server-sent event stream, read as it comes.
struct Stream {
    s: TcpStream,
    seen: String,
}

impl Stream {
    fn open(d: &Dashboard<'_>, path: &str) -> Stream {
        let mut s = TcpStream::connect(("127.0.0.1", d.port)).expect("connect");
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Maos-Token: {}\r\nAccept: text/event-stream\r\n\r\n",
            d.port, d.token
        );
        s.write_all(req.as_bytes()).expect("send");
        s.set_read_timeout(Some(std::time::Duration::from_millis(100)))
            .expect("timeout");
        Stream {
            s,
            seen: String::new(),
        }
    }

    /// Read until what came so far satisfies `cond` (the test fails after a deadline).
    fn until(&mut self, what: &str, cond: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + maos_tests::DEADLINE;
        let mut buf = [0u8; 4096];
        while !cond(&self.seen) {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting until {what}; the stream:\n{}",
                self.seen
            );
            match self.s.read(&mut buf) {
                Ok(0) => panic!("the stream ended; it said:\n{}", self.seen),
                Ok(n) => self.seen.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(_) => {} // the read timeout: look again
            }
        }
    }
}

/// Live: an event committed now reaches an open page's stream (through the daemon's own
/// subscription); a daemon that goes away is said (`lost`), not started again, and once it is
/// back (`back`) the stream goes on.
#[test]
fn the_event_stream_pushes_commits_and_says_when_the_daemon_is_gone() {
    let env = Env::new();
    env.session("first", &[]);
    let d = start(&env);
    let root = Env::project_root(&env.project);
    let q = format!("/api/events?project={}", root.replace('/', "%2F"));
    let mut live = Stream::open(&d, &q);
    live.until("the stream's headers", |s| s.contains("text/event-stream"));
    env.session("pushed live", &[]);
    live.until("the new session's event", |s| {
        s.contains("event: event") && s.contains("pushed live")
    });
    assert!(
        !live.seen.contains("\"first\""),
        "from now on, not the past:\n{}",
        live.seen
    );

    assert!(env.maos(&["daemon", "stop"]).status.success());
    live.until("the loss said", |s| s.contains("event: lost"));
    assert!(
        env.pidfile_pid().is_none_or(|p| !maos_tests::alive(p)),
        "not started again"
    );
    assert!(env.maos(&["daemon", "start"]).status.success());
    live.until("the return said", |s| s.contains("event: back"));
    env.session("after the restart", &[]);
    live.until("an event after the restart", |s| {
        s.contains("after the restart")
    });

    // Bad input: one line, nothing streamed.
    let (status, body) = http(
        d.port,
        "GET",
        "/api/events?project=%2Fnowhere",
        &format!("127.0.0.1:{}", d.port),
        &[("X-Maos-Token", d.token.as_str())],
    );
    assert_eq!(status, 404, "{body}");
}
