//! The outbox thread (`out/<n>`): takes pending messages in batches, seals each for every
//! device of its recipient and commits all the ciphertexts in one transaction, then sends the
//! batch and records all the answers in one more, retrying with backoff until the platform
//! acknowledges. A retry resends the committed ciphertexts under the same client message id,
//! so the platform stores exactly one message and no message key is ever used twice.
//!
//! Nothing is answered with an error and then sent. A caller waits `send_wait_seconds`; then
//! its message is either withdrawn, if it was never handed to the platform (answered 429: not
//! sent, never will be), or it is on its way and the caller waits for the platform's answer.
//! While the platform does not answer, only the messages already handed to it are tried
//! again, so new ones stay withdrawable. A message the outbox gives up is recorded
//! (`store::outbox::give_up`), logged with its chat and message id, and counted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;
use rusqlite::Connection;

use super::metrics::BotMetrics;
use super::runtime::{unix_now, BotShared, SendFailure, Sent};
use super::groups::{self as group_send, GroupSend};
use super::port::StepError;
use super::store::{groups, outbox, Store, StoreError};
use crate::backoff::Backoff;
use crate::e2e;
use super::keyboard;
use crate::crypto::IdentityKeyPair;
use crate::wire::e2e::content::Body;
use crate::wire::platform::{
    send_result::Status as SendStatus, GetPrekeyBundlesRequest, GetPrekeyBundlesResponse, MessageIdReservation,
    OutgoingMessage, Profile, ReserveMessageIdsRequest, SendMessagesRequest, SendResult,
};

/// Messages sent in one SendMessages call (one gRPC round trip for many messages).
const SEND_BATCH: usize = 128;
const BACKOFF_START: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A message whose recipient's device list keeps changing is given up after this many rounds.
const MAX_DEVICE_REFRESHES: i64 = 8;

#[derive(Debug)]
enum SendError {
    Store(StoreError),
    /// The platform did not answer (network, deadline) or refused a call.
    Platform(String),
    /// A group message's step failed (the platform unanswered, or the store).
    Group(StepError),
    /// The platform answered, and a group message must wait (its epoch moved on, removals were
    /// due) while the inbox catches up.
    Later(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Store(e) => write!(f, "{e}"),
            SendError::Group(e) => write!(f, "group: {e}"),
            SendError::Platform(e) | SendError::Later(e) => write!(f, "platform: {e}"),
        }
    }
}

/// Says that a send was given up: counted, logged at warn with its chat and message id (never
/// its content), and answered to its caller if one still waits.
fn gave_up(shared: &BotShared, row: i64, record: &outbox::GivenUp, failure: SendFailure) {
    BotMetrics::add(&shared.metrics.outbox_given_up, 1);
    let message = record.message_id.map_or(String::new(), |id| format!(", message {id}"));
    let caller = if shared.outbox.finish(row, Err(failure)) { "its caller was told" } else { "no caller waited" };
    log::warn!(
        "bot @{}: outbox gave up a {} to chat {}{message} (outbox row {row}; {caller}; listed at /outbox/given-up): {}",
        shared.username,
        record.kind,
        record.chat_id,
        record.reason
    );
}

/// Gives up every message of the outbox (the platform refuses the credential: nothing more is
/// sent) and answers their callers with the refusal.
fn give_up_everything(shared: &BotShared) -> Result<(), StoreError> {
    let reason = SendFailure::CredentialRefused.reason().to_string();
    loop {
        let entries = shared.store.read(|c| outbox::pending(c, SEND_BATCH))?;
        if entries.is_empty() {
            return Ok(());
        }
        let reason = reason.clone();
        let now = unix_now();
        let records = shared.store.write(move |c| {
            let mut records = Vec::new();
            for e in &entries {
                if let Some(r) = outbox::give_up(c, e, &reason, now)? {
                    records.push((e.id, r));
                }
            }
            Ok(records)
        })?;
        for (row, record) in records {
            gave_up(shared, row, &record, SendFailure::CredentialRefused);
        }
    }
}

impl From<StoreError> for SendError {
    fn from(e: StoreError) -> Self {
        SendError::Store(e)
    }
}

