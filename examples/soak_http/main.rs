//! Hostile-client soak of the Bot API listener (not a test): the real platform server and
//! gateway binaries on loopback, one real bot, and at least 10,000 malformed or hostile HTTP
//! requests sent over raw TCP connections by a bounded number of client threads; then the
//! attack phase ([`attack`]): the second round's attackers at once, beside a bot at work.
//!
//! What it measures, and when it fails (exit status 1):
//!
//! - **crash**: the gateway process exits (checked every 100 ms; the soak then stops early);
//! - **hang**: no final answer within the client's read deadline (SOAK_READ_TIMEOUT_SECS, 20 s)
//!   while the connection stays open, or a connect that times out;
//! - **5xx**: any 5xx answer except 501 and 505, which are the correct refusals of an unknown
//!   transfer coding or method and of an unsupported HTTP version;
//! - **connect refused** while the process lives: the listener is gone;
//! - **smuggling**: a second response on a connection whose only request was a `POST /healthz`
//!   (or similar) carrying another request in its body;
//! - **cut-off body executed**: a body shorter than its `Content-Length` (or a chunked body
//!   without its last chunk) was parsed and dispatched (the answer says "chat not found");
//! - **legitimate calls**: a `getMe` is made after every 100 hostile requests (and at least once
//!   a second) from a separate thread, on one pooled connection as an SDK keeps it; any failure
//!   or any call slower than 2 s fails the soak;
//! - **resources**: RSS, threads and open descriptors of the gateway are read from `/proc` after
//!   start-up and a warm-up of 50 `getMe` calls, then again after the barrage once the server
//!   has settled (polling up to SOAK_SETTLE_SECS, 60 s: workers beyond the warm ones end 10 s
//!   after their last connection, and a bot's on-demand threads 10 s after their last work);
//!   what was added is listed by thread name
//!   and descriptor kind (TCP sockets by state and port). After settling, threads may not exceed
//!   the baseline at all (SOAK_THREAD_SLACK, 0): every thread started for a connection must be
//!   gone once its connection is. gRPC core's own threads (`grpc_*`) are shown but not judged:
//!   gRPC starts and ends its timer and executor threads by its own load, not the HTTP clients'.
//!   Descriptors other than files in the state directory may exceed the baseline by 2
//!   (SOAK_FD_SLACK: a gRPC reconnect, say), while a per-connection leak over 10,000 requests
//!   shows up as hundreds. Files in the state directory may add 64 (SOAK_STATE_FD_SLACK): the
//!   store opens SQLite readers as concurrent requests need them and keeps up to 8 idle ones
//!   (database and WAL each), and SQLite may hold a closed reader's descriptor until no other
//!   connection holds a lock on the file, so that figure follows the concurrency (between +4
//!   and +19 in runs of the new server), while a leak would follow the request count. The
//!   totals are printed as well. RSS may grow by at most
//!   128 MiB (SOAK_RSS_SLACK_MIB): it is the noisiest figure, since the allocator keeps freed
//!   memory per thread (32 clients sending 1 MB request lines left ~60 MiB behind in the former
//!   tiny_http server), but a per-request leak or an unbounded allocation does not fit. The
//!   half-way figure is printed too: a leak keeps growing, retention levels off;
//! - **end to end**: finally a user sends the bot a message, the bot reads it with `getUpdates`
//!   and answers with `sendMessage`, and the user receives the answer.
//!
//! The hostile requests never carry a message that could reach a user: every `sendMessage` in
//! them addresses the chat `@soak_nobody`, which the gateway cannot resolve ("chat not found").
//! The real token is used in about a third of the token-bearing cases (the others use a wrong
//! secret or none) and in the smuggled requests.
//!
//! Requests that stall on purpose (a body announced and never sent, `Expect: 100-continue` and
//! silence, half a request line, ...) cost the server its read deadline each, so there are at
//! most SOAK_STALLS (64) of them. They come in bursts of SOAK_STALL_BURST (32) consecutive
//! requests, so that that many connections stall at the same time (the former tiny_http server
//! had 16 request workers, and stopped serving) while the legitimate calls go on; the bursts are
//! spread over the run and alternate between a complete head whose body never comes (on
//! `/healthz` without a token, or with the real token) and a head that never completes.
//!
//! Run with `scripts/soak` (it builds the binaries first). Knobs: SOAK_REQUESTS (10000),
//! SOAK_CLIENTS (32), SOAK_READ_TIMEOUT_SECS (20), SOAK_STALLS (64), SOAK_STALL_BURST (32),
//! SOAK_MAX_HANGS (200: stop early after that many), SOAK_MAX_SECS (900: stop sending after
//! that long), SOAK_SETTLE_SECS, SOAK_FD_SLACK, SOAK_STATE_FD_SLACK, SOAK_THREAD_SLACK,
//! SOAK_RSS_SLACK_MIB, SOAK_LEGIT_SLOW_MS (2000), and SOAK_ONLY / SOAK_SKIP: comma-separated
//! substrings of case names to keep or to leave out (e.g. `SOAK_SKIP=cl-huge` to look past a
//! crash on huge Content-Length values).
//! The barrage stops early when the gateway dies, when 100 connections were refused (the
//! listener is gone), after SOAK_MAX_HANGS hangs, or after SOAK_MAX_SECS; an early stop fails
//! the soak. Every loop is bounded in count and time; the program stops by itself.

#[path = "../../tests/support/mod.rs"]
mod support;

mod attack;

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::World;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

fn env_list(name: &str) -> Vec<String> {
    std::env::var(name).unwrap_or_default().split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

struct Cfg {
    requests: usize,
    clients: usize,
    read_timeout: Duration,
    stalls: usize,
    stall_burst: usize,
    max_hangs: u64,
    max_run: Duration,
    settle: Duration,
    fd_slack: u64,
    state_fd_slack: u64,
    thread_slack: u64,
    rss_slack_kib: u64,
    legit_slow: Duration,
    attack_secs: u64,
    only: Vec<String>,
    skip: Vec<String>,
}

impl Cfg {
    fn from_env() -> Cfg {
        Cfg {
            requests: env_u64("SOAK_REQUESTS", 10_000) as usize,
            clients: env_u64("SOAK_CLIENTS", 32).clamp(1, 256) as usize,
            read_timeout: Duration::from_secs(env_u64("SOAK_READ_TIMEOUT_SECS", 20).clamp(1, 300)),
            stalls: env_u64("SOAK_STALLS", 64) as usize,
            stall_burst: env_u64("SOAK_STALL_BURST", 32).max(1) as usize,
            max_hangs: env_u64("SOAK_MAX_HANGS", 200).max(1),
            max_run: Duration::from_secs(env_u64("SOAK_MAX_SECS", 900).clamp(10, 24 * 3600)),
            settle: Duration::from_secs(env_u64("SOAK_SETTLE_SECS", 60).min(600)),
            fd_slack: env_u64("SOAK_FD_SLACK", 2),
            state_fd_slack: env_u64("SOAK_STATE_FD_SLACK", 64),
            thread_slack: env_u64("SOAK_THREAD_SLACK", 0),
            rss_slack_kib: env_u64("SOAK_RSS_SLACK_MIB", 128) * 1024,
            legit_slow: Duration::from_millis(env_u64("SOAK_LEGIT_SLOW_MS", 2000)),
            attack_secs: env_u64("SOAK_ATTACK_SECS", 60).min(3600),
            only: env_list("SOAK_ONLY"),
            skip: env_list("SOAK_SKIP"),
        }
    }

    /// Whether threads and descriptors are back within their slack of `before`.
    fn within(&self, before: &Judged, now: &Judged) -> bool {
        now.threads <= before.threads + self.thread_slack as i64
            && now.fds <= before.fds + self.fd_slack as i64
            && now.state_fds <= before.state_fds + self.state_fd_slack as i64
    }
}

// ───────────────────────────── the hostile cases ─────────────────────────────

/// What the client does after writing the request bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    /// Keep the connection open and read the answer.
    Read,
    /// Shut down the write side (the server sees end of input), then read the answer.
    HalfClose,
    /// Close at once without reading.
    Drop,
    /// Close at once with a TCP reset (SO_LINGER 0), without reading.
    Reset,
}

/// The request path prefix for one token variant, and the real token for smuggled requests.
struct Ctx {
    prefix: String,
    real_token: String,
}

type Build = Box<dyn Fn(&Ctx) -> Vec<u8> + Send + Sync>;

struct Case {
    name: String,
    /// Holds the connection open without completing the request: bounded in number.
    stall: bool,
    /// A stall with a complete request head and a missing body.
    stall_body: bool,
    /// Built once per token variant (real, wrong secret, none), in turn.
    tokened: bool,
    /// A second response on the connection means the body was run as a request.
    watch_extra: bool,
    /// The body is cut off: an answer saying "chat not found" means it was executed.
    must_not_execute: bool,
    after: After,
    build: Build,
}

/// Refused connections after which the barrage stops (the listener is gone).
const REFUSED_STOP: u64 = 100;

const TOKEN_VARIANTS: [&str; 3] = ["real", "wrong", "none"];
const NOBODY: &str = r#"{"chat_id":"@soak_nobody","text":"soak"}"#;
const HOST: &str = "Host: 127.0.0.1\r\n";
const JSON: &str = "Content-Type: application/json\r\n";

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// `POST <path> HTTP/1.1`, Host, the given header lines (each ending in CRLF), blank line, body.
fn post(path: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    cat(&[format!("POST {path} HTTP/1.1\r\n{HOST}{headers}\r\n").as_bytes(), body])
}

fn get(path: &str, headers: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\n{HOST}{headers}\r\n").into_bytes()
}

