//! Decoding one Bot API request into [`Params`], whatever its shape (SDK-COMPAT §0.1):
//! the query string, then the body as `application/x-www-form-urlencoded`, `application/json`
//! (an object), `multipart/form-data` (with or without Content-Length), or an empty body with no
//! Content-Type (PTB's parameterless calls). Body values override query values of the same name.
//!
//! The body is read through a bound: [`MAX_BODY_BYTES`] for multipart (uploads), and
//! [`MAX_TEXT_BODY_BYTES`] for every other body and for the text parts of a multipart body. A
//! larger Content-Length is refused before reading, and a chunked body is cut off once it
//! passes the bound (413). A malformed body is a 400 saying what was wrong. This module does not
//! know any method's parameters.

use std::io::Read;

use serde_json::Value;


use super::multipart::{self, FileIntake, MultipartError};
use crate::http::percent::form_decode;
use crate::gateway::botapi::{ApiError, Params};

/// Largest accepted request body: a 50 MiB media file (SPEC "Limits") plus multipart overhead
/// and the other parameters.
pub const MAX_BODY_BYTES: usize = 52 * 1024 * 1024;
/// Largest body that is not an upload, and largest total of a multipart body's text parts: a
/// message of 4096 characters with its entities and a keyboard stays far below.
pub const MAX_TEXT_BODY_BYTES: usize = 1024 * 1024;

/// Decodes a request with the standard body limit. `query` is the part of the URL after `?`;
/// `content_length` is `None` for a chunked body.
pub fn decode(
    query: Option<&str>,
    content_type: Option<&str>,
    content_length: Option<usize>,
    body: &mut dyn Read,
) -> Result<Params, ApiError> {
    decode_with_limit(query, content_type, content_length, body, MAX_BODY_BYTES)
}

/// [`decode`] for a Bot API call: multipart file parts go to `intake` (the bot encrypts them
/// and streams them to the platform) as they are read, never held in memory.
pub fn decode_streamed(
    query: Option<&str>,
    content_type: Option<&str>,
    content_length: Option<usize>,
    body: &mut dyn Read,
    intake: Option<&dyn FileIntake>,
) -> Result<Params, ApiError> {
    decode_inner(query, content_type, content_length, body, MAX_BODY_BYTES, intake)
}

/// [`decode`] with an explicit body limit (tests use small ones).
pub fn decode_with_limit(
    query: Option<&str>,
    content_type: Option<&str>,
    content_length: Option<usize>,
    body: &mut dyn Read,
    limit: usize,
) -> Result<Params, ApiError> {
    decode_inner(query, content_type, content_length, body, limit, None)
}

fn decode_inner(
    query: Option<&str>,
    content_type: Option<&str>,
    content_length: Option<usize>,
    body: &mut dyn Read,
    limit: usize,
    intake: Option<&dyn FileIntake>,
) -> Result<Params, ApiError> {
    let mut params = Params::new();
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        parse_urlencoded(q.as_bytes(), &mut params, "query string")?;
    }
    let media_type =
        content_type.map(|ct| ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase()).filter(|m| !m.is_empty());
    let is_upload = media_type.as_deref() == Some("multipart/form-data");
    let text_limit = limit.min(MAX_TEXT_BODY_BYTES);
    if content_length.is_some_and(|n| n > if is_upload { limit } else { text_limit }) {
        return Err(too_large(if is_upload { limit } else { text_limit }));
    }
    let limit = if is_upload { limit } else { text_limit };
    match media_type.as_deref() {
        Some("multipart/form-data") => {
            let ct = content_type.unwrap_or_default();
            let boundary = multipart::boundary_from_content_type(ct).ok_or_else(|| {
                ApiError::bad_request("can't parse multipart body: the Content-Type has no valid boundary")
            })?;
            multipart::parse(body, &boundary, limit, text_limit, intake, &mut params).map_err(|e| match e {
                MultipartError::TooLarge => too_large(limit),
                MultipartError::FileTooLarge => ApiError::file_too_large(),
                MultipartError::Upload(e) => ApiError::file_transfer("upload", e),
                MultipartError::TextTooLarge => ApiError::new(
                    413,
                    format!("Request Entity Too Large: the text parameters exceed the limit of {} MiB", text_limit >> 20),
                ),
                MultipartError::Malformed(m) => ApiError::bad_request(format!("can't parse multipart body: {m}")),
                MultipartError::Io(e) => ApiError::bad_request(format!("can't read request body: {e}")),
            })?;
        }
        Some("application/x-www-form-urlencoded") => {
            let bytes = read_body(body, limit)?;
            parse_urlencoded(&bytes, &mut params, "form body")?;
        }
        Some(m) if is_json(m) => {
            let bytes = read_body(body, limit)?;
            parse_json_body(&bytes, &mut params)?;
        }
        None => {
            // No Content-Type: PTB's empty body; otherwise guess between the two text shapes.
            let bytes = read_body(body, limit)?;
            match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
                None => {}
                Some(b'{') => parse_json_body(&bytes, &mut params)?,
                Some(_) => parse_urlencoded(&bytes, &mut params, "form body")?,
            }
        }
        Some(other) => {
            let bytes = read_body(body, limit)?;
            if !bytes.is_empty() {
                return Err(ApiError::new(
                    415,
                    format!(
                        "Unsupported Media Type: Content-Type {other} is not supported; send application/json, \
                         application/x-www-form-urlencoded or multipart/form-data"
                    ),
                ));
            }
        }
    }
    Ok(params)
}

