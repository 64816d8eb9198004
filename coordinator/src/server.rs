//! The HTTP/1.1 accept loop: hyper under the axum router, with what
//! `axum::serve` lacks against hostile or heavy load. A connection cap below
//! the open-files limit (connections past it are answered 503 and closed at
//! once; its last tenth serves only the runner protocol, so a flood of member
//! connections cannot keep runners out; at the cap, a new connection takes
//! the slot of the oldest one that has not sent a request in a second, so
//! silent clients cannot either), a header timeout (which also ends idle
//! keep-alive connections), and a shutdown deadline (connections that never
//! sent a whole request close at once). Body timeouts and budgets live in
//! `http::extract`. Each request learns its peer address.
//!
//! (Over 500 lines: the accept loop and what it wraps each connection in
//! (the write timeout and error envelope of `EnvelopedErrors`, the peer
//! address) are one piece, read together.)

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

/// File descriptors kept for everything but client connections: the
/// database pools, the listener, log and database files.
const RESERVED_FDS: u64 = 128;

/// Largest request head (request line and headers), and so the most a
/// connection's read buffer grows to.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// At the connection cap, a connection that has sent no whole request head
/// for this long (or half the header timeout, if shorter) gives its slot
/// to a new one: clients that connect and stay silent cannot hold the cap.
const EVICTABLE_AFTER: Duration = Duration::from_secs(1);

/// What the server lets connections do. Flags and defaults are in `main.rs`.
#[derive(Debug, Clone)]
pub struct ServeLimits {
    /// Open connections at most; more are answered 503 and closed.
    pub max_connections: usize,
    /// A request's head must arrive within this, counted from when the
    /// connection opens or its previous response was sent: so it is also
    /// how long an idle keep-alive connection stays open.
    pub header_timeout: Duration,
    /// A request body must arrive within this; and a client must keep
    /// taking its answer: a write that waits this long ends the connection.
    pub body_timeout: Duration,
    /// Bytes of large request bodies held in memory at once, across requests.
    pub body_memory: usize,
    /// Member API reads served at once; more wait briefly, then get 503.
    pub max_reads: usize,
    /// How long a read past `max_reads` waits for a turn before its 503.
    pub read_wait: Duration,
    /// Large answers (job lists, a job, log batches) one principal is sent
    /// at once; more wait `read_wait`, then get 429.
    pub max_reads_per_member: usize,
    /// After a shutdown signal, in-flight requests get this long, less
    /// `closing_reserve` for the database; then the process exits whatever
    /// is still open.
    pub shutdown_timeout: Duration,
}

impl Default for ServeLimits {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            body_memory: 64 * 1024 * 1024,
            max_reads: 16,
            read_wait: Duration::from_millis(250),
            max_reads_per_member: 8,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

/// Raises the soft open-files limit to the hard one (or sets it to `want`),
/// and returns the limit now in force.
pub fn set_open_files_limit(want: Option<u64>) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read or write the struct we pass, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        let target = want.map_or(limit.rlim_max, |w| w.min(limit.rlim_max));
        if target != limit.rlim_cur {
            let wanted = libc::rlimit {
                rlim_cur: target,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) == 0 {
                limit.rlim_cur = target;
            } else {
                tracing::warn!(
                    error = %io::Error::last_os_error(),
                    "could not change the open-files limit"
                );
            }
        }
    }
    limit.rlim_cur
}

/// The connection cap that fits under `open_files`, at most `wanted`.
pub fn connection_cap(wanted: usize, open_files: u64) -> usize {
    let reserve = RESERVED_FDS.min(open_files / 2);
    let fits = open_files.saturating_sub(reserve).max(1);
    wanted
        .min(usize::try_from(fits).unwrap_or(usize::MAX))
        .max(1)
}

/// What a connection is served: everything, or (in the connection cap's
/// last tenth) only the runner protocol.
pub struct Routers {
    pub all: Router,
    pub runners_only: Router,
}