fn chunked(data: &[u8]) -> Vec<u8> {
    cat(&[format!("{:x}\r\n", data.len()).as_bytes(), data, b"\r\n0\r\n\r\n"])
}

/// A `sendMessage` to `@soak_nobody` in chunked encoding, with the real token: the request a
/// smuggling case hides in a body.
fn inner_send(real_token: &str) -> Vec<u8> {
    post(
        &format!("/bot{real_token}/sendMessage"),
        &format!("{JSON}Transfer-Encoding: chunked\r\n"),
        &chunked(NOBODY.as_bytes()),
    )
}

/// Deterministic pseudo-random bytes (xorshift).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

struct Cases(Vec<Case>);

impl Cases {
    fn add(
        &mut self,
        name: impl Into<String>,
        after: After,
        build: impl Fn(&Ctx) -> Vec<u8> + Send + Sync + 'static,
    ) -> &mut Case {
        self.0.push(Case {
            name: name.into(),
            stall: false,
            stall_body: false,
            tokened: false,
            watch_extra: false,
            must_not_execute: false,
            after,
            build: Box::new(build),
        });
        self.0.last_mut().expect("just pushed")
    }
}

impl Case {
    fn tokened(&mut self) -> &mut Case {
        self.tokened = true;
        self
    }
    fn stall(&mut self) -> &mut Case {
        self.stall = true;
        self
    }
    fn stall_body(&mut self) -> &mut Case {
        self.stall = true;
        self.stall_body = true;
        self
    }
    fn smuggle(&mut self) -> &mut Case {
        self.watch_extra = true;
        self
    }
    fn cut_off(&mut self) -> &mut Case {
        self.must_not_execute = true;
        self
    }
}

