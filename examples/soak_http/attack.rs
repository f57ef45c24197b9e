//! The attack phase of the soak: the attackers of the HTTP boundary's second round, all at once
//! for SOAK_ATTACK_SECS (60; 0 skips the phase), while a bot polls and answers a user, a
//! `getMe` goes out every 100 ms on a pooled connection, and a monitor asks each listener's
//! `/healthz` every 100 ms on a new connection (a newcomer while the workers are pressed).
//!
//! The attackers, each in its own threads:
//!
//! - **pipeline**: W+2 connections to the Bot API listener (W: its workers) and 6 to the
//!   extensions listener, each pipelining thousands of `GET /x` without a token and never
//!   reading; a connection the server closes is opened again (at most every 100 ms per thread);
//! - **drip**: W connections sending one byte of a request head every 100 ms, reconnecting
//!   after each close;
//! - **wrong token**: 40 connections a second, each one `getMe` with a wrong secret; each must
//!   be answered 401 and closed;
//! - **multipart text**: 4 clients with the real token sending a 50 MiB multipart text part
//!   (two at full speed, two trickling at about 1.3 MiB/s); each must read a 413;
//! - **oversized body**: a plain HTTP client (ureq) sends 4 MiB of JSON every 500 ms, and 60 MiB
//!   every tenth time; each must read the 413 and its description, never a broken pipe;
//! - **Host**: a wrong Host, none, or two, on both listeners; each must be refused (421, 400)
//!   without the bot's username in the answer;
//! - **stalled reader**: 2 clients with the real token that download an 8 MiB file and never
//!   read, holding each connection 15 s;
//! - **HTML download**: once, before the attackers start, a `text/html` document the user sent
//!   is downloaded; it must come as an attachment that no browser runs.
//!
//! The phase fails on any failed or slow (over SOAK_LEGIT_SLOW_MS) legitimate call, a ping the
//! user did not get answered within 15 s, any `/healthz` answer other than 200 (503 included:
//! the bar is 0 s of 503), a refusal that breaks its rule, the gateway's death, or resources
//! that do not come back to their level after the phase (the barrage's rules).

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bot_gateway::client::Profile;
use bot_gateway::wire::e2e::media::Kind;
use serde_json::{json, Value};

use super::support::media::send_file;
use super::{agent, api, get_me, Legit};

/// Connections the pipelining clients hold on the extensions listener (it has 4 workers).
const EXT_PIPELINERS: usize = 6;
/// Size of the download the stalled readers never read.
const BIG_FILE: usize = 8 << 20;
/// How long the user waits for the bot's answer to a ping.
const PING_ANSWER: Duration = Duration::from_secs(15);

/// What the attack phase needs to know of the running gateway.
pub struct Target<'a> {
    pub bot_api: SocketAddr,
    pub ext: SocketAddr,
    pub base: &'a str,
    pub ext_base: &'a str,
    pub token: &'a str,
    pub wrong_token: &'a str,
    /// The bot's username, without `@`: it must not leak in an answer to a foreign Host.
    pub bot_username: &'a str,
    pub workers: usize,
    pub legit_slow: Duration,
}

/// One attacker's figures: connections opened, answers by status, and rule breaks.
#[derive(Default)]
struct Attacker {
    connections: AtomicU64,
    connect_failures: AtomicU64,
    statuses: Mutex<BTreeMap<u16, u64>>,
    broken: AtomicU64,
    samples: Mutex<Vec<String>>,
}

