//! Recording the platform's answers to a batch in one writer job: sent, given up, or mended
//! after STALE_DEVICES and sealed again (with the bundles of the devices an answer named as
//! missing, fetched before that job).


use std::collections::{BTreeMap, BTreeSet};

use rusqlite::Connection;

use crate::gateway::ctx::Ctx;
use crate::gateway::runtime::{unix_now};
use crate::gateway::send_wait::{SendFailure, Sent};
use crate::gateway::store::{chats, outbox, Store, StoreError};
use crate::e2e;
use crate::wire::e2e::content::Body;
use crate::wire::platform::{
    send_result::Status as SendStatus, GetPrekeyBundlesResponse,
    OutgoingMessage, SendResult,
};
use super::bundles::{fetch_bundles, start_sessions};
use super::SendError;

/// A message whose recipient's device list keeps changing is given up after this many rounds.
pub(super) const MAX_DEVICE_REFRESHES: i64 = 8;

/// One message of a batch with the platform's answer to it.
pub(super) struct Answered {
    pub(super) entry: outbox::OutboxEntry,
    pub(super) sealed: OutgoingMessage,
    pub(super) result: SendResult,
    /// Entered into the history by the seal job, under this reserved id and date.
    pub(super) in_history: Option<Sent>,
}

/// What recording an answer did to its message.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Acknowledged with the platform's id: left the outbox.
    Sent(Sent),
    /// Given up and recorded: left the outbox unsent; the error is its caller's answer.
    GaveUp(outbox::GivenUp, SendFailure),
    /// Mended after STALE_DEVICES and committed; sent again in the next batch.
    Resealed,
    /// Recording failed and was rolled back: the message stays as it was and is sent again.
    Failed(StoreError),
}

/// ONE writer job for the platform's answers to a batch: an acknowledged message leaves the
/// outbox and enters the history, a refused one leaves the outbox, and a stale one is mended
/// the one way every sender does (`e2e::reseal_after_stale`, after starting sessions from the
/// bundles `fetched` for its missing devices) and committed before it is sent again. Each
/// answer has its own savepoint: one that cannot be recorded stays as it was and the others
/// are recorded.
pub(super) fn record_results(
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
        if !fetched.is_empty() {
            start_sessions(c, &fetched, &bot)?;
        }
        let mut outcomes = Vec::with_capacity(answered.len());
        for a in answered {
            c.execute_batch("SAVEPOINT answer")?;
            let outcome = record_answer(c, bot_user_id, &a.entry, a.sealed, &a.result, a.in_history);
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

pub(super) fn record_answer(
    c: &Connection,
    bot_user_id: u64,
    entry: &outbox::OutboxEntry,
    mut sealed: OutgoingMessage,
    result: &SendResult,
    in_history: Option<Sent>,
) -> Result<Outcome, StoreError> {
    // The seal job's history entry, when the platform did not take the message under it.
    let unrecord = || match in_history {
        Some(reserved) => chats::forget(c, entry.chat_id, reserved.message_id),
        None => Ok(()),
    };
    let give_up = |failure: SendFailure| -> Result<Outcome, StoreError> {
        unrecord()?;
        // Handed rows are never withdrawn, so it is still there.
        let record = outbox::give_up(c, entry, failure.reason(), unix_now())?
            .ok_or_else(|| StoreError::Corrupt(format!("outbox {} vanished while it was with the platform", entry.id)))?;
        Ok(Outcome::GaveUp(record, failure))
    };
    match result.status.enum_value_or_default() {
        SendStatus::OK => {
            let sent = Sent { message_id: result.message_id as i64, date: result.date };
            outbox::remove(c, entry.id)?;
            if in_history != Some(sent) {
                // Not in the history yet (an edit, a deletion, a message sealed before this
                // run), or under another id than the platform gave it.
                unrecord()?;
                crate::gateway::history::record_in_history(c, bot_user_id, entry, &sent)?;
            }
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

/// Bundles of the devices that STALE_DEVICES answers named as missing and we hold no session
/// with, fetched once per recipient.
pub(super) fn bundles_of_missing_devices(cx: &Ctx, answered: &[Answered]) -> Result<Vec<GetPrekeyBundlesResponse>, SendError> {
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
    let need = cx.store.read(|c| {
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
    need.into_iter().map(|(peer, devices)| fetch_bundles(cx, peer, devices)).collect()
}
