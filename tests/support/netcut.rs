//! A TCP proxy on 127.0.0.1 whose link can be cut or stalled: how the fleet tests put a network
//! between a daemon and its PostgreSQL and then break it. [`NetCut::cut`] closes every
//! connection through it and refuses new ones (a peer that is gone: the daemon sees errors at
//! once); [`NetCut::stall`] keeps the connections open but moves no byte (a partition: the
//! daemon sees nothing until its own timeouts); [`NetCut::restore`] mends both. Dropping it
//! closes everything. Plain std threads, one pair per connection.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Link {
    Up,
    Stalled,
    Cut,
}

struct Shared {
    link: Mutex<Link>,
    /// Signalled when the link changes (stalled copiers wait on it).
    changed: Condvar,
    /// Both ends of every live connection, to close them on a cut.
    conns: Mutex<Vec<TcpStream>>,
    closing: Mutex<bool>,
}

pub struct NetCut {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl NetCut {
    /// A proxy to `target`, listening on a free port of 127.0.0.1.
    pub fn start(target: SocketAddr) -> Result<NetCut, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("the proxy cannot listen on 127.0.0.1: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let shared = Arc::new(Shared {
            link: Mutex::new(Link::Up),
            changed: Condvar::new(),
            conns: Mutex::new(Vec::new()),
            closing: Mutex::new(false),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, target, s));
        Ok(NetCut {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Close every connection and refuse new ones (each is closed as it is accepted).
    pub fn cut(&self) {
        self.set(Link::Cut);
        close_all(&self.shared);
    }

    /// Keep every connection open, move no byte, and hold new ones the same way.
    pub fn stall(&self) {
        self.set(Link::Stalled);
    }

    /// Move bytes again; accept connections again.
    pub fn restore(&self) {
        self.set(Link::Up);
    }

    fn set(&self, link: Link) {
        *lock(&self.shared.link) = link;
        self.shared.changed.notify_all();
    }
}

impl Drop for NetCut {
    fn drop(&mut self) {
        *lock(&self.shared.closing) = true;
        self.set(Link::Cut);
        close_all(&self.shared);
        // Wake the accept loop so that it sees `closing`.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn close_all(shared: &Shared) {
    for c in lock(&shared.conns).drain(..) {
        let _ = c.shutdown(Shutdown::Both);
    }
}

fn accept_loop(listener: TcpListener, target: SocketAddr, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if *lock(&shared.closing) {
            return;
        }
        let Ok(client) = client else { continue };
        if *lock(&shared.link) == Link::Cut {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(server) = TcpStream::connect(target) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let clones = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        );
        let (Ok(c_kept), Ok(s_kept), Ok(c_read), Ok(s_write)) = clones else {
            continue;
        };
        lock(&shared.conns).extend([c_kept, s_kept]);
        let (a, b) = (shared.clone(), shared.clone());
        std::thread::spawn(move || copy(c_read, s_write, &a));
        std::thread::spawn(move || copy(server, client, &b));
    }
}

/// Bytes from `from` to `to` while the link is up; while it is stalled, read nothing and wait
/// for a change; once cut (or an end closed), close both.
fn copy(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        {
            let mut link = lock(&shared.link);
            while *link == Link::Stalled {
                link = shared.changed.wait(link).unwrap_or_else(|p| p.into_inner());
            }
            if *link == Link::Cut {
                break;
            }
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // A stall that began while this read waited holds the bytes read until it ends.
        {
            let mut link = lock(&shared.link);
            while *link == Link::Stalled {
                link = shared.changed.wait(link).unwrap_or_else(|p| p.into_inner());
            }
            if *link == Link::Cut {
                break;
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