impl Attacker {
    fn connect(&self, addr: SocketAddr) -> Option<TcpStream> {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => {
                self.connections.fetch_add(1, Ordering::Relaxed);
                let _ = s.set_nodelay(true);
                Some(s)
            }
            Err(_) => {
                self.connect_failures.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    fn answered(&self, code: u16) {
        *self.statuses.lock().expect("statuses").entry(code).or_default() += 1;
    }

    fn broke(&self, what: String) {
        self.broken.fetch_add(1, Ordering::Relaxed);
        let mut s = self.samples.lock().expect("samples");
        if s.len() < 3 {
            s.push(what);
        }
    }

    fn row(&self) -> String {
        let statuses = self.statuses.lock().expect("statuses");
        let statuses = if statuses.is_empty() {
            "-".to_string()
        } else {
            statuses.iter().map(|(k, v)| format!("{k}×{v}")).collect::<Vec<_>>().join(" ")
        };
        let samples = self.samples.lock().expect("samples");
        format!(
            "{} | {} | {} | {} | {}",
            self.connections.load(Ordering::Relaxed),
            self.connect_failures.load(Ordering::Relaxed),
            statuses,
            self.broken.load(Ordering::Relaxed),
            samples.join("; ")
        )
    }
}

/// `/healthz` of one listener, asked every 100 ms on a new connection.
#[derive(Default)]
struct Health {
    asks: u64,
    statuses: BTreeMap<u16, u64>,
    errors: u64,
    first_error: Option<String>,
    slowest: Duration,
    /// Start of the current run of 503 answers, and the longest run.
    run_503: Option<Instant>,
    longest_503: Duration,
}

impl Health {
    fn record(&mut self, result: Result<u16, String>, took: Duration) {
        self.asks += 1;
        self.slowest = self.slowest.max(took);
        match result {
            Ok(code) => {
                *self.statuses.entry(code).or_default() += 1;
                if code == 503 {
                    let start = *self.run_503.get_or_insert_with(|| Instant::now() - took);
                    self.longest_503 = self.longest_503.max(start.elapsed());
                } else {
                    self.run_503 = None;
                }
            }
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn failed(&self) -> bool {
        self.errors > 0 || self.statuses.keys().any(|&k| k != 200)
    }
}

/// What the phase found: rows for the report and the reasons it fails.
pub struct Findings {
    pub rows: Vec<(String, String)>,
    pub failures: Vec<String>,
}

fn running(stop: &AtomicBool, end: Instant) -> bool {
    !stop.load(Ordering::Relaxed) && Instant::now() < end
}

/// Sleeps what is left of `every` since `began`, in steps that notice the end of the phase.
fn pace(began: Instant, every: Duration, stop: &AtomicBool, end: Instant) {
    while running(stop, end) {
        let left = every.saturating_sub(began.elapsed());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// The status of the first response in `buf`, if a status line is there.
fn status_of(buf: &[u8]) -> Option<u16> {
    let line = buf.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    line.strip_prefix("HTTP/1.")?.split(' ').nth(1)?.trim().parse().ok()
}

/// Reads until the server closes or `within` passes: (bytes, closed by the server).
fn read_to_close(s: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    let end = Instant::now() + within;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (buf, false);
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => return (buf, true),
            Ok(n) if buf.len() < (1 << 20) => buf.extend_from_slice(&chunk[..n]),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return (buf, false),
            // A reset after the answer still counts as closed.
            Err(_) => return (buf, true),
        }
    }
}

// ───────────────────────────── the attackers ─────────────────────────────

fn pipeline(a: &Attacker, addr: SocketAddr, stop: &AtomicBool, end: Instant) {
    let burst = b"GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(64);
    while running(stop, end) {
        let began = Instant::now();
        if let Some(mut s) = a.connect(addr) {
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            for _ in 0..64 {
                if !running(stop, end) || s.write_all(&burst).is_err() {
                    break;
                }
            }
        }
        pace(began, Duration::from_millis(100), stop, end);
    }
}

fn drip(a: &Attacker, addr: SocketAddr, stop: &AtomicBool, end: Instant) {
    let head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    while running(stop, end) {
        let began = Instant::now();
        if let Some(mut s) = a.connect(addr) {
            for b in head.iter().chain(std::iter::repeat(&b'a')) {
                if !running(stop, end) || s.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        pace(began, Duration::from_millis(100), stop, end);
    }
}

fn wrong_token(a: &Attacker, t: &Target<'_>, stop: &AtomicBool, end: Instant) {
    let request = format!("GET /bot{}/getMe HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", t.wrong_token);
    while running(stop, end) {
        let began = Instant::now();
        if let Some(mut s) = a.connect(t.bot_api) {
            let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
            let _ = s.write_all(request.as_bytes());
            let (got, closed) = read_to_close(&mut s, Duration::from_secs(10));
            match status_of(&got) {
                Some(code) => {
                    a.answered(code);
                    if code != 401 {
                        a.broke(format!("answered {code}"));
                    } else if !closed {
                        a.broke("401 kept the connection open".into());
                    }
                }
                None => a.broke(format!("no answer ({} bytes, closed {closed})", got.len())),
            }
        }
        pace(began, Duration::from_millis(25), stop, end);
    }
}

/// A multipart body with one 50 MiB text part, sent at full speed or trickled; the client
/// looks for an early answer as it writes, as a careful client does, and reads the 413.
fn multipart_text(a: &Attacker, t: &Target<'_>, trickle: bool, stop: &AtomicBool, end: Instant) {
    const PART: usize = 50 << 20;
    let boundary = "soakBoundary50MiB";
    let opening = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\n");
    let closing = format!("\r\n--{boundary}--\r\n");
    let head = format!(
        "POST /bot{}/sendDocument HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\n\r\n",
        t.token,
        opening.len() + PART + closing.len()
    );
    let chunk = vec![b'a'; 64 * 1024];
    while running(stop, end) {
        let began = Instant::now();
        let Some(mut s) = a.connect(t.bot_api) else {
            pace(began, Duration::from_millis(200), stop, end);
            continue;
        };
        let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
        let mut early = Vec::new();
        let mut sent = 0;
        let mut ok = s.write_all(head.as_bytes()).is_ok() && s.write_all(opening.as_bytes()).is_ok();
        while ok && sent < PART && running(stop, end) {
            ok = s.write_all(&chunk).is_ok();
            sent += chunk.len();
            if trickle {
                std::thread::sleep(Duration::from_millis(50));
            }
            // An answer already there: stop sending and read it.
            let _ = s.set_nonblocking(true);
            let mut peek = [0u8; 512];
            let answered = matches!(s.read(&mut peek), Ok(n) if n > 0 && { early.extend_from_slice(&peek[..n]); true });
            let _ = s.set_nonblocking(false);
            if answered {
                break;
            }
        }
        if !running(stop, end) && early.is_empty() && ok {
            return;
        }
        let (rest, _) = read_to_close(&mut s, Duration::from_secs(10));
        early.extend_from_slice(&rest);
        match status_of(&early) {
            Some(code) => {
                a.answered(code);
                if code != 413 {
                    a.broke(format!("answered {code} after {} MiB", sent >> 20));
                }
            }
            None => a.broke(format!("no answer after {} MiB (write ok: {ok})", sent >> 20)),
        }
        pace(began, Duration::from_millis(200), stop, end);
    }
}

fn oversized(a: &Attacker, t: &Target<'_>, stop: &AtomicBool, end: Instant) {
    let agent = agent(Duration::from_secs(30));
    let url = format!("{}/bot{}/sendMessage", t.base, t.token);
    let mut round = 0u64;
    while running(stop, end) {
        let began = Instant::now();
        round += 1;
        let size = if round.is_multiple_of(10) { 60 << 20 } else { 4 << 20 };
        let body = format!("{{\"chat_id\":\"@soak_nobody\",\"text\":\"{}\"}}", "a".repeat(size));
        a.connections.fetch_add(1, Ordering::Relaxed);
        match agent.post(&url).set("Content-Type", "application/json").send_string(&body) {
            Err(ureq::Error::Status(code, resp)) => {
                a.answered(code);
                let v: Value = resp.into_json().unwrap_or(Value::Null);
                let described = v["description"].as_str().is_some_and(|d| d.contains("Too Large"));
                if code != 413 || !described {
                    a.broke(format!("{} MiB: {code} {v}", size >> 20));
                }
            }
            Ok(resp) => {
                a.answered(resp.status());
                a.broke(format!("{} MiB accepted", size >> 20));
            }
            Err(e) => a.broke(format!("{} MiB: {}", size >> 20, super::ureq_err(&e))),
        }
        pace(began, Duration::from_millis(500), stop, end);
    }
}

fn foreign_host(a: &Attacker, t: &Target<'_>, stop: &AtomicBool, end: Instant) {
    let get_me = format!("/bot{}/getMe", t.token);
    let targets = [(t.bot_api, "/healthz"), (t.bot_api, get_me.as_str()), (t.ext, "/healthz"), (t.ext, "/metrics")];
    let hosts = [("Host: evil.example\r\n", 421), ("", 400), ("Host: 127.0.0.1\r\nHost: 127.0.0.1\r\n", 400)];
    let mut i = 0usize;
    while running(stop, end) {
        let began = Instant::now();
        let (addr, path) = targets[i % targets.len()];
        let (host, want) = hosts[(i / targets.len()) % hosts.len()];
        i += 1;
        if let Some(mut s) = a.connect(addr) {
            let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
            let _ = s.write_all(format!("GET {path} HTTP/1.1\r\n{host}\r\n").as_bytes());
            let (got, _) = read_to_close(&mut s, Duration::from_secs(10));
            let leaked = String::from_utf8_lossy(&got).contains(t.bot_username);
            match status_of(&got) {
                Some(code) => {
                    a.answered(code);
                    if code != want || leaked {
                        let path = if path.starts_with("/bot") { "/bot<token>/getMe" } else { path };
                        a.broke(format!("{path} with {:?}: {code}{}", host.trim(), if leaked { ", username leaked" } else { "" }));
                    }
                }
                None => a.broke(format!("no answer to {:?}", host.trim())),
            }
        }
        pace(began, Duration::from_millis(100), stop, end);
    }
}

fn stalled_reader(a: &Attacker, addr: SocketAddr, download: &str, stop: &AtomicBool, end: Instant) {
    let request = format!("GET {download} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    while running(stop, end) {
        let began = Instant::now();
        if let Some(mut s) = a.connect(addr) {
            let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
            let _ = s.write_all(request.as_bytes());
            pace(began, Duration::from_secs(15), stop, end);
        }
        pace(began, Duration::from_millis(100), stop, end);
    }
}

// ───────────────────────────── the legitimate side ─────────────────────────────

fn get_me_loop(t: &Target<'_>, legit: &Mutex<Legit>, stop: &AtomicBool, end: Instant) {
    let agent = agent(Duration::from_secs(20));
    while running(stop, end) {
        let began = Instant::now();
        let result = get_me(&agent, t.base, t.token);
        legit.lock().expect("legit").record("getMe", result, began.elapsed(), t.legit_slow);
        pace(began, Duration::from_millis(100), stop, end);
    }
}

/// The bot: long polls (1 s) and answers each `ping …` with `echo: ping …`.
fn bot_loop(t: &Target<'_>, legit: &Mutex<Legit>, offset: &mut i64, stop: &AtomicBool, end: Instant) {
    let agent = agent(Duration::from_secs(20));
    while running(stop, end) {
        let began = Instant::now();
        let polled = api(&agent, t.base, t.token, "getUpdates", json!({ "offset": *offset, "timeout": 1 }));
        let updates = match &polled {
            Ok((200, body)) => body["result"].as_array().cloned().unwrap_or_default(),
            _ => Vec::new(),
        };
        let result = polled.and_then(|(code, body)| if code == 200 { Ok(()) } else { Err(format!("getUpdates {code}: {body}")) });
        // A long poll takes its timeout: only the time beyond it counts as slow.
        legit.lock().expect("legit").record("getUpdates", result, began.elapsed().saturating_sub(Duration::from_secs(1)), t.legit_slow);
        for u in &updates {
            *offset = (*offset).max(u["update_id"].as_i64().unwrap_or(0) + 1);
            let Some(text) = u["message"]["text"].as_str().filter(|s| s.starts_with("ping ")) else { continue };
            let sent = Instant::now();
            let reply = json!({ "chat_id": u["message"]["chat"]["id"], "text": format!("echo: {text}") });
            let result = api(&agent, t.base, t.token, "sendMessage", reply)
                .and_then(|(code, body)| if code == 200 { Ok(()) } else { Err(format!("sendMessage {code}: {body}")) });
            legit.lock().expect("legit").record("sendMessage", result, sent.elapsed(), t.legit_slow);
        }
    }
}

/// The user: a ping every 500 ms, each answered within 15 s.
fn user_loop(user: &Profile, bot: &str, pings: &Mutex<Legit>, stop: &AtomicBool, end: Instant) {
    let mut n = 0u64;
    while running(stop, end) {
        let began = Instant::now();
        n += 1;
        let text = format!("ping {n}");
        let result = user.send_text(bot, &text).map_err(|e| format!("send: {e}")).and_then(|_| {
            let want = format!("echo: {text}");
            let got = user.receive(PING_ANSWER, 1).map_err(|e| format!("receive: {e}"))?;
            match got.first() {
                Some(m) if m.text == want => Ok(()),
                Some(m) => Err(format!("got {:?} for {text:?}", m.text)),
                None => Err(format!("no answer to {text:?} in {} s", PING_ANSWER.as_secs())),
            }
        });
        pings.lock().expect("pings").record("ping", result, began.elapsed(), PING_ANSWER);
        pace(began, Duration::from_millis(500), stop, end);
    }
}

fn health_loop(base: &str, health: &Mutex<Health>, stop: &AtomicBool, end: Instant) {
    let url = format!("{base}/healthz");
    while running(stop, end) {
        let began = Instant::now();
        // A new agent: a new connection, as a load balancer's probe makes.
        let result = match ureq::get(&url).timeout(Duration::from_secs(10)).call() {
            Ok(r) => Ok(r.status()),
            Err(ureq::Error::Status(code, _)) => Ok(code),
            Err(e) => Err(super::ureq_err(&e)),
        };
        health.lock().expect("health").record(result, began.elapsed());
        pace(began, Duration::from_millis(100), stop, end);
    }
}

// ───────────────────────────── setup and the phase ─────────────────────────────

fn spawn<'scope>(s: &'scope std::thread::Scope<'scope, '_>, name: String, f: impl FnOnce() + Send + 'scope) {
    std::thread::Builder::new().name(name).spawn_scoped(s, f).expect("spawn a soak thread");
}

/// The user sends an HTML page and an 8 MiB file; the bot learns their download paths.
/// Returns (HTML download URL, big file's path on the Bot API listener, next update offset).
fn files(t: &Target<'_>, user: &Profile, bot: &str) -> Result<(String, String, i64), String> {
    send_file(user, bot, Kind::DOCUMENT, "text/html", "page.html", b"<script>alert(document.URL)</script>", "");
    let big: Vec<u8> = (0..BIG_FILE).map(|i| (i % 251) as u8).collect();
    send_file(user, bot, Kind::DOCUMENT, "application/octet-stream", "big.bin", &big, "");
    let agent = agent(Duration::from_secs(60));
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut offset, mut paths) = (0i64, BTreeMap::new());
    while paths.len() < 2 {
        if Instant::now() > deadline {
            return Err("the two documents did not reach getUpdates in 60 s".into());
        }
        let (_, body) = api(&agent, t.base, t.token, "getUpdates", json!({ "offset": offset, "timeout": 5 }))?;
        for u in body["result"].as_array().cloned().unwrap_or_default() {
            offset = offset.max(u["update_id"].as_i64().unwrap_or(0) + 1);
            let doc = &u["message"]["document"];
            let (Some(name), Some(id)) = (doc["file_name"].as_str(), doc["file_id"].as_str()) else { continue };
            let (code, file) = api(&agent, t.base, t.token, "getFile", json!({ "file_id": id }))?;
            let path = file["result"]["file_path"].as_str().ok_or(format!("getFile {code}: {file}"))?;
            paths.insert(name.to_string(), format!("/file/bot{}/{path}", t.token));
        }
    }
    let html = paths.remove("page.html").ok_or("no page.html")?;
    let big = paths.remove("big.bin").ok_or("no big.bin")?;
    Ok((html, big, offset))
}

/// The HTML page must come as an inert attachment.
fn check_html(base: &str, path: &str) -> Result<String, String> {
    let resp = ureq::get(&format!("{base}{path}"))
        .timeout(Duration::from_secs(30))
        .call()
        .map_err(|e| format!("download: {}", super::ureq_err(&e)))?;
    let h = |name: &str| resp.header(name).unwrap_or("").to_string();
    let seen = format!(
        "Content-Type {}, X-Content-Type-Options {}, Content-Disposition {}, Content-Security-Policy {}",
        h("Content-Type"),
        h("X-Content-Type-Options"),
        h("Content-Disposition"),
        h("Content-Security-Policy")
    );
    let inert = h("Content-Type") == "application/octet-stream"
        && h("X-Content-Type-Options") == "nosniff"
        && h("Content-Disposition").starts_with("attachment")
        && h("Content-Security-Policy") == "sandbox";
    if inert {
        Ok(seen)
    } else {
        Err(seen)
    }
}

/// Runs the phase for `secs`. `watch` is called every 100 ms meanwhile and says whether the
/// gateway still runs (the caller records its resources there).
pub fn run(t: &Target<'_>, user: &mut Profile, bot: &str, secs: u64, mut watch: impl FnMut() -> bool) -> Findings {
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let (html, big, mut offset) = match files(t, user, bot) {
        Ok(f) => f,
        Err(e) => {
            failures.push(format!("attack phase setup: {e}"));
            return Findings { rows, failures };
        }
    };
    match check_html(t.base, &html) {
        Ok(seen) => rows.push(("HTML document downloaded".into(), format!("inert: {seen}"))),
        Err(seen) => {
            rows.push(("HTML document downloaded".into(), format!("NOT INERT: {seen}")));
            failures.push(format!("the HTML document is served as {seen}"));
        }
    }

    let names = [
        format!("pipeline, never read (Bot API, {} connections)", t.workers + 2),
        format!("pipeline, never read (extensions, {EXT_PIPELINERS} connections)"),
        format!("drip a head byte every 100 ms ({} connections)", t.workers),
        "wrong token, 40 connections/s".to_string(),
        "multipart 50 MiB text part (2 fast, 2 trickling)".to_string(),
        "oversized JSON body, 4 MiB (60 MiB every tenth)".to_string(),
        "foreign, missing or double Host (both listeners)".to_string(),
        "stalled reader of an 8 MiB download (2)".to_string(),
    ];
    let attackers: Vec<Attacker> = names.iter().map(|_| Attacker::default()).collect();
    let (legit, pings) = (Mutex::new(Legit::default()), Mutex::new(Legit::default()));
    let (health_api, health_ext) = (Mutex::new(Health::default()), Mutex::new(Health::default()));
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let end = started + Duration::from_secs(secs);
    let mut died = false;

    std::thread::scope(|s| {
        let (a, stop) = (&attackers, &stop);
        for i in 0..t.workers + 2 {
            spawn(s, format!("soak-pipe-{i}"), move || pipeline(&a[0], t.bot_api, stop, end));
        }
        for i in 0..EXT_PIPELINERS {
            spawn(s, format!("soak-pipex-{i}"), move || pipeline(&a[1], t.ext, stop, end));
        }
        for i in 0..t.workers {
            spawn(s, format!("soak-drip-{i}"), move || drip(&a[2], t.bot_api, stop, end));
        }
        spawn(s, "soak-wrongtok".into(), move || wrong_token(&a[3], t, stop, end));
        for i in 0..4 {
            spawn(s, format!("soak-multi-{i}"), move || multipart_text(&a[4], t, i >= 2, stop, end));
        }
        spawn(s, "soak-oversize".into(), move || oversized(&a[5], t, stop, end));
        spawn(s, "soak-host".into(), move || foreign_host(&a[6], t, stop, end));
        let big = big.as_str();
        for i in 0..2 {
            spawn(s, format!("soak-stall-{i}"), move || stalled_reader(&a[7], t.bot_api, big, stop, end));
        }
        let (legit, pings, health_api, health_ext, offset) = (&legit, &pings, &health_api, &health_ext, &mut offset);
        spawn(s, "soak-getme".into(), move || get_me_loop(t, legit, stop, end));
        spawn(s, "soak-bot".into(), move || bot_loop(t, legit, offset, stop, end));
        // The profile moves to the user's thread: it is not shared between threads.
        spawn(s, "soak-user".into(), move || user_loop(user, bot, pings, stop, end));
        spawn(s, "soak-health".into(), move || health_loop(t.base, health_api, stop, end));
        spawn(s, "soak-healthx".into(), move || health_loop(t.ext_base, health_ext, stop, end));

        let mut last_report = Instant::now();
        while Instant::now() < end {
            if !watch() {
                died = true;
                stop.store(true, Ordering::SeqCst);
                break;
            }
            if last_report.elapsed() >= Duration::from_secs(10) {
                last_report = Instant::now();
                let l = legit.lock().expect("legit");
                let h = health_api.lock().expect("health");
                eprintln!(
                    "soak: attack {:.0} s: {} legit calls ({} failed), {} pings; /healthz {:?}",
                    started.elapsed().as_secs_f64(),
                    l.calls,
                    l.failed,
                    pings.lock().expect("pings").calls,
                    h.statuses
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    if died {
        failures.push("the gateway died during the attack phase".into());
    }

    for (name, a) in names.iter().zip(&attackers) {
        rows.push((format!("attacker: {name}"), a.row()));
        let broken = a.broken.load(Ordering::Relaxed);
        if broken > 0 {
            failures.push(format!("{name}: {broken} refusals broke their rule"));
        }
    }
    for (what, l) in [("legitimate calls (getMe every 100 ms, getUpdates, sendMessage)", &legit), ("user pings answered", &pings)] {
        let l = l.lock().expect("legit");
        rows.push((
            what.to_string(),
            format!(
                "{} calls, {} failed, {} slow (max {} ms){}",
                l.calls,
                l.failed,
                l.slow,
                l.max.as_millis(),
                if l.errors.is_empty() { String::new() } else { format!("; first errors: {}", l.errors.join("; ")) }
            ),
        ));
        if l.failed + l.slow > 0 || l.calls == 0 {
            failures.push(format!("{what}: {} failed, {} slow, of {}", l.failed, l.slow, l.calls));
        }
    }
    for (listener, h) in [("Bot API", &health_api), ("extensions", &health_ext)] {
        let h = h.lock().expect("health");
        let statuses = h.statuses.iter().map(|(k, v)| format!("{k}×{v}")).collect::<Vec<_>>().join(" ");
        rows.push((
            format!("/healthz of the {listener} listener every 100 ms"),
            format!(
                "{} asks: {statuses}; {} errors{}; longest 503 {} ms; slowest {} ms",
                h.asks,
                h.errors,
                h.first_error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default(),
                h.longest_503.as_millis(),
                h.slowest.as_millis()
            ),
        ));
        if h.failed() || h.asks == 0 {
            failures.push(format!("/healthz of the {listener} listener: {statuses}, {} errors", h.errors));
        }
    }
    Findings { rows, failures }
}
