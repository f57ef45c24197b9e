//! What a listener serves (`Handler`) and one request as the handler sees it (`Request`: the
//! head and a body reader).

use std::io::Read;

use super::body::Body;
use super::head::{Framing, Head, Version};
use super::{HttpError, Response};

/// What a listener serves.
pub trait Handler: Send + Sync {
    /// Answers one request. It may read the body ([`Request::body`]) or leave it; an unread
    /// body closes the connection after the response.
    fn handle(&self, rq: &mut Request<'_>) -> Response;

    /// The response for a request the server refused itself (bad head, limits, deadlines).
    fn error(&self, err: &HttpError) -> Response {
        Response::with_body(err.status, "text/plain; charset=utf-8", err.description.clone().into_bytes()).close()
    }
}

/// One request as the handler sees it.
pub struct Request<'c> {
    pub(super) head: Head,
    pub(super) body: Body<'c>,
}

impl Request<'_> {
    pub fn method(&self) -> &str {
        &self.head.method
    }

    /// The request target: path and query, as sent.
    pub fn target(&self) -> &str {
        &self.head.target
    }

    pub fn version(&self) -> Version {
        self.head.version
    }

    /// The first header field named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    /// The declared body length: Some(0) without a body, None for a chunked one.
    pub fn body_length(&self) -> Option<u64> {
        match self.head.framing {
            Framing::Empty => Some(0),
            Framing::Length(n) => Some(n),
            Framing::Chunked => None,
        }
    }

    /// The body. Reading past its end returns 0; any failure is an error here and in
    /// [`Request::body_error`].
    pub fn body(&mut self) -> &mut dyn Read {
        &mut self.body
    }

    /// Why reading the body failed (cut off, stalled, malformed, too large), with the status
    /// to answer.
    pub fn body_error(&self) -> Option<&HttpError> {
        self.body.error()
    }
}
