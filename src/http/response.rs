//! A complete response: status, header fields and a body, either held in memory (every answer
//! of the Bot API is a small JSON document) or streamed by a writer of a known length (a file
//! download: 50 MiB is never held in memory).

use std::fmt;
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// Writes a streamed body into the connection; it must write exactly the announced length.
pub type BodyWriter = Box<dyn FnOnce(&mut dyn Write) -> io::Result<()> + Send>;

/// A body produced while the response is written. Shared so that `Response` stays `Clone`; the
/// writer runs once, at the first write.
#[derive(Clone)]
struct Streamed {
    len: u64,
    writer: Arc<Mutex<Option<BodyWriter>>>,
}

impl fmt::Debug for Streamed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streamed").field("len", &self.len).finish()
    }
}

/// A response to write. `Content-Length` and `Connection` are added when it is written.
#[derive(Debug, Clone)]
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    streamed: Option<Streamed>,
    close: bool,
    /// Nothing is written: the connection is closed without an answer.
    unanswered: bool,
    /// The handler trusts the client (say, a valid token): its connection is then protected
    /// from eviction by clients that never got such an answer (`Slots::evict_stalest`).
    served: bool,
}

/// Counts what a streamed body wrote, to check it against its Content-Length.
struct Counting<'a> {
    inner: &'a mut dyn Write,
    written: u64,
}

impl Write for Counting<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(data)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl Response {
    /// An empty response with `status`.
    pub fn new(status: u16) -> Response {
        Response { status, headers: Vec::new(), body: Vec::new(), streamed: None, close: false, unanswered: false, served: false }
    }

    /// No answer at all: the connection is closed without a status line, for a handler that
    /// cannot tell the truth yet and must not guess (the client sees the connection end, which
    /// every client treats as "outcome unknown").
    pub fn unanswered() -> Response {
        Response { unanswered: true, close: true, ..Response::new(0) }
    }

    /// Whether this is [`Response::unanswered`].
    pub fn is_unanswered(&self) -> bool {
        self.unanswered
    }

    /// A response whose body of `len` bytes is written by `writer` straight into the
    /// connection. A writer that fails or writes another length closes the connection, so the
    /// client sees a cut-off body, never a short one that looks complete.
    pub fn streamed(status: u16, content_type: &str, len: u64, writer: BodyWriter) -> Response {
        let mut r = Response::new(status).with_header("Content-Type", content_type);
        r.streamed = Some(Streamed { len, writer: Arc::new(Mutex::new(Some(writer))) });
        r
    }

    /// A response with a body of the given media type.
    pub fn with_body(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response::new(status).with_header("Content-Type", content_type).body(body)
    }

    /// Adds a header field. Control characters (CR, LF, ...) are dropped from both parts, so a
    /// value can never split the response.
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        let clean = |s: &str| s.chars().filter(|c| !c.is_control()).collect::<String>();
        self.headers.push((clean(name), clean(value)));
        self
    }

    /// Replaces the body.
    pub fn body(mut self, body: Vec<u8>) -> Response {
        self.body = body;
        self.streamed = None;
        self
    }

    /// Closes the connection after this response.
    pub fn close(mut self) -> Response {
        self.close = true;
        self
    }

    /// Marks the answer as one to a client the handler trusts (a valid token): only such
    /// answers make a connection "served", and so protected from eviction.
    pub fn served(mut self) -> Response {
        self.served = true;
        self
    }

    pub(crate) fn is_served(&self) -> bool {
        self.served
    }

    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn body_bytes(&self) -> &[u8] {
        &self.body
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub(crate) fn wants_close(&self) -> bool {
        self.close
    }

    /// Whether the body is streamed (it is not in [`Response::body_bytes`]).
    pub fn is_streamed(&self) -> bool {
        self.streamed.is_some()
    }

    /// Writes the whole response as HTTP/1.1; `with_body` is false for HEAD.
    pub(crate) fn write_to(&self, out: &mut dyn Write, close: bool, with_body: bool) -> io::Result<()> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (n, v) in &self.headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        let len = self.streamed.as_ref().map_or(self.body.len() as u64, |s| s.len);
        head.push_str(&format!("Content-Length: {len}\r\n"));
        head.push_str(if close { "Connection: close\r\n\r\n" } else { "Connection: keep-alive\r\n\r\n" });
        if let Some(streamed) = &self.streamed {
            out.write_all(head.as_bytes())?;
            if with_body {
                let writer = streamed.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
                let writer = writer.ok_or_else(|| io::Error::other("a streamed body can be written once"))?;
                let mut counting = Counting { inner: out, written: 0 };
                writer(&mut counting)?;
                if counting.written != len {
                    return Err(io::Error::other(format!("streamed body wrote {} of {len} bytes", counting.written)));
                }
            }
            return out.flush();
        }
        let mut bytes = head.into_bytes();
        if with_body {
            bytes.extend_from_slice(&self.body);
        }
        out.write_all(&bytes)?;
        out.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_length_and_connection_and_strips_control_characters() {
        let r = Response::with_body(200, "application/json", b"{}".to_vec()).with_header("X-A", "b\r\nSet-Cookie: x");
        let mut out = Vec::new();
        r.write_to(&mut out, true, true).expect("write");
        assert_eq!(
            String::from_utf8(out).expect("ascii"),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-A: bSet-Cookie: x\r\nContent-Length: 2\r\n\
             Connection: close\r\n\r\n{}"
        );
        let mut out = Vec::new();
        r.write_to(&mut out, false, false).expect("write");
        let text = String::from_utf8(out).expect("ascii");
        assert!(text.ends_with("Content-Length: 2\r\nConnection: keep-alive\r\n\r\n"), "{text}");
    }

    #[test]
    fn streamed_bodies_are_written_once_with_their_length_and_checked() {
        let r = Response::streamed(200, "text/plain", 5, Box::new(|out: &mut dyn Write| out.write_all(b"hello")));
        let mut out = Vec::new();
        r.write_to(&mut out, false, true).expect("write");
        let text = String::from_utf8(out).expect("ascii");
        assert!(text.contains("Content-Length: 5\r\n") && text.ends_with("\r\n\r\nhello"), "{text}");
        assert!(r.write_to(&mut Vec::new(), false, true).is_err(), "the writer ran already");
        let short = Response::streamed(200, "text/plain", 9, Box::new(|out: &mut dyn Write| out.write_all(b"hello")));
        assert!(short.write_to(&mut Vec::new(), false, true).is_err(), "a short body is an error");
        let head_only = Response::streamed(200, "text/plain", 9, Box::new(|_: &mut dyn Write| panic!("HEAD writes no body")));
        head_only.write_to(&mut Vec::new(), false, false).expect("HEAD");
    }
}