/// Serves on `listener` (over TLS when `tls` is given: see `crate::tls`)
/// until `shutdown` resolves. Then: stops accepting,
/// flips `stop` (long-polls answer at once, idle connections close), and
/// waits for open connections up to the shutdown deadline. Returns when the
/// shutdown began.
pub async fn serve(
    listener: TcpListener,
    routers: Routers,
    limits: &ServeLimits,
    tls: Option<Arc<crate::tls::Tls>>,
    shutdown: impl Future<Output = ()>,
    stop: &watch::Sender<bool>,
) -> tokio::time::Instant {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let reserved_for_runners = limits.max_connections / 10;
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    // A reserved slot serves one request, then is free for the next runner.
    let mut one_request = http.clone();
    one_request.keep_alive(false);
    let (http, one_request) = (Arc::new(http), Arc::new(one_request));
    let mut shutdown = pin!(shutdown);
    let mut last_shed_warning: Option<Instant> = None;
    let trimmer = tokio::spawn(crate::trim::run());
    let fresh = Arc::new(FreshConnections::default());
    let evictable_after = EVICTABLE_AFTER.min(limits.header_timeout / 2);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors or memory, or the peer gave up
                    // already: pause rather than spin.
                    tracing::error!(error = %e, "accept error");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        crate::metrics::get().connections.inc();
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            Err(_) => match fresh.evict_oldest(evictable_after) {
                Some((slot, evicted)) => {
                    // Its socket is closed by its own task: wait for that
                    // (a second at most), so that a flood of evictions never
                    // holds two descriptors for one slot.
                    let _ = tokio::time::timeout(Duration::from_secs(1), evicted.closed.notified())
                        .await;
                    Some(slot)
                }
                None => None,
            },
        };
        let Some(slot) = slot else {
            // A TLS client could not read a plain 503: it is just closed.
            if tls.is_none() {
                shed(tcp);
            }
            if last_shed_warning.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                last_shed_warning = Some(Instant::now());
                tracing::warn!(
                    max = limits.max_connections,
                    "too many connections; answering new ones 503"
                );
            }
            continue;
        };
        // No Nagle delay on small responses (a lease, a complete).
        let _ = tcp.set_nodelay(true);
        // Each connection shares the router instead of rebuilding its route
        // table (about 10 KB per idle long-poll).
        let (http, router) = if slots.available_permits() < reserved_for_runners {
            (one_request.clone(), &routers.runners_only)
        } else {
            (http.clone(), &routers.all)
        };
        let me = fresh.add(slot);
        let service = WithPeer {
            inner: TowerToHyperService::new(router.clone()),
            peer,
            fresh: (fresh.clone(), me.clone()),
        };
        let mut stopping = stop.subscribe();
        let write_timeout = limits.body_timeout;
        let (conn_tls, handshake_timeout) = (tls.clone(), limits.header_timeout);
        let fresh = fresh.clone();
        tokio::spawn(async move {
            let accepted = crate::tls::Stream::accept(
                tcp,
                conn_tls.as_deref(),
                handshake_timeout,
                &mut stopping,
            );
            let Some(stream) = accepted.await else {
                me.closed.notify_one();
                fresh.remove(&me);
                drop(me.slot.lock().expect("slot").take());
                crate::trim::released();
                return;
            };
            let io = TokioIo::new(EnvelopedErrors::new(stream, write_timeout));
            // Boxed, so that the socket it owns is closed before `closed`.
            let mut conn = Box::pin(http.serve_connection(io, service));
            let done = tokio::select! {
                r = conn.as_mut() => Some(r),
                _ = stopping.wait_for(|s| *s) => None,
                // Evicted at the cap: its slot went to a new connection.
                _ = me.evicted.notified() => Some(Ok(())),
            };
            let result = match done {
                Some(r) => r,
                // No request yet (perhaps half a head): nothing to finish.
                None if me.close_if_fresh() => Ok(()),
                None => {
                    // Finish the request in flight, if any, then close.
                    conn.as_mut().graceful_shutdown();
                    conn.as_mut().await
                }
            };
            drop(conn);
            me.closed.notify_one();
            if let Err(e) = result {
                // Hyper's own message leaves out the cause (e.g. a stall).
                let mut error = e.to_string();
                let mut cause = std::error::Error::source(&e);
                while let Some(c) = cause {
                    error = format!("{error}: {c}");
                    cause = c.source();
                }
                tracing::debug!(%error, "connection ended with an error");
            }
            fresh.remove(&me);
            drop(me.slot.lock().expect("slot").take());
            crate::trim::released();
        });
    }
    let stopping = tokio::time::Instant::now();
    trimmer.abort();
    drop(listener);
    let _ = stop.send(true);
    let open = limits.max_connections - slots.available_permits();
    if open > 0 {
        tracing::info!(connections = open, "waiting for open connections");
    }
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let wait = limits
        .shutdown_timeout
        .saturating_sub(closing_reserve(limits.shutdown_timeout));
    let closed = tokio::time::timeout(wait, slots.acquire_many(all)).await;
    if closed.is_err() {
        tracing::warn!(
            connections = limits.max_connections - slots.available_permits(),
            "connections still open at the shutdown deadline; closing them"
        );
    }
    stopping
}

