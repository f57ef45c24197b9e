//! A streaming `multipart/form-data` parser (RFC 7578) for Bot API calls.
//!
//! Reads the body incrementally, so a chunked upload without Content-Length (aiogram, telegraf;
//! SDK-COMPAT §0.1) works the same as one with it, and never buffers more than one part plus a
//! small look-ahead. A part with a `filename` in its Content-Disposition is a file (kept aside by
//! part name); any other part is a text parameter (its own Content-Type, e.g. aiogram's
//! `text/plain; charset="utf-8"`, is ignored). Everything read counts against a byte limit.
//!
//! With a [`FileIntake`] (a Bot API call: the bot), a file part is never held in memory nor
//! written to disk: the intake encrypts it under a fresh key (`crypto::file`) as it is read and
//! streams the ciphertext to the platform, which stores it once a method uses the part
//! (`StreamedFile`). Without one (webhook replies, which are small), a file part is kept in
//! memory.

use std::io::{self, Read};
use std::sync::Arc;

use crate::crypto::file::FileCryptoError;
use crate::e2e::file::FileError;
use crate::gateway::botapi::params::{Params, StreamedFile, UploadedFile};

/// Takes the file parts of a Bot API call as the body is read (the bot: it encrypts each one
/// and streams it to the platform).
pub trait FileIntake {
    /// Consumes `part` (the part's bytes up to its closing delimiter) and returns the file.
    fn take(&self, part: &mut dyn Read) -> Result<StreamedFile, FileError>;
}

/// Most parts accepted in one body (a media group of 10 with thumbnails stays far below).
pub const MAX_PARTS: usize = 1000;
/// Largest header block of one part.
pub const MAX_PART_HEADER_BYTES: usize = 16 * 1024;
/// Longest boundary accepted (RFC 2046 allows 70; be lenient).
const MAX_BOUNDARY_LEN: usize = 200;
/// Bytes asked of the body per read (a 50 MiB file part arrives in few system calls).
const READ_CHUNK: usize = 256 * 1024;

#[derive(Debug)]
pub enum MultipartError {
    /// More than the byte limit was read.
    TooLarge,
    /// The text parts together are larger than their limit.
    TextTooLarge,
    /// A file part is over `crypto::file::MAX_PLAINTEXT_LEN` (50 MiB).
    FileTooLarge,
    /// A file part could not be encrypted or streamed to the platform.
    Upload(FileError),
    /// The body does not follow the multipart syntax; says where.
    Malformed(String),
    /// Reading the body failed (client went away, broken chunked encoding).
    Io(io::Error),
}

/// The `boundary` parameter of a `multipart/form-data` Content-Type, unquoted.
pub fn boundary_from_content_type(content_type: &str) -> Option<String> {
    let mut parts = content_type.split(';');
    parts.next()?;
    for p in parts {
        let (k, v) = match p.split_once('=') {
            Some(kv) => kv,
            None => continue,
        };
        if k.trim().eq_ignore_ascii_case("boundary") {
            let v = v.trim();
            let v = v.strip_prefix('"').and_then(|x| x.strip_suffix('"')).unwrap_or(v);
            if v.is_empty() || v.len() > MAX_BOUNDARY_LEN {
                return None;
            }
            return Some(v.to_string());
        }
    }
    None
}

