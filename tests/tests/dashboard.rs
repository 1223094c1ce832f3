//! `maos dashboard` (issue 16, its first step): the real `maos-dash` started or found by the
//! real `maos`, asked over real HTTP on 127.0.0.1: a request without the token, with a wrong
//! one, with a wrong `Host`, or an action with the token only in the URL is refused with a
//! status and one line; with the token, the page and the JSON API answer from the daemon.

use maos_proto::req;
use std::io::{Read, Write};
use std::net::TcpStream;

use maos_tests::dashboard::{Dashboard, enc, http, http_with};
use maos_tests::{Env, Value, describe, json_of};

#[test]
fn the_dashboard_answers_with_its_token_and_refuses_everything_else() {
    let env = Env::new();
    env.session("Show it in a browser", &[]);
    let d = Dashboard::start(&env);
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
    let d = Dashboard::start(&env);
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
    let next = Dashboard::start(&env);
    assert_ne!(next.token, d.token);
    // A dashboard killed without a word is found dead, and replaced.
    maos_tests::kill9(next.pid);
    maos_tests::wait_until(maos_tests::DEADLINE, "the killed dashboard gone", || {
        !maos_tests::alive(next.pid)
    });
    let third = Dashboard::start(&env);
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
    let d = Dashboard::start(&env);
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
    let d = Dashboard::start(&env);
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
    // A reload works: the token stays in the address (the server asks it of the page too).
    assert_eq!(
        browser.eval("return location.search"),
        format!("?token={}", d.token).as_str(),
    );
    browser.eval("window.beforeReload = true; location.reload()");
    browser.until_js(
        "the page after a reload",
        &format!(
            "return !window.beforeReload && document.readyState === 'complete' \
             && !!document.querySelector('tr[data-session=\"{sid}\"]')"
        ),
    );
    // Live: a session made now appears without a reload.
    let later = env.session("Made while the page was open", &[]);
    browser.until("the new session's row", |h| {
        h.contains(&format!("<tr data-session=\"{later}\">"))
    });
    // The daemon stopped: the page says so; started again: it says so and carries on.
    let out = env.maos(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", describe(&out));
    browser.until_js(
        "the page says the daemon is gone",
        "return document.getElementById('status').textContent.includes('the daemon is gone')",
    );
    let again = env.session("Made once the daemon was back", &[]);
    browser.until_js(
        "the page says it is back, and shows what was made",
        &format!(
            "return document.getElementById('status').textContent.includes('reconnected to maosd') \
             && !!document.querySelector('tr[data-session=\"{again}\"]')"
        ),
    );
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
    let d = Dashboard::start(&env);
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
    let d = Dashboard::start(&env);
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

/// Bad input to every endpoint (ids, filters, ranges, bodies): a 4xx whose JSON `error` is one
/// sentence, and nothing changes (the sessions and the timeline are as they were). The good
/// answers of the session endpoints are checked on the way.
#[test]
fn bad_input_to_every_endpoint_is_a_4xx_with_one_line_and_changes_nothing() {
    let env = Env::new();
    let sid = env.session("Bad input", &["build"]);
    env.maos_json(&["session", "start"]);
    let a = env.agent(None, "dev", "writes");
    env.maos_json(&["agent", "start", &a]);
    env.maos_json(&["lock", "acquire", "src/a.rs", "--agent", &a]);
    let d = Dashboard::start(&env);
    let host = format!("127.0.0.1:{}", d.port);
    let with = [("X-Maos-Token", d.token.as_str())];
    let json = [
        ("X-Maos-Token", d.token.as_str()),
        ("Content-Type", "application/json"),
    ];
    let p = format!("project={}", enc(&Env::project_root(&env.project)));
    let s = format!("{p}&session={sid}");

    // The good answers first.
    let get = |path: &str| {
        let (status, body) = http(d.port, "GET", path, &host, &with);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str::<Value>(&body).unwrap_or_else(|_| panic!("{path}: {body}"))
    };
    let v = get(&format!("/api/session?{p}&session={}", &sid[..10]));
    assert_eq!(v["session"]["id"], sid.as_str(), "a prefix names it");
    assert_eq!(v["locks"]["locks"][0]["path"], "src/a.rs", "{v}");
    assert_eq!(v["agents"][0]["id"], a.as_str(), "{v}");
    let g = get(&format!("/api/gantt?{s}&width=500"));
    let row = &g["rows"][0];
    assert_eq!(row["agent"], a.as_str(), "{g}");
    assert_eq!(row["locks"][0]["path"], "src/a.rs", "{g}");
    assert!(row["locks"][0].get("to_ms").is_none(), "held now: {g}");
    let t = get(&format!("/api/timeline?{s}&type=lock_acquired"));
    assert_eq!(t["events"].as_array().map(Vec::len), Some(1), "{t}");
    let t = get(&format!("/api/timeline?{s}&limit=2"));
    assert_eq!(t["more"], true, "{t}");
    let newest = t["events"][1]["seq"].as_u64().expect("seq");
    let back = get(&format!(
        "/api/timeline?{s}&limit=2&before={}",
        t["events"][0]["seq"]
    ));
    assert!(
        back["events"][1]["seq"].as_u64() < t["events"][0]["seq"].as_u64(),
        "{back}"
    );
    let fwd = get(&format!("/api/timeline?{s}&after={}", newest - 1));
    assert_eq!(fwd["events"][0]["seq"], newest, "{fwd}");
    // A project that is no git repository has no radar pair.
    let r = get(&format!("/api/radar?{p}"));
    assert_eq!(r, serde_json::json!({"pairs": [], "more_pairs": 0}), "{r}");
    let b = get(&format!("/api/brief?{s}"));
    assert!(
        b["text"].as_str().is_some_and(|t| t.contains("Bad input")),
        "{b}"
    );

    let before = (env.maos_json(&["ps", "--all"]), env.events(&[]));
    let long = "x".repeat(2000);
    let gets: Vec<(String, u16)> = vec![
        // Projects and sessions.
        ("/api/session".into(), 400),
        (format!("/api/session?{p}"), 400),
        (format!("/api/session?{p}&session=sess_nope"), 404),
        (format!("/api/session?{p}&session={long}"), 400),
        ("/api/session?project=%2Fnowhere&session=x".into(), 404),
        (format!("/api/brief?{p}"), 400),
        (format!("/api/brief?{p}&session=sess_nope"), 404),
        // The timeline's filters and paging.
        (format!("/api/timeline?{s}&type=lock_aquired"), 400),
        (format!("/api/timeline?{s}&limit=abc"), 400),
        (format!("/api/timeline?{s}&limit=100000"), 400),
        (format!("/api/timeline?{s}&limit=0"), 400),
        (format!("/api/timeline?{s}&before=-1"), 400),
        (format!("/api/timeline?{s}&before=3&after=1"), 400),
        (format!("/api/timeline?{s}&since=yesterday"), 400),
        (
            format!("/api/timeline?{s}&since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z"),
            400,
        ),
        // A path filter has the one cap of every path (4,096 bytes), other texts 1,024.
        (format!("/api/timeline?{s}&path={}", "x".repeat(4097)), 400),
        (format!("/api/timeline?{s}&q={long}"), 400),
        (format!("/api/timeline?{s}&agent=agt_nope"), 404),
        (format!("/api/timeline?{p}&session=sess_nope"), 404),
        // The chart's window.
        (format!("/api/gantt?{s}&width=0"), 400),
        (format!("/api/gantt?{s}&width=abc"), 400),
        (format!("/api/gantt?{s}&width=99999"), 400),
        (format!("/api/gantt?{s}&from=abc"), 400),
        (format!("/api/gantt?{s}&from=-5"), 400),
        (format!("/api/gantt?{s}&from=2000&to=1000"), 400),
        (format!("/api/gantt?{p}&session=sess_nope"), 404),
        // The conflict radar names a project only.
        ("/api/radar".into(), 400),
        ("/api/radar?project=%2Fnowhere".into(), 404),
        (format!("/api/gantt?{p}"), 400),
        // The live stream.
        ("/api/events".into(), 400),
        ("/api/events?project=%2Fnowhere".into(), 404),
        (format!("/api/events?{p}&after=abc"), 400),
        // A method an address does not take.
        ("/api/action".into(), 405),
    ];
    for (path, code) in &gets {
        let (status, body) = http(d.port, "GET", path, &host, &with);
        assert_eq!(status, *code, "GET {path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{path}: {body}"));
        let e = v["error"].as_str().unwrap_or_default();
        assert!(!e.is_empty() && !e.contains('\n'), "{path}: {body}");
        // The timeline's refusals name its own parameters, not `maos events`'s options.
        assert!(!e.contains("--"), "{path}: {body}");
    }
    let (_, body) = http(
        d.port,
        "GET",
        &format!("/api/timeline?{s}&q={long}"),
        &host,
        &with,
    );
    assert!(body.contains("\"q: 2000 bytes is too long"), "{body}");
    // Actions: a body that is no action, names nothing, or asks what cannot be done.
    let action = |agent: Option<&str>, verb: &str| {
        let mut v = serde_json::json!({"project": Env::project_root(&env.project),
            "session": sid, "action": verb});
        if let Some(a) = agent {
            v["agent"] = Value::from(a);
        }
        v.to_string()
    };
    let huge = format!(
        "{{\"project\":\"x\",\"session\":\"y\",\"action\":\"pause\",\"reason\":\"{}\"}}",
        "r".repeat(20_000)
    );
    /// What is wrong, the headers, the body, the status.
    type Post<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, u16);
    let posts: Vec<Post> = vec![
        ("not JSON", json.to_vec(), "{not json".into(), 400),
        ("no Content-Type", with.to_vec(), action(None, "pause"), 415),
        (
            "an unknown action",
            json.to_vec(),
            action(None, "explode"),
            400,
        ),
        (
            "an unknown field",
            json.to_vec(),
            action(None, "pause").replace("\"action\"", "\"force\":true,\"action\""),
            400,
        ),
        (
            "an unknown session",
            json.to_vec(),
            action(None, "pause").replace(&sid, "sess_nope"),
            404,
        ),
        (
            "an unknown agent",
            json.to_vec(),
            action(Some("agt_nope"), "pause"),
            404,
        ),
        (
            "an empty agent",
            json.to_vec(),
            action(Some(""), "pause"),
            400,
        ),
        (
            "resume of a running session",
            json.to_vec(),
            action(None, "resume"),
            409,
        ),
        ("a huge body", json.to_vec(), huge, 413),
    ];
    for (what, headers, body, code) in &posts {
        let (status, answer) = http_with(
            d.port,
            "POST",
            "/api/action",
            &host,
            headers,
            body.as_bytes(),
        );
        assert_eq!(status, *code, "{what}: {answer}");
        let v: Value = serde_json::from_str(&answer).unwrap_or_else(|_| panic!("{what}: {answer}"));
        let e = v["error"].as_str().unwrap_or_default();
        assert!(!e.is_empty() && !e.contains('\n'), "{what}: {answer}");
    }
    // POST where only GET is taken.
    let (status, body) = http(d.port, "POST", &format!("/api/session?{s}"), &host, &with);
    assert_eq!(status, 405, "{body}");
    let after = (env.maos_json(&["ps", "--all"]), env.events(&[]));
    assert_eq!(before, after, "a refused request changed something");

    // And a good action does what it says, recorded as the dashboard's.
    let (status, body) = http_with(
        d.port,
        "POST",
        "/api/action",
        &host,
        &json,
        action(Some(&a), "pause").as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("paused agent"), "{body}");
    let paused = env.events(&["--type", "agent_paused"]);
    assert_eq!(paused.len(), 1, "{paused:?}");
    assert!(
        paused[0]["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("from the dashboard by")),
        "{paused:?}"
    );
}

/// A Claude Code window's hook event, with `extra` fields.
fn claude(env: &Env, window: &str, name: &str, extra: Value) -> Value {
    let mut v =
        serde_json::json!({"session_id": window, "cwd": env.project, "hook_event_name": name});
    if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
        v.extend(extra);
    }
    v
}

