//! `e2e-chat` as a child process: piped chat mode and its output read as lines on threads, so
//! every wait stays bounded.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use super::bin_path;

/// How long a wait for a line lasts before the test fails.
pub const WAIT: Duration = Duration::from_secs(60);

/// A child killed (and reaped) when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Killed {
    /// Waits (bounded) for the child to exit by itself.
    pub fn wait_exit(&mut self, what: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(s) = self.0.try_wait().expect("wait") {
                return s;
            }
            assert!(Instant::now() < deadline, "e2e-chat did not leave {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Lines of a child's pipe, read on a thread so waits stay bounded.
pub fn lines_of(pipe: impl Read + Send + 'static, name: &str) -> Receiver<String> {
    let (tx, rx) = crossbeam_channel::bounded(256);
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
        .expect("reader thread");
    rx
}

/// Reads lines until one satisfies `pred`; returns every line read.
pub fn read_until(rx: &Receiver<String>, what: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = pred(&line);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no {what} line; got {seen:?}"),
        }
    }
}

/// `e2e-chat chat PEER` with piped stdin, stdout and stderr; the output arrives as lines.
pub fn piped_chat(profile: &Path, peer: &str) -> (Killed, ChildStdin, Receiver<String>, Receiver<String>) {
    let child = Command::new(bin_path("e2e-chat"))
        .arg("--profile")
        .arg(profile)
        .args(["chat", peer])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn e2e-chat");
    let mut chat = Killed(child);
    let stdin = chat.0.stdin.take().expect("stdin");
    let out = lines_of(chat.0.stdout.take().expect("stdout"), "chat-stdout");
    let err = lines_of(chat.0.stderr.take().expect("stderr"), "chat-stderr");
    (chat, stdin, out, err)
}
