//! Every bound the HTTP server enforces, in one place, with the defaults chosen for a Bot API
//! listener (see docs/decisions.md, "The HTTP boundary").

use std::time::Duration;

use super::HostRule;

/// Sizes, counts and deadlines of one listener.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Worker threads; each serves one connection at a time, so this is also the most
    /// connections served at once. An idle or stalled connection is evicted when a new one
    /// needs its worker (see `slots`).
    pub workers: usize,
    /// Workers started with the listener and kept while idle; the others start when a
    /// connection finds no idle worker and end after `worker_idle_exit` without one.
    pub warm_workers: usize,
    pub worker_idle_exit: Duration,
    /// Longest request line (method, target, version). Longer: 414 (or 400 when it is not a
    /// request line at all).
    pub max_request_line: usize,
    /// Largest header block, request line included. Larger: 431.
    pub max_head_bytes: usize,
    /// Most header fields. More: 431.
    pub max_headers: usize,
    /// Largest body the server will read at all; a larger `Content-Length` is 413 before any
    /// byte of it is read. Handlers apply their own, usually smaller, limits.
    pub max_body_bytes: u64,
    /// From the first byte of a request to the end of its header block. Later: 408. Also the
    /// longest a new connection may wait before its first byte (then it is closed).
    pub head_deadline: Duration,
    /// Longest wait for the next byte of a body. Longer: 408.
    pub body_stall: Duration,
    /// Longest a keep-alive connection that has had a trusted answer may sit idle between
    /// requests.
    pub idle_timeout: Duration,
    /// Longest wait for the client to take response bytes.
    pub write_timeout: Duration,
    /// Which `Host` values are answered (`HostRule::for_listener` for a loopback listener);
    /// any other is 421, none or two 400.
    pub hosts: HostRule,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: 64,
            warm_workers: 8,
            worker_idle_exit: Duration::from_secs(10),
            max_request_line: 8 * 1024,
            max_head_bytes: 32 * 1024,
            max_headers: 100,
            max_body_bytes: 64 * 1024 * 1024,
            head_deadline: Duration::from_secs(10),
            body_stall: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
            hosts: HostRule::any(),
        }
    }
}