/// The issue's scenarios in a real browser (headless Chromium through chromedriver), against
/// a real daemon: a hook-driven window with two subagents where the second one's write is
/// denied; a deadlock between two agents; a managed plan. The page draws the spawn tree, a
/// Gantt row per agent with the held lock as a bar and the denial as a mark, the deadlock's
/// wait-for cycle; an event made now appears live; the type filter and the briefing work; a
/// pause asks first and then pauses. Screenshots land in `target/tmp/dashboard-*.png`.
#[test]
fn a_real_browser_draws_the_tree_the_gantt_the_denial_the_deadlock_and_acts() {
    if !maos_tests::webdriver::available() {
        return;
    }
    let env = Env::new();
    let root = Env::project_root(&env.project);
    // 1. A window and two subagents; the second one's write of the first one's file is denied.
    let w = "win-dash";
    for (name, extra) in [
        ("SessionStart", serde_json::json!({"source": "startup"})),
        (
            "UserPromptSubmit",
            serde_json::json!({"prompt": "Split the lexer"}),
        ),
        (
            "SubagentStart",
            serde_json::json!({"agent_id": "sub-1", "agent_type": "lexer"}),
        ),
        (
            "SubagentStart",
            serde_json::json!({"agent_id": "sub-2", "agent_type": "parser"}),
        ),
    ] {
        env.hook("claude", &claude(&env, w, name, extra));
    }
    let write = |agent: &str, agent_type: &str| {
        claude(
            &env,
            w,
            "PreToolUse",
            serde_json::json!({"agent_id": agent, "agent_type": agent_type, "tool_name": "Write",
                "tool_use_id": format!("toolu_{agent}"),
                "tool_input": {"file_path": env.project.join("src/lexer.rs"), "content": "x"}}),
        )
    };
    let allowed = env.hook("claude", &write("sub-1", "lexer"));
    assert!(!String::from_utf8_lossy(&allowed.stdout).contains("deny"));
    let denied = env.hook("claude", &write("sub-2", "parser"));
    assert!(
        String::from_utf8_lossy(&denied.stdout).contains("deny"),
        "{}",
        describe(&denied)
    );
    let ps = env.maos_json(&["ps"]);
    let hooked = ps[0]["id"]
        .as_str()
        .expect("the window's session")
        .to_string();
    let agents = ps[0]["agents"].as_array().expect("agents").clone();
    assert_eq!(agents.len(), 3, "{ps}");
    let id_of = |role: &str| {
        agents
            .iter()
            .find(|a| a["role"] == role)
            .and_then(|a| a["id"].as_str())
            .unwrap_or_else(|| panic!("no {role} in {agents:?}"))
            .to_string()
    };
    let (window, lexer, parser) = (id_of("claude"), id_of("lexer"), id_of("parser"));

    // 2. A deadlock: a holds x and waits for y; b holds y and asks for x.
    let dl = env.session("Deadlock on purpose", &[]);
    env.maos_json(&["session", "start", &dl]);
    let a = env.agent(Some(&dl), "alpha", "holds x");
    let b = env.agent(Some(&dl), "beta", "holds y");
    for (agent, path) in [(&a, "x.rs"), (&b, "y.rs")] {
        env.maos_json(&["agent", "start", agent]);
        env.maos_json(&["lock", "acquire", path, "--agent", agent]);
    }
    let waiting = maos_tests::ChildGuard(
        env.maos_cmd_in(
            &env.project,
            &["lock", "acquire", "y.rs", "--agent", &a, "--wait", "60s"],
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("a waiting acquire"),
    );
    maos_tests::wait_until(maos_tests::DEADLINE, "alpha waits", || {
        !env.events(&["--type", "lock_wait"]).is_empty()
    });
    let f = env.maos_fail(&["lock", "acquire", "x.rs", "--agent", &b, "--wait", "60s"]);
    assert_eq!(f.code, "deadlock", "{f:?}");
    drop(waiting);

    // 3. A managed plan, run to its end.
    let plan = env.root().join("plan.toml");
    std::fs::write(
        &plan,
        "objective = \"Managed plan\"\nstrategy = \"sequential\"\n\
         [[agent]]\nname = \"build\"\ntask = \"build it\"\ncommand = [\"sh\", \"-c\", \"exit 0\"]\n\
         [[agent]]\nname = \"check\"\ntask = \"check it\"\ncommand = [\"sh\", \"-c\", \"exit 0\"]\n",
    )
    .expect("the plan");
    let run = env.maos_json(&["run", plan.to_str().expect("utf-8")]);
    let managed = run["id"].as_str().expect("the plan's session").to_string();
    maos_tests::wait_until(maos_tests::COMMAND_TIMEOUT, "the plan completes", || {
        env.maos_json(&["session", "show", &managed])["state"] == "completed"
    });

    let d = Dashboard::start(&env);
    let browser = maos_tests::webdriver::Browser::start(&env.root().join("chromium"));
    browser.resize(1400, 1800);
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    browser.open(&d.url);
    for s in [&hooked, &dl, &managed] {
        browser.until_js(
            "the three sessions listed",
            &format!("return document.querySelector('tr[data-session=\"{s}\"] a')"),
        );
    }
    browser.screenshot(&shots.join("dashboard-projects.png"));

    // The hook-driven session: its tree, its Gantt, the denial.
    // Show a session's page, and wait until it is drawn.
    let view = |sid: &str| {
        browser.eval(&format!("location.hash = '#/session/{}/{sid}'", enc(&root)));
        browser.until_js(
            "the session's page",
            &format!("return document.getElementById('view').dataset.session === '{sid}'"),
        );
    };
    view(&hooked);
    browser.until_js(
        "the session ready",
        "return performance.getEntriesByName('maos-ready').length",
    );
    let nested = browser.eval(&format!(
        "return [...document.querySelectorAll('li[data-agent=\"{window}\"] li[data-agent]')]\
         .map(l => l.dataset.agent).sort()"
    ));
    let mut subs = vec![lexer.clone(), parser.clone()];
    subs.sort();
    assert_eq!(
        nested,
        serde_json::json!(subs),
        "the subagents under their window"
    );
    let rows = browser
        .eval("return [...document.querySelectorAll('svg.gantt g.row')].map(r => r.dataset.agent)");
    assert_eq!(
        rows.as_array().map(Vec::len),
        Some(3),
        "a Gantt row per agent: {rows}"
    );
    // Each mode of lock is one path per row, whatever the number of bars.
    let bar = browser.eval(&format!(
        "return document.querySelectorAll('g.row[data-agent=\"{lexer}\"] path.lock[data-mode=\"write\"]').length"
    ));
    assert_eq!(bar, 1, "the lexer's lock bar");
    // Pointing at it says which lock it is (the tooltip is made from the chart's data).
    let tip = browser.eval(&format!(
        "const b = document.querySelector('g.row[data-agent=\"{lexer}\"] path.lock[data-mode=\"write\"]'); \
         const r = b.getBoundingClientRect(); \
         b.dispatchEvent(new MouseEvent('mousemove', {{ bubbles: true, clientX: r.x + r.width / 2, clientY: r.y + r.height / 2 }})); \
         const t = document.getElementById('tip'); return t.hidden ? '' : t.textContent"
    ));
    let tip = tip.as_str().unwrap_or_default();
    assert!(
        tip.starts_with("write lock src/lexer.rs (token "),
        "the lock bar's tooltip: {tip:?}"
    );
    let mark = browser.eval(&format!(
        "return document.querySelectorAll('g.row[data-agent=\"{parser}\"] path.mark[data-kind=\"denied\"]').length"
    ));
    assert_eq!(mark, 1, "the parser's denial");
    // The tree's NOW says the parser was refused, naming the holder (issue 29).
    let now = browser.eval(&format!(
        "return document.querySelector('li[data-agent=\"{parser}\"] > span.now').textContent"
    ));
    assert!(
        now.as_str().is_some_and(|t| t.contains(&format!(
            "denied Write src/lexer.rs (held by {})",
            &lexer[..12]
        ))),
        "the parser's NOW: {now}"
    );
    assert_eq!(
        browser.eval(
            "return [...document.querySelectorAll('table.locks tr[data-path]')].map(r => r.dataset.path)"
        ),
        serde_json::json!(["src/lexer.rs"])
    );
    // An event made now appears without a reload.
    env.maos_json(&[
        "note",
        "decision",
        "Tokens live in lexer.rs",
        "--session",
        &hooked,
    ]);
    browser.until_js(
        "the note on the timeline",
        "return [...document.querySelectorAll('#event-rows tr')].some(r => r.dataset.type === 'note_recorded')",
    );
    // The type filter, then the briefing.
    browser.eval(
        "document.getElementById('f-type').value = 'tool_denied'; \
         document.getElementById('filters').requestSubmit()",
    );
    let types = browser.until_js(
        "only denials listed",
        "const t = [...document.querySelectorAll('#event-rows tr')].map(r => r.dataset.type); \
         return t.length && t.every(x => x === 'tool_denied') ? t : null",
    );
    assert_eq!(types.as_array().map(Vec::len), Some(1), "{types}");
    browser.eval("document.getElementById('brief-load').click()");
    browser.until_js(
        "the briefing",
        "return document.getElementById('brief-text').textContent.includes('Split the lexer')",
    );
    browser.screenshot(&shots.join("dashboard-session.png"));
    // Zoomed to the last minute: the same rows, the button pressed, the window a minute.
    browser.eval("document.querySelector('button[data-zoom=\"60000\"]').click()");
    browser.until_js(
        "the last minute",
        "const b = document.querySelector('button[data-zoom=\"60000\"]'); \
         return b && b.getAttribute('aria-pressed') === 'true' \
           && document.querySelectorAll('svg.gantt g.row').length === 3 \
           && Math.abs(S.gantt.to_ms - S.gantt.from_ms - 60000) < 2000",
    );
    // Pause asks first: "No" does nothing, "Yes" pauses.
    let ask = "document.querySelector('#session-head button[data-action=\"pause\"]').click(); \
               return document.getElementById('confirm').open";
    assert_eq!(browser.eval(ask), true, "a confirmation first");
    browser.eval("document.getElementById('confirm-no').click()");
    browser.until_js(
        "not done",
        "return document.getElementById('status').textContent.includes('not done')",
    );
    assert_eq!(
        env.maos_json(&["session", "show", &hooked])["state"],
        "running"
    );
    assert_eq!(browser.eval(ask), true);
    browser.eval("document.getElementById('confirm-yes').click()");
    browser.until_js(
        "paused",
        "return document.getElementById('status').textContent.includes('paused session')",
    );
    assert_eq!(
        env.maos_json(&["session", "show", &hooked])["state"],
        "paused"
    );

    // The deadlock: its cycle drawn in red, both agents' rows marked.
    view(&dl);
    let cycle = browser.until_js(
        "the deadlock's cycle",
        "const f = document.querySelector('figure.deadlock'); \
         return f && [...f.querySelectorAll('g.edge.on-cycle')].map(e => [e.dataset.waiter, e.dataset.holder])",
    );
    let mut pairs: Vec<(String, String)> = cycle
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            (
                e[0].as_str().unwrap_or_default().into(),
                e[1].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    pairs.sort();
    let mut want = vec![(a.clone(), b.clone()), (b.clone(), a.clone())];
    want.sort();
    assert_eq!(pairs, want, "a waits for b and b for a");
    assert_eq!(
        browser.eval("return document.querySelectorAll('rect.deadlock-row').length"),
        2
    );
    assert!(
        browser
            .eval("return document.querySelectorAll('.mark[data-kind=\"deadlock\"]').length")
            .as_u64()
            >= Some(1)
    );
    browser.screenshot(&shots.join("dashboard-deadlock.png"));

    // The managed plan: its agents by their plan names, both completed.
    view(&managed);
    let names = browser.until_js(
        "the plan's agents",
        "const t = [...document.querySelectorAll('#tree li .who')].map(e => e.textContent.split(' ')[0]); \
         return t.length === 2 ? t : null",
    );
    assert_eq!(names, serde_json::json!(["build", "check"]));
    assert_eq!(
        browser.eval("return document.querySelectorAll('svg.gantt g.row').length"),
        2
    );
}

/// The daemon's Gantt chart (`Request::Gantt`, what `/api/gantt` relays): folded as events
/// commit, caught up with what the database holds, the same when rebuilt from the database
/// after a `kill -9`, and a bad window refused with one line.
#[test]
fn the_daemon_keeps_each_sessions_chart_and_rebuilds_it_the_same_from_disk() {
    use maos_proto::{Reply, Request};
    use maos_tests::client::Client;
    let env = Env::new();
    let sid = env.session("Charts", &["build"]);
    env.maos_json(&["session", "start"]);
    let a = env.agent(None, "dev", "writes");
    env.maos_json(&["agent", "start", &a]);
    let root = Env::project_root(&env.project);
    let chart = |c: &mut Client| -> Value {
        match c.call(Request::Gantt(req::Gantt {
            session: sid[..10].to_string(),
            from_ms: None,
            to_ms: None,
            width_px: 1_000,
        })) {
            Ok(Reply::Gantt(g)) => {
                let mut v = serde_json::to_value(g).expect("a chart serializes");
                // Only `now` moves between two asks.
                v["now_ms"] = Value::Null;
                v["to_ms"] = Value::Null;
                v
            }
            other => panic!("a chart was asked for: {other:?}"),
        }
    };
    let mut c = Client::connect(&env.socket, &root).expect("connect");
    // Asked before its locks: the fold is made, and what follows is folded as it commits.
    let before = chart(&mut c);
    assert_eq!(before["rows"][0]["agent"], a.as_str(), "{before}");
    assert_eq!(
        before["rows"][0]["locks"],
        serde_json::json!([]),
        "{before}"
    );
    for i in 0..30 {
        let path = format!("src/f{i}.rs");
        env.maos_json(&["lock", "acquire", &path, "--agent", &a]);
        env.maos_json(&["lock", "release", &path, "--agent", &a]);
    }
    env.maos_json(&["lock", "acquire", "src/held.rs", "--agent", &a]);
    let live = chart(&mut c);
    let locks = live["rows"][0]["locks"].as_array().expect("lock bars");
    let paths: usize = locks
        .iter()
        .map(|l| l["count"].as_u64().unwrap_or(0) as usize)
        .sum();
    assert_eq!(paths, 31, "every lock is on the chart: {live}");
    assert!(
        locks
            .iter()
            .any(|l| l["path"] == "src/held.rs" && l.get("to_ms").is_none()),
        "the held one is open: {live}"
    );
    // A restart: the chart is rebuilt from the database, the same.
    env.kill9();
    env.maos_json(&["ps"]);
    let mut c = Client::connect(&env.socket, &root).expect("the daemon is back");
    assert_eq!(chart(&mut c), live, "rebuilt from disk");

    // Bad windows: one line each, and the chart is unchanged.
    for (from_ms, to_ms, width_px, says) in [
        (Some(-1), None, 10, "from: -1 is not a time"),
        (Some(5), Some(5), 10, "to (5) is not after from (5)"),
        (None, None, 0, "width: 0 is not a number of pixels"),
        (None, None, 10_001, "width: 10001 is not a number of pixels"),
    ] {
        let e = c
            .call(Request::Gantt(req::Gantt {
                session: sid.clone(),
                from_ms,
                to_ms,
                width_px,
            }))
            .expect_err("a bad window is refused");
        assert!(e.contains(says) && !e.contains('\n'), "{e}");
    }
    let e = c
        .call(Request::Gantt(req::Gantt {
            session: "sess_nope".into(),
            from_ms: None,
            to_ms: None,
            width_px: 10,
        }))
        .expect_err("an unknown session");
    assert!(e.contains("sess_nope") && !e.contains('\n'), "{e}");
    assert_eq!(chart(&mut c), live, "nothing changed");
}

/// A daemon that stops (or works, every 10 minutes) saves each chart it keeps; the next one,
/// also after `kill -9`, starts from the saved chart
/// (and folds only what was committed since) while the chart's last event is still the
/// timeline's and the fold code is the same; a saved chart that is not good (another event
/// at its place, another code, not JSON) is removed and the chart is read again from the
/// events.
#[test]
fn a_stopped_daemon_saves_each_chart_and_the_next_starts_from_it_while_it_still_holds() {
    use maos_proto::{Reply, Request};
    use maos_tests::client::Client;
    let env = Env::new();
    let sid = env.session("Saved charts", &["build"]);
    env.maos_json(&["session", "start"]);
    let a = env.agent(None, "dev", "writes");
    env.maos_json(&["agent", "start", &a]);
    for path in ["src/first.rs", "src/second.rs"] {
        env.maos_json(&["lock", "acquire", path, "--agent", &a]);
        env.maos_json(&["lock", "release", path, "--agent", &a]);
    }
    let root = Env::project_root(&env.project);
    let paths = || -> Vec<String> {
        // Started again if stopped.
        env.maos_json(&["ps"]);
        let mut c = Client::connect(&env.socket, &root).expect("connect");
        match c.call(Request::Gantt(req::Gantt {
            session: sid.clone(),
            from_ms: None,
            to_ms: None,
            width_px: 10_000,
        })) {
            Ok(Reply::Gantt(g)) => g.rows[0].locks.iter().map(|l| l.path.clone()).collect(),
            other => panic!("a chart was asked for: {other:?}"),
        }
    };
    assert_eq!(paths(), ["src/first.rs", "src/second.rs"]);
    let saved = env
        .db_path()
        .with_file_name("charts")
        .join(format!("{sid}.json"));
    let stop = || {
        env.maos_json(&["daemon", "stop"]);
        maos_tests::wait_until(maos_tests::DEADLINE, "the chart saved", || saved.exists());
    };
    stop();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&saved)
        .expect("saved")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "only its owner reads it");
    let read = || -> Value {
        serde_json::from_slice(&std::fs::read(&saved).expect("the saved chart")).expect("JSON")
    };
    let write = |v: &Value| std::fs::write(&saved, v.to_string()).expect("write the saved chart");

    // Used again: what it holds (here, a path changed by hand) is what the chart shows, and
    // what was committed since is folded on.
    let mut doc = read();
    assert_eq!(
        doc["fold"]["rows"][0]["locks"][0]["path"], "src/first.rs",
        "{doc}"
    );
    doc["fold"]["rows"][0]["locks"][0]["path"] = Value::from("src/from-the-saved-chart.rs");
    write(&doc);
    env.maos_json(&["lock", "acquire", "src/third.rs", "--agent", &a]);
    assert_eq!(
        paths(),
        [
            "src/from-the-saved-chart.rs",
            "src/second.rs",
            "src/third.rs"
        ],
        "started from the saved chart, then caught up"
    );

    // Not good any more: read again from the events, and the saved copy removed.
    stop();
    let mut doc = read();
    let last = doc["fold"]["last_ts_us"]
        .as_i64()
        .expect("the last event's time");
    doc["fold"]["last_ts_us"] = Value::from(last + 1);
    let other_event = doc.to_string();
    let mut doc = read();
    doc["code"] = Value::from(1u64);
    let other_code = doc.to_string();
    for (what, body) in [
        ("another event at its place", other_event),
        ("another fold code", other_code),
        ("not JSON", "{\"code\": ".to_string()),
    ] {
        std::fs::write(&saved, body).expect("write the saved chart");
        assert_eq!(
            paths(),
            ["src/first.rs", "src/second.rs", "src/third.rs"],
            "{what}: read again from the events"
        );
        assert!(!saved.exists(), "{what}: the saved chart is removed");
        stop();
    }

    // Saved while events flow too (here every 100 ms), so that a daemon killed -9 leaves a
    // chart its successor starts from.
    std::fs::remove_file(&saved).expect("remove the saved chart");
    let mut start = env.maos_cmd_in(&env.project, &["ps"]);
    start.env("MAOS_TEST_CHART_SAVE_MS", "100");
    assert!(start.output().expect("maos ps").status.success());
    env.maos_json(&["lock", "acquire", "src/fourth.rs", "--agent", &a]);
    maos_tests::wait_until(
        maos_tests::DEADLINE,
        "the chart saved while events flow",
        || {
            // An event: the follower saves when one comes after its interval.
            env.maos_json(&["lock", "release", "src/fourth.rs", "--agent", &a]);
            env.maos_json(&["lock", "acquire", "src/fourth.rs", "--agent", &a]);
            std::fs::read_to_string(&saved).is_ok_and(|t| t.contains("src/fourth.rs"))
        },
    );
    env.kill9();
    let mut doc = read();
    doc["fold"]["rows"][0]["locks"][0]["path"] = Value::from("src/saved-while-working.rs");
    write(&doc);
    let after_crash = paths();
    assert_eq!(
        after_crash[0], "src/saved-while-working.rs",
        "{after_crash:?}"
    );
    assert_eq!(
        after_crash.last().map(String::as_str),
        Some("src/fourth.rs")
    );
}

