//! A connection's socket with a read buffer that survives from one request to the next
//! (pipelining): reads with deadlines, a line at a time or what is there. The keep-alive loop
//! (`conn.rs`) and the body reader (`body.rs`) both read through it.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A socket with a read buffer that survives from one request to the next (pipelining).
pub struct Conn {
    pub(super) stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Conn {
    pub fn new(stream: TcpStream, buf: Vec<u8>) -> Conn {
        Conn { stream, buf, start: 0, end: 0 }
    }

    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    pub(super) fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub(super) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Reads more bytes into the buffer, waiting at most `timeout`. Ok(0) at end of stream or
    /// when the buffer is full.
    pub(super) fn fill(&mut self, timeout: Duration) -> io::Result<usize> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            return Ok(0);
        }
        self.stream.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        let n = retry_interrupted(|| self.stream.read(&mut self.buf[self.end..]))?;
        self.end += n;
        Ok(n)
    }

    /// Reads body bytes: buffered ones first, else straight from the socket.
    pub fn read_some(&mut self, out: &mut [u8], timeout: Duration) -> io::Result<usize> {
        if self.start < self.end {
            let n = out.len().min(self.end - self.start);
            out[..n].copy_from_slice(&self.buf[self.start..self.start + n]);
            self.consume(n);
            return Ok(n);
        }
        self.stream.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        retry_interrupted(|| self.stream.read(out))
    }

    /// One line ending in LF (an optional CR before it is dropped), at most `max` bytes without
    /// its end. None at end of stream; `InvalidData` when longer.
    pub fn read_line(&mut self, max: usize, timeout: Duration) -> io::Result<Option<Vec<u8>>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.buffered().iter().position(|&b| b == b'\n') {
                // CRLF only, and no other CR: a bare LF or a stray CR is how two parsers come
                // to disagree on where a chunk ends.
                let Some(line) = self.buffered()[..i].strip_suffix(b"\r").map(<[u8]>::to_vec) else {
                    return Err(io::ErrorKind::InvalidData.into());
                };
                self.consume(i + 1);
                if line.len() > max || line.contains(&b'\r') {
                    return Err(io::ErrorKind::InvalidData.into());
                }
                return Ok(Some(line));
            }
            if self.buffered().len() > max + 1 {
                return Err(io::ErrorKind::InvalidData.into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            if self.fill(left)? == 0 {
                return Ok(None);
            }
        }
    }

    /// Writes an interim response (100 Continue).
    pub fn write_interim(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }
}

fn retry_interrupted(mut f: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

pub(super) fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}