/// Parses a whole multipart body into `params`: text parts with [`Params::insert_text`], file
/// parts with [`Params::insert_file`] (handed to `intake` when given). Reads `body` to its
/// end (the epilogue is discarded) and fails with `TooLarge` once more than `limit` bytes were
/// read, or more than `text_limit` bytes of text parts.
pub fn parse(
    body: &mut dyn Read,
    boundary: &str,
    limit: usize,
    text_limit: usize,
    intake: Option<&dyn FileIntake>,
    params: &mut Params,
) -> Result<(), MultipartError> {
    if boundary.is_empty() || boundary.len() > MAX_BOUNDARY_LEN {
        return Err(MultipartError::Malformed("the boundary is empty or too long".into()));
    }
    // Every delimiter, including the first, is CRLF "--" boundary; the stream starts with a
    // virtual CRLF so the opening delimiter at offset 0 is found the same way.
    let delimiter = format!("\r\n--{boundary}").into_bytes();
    let mut s = Stream { inner: body, buf: b"\r\n".to_vec(), pos: 0, end: 2, eof: false, total: 0, limit, failure: None };

    // Preamble: discard everything up to the first delimiter.
    if !s.skip_past(&delimiter)? {
        return Err(MultipartError::Malformed("no opening boundary".into()));
    }
    let mut parts = 0usize;
    let mut text_bytes = 0usize;
    loop {
        // After a delimiter: "--" closes the body, otherwise optional padding and CRLF.
        s.ensure(2)?;
        if s.rest().starts_with(b"--") {
            s.drain_to_end()?;
            return Ok(());
        }
        while s.ensure(1)? && matches!(s.rest()[0], b' ' | b'\t') {
            s.pos += 1;
        }
        s.ensure(2)?;
        if s.rest().starts_with(b"\r\n") {
            s.pos += 2;
        } else if s.rest().starts_with(b"\n") {
            s.pos += 1;
        } else if s.rest().is_empty() {
            return Err(MultipartError::Malformed("the body ends without the closing boundary".into()));
        } else {
            return Err(MultipartError::Malformed("garbage after a boundary line".into()));
        }
        parts += 1;
        if parts > MAX_PARTS {
            return Err(MultipartError::Malformed(format!("more than {MAX_PARTS} parts")));
        }
        let headers = s.read_headers()?;
        let part = PartHeaders::parse(&headers)?;
        if let (Some(intake), Some(name), Some(filename)) = (intake, &part.name, &part.filename) {
            let streamed = stream_part(&mut s, &delimiter, intake)?;
            let file = UploadedFile {
                filename: filename.clone(),
                content_type: part.content_type,
                bytes: Vec::new(),
                streamed: Some(Arc::new(streamed)),
            };
            params.insert_file(name, file);
            continue;
        }
        let ended = || MultipartError::Malformed("the body ends inside a part (no closing boundary)".into());
        let Some(name) = part.name else {
            // A part without a name cannot be a parameter: skipped like an unknown parameter,
            // and never held in memory.
            if !s.skip_past(&delimiter)? {
                return Err(ended());
            }
            continue;
        };
        // A text part counts against the text budget while it arrives: one over it is refused
        // at that byte, not once it is all in memory.
        let mut data = Capped { bytes: Vec::new(), cap: if part.filename.is_some() { usize::MAX } else { text_limit - text_bytes } };
        if !s.consume_until(&delimiter, &mut data)? {
            return Err(ended());
        }
        let data = data.bytes;
        match part.filename {
            Some(filename) => {
                let file = UploadedFile { filename, content_type: part.content_type, bytes: data, streamed: None };
                params.insert_file(&name, file);
            }
            None => {
                text_bytes += data.len();
                let text = String::from_utf8(data)
                    .map_err(|_| MultipartError::Malformed(format!("field {name:?} is not valid UTF-8")))?;
                params.insert_text(&name, text);
            }
        }
    }
}

/// Hands one file part, up to its closing delimiter, to `intake`. A part the body cuts off is
/// malformed, not a shorter file (its pending upload is dropped, so the platform keeps nothing).
fn stream_part(s: &mut Stream<'_>, delimiter: &[u8], intake: &dyn FileIntake) -> Result<StreamedFile, MultipartError> {
    let mut part = PartReader { s, delimiter, done: false, ended_early: false };
    let taken = intake.take(&mut part);
    let (ended_early, failure) = (part.ended_early, part.failure());
    match taken {
        Err(FileError::Crypto(FileCryptoError::TooLarge)) => Err(MultipartError::FileTooLarge),
        // The body's own failure (too large, cut off) says more than the upload's.
        Err(_) if failure.is_some() => Err(failure.expect("checked")),
        Err(e) => Err(MultipartError::Upload(e)),
        Ok(_) if ended_early => {
            Err(MultipartError::Malformed("the body ends inside a part (no closing boundary)".into()))
        }
        Ok(streamed) => Ok(streamed),
    }
}

