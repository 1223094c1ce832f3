//! The client going away: this server's stdin at its end. rmcp ends the service then, but
//! first lets the calls in flight finish (up to 5 s); a lock wait among them must end at once,
//! not be granted to a client that is gone. So the end of stdin is seen where it is read.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::sync::CancellationToken;

/// A reader that cancels `gone` when it reaches its end (or fails).
pub struct Watched<R> {
    inner: R,
    gone: CancellationToken,
}

impl<R> Watched<R> {
    pub fn new(inner: R, gone: CancellationToken) -> Watched<R> {
        Watched { inner, gone }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let asked = buf.remaining() > 0;
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &r {
            Poll::Ready(Ok(())) if asked && buf.filled().len() == before => self.gone.cancel(),
            Poll::Ready(Err(_)) => self.gone.cancel(),
            _ => {}
        }
        r
    }
}
