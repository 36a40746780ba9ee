//! Loopback networking for the test registry: a listener whose connections a handler can cut,
//! a server that accepts and never answers, and a port with nothing listening.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Lets a request handler cut the connection it arrived on.
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    #[allow(dead_code)]
    pub(crate) peer: SocketAddr,
    killed: Arc<AtomicBool>,
}

impl ConnHandle {
    /// From now on every read and write on the connection fails, and the socket is closed with
    /// a reset when the server drops it.
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        stream.remote_addr().clone()
    }
}

/// A TCP stream that starts failing once its [`ConnHandle`] is killed.
#[derive(Debug)]
pub(crate) struct KillableStream {
    inner: TcpStream,
    killed: Arc<AtomicBool>,
}

impl KillableStream {
    fn check(&self) -> io::Result<()> {
        if self.killed.load(Ordering::SeqCst) {
            // Make the close a reset, as a crashed proxy would.
            let _ = self.inner.set_zero_linger();
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "connection cut by test registry fault",
            ));
        }
        Ok(())
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check()?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

/// A loopback listener handing out [`KillableStream`]s.
#[derive(Debug)]
pub(crate) struct KillableListener {
    inner: TcpListener,
}

impl KillableListener {
    pub(crate) fn new(inner: TcpListener) -> Self {
        KillableListener { inner }
    }
}

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = ConnHandle;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let killed = Arc::new(AtomicBool::new(false));
                    let handle = ConnHandle {
                        peer,
                        killed: killed.clone(),
                    };
                    return (
                        KillableStream {
                            inner: stream,
                            killed,
                        },
                        handle,
                    );
                }
                Err(error) => {
                    tracing::debug!(%error, "test registry accept failed");
                    tokio::task::yield_now().await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(ConnHandle {
            peer: self.inner.local_addr()?,
            killed: Arc::new(AtomicBool::new(false)),
        })
    }
}

/// A loopback port with nothing listening on it (bound once, then released).
pub fn closed_port() -> io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    drop(listener);
    Ok(port)
}

/// A server that accepts TCP connections, reads nothing, and never answers. Stops when dropped.
#[derive(Debug)]
pub struct HangingServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl HangingServer {
    /// Binds 127.0.0.1 on a free port and starts accepting on the current runtime.
    pub async fn start() -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        Ok(HangingServer { addr, task })
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `127.0.0.1:PORT`
    pub fn host(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for HangingServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `router` on `listener` (connections killable) as a task on the current runtime.
pub(crate) fn serve(listener: TcpListener, router: axum::Router) -> JoinHandle<()> {
    tokio::spawn(async move {
        let service = router.into_make_service_with_connect_info::<ConnHandle>();
        if let Err(error) = axum::serve(KillableListener::new(listener), service).await {
            tracing::debug!(%error, "test registry listener stopped");
        }
    })
}
