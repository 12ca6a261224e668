//! The socket transport of `helix serve` (and of the integration tests): HTTP/1.1 and
//! h2c on one port through hyper-util, under `ServerLimits`: a header-read timeout
//! (from accept, or from the first byte of a later request head), an idle timeout (no
//! request in flight, no bytes arriving), a body-read timeout, and a cap on concurrent
//! connections (`connections`: at the cap, a new connection takes the slot of a silent or
//! idle one, which still answers a head that arrives in time: served when a slot frees,
//! else `503 server_busy`); when every connection is busy, the next waits (and further
//! ones wait in the listen backlog) until one ends. An HTTP/1 answer given before
//! its request body was read to the end carries `Connection: close`, so a keep-alive
//! client learns the connection ends instead of writing into a closed socket.
//! `guard` (also used by the Lambda adapter) turns an escaped panic into a 500.

use std::any::Any;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header::CONNECTION;
use http::{HeaderValue, Request, Version};
use hyper::body::{Body as HttpBody, Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::admission::Transport;
use super::connections::{Activity, Gate, Live};
use super::no_store;
use crate::config::ServerLimits;
use crate::error::ApiError;

/// The cause logged for a request whose handler panicked (the payload is not kept).
#[derive(Debug, thiserror::Error)]
#[error("request handler panicked")]
pub struct Panicked;

/// A request body that did not arrive within the body-read timeout.
#[derive(Debug, thiserror::Error)]
#[error("request body read timed out")]
pub struct BodyTimedOut;

/// The last line of defence: a panic that escaped the pipeline (or happened in it)
/// becomes a 500 in the error schema. Only the fact is logged: a panic message may
/// quote request data.
///
/// Outside it, every request gets its span ([`RequestSpan`]): the caller's W3C
/// `traceparent` (and `tracestate`) is its parent when traces are exported, so any
/// server on this stack continues its caller's trace.
pub fn guard(router: Router) -> Router {
    router
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(on_panic))
        .layer(axum::middleware::from_fn(request_span))
}

/// The request's span, opened by [`guard`]; the pipeline records the request id and
/// route group into it. Method and status only: no path, query or header.
#[derive(Clone)]
pub struct RequestSpan(pub tracing::Span);

async fn request_span(mut req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    // The OpenTelemetry fields only when spans are exported: otherwise each would be
    // recorded and written again into every log line of the request, beside the access
    // line's own method and status.
    let span = if crate::telemetry::enabled() {
        let span = tracing::info_span!(
            "request",
            otel.kind = "server",
            otel.name = %req.method(),
            http.request.method = %req.method(),
            request_id = tracing::field::Empty,
            group = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
        );
        crate::telemetry::continue_trace(&span, req.headers());
        span
    } else {
        tracing::info_span!("request", request_id = tracing::field::Empty, group = tracing::field::Empty)
    };
    req.extensions_mut().insert(RequestSpan(span.clone()));
    let res = tracing::Instrument::instrument(next.run(req), span.clone()).await;
    span.record("http.response.status_code", res.status().as_u16());
    res
}

fn on_panic(_payload: Box<dyn Any + Send + 'static>) -> Response {
    let request_id = crate::domain::request_id();
    tracing::error!(request_id, "request panicked outside the pipeline");
    refusal(&ApiError::internal(Panicked), &request_id)
}

/// An answer given outside the pipeline, in the error schema (with `Retry-After` when
/// the error has one).
fn refusal(err: &ApiError, request_id: &str) -> Response {
    let mut res = (err.status(), axum::Json(err.body(request_id))).into_response();
    no_store(res.headers_mut(), request_id);
    if let Some(secs) = err.retry_after_secs() {
        res.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    res
}

/// When a client refused at the connection cap is told to come back.
const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// Replaces the default panic hook (which prints the payload) with a log line that
/// names only the code location. Binaries call this once at start.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        tracing::error!(location, "panic (payload withheld: it may quote request data)");
    }));
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets the connections
/// finish their requests (graceful) and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let app = guard(app);
    let gate = Arc::new(Gate::new(&limits));
    let live = Arc::new(Live::default());
    let stop = CancellationToken::new();
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // A place among the open sockets, else the place of the oldest evicted socket that
        // is still silent, else wait for a socket to end.
        let open = match gate.open.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                live.close_oldest_evicted_silent();
                tokio::select! {
                    _ = &mut shutdown => break,
                    permit = gate.open.clone().acquire_owned() => permit.expect("semaphore is never closed"),
                }
            }
        };
        // A free slot, else the slot of a connection that is doing nothing (evicted: it
        // stays open without a slot), else wait for one to end; meanwhile further
        // connections wait in the backlog.
        let slot = match gate.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                live.evict_one();
                tokio::select! {
                    _ = &mut shutdown => break,
                    permit = gate.slots.clone().acquire_owned() => permit.expect("semaphore is never closed"),
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (app, builder, stop, live, slots) =
            (app.clone(), builder.clone(), stop.clone(), live.clone(), gate.slots.clone());
        tokio::spawn(async move {
            let (id, activity, close) = live.register(slot);
            connection(stream, peer, app, &builder, limits, Watch { activity, stop, close, slots }).await;
            live.remove(id);
            drop(open);
        });
    }
    stop.cancel();
    // Every socket holds its place until it ends.
    gate.drained().await;
    Ok(())
}