/// `out/<n>`: seals, commits and sends pending messages in batches, retrying with backoff.
/// Returns when the bot stops (`BotShared::stop` wakes it), or once the outbox has been empty
/// for `idle` with no wake-up: the thread runs on demand (`crate::demand`; its `wake` starts
/// it again).
pub fn run(shared: &BotShared, idle: Duration) {
    let wake = shared.outbox.wake.receiver().clone();
    let mut backoff = Backoff::new(BACKOFF_START, BACKOFF_MAX);
    // The platform left the last call unanswered: only handed messages are tried until it
    // answers again.
    let mut unanswered = false;
    loop {
        if shared.is_stopping() {
            return;
        }
        if shared.is_revoked() {
            // Nothing more is sent once the credential is revoked: every message is given up
            // (recorded) and its caller learns it at once.
            if let Err(e) = give_up_everything(shared) {
                log::error!("bot @{}: cannot give up the outbox after the credential was refused: {e}", shared.username);
            }
            shared.outbox.fail_all(SendFailure::CredentialRefused);
            if wake.recv().is_err() {
                return;
            }
            continue;
        }
        let result = send_pending(shared, unanswered);
        unanswered = matches!(result, Err(SendError::Platform(_) | SendError::Store(_) | SendError::Group(_)));
        match result {
            Ok(true) => backoff.reset(),
            Ok(false) => {
                backoff.reset();
                if wake.recv_timeout(idle).is_err() {
                    return;
                }
            }
            Err(e) => {
                let delay = backoff.next_delay();
                log::warn!("bot @{}: outbox send failed, retrying in {delay:?}: {e}", shared.username);
                shared.status.set_error(format!("outbox: {e}"));
                if let Err(RecvTimeoutError::Disconnected) = wake.recv_timeout(delay) {
                    return;
                }
            }
        }
    }
}

