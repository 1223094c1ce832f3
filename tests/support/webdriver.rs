//! A real headless browser for the dashboard's tests: Debian's `chromium`, driven through its
//! `chromedriver` over the W3C WebDriver protocol (plain JSON over HTTP on 127.0.0.1). The
//! tests use five of its endpoints (new session, navigate, execute a script, screenshot,
//! delete), spoken here with std's TcpStream rather than an async HTTP stack and TLS brought
//! into the test build. Dropping the browser ends its session and its driver.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
}

/// A free port on 127.0.0.1 (the kernel's pick, released for the driver to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The body of a chunked answer: its chunks joined.
fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        body.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    body
}

/// One request to the driver: its JSON answer's `value`, or what went wrong.
fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    // Read the head, then exactly the body it announces (the driver may keep the connection
    // open whatever the request said).
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let body = loop {
        let n = s.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the driver closed the connection".into());
        }
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw);
        let Some((head, rest)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let head = head.to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        match length {
            Some(len) if rest.len() >= len => break rest[..len].to_string(),
            Some(_) => continue,
            // Chunked: complete at the zero-length chunk; the JSON is the chunks joined.
            None if rest.contains("\r\n0\r\n\r\n") => break dechunk(rest),
            None => continue,
        }
    };
    let v: Value = serde_json::from_str(body.trim()).map_err(|e| format!("{e}: {body}"))?;
    if v["value"]["error"].is_string() {
        return Err(v["value"].to_string());
    }
    Ok(v["value"].clone())
}

impl Browser {
    /// Start `chromedriver` and a headless Chromium session (profile under `dir`).
    pub fn start(dir: &Path) -> Browser {
        Browser::try_start(dir).expect("a browser session")
    }

    /// [`Browser::start`], with what went wrong instead of a panic (the load tool's way).
    pub fn try_start(dir: &Path) -> Result<Browser, String> {
        Browser::try_start_on(dir, None)
    }

    /// [`Browser::try_start`], the driver and the browser confined to `cpus` (a `taskset -c`
    /// list, e.g. `1`) if given.
    pub fn try_start_on(dir: &Path, cpus: Option<&str>) -> Result<Browser, String> {
        let port = free_port();
        let mut cmd = match cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus, "chromedriver"]);
                c
            }
            None => Command::new("chromedriver"),
        };
        let driver = cmd
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run chromedriver: {e}"))?;
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
        };
        let deadline = Instant::now() + crate::DEADLINE;
        while call(port, "GET", "/status", None).is_err() {
            if Instant::now() > deadline {
                return Err("chromedriver did not answer".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--window-size=1100,700",
                     format!("--user-data-dir={}", dir.display())]
        }}}});
        let v = call(port, "POST", "/session", Some(&caps))
            .map_err(|e| format!("no browser session: {e}"))?;
        b.session = v["sessionId"]
            .as_str()
            .ok_or("the driver's new session has no id")?
            .to_string();
        Ok(b)
    }

    /// The driver's process id (the browser's processes are its descendants).
    pub fn driver_pid(&self) -> u32 {
        self.driver.id()
    }

    fn at(&self, what: &str) -> String {
        format!("/session/{}/{what}", self.session)
    }

    pub fn open(&self, url: &str) {
        self.try_open(url).expect("navigate");
    }

    /// Navigate to `url` (returns once it has loaded), or what went wrong.
    pub fn try_open(&self, url: &str) -> Result<(), String> {
        call(
            self.port,
            "POST",
            &self.at("url"),
            Some(&json!({ "url": url })),
        )
        .map(drop)
    }

    /// Run `script` (a function body) in the page: what it returns.
    pub fn eval(&self, script: &str) -> Value {
        self.try_eval(script).expect("execute")
    }

    /// [`Browser::eval`], or what went wrong.
    pub fn try_eval(&self, script: &str) -> Result<Value, String> {
        let body = json!({ "script": script, "args": [] });
        call(self.port, "POST", &self.at("execute/sync"), Some(&body))
    }

    /// A Chrome DevTools Protocol command (chromedriver's `goog/cdp/execute`): its result.
    pub fn cdp(&self, cmd: &str, params: Value) -> Result<Value, String> {
        let body = json!({ "cmd": cmd, "params": params });
        call(self.port, "POST", &self.at("goog/cdp/execute"), Some(&body))
    }

    /// The page's DOM as HTML.
    pub fn html(&self) -> String {
        self.eval("return document.documentElement.outerHTML")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Wait until the DOM satisfies `cond` (the test fails after a deadline, showing it).
    pub fn until(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + crate::DEADLINE;
        loop {
            let html = self.html();
            if cond(&html) {
                return html;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting until {what}; the page:\n{html}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Wait until `script` (a function body) returns something truthy: that value.
    pub fn until_js(&self, what: &str, script: &str) -> Value {
        let deadline = Instant::now() + crate::DEADLINE;
        loop {
            let v = self.eval(script);
            let truthy = match &v {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting until {what} ({script}); the page:\n{}",
                self.html()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Make the window `width` × `height` CSS pixels (what a screenshot shows).
    pub fn resize(&self, width: u32, height: u32) {
        call(
            self.port,
            "POST",
            &self.at("window/rect"),
            Some(&json!({ "width": width, "height": height })),
        )
        .expect("resize the window");
    }

    /// A PNG of the window, written to `path`.
    pub fn screenshot(&self, path: &Path) {
        let v = call(self.port, "GET", &self.at("screenshot"), None).expect("screenshot");
        use base64::Engine;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().expect("base64"))
            .expect("a PNG in base64");
        std::fs::write(path, png).expect("write the screenshot");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = call(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Whether the browser and its driver run here (Debian packages chromium and
/// chromium-driver; `.ci/run` installs them on CI, where a missing one fails the test).
pub fn available() -> bool {
    crate::have_tool("chromium", "chromium") && crate::have_tool("chromedriver", "chromium-driver")
}
