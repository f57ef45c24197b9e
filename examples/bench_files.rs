//! File benchmark (not a test): a 50 MiB file through the encrypted file transport on loopback
//! with the real platform server, beside libsodium secretstream's own speed in the same run.
//!
//! - secretstream: `crypto::file::secretstream_push_only`, the reference (no digest, no I/O);
//! - encrypt: `crypto::file::encrypt` to nothing (secretstream + BLAKE2b digest + chunking);
//! - upload: `e2e::file::upload_encrypted` (read, encrypt, hash, stream to the platform, stored);
//! - download: `e2e::file::download_verified` + `write_plaintext` to nothing (fetch, hash,
//!   verify every chunk, decrypt again on the way out).
//!
//! Each row gives MiB/s, its share of the secretstream figure, and this process's peak RSS
//! above what it was before the step (Linux `VmHWM` after a reset through
//! `/proc/self/clear_refs`). The gateway's HTTP path (sendDocument, /file/bot…) is measured
//! once the media methods exist. Size: BENCH_FILE_MIB (default 50).

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

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Resets the peak RSS to the current RSS (Linux: writing 5 to clear_refs).
fn reset_peak() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS:")
}

fn peak_extra_mib(base_kib: u64) -> f64 {
    status_kib("VmHWM:").saturating_sub(base_kib) as f64 / 1024.0
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

    println!("\nfile benchmark, {mib} MiB (targets: each direction >= 30% of secretstream, < 32 MiB extra RSS)");
    println!("{:<44} {:>10} {:>10} {:>16}", "step", "MiB/s", "% of ref", "peak extra RSS");
    for (name, speed, rss) in rows {
        let rss = rss.map(|r| format!("{r:.1} MiB")).unwrap_or_else(|| "-".into());
        println!("{name:<44} {speed:>10.1} {:>9.0}% {rss:>16}", 100.0 * speed / reference);
    }
}
