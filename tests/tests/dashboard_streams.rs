//! A page's event stream holds a daemon subscription (a connection to maosd) and a thread in
//! `maos-dash`. When the page goes, both must go at once, not at the project's next event:
//! on a quiet project 1,024 page loads filled maosd's connection limit (issue 30 §1.3).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use maos_tests::dashboard::Dashboard;
use maos_tests::{DEADLINE, Env, wait_until};

/// The sockets bound to maosd's socket path: its listener and every connection it has
/// accepted and not yet closed (Linux names an accepted socket by its listener's path).
fn daemon_sockets(socket: &Path) -> usize {
    let path = socket.to_string_lossy();
    std::fs::read_to_string("/proc/net/unix")
        .expect("read /proc/net/unix")
        .lines()
        .filter(|l| l.split_whitespace().nth(7) == Some(path.as_ref()))
        .count()
}

/// The threads of a process.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("read /proc/PID/task")
        .count()
}

/// The project's event stream, asked for as a page asks for it.
fn open_stream(d: &Dashboard<'_>, project: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", d.port)).expect("connect to the dashboard");
    let req = format!(
        "GET /api/events?project={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nX-Maos-Token: {}\r\n\
         Accept: text/event-stream\r\n\r\n",
        project.replace('/', "%2F"),
        d.port,
        d.token
    );
    s.write_all(req.as_bytes()).expect("send");
    s
}

/// Open the project's event stream as a page does, see its headers, and close it.
fn open_and_close(d: &Dashboard<'_>, project: &str) {
    let mut s = open_stream(d, project);
    s.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("text/event-stream") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!(
                "no event stream: {:?}",
                String::from_utf8_lossy(&seen).into_owned()
            ),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    // The page goes: the browser closes the connection.
}

#[test]
fn a_closed_event_stream_ends_its_daemon_connection_and_thread_at_once() {
    let env = Env::new();
    env.session("a quiet project", &[]);
    let d = Dashboard::start(&env);
    let root = Env::project_root(&env.project);
    // Only the daemon's listener: the commands' connections are closed.
    wait_until(
        DEADLINE,
        "maosd's connections of the commands closed",
        || daemon_sockets(&env.socket) == 1,
    );
    let threads_before = threads(d.pid);

    // One page, still open: its subscription is one connection to maosd.
    open_and_close(&d, &root);
    let open = open_stream(&d, &root);
    for _ in 1..50 {
        open_and_close(&d, &root);
    }
    // Every closed page's subscription is gone; the open one's stays.
    wait_until(
        DEADLINE,
        "maosd holds only the open page's subscription (the closed pages' are gone)",
        || daemon_sockets(&env.socket) == 2,
    );
    // The open page's thread and tokio's blocking pool (a thread or two kept for a while
    // after a request) are all that is left: 50 closed pages left 50 threads before.
    wait_until(
        DEADLINE,
        "maos-dash's threads of the closed pages ended",
        || threads(d.pid) <= threads_before + 4,
    );
    drop(open);
    wait_until(DEADLINE, "the last page's subscription is gone", || {
        daemon_sockets(&env.socket) == 1
    });

    // The dashboard still follows the project: a new page sees a new event.
    let mut live = open_stream(&d, &root);
    live.set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut pushed = false;
    wait_until(DEADLINE, "the new session's event on a new page", || {
        if let Ok(n) = live.read(&mut buf) {
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        if !pushed && seen.contains("text/event-stream") {
            env.session("pushed live", &[]);
            pushed = true;
        }
        seen.contains("pushed live")
    });
}