/// What the session page's header and tree are drawn from (`/api/session`): a failed session's
/// agents done as `maos ps` counts them (issue 29: "agents 3/3 done" where ps said 1/3), and
/// each agent's NOW as `ps` words it, a refused write said as a refusal naming the holder.
#[test]
fn the_session_api_counts_done_as_ps_does_and_says_a_refusal() {
    let env = Env::new();
    let sid = env.session("Fails", &[]);
    env.maos_json(&["session", "start", &sid]);
    let ids: Vec<String> = ["ok", "bad", "gone"]
        .iter()
        .map(|r| env.agent(Some(&sid), r, "work"))
        .collect();
    for id in &ids {
        env.maos_json(&["agent", "start", id]);
    }
    env.maos_json(&["agent", "complete", &ids[0]]);
    env.maos_json(&["agent", "fail", &ids[1]]);
    env.maos_json(&["agent", "cancel", &ids[2]]);
    env.maos_json(&["session", "fail", &sid]);
    let ps = env.maos(&["ps", "--all"]);
    let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
    let row = ps
        .lines()
        .find(|l| l.contains(&sid[..13]))
        .unwrap_or_else(|| panic!("no row for the session:\n{ps}"));
    assert!(row.contains(" 1/3 "), "ps counts one done:\n{ps}");

    // Two windows write one file: the second is refused.
    let cwd = env.project.to_string_lossy().into_owned();
    for w in ["w-holds", "w-refused"] {
        env.hook(
            "claude",
            &serde_json::json!({"session_id": w, "cwd": cwd, "hook_event_name": "PreToolUse",
                "tool_name": "Write", "tool_use_id": format!("toolu_{w}"),
                "tool_input": {"file_path": format!("{cwd}/src/x.rs"), "content": "x"}}),
        );
    }
    let hooked = env.maos_json(&["ps"])[0]["id"]
        .as_str()
        .expect("the windows' session")
        .to_string();

    let d = Dashboard::start(&env);
    let host = format!("127.0.0.1:{}", d.port);
    let with = [("X-Maos-Token", d.token.as_str())];
    let p = format!("project={}", enc(&Env::project_root(&env.project)));
    let get = |path: &str| {
        let (status, body) = http(d.port, "GET", path, &host, &with);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str::<Value>(&body).unwrap_or_else(|_| panic!("{path}: {body}"))
    };
    let v = get(&format!("/api/session?{p}&session={sid}"));
    assert_eq!(
        (
            v["progress"]["agents_done"].as_u64(),
            v["progress"]["agents_total"].as_u64()
        ),
        (Some(1), Some(3)),
        "the header's agents done: {v}"
    );
    let v = get(&format!("/api/session?{p}&session={hooked}"));
    let agents = v["agents"].as_array().expect("agents");
    let holder = agents
        .iter()
        .find(|a| a["activity"].get("denied").is_none())
        .and_then(|a| a["id"].as_str())
        .expect("the holder");
    let nows: Vec<&str> = agents.iter().filter_map(|a| a["now"].as_str()).collect();
    assert!(
        nows.iter().any(|n| n.starts_with(&format!(
            "denied Write src/x.rs (held by {})",
            &holder[..12]
        ))),
        "the refused window's NOW: {nows:?}"
    );
    assert!(
        nows.iter().any(|n| n.starts_with("Write src/x.rs, ")),
        "the holder's NOW: {nows:?}"
    );
}