fn all_cases() -> Vec<Case> {
    use After::*;
    let mut c = Cases(Vec::new());
    let nb = NOBODY.as_bytes();
    let n = nb.len();

    // Huge Content-Length values (tiny_http 0.12.0 drained an unread body with `vec![0; remaining]`).
    let huge: [(&str, &str); 8] = [
        ("2^62", "4611686018427387904"),
        ("2^63-1", "9223372036854775807"),
        ("2^63", "9223372036854775808"),
        ("2^64-1", "18446744073709551615"),
        ("2^64", "18446744073709551616"),
        ("40GiB", "42949672960"),
        ("1TiB", "1099511627776"),
        ("30-digits", "999999999999999999999999999999"),
    ];
    for (label, v) in huge {
        c.add(format!("cl-huge {label} /healthz"), Read, move |_| {
            post("/healthz", &format!("Content-Length: {v}\r\n"), b"")
        });
        c.add(format!("cl-huge {label} sendMessage"), Read, move |x| {
            post(&format!("{}/sendMessage", x.prefix), &format!("{JSON}Content-Length: {v}\r\n"), NOBODY.as_bytes())
        })
        .tokened();
    }
    c.add("cl-huge 2^63 /healthz GET", Read, |_| get("/healthz", "Content-Length: 9223372036854775808\r\n"));

    // Content-Length that is not one plain number.
    let n1 = n + 1;
    let odd_cl: Vec<(&str, String)> = vec![
        ("non-numeric", "Content-Length: abc\r\n".into()),
        ("negative", "Content-Length: -1\r\n".into()),
        ("plus-sign", format!("Content-Length: +{n}\r\n")),
        ("hex", format!("Content-Length: 0x{n:x}\r\n")),
        ("list", format!("Content-Length: {n}, {n1}\r\n")),
        ("inner-space", "Content-Length: 4 1\r\n".into()),
        ("empty", "Content-Length: \r\n".into()),
        ("fraction", format!("Content-Length: {n}.0\r\n")),
        ("duplicate-conflicting", format!("Content-Length: {n}\r\nContent-Length: {n1}\r\n")),
        ("duplicate-equal", format!("Content-Length: {n1}\r\nContent-Length: {n1}\r\n")),
        ("name-space-colon", format!("Content-Length : {n1}\r\n")),
    ];
    for (label, h) in odd_cl {
        c.add(format!("cl-bad {label}"), Read, move |x| {
            post(&format!("{}/sendMessage", x.prefix), &format!("{JSON}{h}"), format!("{NOBODY} ").as_bytes())
        })
        .tokened();
    }

    // Transfer-Encoding with and against Content-Length, unknown codings.
    let ch = chunked(nb);
    let chl = ch.len();
    let te: Vec<(&str, String, bool)> = vec![
        ("cl+chunked", format!("Content-Length: {chl}\r\nTransfer-Encoding: chunked\r\n"), true),
        ("chunked+cl", "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n".into(), true),
        ("gzip", "Transfer-Encoding: gzip\r\n".into(), false),
        ("gzip,chunked", "Transfer-Encoding: gzip, chunked\r\n".into(), true),
        ("chunked,gzip", "Transfer-Encoding: chunked, gzip\r\n".into(), true),
        ("chunked-twice", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n".into(), true),
        ("identity", "Transfer-Encoding: identity\r\n".into(), false),
        ("xchunked", "Transfer-Encoding: xchunked\r\n".into(), true),
        ("mixed-case", "Transfer-Encoding: ChUnKeD\r\n".into(), true),
        ("name-space-colon", "Transfer-Encoding : chunked\r\n".into(), true),
    ];
    for (label, h, body_chunked) in te {
        let ch = ch.clone();
        c.add(format!("te {label}"), Read, move |x| {
            let body = if body_chunked { ch.clone() } else { NOBODY.as_bytes().to_vec() };
            post(&format!("{}/sendMessage", x.prefix), &format!("{JSON}{h}"), &body)
        })
        .tokened();
    }
    c.add("te chunked HTTP/1.0", Read, move |x| {
        cat(&[
            format!("POST {}/sendMessage HTTP/1.0\r\n{HOST}{JSON}Transfer-Encoding: chunked\r\n\r\n", x.prefix)
                .as_bytes(),
            &chunked(NOBODY.as_bytes()),
        ])
    })
    .tokened();

    // Broken chunked bodies.
    let te_json = format!("{JSON}Transfer-Encoding: chunked\r\n");
    let broken: Vec<(&str, Vec<u8>, After, bool)> = vec![
        ("bad-hex", cat(&[b"zz\r\n", nb, b"\r\n0\r\n\r\n"]), Read, false),
        ("size-ffffffffffffffff", cat(&[b"ffffffffffffffff\r\n", nb]), Read, false),
        ("size-2^64", cat(&[b"10000000000000000\r\n", nb]), Read, false),
        ("size-negative", cat(&[b"-1\r\n", nb, b"\r\n0\r\n\r\n"]), Read, false),
        ("missing-crlf", cat(&[format!("{n:x}\r\n").as_bytes(), nb, b"0\r\n\r\n"]), Read, false),
        ("size-too-short", cat(&[b"3\r\n", nb, b"\r\n0\r\n\r\n"]), Read, false),
        (
            "100KB-extension",
            cat(&[format!("{n:x};").as_bytes(), &vec![b'e'; 100_000], b"\r\n", nb, b"\r\n0\r\n\r\n"]),
            Read,
            false,
        ),
        (
            "10000-trailers",
            cat(&[&chunked(nb)[..chl - 2], "X-T: v\r\n".repeat(10_000).as_bytes(), b"\r\n"]),
            Read,
            false,
        ),
        ("bare-lf", cat(&[format!("{n:x}\n").as_bytes(), nb, b"\n0\n\n"]), HalfClose, false),
        ("no-last-chunk", cat(&[format!("{n:x}\r\n").as_bytes(), nb, b"\r\n"]), HalfClose, true),
    ];
    for (label, body, after, cut) in broken {
        let h = te_json.clone();
        let case = c.add(format!("chunked-broken {label}"), after, move |x| {
            post(&format!("{}/sendMessage", x.prefix), &h, &body)
        });
        case.tokened();
        if cut {
            case.cut_off();
        }
    }

    // HTTP versions other than 1.x, and the HTTP/2 preface.
    for v in
        ["HTTP/2.0", "HTTP/3.0", "HTTP/0.9", "HTTP/1.2", "HTTP/9.9", "HTTP/1.10", "HTTPS/1.1", "http/1.1", "HTTP/1.1x"]
    {
        c.add(format!("version {v}"), Read, move |_| format!("GET /healthz {v}\r\n{HOST}\r\n").into_bytes());
    }
    c.add("version HTTP/2.0 sendMessage", Read, |x| {
        cat(&[
            format!("POST {}/sendMessage HTTP/2.0\r\n{HOST}{JSON}Content-Length: {}\r\n\r\n", x.prefix, NOBODY.len())
                .as_bytes(),
            NOBODY.as_bytes(),
        ])
    })
    .tokened();
    c.add("version HTTP/3.0 getMe", Read, |x| format!("GET {}/getMe HTTP/3.0\r\n{HOST}\r\n", x.prefix).into_bytes())
        .tokened();
    c.add("version PRI * HTTP/2.0 preface", Read, |_| b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec());
    c.add("version PRI preface + SETTINGS", Read, |_| {
        cat(&[b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", &[0, 0, 0, 4, 0, 0, 0, 0, 0]])
    });
    c.add("version none (HTTP/0.9 style)", HalfClose, |_| b"GET /healthz\r\n".to_vec());

    // Bare LF and bare CR line ends.
    c.add("bare-lf request, half-closed", HalfClose, |_| b"GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n".to_vec());
    c.add("bare-lf header only", HalfClose, |_| b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\n\r\n".to_vec());
    c.add("bare-lf sendMessage, half-closed", HalfClose, |x| {
        cat(&[
            format!(
                "POST {}/sendMessage HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\nContent-Length: {}\n\n",
                x.prefix,
                NOBODY.len()
            )
            .as_bytes(),
            NOBODY.as_bytes(),
        ])
    })
    .tokened();
    c.add("bare-cr request, half-closed", HalfClose, |_| b"GET /healthz HTTP/1.1\rHost: 127.0.0.1\r\r".to_vec());

    // Upgrade and TE request headers.
    c.add("upgrade h2c /healthz", Read, |_| {
        get(
            "/healthz",
            "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
        )
    });
    c.add("upgrade h2c getMe", Read, |x| {
        get(&format!("{}/getMe", x.prefix), "Connection: Upgrade\r\nUpgrade: h2c\r\n")
    })
    .tokened();
    c.add("upgrade h2c sendMessage", Read, |x| {
        post(
            &format!("{}/sendMessage", x.prefix),
            &format!("{JSON}Connection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: {}\r\n", NOBODY.len()),
            NOBODY.as_bytes(),
        )
    })
    .tokened();
    c.add("upgrade websocket", Read, |_| {
        get(
            "/healthz",
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
        )
    });
    c.add("te-header gzip /healthz", Read, |_| get("/healthz", "TE: gzip\r\n"));
    c.add("te-header gzip getMe", Read, |x| get(&format!("{}/getMe", x.prefix), "TE: gzip\r\nConnection: TE\r\n"))
        .tokened();
    c.add("te-header trailers,deflate", Read, |_| get("/healthz", "TE: trailers, deflate;q=0.5\r\nConnection: TE\r\n"));
    c.add("connection header soup", Read, |_| {
        get("/healthz", "Connection: keep-alive, close, Upgrade, TE, Transfer-Encoding, Content-Length\r\n")
    });

    // Over-long request line and header block.
    c.add("long url 100KB /healthz", Read, |_| {
        format!("GET /healthz?{} HTTP/1.1\r\n{HOST}\r\n", "a".repeat(100_000)).into_bytes()
    });
    c.add("long url 100KB getMe", Read, |x| {
        format!("GET {}/getMe?x={} HTTP/1.1\r\n{HOST}\r\n", x.prefix, "a".repeat(100_000)).into_bytes()
    })
    .tokened();
    c.add("long url 1MB", Read, |_| format!("GET /{} HTTP/1.1\r\n{HOST}\r\n", "b".repeat(1 << 20)).into_bytes());
    c.add("long method 64KB", Read, |_| format!("{} /healthz HTTP/1.1\r\n{HOST}\r\n", "A".repeat(65_536)).into_bytes());
    c.add("long method name 10KB", Read, |x| {
        format!("GET {}/{} HTTP/1.1\r\n{HOST}\r\n", x.prefix, "m".repeat(10_000)).into_bytes()
    })
    .tokened();
    c.add("header value 100KB", Read, |_| get("/healthz", &format!("X-Big: {}\r\n", "v".repeat(100_000))));
    c.add("header name 100KB", Read, |_| get("/healthz", &format!("{}: v\r\n", "N".repeat(100_000))));
    c.add("10000 headers", Read, |_| {
        get("/healthz", &(0..10_000).map(|i| format!("X-H{i}: v\r\n")).collect::<String>())
    });
    c.add("10000 headers sendMessage", Read, |x| {
        let hs: String = (0..10_000).map(|i| format!("X-H{i}: v\r\n")).collect();
        post(
            &format!("{}/sendMessage", x.prefix),
            &format!("{JSON}{hs}Content-Length: {}\r\n", NOBODY.len()),
            NOBODY.as_bytes(),
        )
    })
    .tokened();
    c.add("obs-fold header", Read, |_| get("/healthz", "X-A: a\r\n folded\r\n\tagain\r\n"));

    // Malformed header lines.
    c.add("header without colon", Read, |_| get("/healthz", "NoColonHere\r\n"));
    c.add("header empty name", Read, |_| get("/healthz", ": v\r\n"));
    c.add("header NUL in value", Read, |_| get("/healthz", "X-A: a\0b\r\n"));
    c.add("header ctl in name", Read, |_| get("/healthz", "X\x01A: v\r\n"));
    c.add("header non-ascii value", Read, |_| {
        cat(&[b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: \xff\xfe\x80\r\n\r\n"])
    });
    c.add("host missing", Read, |_| b"GET /healthz HTTP/1.1\r\n\r\n".to_vec());
    c.add("host twice", Read, |_| get("/healthz", "Host: 127.0.0.2\r\n"));

    // NUL, non-ASCII and odd forms in the request line.
    let lines: Vec<(&str, &[u8])> = vec![
        ("nul in path", b"GET /heal\0thz HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("nul in method", b"G\0T /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("nul after version", b"GET /healthz HTTP/1.1\0\r\nHost: x\r\n\r\n"),
        ("1KB of NUL", &[0u8; 1024]),
        ("invalid utf-8 path", b"GET /\xff\xfe\xfd HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("utf-8 path", "GET /caf\u{e9}/\u{1f600} HTTP/1.1\r\nHost: x\r\n\r\n".as_bytes()),
        ("control chars path", b"GET /\x7f\x01\x02\x1b[2J HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("percent nul", b"GET /healthz%00 HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("percent invalid", b"GET /bot%ff%fe/getMe HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("traversal", b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("double spaces", b"GET  /healthz  HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("tab separated", b"GET\t/healthz\tHTTP/1.1\r\nHost: x\r\n\r\n"),
        ("absolute form", b"GET http://127.0.0.1/healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("connect method", b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n"),
        ("options asterisk", b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("trace", b"TRACE /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("unknown method", b"BREW /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("lowercase method", b"get /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("no path", b"GET HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("ssh banner", b"SSH-2.0-OpenSSH_9.6\r\n"),
    ];
    for (label, bytes) in lines {
        let bytes = bytes.to_vec();
        c.add(format!("request-line {label}"), Read, move |_| bytes.clone());
    }
    c.add("request-line token traversal", Read, |x| {
        format!("GET {}/../../healthz HTTP/1.1\r\n{HOST}\r\n", x.prefix).into_bytes()
    })
    .tokened();
    c.add("request-line token nul", Read, |x| format!("GET {}%00/getMe HTTP/1.1\r\n{HOST}\r\n", x.prefix).into_bytes())
        .tokened();
    c.add("method HEAD getMe", Read, |x| format!("HEAD {}/getMe HTTP/1.1\r\n{HOST}\r\n", x.prefix).into_bytes())
        .tokened();
    c.add("method DELETE sendMessage", Read, |x| {
        cat(&[
            format!("DELETE {}/sendMessage HTTP/1.1\r\n{HOST}{JSON}Content-Length: {}\r\n\r\n", x.prefix, NOBODY.len())
                .as_bytes(),
            NOBODY.as_bytes(),
        ])
    })
    .tokened();

    // Garbage and empty connections.
    c.add("garbage 64KB", Read, |_| noise(0x9e37_79b9_7f4a_7c15, 65_536));
    c.add("garbage 512B, half-closed", HalfClose, |_| noise(0xdead_beef, 512));
    c.add("tls client hello, half-closed", HalfClose, |_| {
        cat(&[&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03], &noise(7, 500)])
    });
    c.add("crlf x1000, half-closed", HalfClose, |_| b"\r\n".repeat(1000));
    c.add("empty, closed at once", Drop, |_| Vec::new());
    c.add("empty, half-closed", HalfClose, |_| Vec::new());
    c.add("reset mid-headers", Reset, |_| b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le".to_vec());
    c.add("reset mid-body", Reset, |x| {
        post(&format!("{}/sendMessage", x.prefix), &format!("{JSON}Content-Length: 100\r\n"), &NOBODY.as_bytes()[..10])
    })
    .tokened();
    c.add("closed after headers", Drop, |_| post("/healthz", "Content-Length: 100\r\n", b""));

    // Cut-off bodies: the client ends its side before Content-Length bytes arrived.
    c.add("truncated 10 of 100 bytes", HalfClose, |x| {
        post(&format!("{}/sendMessage", x.prefix), &format!("{JSON}Content-Length: 100\r\n"), &NOBODY.as_bytes()[..10])
    })
    .tokened()
    .cut_off();
    c.add("truncated complete json, CL +60", HalfClose, |x| {
        post(
            &format!("{}/sendMessage", x.prefix),
            &format!("{JSON}Content-Length: {}\r\n", NOBODY.len() + 60),
            NOBODY.as_bytes(),
        )
    })
    .tokened()
    .cut_off();
    c.add("truncated form body, CL +60", HalfClose, |x| {
        let form = "chat_id=%40soak_nobody&text=soak";
        post(
            &format!("{}/sendMessage", x.prefix),
            &format!("Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n", form.len() + 60),
            form.as_bytes(),
        )
    })
    .tokened()
    .cut_off();
    c.add("truncated /healthz body", HalfClose, |_| post("/healthz", "Content-Length: 100\r\n", b"0123456789"));

    // Bodies that are not what the method expects (complete and correctly framed).
    let deep_arr = "[".repeat(100_000);
    let deep_obj = "{\"a\":".repeat(20_000);
    let multipart = |b: &str| format!("Content-Type: multipart/form-data; boundary={b}\r\n");
    let bodies: Vec<(&str, String, Vec<u8>)> = vec![
        ("json array", JSON.into(), b"[1,2,3]".to_vec()),
        ("json string", JSON.into(), b"\"text\"".to_vec()),
        ("json null", JSON.into(), b"null".to_vec()),
        ("json number", JSON.into(), b"42".to_vec()),
        ("json truncated", JSON.into(), b"{\"chat_id\":".to_vec()),
        ("json nested 100000 arrays", JSON.into(), deep_arr.into_bytes()),
        ("json nested 20000 objects", JSON.into(), deep_obj.into_bytes()),
        ("json invalid utf-8", JSON.into(), b"{\"chat_id\":\"@soak_nobody\",\"text\":\"\xff\xfe\"}".to_vec()),
        ("json bom", JSON.into(), cat(&[b"\xef\xbb\xbf", NOBODY.as_bytes()])),
        ("json huge number", JSON.into(), b"{\"chat_id\":1e999999,\"text\":\"soak\"}".to_vec()),
        ("json 1MB string", JSON.into(), format!("{{\"chat_id\":\"@soak_nobody\",\"text\":\"{}\"}}", "x".repeat(1 << 20)).into_bytes()),
        ("json as text/plain", "Content-Type: text/plain\r\n".into(), NOBODY.as_bytes().to_vec()),
        ("json without content-type", String::new(), NOBODY.as_bytes().to_vec()),
        ("json charset utf-16", "Content-Type: application/json; charset=utf-16\r\n".into(), NOBODY.as_bytes().to_vec()),
        ("form garbage", "Content-Type: application/x-www-form-urlencoded\r\n".into(), b"%%%=&&=%zz&=%".to_vec()),
        ("multipart no boundary", "Content-Type: multipart/form-data\r\n".into(), b"--x\r\n\r\n".to_vec()),
        (
            "multipart unterminated",
            multipart("XyZ"),
            b"--XyZ\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n@soak_nobody\r\n--XyZ\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nso".to_vec(),
        ),
        ("multipart 70KB boundary", multipart(&"b".repeat(70_000)), b"--b\r\n".to_vec()),
        (
            "multipart 10000 parts",
            multipart("p"),
            cat(&["--p\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\ny\r\n".repeat(10_000).as_bytes(), b"--p--\r\n"]),
        ),
    ];
    for (label, ct, body) in bodies {
        c.add(format!("body {label}"), Read, move |x| {
            post(&format!("{}/sendMessage", x.prefix), &format!("{ct}Content-Length: {}\r\n", body.len()), &body)
        })
        .tokened();
    }
    c.add("expect 417-weird", Read, |x| {
        post(
            &format!("{}/sendMessage", x.prefix),
            &format!("{JSON}Expect: 999-weird\r\nContent-Length: {}\r\n", NOBODY.len()),
            NOBODY.as_bytes(),
        )
    })
    .tokened();
    c.add("expect 100-continue with body", Read, |x| {
        post(
            &format!("{}/sendMessage", x.prefix),
            &format!("{JSON}Expect: 100-continue\r\nContent-Length: {}\r\n", NOBODY.len()),
            NOBODY.as_bytes(),
        )
    })
    .tokened();

    // Request smuggling: a second request hidden in a body must never be answered.
    c.add("smuggle sendMessage in CL body of POST /healthz", Read, |x| {
        let inner = inner_send(&x.real_token);
        post("/healthz", &format!("Content-Length: {}\r\n", inner.len()), &inner)
    })
    .smuggle();
    c.add("smuggle sendMessage in chunked body of POST /healthz", Read, |x| {
        post("/healthz", "Transfer-Encoding: chunked\r\n", &chunked(&inner_send(&x.real_token)))
    })
    .smuggle();
    c.add("smuggle CL.TE after POST /healthz", Read, |x| {
        cat(&[
            &post("/healthz", "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"),
            &inner_send(&x.real_token),
        ])
    })
    .smuggle();
    c.add("smuggle sendMessage in body of GET /healthz", Read, |x| {
        let inner = inner_send(&x.real_token);
        cat(&[format!("GET /healthz HTTP/1.1\r\n{HOST}Content-Length: {}\r\n\r\n", inner.len()).as_bytes(), &inner])
    })
    .smuggle();
    c.add("smuggle sendMessage in body of getMe", Read, |x| {
        let inner = inner_send(&x.real_token);
        post(&format!("/bot{}/getMe", x.real_token), &format!("Content-Length: {}\r\n", inner.len()), &inner)
    })
    .smuggle();

    // Stalls: the request never completes. Each costs the server its read deadline. Two kinds,
    // in alternate bursts: the request head is complete and the body never comes (the kind
    // that holds a request worker), or the head itself never completes.
    let real = |x: &Ctx, method: &str| format!("/bot{}/{method}", x.real_token);
    // Small bodies may be read by a connection thread before dispatch, larger ones by the
    // worker: both sizes are there.
    c.add("stall body 100 B announced, none sent /healthz", Read, |_| post("/healthz", "Content-Length: 100\r\n", b""))
        .stall_body();
    c.add("stall body 100 KB announced, none sent /healthz", Read, |_| {
        post("/healthz", "Content-Length: 100000\r\n", b"")
    })
    .stall_body();
    c.add("stall expect 100-continue, no body /healthz", Read, |_| {
        post("/healthz", "Expect: 100-continue\r\nContent-Length: 100000\r\n", b"")
    })
    .stall_body();
    c.add("stall expect 100-continue, no body sendMessage", Read, move |x| {
        post(&real(x, "sendMessage"), &format!("{JSON}Expect: 100-continue\r\nContent-Length: 100000\r\n"), b"")
    })
    .stall_body();
    c.add("stall body 100 KB announced, none sent getMe", Read, move |x| {
        post(&real(x, "getMe"), "Content-Length: 100000\r\n", b"")
    })
    .stall_body();
    c.add("stall body 100 KB announced, none sent sendMessage", Read, move |x| {
        post(&real(x, "sendMessage"), &format!("{JSON}Content-Length: 100000\r\n"), b"")
    })
    .stall_body();
    c.add("stall 10 of 100 KB body bytes sendMessage", Read, move |x| {
        post(&real(x, "sendMessage"), &format!("{JSON}Content-Length: 100000\r\n"), &NOBODY.as_bytes()[..10])
    })
    .stall_body()
    .cut_off();
    c.add("stall chunked, no last chunk sendMessage", Read, move |x| {
        post(
            &real(x, "sendMessage"),
            &format!("{JSON}Transfer-Encoding: chunked\r\n"),
            &chunked(NOBODY.as_bytes())[..chl - 5],
        )
    })
    .stall_body()
    .cut_off();
    c.add("stall partial headers", Read, |_| b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".to_vec()).stall();
    c.add("stall partial request line", Read, |_| b"GET /heal".to_vec()).stall();
    c.add("stall bare-lf request", Read, |_| b"GET /healthz HTTP/1.1\nHost: 127.0.0.1\n\n".to_vec()).stall();
    c.add("stall bare-cr request", Read, |_| b"GET /healthz HTTP/1.1\rHost: 127.0.0.1\r\r".to_vec()).stall();
    c.add("stall tls client hello", Read, |_| {
        cat(&[&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03], &noise(11, 200)])
    })
    .stall();
    c.add("stall connect, send nothing", Read, |_| Vec::new()).stall();

    c.0
}

// ───────────────────────────── one request ─────────────────────────────

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// A final status line; `extra` further final responses followed on the same connection.
    Status {
        code: u16,
        extra: usize,
        executed: bool,
    },
    /// Bytes came back, but not an HTTP/1.x status line.
    NonHttp,
    /// The server closed (or reset) the connection without a response.
    Closed,
    /// Neither an answer nor a close within the deadline.
    Hang,
    Refused,
    ConnectTimeout,
    ConnectError(String),
    /// The client closed on purpose without reading.
    ClientClosed,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

struct Parsed {
    /// Final (non-1xx, or 101) statuses in order.
    finals: Vec<u16>,
    /// The first final response's body is complete.
    first_complete: bool,
    /// The bytes are not an HTTP/1.x response.
    non_http: bool,
}

fn parse_responses(buf: &[u8]) -> Parsed {
    let mut out = Parsed { finals: Vec::new(), first_complete: false, non_http: false };
    let mut p = 0;
    while p < buf.len() {
        let rest = &buf[p..];
        if rest.len() < 5 {
            if !b"HTTP/".starts_with(rest) && out.finals.is_empty() {
                out.non_http = true;
            }
            break;
        }
        if !rest.starts_with(b"HTTP/") {
            if out.finals.is_empty() {
                out.non_http = true;
            }
            break;
        }
        let Some(he) = find(rest, b"\r\n\r\n") else { break };
        let head = String::from_utf8_lossy(&rest[..he]).to_ascii_lowercase();
        let head_end = p + he + 4;
        let code = head.lines().next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse::<u16>().ok());
        let Some(code) = code else {
            if out.finals.is_empty() {
                out.non_http = true;
            }
            break;
        };
        if (100..200).contains(&code) && code != 101 {
            p = head_end;
            continue;
        }
        out.finals.push(code);
        let header = |name: &str| head.lines().skip(1).find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()));
        let body_end = if header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
            find(&buf[head_end..], b"0\r\n\r\n").map(|i| head_end + i + 5)
        } else if let Some(len) = header("content-length:").and_then(|v| v.parse::<usize>().ok()) {
            (buf.len() >= head_end + len).then_some(head_end + len)
        } else if matches!(code, 101 | 204 | 304) {
            Some(head_end)
        } else {
            None
        };
        match body_end {
            Some(e) => {
                if out.finals.len() == 1 {
                    out.first_complete = true;
                }
                p = e;
            }
            None => break,
        }
    }
    out
}

fn set_linger_zero(s: &TcpStream) {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket descriptor and a correctly sized `linger` value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

fn run_one(addr: SocketAddr, bytes: &[u8], case: &Case, timeout: Duration) -> Outcome {
    let start = Instant::now();
    let mut deadline = start + timeout;
    let mut s = match TcpStream::connect_timeout(&addr, Duration::from_secs(5).min(timeout)) {
        Ok(s) => s,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Outcome::Refused,
        Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => return Outcome::ConnectTimeout,
        Err(e) => return Outcome::ConnectError(e.kind().to_string()),
    };
    let _ = s.set_nodelay(true);
    let left = |d: Instant| d.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    let _ = s.set_write_timeout(Some(left(deadline)));
    // A write error (the server closed, reset, or stopped reading) still lets us read what came.
    let _ = s.write_all(bytes);
    match case.after {
        After::Drop => return Outcome::ClientClosed,
        After::Reset => {
            set_linger_zero(&s);
            return Outcome::ClientClosed;
        }
        After::HalfClose => {
            let _ = s.shutdown(Shutdown::Write);
        }
        After::Read => {}
    }
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut grace_set = false;
    let mut timed_out = false;
    loop {
        let now = Instant::now();
        if now >= deadline {
            timed_out = true;
            break;
        }
        let _ = s.set_read_timeout(Some(left(deadline)));
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                timed_out = true;
                break;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        if buf.len() > (1 << 20) {
            break;
        }
        let parsed = parse_responses(&buf);
        if !parsed.finals.is_empty() {
            if !case.watch_extra && (!case.must_not_execute || parsed.first_complete) {
                break;
            }
            if !grace_set {
                // Wait a little for the body (to see what was executed) or for a second
                // response (smuggling); an answer was given, so this is never a hang.
                let grace = if case.watch_extra { Duration::from_secs(3) } else { Duration::from_secs(2) };
                deadline = deadline.min(Instant::now() + grace);
                grace_set = true;
            }
        } else if parsed.non_http && !grace_set {
            deadline = deadline.min(Instant::now() + Duration::from_secs(2));
            grace_set = true;
        }
    }
    let parsed = parse_responses(&buf);
    if let Some(&code) = parsed.finals.first() {
        let executed = find(&buf, b"chat not found").is_some();
        return Outcome::Status { code, extra: parsed.finals.len() - 1, executed };
    }
    if !buf.is_empty() && (parsed.non_http || grace_set) {
        return Outcome::NonHttp;
    }
    // Nothing (or only part of a status line) came back.
    if timed_out {
        Outcome::Hang
    } else {
        Outcome::Closed
    }
}

// ───────────────────────────── process figures ─────────────────────────────

#[derive(Clone, Copy, Debug)]
struct Snap {
    rss_kib: u64,
    threads: u64,
    fds: u64,
}

fn snap(pid: u32) -> Option<Snap> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let state = status.lines().find_map(|l| l.strip_prefix("State:")).and_then(|v| v.trim().chars().next());
    if matches!(state, Some('Z' | 'X' | 'x')) {
        return None;
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Snap { rss_kib: field("VmRSS:")?, threads: field("Threads:")?, fds })
}

/// The gateway's threads (by name, digits as `#`) and descriptors (by kind; TCP sockets by state
/// and port), counted, so that what a barrage left behind can be named.
fn inventory(pid: u32, ports: &[(u16, &str)]) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(name) = std::fs::read_to_string(t.path().join("comm")) {
                let name: String = name.trim().chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
                *m.entry(format!("thread {name}")).or_default() += 1;
            }
        }
    }
    let tcp = tcp_sockets(pid, ports);
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            let target = std::fs::read_link(fd.path()).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
            let label = match target.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                Some(inode) => tcp.get(inode).cloned().unwrap_or_else(|| "fd socket (not TCP)".into()),
                None if target.starts_with("pipe:") => "fd pipe".into(),
                None => format!("fd {target}"),
            };
            *m.entry(label).or_default() += 1;
        }
    }
    m
}

/// TCP sockets of the process's network namespace: inode → "fd tcp STATE on/to the X port".
fn tcp_sockets(pid: u32, ports: &[(u16, &str)]) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::new();
    for file in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 {
                continue;
            }
            let port = |a: &str| a.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok()).unwrap_or(0);
            let (local, remote) = (port(f[1]), port(f[2]));
            let state = match f[3] {
                "01" => "ESTABLISHED",
                "02" => "SYN_SENT",
                "03" => "SYN_RECV",
                "04" => "FIN_WAIT1",
                "05" => "FIN_WAIT2",
                "06" => "TIME_WAIT",
                "07" => "CLOSE",
                "08" => "CLOSE_WAIT",
                "09" => "LAST_ACK",
                "0A" => "LISTEN",
                "0B" => "CLOSING",
                other => other,
            };
            let side = match (ports.iter().find(|(p, _)| *p == local), ports.iter().find(|(p, _)| *p == remote)) {
                (Some((_, name)), _) => format!("on the {name} port"),
                (None, Some((_, name))) => format!("to the {name} port"),
                (None, None) => format!("to :{remote}"),
            };
            out.insert(f[9].to_string(), format!("fd tcp {state} {side}"));
        }
    }
    out
}

