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

mod bundles;
mod to_groups;
mod hand_over;
mod record;
mod reserve;
mod seal;

use std::time::Duration;

use crossbeam_channel::RecvTimeoutError;

use crate::gateway::ctx::Sending;
use crate::gateway::metrics::BotMetrics;
use crate::gateway::runtime::{unix_now, BotShared};
use crate::gateway::send_wait::{SendFailure, Sent};
use crate::gateway::port::StepError;
use crate::gateway::store::{groups, outbox, StoreError};
use crate::backoff::Backoff;
use crate::e2e;
use crate::wire::platform::{
    send_result::Status as SendStatus, OutgoingMessage, SendMessagesRequest,
};
use bundles::bundles_of_new_recipients;
use hand_over::hand_over;
use record::{bundles_of_missing_devices, record_results, Answered, Outcome};
use reserve::{give_up_refused, reserve_ids};
use seal::{seal_batch, Signer};
use to_groups::send_to_groups;

/// Messages sent in one SendMessages call (one gRPC round trip for many messages).
const SEND_BATCH: usize = 128;

const BACKOFF_START: Duration = Duration::from_millis(500);

const BACKOFF_MAX: Duration = Duration::from_secs(30);

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
fn gave_up(out: &Sending, row: i64, record: &outbox::GivenUp, failure: SendFailure) {
    BotMetrics::add(&out.metrics.outbox_given_up, 1);
    let message = record.message_id.map_or(String::new(), |id| format!(", message {id}"));
    let caller = if out.outbox.finish(row, Err(failure)) { "its caller was told" } else { "no caller waited" };
    log::warn!(
        "bot @{}: outbox gave up a {} to chat {}{message} (outbox row {row}; {caller}; listed at /outbox/given-up): {}",
        out.name,
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
            gave_up(&shared.sending(), row, &record, SendFailure::CredentialRefused);
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
/// (`hand_over`, before their ids are reserved: a message the platform was asked about is
/// waited for, decision 0082), one seals every message not sealed yet, enters the new ones into
/// the history under their reserved ids and commits it all before the send (`seal_batch`), one
/// records every answer (`record_results`). A caller whose message the platform acknowledged
/// under the id the seal job recorded is answered before the third job, which it does not
/// need. Prekey bundles are fetched before each job, never inside one.
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
    let out = shared.sending();
    let groups_sent = if group_entries.is_empty() { Ok(()) } else { send_to_groups(&out, group_entries) };
    if let Err(e @ (SendError::Platform(_) | SendError::Group(_))) = groups_sent {
        // Unanswered: hand nothing more now.
        return Err(e);
    }
    if entries.is_empty() {
        return groups_sent.map(|()| true);
    }
    let entries = hand_over(&shared.store, entries)?;
    if entries.is_empty() {
        // Every one was withdrawn by its caller meanwhile.
        return groups_sent.map(|()| true);
    }
    let fetched = bundles_of_new_recipients(&out, &entries)?;
    let (ids, refused) = reserve_ids(&*shared.platform, &entries)?;
    let entries = give_up_refused(&out, entries, refused)?;
    if entries.is_empty() {
        return Ok(true);
    }
    let signer = Signer { identity: &shared.identity, bot_user_id: shared.compat_user_id, ids };
    let batch = seal_batch(&shared.store, entries, fetched, &signer, &shared.username)?;
    let mut req = SendMessagesRequest::new();
    // Each message names the files it carries (from its content, also for one sealed by an
    // earlier run): the platform sweeps uploads that no message named.
    req.messages = batch
        .iter()
        .map(|s| OutgoingMessage { file_refs: e2e::file::refs_in(&s.entry.content), ..s.message.clone() })
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
            let ids: Vec<i64> = batch.iter().map(|s| s.entry.id).collect();
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
    let mut told = std::collections::HashSet::new();
    let answered: Vec<Answered> = batch
        .into_iter()
        .zip(resp.results)
        .map(|(sealed, result)| {
            // Acknowledged under the id the seal job entered into the history: nothing is
            // left to store for its caller, who is answered before the record job. Lost to
            // a crash, that job is made again: the outbox sends the committed bytes under the
            // same client message id, and the platform answers the same id.
            let sent = Sent { message_id: result.message_id as i64, date: result.date };
            if result.status.enum_value_or_default() == SendStatus::OK && sealed.recorded_as(sent) {
                out.outbox.finish(sealed.entry.id, Ok(sent));
                told.insert(sealed.entry.id);
            }
            Answered { entry: sealed.entry, sealed: sealed.message, result, in_history: sealed.in_history }
        })
        .collect();
    let fetched = bundles_of_missing_devices(&out, &answered)?;
    let outcomes = record_results(&shared.store, shared.compat_user_id, answered, fetched, &shared.username)?;
    let mut failure = None;
    for (id, outcome) in outcomes {
        match outcome {
            // Answered above already, under the id the seal job recorded.
            Outcome::Sent(_) if told.contains(&id) => {}
            Outcome::Sent(sent) => {
                out.outbox.finish(id, Ok(sent));
            }
            Outcome::GaveUp(record, failure) => gave_up(&out, id, &record, failure),
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

#[cfg(test)]
mod tests {
    //! The outbox's writer jobs against real stores, counted by the bot store's commits
    //! (`Notifier::commits`, one per writer commit): a batch costs one commit to seal and one to
    //! record the answers, whatever its size.

    use std::path::Path;

    use protobuf::MessageField;

    use std::time::Duration;

    use super::*;
    use crate::crypto;
    use crate::e2e;
    use crate::gateway::keyboard;
    use crate::gateway::store::Store;
    use crate::gateway::send_wait::Sent;
    use crate::wire::platform::{
        send_result::Status as SendStatus, GetPrekeyBundlesRequest, GetPrekeyBundlesResponse, Profile, SendMessagesRequest, SendResult,
    };
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
        let entries = hand_over(&bot.store, entries).expect("hand over");
        assert!(entries.iter().all(|e| e.handed));
        let ids: Vec<i64> = entries.iter().map(|e| e.id).collect();
        assert!(bot.store.write(move |c| Ok(ids.iter().all(|&id| !outbox::withdraw(c, id).unwrap_or(true)))).expect("withdraw"), "handed: no longer withdrawn");

        fake.reserve_ids(7, 1, None);
        let (reserved, refused) = reserve_ids(&*bot.platform, &entries).expect("reserve");
        assert!(refused.is_empty());
        assert_eq!(reserved.keys().cloned().collect::<Vec<_>>(), ["buttons", "plain"]);
        assert_eq!(fake.calls_of("reserve_message_ids").len(), 1, "one call for the batch");
    }

    /// The private path as `out/<n>` runs it, against the fake platform. A reservation the
    /// platform refuses ends its message (recorded with why). A platform that does not answer
    /// leaves the rest sealed, committed and handed; the retry sends exactly those bytes, with
    /// no id reserved again, and the answers empty the outbox.
    #[test]
    fn the_private_path_gives_up_a_refusal_and_resends_a_stalled_batch_unchanged() {
        let (dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(Duration::from_secs(1));
        let seed = bot.identity.seed();
        bot.store
            .write(move |c| {
                e2e::create_device_keys(c, &IdentityKeyPair::from_seed(&seed))?;
                Ok(e2e::save_registration(c, e2e::Registration { user_id: 1, device_id: 1 })?)
            })
            .expect("device keys");
        let (_peer, peer_account, peer_keys) = device(dir.path(), "peer", PEER);
        let served = bundles(PEER, &peer_account, &peer_keys);
        fake.answer_always("get_prekey_bundles", move |_: GetPrekeyBundlesRequest| Ok(served.clone()));
        fake.reserve_ids(100, 1_700_000_000, Some(("refused", "no user with id 99")));
        bot.store
            .write(|c| {
                for cmid in ["one", "refused", "three"] {
                    outbox::insert(c, cmid, PEER as i64, &text(cmid.into()), 0)?;
                }
                Ok(())
            })
            .expect("insert");

        // SendMessages unanswered (the fake's default): a stall.
        assert!(matches!(send_pending(&bot, false), Err(SendError::Platform(_))));
        let stalled = bot.store.read(|c| outbox::pending(c, 10)).expect("pending");
        let cmids: Vec<&str> = stalled.iter().map(|e| e.client_message_id.as_str()).collect();
        assert_eq!(cmids, ["one", "three"], "the refused one left the outbox");
        assert!(stalled.iter().all(|e| e.handed && e.sealed.is_some()), "sealed and committed before the send");
        let given_up = bot.store.read(|c| outbox::given_up(c, 10)).expect("given up");
        assert_eq!(given_up.len(), 1, "{given_up:?}");
        assert!(given_up[0].reason.contains("no user with id 99"), "{}", given_up[0].reason);
        let first: SendMessagesRequest = fake.calls_of("send_messages")[0].request();
        assert_eq!(first.messages.len(), 2, "one call for the batch");

        fake.answer_always("send_messages", |req: SendMessagesRequest| {
            let results = req
                .messages
                .iter()
                .enumerate()
                .map(|(n, m)| SendResult {
                    client_message_id: m.client_message_id.clone(),
                    message_id: 100 + n as u64,
                    date: 1_700_000_000,
                    ..Default::default()
                })
                .collect();
            Ok(crate::wire::platform::SendMessagesResponse { results, ..Default::default() })
        });
        assert!(send_pending(&bot, false).expect("sent"), "a batch was sent");
        let calls = fake.calls_of("send_messages");
        assert_eq!(calls.len(), 2);
        let again: SendMessagesRequest = calls[1].request();
        assert_eq!(again.messages, first.messages, "exactly the committed bytes: nothing sealed again");
        assert_eq!(fake.calls_of("reserve_message_ids").len(), 1, "ids reserved once");
        assert!(bot.store.read(|c| outbox::pending(c, 10)).expect("pending").is_empty(), "answered: left the outbox");
        assert!(!send_pending(&bot, false).expect("empty"), "nothing left to send");
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
        // Handed over first, as `send_pending` does before reserving their ids.
        let entries = hand_over(&bot, entries).expect("hand over");

        let commits = bot.notifier().commits();
        let identity = IdentityKeyPair::generate();
        // Every entry's reserved id and date, which its content vouches for (`e2e::vouch`).
        let reserved = |n: usize| (100 + n as u64, 1_700_000_000 + n as i64);
        let ids = (0..SEND_BATCH).map(|n| (format!("cmid-{n}"), reserved(n))).collect();
        let signer = Signer { identity: &identity, bot_user_id: BOT, ids };
        let batch = seal_batch(&bot, entries, vec![bundles(PEER, &peer_account, &peer_keys)], &signer, "bot").expect("seal");
        assert_eq!(bot.notifier().commits(), commits + 1, "one commit seals the whole batch");
        // Committed before anything is sent: what a retry or a restart sends, handed over, and
        // in the history under the reserved ids.
        let stored = bot.read(|c| outbox::pending(c, SEND_BATCH)).expect("pending");
        for (n, (s, again)) in batch.iter().zip(&stored).enumerate() {
            assert_eq!(again.sealed.as_ref(), Some(&s.message));
            assert!(again.handed);
            assert_eq!(s.message.client_message_id, s.entry.client_message_id);
            assert_eq!((s.message.recipient_user_id, s.message.ciphertexts.len()), (PEER, 1));
            let (message_id, date) = reserved(n);
            assert!(s.recorded_as(Sent { message_id: message_id as i64, date }));
        }
        let early = bot.read(|c| chats::lookup(c, PEER as i64, 100 + 5)).expect("read").expect("in the history before the send");
        assert_eq!((early.date, early.content.text().text.as_str()), (1_700_000_005, "m5"));
        // A retry resends exactly those bytes and writes nothing.
        let retry = seal_batch(&bot, stored, Vec::new(), &signer, "bot").expect("retry");
        assert_eq!(bot.notifier().commits(), commits + 1, "nothing is sealed twice");
        assert!(retry.iter().zip(&batch).all(|(again, first)| again.message == first.message && again.in_history.is_none()));
        // The recipient opens them all, in order; the first one starts the session.
        let envelopes: Vec<InboxEnvelope> = batch
            .iter()
            .enumerate()
            .map(|(n, s)| {
                let m = &s.message;
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

        // The answers: one refused, one stale (its recipient's only device was removed), one
        // under its reserved id, the rest under other ids than reserved.
        let answered: Vec<Answered> = batch
            .into_iter()
            .enumerate()
            .map(|(n, s)| {
                let (entry, sealed, in_history) = (s.entry, s.message, s.in_history);
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
                    2 => (result.message_id, result.date) = reserved(2),
                    _ => {
                        result.message_id = 1000 + n as u64;
                        result.date = 77;
                    }
                }
                Answered { entry, sealed, result, in_history }
            })
            .collect();
        let ids: Vec<i64> = answered.iter().map(|a| a.entry.id).collect();
        let outcomes = record_results(&bot, BOT, answered, Vec::new(), "bot").expect("record");
        assert_eq!(bot.notifier().commits(), commits + 2, "one commit records every answer");

        assert_eq!(outcomes.iter().map(|(id, _)| *id).collect::<Vec<_>>(), ids);
        assert!(matches!(&outcomes[0].1, Outcome::GaveUp(r, SendFailure::Refused(why)) if why.contains("too long") && r.handed && r.chat_id == PEER as i64));
        assert!(matches!(outcomes[1].1, Outcome::Resealed));
        let (id2, date2) = reserved(2);
        assert!(matches!(outcomes[2].1, Outcome::Sent(Sent { message_id, date }) if message_id == id2 as i64 && date == date2));
        for (n, (_, outcome)) in outcomes.iter().enumerate().skip(3) {
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
        // The seal job's entries: kept where the platform gave the reserved id, forgotten where
        // it refused the message or gave another id.
        let (kept, refused, moved) = bot
            .read(|c| Ok((chats::lookup(c, PEER as i64, 102)?, chats::lookup(c, PEER as i64, 100)?, chats::lookup(c, PEER as i64, 105)?)))
            .expect("read");
        assert_eq!(kept.expect("acknowledged under its reserved id").content.text().text, "m2");
        assert!(refused.is_none(), "a refused message leaves no history");
        assert!(moved.is_none(), "an id the platform did not give leaves no history");
    }
}
