//! `e2e-chat chat @peer`: an interactive dialog for a person. A reader thread prints incoming
//! messages as `[@sender] text`; lines typed on stdin are sent to the peer. `/quit` or end of
//! input leaves.
//!
//! The reader and the sender each open the profile (two database connections); the profile's
//! `BEGIN IMMEDIATE` transactions keep their session updates apart.

use std::io::{self, BufRead, Write};
use std::path::Path;
use std::thread;
use std::time::Duration;

use anyhow::Context;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, TryRecvError};

use crate::backoff::Backoff;
use super::message::ReceivedMessage;
use super::profile::Profile;

/// Longest wait before reconnecting a broken inbox stream.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(30);

pub(super) fn chat(dir: &Path, server: Option<&str>, peer: &str) -> anyhow::Result<()> {
    let sender = Profile::open_at(dir, server)?;
    let peer_profile = sender.lookup(peer)?;
    let reader = Profile::open_at(dir, server)?;
    let (stop_tx, stop_rx) = bounded::<()>(1);
    let thread = thread::Builder::new()
        .name("chat-reader".to_string())
        .spawn(move || read_loop(reader, stop_rx))
        .context("starting the reader thread")?;

    let kind = if peer_profile.is_bot { "bot " } else { "" };
    eprintln!(
        "chatting with {kind}@{} ({}) as @{}; type a message and press Enter, /quit to leave",
        peer_profile.username,
        peer_profile.display_name,
        sender.username()
    );
    let stdin = io::stdin();
    for line in stdin.lock().lines() {
        let line = line.context("reading stdin")?;
        let text = line.trim_end_matches(['\r', '\n']);
        if text.trim() == "/quit" {
            break;
        }
        if text.trim().is_empty() {
            continue;
        }
        // Each line looks the peer up again, so a bot that added a device is still reached.
        if let Err(e) = sender.send_text(&peer_profile.username, text) {
            eprintln!("e2e-chat: could not send: {e}");
        }
    }
    drop(stop_tx);
    if thread.join().is_err() {
        anyhow::bail!("the reader thread panicked");
    }
    Ok(())
}

/// Prints incoming messages until `stop` is disconnected; reconnects a broken stream with a
/// growing delay.
fn read_loop(profile: Profile, stop: Receiver<()>) {
    let mut backoff = Backoff::new(Duration::from_secs(1), MAX_RECONNECT_DELAY);
    loop {
        match profile.receive_until(&stop, print_message) {
            Ok(_) => backoff.reset(),
            Err(e) => {
                let delay = backoff.next_delay();
                eprintln!("e2e-chat: {e}; retrying in {}s", delay.as_secs());
                match stop.recv_timeout(delay) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
                continue;
            }
        }
        // `receive_until` also returns after a stream broke mid-way; only a stop ends us.
        match stop.try_recv() {
            Err(TryRecvError::Empty) => {}
            Ok(()) | Err(TryRecvError::Disconnected) => return,
        }
    }
}

fn print_message(m: &ReceivedMessage) {
    let who = if m.sender.username.is_empty() { format!("user{}", m.sender.user_id) } else { m.sender.username.clone() };
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "[@{who}] {}", m.text);
    let _ = out.flush();
}