/// What `after` has more (or fewer) of than `before`, e.g. "+12 fd tcp CLOSE_WAIT on the Bot API port".
fn inventory_diff(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> String {
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let parts: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let d = after.get(k).copied().unwrap_or(0) - before.get(k).copied().unwrap_or(0);
            (d != 0).then(|| format!("{d:+} {k}"))
        })
        .collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
}

/// The figures the soak judges, from an inventory: threads other than gRPC core's own (which
/// starts and ends its timer and executor threads by its own load), descriptors other than
/// files in the state directory, and those files (the store's pool of SQLite readers).
#[derive(Clone, Copy, Debug, Default)]
struct Judged {
    threads: i64,
    grpc_threads: i64,
    fds: i64,
    state_fds: i64,
}

fn judged(inv: &BTreeMap<String, i64>, state_dir: &str) -> Judged {
    let mut j = Judged::default();
    for (k, n) in inv {
        if let Some(name) = k.strip_prefix("thread ") {
            if name.starts_with("grpc") {
                j.grpc_threads += n;
            } else {
                j.threads += n;
            }
        } else if k.strip_prefix("fd ").is_some_and(|t| !state_dir.is_empty() && t.starts_with(state_dir)) {
            j.state_fds += n;
        } else {
            j.fds += n;
        }
    }
    j
}

