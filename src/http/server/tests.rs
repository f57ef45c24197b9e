//! The server against raw, often hostile, clients on loopback.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::http::{Request, Response};

/// Echoes the body it read; `/slow` sleeps first; `/panic` panics; `/ignore` leaves the body.
#[derive(Default)]
struct Echo {
    handled: AtomicUsize,
}

impl Handler for Echo {
    fn handle(&self, rq: &mut Request<'_>) -> Response {
        self.handled.fetch_add(1, Ordering::SeqCst);
        match rq.target() {
            "/slow" => std::thread::sleep(Duration::from_millis(1500)),
            "/panic" => panic!("handler panic (expected by the test)"),
            "/ignore" => return Response::with_body(200, "text/plain", b"ignored".to_vec()),
            // More than the socket buffers hold: a client that does not read blocks its writer.
            "/big" => return Response::with_body(200, "application/octet-stream", vec![0u8; 32 << 20]).served(),
            _ => {}
        }
        let mut body = Vec::new();
        if rq.body().read_to_end(&mut body).is_err() {
            let e = rq.body_error().cloned().unwrap_or_else(|| HttpError::new(400, "no body error recorded"));
            self.handled.fetch_sub(1, Ordering::SeqCst);
            return self.error(&e);
        }
        // A client the handler trusts; `/untrusted` stands for a request without a token.
        let response = Response::with_body(200, "text/plain", [rq.target().as_bytes(), b" ", &body].concat());
        if rq.target().starts_with("/untrusted") {
            response
        } else {
            response.served()
        }
    }
}

struct Fixture {
    server: Option<Server>,
    handler: Arc<Echo>,
}

impl Fixture {
    fn new(limits: Limits) -> Fixture {
        let handler = Arc::new(Echo::default());
        let server = Server::start("test", "127.0.0.1:0", limits, Arc::clone(&handler) as Arc<dyn Handler>).expect("start");
        Fixture { server: Some(server), handler }
    }

    fn small() -> Fixture {
        Fixture::new(Limits { workers: 2, ..Limits::default() })
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.server.as_ref().expect("server").local_addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        s
    }

    /// Sends `raw`, half-closes, and reads everything until the server closes.
    fn exchange(&self, raw: &[u8]) -> String {
        let mut s = self.connect();
        s.write_all(raw).expect("write");
        let _ = s.shutdown(Shutdown::Write);
        read_all(&mut s)
    }

    fn handled(&self) -> usize {
        self.handler.handled.load(Ordering::SeqCst)
    }

    fn health(&self) -> HealthReport {
        self.server.as_ref().expect("server").health().report()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
    }
}

fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(response: &str) -> u16 {
    response.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn keep_alive_and_pipelining() {
    let f = Fixture::small();
    let got = f.exchange(
        b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
          2\r\nxy\r\n1;ext\r\nz\r\n0\r\nTrailer: t\r\n\r\nGET /c HTTP/1.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(got.matches("HTTP/1.1 200 OK").count(), 3, "{got}");
    assert!(got.contains("/a abc") && got.contains("/b xyz") && got.ends_with("/c "), "{got}");
    assert!(got.contains("Connection: keep-alive") && got.contains("Connection: close"), "{got}");
}

#[test]
fn huge_content_lengths_are_413_and_the_server_lives() {
    let f = Fixture::small();
    for len in ["4611686018427387904", "9223372036854775807", "9223372036854775808", "18446744073709551615", "42949672960"] {
        let got = f.exchange(format!("POST /x HTTP/1.1\r\nContent-Length: {len}\r\n\r\n").as_bytes());
        assert_eq!(status_of(&got), 413, "{len}: {got}");
        assert!(got.contains("Connection: close"), "{got}");
    }
    assert_eq!(f.handled(), 0);
    assert_eq!(status_of(&f.exchange(b"GET /ok HTTP/1.1\r\n\r\n")), 200);
}

#[test]
fn a_cut_off_body_is_400_and_never_handled_as_complete() {
    let f = Fixture::small();
    let got = f.exchange(b"POST /x HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly ten b");
    assert_eq!(status_of(&got), 400, "{got}");
    assert!(got.contains("ended before it was complete"), "{got}");
    let got = f.exchange(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort");
    assert_eq!(status_of(&got), 400, "{got}");
    assert_eq!(f.handled(), 0, "a cut-off body must not count as handled");
}

#[test]
fn other_http_versions_get_505_and_the_connection_closes() {
    let f = Fixture::small();
    for raw in [&b"GET / HTTP/2.0\r\n\r\n"[..], b"GET / HTTP/3.0\r\n\r\n", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"] {
        let got = f.exchange(raw);
        assert_eq!(status_of(&got), 505, "{got}");
    }
    // Bare LF heads are served, not hung.
    assert_eq!(status_of(&f.exchange(b"GET /lf HTTP/1.1\nHost: x\n\n")), 200);
}

#[test]
fn limits_on_the_head() {
    let f = Fixture::small();
    let long_line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(20_000));
    assert_eq!(status_of(&f.exchange(long_line.as_bytes())), 414);
    let big_header = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "b".repeat(40_000));
    assert_eq!(status_of(&f.exchange(big_header.as_bytes())), 431);
    assert_eq!(status_of(&f.exchange(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n")), 501);
    assert_eq!(status_of(&f.exchange(b"\x00\x01\x02 garbage\r\n\r\n")), 400);
}

#[test]
fn an_unread_body_is_never_taken_for_the_next_request() {
    let f = Fixture::small();
    // The chunked body carries what would be a second request if the connection went on.
    let got = f.exchange(
        b"POST /ignore HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
          2a\r\nGET /smuggled HTTP/1.1\r\nContent-Length: 0\r\n\r\n\r\n0\r\n\r\n",
    );
    assert_eq!(got.matches("HTTP/1.1").count(), 1, "{got}");
    assert!(got.contains("Connection: close") && !got.contains("smuggled"), "{got}");
    assert_eq!(f.handled(), 1);
}

#[test]
fn expect_continue_is_answered_when_the_body_is_read() {
    let f = Fixture::small();
    let mut s = f.connect();
    s.write_all(b"POST /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n").expect("write");
    let mut interim = [0u8; 25];
    s.read_exact(&mut interim).expect("100 Continue");
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"body").expect("body");
    s.shutdown(Shutdown::Write).expect("half-close");
    let got = read_all(&mut s);
    assert!(got.starts_with("HTTP/1.1 200") && got.ends_with("/e body"), "{got}");
}

#[test]
fn stalled_clients_are_evicted_for_new_ones() {
    let limits = Limits { head_deadline: Duration::from_secs(2), body_stall: Duration::from_secs(2), ..Limits::default() };
    let f = Fixture::new(Limits { workers: 2, ..limits });
    // Two workers, both taken: one by a half-sent head, one by a body that never comes.
    let mut head_staller = f.connect();
    head_staller.write_all(b"POST /x HTTP/1.1\r\nHost:").expect("write");
    let mut body_staller = f.connect();
    body_staller.write_all(b"POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n").expect("write");
    std::thread::sleep(Duration::from_millis(400));
    for _ in 0..3 {
        let started = Instant::now();
        assert_eq!(status_of(&f.exchange(b"GET /fresh HTTP/1.1\r\n\r\n")), 200);
        assert!(started.elapsed() < Duration::from_secs(5), "served only after {:?}", started.elapsed());
    }
    // Whichever was cut off got no answer; one that was not (the fresh requests may have
    // needed only one worker) ran into its deadline.
    let outcomes = [read_all(&mut head_staller), read_all(&mut body_staller)];
    assert!(outcomes.iter().any(String::is_empty), "{outcomes:?}");
    assert!(outcomes.iter().all(|o| o.is_empty() || status_of(o) == 408), "{outcomes:?}");
    assert!(f.health().serving);
}

#[test]
fn a_stalled_head_gets_408_at_its_deadline() {
    let f = Fixture::new(Limits { workers: 2, head_deadline: Duration::from_millis(300), ..Limits::default() });
    let mut s = f.connect();
    s.write_all(b"GET / HTTP/1.1\r\n").expect("write");
    let got = read_all(&mut s);
    assert_eq!(status_of(&got), 408, "{got}");
}

#[test]
fn a_new_connection_that_sends_nothing_is_closed_at_the_head_deadline_not_the_keep_alive_one() {
    let f = Fixture::new(Limits {
        workers: 2,
        head_deadline: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(30),
        ..Limits::default()
    });
    let mut silent = f.connect();
    let t0 = Instant::now();
    let got = read_all(&mut silent);
    assert!(got.is_empty(), "{got}");
    assert!(t0.elapsed() < Duration::from_secs(10), "closed after {:?}", t0.elapsed());
    // A trusted answer earns the keep-alive wait: the connection outlives the head deadline.
    let mut kept = f.connect();
    kept.write_all(b"GET /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n").expect("write");
    let mut buf = [0u8; 256];
    let n = kept.read(&mut buf).expect("answer");
    assert_eq!(status_of(&String::from_utf8_lossy(&buf[..n])), 200);
    std::thread::sleep(Duration::from_millis(900));
    kept.write_all(b"GET /y HTTP/1.1\r\nConnection: close\r\n\r\n").expect("write on the kept connection");
    let got = read_all(&mut kept);
    assert_eq!(status_of(&got), 200, "{got}");
}

#[test]
fn a_stalled_body_gets_408() {
    let f = Fixture::new(Limits { workers: 2, body_stall: Duration::from_millis(300), ..Limits::default() });
    let mut s = f.connect();
    s.write_all(b"POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n12").expect("write");
    let got = read_all(&mut s);
    assert_eq!(status_of(&got), 408, "{got}");
    assert!(got.contains("stalled"), "{got}");
}

#[test]
fn busy_workers_mean_503_and_an_honest_health() {
    let f = Fixture::new(Limits { workers: 1, ..Limits::default() });
    let slow = {
        let mut s = f.connect();
        s.write_all(b"GET /slow HTTP/1.1\r\nConnection: close\r\n\r\n").expect("write");
        std::thread::spawn(move || read_all(&mut s))
    };
    std::thread::sleep(Duration::from_millis(200));
    let got = f.exchange(b"GET /x HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&got), 503, "{got}");
    assert!(got.contains("Retry-After: 1"), "{got}");
    let h = f.health();
    assert!(!h.serving && h.problem.is_some_and(|p| p.contains("busy")), "{h:?}");
    assert_eq!(status_of(&slow.join().expect("slow")), 200);
}

#[test]
fn a_panicking_handler_is_500_and_the_worker_goes_on() {
    let f = Fixture::new(Limits { workers: 1, ..Limits::default() });
    for _ in 0..3 {
        assert_eq!(status_of(&f.exchange(b"GET /panic HTTP/1.1\r\n\r\n")), 500);
    }
    assert_eq!(status_of(&f.exchange(b"GET /ok HTTP/1.1\r\n\r\n")), 200);
    assert!(f.health().serving);
}

#[test]
fn shutdown_wakes_idle_connections_and_joins() {
    let f = Fixture::small();
    let mut idle = f.connect();
    idle.write_all(b"GET /a HTTP/1.1\r\n\r\n").expect("write");
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).expect("first response");
    let mut stalled = f.connect();
    stalled.write_all(b"GET /b HTTP/1.1\r\n").expect("write");
    let started = Instant::now();
    drop(f);
    assert!(started.elapsed() < Duration::from_secs(5), "shutdown took {:?}", started.elapsed());
}

#[test]
fn clients_that_do_not_speak_http_are_refused_at_once() {
    let f = Fixture::new(Limits { workers: 2, head_deadline: Duration::from_secs(30), ..Limits::default() });
    for raw in [&b"SSH-2.0-OpenSSH_9.6\r\n"[..], &[0u8; 1024], b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"] {
        let mut s = f.connect();
        s.write_all(raw).expect("write");
        let started = Instant::now();
        let got = read_all(&mut s);
        assert_eq!(status_of(&got), 400, "{raw:?}: {got}");
        assert!(started.elapsed() < Duration::from_secs(10), "refused only after {:?}", started.elapsed());
    }
}

#[test]
fn served_clients_keep_their_connection_while_stalled_ones_are_cut() {
    let f = Fixture::small();
    // A client that was served keeps its connection alive (idle), the other worker is taken
    // by a connection that never sends a byte.
    let mut pooled = f.connect();
    pooled.write_all(b"GET /first HTTP/1.1\r\n\r\n").expect("write");
    let mut buf = [0u8; 12];
    pooled.read_exact(&mut buf).expect("first response");
    let _empty = f.connect();
    // Both workers hold their connection, and the empty one has stalled long enough to be
    // cut (waited for, not guessed: a loaded machine hands connections over late).
    let deadline = Instant::now() + Duration::from_secs(20);
    while f.health().connections < 2 {
        assert!(Instant::now() < deadline, "the empty connection never reached a worker: {:?}", f.health());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(crate::http::conn::MIN_STALL_TO_EVICT + Duration::from_millis(200));
    // A newcomer needs a worker: the empty connection goes, not the pooled one.
    assert_eq!(status_of(&f.exchange(b"GET /new HTTP/1.1\r\n\r\n")), 200);
    let mut rest = Vec::new();
    pooled.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
    let _ = pooled.read_to_end(&mut rest); // the rest of the first response, then it waits
    pooled.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    pooled.write_all(b"GET /second HTTP/1.1\r\nConnection: close\r\n\r\n").expect("the pooled connection is open");
    let got = read_all(&mut pooled);
    assert!(got.contains("/second"), "{got}");
}

/// An answer the handler does not trust (no valid token) protects nothing: of two idle
/// kept-alive connections, the untrusted one is cut for a newcomer, though it is the newer.
#[test]
fn only_trusted_answers_protect_a_connection_from_eviction() {
    let f = Fixture::small();
    let mut pooled = f.connect();
    pooled.write_all(b"GET /first HTTP/1.1\r\n\r\n").expect("write");
    let mut buf = [0u8; 12];
    pooled.read_exact(&mut buf).expect("first response");
    let mut untrusted = f.connect();
    untrusted.write_all(b"GET /untrusted HTTP/1.1\r\n\r\n").expect("write");
    untrusted.read_exact(&mut buf).expect("its response");
    std::thread::sleep(crate::http::conn::MIN_STALL_TO_EVICT + Duration::from_millis(200));
    assert_eq!(status_of(&f.exchange(b"GET /new HTTP/1.1\r\n\r\n")), 200);
    // The untrusted connection was closed; the trusted one still answers.
    let mut rest = Vec::new();
    untrusted.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let _ = untrusted.read_to_end(&mut rest);
    assert!(untrusted.write_all(b"GET /again HTTP/1.1\r\n\r\n").is_err() || read_all(&mut untrusted).is_empty(), "cut");
    pooled.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
    let _ = pooled.read_to_end(&mut rest);
    pooled.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    pooled.write_all(b"GET /second HTTP/1.1\r\nConnection: close\r\n\r\n").expect("the pooled connection is open");
    assert!(read_all(&mut pooled).contains("/second"));
}

/// A trusted client that stops reading its answer holds its worker only until a newcomer needs
/// it: a write that moves no byte for a second is evictable.
#[test]
fn a_client_that_stops_reading_its_answer_is_cut_off_for_a_newcomer() {
    let f = Fixture::new(Limits { workers: 1, ..Limits::default() });
    let mut reader = f.connect();
    reader.write_all(b"GET /big HTTP/1.1\r\n\r\n").expect("write");
    let mut first = [0u8; 12];
    reader.read_exact(&mut first).expect("the answer begins");
    // It reads nothing more; its worker fills the socket buffers and blocks.
    std::thread::sleep(crate::http::slots::WRITE_STALL_TO_EVICT + Duration::from_millis(500));
    assert_eq!(status_of(&f.exchange(b"GET /ok HTTP/1.1\r\nConnection: close\r\n\r\n")), 200);
}

/// Answers nothing; `/watch` first waits (bounded) for its client to hang up and records what
/// `client_gone` said before and after.
#[derive(Default)]
struct Silent {
    seen: std::sync::Mutex<Vec<bool>>,
}

impl Handler for Silent {
    fn handle(&self, rq: &mut Request<'_>) -> Response {
        if rq.target() == "/watch" {
            let mut seen = vec![super::super::client_gone()];
            let deadline = Instant::now() + Duration::from_secs(10);
            while !super::super::client_gone() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            seen.push(super::super::client_gone());
            *self.seen.lock().expect("lock") = seen;
        }
        Response::unanswered()
    }
}

#[test]
fn an_unanswered_request_closes_the_connection_without_a_byte_and_a_handler_sees_its_client_leave() {
    assert!(!super::super::client_gone(), "outside a handler nobody is gone");
    let handler = Arc::new(Silent::default());
    let server = Server::start("silent", "127.0.0.1:0", Limits { workers: 2, ..Limits::default() }, Arc::clone(&handler) as Arc<dyn Handler>)
        .expect("start");
    let connect = || {
        let s = TcpStream::connect(server.local_addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        s
    };
    // The client stays and reads: the connection ends with no status line at all.
    let mut s = connect();
    s.write_all(b"GET /none HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    assert_eq!(read_all(&mut s), "", "no answer");

    // The client sends and leaves while the handler waits.
    let mut s = connect();
    s.write_all(b"GET /watch HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    std::thread::sleep(Duration::from_millis(300));
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(20);
    while handler.seen.lock().expect("lock").is_empty() {
        assert!(Instant::now() < deadline, "the handler never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(*handler.seen.lock().expect("lock"), [false, true], "there while connected, gone once it hung up");
    server.shutdown();
}

/// Waits (up to 20 s) until listener `name` has `n` worker threads; how many it has then.
fn worker_threads_become(name: &str, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = worker_threads(name);
        if now == n || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The worker threads of listener `name` now (its accept thread not counted). A thread
/// names itself once it runs, so a count right after a start may be short.
fn worker_threads(name: &str) -> usize {
    let prefix = format!("{name}-");
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|comm| comm.starts_with(&prefix) && comm.trim_end() != format!("{name}-acc"))
                .count()
        })
        .unwrap_or(0)
}

#[cfg(target_os = "linux")]
#[test]
fn the_pool_grows_to_its_bound_for_connections_and_shrinks_to_the_warm_workers_when_idle() {
    let limits = Limits { workers: 6, warm_workers: 2, worker_idle_exit: Duration::from_millis(300), ..Limits::default() };
    let handler = Arc::new(Echo::default());
    let server = Server::start("elastic", "127.0.0.1:0", limits, Arc::clone(&handler) as Arc<dyn Handler>).expect("start");
    assert_eq!(worker_threads_become("elastic", 2), 2, "the warm workers only");
    // Six trusted keep-alive connections, each answered: six workers hold one each.
    let mut held = Vec::new();
    for i in 0..6 {
        let mut s = TcpStream::connect(server.local_addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        s.write_all(format!("POST /k{i} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").as_bytes()).expect("write");
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).expect("an answer");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"), "connection {i} served");
        held.push(s);
    }
    assert_eq!(worker_threads_become("elastic", 6), 6, "grown to the bound");
    assert_eq!(server.health().report().connections, 6);
    drop(held);
    assert_eq!(worker_threads_become("elastic", 2), 2, "back to the warm workers");
    // And it grows again.
    let mut s = TcpStream::connect(server.local_addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    s.write_all(b"POST /again HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").expect("write");
    assert!(read_all(&mut s).starts_with("HTTP/1.1 200"));
    assert!(server.health().report().serving, "{:?}", server.health().report());
    server.shutdown();
    // Joined, but the kernel may list a thread that just exited for a moment longer (the join
    // wakes when its tid is cleared, before the task is reaped): under load the count lags.
    assert_eq!(worker_threads_become("elastic", 0), 0, "every worker joined");
}