/// The bytes of the current part, up to (and consuming) the delimiter, as a `Read`.
struct PartReader<'a, 'b> {
    s: &'a mut Stream<'b>,
    delimiter: &'a [u8],
    done: bool,
    /// The body ended before the delimiter.
    ended_early: bool,
}

impl PartReader<'_, '_> {
    /// What went wrong reading the body, if anything did (kept for a better error).
    fn failure(&mut self) -> Option<MultipartError> {
        self.s.failure.take()
    }
}

impl Read for PartReader<'_, '_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.done || out.is_empty() {
                return Ok(0);
            }
            let rest = self.s.rest();
            if let Some(i) = find(rest, self.delimiter) {
                if i == 0 {
                    self.s.pos += self.delimiter.len();
                    self.done = true;
                    return Ok(0);
                }
                let n = i.min(out.len());
                out[..n].copy_from_slice(&rest[..n]);
                self.s.pos += n;
                return Ok(n);
            }
            // Keep a tail that could be the start of a delimiter split across reads.
            let keep = self.delimiter.len() - 1;
            if rest.len() > keep {
                let n = (rest.len() - keep).min(out.len());
                out[..n].copy_from_slice(&rest[..n]);
                self.s.pos += n;
                return Ok(n);
            }
            match self.s.fill() {
                Ok(true) => {}
                Ok(false) => {
                    self.ended_early = true;
                    self.done = true;
                    return Ok(0);
                }
                Err(e) => {
                    self.s.failure = Some(e);
                    return Err(io::Error::other("the request body could not be read"));
                }
            }
        }
    }
}

/// A byte stream with look-ahead over the request body.
struct Stream<'a> {
    inner: &'a mut dyn Read,
    /// Read bytes in `buf[..end]`; the rest is room for the next read (zeroed once, when the
    /// buffer grows, not at every read of a 50 MiB body).
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    end: usize,
    eof: bool,
    /// Bytes read from `inner` so far.
    total: usize,
    limit: usize,
    /// Why reading failed while a file part was being encrypted.
    failure: Option<MultipartError>,
}

