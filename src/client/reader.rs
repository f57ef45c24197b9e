//! The device's Inbox stream, read on a named thread (`inbox-reader`) into a bounded
//! channel. Dropping the reader cancels the call and joins the thread.

use std::thread::{self, JoinHandle};

use crossbeam_channel::{bounded, Receiver, Sender as ChannelSender};
use futures::executor::block_on_stream;
use futures::stream::{AbortHandle, AbortRegistration, Abortable};

use super::error::{ClientError, Result};
use crate::wire::platform::{InboxEnvelope, InboxRequest};
use crate::wire::rpc::text as rpc_text;
use crate::wire::Platform;

/// Envelopes the reader thread may hold ahead of processing.
const INBOX_QUEUE: usize = 64;

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
}

impl InboxReader {
    pub(super) fn start(platform: &Platform) -> Result<InboxReader> {
        let receiver = platform
            .client
            .inbox(&InboxRequest::new(), platform.opt_with_timeout(None))
            .map_err(|status| ClientError::Rpc { call: "Inbox", status })?;
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
        Ok(InboxReader { events: Some(rx), abort, thread: Some(thread) })
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