/// A view left while it still loads never draws over the next one. The page's first view (the
/// projects) was still waiting for its answer when the address moved to a session; the
/// session was drawn, then the projects' late answer replaced it, so the page showed the
/// projects under a session's address (a CI run of `violations` timed out on exactly that).
/// Here the projects' answer is held in the browser until the session is drawn.
#[test]
fn a_view_left_while_it_loads_never_draws_over_the_next() {
    if !maos_tests::webdriver::available() {
        return;
    }
    let env = Env::new();
    let sid = env.session("Drawn over by a late answer", &[]);
    let d = Dashboard::start(&env);
    let browser = maos_tests::webdriver::Browser::start(&env.root().join("chromium"));
    // Before the page's own script: `/api/projects` answers wait for `__release()`; once its
    // body is read, a task queued behind it says that everything the page did with it
    // (every microtask up to the page's next wait) is done.
    let hold = r#"
        window.__held = [];
        window.__after = false;
        const real = window.fetch.bind(window);
        window.fetch = (url, init) => {
            if (!String(url).startsWith("/api/projects") || window.__go) return real(url, init);
            return new Promise(done => window.__held.push(() => done(real(url, init).then(r => {
                const json = r.json.bind(r);
                r.json = () => json().then(v => { setTimeout(() => { window.__after = true; }, 0); return v; });
                return r;
            }))));
        };
        window.__release = () => { window.__go = true; for (const f of window.__held.splice(0)) f(); };
    "#;
    browser
        .cdp(
            "Page.addScriptToEvaluateOnNewDocument",
            serde_json::json!({ "source": hold }),
        )
        .expect("a script before the page's");
    browser.open(&d.url);
    browser.until_js(
        "the projects' answer is held",
        "return window.__held && window.__held.length === 1",
    );
    let root = Env::project_root(&env.project);
    browser.eval(&format!("location.hash = '#/session/{}/{sid}'", enc(&root)));
    browser.until_js(
        "the session drawn",
        "return !!document.querySelector('#view #timeline')",
    );
    browser.eval("window.__release()");
    browser.until_js("the projects' answer read", "return window.__after");
    let shown = browser.eval(
        "return [!!document.querySelector('#view #timeline'), \
                 document.querySelectorAll('#view section[data-project]').length, \
                 document.getElementById('where').textContent]",
    );
    assert_eq!(
        shown,
        serde_json::json!([true, 0, format!("{root} › {}", &sid[..13])]),
        "the session's page, not the projects: {}",
        browser.html()
    );
}