impl Snap {
    /// The larger of each figure.
    fn max(&self, o: &Snap) -> Snap {
        Snap { rss_kib: self.rss_kib.max(o.rss_kib), threads: self.threads.max(o.threads), fds: self.fds.max(o.fds) }
    }
}

/// The gateway's figures before a phase.
struct Baseline {
    snap: Snap,
    inventory: BTreeMap<String, i64>,
    judged: Judged,
}

/// The gateway's figures once it settled after a phase.
#[derive(Default)]
struct Settled {
    after: Option<Snap>,
    judged: Option<Judged>,
    left_behind: Option<String>,
    took: Duration,
    died: Option<String>,
}

/// Polls the gateway (every 250 ms, up to SOAK_SETTLE_SECS) until its threads and descriptors
/// are back within the slack of `base`; returns what it last saw.
fn settle(child: &mut std::process::Child, pid: u32, ports: &[(u16, &str)], state_dir: &str, base: &Baseline, cfg: &Cfg) -> Settled {
    let start = Instant::now();
    let mut out = Settled::default();
    let mut inventory_after = None;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            out.died = Some(format!("{status}"));
            break;
        }
        out.after = snap(pid);
        inventory_after = out.after.map(|_| inventory(pid, ports));
        let within = inventory_after.as_ref().is_some_and(|inv| cfg.within(&base.judged, &judged(inv, state_dir)));
        if within || start.elapsed() >= cfg.settle {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    out.took = start.elapsed();
    out.judged = inventory_after.as_ref().map(|inv| judged(inv, state_dir));
    out.left_behind = inventory_after.as_ref().map(|inv| inventory_diff(&base.inventory, inv));
    out
}

impl Settled {
    /// Figures over their slack.
    fn failures(&self, phase: &str, base: &Baseline, cfg: &Cfg) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(j) = &self.judged {
            let b = &base.judged;
            if j.threads > b.threads + cfg.thread_slack as i64 {
                out.push(format!("{phase}: threads {} → {} (allowed +{})", b.threads, j.threads, cfg.thread_slack));
            }
            if j.fds > b.fds + cfg.fd_slack as i64 {
                out.push(format!("{phase}: descriptors {} → {} (allowed +{})", b.fds, j.fds, cfg.fd_slack));
            }
            if j.state_fds > b.state_fds + cfg.state_fd_slack as i64 {
                out.push(format!(
                    "{phase}: state-dir files open {} → {} (allowed +{})",
                    b.state_fds, j.state_fds, cfg.state_fd_slack
                ));
            }
        }
        if let Some(a) = &self.after {
            if a.rss_kib > base.snap.rss_kib + cfg.rss_slack_kib {
                out.push(format!(
                    "{phase}: RSS {} → {} (allowed +{})",
                    mib(base.snap.rss_kib),
                    mib(a.rss_kib),
                    mib(cfg.rss_slack_kib)
                ));
            }
        }
        out
    }

    /// Report rows: each figure before → after (with the peak, and the half-way figure when
    /// there is one), what is judged, what was left behind, the settle time.
    fn rows(&self, base: &Baseline, peak: &Snap, half: Option<&Snap>, cfg: &Cfg) -> Vec<(String, String)> {
        let fmt = |f: fn(&Snap) -> String| {
            format!(
                "{} → {} ({}peak {})",
                f(&base.snap),
                self.after.as_ref().map(f).unwrap_or_else(|| "—".into()),
                half.map(|h| format!("half-way {}, ", f(h))).unwrap_or_default(),
                f(peak)
            )
        };
        let mut rows = vec![
            ("RSS before → after".to_string(), fmt(|s| mib(s.rss_kib))),
            ("threads before → after".to_string(), fmt(|s| s.threads.to_string())),
            ("descriptors before → after".to_string(), fmt(|s| s.fds.to_string())),
        ];
        if let Some(j) = &self.judged {
            let b = &base.judged;
            rows.push((
                "judged after settling".into(),
                format!(
                    "threads (gRPC core's own excepted) {} → {} (allowed +{}); descriptors (state-dir files \
                     excepted) {} → {} (allowed +{}); state-dir files {} → {} (allowed +{}); gRPC core threads \
                     {} → {} (not judged)",
                    b.threads,
                    j.threads,
                    cfg.thread_slack,
                    b.fds,
                    j.fds,
                    cfg.fd_slack,
                    b.state_fds,
                    j.state_fds,
                    cfg.state_fd_slack,
                    b.grpc_threads,
                    j.grpc_threads
                ),
            ));
        }
        if let Some(d) = &self.left_behind {
            rows.push(("threads and descriptors after vs before".into(), d.clone()));
        }
        rows.push((
            "settle time".into(),
            format!("{:.1} s (limit {} s); RSS allowed +{}", self.took.as_secs_f64(), cfg.settle.as_secs(), mib(cfg.rss_slack_kib)),
        ));
        rows
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

// ───────────────────────────── legitimate calls ─────────────────────────────

/// A ureq error without its URL (the URL carries the bot token).
fn ureq_err(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Status(code, _) => format!("status {code}"),
        ureq::Error::Transport(t) => {
            let mut out = t.kind().to_string();
            if let Some(m) = t.message() {
                out += &format!(": {m}");
            }
            if let Some(source) = std::error::Error::source(t) {
                out += &format!(" ({source})");
            }
            out
        }
    }
}

