//! The outbox thread (`outbox:<bot>`): seals each outgoing message for every device of the
//! recipient, commits the ciphertexts, then sends, retrying with backoff until the platform
//! acknowledges. A retry resends the committed ciphertexts under the same client message id,
//! so the platform stores exactly one message and no message key is ever used twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use super::botapi::ApiError;
use super::runtime::{unix_now, BotShared};
use super::store::{chats, outbox, StoreError};
use crate::crypto;
use crate::e2e;
use crate::wire::e2e::Content;
use crate::wire::platform::{send_result::Status as SendStatus, GetPrekeyBundlesRequest, OutgoingMessage, SendMessagesRequest};

/// Messages sent in one SendMessages call (one gRPC round trip for many messages).
const SEND_BATCH: usize = 128;
const BACKOFF_START: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A message whose recipient's device list keeps changing is given up after this many rounds.
const MAX_DEVICE_REFRESHES: i64 = 8;

/// What the platform assigned to a sent message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub message_id: i64,
    pub date: i64,
}

type Waiter = Sender<Result<Sent, ApiError>>;

/// The HTTP side of the outbox: record a message durably, wake the thread, wait for the result.
pub struct OutboxHandle {
    wake_tx: Sender<()>,
    wake_rx: Receiver<()>,
    waiters: Mutex<HashMap<i64, Waiter>>,
}

impl Default for OutboxHandle {
    fn default() -> Self {
        Self::new()
    }
}

impl OutboxHandle {
    pub fn new() -> OutboxHandle {
        // One pending wake-up is enough: the thread always drains everything pending.
        let (wake_tx, wake_rx) = bounded(1);
        OutboxHandle { wake_tx, wake_rx, waiters: Mutex::new(HashMap::new()) }
    }

    pub fn wake(&self) {
        let _ = self.wake_tx.try_send(());
    }

    /// Records `content` for `chat_id` in the outbox and waits up to `wait` for the platform's
    /// acknowledgement. On timeout the message stays queued and is still delivered.
    pub fn submit(&self, shared: &BotShared, chat_id: i64, content: Content, wait: Duration) -> Result<Sent, ApiError> {
        if shared.is_revoked() {
            return Err(ApiError::unauthorized());
        }
        let client_message_id = crypto::hex_encode(&crypto::random_bytes::<16>());
        let (tx, rx) = bounded(1);
        // Register the waiter before the row exists for the thread, under the same lock the
        // thread uses to finish, so a fast acknowledgement cannot be missed.
        let mut waiters = self.waiters.lock().expect("outbox waiters lock");
        let id = shared
            .store
            .write(move |c| outbox::insert(c, &client_message_id, chat_id, &content, unix_now()))
            .map_err(|e| ApiError::internal(format!("cannot record the message in the outbox: {e}")))?;
        waiters.insert(id, tx);
        drop(waiters);
        self.wake();
        match rx.recv_timeout(wait) {
            Ok(r) => r,
            Err(_) => {
                self.waiters.lock().expect("outbox waiters lock").remove(&id);
                Err(ApiError::new(
                    504,
                    "Gateway Timeout: the platform has not acknowledged the message yet; it stays in the outbox and will be sent",
                ))
            }
        }
    }

    fn finish(&self, id: i64, result: Result<Sent, ApiError>) {
        if let Some(tx) = self.waiters.lock().expect("outbox waiters lock").remove(&id) {
            let _ = tx.send(result);
        }
    }

    fn fail_all(&self, error: ApiError) {
        for (_, tx) in self.waiters.lock().expect("outbox waiters lock").drain() {
            let _ = tx.send(Err(error.clone()));
        }
    }
}

/// Starts `outbox:<bot>`. It runs for the life of the process; every step it takes is a
/// committed transaction, so stopping it anywhere is safe.
pub fn spawn(shared: Arc<BotShared>) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name(format!("outbox:{}", shared.username))
        .spawn(move || run(shared))
}

#[derive(Debug)]
enum SendError {
    Store(StoreError),
    Platform(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Store(e) => write!(f, "{e}"),
            SendError::Platform(e) => write!(f, "platform: {e}"),
        }
    }
}

impl From<StoreError> for SendError {
    fn from(e: StoreError) -> Self {
        SendError::Store(e)
    }
}

fn run(shared: Arc<BotShared>) {
    let wake = shared.outbox.wake_rx.clone();
    let mut backoff = BACKOFF_START;
    loop {
        if shared.is_revoked() {
            // Nothing more is sent once the credential is revoked; waiters learn it at once.
            shared.outbox.fail_all(ApiError::unauthorized());
            if wake.recv().is_err() {
                return;
            }
            continue;
        }
        match send_pending(&shared) {
            Ok(true) => backoff = BACKOFF_START,
            Ok(false) => {
                backoff = BACKOFF_START;
                if wake.recv().is_err() {
                    return;
                }
            }
            Err(e) => {
                log::warn!("bot @{}: outbox send failed, retrying in {backoff:?}: {e}", shared.username);
                shared.status.set_error(format!("outbox: {e}"));
                match wake.recv_timeout(backoff) {
                    Err(RecvTimeoutError::Disconnected) => return,
                    _ => backoff = (backoff * 2).min(BACKOFF_MAX),
                }
            }
        }
    }
}

