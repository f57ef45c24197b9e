//! A small HTTP/1.1 server for the gateway's listeners, built to survive hostile clients.
//!
//! It knows nothing of the Bot API: a [`Handler`] gets a [`Request`] (head plus a body reader)
//! and returns a [`Response`]. What it guarantees, whatever a client sends or withholds:
//!
//! - **Bounded threads and descriptors.** One accept thread and a fixed pool of workers per
//!   listener ([`Limits::workers`]); a worker serves one connection at a time. When all are
//!   taken, the connection that has waited longest on its client (idle keep-alive, a slow head,
//!   a stalled body) is evicted for the new one; when none can be, the new one gets 503.
//! - **Deadlines.** The head must arrive within [`Limits::head_deadline`], a body may not stall
//!   longer than [`Limits::body_stall`] nor fall under a minimum rate, and every write has
//!   [`Limits::write_timeout`]. Deadlines are set on each accepted socket, never inherited.
//! - **Limits.** Request line (414), header block and count (431), declared body size (413),
//!   versions other than 1.0/1.1 (505), transfer codings other than chunked (501).
//! - **Host.** Exactly one `Host`; on a loopback listener only a loopback name or one the
//!   config adds (421 otherwise), against DNS rebinding (`host`).
//! - **Exact bodies.** A body that ends before its `Content-Length`, or a broken chunked body,
//!   is an error to the handler (400), never a short read that looks complete. A connection
//!   whose body was not read to its end is closed after the response, so unread bytes can never
//!   be taken for a next request.
//! - **No crash, no dead listener.** A panicking handler is answered 500 and its worker goes
//!   on; accept errors (descriptor exhaustion) are retried with a backoff, and [`Health`] says
//!   whether the listener is serving.
//!
//! Modules: `head` parses request heads, `host` decides which `Host` is answered, `socket` is a connection's buffered socket, `conn`
//! runs one connection (the keep-alive loop, writing responses), `body` reads a body,
//! `request` is what a handler gets, `percent` decodes query strings and path segments, `slots` tracks what each worker waits for (for eviction
//! and shutdown), `server` binds, accepts, and owns the threads.

mod body;
mod conn;
mod head;
mod host;
mod limits;
pub mod percent;
mod request;
mod response;
mod server;
mod slots;
mod socket;

use std::fmt;

pub use conn::client_gone;
pub use head::{Framing, Head, Version};
pub use host::HostRule;
pub use limits::Limits;
pub use response::{BodyWriter, Response};
pub use request::{Handler, Request};
pub use server::{Health, HealthReport, Server};

/// A request the server refuses or cannot finish reading: the status to answer and a
/// description that says what was wrong (no request content in it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    pub description: String,
}

impl HttpError {
    pub fn new(status: u16, description: impl Into<String>) -> HttpError {
        HttpError { status, description: description.into() }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.description)
    }
}

impl std::error::Error for HttpError {}
