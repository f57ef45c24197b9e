//! `ins/<n>`: the platform's Inbox stream of one bot device, held open and reconnected.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crossbeam_channel::{select, Sender};
use futures::executor::block_on;
use futures::future::{select, Either};
use futures::StreamExt;

use crate::backoff::Backoff;
use crate::demand::Demand;
use crate::gateway::metrics::BotMetrics;
use crate::gateway::runtime::BotShared;
use crate::wire::rpc;
use crate::wire::platform::{InboxEnvelope, VerifyCredentialRequest};

use super::{RECONNECT_MAX, RECONNECT_START};

/// `ins/<n>`: holds the platform's Inbox stream and reconnects with backoff, until the
/// credential is revoked, this runtime's device is removed (`/removedevice`; retrying could
/// never succeed), or the bot stops (which also ends a stream waiting for its next envelope).
pub fn stream_loop(shared: Arc<BotShared>, tx: Sender<InboxEnvelope>, importer: Arc<Demand>) {
    let mut backoff = Backoff::new(RECONNECT_START, RECONNECT_MAX);
    while !shared.is_revoked() && !shared.is_stopping() {
        let delay = match stream_once(&shared, &tx, &importer) {
            Ok(()) => {
                backoff.reset();
                backoff.next_delay()
            }
            Err(e) if rpc::is_unauthenticated(&e) => {
                shared.revoke(&e.to_string());
                return;
            }
            Err(e) => {
                let delay = backoff.next_delay();
                shared.status.connected.store(false, Ordering::SeqCst);
                shared.status.set_error(format!("platform connection: {e}"));
                log::warn!("bot @{}: inbox stream: {e}; reconnecting in {delay:?}", shared.username);
                delay
            }
        };
        // Wakes at once when the bot stops.
        let _ = shared.stop_signal().recv_timeout(delay);
    }
}

/// One stream session: check the credential, then forward envelopes until the stream ends.
fn stream_once(shared: &BotShared, tx: &Sender<InboxEnvelope>, importer: &Arc<Demand>) -> Result<(), grpcio::Error> {
    let p = &shared.platform;
    p.verify_credential(&VerifyCredentialRequest::new())?;
    let mut cancel = shared.stream_cancel();
    let mut receiver = p.inbox()?;
    shared.status.connected.store(true, Ordering::SeqCst);
    BotMetrics::add(&shared.metrics.stream_connects, 1);
    log::info!("bot @{}: connected to the platform inbox", shared.username);
    loop {
        // The next envelope, or the bot's stop: dropping the receiver then cancels the call.
        let envelope = match block_on(select(receiver.next(), &mut cancel)) {
            Either::Left((Some(item), _)) => item?,
            Either::Left((None, _)) => break,
            Either::Right(_) => return Ok(()),
        };
        // Waits while `in/<n>` is behind (backpressure), but never past the bot's stop.
        select! {
            send(tx, envelope) -> sent => if sent.is_err() { return Ok(()) },
            recv(shared.stop_signal()) -> _ => return Ok(()),
        }
        // Queued first: an `in/<n>` that is ending sees it and goes on; none running starts.
        if let Err(e) = importer.start() {
            log::error!("bot @{}: cannot start the inbox thread: {e}", shared.username);
        }
    }
    shared.status.connected.store(false, Ordering::SeqCst);
    Err(grpcio::Error::RemoteStopped)
}