fn is_json(media_type: &str) -> bool {
    media_type == "application/json" || media_type.ends_with("+json")
}

fn too_large(limit: usize) -> ApiError {
    let size = if limit >= 1024 * 1024 { format!("{} MiB", limit / (1024 * 1024)) } else { format!("{limit} bytes") };
    ApiError::new(413, format!("Request Entity Too Large: the request body exceeds the limit of {size}"))
}

/// Reads the whole body, failing with 413 past `limit` bytes.
fn read_body(body: &mut dyn Read, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut bytes = Vec::new();
    body.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ApiError::bad_request(format!("can't read request body: {e}")))?;
    if bytes.len() > limit {
        return Err(too_large(limit));
    }
    Ok(bytes)
}

fn parse_json_body(bytes: &[u8], params: &mut Params) -> Result<(), ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("can't parse JSON body: {e}")))?;
    match value {
        Value::Object(obj) => {
            for (k, v) in obj {
                params.insert_json(&k, v);
            }
            Ok(())
        }
        other => Err(ApiError::bad_request(format!(
            "can't parse JSON body: expected a JSON object, got {}",
            json_kind(&other)
        ))),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `a=1&b=x+y%21` into text parameters: `+` is a space, `%XX` a byte, and the decoded bytes
/// must be UTF-8. A malformed `%` escape is kept literally, as browsers and most servers do.
pub fn parse_urlencoded(input: &[u8], params: &mut Params, what: &str) -> Result<(), ApiError> {
    for pair in input.split(|&b| b == b'&') {
        if pair.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &[][..]),
        };
        let name = String::from_utf8(form_decode(k))
            .map_err(|_| ApiError::bad_request(format!("can't parse {what}: a parameter name is not valid UTF-8")))?;
        let value = String::from_utf8(form_decode(v))
            .map_err(|_| ApiError::bad_request(format!("can't parse {what}: parameter {name:?} is not valid UTF-8")))?;
        params.insert_text(&name, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use serde_json::json;

    use super::*;

    fn dec(query: Option<&str>, ct: Option<&str>, body: &[u8]) -> Result<Params, ApiError> {
        decode_with_limit(query, ct, Some(body.len()), &mut Cursor::new(body.to_vec()), 1024)
    }

    fn err(r: Result<Params, ApiError>) -> ApiError {
        r.expect_err("expected an error")
    }

    #[test]
    fn form_body_with_plus_and_percent() {
        let p = dec(
            None,
            Some("application/x-www-form-urlencoded"),
            b"chat_id=42&text=hello+world%21+%D1%84&disable_notification=true&reply_markup=%7B%22a%22%3A+1%7D&empty=&bare&bad=%zz",
        )
        .expect("form");
        assert_eq!(p.get("chat_id"), Some(&json!(42)));
        assert_eq!(p.required_str("text").expect("text"), "hello world! ф");
        assert_eq!(p.get("disable_notification"), Some(&json!(true)));
        assert_eq!(p.get("reply_markup"), Some(&json!({"a": 1})));
        assert_eq!(p.required_str("empty").expect("empty"), "");
        assert_eq!(p.required_str("bare").expect("bare"), "");
        assert_eq!(p.required_str("bad").expect("bad"), "%zz");
    }

    #[test]
    fn form_body_must_be_utf8() {
        let e = err(dec(None, Some("application/x-www-form-urlencoded"), b"text=%FF%FE"));
        assert_eq!(e.status, 400);
        assert!(e.description.contains("\"text\" is not valid UTF-8"), "{}", e.description);
    }

    #[test]
    fn json_body() {
        let p = dec(
            None,
            Some("application/json; charset=utf-8"),
            br#"{"chat_id": 42, "text": "hi", "reply_parameters": {"message_id": 5}, "x": null}"#,
        )
        .expect("json");
        assert_eq!(p.required_i64("chat_id").expect("chat_id"), 42);
        assert_eq!(p.required_str("text").expect("text"), "hi");
        assert_eq!(p.get("reply_parameters"), Some(&json!({"message_id": 5})));
        assert!(!p.contains("x"), "null must be absent");
        assert!(dec(None, Some("application/json"), b"{}").expect("empty object").is_empty());
        assert!(dec(None, Some("application/json"), b"").expect("empty body").is_empty());
    }

    #[test]
    fn json_body_errors() {
        let e = err(dec(None, Some("application/json"), b"[1,2]"));
        assert_eq!(
            (e.status, e.description.as_str()),
            (400, "Bad Request: can't parse JSON body: expected a JSON object, got an array")
        );
        let e = err(dec(None, Some("application/json"), b"{\"a\":"));
        assert_eq!(e.status, 400);
        assert!(e.description.starts_with("Bad Request: can't parse JSON body: "), "{}", e.description);
    }

    #[test]
    fn empty_body_without_content_type() {
        assert!(dec(None, None, b"").expect("empty").is_empty());
        let mut empty = std::io::empty();
        assert!(decode(None, None, None, &mut empty).expect("no length").is_empty());
        // Without a Content-Type a non-empty body is sniffed.
        assert_eq!(dec(None, None, b"{\"a\":1}").expect("json").get("a"), Some(&json!(1)));
        assert_eq!(dec(None, None, b"a=1").expect("form").get("a"), Some(&json!(1)));
    }

    #[test]
    fn query_string_then_body_overrides() {
        let p = dec(Some("offset=5&timeout=10&allowed_updates=%5B%22message%22%5D"), None, b"").expect("query");
        assert_eq!(p.get("offset"), Some(&json!(5)));
        assert_eq!(p.get("allowed_updates"), Some(&json!(["message"])));
        let p = dec(Some("offset=5"), Some("application/json"), b"{\"offset\": 7}").expect("both");
        assert_eq!(p.get("offset"), Some(&json!(7)));
    }

    #[test]
    fn multipart_with_content_length() {
        let body = b"--b1\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n42\r\n\
--b1\r\nContent-Disposition: form-data; name=\"document\"; filename=\"a.txt\"\r\n\r\nfile body\r\n--b1--\r\n";
        let p = dec(None, Some("multipart/form-data; boundary=b1"), body).expect("multipart");
        assert_eq!(p.get("chat_id"), Some(&json!(42)));
        let f = p.file("document").expect("file kept aside");
        assert_eq!((f.filename.as_str(), f.bytes.as_slice()), ("a.txt", &b"file body"[..]));
        assert_eq!(p.file_names().collect::<Vec<_>>(), vec!["document"]);
        let e = err(dec(None, Some("multipart/form-data"), body));
        assert!(e.description.contains("boundary"), "{}", e.description);
        let e = err(dec(None, Some("multipart/form-data; boundary=b1"), b"--b1\r\nbroken"));
        assert!(e.description.starts_with("Bad Request: can't parse multipart body: "), "{}", e.description);
    }

    #[test]
    fn size_limit_is_413() {
        let big = vec![b'a'; 2000];
        // Announced length over the limit: refused before reading.
        let e = err(dec(None, Some("application/x-www-form-urlencoded"), &big));
        assert_eq!(e.status, 413);
        assert!(e.description.starts_with("Request Entity Too Large"), "{}", e.description);
        // Chunked (no length): cut off while reading.
        for ct in ["application/json", "application/x-www-form-urlencoded", "multipart/form-data; boundary=b"] {
            let e = decode_with_limit(None, Some(ct), None, &mut Cursor::new(big.clone()), 1024).expect_err(ct);
            assert_eq!(e.status, 413, "{ct}");
        }
    }

    #[test]
    fn text_bodies_have_a_smaller_limit_than_uploads() {
        let big = vec![b' '; MAX_TEXT_BODY_BYTES + 1];
        let e = decode(None, Some("application/json"), Some(big.len()), &mut Cursor::new(big.clone())).expect_err("413");
        assert_eq!((e.status, e.description.as_str()), (413, "Request Entity Too Large: the request body exceeds the limit of 1 MiB"));
        let e = decode(None, Some("application/json"), None, &mut Cursor::new(big)).expect_err("chunked 413");
        assert_eq!(e.status, 413);
        // A multipart body may be larger, but not its text parts.
        let mut body = b"--b\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n".to_vec();
        body.extend(std::iter::repeat_n(b'a', MAX_TEXT_BODY_BYTES + 1));
        body.extend_from_slice(b"\r\n--b--\r\n");
        let e = decode(None, Some("multipart/form-data; boundary=b"), Some(body.len()), &mut Cursor::new(body))
            .expect_err("text part 413");
        assert_eq!(e.status, 413);
        assert!(e.description.contains("text parameters"), "{}", e.description);
    }

    #[test]
    fn unknown_content_type() {
        let e = err(dec(None, Some("text/plain"), b"hello"));
        assert_eq!(e.status, 415);
        assert!(dec(None, Some("text/plain"), b"").expect("empty is fine").is_empty());
    }
}