/// One Bot API call with a JSON body on `agent` (its timeout bounds it); never panics.
fn api(agent: &ureq::Agent, base: &str, token: &str, method: &str, params: Value) -> Result<(u16, Value), String> {
    match agent.post(&format!("{base}/bot{token}/{method}")).send_json(params) {
        Ok(resp) => {
            let status = resp.status();
            resp.into_json::<Value>().map(|v| (status, v)).map_err(|e| format!("{method}: body: {e}"))
        }
        Err(ureq::Error::Status(code, resp)) => Ok((code, resp.into_json().unwrap_or(Value::Null))),
        Err(e) => Err(format!("{method}: {}", ureq_err(&e))),
    }
}

/// A `getMe` on `agent`'s pooled connection, as a bot's SDK makes it.
fn get_me(agent: &ureq::Agent, base: &str, token: &str) -> Result<(), String> {
    match agent.get(&format!("{base}/bot{token}/getMe")).call() {
        Ok(resp) => {
            let v: Value = resp.into_json().map_err(|e| format!("getMe body: {e}"))?;
            if v["ok"] == true {
                Ok(())
            } else {
                Err(format!("getMe answered {v}"))
            }
        }
        Err(ureq::Error::Status(code, _)) => Err(format!("getMe status {code}")),
        Err(e) => Err(format!("getMe: {}", ureq_err(&e))),
    }
}

/// Agent for one thread of legitimate calls: one pooled connection, as an SDK keeps.
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(timeout).build()
}

/// Legitimate calls: how many, which failed, which were slow.
#[derive(Default)]
struct Legit {
    calls: u64,
    failed: u64,
    slow: u64,
    max: Duration,
    errors: Vec<String>,
}

impl Legit {
    fn record(&mut self, what: &str, result: Result<(), String>, took: Duration, slow: Duration) {
        self.calls += 1;
        self.max = self.max.max(took);
        if took > slow {
            self.slow += 1;
        }
        if let Err(e) = result {
            self.failed += 1;
            if self.errors.len() < 5 {
                self.errors.push(format!("{what}: {e} ({} ms)", took.as_millis()));
            }
        }
    }
}

// ───────────────────────────── tallies ─────────────────────────────

#[derive(Default, Clone)]
struct Tally {
    sent: u64,
    statuses: BTreeMap<u16, u64>,
    non_http: u64,
    closed: u64,
    hangs: u64,
    refused: u64,
    connect_timeouts: u64,
    connect_errors: u64,
    connect_error: Option<String>,
    client_closed: u64,
    extra: u64,
    executed: u64,
    max_ms: u128,
}

fn is_server_error(code: u16) -> bool {
    (500..600).contains(&code) && code != 501 && code != 505
}

impl Tally {
    fn add(&mut self, case: &Case, o: &Outcome, took: Duration) {
        self.sent += 1;
        self.max_ms = self.max_ms.max(took.as_millis());
        match o {
            Outcome::Status { code, extra, executed } => {
                *self.statuses.entry(*code).or_default() += 1;
                if case.watch_extra && *extra > 0 {
                    self.extra += 1;
                }
                if case.must_not_execute && *executed {
                    self.executed += 1;
                }
            }
            Outcome::NonHttp => self.non_http += 1,
            Outcome::Closed => self.closed += 1,
            Outcome::Hang => self.hangs += 1,
            Outcome::Refused => self.refused += 1,
            Outcome::ConnectTimeout => self.connect_timeouts += 1,
            Outcome::ConnectError(e) => {
                self.connect_errors += 1;
                self.connect_error.get_or_insert_with(|| e.clone());
            }
            Outcome::ClientClosed => self.client_closed += 1,
        }
    }

    fn merge(&mut self, o: &Tally) {
        self.sent += o.sent;
        for (k, v) in &o.statuses {
            *self.statuses.entry(*k).or_default() += v;
        }
        self.non_http += o.non_http;
        self.closed += o.closed;
        self.hangs += o.hangs;
        self.refused += o.refused;
        self.connect_timeouts += o.connect_timeouts;
        self.connect_errors += o.connect_errors;
        if self.connect_error.is_none() {
            self.connect_error = o.connect_error.clone();
        }
        self.client_closed += o.client_closed;
        self.extra += o.extra;
        self.executed += o.executed;
        self.max_ms = self.max_ms.max(o.max_ms);
    }

    fn server_errors(&self) -> u64 {
        self.statuses.iter().filter(|(k, _)| is_server_error(**k)).map(|(_, v)| v).sum()
    }

    fn statuses_text(&self) -> String {
        if self.statuses.is_empty() {
            return "-".into();
        }
        self.statuses.iter().map(|(k, v)| format!("{k}×{v}")).collect::<Vec<_>>().join(" ")
    }

    fn bad(&self) -> bool {
        self.hangs + self.refused + self.connect_timeouts + self.extra + self.executed + self.server_errors() > 0
    }
}

// ───────────────────────────── the plan ─────────────────────────────

/// Which case (and token variant) each request uses: the normal cases in turn, and at most
/// `stalls` stalling ones in bursts of `burst` consecutive requests (so that they stall
/// together, as many clients at once), the bursts spread evenly over the run and alternating
/// between missing bodies and incomplete heads.
fn plan(cases: &[Case], requests: usize, stalls: usize, burst: usize) -> Vec<(usize, usize)> {
    let normal: Vec<usize> = (0..cases.len()).filter(|&i| !cases[i].stall).collect();
    let kinds: [Vec<usize>; 2] = [
        (0..cases.len()).filter(|&i| cases[i].stall && cases[i].stall_body).collect(),
        (0..cases.len()).filter(|&i| cases[i].stall && !cases[i].stall_body).collect(),
    ];
    let any_stall = kinds.iter().any(|k| !k.is_empty());
    let k = if any_stall { stalls.min(requests) } else { 0 };
    let total = if normal.is_empty() { k } else { requests };
    // For each position: None, or Some(kind of stall).
    let mut stall_at: Vec<Option<usize>> = vec![None; total];
    if k > 0 {
        let burst = burst.clamp(1, k);
        let bursts = k.div_ceil(burst);
        let mut placed = 0;
        for b in 0..bursts {
            let kind = if kinds[b % 2].is_empty() { (b + 1) % 2 } else { b % 2 };
            let size = burst.min(k - placed);
            let mut pos =
                if normal.is_empty() { placed } else { ((2 * b + 1) * total / (2 * bursts)).min(total - size) };
            for _ in 0..size {
                while stall_at[pos].is_some() {
                    pos = (pos + 1) % total;
                }
                stall_at[pos] = Some(kind);
                placed += 1;
            }
        }
    }
    let (mut n_i, mut s_i) = (0usize, [0usize; 2]);
    let mut out = Vec::with_capacity(total);
    for slot in stall_at {
        if let Some(kind) = slot {
            let list = &kinds[kind];
            let i = s_i[kind];
            out.push((list[i % list.len()], (i / list.len()) % TOKEN_VARIANTS.len()));
            s_i[kind] += 1;
        } else {
            out.push((normal[n_i % normal.len()], (n_i / normal.len()) % TOKEN_VARIANTS.len()));
            n_i += 1;
        }
    }
    out
}

// ───────────────────────────── main ─────────────────────────────

fn main() {
    std::process::exit(run());
}