/// Sends one batch of pending messages. Ok(false) when the outbox is empty. With
/// `only_handed` (the platform left the last call unanswered), only messages already handed to
/// it are tried, if there are any: a message handed now could no longer be withdrawn by its
/// caller, and would hold the caller until the platform is back.
///
/// At most three writer jobs per batch, whatever its size: one hands the new messages over
/// (`hand_over`, before their ids are reserved), one seals every message not sealed yet and
/// commits the ciphertexts before the send (`seal_batch`), one records every answer
/// (`record_results`). Prekey bundles are fetched before each job, never inside one.
fn send_pending(shared: &BotShared, only_handed: bool) -> Result<bool, SendError> {
    let mut entries = shared.store.read(|c| outbox::pending(c, SEND_BATCH))?;
    if entries.is_empty() {
        return Ok(false);
    }
    if only_handed && entries.iter().any(|e| e.handed) {
        entries.retain(|e| e.handed);
    }
    // Group messages go one by one through MLS (`gateway::groups`); private ones in batches.
    let (group_entries, entries): (Vec<_>, Vec<_>) =
        entries.into_iter().partition(|e| groups::is_group_chat_id(e.chat_id));
    let groups_sent = send_to_groups(shared, group_entries);
    if let Err(e @ (SendError::Platform(_) | SendError::Group(_))) = groups_sent {
        // Unanswered: hand nothing more now.
        return Err(e);
    }
    if entries.is_empty() {
        return groups_sent.map(|()| true);
    }
    let entries = hand_over(shared, entries)?;
    if entries.is_empty() {
        // Every one was withdrawn by its caller meanwhile.
        return groups_sent.map(|()| true);
    }
    let fetched = bundles_of_new_recipients(shared, &entries)?;
    let (ids, refused) = reserve_ids(shared, &entries)?;
    let entries = give_up_refused(shared, entries, refused)?;
    if entries.is_empty() {
        return Ok(true);
    }
    let signer = Signer { identity: &shared.identity, bot_user_id: shared.compat_user_id, ids };
    let batch = seal_batch(&shared.store, entries, fetched, &signer, &shared.username)?;
    if batch.is_empty() {
        // Every one was withdrawn by its caller meanwhile.
        return groups_sent.map(|()| true);
    }
    let mut req = SendMessagesRequest::new();
    // Each message names the files it carries (from its content, also for one sealed by an
    // earlier run): the platform sweeps uploads that no message named.
    req.messages = batch
        .iter()
        .map(|(e, m)| OutgoingMessage { file_refs: e2e::file::refs_in(&e.content), ..m.clone() })
        .collect();
    req.names_files = true;
    let resp = match shared.platform.send_messages(&req) {
        Ok(r) => r,
        Err(e) => {
            if crate::wire::rpc::is_unauthenticated(&e) {
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
    let answered: Vec<Answered> =
        batch.into_iter().zip(resp.results).map(|((entry, sealed), result)| Answered { entry, sealed, result }).collect();
    let fetched = bundles_of_missing_devices(shared, &answered)?;
    let outcomes = record_results(&shared.store, shared.compat_user_id, answered, fetched, &shared.username)?;
    let mut failure = None;
    for (id, outcome) in outcomes {
        match outcome {
            Outcome::Sent(sent) => {
                shared.outbox.finish(id, Ok(sent));
            }
            Outcome::GaveUp(record, failure) => gave_up(shared, id, &record, failure),
            Outcome::Resealed => {}
            Outcome::Failed(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    match failure {
        // The others are recorded; this one is sent again with its committed bytes.
        Some(e) => Err(e.into()),
        None => groups_sent.map(|()| true),
    }
}

/// A message to a group that keeps meeting a moving epoch is given up after this many tries.
const MAX_GROUP_ATTEMPTS: i64 = 20;

/// Sends the group messages of a batch in order. One that must wait (the epoch moved on,
/// removals were due) stops the rest of its group's messages, so their order holds; the outbox
/// then backs off while the inbox catches up.
fn send_to_groups(shared: &BotShared, entries: Vec<outbox::OutboxEntry>) -> Result<(), SendError> {
    let mut waiting: Vec<i64> = Vec::new();
    let mut later = None;
    for entry in entries {
        if waiting.contains(&entry.chat_id) {
            continue;
        }
        if entry.attempts >= MAX_GROUP_ATTEMPTS {
            let failure = SendFailure::GaveUp("the group kept changing under the message; it was not sent".into());
            let (e, reason) = (entry.clone(), failure.reason().to_string());
            if let Some(record) = shared.store.write(move |c| outbox::give_up(c, &e, &reason, unix_now()))? {
                gave_up(shared, entry.id, &record, failure);
            }
            continue;
        }
        match group_send::send(shared, &entry) {
            Ok(GroupSend::Sent(sent)) => {
                shared.outbox.finish(entry.id, Ok(sent));
            }
            Ok(GroupSend::GaveUp(record, failure)) => gave_up(shared, entry.id, &record, failure),
            Ok(GroupSend::Withdrawn) => {}
            Ok(GroupSend::Later(why)) => {
                waiting.push(entry.chat_id);
                later = Some(why);
            }
            // Unanswered (or the store failed): nothing more is handed to the platform now.
            Err(e) => return Err(SendError::Group(e)),
        }
    }
    match later {
        Some(why) => Err(SendError::Later(why)),
        None => Ok(()),
    }
}

/// Message ids reserved for the entries to seal, by client message id: (message id, date),
/// which the content vouches for and a keyboard's signed context names.
type Reservations = BTreeMap<String, (u64, i64)>;

/// What signs the keyboards of a batch (`keyboard::attach_context`) inside the seal job.
struct Signer<'a> {
    identity: &'a IdentityKeyPair,
    bot_user_id: u64,
    ids: Reservations,
}

/// Reserves the message ids of every unsealed entry (one ReserveMessageIds call per batch):
/// every content vouches for its id and date (`e2e::vouch`), and a keyboard's signed context
/// names them too. A repeat after a failed seal answers the same ids.
fn reserve_ids(shared: &BotShared, entries: &[outbox::OutboxEntry]) -> Result<(Reservations, Vec<(String, String)>), SendError> {
    let mut req = ReserveMessageIdsRequest::new();
    for e in entries.iter().filter(|e| e.sealed.is_none()) {
        let mut r = MessageIdReservation::new();
        r.client_message_id = e.client_message_id.clone();
        r.recipient_user_id = e.chat_id as u64;
        req.reservations.push(r);
    }
    if req.reservations.is_empty() {
        return Ok((Reservations::new(), Vec::new()));
    }
    let resp = shared
        .platform
        .reserve_message_ids(&req)
        .map_err(|e| SendError::Platform(format!("reserving message ids: {e}")))?;
    let (ok, refused): (Vec<_>, Vec<_>) = resp.ids.into_iter().partition(|r| r.message_id != 0);
    Ok((
        ok.into_iter().map(|r| (r.client_message_id, (r.message_id, r.date))).collect(),
        refused.into_iter().map(|r| (r.client_message_id, r.error)).collect(),
    ))
}

/// Marks the entries not handed yet as handed to the platform (one writer job, none when all
/// are): from here their callers wait for the platform's answer, since the reservation that
/// comes next is already a call about them. Entries withdrawn meanwhile are left out.
fn hand_over(shared: &BotShared, entries: Vec<outbox::OutboxEntry>) -> Result<Vec<outbox::OutboxEntry>, SendError> {
    if entries.iter().all(|e| e.handed) {
        return Ok(entries);
    }
    let now = unix_now();
    // Relaxed: a hand-over lost to a power failure is made again after the restart (the
    // reservation it precedes answers the same ids again); the seal's synced commit carries it.
    Ok(shared.store.write_relaxed(move |c| {
        let mut kept = Vec::with_capacity(entries.len());
        for mut entry in entries {
            if entry.handed || outbox::mark_handed(c, entry.id, now)? {
                entry.handed = true;
                kept.push(entry);
            }
        }
        Ok(kept)
    })?)
}

/// Ends the entries whose reservation the platform refused (an unknown recipient), as a
/// refused send would, and returns the others.
fn give_up_refused(
    shared: &BotShared,
    entries: Vec<outbox::OutboxEntry>,
    refused: Vec<(String, String)>,
) -> Result<Vec<outbox::OutboxEntry>, SendError> {
    if refused.is_empty() {
        return Ok(entries);
    }
    let (gone, kept): (Vec<_>, Vec<_>) =
        entries.into_iter().partition(|e| refused.iter().any(|(cmid, _)| *cmid == e.client_message_id));
    let gone: Vec<(outbox::OutboxEntry, SendFailure)> = gone
        .into_iter()
        .map(|e| {
            let why = refused.iter().find(|(cmid, _)| *cmid == e.client_message_id).map(|(_, w)| w.as_str()).unwrap_or("");
            (e, SendFailure::Refused(format!("the platform refused a message id for the message: {why}")))
        })
        .collect();
    let now = unix_now();
    let records = shared.store.write(move |c| {
        let mut records = Vec::new();
        for (e, failure) in gone {
            if let Some(r) = outbox::give_up(c, &e, failure.reason(), now)? {
                records.push((e.id, r, failure));
            }
        }
        Ok(records)
    })?;
    for (row, record, failure) in records {
        gave_up(shared, row, &record, failure);
    }
    Ok(kept)
}

/// One message of a batch with the platform's answer to it.
struct Answered {
    entry: outbox::OutboxEntry,
    sealed: OutgoingMessage,
    result: SendResult,
}

/// What recording an answer did to its message.
#[derive(Debug)]
enum Outcome {
    /// Acknowledged with the platform's id: left the outbox.
    Sent(Sent),
    /// Given up and recorded: left the outbox unsent; the error is its caller's answer.
    GaveUp(outbox::GivenUp, SendFailure),
    /// Mended after STALE_DEVICES and committed; sent again in the next batch.
    Resealed,
    /// Recording failed and was rolled back: the message stays as it was and is sent again.
    Failed(StoreError),
}

/// ONE writer job: starts sessions from the bundles `fetched` for recipients we knew no device
/// of, seals every entry that is not sealed yet, and commits all the ciphertexts before anything
/// is sent. An entry sealed before (a retry, a restart) keeps exactly its committed bytes; when
/// every entry is, no job runs at all.
fn seal_batch(
    store: &Store,
    entries: Vec<outbox::OutboxEntry>,
    fetched: Vec<GetPrekeyBundlesResponse>,
    signer: &Signer<'_>,
    bot: &str,
) -> Result<Vec<(outbox::OutboxEntry, OutgoingMessage)>, StoreError> {
    if let Some(all) = entries.iter().map(|e| e.sealed.clone()).collect::<Option<Vec<_>>>() {
        return Ok(entries.into_iter().zip(all).collect());
    }
    let bot = bot.to_string();
    let (identity, bot_user_id, ids) = (signer.identity.clone(), signer.bot_user_id, signer.ids.clone());
    let now = unix_now();
    store.write(move |c| {
        start_sessions(c, &fetched, &bot)?;
        let mut batch = Vec::with_capacity(entries.len());
        for mut entry in entries {
            // Committed with its ciphertexts: from now on its caller can no longer withdraw
            // it. A row that is gone was withdrawn, and is not sent.
            if !outbox::mark_handed(c, entry.id, now)? {
                continue;
            }
            entry.handed = true;
            let sealed = match &entry.sealed {
                Some(m) => m.clone(),
                None => {
                    let peer = entry.chat_id as u64;
                    let Some(&(message_id, date)) = ids.get(&entry.client_message_id) else {
                        return Err(StoreError::Corrupt(format!("outbox {}: no message id reserved for it", entry.id)));
                    };
                    if keyboard::needs_context(&entry.content) {
                        // Signed once, with the reserved id; the signed content is what the
                        // history keeps.
                        keyboard::attach_context(&identity, bot_user_id, keyboard::KeyboardChat::Private(peer), message_id, date, &mut entry.content);
                        outbox::set_content(c, entry.id, &entry.content)?;
                    }
                    // The receiver checks the envelope against it (`e2e::vouch`).
                    e2e::vouch::vouch(&mut entry.content, message_id, date);
                    let mut m = OutgoingMessage::new();
                    m.client_message_id = entry.client_message_id.clone();
                    m.recipient_user_id = peer;
                    if let Some(Body::InlineResults(r)) = &entry.content.body {
                        m.inline_session_id = r.session_id;
                    }
                    // Numbered here, in memory: a reseal after STALE_DEVICES in this run
                    // seals the same number; after a restart the sealed message is resent
                    // as it is (`e2e::sequence`).
                    e2e::sequence::number(c, e2e::sequence::Conversation::Private(peer), &mut entry.content)?;
                    m.ciphertexts = e2e::seal(c, peer, &entry.content)?;
                    outbox::set_sealed(c, entry.id, &m)?;
                    m
                }
            };
            batch.push((entry, sealed));
        }
        Ok(batch)
    })
}

/// ONE writer job for the platform's answers to a batch: an acknowledged message leaves the
/// outbox and enters the history, a refused one leaves the outbox, and a stale one is mended
/// the one way every sender does (`e2e::reseal_after_stale`, after starting sessions from the
/// bundles `fetched` for its missing devices) and committed before it is sent again. Each
/// answer has its own savepoint: one that cannot be recorded stays as it was and the others
/// are recorded.
fn record_results(
    store: &Store,
    bot_user_id: u64,
    answered: Vec<Answered>,
    fetched: Vec<GetPrekeyBundlesResponse>,
    bot: &str,
) -> Result<Vec<(i64, Outcome)>, StoreError> {
    let bot = bot.to_string();
    // When every answer is OK, the job only records acknowledgements: lost to a power failure,
    // the message is sent again under its client message id after the restart, and the
    // platform answers it as before and delivers nothing twice. A reseal (ratchet state that
    // is sent next) or a message given up (an error its caller was told) is synced.
    let only_acknowledgements = fetched.is_empty() && answered.iter().all(|a| a.result.status.enum_value_or_default() == SendStatus::OK);
    let job = move |c: &Connection| {
        start_sessions(c, &fetched, &bot)?;
        let mut outcomes = Vec::with_capacity(answered.len());
        for a in answered {
            c.execute_batch("SAVEPOINT answer")?;
            let outcome = record_answer(c, bot_user_id, &a.entry, a.sealed, &a.result);
            c.execute_batch(match &outcome {
                Ok(_) => "RELEASE answer",
                Err(_) => "ROLLBACK TO answer; RELEASE answer",
            })?;
            outcomes.push((a.entry.id, outcome.unwrap_or_else(Outcome::Failed)));
        }
        Ok(outcomes)
    };
    if only_acknowledgements {
        store.write_relaxed(job)
    } else {
        store.write(job)
    }
}

fn record_answer(
    c: &Connection,
    bot_user_id: u64,
    entry: &outbox::OutboxEntry,
    mut sealed: OutgoingMessage,
    result: &SendResult,
) -> Result<Outcome, StoreError> {
    let give_up = |failure: SendFailure| -> Result<Outcome, StoreError> {
        // Handed rows are never withdrawn, so it is still there.
        let record = outbox::give_up(c, entry, failure.reason(), unix_now())?
            .ok_or_else(|| StoreError::Corrupt(format!("outbox {} vanished while it was with the platform", entry.id)))?;
        Ok(Outcome::GaveUp(record, failure))
    };
    match result.status.enum_value_or_default() {
        SendStatus::OK => {
            let sent = Sent { message_id: result.message_id as i64, date: result.date };
            outbox::remove(c, entry.id)?;
            super::history::record_in_history(c, bot_user_id, entry, &sent)?;
            Ok(Outcome::Sent(sent))
        }
        SendStatus::STALE_DEVICES if entry.attempts >= MAX_DEVICE_REFRESHES => {
            give_up(SendFailure::GaveUp("the recipient's device list keeps changing".into()))
        }
        SendStatus::STALE_DEVICES => {
            let peer = entry.chat_id as u64;
            let (missing, removed) = (&result.missing_devices, &result.removed_devices);
            e2e::reseal_after_stale(c, peer, &mut sealed.ciphertexts, missing, removed, &entry.content)?;
            outbox::set_sealed(c, entry.id, &sealed)?;
            outbox::note_failure(c, entry.id, "recipient device list changed")?;
            Ok(Outcome::Resealed)
        }
        SendStatus::UNKNOWN_RECIPIENT => give_up(SendFailure::Refused("chat not found".into())),
        SendStatus::REJECTED if matches!(entry.content.body, Some(Body::InlineResults(_))) => {
            give_up(SendFailure::Refused(format!("the platform refused the inline answer: {}", result.error)))
        }
        SendStatus::REJECTED => {
            give_up(SendFailure::Refused(format!("the platform rejected the message: {}", result.error)))
        }
    }
}


/// Starts sessions from fetched bundles inside a writer job. Bundles that are refused (a
/// certificate that does not verify, a changed device key) start nothing and write nothing:
/// that recipient's devices stay without a session, the platform names them as missing, and
/// `MAX_DEVICE_REFRESHES` ends the message. Only a failing database fails the job.
fn start_sessions(c: &Connection, fetched: &[GetPrekeyBundlesResponse], bot: &str) -> Result<(), StoreError> {
    for resp in fetched {
        match e2e::start_sessions(c, resp) {
            Ok(()) => {}
            Err(e2e::E2eError::Db(e)) => return Err(e.into()),
            Err(e) => log::warn!("bot @{bot}: prekey bundles of user {} refused: {e}", resp.profile.user_id),
        }
    }
    Ok(())
}

/// Bundles of every recipient of an unsealed entry we know no device of, fetched once each.
fn bundles_of_new_recipients(
    shared: &BotShared,
    entries: &[outbox::OutboxEntry],
) -> Result<Vec<GetPrekeyBundlesResponse>, SendError> {
    let peers: BTreeSet<u64> = entries.iter().filter(|e| e.sealed.is_none()).map(|e| e.chat_id as u64).collect();
    if peers.is_empty() {
        return Ok(Vec::new());
    }
    let unknown = shared.store.read(|c| {
        let mut unknown = Vec::new();
        for peer in peers {
            if e2e::known_devices(c, peer)?.is_empty() {
                unknown.push(peer);
            }
        }
        Ok(unknown)
    })?;
    unknown.into_iter().map(|peer| fetch_bundles(shared, peer, Vec::new())).collect()
}

/// Bundles of the devices that STALE_DEVICES answers named as missing and we hold no session
/// with, fetched once per recipient.
fn bundles_of_missing_devices(shared: &BotShared, answered: &[Answered]) -> Result<Vec<GetPrekeyBundlesResponse>, SendError> {
    let mut wanted: BTreeMap<u64, BTreeSet<u32>> = BTreeMap::new();
    for a in answered {
        if a.result.status.enum_value_or_default() == SendStatus::STALE_DEVICES && a.entry.attempts < MAX_DEVICE_REFRESHES {
            wanted.entry(a.entry.chat_id as u64).or_default().extend(&a.result.missing_devices);
        }
    }
    wanted.retain(|_, devices| !devices.is_empty());
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let need = shared.store.read(|c| {
        let mut need = Vec::new();
        for (peer, devices) in wanted {
            let devices: Vec<u32> = devices.into_iter().collect();
            let without = e2e::devices_without_session(c, peer, &devices)?;
            if !without.is_empty() {
                need.push((peer, without));
            }
        }
        Ok(need)
    })?;
    need.into_iter().map(|(peer, devices)| fetch_bundles(shared, peer, devices)).collect()
}

/// Prekey bundles for `devices` of `peer` (all devices when empty).
fn fetch_bundles(shared: &BotShared, peer: u64, devices: Vec<u32>) -> Result<GetPrekeyBundlesResponse, SendError> {
    let mut req = GetPrekeyBundlesRequest::new();
    req.user_id = peer;
    req.device_ids = devices;
    let resp = shared
        .platform
        .get_prekey_bundles(&req)
        .map_err(|e| SendError::Platform(format!("prekey bundles of user {peer}: {e}")))?;
    if shared.on_identity_change == e2e::OnIdentityChange::Accept {
        accept_changed_identity(shared, &resp.profile)?;
    }
    Ok(resp)
}

/// With `accept_identity_changes`: a served identity key other than the pinned one is pinned in
/// its place (with a warning), so `add_sessions` starts sessions under it.
fn accept_changed_identity(shared: &BotShared, profile: &Profile) -> Result<(), SendError> {
    let (user_id, Ok(served)) = (profile.user_id, <[u8; 32]>::try_from(profile.identity_key.as_slice())) else {
        return Ok(());
    };
    let pinned = shared.store.read(|c| Ok(e2e::leaf::pinned_identity(c, user_id)?))?;
    if pinned.is_some_and(|p| p != served) {
        log::warn!("bot @{}: user {user_id} now has another identity key; pinned it (accept_identity_changes)", shared.username);
        shared.store.write(move |c| Ok(e2e::leaf::repin_identity(c, user_id, &served)?))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The outbox's writer jobs against real stores, counted by the bot store's commits
    //! (`Notifier::commits`, one per writer commit): a batch costs one commit to seal and one to
    //! record the answers, whatever its size.

    use std::path::Path;

    use protobuf::MessageField;

    use super::*;
    use crate::crypto;
    use crate::wire::e2e::Content;
    use crate::crypto::IdentityKeyPair;
    use crate::gateway::store::chats;
    use crate::wire::platform::{DeviceKeys, InboxEnvelope, PrekeyBundle};

    const BOT: u64 = 10;
    const PEER: u64 = 20;

    /// A registered device (device 1 of `user_id`) with a store of its own.
    fn device(dir: &Path, name: &str, user_id: u64) -> (Store, IdentityKeyPair, DeviceKeys) {
        let store = Store::open(&dir.join(format!("{name}.db")), &[user_id as u8; 32], &"ab".repeat(32), name).expect("open");
        let account = IdentityKeyPair::generate();
        let seed = account.seed();
        let keys = store
            .write(move |c| {
                let keys = e2e::create_device_keys(c, &IdentityKeyPair::from_seed(&seed))?;
                e2e::save_registration(c, e2e::Registration { user_id, device_id: 1 })?;
                Ok(keys)
            })
            .expect("device keys");
        (store, account, keys)
    }

    /// What GetPrekeyBundles would answer for that device.
    fn bundles(user_id: u64, account: &IdentityKeyPair, keys: &DeviceKeys) -> GetPrekeyBundlesResponse {
        let mut profile = Profile::new();
        profile.user_id = user_id;
        profile.identity_key = account.public_key().to_vec();
        let mut b = PrekeyBundle::new();
        b.device_id = 1;
        b.device_key = keys.device_key.clone();
        b.device_certificate = keys.device_certificate.clone();
        b.signed_prekey = keys.signed_prekey.clone();
        b.one_time_prekey = MessageField::some(keys.one_time_prekeys[0].clone());
        let mut resp = GetPrekeyBundlesResponse::new();
        resp.profile = MessageField::some(profile);
        resp.bundles = vec![b];
        resp
    }

    fn text(t: String) -> Content {
        e2e::text_content(&t)
    }

    /// Every new message reserves its id, a plain text as well as one with buttons: the
    /// platform cannot tell which messages carry a keyboard. And reserving comes after the
    /// hand-over, so a caller never withdraws a message the platform was asked about.
    #[test]
    fn every_new_message_reserves_its_id_after_it_is_handed_over() {
        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(Duration::from_secs(1));
        let mut with_buttons = text("pick".into());
        with_buttons.keyboard = protobuf::MessageField::some(crate::wire::e2e::InlineKeyboard {
            rows: vec![crate::wire::e2e::KeyboardRow {
                buttons: vec![crate::wire::e2e::InlineButton { text: "A".into(), callback_data: "a".into(), ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        });
        let entries = bot
            .store
            .write(move |c| {
                outbox::insert(c, "plain", PEER as i64, &text("hello".into()), 0)?;
                outbox::insert(c, "buttons", PEER as i64, &with_buttons, 0)?;
                outbox::pending(c, 10)
            })
            .expect("insert");
        assert!(keyboard::needs_context(&entries[1].content) && !keyboard::needs_context(&entries[0].content));
        let entries = hand_over(&bot, entries).expect("hand over");
        assert!(entries.iter().all(|e| e.handed));
        let ids: Vec<i64> = entries.iter().map(|e| e.id).collect();
        assert!(bot.store.write(move |c| Ok(ids.iter().all(|&id| !outbox::withdraw(c, id).unwrap_or(true)))).expect("withdraw"), "handed: no longer withdrawn");

        fake.answer_always("reserve_message_ids", |req: ReserveMessageIdsRequest| {
            let ids = req
                .reservations
                .iter()
                .map(|r| crate::wire::platform::ReservedMessageId {
                    client_message_id: r.client_message_id.clone(),
                    message_id: 7,
                    date: 1,
                    ..Default::default()
                })
                .collect();
            Ok(crate::wire::platform::ReserveMessageIdsResponse { ids, ..Default::default() })
        });
        let (reserved, refused) = reserve_ids(&bot, &entries).expect("reserve");
        assert!(refused.is_empty());
        assert_eq!(reserved.keys().cloned().collect::<Vec<_>>(), ["buttons", "plain"]);
        assert_eq!(fake.calls_of("reserve_message_ids").len(), 1, "one call for the batch");
    }

    #[test]
    fn a_batch_is_sealed_in_one_commit_and_its_answers_are_recorded_in_one_commit() {
        crypto::init();
        let dir = tempfile::tempdir().expect("tempdir");
        let (bot, bot_account, bot_keys) = device(dir.path(), "bot", BOT);
        let (peer, peer_account, peer_keys) = device(dir.path(), "peer", PEER);
        bot.write(|c| {
            for n in 0..SEND_BATCH {
                outbox::insert(c, &format!("cmid-{n}"), PEER as i64, &text(format!("m{n}")), 0)?;
            }
            Ok(())
        })
        .expect("insert");
        let entries = bot.read(|c| outbox::pending(c, SEND_BATCH)).expect("pending");
        assert_eq!(entries.len(), SEND_BATCH);

        let commits = bot.notifier().commits();
        let identity = IdentityKeyPair::generate();
        // Every entry's reserved id and date, which its content vouches for (`e2e::vouch`).
        let reserved = |n: usize| (100 + n as u64, 1_700_000_000 + n as i64);
        let ids = (0..SEND_BATCH).map(|n| (format!("cmid-{n}"), reserved(n))).collect();
        let signer = Signer { identity: &identity, bot_user_id: BOT, ids };
        let batch = seal_batch(&bot, entries, vec![bundles(PEER, &peer_account, &peer_keys)], &signer, "bot").expect("seal");
        assert_eq!(bot.notifier().commits(), commits + 1, "one commit seals the whole batch");
        // Committed before anything is sent: what a retry or a restart sends.
        let stored = bot.read(|c| outbox::pending(c, SEND_BATCH)).expect("pending");
        for ((entry, sealed), again) in batch.iter().zip(&stored) {
            assert_eq!(again.sealed.as_ref(), Some(sealed));
            assert_eq!(sealed.client_message_id, entry.client_message_id);
            assert_eq!((sealed.recipient_user_id, sealed.ciphertexts.len()), (PEER, 1));
        }
        // A retry resends exactly those bytes and writes nothing.
        let retry = seal_batch(&bot, stored, Vec::new(), &signer, "bot").expect("retry");
        assert_eq!(bot.notifier().commits(), commits + 1, "nothing is sealed twice");
        assert!(retry.iter().zip(&batch).all(|((_, again), (_, first))| again == first));
        // The recipient opens them all, in order; the first one starts the session.
        let envelopes: Vec<InboxEnvelope> = batch
            .iter()
            .enumerate()
            .map(|(n, (_, m))| {
                let mut e = InboxEnvelope::new();
                e.sender_user_id = BOT;
                e.sender_device_id = 1;
                (e.message_id, e.date) = reserved(n);
                e.ciphertext = m.ciphertexts[0].ciphertext.clone();
                e
            })
            .collect();
        // The peer checks the bot's device first, as every receiver does.
        let certificates = {
            let b = bundles(BOT, &bot_account, &bot_keys);
            let device = crate::wire::platform::DeviceCertificate {
                device_id: 1,
                device_key: b.bundles[0].device_key.clone(),
                device_certificate: b.bundles[0].device_certificate.clone(),
                ..Default::default()
            };
            crate::wire::platform::GetDeviceCertificatesResponse { profile: b.profile, devices: vec![device], ..Default::default() }
        };
        let texts = peer
            .write(move |c| {
                let request = crate::wire::platform::GetDeviceCertificatesRequest { user_id: BOT, device_ids: vec![1], ..Default::default() };
                e2e::record_certified_devices(c, &request, &certificates, e2e::OnIdentityChange::Refuse)?;
                let mut texts = Vec::new();
                for e in &envelopes {
                    texts.push(e2e::open_envelope(c, e)?.text().text.clone());
                }
                Ok(texts)
            })
            .expect("open");
        assert_eq!(texts, (0..SEND_BATCH).map(|n| format!("m{n}")).collect::<Vec<_>>());

        // The answers: one refused, one stale (its recipient's only device was removed), the
        // rest acknowledged.
        let answered: Vec<Answered> = batch
            .into_iter()
            .enumerate()
            .map(|(n, (entry, sealed))| {
                let mut result = SendResult::new();
                result.client_message_id = entry.client_message_id.clone();
                match n {
                    0 => {
                        result.status = SendStatus::REJECTED.into();
                        result.error = "too long".into();
                    }
                    1 => {
                        result.status = SendStatus::STALE_DEVICES.into();
                        result.removed_devices = vec![1];
                    }
                    _ => {
                        result.message_id = 1000 + n as u64;
                        result.date = 77;
                    }
                }
                Answered { entry, sealed, result }
            })
            .collect();
        let ids: Vec<i64> = answered.iter().map(|a| a.entry.id).collect();
        let outcomes = record_results(&bot, BOT, answered, Vec::new(), "bot").expect("record");
        assert_eq!(bot.notifier().commits(), commits + 2, "one commit records every answer");

        assert_eq!(outcomes.iter().map(|(id, _)| *id).collect::<Vec<_>>(), ids);
        assert!(matches!(&outcomes[0].1, Outcome::GaveUp(r, SendFailure::Refused(why)) if why.contains("too long") && r.handed && r.chat_id == PEER as i64));
        assert!(matches!(outcomes[1].1, Outcome::Resealed));
        for (n, (_, outcome)) in outcomes.iter().enumerate().skip(2) {
            assert!(
                matches!(outcome, Outcome::Sent(Sent { message_id, date: 77 }) if *message_id == 1000 + n as i64),
                "answer {n}: {outcome:?}"
            );
        }
        let given_up = bot.read(|c| outbox::given_up(c, 10)).expect("given up");
        assert_eq!(given_up.len(), 1, "the refused message is recorded");
        assert_eq!((given_up[0].kind.as_str(), given_up[0].client_message_id.as_str()), ("message", "cmid-0"));
        let (left, history) = bot
            .read(|c| Ok((outbox::pending(c, SEND_BATCH)?, chats::lookup(c, PEER as i64, 1000 + 5)?)))
            .expect("read");
        assert_eq!(left.len(), 1, "only the stale message stays, to be sent again");
        assert_eq!((left[0].id, left[0].attempts), (ids[1], 1));
        assert!(left[0].sealed.as_ref().expect("sealed").ciphertexts.is_empty(), "the removed device's ciphertext is dropped");
        let history = history.expect("acknowledged messages enter the history");
        assert!(history.from_bot);
        assert_eq!((history.sender_id, history.date, history.content.text().text.as_str()), (BOT as i64, 77, "m5"));
    }
}
