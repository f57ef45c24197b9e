//! A complete response: status, header fields and a body held in memory (every answer of the
//! Bot API is a small JSON document).

use std::io::{self, Write};

/// A response to write. `Content-Length` and `Connection` are added when it is written.
#[derive(Debug, Clone)]
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    close: bool,
}

impl Response {
    /// An empty response with `status`.
    pub fn new(status: u16) -> Response {
        Response { status, headers: Vec::new(), body: Vec::new(), close: false }
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
        self
    }

    /// Closes the connection after this response.
    pub fn close(mut self) -> Response {
        self.close = true;
        self
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

    /// Writes the whole response as HTTP/1.1; `with_body` is false for HEAD.
    pub(crate) fn write_to(&self, out: &mut dyn Write, close: bool, with_body: bool) -> io::Result<()> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (n, v) in &self.headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        head.push_str(if close { "Connection: close\r\n\r\n" } else { "Connection: keep-alive\r\n\r\n" });
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
}
