//! Accepting connections under the limits: slots in total and per address, reserved
//! slots for the operator's probes, head and idle deadlines, graceful stop.

use super::common::{problem, HttpLimits};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// Serves `router` on `listener` until `stop` turns true, under `limits`: each
/// connection gets a slot (in total and for its IP), else one of the reserved slots that
/// answer only `/healthz` and `/metrics`, else it is closed at once.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: &HttpLimits,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let reserved = Arc::new(Semaphore::new(limits.reserved_connections));
    let waiting = Arc::new(Semaphore::new(RESERVED_WAITERS));
    let per_ip: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>> = Default::default();
    let probes_only = router.clone().layer(middleware::from_fn(probes_only));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped(&mut stop) => break,
        };
        let (stream, address) = match accepted {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: wait rather than spin.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let ip = address.ip();
        let ip_slot = IpSlot::take(&per_ip, ip, limits.max_connections_per_ip);
        let normal = ip_slot.and_then(|ip_slot| slots.clone().try_acquire_owned().ok().map(|p| (p, ip_slot)));
        let (service, head_timeout, keep_alive) = match normal {
            Some(_) => (router.clone(), limits.header_timeout, true),
            None => (probes_only.clone(), RESERVED_HEADER_TIMEOUT, false),
        };
        // Past every slot, a connection may wait a moment for a reserved one (a probe
        // arriving while attackers' connections are being cut); a few wait, the rest
        // are closed at once.
        let waiter = match normal {
            Some(_) => None,
            None => match waiting.clone().try_acquire_owned() {
                Ok(waiter) => Some(waiter),
                Err(_) => continue,
            },
        };
        let reserved = reserved.clone();
        let idle = limits.idle_timeout;
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let slot = match normal {
                Some((permit, ip)) => Slot::Normal { _permit: permit, _ip: ip },
                None => match tokio::time::timeout(RESERVED_HEADER_TIMEOUT, reserved.acquire_owned()).await {
                    Ok(Ok(permit)) => Slot::Reserved { _permit: permit },
                    _ => return,
                },
            };
            drop(waiter);
            let _ = stream.set_nodelay(true);
            let deadline = Box::pin(tokio::time::sleep(idle));
            let stream = LimitedStream { stream, idle, deadline };
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(head_timeout)
                .keep_alive(keep_alive)
                .writev(true)
                .max_buf_size(64 * 1024);
            let connection = builder.serve_connection(
                hyper_util::rt::TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service),
            );
            let _ = watcher.watch(connection).await;
            drop(slot);
        });
    }
    // Requests in flight finish (bounded by their own deadlines), new ones are refused.
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
    Ok(())
}

/// Serves `/healthz` and `/metrics` of `router` alone on `listener`, with connections of
/// their own: an orchestrator's probes on a port (bound where only it reaches) that a
/// crowd on the API's port cannot take, so a healthy node is never restarted for it.
pub async fn serve_probes(listener: TcpListener, router: Router, stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let limits = HttpLimits {
        max_connections: PROBE_CONNECTIONS,
        max_connections_per_ip: PROBE_CONNECTIONS / 2,
        reserved_connections: 0,
        header_timeout: RESERVED_HEADER_TIMEOUT,
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        ..HttpLimits::default()
    };
    serve(listener, router.layer(middleware::from_fn(probes_listener)), &limits, stop).await
}

/// Connections the probes' listener holds at once.
const PROBE_CONNECTIONS: usize = 16;

async fn probes_listener(request: Request, next: Next) -> Response {
    match request.uri().path() {
        "/healthz" | "/metrics" => next.run(request).await,
        _ => problem(StatusCode::NOT_FOUND, "this listener serves /healthz and /metrics only; the API is on --http")
            .into_response(),
    }
}

/// A reserved connection's whole request head must arrive this fast, and a connection
/// past every slot waits at most this long for a reserved one.
const RESERVED_HEADER_TIMEOUT: Duration = Duration::from_secs(1);
/// Connections past every slot allowed to wait for a reserved one at once.
const RESERVED_WAITERS: usize = 64;

async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            // Nobody can stop us any more: serve on.
            std::future::pending::<()>().await;
        }
    }
}

/// What a connection holds while it is open.
enum Slot {
    Normal { _permit: OwnedSemaphorePermit, _ip: IpSlot },
    Reserved { _permit: OwnedSemaphorePermit },
}

/// One connection counted against its IP address; uncounted when dropped.
struct IpSlot {
    counts: Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl IpSlot {
    fn take(counts: &Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, limit: usize) -> Option<IpSlot> {
        let mut map = counts.lock().unwrap_or_else(|e| e.into_inner());
        let count = map.entry(ip).or_insert(0);
        if *count >= limit {
            return None;
        }
        *count += 1;
        Some(IpSlot { counts: counts.clone(), ip })
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = map.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// On a reserved connection, only the operator's probes are answered.
async fn probes_only(request: Request, next: Next) -> Response {
    match request.uri().path() {
        "/healthz" | "/metrics" => next.run(request).await,
        _ => problem(StatusCode::SERVICE_UNAVAILABLE, "every connection slot is taken; try again shortly")
            .into_response(),
    }
}
/// A connection that is dropped after `idle` without progress.
struct LimitedStream {
    stream: TcpStream,
    idle: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl LimitedStream {
    /// Progress pushes the deadline back; no progress past it ends the connection.
    fn watch<T>(&mut self, cx: &mut Context<'_>, poll: Poll<std::io::Result<T>>) -> Poll<std::io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.deadline.as_mut().reset(tokio::time::Instant::now() + self.idle);
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "idle connection")))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncRead for LimitedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_read(cx, buf);
        self.watch(cx, poll)
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.watch(cx, poll)
    }

    /// Vectored writes let hyper queue body chunks as they are (its queue strategy)
    /// instead of copying them into its own buffer, so the bytes written are the very
    /// ones reserved from the memory budget, released when written.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.watch(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.watch(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
