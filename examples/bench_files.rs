//! File benchmark (not a test): a 50 MiB file through the encrypted file transport on loopback
//! with the real platform server, beside libsodium secretstream's own speed in the same run.
//!
//! - secretstream: `crypto::file::secretstream_push_only`, the reference (no digest, no I/O);
//! - encrypt: `crypto::file::encrypt` to nothing (secretstream + BLAKE3 digest + chunking);
//! - upload: `e2e::file::upload_encrypted` (read, encrypt, hash, stream to the platform, stored);
//! - download: `e2e::file::download_verified` + `write_plaintext` to nothing (fetch, hash,
//!   check the digest and the first chunk, decrypt once on the way out).
//!
//! - gateway upload: `sendDocument` with a multipart body (the gateway encrypts while it reads
//!   and streams the ciphertext to the platform, which stores it), until the Bot API answers;
//! - gateway download: `getFile`, then `GET /file/bot…` read to the end (the gateway fetches and
//!   checks the whole ciphertext, then decrypts into the response).
//!
//! Each step runs three times; a row gives the fastest run's MiB/s (the machine is shared, and
//! a slower run measured someone else's load), its share of the secretstream figure, and the
//! largest peak RSS above what it was before the step (Linux `VmHWM` after a reset through
//! `/proc/<pid>/clear_refs`): this process's for the library rows, the gateway's for the
//! gateway rows. The gateway rows' client sends a prepared body with `Content-Length` and
//! reads in 1 MiB pieces, so it costs next to nothing. Size: BENCH_FILE_MIB (default 50).
//!
//! A last line says whether the gateway download kept its floor (issue 48, "no regression"):
//! at least 35% of secretstream, the share it had when the SPEC's verify-before-plaintext rule
//! was kept (docs/decisions/0128).

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{self, Read};
use std::time::Instant;

use bot_gateway::crypto::file as file_crypto;
use bot_gateway::e2e::file::{download_verified, upload_encrypted};
use support::status_kib;

/// A reader of `len` bytes cycling through one random MiB: an input that costs next to
/// nothing, so the figures are the transport's.
struct Pattern {
    left: u64,
    block: std::sync::Arc<Vec<u8>>,
    at: usize,
}

impl Pattern {
    fn new(len: u64, block: &std::sync::Arc<Vec<u8>>) -> Pattern {
        Pattern { left: len, block: block.clone(), at: 0 }
    }
}

impl Read for Pattern {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (self.left as usize).min(buf.len()).min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at = (self.at + n) % self.block.len();
        self.left -= n as u64;
        Ok(n)
    }
}

/// Resets the peak RSS of this process to its current RSS (Linux: writing 5 to clear_refs).
fn reset_peak() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("self", "VmRSS:")
}

fn peak_extra_mib(base_kib: u64) -> f64 {
    status_kib("self", "VmHWM:").saturating_sub(base_kib) as f64 / 1024.0
}

/// The same for another process of ours (the gateway).
fn reset_peak_of(pid: u32) -> u64 {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
    status_kib(&pid.to_string(), "VmRSS:")
}

fn peak_extra_of(pid: u32, base_kib: u64) -> f64 {
    status_kib(&pid.to_string(), "VmHWM:").saturating_sub(base_kib) as f64 / 1024.0
}

