//! The Bot API error: an HTTP status equal to `error_code` and a description saying what was wrong.

use std::fmt;

use crate::crypto::file::{FileCryptoError, MAX_PLAINTEXT_LEN};
use crate::e2e::file::FileError;

/// The status of [`ApiError::unanswered`].
const UNANSWERED: u16 = 0;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub description: String,
    /// For 429: seconds to wait, sent as `parameters.retry_after`.
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: u16, description: impl Into<String>) -> Self {
        ApiError { status, description: description.into(), retry_after: None }
    }
    /// 400 "Bad Request: <what>".
    pub fn bad_request(what: impl fmt::Display) -> Self {
        ApiError::new(400, format!("Bad Request: {what}"))
    }
    /// 401 "Unauthorized".
    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized")
    }
    /// 404 "Not Found: <what>".
    pub fn not_found(what: impl fmt::Display) -> Self {
        ApiError::new(404, format!("Not Found: {what}"))
    }
    /// 409 "Conflict: <what>".
    pub fn conflict(what: impl fmt::Display) -> Self {
        ApiError::new(409, format!("Conflict: {what}"))
    }
    /// 500 "Internal Server Error: <what>".
    pub fn internal(what: impl fmt::Display) -> Self {
        ApiError::new(500, format!("Internal Server Error: {what}"))
    }
    /// 429 "Too Many Requests: retry after N (why)" with `parameters.retry_after`, the answer
    /// SDKs and rate limiters retry by themselves.
    pub fn retry_after(secs: u32, why: impl fmt::Display) -> Self {
        ApiError { retry_after: Some(secs), ..ApiError::new(429, format!("Too Many Requests: retry after {secs} ({why})")) }
    }
    /// No answer at all: the connection is closed without one (status 0, which no response
    /// carries). For a call whose outcome is not known yet when it must end (the gateway stops
    /// while its message is with the platform): any error would say "not sent", which may be
    /// false. `why` is for the log only.
    pub fn unanswered(why: impl Into<String>) -> Self {
        ApiError::new(UNANSWERED, why)
    }
    pub fn is_unanswered(&self) -> bool {
        self.status == UNANSWERED
    }
    /// The description for a log: what it quotes (a tag, a URL or a value from the request,
    /// which may be a message's text) left out, as logs carry no message text.
    pub fn loggable(&self) -> String {
        let parts: Vec<&str> = self.description.split('"').enumerate().map(|(i, part)| if i % 2 == 1 { "…" } else { part }).collect();
        parts.join("\"")
    }
    /// 502/504-style failures talking to the platform.
    pub fn platform(status: u16, what: impl fmt::Display) -> Self {
        ApiError::new(status, format!("Bad Gateway: {what}"))
    }
    /// 413 for a file over the limit of one media file.
    pub fn file_too_large() -> Self {
        ApiError::new(413, format!("Request Entity Too Large: files of up to {} MiB are accepted", MAX_PLAINTEXT_LEN >> 20))
    }
    /// A failed file `what` ("upload", "download"): 413 for a file over the limit, 500 for local
    /// trouble with an upload, 502 for the platform or a file that does not verify. The error
    /// never carries a key or plaintext.
    pub fn file_transfer(what: &str, e: FileError) -> Self {
        match e {
            FileError::Crypto(FileCryptoError::TooLarge) => ApiError::file_too_large(),
            FileError::Io(_) | FileError::Crypto(FileCryptoError::Io(_)) if what == "upload" => ApiError::internal(e),
            _ => ApiError::platform(502, format!("file {what} failed: {e}")),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.description)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_description_quotes_nothing_of_the_request() {
        let e = ApiError::bad_request(r#"can't parse entities: Unsupported start tag "secret-code" at byte offset 6"#);
        assert_eq!(e.loggable(), r#"Bad Request: can't parse entities: Unsupported start tag "…" at byte offset 6"#);
        let e = ApiError::bad_request(r#"bad part header line "x: y", and "an unclosed one"#);
        assert_eq!(e.loggable(), r#"Bad Request: bad part header line "…", and "…"#);
        assert_eq!(ApiError::bad_request("chat not found").loggable(), "Bad Request: chat not found");
    }
}
