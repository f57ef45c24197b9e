//! File benchmark (not a test): a 50 MiB file through the encrypted file transport on loopback
//! with the real platform server, beside libsodium secretstream's own speed in the same run.
//!
//! - secretstream: `crypto::file::secretstream_push_only`, the reference (no digest, no I/O);
//! - encrypt: `crypto::file::encrypt` to nothing (secretstream + BLAKE2b digest + chunking);
//! - upload: `e2e::file::upload_encrypted` (read, encrypt, hash, stream to the platform, stored);
//! - download: `e2e::file::download_verified` + `write_plaintext` to nothing (fetch, hash,
//!   verify every chunk, decrypt again on the way out).
//!
//! - gateway upload: `sendDocument` with a streamed multipart body (the gateway encrypts while it
//!   reads, spools ciphertext, uploads it), until the Bot API answers;
//! - gateway download: `getFile`, then `GET /file/bot…` read to the end (the gateway fetches and
//!   verifies the whole ciphertext, then decrypts into the response).
//!
//! Each row gives MiB/s, its share of the secretstream figure, and the peak RSS above what it
//! was before the step (Linux `VmHWM` after a reset through `/proc/<pid>/clear_refs`): this
//! process's for the library rows, the gateway's for the gateway rows. Size: BENCH_FILE_MIB
//! (default 50).

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{self, Read};
use std::time::Instant;

use bot_gateway::crypto::file as file_crypto;
use bot_gateway::e2e::file::{download_verified, upload_encrypted};

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

fn status_kib(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
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

fn main() {
    bot_gateway::crypto::init();
    let mib: u64 = std::env::var("BENCH_FILE_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let len = mib * 1024 * 1024;
    let mut rows = Vec::new();

    // The reference: one buffer in memory, pushed through secretstream alone.
    let block = std::sync::Arc::new(bot_gateway::crypto::random_bytes::<{ 1 << 20 }>().to_vec());
    let data: Vec<u8> = {
        let mut v = Vec::with_capacity(len as usize);
        Pattern::new(len, &block).read_to_end(&mut v).expect("fill");
        v
    };
    let start = Instant::now();
    let out = file_crypto::secretstream_push_only(&data);
    let reference = mib as f64 / start.elapsed().as_secs_f64();
    assert!(out > len);
    drop(data);
    rows.push(("secretstream alone (reference)".to_string(), reference, None));

    let base = reset_peak();
    let start = Instant::now();
    let enc = file_crypto::encrypt(Pattern::new(len, &block), io::sink()).expect("encrypt");
    rows.push(("crypto::file::encrypt (+ digest)".to_string(), mib as f64 / start.elapsed().as_secs_f64(), Some(peak_extra_mib(base))));
    assert_eq!(enc.plaintext_len, len);

    let dir = tempfile::tempdir().expect("tempdir");
    let platform = support::PlatformServer::start(&dir.path().join("platform"));
    let alice = bot_gateway::client::Profile::register(&platform.url, dir.path().join("alice"), "alice", "Alice").expect("alice");
    let base = reset_peak();
    let start = Instant::now();
    let up = upload_encrypted(alice.platform(), Pattern::new(len, &block)).expect("upload");
    rows.push(("upload: encrypt + stream to the platform".to_string(), mib as f64 / start.elapsed().as_secs_f64(), Some(peak_extra_mib(base))));

    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let base = reset_peak();
    let start = Instant::now();
    let verified = download_verified(alice.platform(), &up.file_ref, &up.key, &up.digest, &tmp).expect("download");
    let n = verified.write_plaintext(io::sink()).expect("decrypt");
    rows.push(("download: fetch + verify + decrypt out".to_string(), mib as f64 / start.elapsed().as_secs_f64(), Some(peak_extra_mib(base))));
    assert_eq!(n, len);


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
    let tail = format!("\r\n--{boundary}--\r\n");
    let body = io::Cursor::new(head.into_bytes()).chain(Pattern::new(len, &block)).chain(io::Cursor::new(tail.into_bytes()));
    let base = reset_peak_of(pid);
    let start = Instant::now();
    let resp = ureq::post(&format!("{}/bot{}/sendDocument", world.gateway.base, world.gateway.token))
        .timeout(std::time::Duration::from_secs(600))
        .set("Content-Type", &format!("multipart/form-data; boundary={boundary}"))
        .send(body)
        .expect("sendDocument");
    let sent: serde_json::Value = resp.into_json().expect("json");
    rows.push(("gateway upload: sendDocument (multipart)".to_string(), mib as f64 / start.elapsed().as_secs_f64(), Some(peak_extra_of(pid, base))));
    let file_id = sent["result"]["document"]["file_id"].as_str().expect("file_id").to_string();
    let file: serde_json::Value = ureq::post(&format!("{}/bot{}/getFile", world.gateway.base, world.gateway.token))
        .send_json(serde_json::json!({"file_id": file_id}))
        .expect("getFile")
        .into_json()
        .expect("json");
    let path = file["result"]["file_path"].as_str().expect("file_path").to_string();
    let base = reset_peak_of(pid);
    let start = Instant::now();
    let resp = ureq::get(&format!("{}/file/bot{}/{}", world.gateway.base, world.gateway.token, path))
        .timeout(std::time::Duration::from_secs(600))
        .call()
        .expect("download");
    let n = io::copy(&mut resp.into_reader(), &mut io::sink()).expect("read the file");
    rows.push(("gateway download: /file/bot… (verified)".to_string(), mib as f64 / start.elapsed().as_secs_f64(), Some(peak_extra_of(pid, base))));
    assert_eq!(n, len);

    println!("\nfile benchmark, {mib} MiB (targets: each direction >= 30% of secretstream, < 32 MiB extra RSS)");
    println!("{:<44} {:>10} {:>10} {:>16}", "step", "MiB/s", "% of ref", "peak extra RSS");
    for (name, speed, rss) in rows {
        let rss = rss.map(|r| format!("{r:.1} MiB")).unwrap_or_else(|| "-".into());
        println!("{name:<44} {speed:>10.1} {:>9.0}% {rss:>16}", 100.0 * speed / reference);
    }
}
