//! Parsing one request head (request line and header fields, RFC 9112 §2–§6) from bytes that
//! are already complete, and deciding how its body is framed.
//!
//! Strict where leniency enables request smuggling: whitespace before a header's colon, folded
//! header lines, `Content-Length` together with `Transfer-Encoding`, conflicting lengths and any
//! transfer coding but `chunked` are refused. Lenient where it is harmless: a bare LF ends a
//! line, and empty lines before the request line are skipped.

use super::HttpError;

/// HTTP/1.0 or HTTP/1.1; any other version is refused with 505.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
}

/// How the body of a request is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (no `Content-Length`, no `Transfer-Encoding`, or `Content-Length: 0`).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head.
#[derive(Debug, Clone)]
pub struct Head {
    pub method: String,
    /// The request target as sent (origin form: path and query).
    pub target: String,
    pub version: Version,
    /// Field names as sent; look them up with [`Head::header`].
    pub headers: Vec<(String, String)>,
    pub framing: Framing,
    /// The client sent `Expect: 100-continue`.
    pub expect_continue: bool,
    /// The client asked to close after this request (`Connection: close`, or HTTP/1.0 without
    /// `keep-alive`).
    pub close: bool,
}

impl Head {
    /// The first field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Where the head ends in `buf`: the index just past the empty line, if there is one yet.
/// Leading empty lines are part of the head (and skipped by [`parse`]).
pub fn find_end(buf: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    let mut seen_request_line = false;
    for (i, &b) in buf.iter().enumerate() {
        if b != b'\n' {
            continue;
        }
        let line = &buf[line_start..i];
        let empty = line.is_empty() || line == b"\r";
        if empty && seen_request_line {
            return Some(i + 1);
        }
        seen_request_line |= !empty;
        line_start = i + 1;
    }
    None
}

/// Parses a complete head (as delimited by [`find_end`]) within the given counts.
pub fn parse(raw: &[u8], max_request_line: usize, max_headers: usize) -> Result<Head, HttpError> {
    let mut lines = raw
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .skip_while(|l| l.is_empty());
    let request_line = lines.next().unwrap_or_default();
    if request_line.len() > max_request_line {
        return Err(HttpError::new(414, "URI Too Long: the request line is longer than the limit"));
    }
    let (method, target, version) = parse_request_line(request_line)?;

    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            break;
        }
        if headers.len() == max_headers {
            return Err(HttpError::new(431, "Request Header Fields Too Large: too many header fields"));
        }
        headers.push(parse_field(line)?);
    }
    let mut head = Head {
        method,
        target,
        version,
        headers,
        framing: Framing::Empty,
        expect_continue: false,
        close: false,
    };
    head.framing = framing(&head)?;
    head.close = wants_close(&head);
    head.expect_continue = match head.header("Expect") {
        None => false,
        Some(v) if v.trim().eq_ignore_ascii_case("100-continue") => true,
        Some(_) => return Err(HttpError::new(417, "Expectation Failed: only 100-continue is supported")),
    };
    Ok(head)
}

/// Refuses a request line that can never be valid, before the rest of the head arrives.
pub fn check_request_line(line: &[u8]) -> Result<(), HttpError> {
    parse_request_line(line).map(|_| ())
}

fn parse_request_line(line: &[u8]) -> Result<(String, String, Version), HttpError> {
    let bad = || HttpError::new(400, "Bad Request: malformed request line");
    let text = std::str::from_utf8(line).map_err(|_| bad())?;
    let mut parts = text.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if method.is_empty() || !method.bytes().all(is_token_byte) {
        return Err(bad());
    }
    let version = match version {
        "HTTP/1.1" => Version::Http11,
        "HTTP/1.0" => Version::Http10,
        v if v.starts_with("HTTP/") => {
            return Err(HttpError::new(505, "HTTP Version Not Supported: use HTTP/1.1"));
        }
        _ => return Err(bad()),
    };
    // Origin form only ("/path?query"), or "*" for OPTIONS; no control bytes or spaces.
    let target_ok = (target.starts_with('/') || target == "*") && target.bytes().all(|b| b > b' ' && b != 0x7f);
    if !target_ok {
        return Err(bad());
    }
    Ok((method.to_string(), target.to_string(), version))
}

fn parse_field(line: &[u8]) -> Result<(String, String), HttpError> {
    let bad = |what: &str| HttpError::new(400, format!("Bad Request: malformed header field: {what}"));
    if line[0] == b' ' || line[0] == b'\t' {
        return Err(bad("folded header lines are not accepted"));
    }
    let colon = line.iter().position(|&b| b == b':').ok_or_else(|| bad("no colon"))?;
    let name = &line[..colon];
    if name.is_empty() || !name.iter().copied().all(is_token_byte) {
        return Err(bad("invalid field name"));
    }
    let value = line[colon + 1..].trim_ascii();
    if value.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
        return Err(bad("control character in a field value"));
    }
    // Field names are tokens (ASCII); values are opaque octets, kept as lossy UTF-8.
    Ok((String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(value).into_owned()))
}