/// The part of the shutdown deadline kept for closing the database after
/// the connections: a fifth, at most half a second.
pub fn closing_reserve(shutdown_timeout: Duration) -> Duration {
    (shutdown_timeout / 5).min(Duration::from_millis(500))
}

/// Tells each request of a connection which address it came from, as
/// `ConnectInfo<SocketAddr>` (what `axum::serve` would add).
/// It also marks the connection as served: no longer fresh.
struct WithPeer<S> {
    inner: S,
    peer: SocketAddr,
    fresh: (Arc<FreshConnections>, Arc<Connection>),
}

impl<S, B> hyper::service::Service<hyper::Request<B>> for WithPeer<S>
where
    S: hyper::service::Service<hyper::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut req: hyper::Request<B>) -> Self::Future {
        let (fresh, me) = &self.fresh;
        if me
            .state
            .compare_exchange(FRESH, SERVED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            fresh.remove(me);
        }
        req.extensions_mut().insert(ConnectInfo(self.peer));
        self.inner.call(req)
    }
}

/// Has not yet sent a whole request head.
const FRESH: u8 = 0;
/// Has sent one: it is served to the end, and closes as hyper decides.
const SERVED: u8 = 1;
/// Closed while fresh (evicted, or shutting down).
const CLOSED: u8 = 2;

/// One accepted connection, as the accept loop and its task see it.
struct Connection {
    id: u64,
    opened: Instant,
    state: AtomicU8,
    /// Its place under the cap, until it closes or is evicted.
    slot: Mutex<Option<OwnedSemaphorePermit>>,
    /// Told to close: its slot was given to another connection.
    evicted: Notify,
    /// Its socket is closed.
    closed: Notify,
}

impl Connection {
    /// Closes it if no request head has come yet; whether it did.
    fn close_if_fresh(&self) -> bool {
        self.state
            .compare_exchange(FRESH, CLOSED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// The connections still fresh, oldest first.
#[derive(Default)]
struct FreshConnections {
    next_id: std::sync::atomic::AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Connection>>>,
}

impl FreshConnections {
    fn add(&self, slot: OwnedSemaphorePermit) -> Arc<Connection> {
        let c = Arc::new(Connection {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            opened: Instant::now(),
            state: AtomicU8::new(FRESH),
            slot: Mutex::new(Some(slot)),
            evicted: Notify::new(),
            closed: Notify::new(),
        });
        self.open
            .lock()
            .expect("fresh connections")
            .insert(c.id, c.clone());
        c
    }

    fn remove(&self, c: &Connection) {
        self.open.lock().expect("fresh connections").remove(&c.id);
    }

    /// Closes the oldest connection that has been fresh for `after` and
    /// returns its slot, with the connection (whose task closes its
    /// socket); `None` if there is none.
    fn evict_oldest(&self, after: Duration) -> Option<(OwnedSemaphorePermit, Arc<Connection>)> {
        let mut open = self.open.lock().expect("fresh connections");
        loop {
            let entry = open.first_entry()?;
            if entry.get().opened.elapsed() < after {
                // The others are younger still.
                return None;
            }
            let c = entry.remove();
            // One that has just sent its head is served, not evicted.
            if !c.close_if_fresh() {
                continue;
            }
            let slot = c.slot.lock().expect("slot").take();
            if let Some(slot) = slot {
                c.evicted.notify_one();
                return Some((slot, c));
            }
        }
    }
}

/// Over the connection cap: a 503 if the socket takes it at once, then close.
fn shed(tcp: TcpStream) {
    let body = format!(
        r#"{{"error":{{"code":"OVERLOADED","message":"too many connections; retry after {} s"}}}}"#,
        crate::http::error::RETRY_AFTER_SECONDS
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: {}\r\nconnection: close\r\n\r\n{body}",
        body.len(),
        crate::http::error::RETRY_AFTER_SECONDS
    );
    // Read what the client already sent: closing a socket with unread data
    // resets it, and a reset may discard the answer before it is read.
    let mut sink = [0u8; 4096];
    while matches!(tcp.try_read(&mut sink), Ok(n) if n > 0) {}
    let _ = tcp.try_write(response.as_bytes());
}

/// A connection whose bare error responses get the JSON envelope. Hyper
/// answers a request it cannot parse (a bad `Content-Length`, a path that
/// is not ASCII, headers too large) itself, with an empty body, and then
/// closes the connection; this puts `{"error":{code,message}}` in that body.
///
/// It also ends a connection whose client stops taking its answer: a write
/// that makes no progress for `write_timeout` fails (otherwise a client
/// that never reads would hold its connection, and its answer, forever).
struct EnvelopedErrors {
    inner: crate::tls::Stream,
    /// A rewritten response still to be written, and how much of it was.
    pending: Vec<u8>,
    written: usize,
    write_timeout: Duration,
    /// Running while a write waits for the client to read.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl EnvelopedErrors {
    fn new(inner: crate::tls::Stream, write_timeout: Duration) -> Self {
        Self {
            inner,
            pending: Vec::new(),
            written: 0,
            write_timeout,
            stalled: None,
        }
    }

    /// Passes `r` on, unless the write has waited longer than the timeout.
    fn unless_stalled<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let timeout = self.write_timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if stalled.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped taking its answer",
            )));
        }
        Poll::Pending
    }

    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