/// One HTTP/1.1 request over a fresh loopback connection, the body written in large pieces
/// (`Content-Length`), the response read in 1 MiB reads: a client that costs next to nothing,
/// so the gateway rows measure the gateway. Returns the status line's code, the response body
/// bytes counted, and the first MiB of the body (enough for a JSON answer).
fn raw_request(base: &str, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, u64, Vec<u8>) {
    use std::io::Write;
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the gateway");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("request head");
    for piece in body.chunks(1 << 20) {
        s.write_all(piece).expect("request body");
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut got: Vec<u8> = Vec::new();
    let mut counted = 0u64;
    let mut header_end = None;
    loop {
        let n = s.read(&mut buf).expect("response");
        if n == 0 {
            break;
        }
        if header_end.is_none() {
            got.extend_from_slice(&buf[..n]);
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                header_end = Some(i + 4);
                counted = (got.len() - i - 4) as u64;
            }
        } else {
            counted += n as u64;
            if got.len() < (2 << 20) {
                got.extend_from_slice(&buf[..n]);
            }
        }
    }
    let end = header_end.expect("a response head");
    let status = std::str::from_utf8(&got[9..12]).ok().and_then(|c| c.parse().ok()).expect("a status code");
    (status, counted, got[end..].to_vec())
}

/// Runs of each step; a row gives the fastest (the machine is shared: a slower run measured
/// someone else's load) and the largest peak RSS.
const RUNS: usize = 3;

/// The fastest of `RUNS` runs of `step` in MiB/s, and the largest peak extra RSS that
/// `measure` reported; `step` returns the bytes it moved, checked against `len`.
fn best_of(mib: u64, len: u64, mut step: impl FnMut() -> u64, reset: impl Fn() -> u64, peak: impl Fn(u64) -> f64) -> (f64, f64) {
    let (mut best, mut rss) = (0f64, 0f64);
    for _ in 0..RUNS {
        let base = reset();
        let start = Instant::now();
        let moved = step();
        let speed = mib as f64 / start.elapsed().as_secs_f64();
        assert_eq!(moved, len, "a step moved the whole file");
        best = best.max(speed);
        rss = rss.max(peak(base));
    }
    (best, rss)
}