/// tchar of RFC 9110 §5.6.2.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn framing(head: &Head) -> Result<Framing, HttpError> {
    let transfer: Vec<&str> = head.all("Transfer-Encoding").collect();
    let lengths: Vec<&str> = head.all("Content-Length").flat_map(|v| v.split(',')).map(str::trim).collect();
    if !transfer.is_empty() {
        if !lengths.is_empty() {
            return Err(HttpError::new(400, "Bad Request: both Content-Length and Transfer-Encoding were sent"));
        }
        if head.version == Version::Http10 {
            return Err(HttpError::new(400, "Bad Request: Transfer-Encoding is not allowed in HTTP/1.0"));
        }
        let codings: Vec<&str> = transfer.iter().flat_map(|v| v.split(',')).map(str::trim).collect();
        return match codings.as_slice() {
            [only] if only.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
            _ => Err(HttpError::new(
                501,
                format!("Not Implemented: transfer coding {:?} is not supported; send chunked", transfer.join(", ")),
            )),
        };
    }
    let Some(first) = lengths.first() else {
        return Ok(Framing::Empty);
    };
    if lengths.iter().any(|l| l != first) {
        return Err(HttpError::new(400, "Bad Request: conflicting Content-Length values"));
    }
    // Digits only: no sign, no spaces. A value past u64 is as "too large" as u64::MAX (413
    // later), never a wrapped or truncated number.
    if first.is_empty() || first.len() > 64 || !first.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HttpError::new(400, "Bad Request: Content-Length is not a valid length"));
    }
    match first.parse::<u64>().unwrap_or(u64::MAX) {
        0 => Ok(Framing::Empty),
        n => Ok(Framing::Length(n)),
    }
}

fn wants_close(head: &Head) -> bool {
    let tokens = || head.all("Connection").flat_map(|v| v.split(',')).map(str::trim);
    match head.version {
        Version::Http11 => tokens().any(|t| t.eq_ignore_ascii_case("close")),
        Version::Http10 => !tokens().any(|t| t.eq_ignore_ascii_case("keep-alive")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Result<Head, HttpError> {
        let end = find_end(raw.as_bytes()).expect("complete head");
        parse(&raw.as_bytes()[..end], 8192, 100)
    }

    fn status(raw: &str) -> u16 {
        head(raw).expect_err("expected an error").status
    }

    #[test]
    fn finds_the_end_with_crlf_or_bare_lf() {
        assert_eq!(find_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest"), Some(27));
        assert_eq!(find_end(b"GET / HTTP/1.1\nHost: x\n\nrest"), Some(24));
        assert_eq!(find_end(b"\r\n\r\nGET / HTTP/1.1\r\n\r\n"), Some(22));
        assert_eq!(find_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(find_end(b"\r\n\r\n"), None);
    }

    #[test]
    fn parses_a_request() {
        let h = head("POST /bot1:x/sendMessage?a=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\n")
            .expect("valid");
        assert_eq!((h.method.as_str(), h.target.as_str()), ("POST", "/bot1:x/sendMessage?a=1"));
        assert_eq!((h.version, h.framing, h.close), (Version::Http11, Framing::Length(12), false));
        assert_eq!(h.header("content-length"), Some("12"));
        let h = head("GET / HTTP/1.0\n\n").expect("bare LF, HTTP/1.0");
        assert!(h.close);
        let h = head("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\nConnection: close\r\n\r\n")
            .expect("chunked");
        assert_eq!((h.framing, h.expect_continue, h.close), (Framing::Chunked, true, true));
        // The same length twice is one length.
        assert_eq!(head("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n").expect("same").framing, Framing::Length(5));
    }

    #[test]
    fn refuses_other_versions_with_505() {
        for v in ["HTTP/2.0", "HTTP/3.0", "HTTP/0.9", "HTTP/1.2"] {
            assert_eq!(status(&format!("GET / {v}\r\n\r\n")), 505, "{v}");
        }
        assert_eq!(status("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505);
    }

    #[test]
    fn refuses_malformed_heads_with_400() {
        for raw in [
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET http://x/ HTTP/1.1\r\n\r\n",
            "G@T / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
            "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nA: b\x01c\r\n\r\n",
            "GET /\x7f HTTP/1.1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert_eq!(status(raw), 400, "{raw:?}");
        }
    }

    #[test]
    fn other_refusals() {
        assert_eq!(status("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
        assert_eq!(status("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
        assert_eq!(status("POST / HTTP/1.1\r\nExpect: magic\r\n\r\n"), 417);
        let many: String = (0..101).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(status(&format!("GET / HTTP/1.1\r\n{many}\r\n")), 431);
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(9000));
        assert_eq!(status(&long), 414);
    }

    #[test]
    fn harmless_headers_are_accepted() {
        // `TE`, `Upgrade` and `Connection: Upgrade` are read and ignored.
        let h = head("GET / HTTP/1.1\r\nTE: gzip\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n").expect("valid");
        assert_eq!((h.framing, h.close), (Framing::Empty, false));
        assert_eq!(head("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").expect("zero").framing, Framing::Empty);
        // Past u64: saturates, so the caller refuses it as too large.
        let huge = head("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n").expect("huge");
        assert_eq!(huge.framing, Framing::Length(u64::MAX));
    }
}