impl Stream<'_> {
    fn rest(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Reads more bytes; false at the end of the body.
    fn fill(&mut self) -> Result<bool, MultipartError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() < self.end + READ_CHUNK {
            self.buf.resize(self.end + READ_CHUNK, 0);
        }
        let n = loop {
            match self.inner.read(&mut self.buf[self.end..self.end + READ_CHUNK]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(MultipartError::Io(e)),
            }
        };
        self.end += n;
        if n == 0 {
            self.eof = true;
            return Ok(false);
        }
        self.total += n;
        if self.total > self.limit {
            return Err(MultipartError::TooLarge);
        }
        Ok(true)
    }

    /// Makes at least `n` unconsumed bytes available if the body has them; true if it did.
    fn ensure(&mut self, n: usize) -> Result<bool, MultipartError> {
        while self.rest().len() < n {
            if !self.fill()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Consumes bytes up to and including `needle`; false if the body ended first.
    fn skip_past(&mut self, needle: &[u8]) -> Result<bool, MultipartError> {
        let mut sink = Sink;
        self.consume_until(needle, &mut sink)
    }

    fn consume_until(&mut self, needle: &[u8], out: &mut dyn Collect) -> Result<bool, MultipartError> {
        loop {
            if let Some(i) = find(self.rest(), needle) {
                out.collect(&self.buf[self.pos..self.pos + i])?;
                self.pos += i + needle.len();
                return Ok(true);
            }
            // Keep a tail that could be the start of a needle split across reads.
            let keep = needle.len() - 1;
            let avail = self.rest().len();
            if avail > keep {
                let take = avail - keep;
                out.collect(&self.buf[self.pos..self.pos + take])?;
                self.pos += take;
            }
            if !self.fill()? {
                return Ok(false);
            }
        }
    }

    /// Reads a part's header block up to the blank line; returns it without the blank line.
    fn read_headers(&mut self) -> Result<Vec<u8>, MultipartError> {
        loop {
            let rest = self.rest();
            // No headers at all: the blank line comes first.
            if rest.starts_with(b"\r\n") {
                self.pos += 2;
                return Ok(Vec::new());
            }
            if let Some(i) = find(rest, b"\r\n\r\n") {
                let headers = rest[..i].to_vec();
                self.pos += i + 4;
                return Ok(headers);
            }
            if rest.len() > MAX_PART_HEADER_BYTES {
                return Err(MultipartError::Malformed(format!(
                    "part headers longer than {MAX_PART_HEADER_BYTES} bytes"
                )));
            }
            if !self.fill()? {
                return Err(MultipartError::Malformed("the body ends inside part headers".into()));
            }
        }
    }

    /// Reads and discards the epilogue, so the connection is left at the end of the body.
    fn drain_to_end(&mut self) -> Result<(), MultipartError> {
        self.pos = self.end;
        while self.fill()? {
            self.pos = self.end;
        }
        Ok(())
    }
}

/// Where a part's bytes go as they are read.
trait Collect {
    fn collect(&mut self, bytes: &[u8]) -> Result<(), MultipartError>;
}

/// Kept, up to `cap` bytes: more is `TextTooLarge` at once.
struct Capped {
    bytes: Vec<u8>,
    cap: usize,
}

impl Collect for Capped {
    fn collect(&mut self, bytes: &[u8]) -> Result<(), MultipartError> {
        if bytes.len() > self.cap - self.bytes.len() {
            return Err(MultipartError::TextTooLarge);
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }
}

/// Discarded.
struct Sink;

impl Collect for Sink {
    fn collect(&mut self, _: &[u8]) -> Result<(), MultipartError> {
        Ok(())
    }
}

/// Position of the first occurrence of `needle` in `hay` (SIMD: a 50 MiB file part is
/// scanned for its closing boundary as it streams through).
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    memchr::memmem::find(hay, needle)
}

/// What a part's headers say about it.
#[derive(Debug, Default, PartialEq)]
struct PartHeaders {
    name: Option<String>,
    filename: Option<String>,
    content_type: Option<String>,
}

impl PartHeaders {
    fn parse(block: &[u8]) -> Result<PartHeaders, MultipartError> {
        let mut out = PartHeaders::default();
        // Header bytes may carry raw UTF-8 (httpx puts non-ASCII filenames there as is).
        let text = String::from_utf8_lossy(block);
        for line in text.split("\r\n") {
            if line.is_empty() {
                continue;
            }
            let Some((field, value)) = line.split_once(':') else {
                return Err(MultipartError::Malformed(format!("bad part header line {:?}", truncate(line, 60))));
            };
            let value = value.trim();
            if field.trim().eq_ignore_ascii_case("content-disposition") {
                let (name, filename) = parse_disposition(value);
                out.name = name;
                out.filename = filename;
            } else if field.trim().eq_ignore_ascii_case("content-type") && !value.is_empty() {
                out.content_type = Some(value.to_string());
            }
        }
        Ok(out)
    }
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// `name` and `filename` of `form-data; name="x"; filename="y"` (`filename*=UTF-8''...` wins
/// over `filename`, RFC 5987).
fn parse_disposition(value: &str) -> (Option<String>, Option<String>) {
    let mut name = None;
    let mut filename = None;
    let mut filename_star = None;
    let mut chars = value.chars().peekable();
    // Skip the disposition type ("form-data").
    for c in chars.by_ref() {
        if c == ';' {
            break;
        }
    }
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ';') {
            chars.next();
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ';' {
                break;
            }
            key.push(c);
            chars.next();
        }
        if key.is_empty() && chars.peek().is_none() {
            break;
        }
        let mut val = String::new();
        if chars.peek() == Some(&'=') {
            chars.next();
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            if chars.peek() == Some(&'"') {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                val.push(n);
                            }
                        }
                        _ => val.push(c),
                    }
                }
                // Skip anything up to the next parameter.
                while chars.peek().is_some_and(|c| *c != ';') {
                    chars.next();
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ';' {
                        break;
                    }
                    val.push(c);
                    chars.next();
                }
                val = val.trim_end().to_string();
            }
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "name" => name = Some(val),
            "filename" => filename = Some(val),
            "filename*" => filename_star = decode_ext_value(&val),
            _ => {}
        }
        if chars.peek().is_none() {
            break;
        }
    }
    (name, filename_star.or(filename))
}

