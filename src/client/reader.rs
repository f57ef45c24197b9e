//! The device's Inbox stream, read on a named thread (`inbox-reader`) into a bounded
//! channel. Dropping the reader cancels the call and joins the thread.
//!
//! The platform keeps one Inbox stream per device: a second one replaces the first. So one
//! process of a profile reads at a time: the reader holds `inbox.lock` in the profile
//! directory (an exclusive `flock`, with the holder's pid and command in the file), and a
//! second `e2e-chat` that wants to read is told which process reads and what to do
//! (`ClientError::InboxBusy`), instead of taking the inbox away from it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::thread::{self, JoinHandle};

use crossbeam_channel::{bounded, Receiver, Sender as ChannelSender};
use futures::executor::block_on_stream;
use futures::stream::{AbortHandle, AbortRegistration, Abortable};

use super::error::{ClientError, Result, rpc};
use crate::wire::platform::{InboxEnvelope, InboxRequest};
use crate::wire::rpc::text as rpc_text;
use crate::wire::Platform;

/// Envelopes the reader thread may hold ahead of processing.
const INBOX_QUEUE: usize = 64;
/// The file in the profile directory whose lock says who reads the inbox.
pub const INBOX_LOCK: &str = "inbox.lock";
/// What the platform says to a stream another stream of the same device replaced.
const REPLACED: &str = "replaced by a newer Inbox stream";

pub(super) enum InboxEvent {
    Envelope(InboxEnvelope),
    /// The stream failed or ended; the reader thread has stopped.
    Closed(String),
}

/// The running Inbox stream of a profile. Dropping it cancels the call and joins the thread.
pub(super) struct InboxReader {
    events: Option<Receiver<InboxEvent>>,
    abort: AbortHandle,
    thread: Option<JoinHandle<()>>,
    /// Held while reading (module doc); closed, and so unlocked, with the reader.
    _lock: File,
}

impl InboxReader {
    /// Takes the profile's inbox lock in `dir`, then opens the stream.
    pub(super) fn start(platform: &Platform, dir: &Path) -> Result<InboxReader> {
        let lock = take_inbox_lock(dir)?;
        let receiver = platform
            .client
            .inbox(&InboxRequest::new(), platform.opt_with_timeout(None))
            .map_err(rpc("Inbox"))?;
        let (abort, registration) = AbortHandle::new_pair();
        let (tx, rx) = bounded(INBOX_QUEUE);
        // The thread keeps a clone so the channel outlives any profile reconnect.
        let platform = platform.clone();
        let thread = thread::Builder::new()
            .name("inbox-reader".to_string())
            .spawn(move || {
                let _platform = platform;
                read_stream(receiver, registration, tx)
            })
            .map_err(|source| ClientError::Io { what: "starting the inbox reader thread".to_string(), source })?;
        Ok(InboxReader { events: Some(rx), abort, thread: Some(thread), _lock: lock })
    }

    pub(super) fn events(&self) -> &Receiver<InboxEvent> {
        self.events.as_ref().expect("events is only taken in drop")
    }
}

impl Drop for InboxReader {
    fn drop(&mut self) {
        // Order matters: a reader blocked on a full channel wakes when the receiver goes away,
        // one blocked on the stream when the abort fires.
        drop(self.events.take());
        self.abort.abort();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("the inbox reader thread panicked");
            }
        }
    }
}

fn read_stream(
    mut receiver: grpcio::ClientSStreamReceiver<InboxEnvelope>,
    registration: AbortRegistration,
    tx: ChannelSender<InboxEvent>,
) {
    let mut blocking = block_on_stream(Abortable::new(&mut receiver, registration));
    let closed = loop {
        match blocking.next() {
            Some(Ok(envelope)) => {
                if tx.send(InboxEvent::Envelope(envelope)).is_err() {
                    break None; // The profile stopped listening.
                }
            }
            Some(Err(e)) if rpc_text(&e).contains(REPLACED) => break Some(
                "another program took this device's inbox: the same profile is being read elsewhere (a copy of the \
                 profile directory, or an e2e-chat of an earlier release); stop it to read here"
                    .to_string(),
            ),
            Some(Err(e)) => break Some(rpc_text(&e)),
            None if blocking.is_aborted() => break None,
            None => break Some("the server ended the stream".to_string()),
        }
    };
    if let Some(why) = closed {
        let _ = tx.send(InboxEvent::Closed(why));
    }
    drop(blocking);
    // Tell the server we are gone so it stops delivering to this stream.
    receiver.cancel();
}

/// Locks `dir/inbox.lock` for this process, recording who reads; `InboxBusy` naming the
/// process that holds it.
fn take_inbox_lock(dir: &Path) -> Result<File> {
    let path = dir.join(INBOX_LOCK);
    let io = |source| ClientError::Io { what: format!("opening {}", path.display()), source };
    let mut file = OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path).map_err(io)?;
    // SAFETY: flock on a file descriptor we own; no memory is involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        let holder = holder.trim();
        return Err(ClientError::InboxBusy { holder: (!holder.is_empty()).then(|| holder.to_string()) });
    }
    let command: Vec<String> = std::env::args().collect();
    let _ = file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "pid {}: {}", std::process::id(), command.join(" ")));
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_reader_of_one_profile_is_told_who_reads() {
        let dir = tempfile::tempdir().expect("dir");
        let first = take_inbox_lock(dir.path()).expect("the first reader");
        // flock locks belong to the open file description: a second open is a second reader.
        match take_inbox_lock(dir.path()) {
            Err(e @ ClientError::InboxBusy { .. }) => {
                let text = e.to_string();
                assert!(text.contains(&format!("pid {}", std::process::id())), "{text}");
                assert!(text.contains("Stop it"), "{text}");
            }
            other => panic!("expected InboxBusy, got {:?}", other.map(|_| ())),
        }
        drop(first);
        take_inbox_lock(dir.path()).expect("free again once the first reader is gone");
    }
}
