//! Sealing: one writer job starts the sessions a batch needs, seals every entry not sealed yet,
//! enters each new message into the history under its reserved id, and commits it all before
//! anything is sent.

use crate::gateway::store::{outbox, Store, StoreError};
use crate::gateway::history::record_in_history;
use crate::gateway::send_wait::Sent;
use crate::e2e;
use crate::gateway::keyboard;
use crate::crypto::IdentityKeyPair;
use crate::wire::e2e::content::Body;
use crate::wire::platform::{
    GetPrekeyBundlesResponse,
    OutgoingMessage,
};
use super::bundles::start_sessions;
use super::reserve::Reservations;

/// What signs the keyboards of a batch (`keyboard::attach_context`) inside the seal job.
pub(super) struct Signer<'a> {
    pub(super) identity: &'a IdentityKeyPair,
    pub(super) bot_user_id: u64,
    pub(super) ids: Reservations,
}

/// An entry of a batch, sealed and committed.
#[derive(Debug)]
pub(super) struct Sealed {
    pub(super) entry: outbox::OutboxEntry,
    pub(super) message: OutgoingMessage,
    /// Entered into the history by the seal job under its reserved id and date: once the
    /// platform acknowledges that id, its caller can be answered before the record job runs
    /// (an edit or a reply that follows finds it).
    pub(super) in_history: Option<Sent>,
}

impl Sealed {
    /// Whether the platform's answer `sent` is the id and date the seal job recorded.
    pub(super) fn recorded_as(&self, sent: Sent) -> bool {
        self.in_history == Some(sent)
    }
}

/// ONE writer job: starts sessions from the bundles `fetched` for recipients we knew no device
/// of, seals every entry that is not sealed yet, enters each new message into the history
/// under its reserved id, and commits all the ciphertexts before anything is sent. An entry
/// sealed before (a retry, a restart) keeps exactly its committed bytes; when every entry is,
/// no job runs at all.
pub(super) fn seal_batch(
    store: &Store,
    entries: Vec<outbox::OutboxEntry>,
    fetched: Vec<GetPrekeyBundlesResponse>,
    signer: &Signer<'_>,
    bot: &str,
) -> Result<Vec<Sealed>, StoreError> {
    if entries.iter().all(|e| e.sealed.is_some()) {
        return Ok(entries
            .into_iter()
            .filter_map(|entry| Some(Sealed { message: entry.sealed.clone()?, entry, in_history: None }))
            .collect());
    }
    let bot = bot.to_string();
    let (identity, bot_user_id, ids) = (signer.identity.clone(), signer.bot_user_id, signer.ids.clone());
    store.write(move |c| {
        if !fetched.is_empty() {
            start_sessions(c, &fetched, &bot)?;
        }
        let mut batch = Vec::with_capacity(entries.len());
        for mut entry in entries {
            // Handed over before its id was reserved (`hand_over`): its caller can no longer
            // withdraw it, and that relaxed commit is in the log before this synced one.
            debug_assert!(entry.handed, "outbox {}: sealed before it was handed over", entry.id);
            if let Some(message) = entry.sealed.clone() {
                batch.push(Sealed { entry, message, in_history: None });
                continue;
            }
            let peer = entry.chat_id as u64;
            let Some(&(message_id, date)) = ids.get(&entry.client_message_id) else {
                return Err(StoreError::Corrupt(format!("outbox {}: no message id reserved for it", entry.id)));
            };
            if keyboard::needs_context(&entry.content) {
                // Signed once, with the reserved id; the signed content is what the history
                // keeps.
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
            // Numbered here, in memory: a reseal after STALE_DEVICES in this run seals the
            // same number; after a restart the sealed message is resent as it is
            // (`e2e::sequence`).
            e2e::sequence::number(c, e2e::sequence::Conversation::Private(peer), &mut entry.content)?;
            m.ciphertexts = e2e::seal(c, peer, &entry.content)?;
            outbox::set_sealed(c, entry.id, &m)?;
            // A new message enters the history now, under the id it will have: the answer
            // needs no commit of its own. An edit or a deletion changes the history only once
            // the platform took it (`record::record_answer`).
            let in_history = if entry.content.is_message() {
                let reserved = Sent { message_id: message_id as i64, date };
                record_in_history(c, bot_user_id, &entry, &reserved)?;
                Some(reserved)
            } else {
                None
            };
            batch.push(Sealed { entry, message: m, in_history });
        }
        Ok(batch)
    })
}