/// RFC 5987 `charset'lang'pct-encoded`; UTF-8 (or ASCII) only.
fn decode_ext_value(v: &str) -> Option<String> {
    let mut it = v.splitn(3, '\'');
    let charset = it.next()?;
    let _lang = it.next()?;
    let encoded = it.next()?;
    if !(charset.eq_ignore_ascii_case("utf-8") || charset.eq_ignore_ascii_case("us-ascii")) {
        return None;
    }
    crate::http::percent::percent_decode_path(encoded)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Hands out at most `step` bytes per read, to split boundaries across reads.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    const B: &str = "XyZboundary123";

    fn body() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"preamble to ignore\r\n");
        b.extend_from_slice(format!("--{B}\r\n").as_bytes());
        b.extend_from_slice(b"Content-Disposition: form-data; name=\"method\"\r\n\r\nsendPhoto\r\n");
        b.extend_from_slice(format!("--{B}\r\n").as_bytes());
        b.extend_from_slice(b"Content-Disposition: form-data; name=\"chat_id\"\r\nContent-Type: text/plain; charset=\"utf-8\"\r\n\r\n42\r\n");
        b.extend_from_slice(format!("--{B}\r\n").as_bytes());
        b.extend_from_slice(
            b"Content-Disposition: form-data; name=\"photo\"; filename=\"p.png\"\r\nContent-Type: image/png\r\n\r\n",
        );
        // Binary content containing CRLF, dashes and a near-boundary.
        b.extend_from_slice(format!("\x00\x01\r\n--{}\r\n--\r\n\u{ff}", &B[..5]).as_bytes());
        b.extend_from_slice(format!("\r\n--{B}\r\n").as_bytes());
        b.extend_from_slice(b"Content-Disposition: form-data; name=\"caption\"\r\n\r\nh\xc3\xa9llo world\r\n");
        b.extend_from_slice(format!("--{B}\r\n").as_bytes());
        b.extend_from_slice(b"Content-Disposition: form-data; name=\"reply_markup\"\r\n\r\n{\"inline_keyboard\":[[{\"text\":\"b\",\"callback_data\":\"c\",\"hide\":false}]]}\r\n");
        b.extend_from_slice(format!("--{B}\r\n").as_bytes());
        b.extend_from_slice(b"Content-Disposition: form-data; name=\"doc\"; filename=\"\"\r\n\r\n\r\n");
        b.extend_from_slice(format!("--{B}--\r\nepilogue").as_bytes());
        b
    }

    fn check(params: &Params) {
        assert_eq!(params.get("method"), Some(&json!("sendPhoto")));
        assert_eq!(params.get("chat_id"), Some(&json!(42)));
        assert_eq!(params.required_str("caption").expect("caption"), "héllo world");
        assert_eq!(params.get("reply_markup").map(|m| m["inline_keyboard"][0][0]["hide"].clone()), Some(json!(false)));
        let photo = params.file("photo").expect("photo part");
        assert_eq!(photo.filename, "p.png");
        assert_eq!(photo.content_type.as_deref(), Some("image/png"));
        assert_eq!(photo.bytes, format!("\x00\x01\r\n--{}\r\n--\r\n\u{ff}", &B[..5]).into_bytes());
        let doc = params.file("doc").expect("empty file part");
        assert!(doc.bytes.is_empty());
        assert!(params.get("photo").is_none(), "a file must not be a text parameter");
    }

    #[test]
    fn parses_parts_whatever_the_read_sizes() {
        let b = body();
        for step in [1, 2, 3, 7, 16, 17, 64, 1 << 20] {
            let mut p = Params::new();
            parse(&mut Trickle { data: &b, step }, B, 1 << 20, 1 << 20, None, &mut p).unwrap_or_else(|e| panic!("step {step}: {e:?}"));
            check(&p);
        }
    }

    /// What a Bot API call's intake was handed, part by part (no platform in a unit test).
    #[derive(Default)]
    struct Recorder(std::sync::Mutex<Vec<Vec<u8>>>);

    impl FileIntake for Recorder {
        fn take(&self, part: &mut dyn Read) -> Result<StreamedFile, FileError> {
            let mut bytes = Vec::new();
            part.read_to_end(&mut bytes).map_err(FileError::Io)?;
            let len = bytes.len() as u64;
            self.0.lock().unwrap().push(bytes);
            Ok(StreamedFile::stored(crate::e2e::file::UploadedFile {
                file_ref: "ref".into(),
                key: crate::crypto::file::FileKey([0; 32]),
                digest: crate::crypto::file::FileDigest {
                    algorithm: crate::crypto::file::DigestAlgorithm::Blake3,
                    bytes: [0; 32],
                },
                size: len,
                stored_size: len,
            }))
        }
    }

    /// With an intake, file parts go to it as they arrive, exactly their bytes, whatever the
    /// read sizes; nothing is in memory and text parts are unchanged.
    #[test]
    fn file_parts_stream_to_the_intake_whatever_the_read_sizes() {
        let b = body();
        for step in [1, 3, 17, 1 << 20] {
            let intake = Recorder::default();
            let mut p = Params::new();
            parse(&mut Trickle { data: &b, step }, B, 1 << 20, 1 << 20, Some(&intake), &mut p)
                .unwrap_or_else(|e| panic!("step {step}: {e:?}"));
            assert_eq!(p.get("chat_id"), Some(&json!(42)));
            let photo = p.file("photo").expect("photo part");
            assert!(photo.bytes.is_empty(), "not in memory");
            assert!(photo.streamed.is_some(), "streamed");
            let want = format!("\x00\x01\r\n--{}\r\n--\r\n\u{ff}", &B[..5]).into_bytes();
            assert_eq!(photo.len(), want.len() as u64);
            let taken = intake.0.lock().unwrap();
            assert_eq!(taken.len(), 2, "both file parts");
            assert_eq!(taken[0], want);
            assert!(taken[1].is_empty());
            assert_eq!(p.file("doc").expect("empty part").len(), 0);
        }
        // A part cut off before its delimiter is malformed, not a shorter file.
        let cut = format!("--{B}\r\nContent-Disposition: form-data; name=\"a\"; filename=\"f\"\r\n\r\nabc").into_bytes();
        let intake = Recorder::default();
        let err = parse(&mut Trickle { data: &cut, step: 2 }, B, 1 << 20, 1 << 20, Some(&intake), &mut Params::new())
            .expect_err("cut off");
        assert!(matches!(err, MultipartError::Malformed(_)), "{err:?}");
    }

    #[test]
    fn enforces_the_byte_limit() {
        let b = body();
        let mut p = Params::new();
        let err = parse(&mut Trickle { data: &b, step: 5 }, B, b.len() - 1, 1 << 20, None, &mut p).expect_err("over limit");
        assert!(matches!(err, MultipartError::TooLarge), "{err:?}");
        let mut p = Params::new();
        parse(&mut Trickle { data: &b, step: 5 }, B, b.len(), 1 << 20, None, &mut p).expect("exactly at the limit");
    }

    #[test]
    fn rejects_malformed_bodies() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"no boundary here".to_vec(), "opening boundary"),
            (
                format!("--{B}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nunterminated").into_bytes(),
                "inside a part",
            ),
            (format!("--{B}\r\nContent-Disposition: form-data; name=\"a\"").into_bytes(), "part headers"),
            (format!("--{B}\r\nno colon line\r\n\r\nx\r\n--{B}--").into_bytes(), "header line"),
            (format!("--{B}xx\r\n").into_bytes(), "garbage"),
            (
                [
                    format!("--{B}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n").as_bytes(),
                    b"\xff\xfe",
                    format!("\r\n--{B}--").as_bytes(),
                ]
                .concat(),
                "UTF-8",
            ),
        ];
        for (b, want) in cases {
            let mut p = Params::new();
            match parse(&mut Trickle { data: &b, step: 3 }, B, 1 << 20, 1 << 20, None, &mut p) {
                Err(MultipartError::Malformed(m)) => assert!(m.contains(want), "{m:?} lacks {want:?}"),
                other => panic!("expected Malformed({want}), got {other:?}"),
            }
        }
    }

    #[test]
    fn boundary_and_disposition_parsing() {
        assert_eq!(boundary_from_content_type("multipart/form-data; boundary=abc").as_deref(), Some("abc"));
        assert_eq!(
            boundary_from_content_type("multipart/form-data;boundary=\"a b\"; charset=x").as_deref(),
            Some("a b")
        );
        assert_eq!(boundary_from_content_type("multipart/form-data"), None);
        assert_eq!(boundary_from_content_type("multipart/form-data; boundary="), None);
        assert_eq!(
            parse_disposition(r#"form-data; name="photo"; filename="a \"q\".png""#),
            (Some("photo".to_string()), Some("a \"q\".png".to_string()))
        );
        assert_eq!(
            parse_disposition("form-data; name=x; filename*=UTF-8''%D1%84.txt; filename=\"f.txt\""),
            (Some("x".to_string()), Some("ф.txt".to_string()))
        );
        assert_eq!(parse_disposition("form-data; name=\"a;b\""), (Some("a;b".to_string()), None));
        assert_eq!(parse_disposition("form-data"), (None, None));
    }

    #[test]
    fn finds_needles() {
        assert_eq!(find(b"abc\r\n--b", b"\r\n--b"), Some(3));
        assert_eq!(find(b"\r\r\n--b", b"\r\n--b"), Some(1));
        assert_eq!(find(b"\r\n--", b"\r\n--b"), None);
        assert_eq!(find(b"", b"x"), None);
    }

    /// Counts what was read from the inner reader.
    struct Counted<R> {
        inner: R,
        read: usize,
    }

    impl<R: Read> Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n;
            Ok(n)
        }
    }

    /// A text part over its budget is refused as it arrives: what was read stays near the
    /// budget, not the part's size. A part without a name is skipped without being kept.
    #[test]
    fn a_text_part_is_refused_at_its_budget_and_a_nameless_part_is_never_kept() {
        let huge = 50usize << 20;
        let head = format!("--{B}\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n");
        let mut body = Counted { inner: head.as_bytes().chain(io::repeat(b'x').take(huge as u64)), read: 0 };
        let err = parse(&mut body, B, 64 << 20, 1 << 20, None, &mut Params::new()).expect_err("over the budget");
        assert!(matches!(err, MultipartError::TextTooLarge), "{err:?}");
        assert!(body.read < 2 << 20, "read {} bytes of a {huge}-byte part", body.read);

        let nameless = format!("--{B}\r\nContent-Disposition: form-data; filename=\"a.bin\"\r\n\r\n");
        let tail = format!("\r\n--{B}\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n42\r\n--{B}--\r\n");
        let mut body = nameless.as_bytes().chain(io::repeat(b'y').take(8 << 20)).chain(tail.as_bytes());
        let mut p = Params::new();
        parse(&mut body, B, 64 << 20, 1 << 20, None, &mut p).expect("parsed");
        assert_eq!(p.required_str("chat_id").expect("chat_id"), "42");
    }
}