fn main() {
    bot_gateway::crypto::init();
    let mib: u64 = std::env::var("BENCH_FILE_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let len = mib * 1024 * 1024;
    let mut rows: Vec<(&str, f64, Option<f64>)> = Vec::new();

    // The reference: one buffer in memory, pushed through secretstream alone.
    let block = std::sync::Arc::new(bot_gateway::crypto::random_bytes::<{ 1 << 20 }>().to_vec());
    let data: Vec<u8> = {
        let mut v = Vec::with_capacity(len as usize);
        Pattern::new(len, &block).read_to_end(&mut v).expect("fill");
        v
    };
    let (reference, _) = best_of(mib, len, || {
        let out = file_crypto::secretstream_push_only(&data);
        assert!(out > len);
        len
    }, || 0, |_| 0.0);
    drop(data);
    rows.push(("secretstream alone (reference)", reference, None));

    let (speed, rss) = best_of(mib, len, || {
        file_crypto::encrypt(Pattern::new(len, &block), io::sink()).expect("encrypt").plaintext_len
    }, reset_peak, peak_extra_mib);
    rows.push(("crypto::file::encrypt (+ digest)", speed, Some(rss)));

    let dir = tempfile::tempdir().expect("tempdir");
    let platform = support::PlatformServer::start(&dir.path().join("platform"));
    let alice = bot_gateway::client::Profile::register(&platform.url, dir.path().join("alice"), "alice", "Alice").expect("alice");
    let mut uploaded = None;
    let (speed, rss) = best_of(mib, len, || {
        let up = upload_encrypted(alice.platform(), Pattern::new(len, &block)).expect("upload");
        let size = up.size;
        uploaded = Some(up);
        size
    }, reset_peak, peak_extra_mib);
    rows.push(("upload: encrypt + stream to the platform", speed, Some(rss)));
    let up = uploaded.expect("uploaded");

    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let (speed, rss) = best_of(mib, len, || {
        let verified = download_verified(alice.platform(), &up.source(), &tmp).expect("download");
        verified.write_plaintext(io::sink()).expect("decrypt")
    }, reset_peak, peak_extra_mib);
    rows.push(("download: fetch + verify + decrypt out", speed, Some(rss)));

    // ── The gateway's file path: sendDocument by multipart upload, then /file/bot… ──
    let world = support::World::start("bench_file_bot");
    let bob = world.user("bob");
    bob.send_text(&format!("@{}", world.bot_username()), "hi").expect("hello");
    let chat = world.gateway.poll_until(0, 1)[0]["message"]["chat"]["id"].clone();
    let pid = world.gateway.proc.child.id();
    let boundary = "----benchBoundary5f1c";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n{chat}\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"document\"; filename=\"bench.bin\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    );
    let mut body = head.into_bytes();
    Pattern::new(len, &block).read_to_end(&mut body).expect("body");
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let mut file_id = String::new();
    let (speed, rss) = best_of(mib, len, || {
        let (status, _, answer) = raw_request(
            &world.gateway.base,
            "POST",
            &format!("/bot{}/sendDocument", world.gateway.token),
            &format!("multipart/form-data; boundary={boundary}"),
            &body,
        );
        assert_eq!(status, 200, "sendDocument: {}", String::from_utf8_lossy(&answer));
        let sent: serde_json::Value = serde_json::from_slice(&answer).expect("json");
        file_id = sent["result"]["document"]["file_id"].as_str().expect("file_id").to_string();
        sent["result"]["document"]["file_size"].as_u64().expect("file_size")
    }, || reset_peak_of(pid), |base| peak_extra_of(pid, base));
    rows.push(("gateway upload: sendDocument (multipart)", speed, Some(rss)));
    drop(body);

    let file: serde_json::Value = ureq::post(&format!("{}/bot{}/getFile", world.gateway.base, world.gateway.token))
        .send_json(serde_json::json!({"file_id": file_id}))
        .expect("getFile")
        .into_json()
        .expect("json");
    let path = file["result"]["file_path"].as_str().expect("file_path").to_string();
    let (speed, rss) = best_of(mib, len, || {
        let (status, n, _) =
            raw_request(&world.gateway.base, "GET", &format!("/file/bot{}/{}", world.gateway.token, path), "text/plain", b"");
        assert_eq!(status, 200, "download");
        n
    }, || reset_peak_of(pid), |base| peak_extra_of(pid, base));
    rows.push((GATEWAY_DOWNLOAD, speed, Some(rss)));

    let download_share = rows.iter().find(|(name, _, _)| *name == GATEWAY_DOWNLOAD).map(|(_, speed, _)| 100.0 * speed / reference);
    println!("\nfile benchmark, {mib} MiB, best of {RUNS} runs (targets: each direction >= 30% of secretstream, < 32 MiB extra RSS)");
    println!("{:<44} {:>10} {:>10} {:>16}", "step", "MiB/s", "% of ref", "peak extra RSS");
    for (name, speed, rss) in rows {
        let rss = rss.map(|r| format!("{r:.1} MiB")).unwrap_or_else(|| "-".into());
        println!("{name:<44} {speed:>10.1} {:>9.0}% {rss:>16}", 100.0 * speed / reference);
    }
    // The download checks the whole ciphertext before it hands out a byte of plaintext (the
    // SPEC's rule), so it cannot reach secretstream's speed; the target is that it does not
    // fall back (decision 0128): at least DOWNLOAD_FLOOR % of secretstream, as measured when
    // the rule was kept. A figure, not a test: the machine is shared.
    let share = download_share.expect("the gateway download row");
    let verdict = if share >= DOWNLOAD_FLOOR { "met" } else { "MISSED (a regression, or a loaded machine: run again)" };
    println!("download, no regression: the gateway download at {share:.0}% of secretstream, target >= {DOWNLOAD_FLOOR:.0}%: {verdict}");
}

/// The gateway download's row, which the no-regression line reads.
const GATEWAY_DOWNLOAD: &str = "gateway download: /file/bot… (verified)";

/// The gateway download's floor, in % of secretstream (issue 48: "no regression").
const DOWNLOAD_FLOOR: f64 = 35.0;
