//! One connection from its first byte to its close: buffered reads with deadlines, the
//! keep-alive loop (head → handler → response), and closing without losing the response.

use std::cell::Cell;
use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use super::body::Body;
use super::head::{self, Framing};
use super::request::{Handler, Request};
use super::socket::{is_timeout, Conn};
use super::slots::{Phase, Slots};
use super::{HttpError, Limits, Response};

/// How long and how much a closing connection keeps reading (and discarding) of what the
/// client still sends, so that closing does not reset the connection before the client has
/// read our response: a client refused for a body it is still sending (413, 401) reads the
/// refusal once it has sent the body, as the SDKs do. Evictable meanwhile.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 64 * 1024 * 1024;
/// An idle or stalled connection is evicted for a new one only after this long without
/// progress, so a client in the middle of sending is not cut off for a newcomer.
pub const MIN_STALL_TO_EVICT: Duration = Duration::from_millis(200);

/// What a worker needs to serve connections.
pub struct Worker<'a> {
    pub label: &'a str,
    pub slot: usize,
    pub slots: &'a Slots,
    pub limits: &'a Limits,
    pub handler: &'a dyn Handler,
}

/// Serves requests on `conn` until either side closes it.
pub fn serve(conn: &mut Conn, w: &Worker<'_>) {
    let _ = conn.stream.set_write_timeout(Some(w.limits.write_timeout));
    loop {
        match serve_one(conn, w) {
            Next::KeepAlive => continue,
            Next::Close => return,
            Next::Linger => return linger(conn, w),
        }
    }
}

enum Next {
    KeepAlive,
    /// Close now: nothing unread is pending, or the client is gone.
    Close,
    /// Close after draining what the client may still send (unread body, refused head).
    Linger,
}

fn serve_one(conn: &mut Conn, w: &Worker<'_>) -> Next {
    // Idle until the first byte of the next request.
    if !w.slots.enter(w.slot, Phase::Idle) {
        return Next::Close;
    }
    // Only a connection that has had a trusted answer earns the keep-alive wait; until then the
    // first byte must come within the head deadline, so a client that connects and says nothing
    // is closed as soon as one that drips a head would be.
    let wait = if w.slots.is_served(w.slot) { w.limits.idle_timeout } else { w.limits.head_deadline };
    if conn.buffered().is_empty() && !matches!(conn.fill(wait), Ok(n) if n > 0) {
        return Next::Close;
    }
    w.slots.enter(w.slot, Phase::Head);
    let head = match read_head(conn, w) {
        Ok(Some(head)) => head,
        Ok(None) => return Next::Close,
        Err(e) => {
            log::debug!("{}: refused a request head: {e}", w.label);
            return respond(conn, w, &w.handler.error(&e), true, true).lingering_if(true);
        }
    };
    if let Err(e) = w.limits.hosts.check(&head) {
        log::debug!("{}: refused a request for another host: {e}", w.label);
        return respond(conn, w, &w.handler.error(&e), true, true).lingering_if(true);
    }
    if let Framing::Length(n) = head.framing {
        if n > w.limits.max_body_bytes {
            let e = HttpError::new(413, "Content Too Large: the request body exceeds the limit");
            return respond(conn, w, &w.handler.error(&e), true, true).lingering_if(true);
        }
    }
    w.slots.enter(w.slot, Phase::Busy);
    let is_head = head.method == "HEAD";
    let client_close = head.close;
    let fd = conn.stream.as_raw_fd();
    let body = Body::new(
        conn,
        w.slots,
        w.slot,
        head.framing,
        head.expect_continue,
        w.limits.body_stall,
        w.limits.max_body_bytes,
    );
    let mut rq = Request { head, body };
    let _serving = Serving::on(fd);
    let response = match catch_unwind(AssertUnwindSafe(|| w.handler.handle(&mut rq))) {
        Ok(r) => r,
        Err(_) => {
            log::error!("{}: the request handler panicked", w.label);
            w.handler.error(&HttpError::new(500, "Internal Server Error: the request handler failed"))
        }
    };
    let body_done = rq.body.is_done();
    drop(rq);
    // Until a connection has had a trusted answer (a valid token), every answer closes it: a
    // client without a token that pipelines requests and never reads cannot make a worker
    // block writing answers, nor keep a connection it never earned.
    if response.is_served() {
        w.slots.served(w.slot);
    }
    let untrusted = !w.slots.is_served(w.slot);
    if response.is_unanswered() {
        log::debug!("{}: closing the connection without an answer, as the handler asked", w.label);
        return Next::Close;
    }
    respond(conn, w, &response, client_close || response.wants_close() || !body_done || untrusted, !is_head)
        .lingering_if(!body_done)
}

impl Next {
    fn lingering_if(self, unread: bool) -> Next {
        match self {
            Next::Close if unread => Next::Linger,
            other => other,
        }
    }
}

thread_local! {
    /// The socket of the request this worker's handler is running, for [`client_gone`].
    static SERVING: Cell<Option<RawFd>> = const { Cell::new(None) };
}

/// Marks the handler's socket for [`client_gone`] while it runs.
struct Serving;

impl Serving {
    fn on(fd: RawFd) -> Serving {
        SERVING.with(|s| s.set(Some(fd)));
        Serving
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.with(|s| s.set(None));
    }
}