fn run() -> i32 {
    let cfg = Cfg::from_env();
    let mut cases = all_cases();
    cases.retain(|c| {
        (cfg.only.is_empty() || cfg.only.iter().any(|s| c.name.contains(s.as_str())))
            && !cfg.skip.iter().any(|s| c.name.contains(s.as_str()))
    });
    if cases.is_empty() {
        eprintln!("soak: SOAK_ONLY/SOAK_SKIP left no cases");
        return 2;
    }

    eprintln!("soak: starting the platform server and the gateway");
    let mut world = World::start("soak_bot");
    let pid = world.gateway.proc.child.id();
    let base = world.gateway.base.clone();
    let token = world.gateway.token.clone();
    let addr: SocketAddr = base.trim_start_matches("http://").parse().expect("compat address");
    assert!(addr.ip().is_loopback(), "the soak only talks to loopback");
    let mut user = world.user("soak_user");
    let bot = format!("@{}", world.bot_username());

    // ── Warm-up and baseline ──
    let warm = agent(Duration::from_secs(20));
    for i in 0..50 {
        if let Err(e) = get_me(&warm, &base, &token) {
            eprintln!("soak: warm-up getMe {i} failed: {e}; gateway stderr:\n{}", world.gateway.proc.stderr_text());
            return 1;
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let Some(before) = snap(pid) else {
        eprintln!("soak: cannot read /proc/{pid}");
        return 1;
    };
    let port_of =
        |url: &str| url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse::<u16>().ok()).unwrap_or(0);
    let ports = [
        (addr.port(), "Bot API"),
        (port_of(&world.gateway.ext_base), "extensions"),
        (port_of(&world.platform.url), "platform"),
    ];
    let inventory_before = inventory(pid, &ports);
    let state_dir = std::fs::read(&world.gateway.config_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|c| c["state_dir"].as_str().map(|s| s.trim_end_matches('/').to_string() + "/"))
        .unwrap_or_default();
    let judged_before = judged(&inventory_before, &state_dir);

    // ── Barrage ──
    // Another value in the secret's last hex digit (the secret is read in either case, so
    // changing only the case, 'a' to 'A', would still be the real token).
    let wrong_token = {
        let mut t = token.clone().into_bytes();
        let last = t.last_mut().expect("token");
        *last = if *last == b'0' { b'1' } else { b'0' };
        String::from_utf8(t).expect("ascii token")
    };
    assert!(
        bot_gateway::wire::token::parse(&wrong_token).map(|w| w.secret) != bot_gateway::wire::token::parse(&token).map(|t| t.secret),
        "the wrong token must be another secret"
    );
    let ctxs: Vec<Ctx> = [format!("/bot{token}"), format!("/bot{wrong_token}"), "/bot".to_string()]
        .into_iter()
        .map(|prefix| Ctx { prefix, real_token: token.clone() })
        .collect();
    let cases = Arc::new(cases);
    let ctxs = Arc::new(ctxs);
    let plan = Arc::new(plan(&cases, cfg.requests, cfg.stalls, cfg.stall_burst));
    let planned = plan.len();
    let stall_count = plan.iter().filter(|(c, _)| cases[*c].stall).count();
    eprintln!(
        "soak: {planned} requests over {} cases ({stall_count} stalling), {} clients, read deadline {} s; baseline RSS {} threads {} fds {}",
        cases.len(),
        cfg.clients,
        cfg.read_timeout.as_secs(),
        mib(before.rss_kib),
        before.threads,
        before.fds
    );

    let next = Arc::new(AtomicUsize::new(0));
    let sent = Arc::new(AtomicUsize::new(0));
    let hangs = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tallies: Arc<Mutex<Vec<Tally>>> = Arc::new(Mutex::new(vec![Tally::default(); cases.len()]));
    let started = Instant::now();

    let mut clients = Vec::new();
    for t in 0..cfg.clients {
        let (cases, ctxs, plan, next, sent, hangs, refused, stopping, tallies) = (
            cases.clone(),
            ctxs.clone(),
            plan.clone(),
            next.clone(),
            sent.clone(),
            hangs.clone(),
            refused.clone(),
            stop.clone(),
            tallies.clone(),
        );
        let (read_timeout, max_hangs, max_run) = (cfg.read_timeout, cfg.max_hangs, cfg.max_run);
        let spawned = std::thread::Builder::new().name(format!("soak-client-{t}")).spawn(move || loop {
            if stopping.load(Ordering::SeqCst)
                || started.elapsed() > max_run
                || hangs.load(Ordering::SeqCst) >= max_hangs
            {
                return;
            }
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(&(ci, vi)) = plan.get(i) else { return };
            let case = &cases[ci];
            let bytes = (case.build)(&ctxs[if case.tokened { vi } else { 0 }]);
            sent.fetch_add(1, Ordering::SeqCst);
            let t0 = Instant::now();
            let outcome = run_one(addr, &bytes, case, read_timeout);
            let took = t0.elapsed();
            if matches!(outcome, Outcome::Hang | Outcome::ConnectTimeout) {
                hangs.fetch_add(1, Ordering::SeqCst);
            }
            if outcome == Outcome::Refused {
                // A dead process or a dead listener: the rest would only be refused too.
                let n = refused.fetch_add(1, Ordering::SeqCst) + 1;
                if snap(pid).is_none() || n >= REFUSED_STOP {
                    stopping.store(true, Ordering::SeqCst);
                }
            }
            tallies.lock().expect("tallies")[ci].add(case, &outcome, took);
        });
        match spawned {
            Ok(h) => clients.push(h),
            Err(e) => {
                eprintln!("soak: cannot start client thread {t}: {e}");
                stop.store(true, Ordering::SeqCst);
                break;
            }
        }
    }

    let legit = Arc::new(Mutex::new(Legit::default()));
    let barrage_done = Arc::new(AtomicBool::new(false));
    let legit_thread = {
        let (legit, done, sent, stop) = (legit.clone(), barrage_done.clone(), sent.clone(), stop.clone());
        let (base, token, slow) = (base.clone(), token.clone(), cfg.legit_slow);
        std::thread::Builder::new()
            .name("soak-legit".into())
            .spawn(move || {
                let agent = agent(Duration::from_secs(20));
                let mut next_mark = 100usize;
                let mut last = Instant::now();
                while !done.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
                    let n = sent.load(Ordering::SeqCst);
                    if n < next_mark && last.elapsed() < Duration::from_secs(1) {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    next_mark = (n / 100 + 1) * 100;
                    last = Instant::now();
                    let result = get_me(&agent, &base, &token);
                    let what = format!("after {n} hostile requests");
                    legit.lock().expect("legit").record(&what, result, last.elapsed(), slow);
                }
            })
            .expect("spawn legit thread")
    };

    // Watch the gateway while the clients work.
    let mut peak = before;
    let mut half: Option<Snap> = None;
    let mut died: Option<String> = None;
    let mut last_report = Instant::now();
    while clients.iter().any(|h| !h.is_finished()) {
        if died.is_none() {
            if let Ok(Some(status)) = world.gateway.proc.child.try_wait() {
                died = Some(format!("{status}"));
                stop.store(true, Ordering::SeqCst);
                eprintln!("soak: the gateway exited ({status}) after {} requests", sent.load(Ordering::SeqCst));
            } else if let Some(s) = snap(pid) {
                peak = Snap {
                    rss_kib: peak.rss_kib.max(s.rss_kib),
                    threads: peak.threads.max(s.threads),
                    fds: peak.fds.max(s.fds),
                };
                if half.is_none() && sent.load(Ordering::SeqCst) >= planned / 2 {
                    half = Some(s);
                }
            }
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            let now = snap(pid);
            eprintln!(
                "soak: {:>5}/{planned} sent, {} hangs, {:.0} s; gateway {}",
                sent.load(Ordering::SeqCst),
                hangs.load(Ordering::SeqCst),
                started.elapsed().as_secs_f64(),
                now.map(|s| format!("RSS {} threads {} fds {}", mib(s.rss_kib), s.threads, s.fds))
                    .unwrap_or_else(|| "gone".into())
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for h in clients {
        let _ = h.join();
    }
    let barrage_time = started.elapsed();
    barrage_done.store(true, Ordering::SeqCst);
    let _ = legit_thread.join();
    let sent_n = sent.load(Ordering::SeqCst);
    if died.is_none() {
        // The clients may have stopped on a refused connection before the watch loop saw it.
        if let Ok(Some(status)) = world.gateway.proc.child.try_wait() {
            died = Some(format!("{status}"));
        }
    }
    let stopped_early = if died.is_some() {
        Some("the gateway died")
    } else if refused.load(Ordering::SeqCst) >= REFUSED_STOP {
        Some("the listener refuses connections")
    } else if hangs.load(Ordering::SeqCst) >= cfg.max_hangs {
        Some("too many hangs (SOAK_MAX_HANGS)")
    } else if sent_n < planned && barrage_time >= cfg.max_run {
        Some("time limit (SOAK_MAX_SECS)")
    } else if sent_n < planned {
        Some("a client thread could not be started")
    } else {
        None
    };

    // ── Settle, after-figures ──
    let baseline = Baseline { snap: before, inventory: inventory_before, judged: judged_before };
    let settled = if died.is_none() { settle(&mut world.gateway.proc.child, pid, &ports, &state_dir, &baseline, &cfg) } else { Settled::default() };
    died = died.or(settled.died.clone());

    // ── The attack phase ──
    let attack = if died.is_none() && cfg.attack_secs > 0 {
        let workers = world.gateway.health()["bot_api"]["workers"].as_u64().unwrap_or(36) as usize;
        let ext: SocketAddr = world.gateway.ext_base.trim_start_matches("http://").parse().expect("extensions address");
        let username = world.bot_username();
        let target = attack::Target {
            bot_api: addr,
            ext,
            base: &base,
            ext_base: &world.gateway.ext_base,
            token: &token,
            wrong_token: &wrong_token,
            bot_username: &username,
            workers,
            legit_slow: cfg.legit_slow,
        };
        let attack_before = snap(pid).expect("the gateway runs");
        let inventory = inventory(pid, &ports);
        let attack_base = Baseline { snap: attack_before, judged: judged(&inventory, &state_dir), inventory };
        eprintln!(
            "soak: attack phase, {} s, {workers} Bot API workers; RSS {} threads {} fds {}",
            cfg.attack_secs,
            mib(attack_before.rss_kib),
            attack_before.threads,
            attack_before.fds
        );
        let mut attack_peak = attack_before;
        let mut attack_half = None;
        let half_time = Instant::now() + Duration::from_secs(cfg.attack_secs) / 2;
        let child = &mut world.gateway.proc.child;
        let mut findings = attack::run(&target, &mut user, &bot, cfg.attack_secs, || {
            if !matches!(child.try_wait(), Ok(None)) {
                return false;
            }
            if let Some(s) = snap(pid) {
                attack_peak = attack_peak.max(&s);
                if attack_half.is_none() && Instant::now() >= half_time {
                    attack_half = Some(s);
                }
            }
            true
        });
        let after = settle(&mut world.gateway.proc.child, pid, &ports, &state_dir, &attack_base, &cfg);
        died = died.or(after.died.clone());
        findings.failures.extend(after.failures("attack phase", &attack_base, &cfg));
        findings.rows.extend(after.rows(&attack_base, &attack_peak, attack_half.as_ref(), &cfg));
        Some(findings)
    } else {
        None
    };

    // ── End to end ──
    if died.is_none() {
        if let Ok(Some(status)) = world.gateway.proc.child.try_wait() {
            died = Some(format!("{status}"));
        }
    }
    let e2e: Result<String, String> = if died.is_some() {
        Err("skipped: the gateway is not running".into())
    } else {
        end_to_end(&user, &bot, &base, &token)
    };
    if died.is_none() {
        if let Ok(Some(status)) = world.gateway.proc.child.try_wait() {
            died = Some(format!("{status}"));
        }
    }

    // ── Report ──
    let tallies = tallies.lock().expect("tallies").clone();
    let mut total = Tally::default();
    tallies.iter().for_each(|t| total.merge(t));
    let legit = std::mem::take(&mut *legit.lock().expect("legit"));

    println!("\n| case | sent | statuses | no-resp close | non-HTTP | hang | refused | max ms | note |\n|---|---|---|---|---|---|---|---|---|");
    for (c, t) in cases.iter().zip(&tallies) {
        if t.sent == 0 {
            continue;
        }
        let mut note = Vec::new();
        if t.server_errors() > 0 {
            note.push(format!("{} 5xx", t.server_errors()));
        }
        if t.extra > 0 {
            note.push(format!("{} SMUGGLED", t.extra));
        }
        if t.executed > 0 {
            note.push(format!("{} cut-off body EXECUTED", t.executed));
        }
        if t.connect_timeouts > 0 {
            note.push(format!("{} connect timeouts", t.connect_timeouts));
        }
        if t.connect_errors > 0 {
            note.push(format!("{} connect errors ({})", t.connect_errors, t.connect_error.as_deref().unwrap_or("?")));
        }
        if t.client_closed > 0 {
            note.push("client closes on purpose".into());
        }
        println!(
            "| {}{} | {} | {} | {} | {} | {} | {} | {} | {}{} |",
            c.name,
            if c.tokened { " [token: real/wrong/none]" } else { "" },
            t.sent,
            t.statuses_text(),
            t.closed,
            t.non_http,
            t.hangs,
            t.refused,
            t.max_ms,
            if t.bad() { "FAIL " } else { "" },
            note.join(", ")
        );
    }

    let mut failures: Vec<String> = Vec::new();
    if let Some(d) = &died {
        failures.push(format!("the gateway died ({d})"));
    }
    if total.hangs + total.connect_timeouts > 0 {
        failures.push(format!("{} hangs", total.hangs + total.connect_timeouts));
    }
    if total.server_errors() > 0 {
        failures.push(format!("{} 5xx answers", total.server_errors()));
    }
    if total.refused > 0 && died.is_none() {
        failures.push(format!("{} connections refused while the process lived (listener gone)", total.refused));
    }
    if total.extra > 0 {
        failures.push(format!("{} smuggled requests answered", total.extra));
    }
    if total.executed > 0 {
        failures.push(format!("{} cut-off bodies executed", total.executed));
    }
    if legit.failed > 0 {
        failures.push(format!("{} legitimate getMe calls failed", legit.failed));
    }
    if legit.slow > 0 {
        failures.push(format!("{} legitimate getMe calls over {} ms", legit.slow, cfg.legit_slow.as_millis()));
    }
    failures.extend(settled.failures("barrage", &baseline, &cfg));
    if let Some(attack) = &attack {
        failures.extend(attack.failures.iter().map(|f| format!("attack phase: {f}")));
    }
    if let Err(e) = &e2e {
        failures.push(format!("end to end: {e}"));
    }
    if let Some(why) = stopped_early {
        failures.push(format!("stopped early after {sent_n} of {planned} requests: {why}"));
    }

    println!("\n| soak figure | value |\n|---|---|");
    println!(
        "| hostile requests sent | {sent_n} of {planned} ({} cases, {stall_count} stalling planned, {} clients, {:.1} s){} |",
        cases.len(),
        cfg.clients,
        barrage_time.as_secs_f64(),
        stopped_early.map(|w| format!("; stopped early: {w}")).unwrap_or_default()
    );
    println!(
        "| crashes | {} |",
        match &died {
            None => "0 (process alive)".to_string(),
            Some(d) => format!("1 (gateway exited: {d})"),
        }
    );
    println!(
        "| hangs (no answer in {} s, or connect timeout) | {} |",
        cfg.read_timeout.as_secs(),
        total.hangs + total.connect_timeouts
    );
    println!("| 5xx (501 and 505 excepted) | {} |", total.server_errors());
    println!("| connections refused | {}{} |", total.refused, if died.is_some() { " (after the crash)" } else { "" });
    println!("| closed without a response | {} |", total.closed);
    println!("| answered without an HTTP/1.x status line | {} |", total.non_http);
    println!("| closed by the client on purpose (not read) | {} |", total.client_closed);
    println!("| smuggled requests answered | {} |", total.extra);
    println!("| cut-off bodies executed | {} |", total.executed);
    println!("| statuses | {} |", total.statuses_text());
    println!(
        "| legit getMe during barrage | {} calls, {} failed, {} over {} ms (max {} ms){} |",
        legit.calls,
        legit.failed,
        legit.slow,
        cfg.legit_slow.as_millis(),
        legit.max.as_millis(),
        if legit.errors.is_empty() { String::new() } else { format!("; first errors: {}", legit.errors.join("; ")) }
    );
    for (what, value) in settled.rows(&baseline, &peak, half.as_ref(), &cfg) {
        println!("| {what} | {value} |");
    }
    if let Some(attack) = &attack {
        println!("\n| attack phase ({} s) | connections | connect failures | statuses | rule breaks | first breaks |\n|---|---|---|---|---|---|", cfg.attack_secs);
        for (what, value) in attack.rows.iter().filter(|(w, _)| w.starts_with("attacker: ")) {
            println!("| {} | {value} |", what.trim_start_matches("attacker: "));
        }
        println!("\n| attack phase figure | value |\n|---|---|");
        for (what, value) in attack.rows.iter().filter(|(w, _)| !w.starts_with("attacker: ")) {
            println!("| {what} | {value} |");
        }
        println!("\n| after both phases | value |\n|---|---|");
    }
    println!(
        "| end-to-end message | {} |",
        match &e2e {
            Ok(s) => format!("OK ({s})"),
            Err(e) => format!("FAILED: {e}"),
        }
    );
    if failures.is_empty() {
        println!("| verdict | PASS |");
        0
    } else {
        println!("| verdict | FAIL: {} |", failures.join("; "));
        if died.is_some() {
            let err = world.gateway.proc.stderr_text();
            let tail: Vec<&str> = err.lines().rev().take(12).collect::<Vec<_>>().into_iter().rev().collect();
            println!("\ngateway stderr, last lines:\n{}", tail.join("\n"));
        }
        world.gateway.proc.kill();
        1
    }
}

/// A user sends the bot a message, the bot reads it with getUpdates and answers with
/// sendMessage, and the user receives the answer. Bounded in time; never panics.
fn end_to_end(user: &bot_gateway::client::Profile, bot: &str, base: &str, token: &str) -> Result<String, String> {
    let t0 = Instant::now();
    let agent = agent(Duration::from_secs(30));
    let nonce = format!(
        "{:x}",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    );
    let text = format!("soak check {nonce}");
    user.send_text(bot, &text).map_err(|e| format!("user send: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut offset = 0i64;
    let chat_id = loop {
        if Instant::now() >= deadline {
            return Err("the message did not reach getUpdates in 60 s".into());
        }
        let (status, body) = api(&agent, base, token, "getUpdates", json!({ "offset": offset, "timeout": 5 }))?;
        if status != 200 {
            return Err(format!("getUpdates answered {status}: {body}"));
        }
        let updates = body["result"].as_array().cloned().unwrap_or_default();
        let found =
            updates.iter().find(|u| u["message"]["text"] == text.as_str()).map(|u| u["message"]["chat"]["id"].clone());
        if let Some(last) = updates.last() {
            offset = last["update_id"].as_i64().unwrap_or(offset) + 1;
        }
        if let Some(id) = found {
            break id;
        }
    };
    let reply = format!("soak reply {nonce}");
    let (status, body) = api(&agent, base, token, "sendMessage", json!({ "chat_id": chat_id, "text": reply }))?;
    if status != 200 || body["ok"] != true {
        return Err(format!("sendMessage answered {status}: {body}"));
    }
    let got = user.receive(Duration::from_secs(30), 1).map_err(|e| format!("user receive: {e}"))?;
    match got.first() {
        Some(m) if m.text == reply && m.sender.is_bot => {
            // Acknowledge the update so nothing is left pending.
            let _ = api(&agent, base, token, "getUpdates", json!({ "offset": offset, "timeout": 0 }));
            Ok(format!("{:.1} s", t0.elapsed().as_secs_f64()))
        }
        Some(m) => Err(format!("the user received {:?} instead of the reply", m.text)),
        None => Err("the user received nothing in 30 s".into()),
    }
}