/// The enveloped version of hyper's own bodiless error response, if `buf`
/// holds one: `HTTP/1.1 4xx …` with `content-length: 0`. Our handlers never
/// answer an error without a body.
fn envelope_bare_error(buf: &[u8]) -> Option<Vec<u8>> {
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 2;
    let head = std::str::from_utf8(&buf[..head_end]).ok()?;
    let status_line = head.lines().next()?;
    let status: u16 = status_line
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()?;
    if !(400..500).contains(&status) {
        return None;
    }
    let mut lines = head.split("\r\n").filter(|l| !l.is_empty());
    lines.next();
    let headers: Vec<&str> = lines.collect();
    let bare = headers
        .iter()
        .any(|h| h.eq_ignore_ascii_case("content-length: 0"));
    if !bare {
        return None;
    }
    let status = axum::http::StatusCode::from_u16(status).ok()?;
    let message = match status.as_u16() {
        431 => "the request headers are too large",
        414 => "the request path is too long",
        _ => "malformed HTTP request (request line, path or headers)",
    };
    let body = serde_json::to_vec(&drover_wire::ErrorBody {
        error: drover_wire::ErrorDetail {
            code: crate::http::error::code_of(status),
            message: message.into(),
        },
    })
    .ok()?;
    let mut out = Vec::with_capacity(head_end + body.len() + 128);
    out.extend_from_slice(status_line.as_bytes());
    out.extend_from_slice(b"\r\ncontent-type: application/json\r\n");
    out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    for h in headers
        .iter()
        .filter(|h| !h.to_ascii_lowercase().starts_with("content-length:"))
    {
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    out.extend_from_slice(&buf[head_end + 2..]);
    Some(out)
}

impl AsyncRead for EnvelopedErrors {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for EnvelopedErrors {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        if buf.starts_with(b"HTTP/1.1 4")
            && let Some(enveloped) = envelope_bare_error(buf)
        {
            this.pending = enveloped;
            // Taken whole; what is not written yet is written on flush.
            if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.unless_stalled(cx, r)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_errors_get_the_envelope_and_others_pass() {
        let bare = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Mon, 30 Nov 2026 00:00:00 GMT\r\n\r\n";
        let out = String::from_utf8(envelope_bare_error(bare).expect("rewritten")).unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        assert!(head.contains("date: Mon"), "{head}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "BAD_REQUEST");

        let too_large =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let out = String::from_utf8(envelope_bare_error(too_large).unwrap()).unwrap();
        assert!(out.contains("PAYLOAD_TOO_LARGE"), "{out}");

        let with_body = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        assert!(envelope_bare_error(with_body).is_none());
        assert!(
            envelope_bare_error(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").is_none()
        );
    }

    #[test]
    fn the_connection_cap_fits_under_the_open_files_limit() {
        assert_eq!(connection_cap(10_000, 1_048_576), 10_000);
        assert_eq!(connection_cap(10_000, 1024), 1024 - 128);
        assert_eq!(connection_cap(10_000, 100), 50);
    }
}