/// Whether the client of the request this thread's handler is answering has closed or reset
/// its connection, so nobody will read the answer. A look at the socket that never blocks or
/// consumes anything; false outside a handler (e.g. a webhook reply's call).
pub fn client_gone() -> bool {
    let Some(fd) = SERVING.with(Cell::get) else { return false };
    let mut byte = 0u8;
    // SAFETY: a one-byte peek into our buffer on the socket the handler's connection owns,
    // which stays open while the handler runs.
    let n = unsafe { libc::recv(fd, (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    match n {
        0 => true,
        n if n > 0 => false,
        _ => !matches!(io::Error::last_os_error().kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted),
    }
}

/// Reads a complete head within the deadline and the size limits. Ok(None) when the client
/// closed before finishing it.
fn read_head(conn: &mut Conn, w: &Worker<'_>) -> Result<Option<head::Head>, HttpError> {
    let deadline = Instant::now() + w.limits.head_deadline;
    loop {
        let buffered = conn.buffered();
        if let Some(end) = head::find_end(buffered) {
            let parsed = head::parse(&buffered[..end], w.limits.max_request_line, w.limits.max_headers);
            conn.consume(end);
            return parsed.map(Some);
        }
        // The request line alone (after any empty lines) may not pass its own limit, and is
        // judged as soon as it is complete: a client that is not speaking HTTP (an SSH
        // banner, binary noise) is refused at once instead of at the head deadline.
        let text = buffered.iter().position(|&b| b != b'\r' && b != b'\n').map_or(&buffered[..0], |i| &buffered[i..]);
        let first_line = text.iter().position(|&b| b == b'\n');
        let line_len = first_line.unwrap_or(text.len());
        if line_len > w.limits.max_request_line + 1 {
            return Err(HttpError::new(414, "URI Too Long: the request line is longer than the limit"));
        }
        let sofar = &text[..line_len];
        let line = sofar.strip_suffix(b"\r").unwrap_or(sofar);
        if line.iter().any(|&b| b < b' ' || b == 0x7f) {
            return Err(HttpError::new(400, "Bad Request: malformed request line"));
        }
        if first_line.is_some() {
            head::check_request_line(line)?;
        }
        if buffered.len() >= w.limits.max_head_bytes {
            return Err(HttpError::new(431, "Request Header Fields Too Large: the header block is too large"));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HttpError::new(408, "Request Timeout: the request head did not arrive in time"));
        }
        // Progress does not renew the head's age (`Slots` keeps when it began): a client that
        // drips its head byte by byte is evictable by its age, not by its last byte.
        match conn.fill(left) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if is_timeout(&e) => {
                return Err(HttpError::new(408, "Request Timeout: the request head did not arrive in time"))
            }
            Err(_) => return Ok(None),
        }
    }
}

/// Writes `response`; what comes next depends on `close` and on whether the write worked.
/// The client must keep taking it (`Paced`): a worker is never held by a client that stopped
/// reading.
fn respond(conn: &mut Conn, w: &Worker<'_>, response: &Response, close: bool, with_body: bool) -> Next {
    w.slots.enter(w.slot, Phase::Write);
    let mut paced = Paced { stream: &mut conn.stream, w, started: Instant::now(), written: 0 };
    let written = response.write_to(&mut paced, close, with_body);
    let _ = conn.stream.set_write_timeout(Some(w.limits.write_timeout));
    w.slots.enter(w.slot, Phase::Busy);
    if let Err(e) = written {
        log::debug!("{}: client went away before the response: {e}", w.label);
        return Next::Close;
    }
    if close {
        Next::Close
    } else {
        Next::KeepAlive
    }
}

/// An answer's bytes must leave at a minimum rate once past a grace period (a total deadline
/// that grows with the size); each write that moves bytes is progress for eviction
/// (`Slots::touch`), so only a client that stopped reading is cut off for a newcomer.
const WRITE_GRACE: Duration = Duration::from_secs(10);
const MIN_WRITE_BYTES_PER_SEC: u64 = 16 * 1024;

struct Paced<'a, 'w> {
    stream: &'a mut std::net::TcpStream,
    w: &'a Worker<'w>,
    started: Instant,
    written: u64,
}

impl Write for Paced<'_, '_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let allowed = WRITE_GRACE + Duration::from_secs(self.written / MIN_WRITE_BYTES_PER_SEC);
        let left = allowed
            .checked_sub(self.started.elapsed())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "the client takes the answer too slowly"))?;
        self.stream.set_write_timeout(Some(left.min(self.w.limits.write_timeout)))?;
        let n = self.stream.write(data)?;
        self.written += n as u64;
        self.w.slots.touch(self.w.slot);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Half-closes, then reads and discards for a short while, so the client reads the response
/// before the connection goes away. Evictable (idle) meanwhile.
fn linger(conn: &mut Conn, w: &Worker<'_>) {
    let _ = conn.stream.flush();
    if conn.stream.shutdown(Shutdown::Write).is_err() || !w.slots.enter(w.slot, Phase::Idle) {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut sink = [0u8; 8192];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        match conn.read_some(&mut sink, left) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}