/// How a connection learns it should end (its watchdog's activity, the server's
/// shutdown, its own close at the socket bound or after a `503`), and the slots it asks
/// for again when it lost its own.
struct Watch {
    activity: Arc<Activity>,
    stop: CancellationToken,
    close: CancellationToken,
    slots: Arc<Semaphore>,
}

async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    builder: &hyper_util::server::conn::auto::Builder<TokioExecutor>,
    limits: ServerLimits,
    watch: Watch,
) {
    let Watch { activity, stop, close, slots } = watch;
    let io = TokioIo::new(Watched { inner: stream, activity: activity.clone() });
    let (service_activity, service_close) = (activity.clone(), close.clone());
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let in_flight = service_activity.begin();
        let (app, activity, close, slots) =
            (app.clone(), service_activity.clone(), service_close.clone(), slots.clone());
        async move {
            // A connection that gave up its slot is served once it gets one back, else
            // told to come back; either way, never closed without an answer.
            let res = if activity.admitted(&slots, limits.header_read_timeout).await {
                handle(app, req, peer, limits.body_read_timeout).await
            } else {
                close.cancel();
                busy()
            };
            drop(in_flight);
            Ok::<_, std::convert::Infallible>(res)
        }
    });
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    // Registered once per connection, not once per wake-up: the server's stop token is
    // shared by every connection (a registration takes its lock), and a timer armed anew
    // at each request's start and end cost two timer-wheel changes per request.
    let (stopped, closed) = (stop.cancelled(), close.cancelled());
    let sleep = tokio::time::sleep(Duration::from_secs(3600));
    tokio::pin!(stopped, closed, sleep);
    // The instant the sleep is set for, while it guards the connection's deadline. It is
    // reset only when the deadline comes earlier; a later deadline (each request's end
    // moves the idle deadline on) is found when the sleep fires early and re-armed then.
    let mut armed: Option<Instant> = None;
    loop {
        // While a request runs there is no deadline: the end of the request notifies.
        if let Some(deadline) = activity.deadline(&limits)
            && armed.is_none_or(|at| deadline < at)
        {
            sleep.as_mut().reset(deadline);
            armed = Some(deadline);
        }
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = &mut stopped => break,
            _ = &mut closed => break,
            _ = activity.changed.notified() => {}
            _ = &mut sleep, if armed.is_some() => {
                armed = None;
                if activity.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                    break;
                }
            }
        }
    }
    // Idle, stalled or shutting down: no request is cut short (graceful), but a peer
    // that does not let go is dropped after a grace period.
    conn.as_mut().graceful_shutdown();
    let grace = if stop.is_cancelled() { Duration::from_secs(3600) } else { Duration::from_secs(1) };
    let _ = tokio::time::timeout(grace, conn.as_mut()).await;
}

/// `503 server_busy` with `Retry-After`, closing the connection.
fn busy() -> Response {
    let request_id = crate::domain::request_id();
    tracing::warn!(request_id, "request refused at the connection cap");
    let mut res = refusal(&ApiError::ServerBusy { retry_after_secs: BUSY_RETRY_AFTER_SECS }, &request_id);
    res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    res
}

async fn handle(app: Router, req: Request<Incoming>, peer: SocketAddr, body_timeout: Duration) -> Response {
    let version = req.version();
    let (mut parts, body) = req.into_parts();
    let finished = Arc::new(AtomicBool::new(body.is_end_stream()));
    let body = Body::new(DeadlineBody {
        inner: body,
        deadline: Box::pin(tokio::time::sleep(body_timeout)),
        finished: finished.clone(),
    });
    parts.extensions.insert(Transport::Socket { peer: peer.ip() });
    let mut res = match app.oneshot(Request::from_parts(parts, body)).await {
        Ok(res) => res,
        Err(never) => match never {},
    };
    if version <= Version::HTTP_11 && !finished.load(Ordering::SeqCst) {
        res.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    res
}

/// A request body that fails with `BodyTimedOut` once its deadline passes, and
/// records whether it was read to the end.
struct DeadlineBody {
    inner: Incoming,
    deadline: Pin<Box<Sleep>>,
    finished: Arc<AtomicBool>,
}

impl HttpBody for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                self.finished.store(true, Ordering::SeqCst);
                Poll::Ready(None)
            }
            Poll::Ready(Some(frame)) => {
                if self.inner.is_end_stream() {
                    self.finished.store(true, Ordering::SeqCst);
                }
                Poll::Ready(Some(frame.map_err(Into::into)))
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut)))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The accepted socket, reporting arriving bytes to the connection's watchdog.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.on_bytes();
        }
        res
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