/// Sends one batch of pending messages. Ok(false) when the outbox is empty.
fn send_pending(shared: &BotShared) -> Result<bool, SendError> {
    let entries = shared.store.read(|c| outbox::pending(c, SEND_BATCH))?;
    if entries.is_empty() {
        return Ok(false);
    }
    let mut batch = Vec::with_capacity(entries.len());
    for entry in entries {
        let sealed = match &entry.sealed {
            Some(m) => m.clone(),
            None => seal(shared, &entry)?,
        };
        batch.push((entry, sealed));
    }
    let mut req = SendMessagesRequest::new();
    req.messages = batch.iter().map(|(_, m)| m.clone()).collect();
    let resp = match shared.platform.client.send_messages(&req, shared.platform.opt()) {
        Ok(r) => r,
        Err(e) => {
            if super::inbox::is_unauthenticated(&e) {
                shared.revoke(&e.to_string());
                return Ok(true);
            }
            shared.status.connected.store(false, std::sync::atomic::Ordering::SeqCst);
            let msg = e.to_string();
            let ids: Vec<i64> = batch.iter().map(|(e, _)| e.id).collect();
            let note = msg.clone();
            shared.store.write(move |c| {
                for id in ids {
                    outbox::note_failure(c, id, &note)?;
                }
                Ok(())
            })?;
            return Err(SendError::Platform(msg));
        }
    };
    shared.status.connected.store(true, std::sync::atomic::Ordering::SeqCst);
    for ((entry, sealed), result) in batch.into_iter().zip(resp.results.iter()) {
        match result.status.enum_value_or_default() {
            SendStatus::OK => {
                let sent = Sent { message_id: result.message_id as i64, date: result.date };
                let history = chats::HistoryEntry {
                    chat_id: entry.chat_id,
                    message_id: sent.message_id,
                    from_bot: true,
                    sender_id: shared.compat_user_id as i64,
                    date: sent.date,
                    content: entry.content.clone(),
                };
                let id = entry.id;
                shared.store.write(move |c| {
                    outbox::remove(c, id)?;
                    chats::record(c, &history)
                })?;
                shared.outbox.finish(entry.id, Ok(sent));
            }
            SendStatus::STALE_DEVICES => {
                if entry.attempts >= MAX_DEVICE_REFRESHES {
                    give_up(shared, entry.id, ApiError::platform(502, "the recipient's device list keeps changing"))?;
                } else {
                    refresh_devices(shared, &entry, sealed, &result.missing_devices, &result.removed_devices)?;
                }
            }
            SendStatus::UNKNOWN_RECIPIENT => {
                give_up(shared, entry.id, ApiError::bad_request("chat not found"))?;
            }
            SendStatus::REJECTED => {
                give_up(shared, entry.id, ApiError::bad_request(format!("the platform rejected the message: {}", result.error)))?;
            }
        }
    }
    Ok(true)
}

fn give_up(shared: &BotShared, id: i64, error: ApiError) -> Result<(), SendError> {
    log::warn!("bot @{}: outbox message {id} dropped: {}", shared.username, error.description);
    shared.store.write(move |c| outbox::remove(c, id))?;
    shared.outbox.finish(id, Err(error));
    Ok(())
}

/// Encrypts a message for every known device of the recipient and commits the result before
/// anything is sent.
fn seal(shared: &BotShared, entry: &outbox::OutboxEntry) -> Result<OutgoingMessage, SendError> {
    let peer = entry.chat_id as u64;
    let known = shared.store.read(move |c| Ok(e2e::known_devices(c, peer)?))?;
    if known.is_empty() {
        add_sessions(shared, peer, Vec::new())?;
    }
    let (id, cmid, content) = (entry.id, entry.client_message_id.clone(), entry.content.clone());
    Ok(shared.store.write(move |c| {
        let mut m = OutgoingMessage::new();
        m.client_message_id = cmid;
        m.recipient_user_id = peer;
        m.ciphertexts = e2e::seal(c, peer, &content)?;
        outbox::set_sealed(c, id, &m)?;
        Ok(m)
    })?)
}

/// Fetches bundles for `devices` of `peer` (all devices when empty) and starts sessions.
fn add_sessions(shared: &BotShared, peer: u64, devices: Vec<u32>) -> Result<(), SendError> {
    let mut req = GetPrekeyBundlesRequest::new();
    req.user_id = peer;
    req.device_ids = devices;
    let resp = shared
        .platform
        .client
        .get_prekey_bundles(&req, shared.platform.opt())
        .map_err(|e| SendError::Platform(format!("prekey bundles of user {peer}: {e}")))?;
    shared.store.write(move |c| Ok(e2e::add_sessions(c, &resp.profile, &resp.bundles)?))?;
    Ok(())
}

/// The platform said the device list was stale: start sessions with the missing devices, then
/// mend the committed message the one way every sender does (`e2e::reseal_after_stale`).
fn refresh_devices(
    shared: &BotShared,
    entry: &outbox::OutboxEntry,
    mut sealed: OutgoingMessage,
    missing: &[u32],
    removed: &[u32],
) -> Result<(), SendError> {
    let peer = entry.chat_id as u64;
    let wanted = missing.to_vec();
    let need = shared.store.read(move |c| Ok(e2e::devices_without_session(c, peer, &wanted)?))?;
    if !need.is_empty() {
        add_sessions(shared, peer, need)?;
    }
    let (id, content, missing, removed) = (entry.id, entry.content.clone(), missing.to_vec(), removed.to_vec());
    shared.store.write(move |c| {
        e2e::reseal_after_stale(c, peer, &mut sealed.ciphertexts, &missing, &removed, &content)?;
        outbox::set_sealed(c, id, &sealed)?;
        outbox::note_failure(c, id, "recipient device list changed")
    })?;
    Ok(())
}

