//! Reading one request body, framed by `Content-Length` or chunked, as a [`Read`].
//!
//! The reader never returns a short body as if it were complete: an end of stream before the
//! framing says the body is over, a broken chunk, a stall or a body past the limit is an error,
//! and the first error is kept ([`Body::error`]) so the handler's caller can answer with its
//! status (400, 408, 413) whatever the handler made of the I/O error.
//!
//! `Expect: 100-continue` is answered when the body is first read, so a request refused
//! before its body is needed never makes the client send it.

use std::io::{self, Read};
use std::time::{Duration, Instant};

use super::socket::Conn;
use super::head::Framing;
use super::slots::{Phase, Slots};
use super::HttpError;

/// Longest chunk-size line (with extensions) and largest trailer block.
const MAX_CHUNK_LINE: usize = 4096;
const MAX_TRAILERS: usize = 8192;
/// A body must keep coming at this average rate (after a grace of `body_stall`), so a client
/// trickling bytes costs bounded time.
const MIN_BYTES_PER_SEC: u64 = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes of a `Content-Length` body are left.
    Length(u64),
    /// Before a chunk-size line.
    ChunkSize,
    /// Inside a chunk, this many bytes left.
    ChunkData(u64),
    /// After a chunk's data: its CRLF.
    ChunkEnd,
    /// After the last chunk: trailer fields until an empty line.
    Trailers,
    Done,
}

pub struct Body<'c> {
    conn: &'c mut Conn,
    slots: &'c Slots,
    slot: usize,
    state: State,
    expect_continue: bool,
    stall: Duration,
    max: u64,
    started: Instant,
    read: u64,
    error: Option<HttpError>,
}

impl<'c> Body<'c> {
    pub fn new(
        conn: &'c mut Conn,
        slots: &'c Slots,
        slot: usize,
        framing: Framing,
        expect_continue: bool,
        stall: Duration,
        max: u64,
    ) -> Body<'c> {
        let state = match framing {
            Framing::Empty => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::ChunkSize,
        };
        Body { conn, slots, slot, state, expect_continue, stall, max, started: Instant::now(), read: 0, error: None }
    }

    /// The body was read to its end (or there was none).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Why reading the body failed, if it did.
    pub fn error(&self) -> Option<&HttpError> {
        self.error.as_ref()
    }

    fn next(&mut self, out: &mut [u8]) -> Result<usize, HttpError> {
        if self.expect_continue {
            self.expect_continue = false;
            self.conn.write_interim(b"HTTP/1.1 100 Continue\r\n\r\n").map_err(|e| read_error(&e))?;
        }
        loop {
            match self.state {
                State::Done => return Ok(0),
                State::Length(left) => {
                    let n = self.data(out, left)?;
                    self.state = if n as u64 == left { State::Done } else { State::Length(left - n as u64) };
                    return Ok(n);
                }
                State::ChunkData(left) => {
                    let n = self.data(out, left)?;
                    self.state = if n as u64 == left { State::ChunkEnd } else { State::ChunkData(left - n as u64) };
                    return Ok(n);
                }
                State::ChunkSize => {
                    let line = self.line(MAX_CHUNK_LINE)?;
                    let size = parse_chunk_size(&line)?;
                    if self.read.saturating_add(size) > self.max {
                        return Err(too_large());
                    }
                    self.state = if size == 0 { State::Trailers } else { State::ChunkData(size) };
                }
                State::ChunkEnd => {
                    if !self.line(2)?.is_empty() {
                        return Err(HttpError::new(400, "Bad Request: a chunk is longer than its size"));
                    }
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let mut total = 0;
                    loop {
                        let line = self.line(MAX_TRAILERS)?;
                        total += line.len() + 2;
                        if total > MAX_TRAILERS {
                            return Err(HttpError::new(431, "Request Header Fields Too Large: trailers too large"));
                        }
                        if line.is_empty() {
                            break;
                        }
                    }
                    self.state = State::Done;
                    return Ok(0);
                }
            }
        }
    }

    /// Reads up to `left` body bytes; an end of stream here means the body was cut off.
    fn data(&mut self, out: &mut [u8], left: u64) -> Result<usize, HttpError> {
        let want = out.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let timeout = self.timeout()?;
        let n = self.conn.read_some(&mut out[..want], timeout).map_err(|e| read_error(&e))?;
        if n == 0 {
            return Err(HttpError::new(400, "Bad Request: the request body ended before it was complete"));
        }
        self.read += n as u64;
        self.slots.touch(self.slot);
        Ok(n)
    }

    /// Reads one framing line (without its line end) of at most `max` bytes.
    fn line(&mut self, max: usize) -> Result<Vec<u8>, HttpError> {
        let timeout = self.timeout()?;
        match self.conn.read_line(max, timeout) {
            Ok(Some(line)) => {
                self.slots.touch(self.slot);
                Ok(line)
            }
            Ok(None) => Err(HttpError::new(400, "Bad Request: the request body ended before it was complete")),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                Err(HttpError::new(400, "Bad Request: malformed chunked encoding"))
            }
            Err(e) => Err(read_error(&e)),
        }
    }

    /// How long the next read may wait: the stall bound, and no later than the minimum rate
    /// allows for what has been read so far.
    fn timeout(&self) -> Result<Duration, HttpError> {
        let allowed = self.stall + Duration::from_secs(self.read / MIN_BYTES_PER_SEC);
        let left = allowed.checked_sub(self.started.elapsed()).filter(|d| !d.is_zero()).ok_or_else(timed_out)?;
        Ok(left.min(self.stall))
    }
}

impl Read for Body<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if let Some(e) = &self.error {
            return Err(io::Error::other(e.description.clone()));
        }
        if out.is_empty() {
            return Ok(0);
        }
        self.slots.enter(self.slot, Phase::Body);
        let r = self.next(out);
        self.slots.enter(self.slot, Phase::Busy);
        r.map_err(|e| {
            let io = io::Error::other(e.description.clone());
            self.error = Some(e);
            io
        })
    }
}

fn parse_chunk_size(line: &[u8]) -> Result<u64, HttpError> {
    let bad = || HttpError::new(400, "Bad Request: malformed chunked encoding");
    // Exactly the hex digits, no whitespace around them (RFC 9112 allows some before a `;`;
    // we do not, so no two readings of a size are possible).
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(if digits.len() > 15 && digits.iter().all(u8::is_ascii_hexdigit) { too_large() } else { bad() });
    }
    u64::from_str_radix(std::str::from_utf8(digits).map_err(|_| bad())?, 16).map_err(|_| bad())
}

fn too_large() -> HttpError {
    HttpError::new(413, "Content Too Large: the request body exceeds the limit")
}

fn timed_out() -> HttpError {
    HttpError::new(408, "Request Timeout: the request body stalled")
}

fn read_error(e: &io::Error) -> HttpError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => timed_out(),
        _ => HttpError::new(400, format!("Bad Request: can't read the request body: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes() {
        assert_eq!(parse_chunk_size(b"1a"), Ok(26));
        assert_eq!(parse_chunk_size(b"0"), Ok(0));
        assert_eq!(parse_chunk_size(b"10;ext=1"), Ok(16));
        assert_eq!(parse_chunk_size(b"ffffffffffffffff").map_err(|e| e.status), Err(413));
        for bad in [&b""[..], b"x", b"-1", b"0x10", b"1 2", b" 1a", b"1a ", b"1a\t", b"10 ;ext=1"] {
            assert_eq!(parse_chunk_size(bad).map_err(|e| e.status), Err(400), "{bad:?}");
        }
    }
}
