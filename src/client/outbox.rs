//! Messages typed in chat mode wait here until the platform takes them: a line typed while
//! the platform is unreachable is not lost and need not be typed again.
//!
//! A queued message is its content (the plaintext `Content`, like the remembered history
//! beside it) and the client message id it got when it was typed. Sending it encrypts it then,
//! under that id, so a message sent again after a lost answer is one message to the platform
//! (it answers a repeated id with the first message's id and stores nothing). Encrypting
//! again advances the ratchet past a position that may never arrive; the receiver keeps that
//! skipped key, as for any lost message. The queue is sent in order and stops at the first
//! message the platform could not be reached for, so what arrives keeps the order it was
//! typed in.

use protobuf::Message as _;
use rusqlite::{params, Connection};

use super::error::{ClientError, Result};
use super::message::{GroupId, SentMessage};
use super::profile::Profile;
use super::send::new_client_message_id;
use crate::wire::e2e::Content;


/// A message waiting in the outbox.
#[derive(Clone, Debug, PartialEq)]
pub struct Queued {
    /// Its place in the queue (increasing).
    pub id: i64,
    pub peer: String,
    pub client_message_id: String,
    pub content: Content,
    pub queued_at: i64,
}

impl Queued {
    /// What the message says, as a screen shows it: a text, or a shared item (a location,
    /// the contact card) as `display::shared_text` words it.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        if self.content.has_text() {
            return std::borrow::Cow::Borrowed(&self.content.text().text);
        }
        match super::places::Shared::from_content(&self.content) {
            Some(shared) => std::borrow::Cow::Owned(super::display::shared_text(&shared)),
            None => std::borrow::Cow::Borrowed(""),
        }
    }
}

/// What happened to one queued message when it was sent.
#[derive(Debug)]
pub enum Attempt {
    /// The platform took it; it left the queue.
    Sent(SentMessage),
    /// The platform could not be reached; it stays queued, and so does everything after it.
    Waiting(ClientError),
    /// The platform (or this profile) refused it for good; it left the queue.
    Refused(ClientError),
}

impl Profile {
    /// Puts `content` for `peer` (a username, or a group as `group_target_name` names it) at
    /// the end of the outbox.
    pub fn queue_content(&self, peer: &str, content: &Content) -> Result<Queued> {
        let bytes = content.write_to_bytes().map_err(|e| ClientError::Invalid(format!("encoding a message: {e}")))?;
        let client_message_id = new_client_message_id();
        let queued_at = crate::clock::unix_now();
        let peer = if group_target(peer).is_some() { peer.to_string() } else { peer.trim_start_matches('@').to_string() };
        let id = self.write(|c| {
            c.execute(
                "INSERT INTO client_outbox (peer, client_message_id, content, queued_at) VALUES (?1, ?2, ?3, ?4)",
                params![peer, client_message_id, bytes, queued_at],
            )?;
            Ok(c.last_insert_rowid())
        })?;
        Ok(Queued { id, peer, client_message_id, content: content.clone(), queued_at })
    }

    /// Everything in the outbox, oldest first.
    pub fn queued(&self) -> Result<Vec<Queued>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, peer, client_message_id, content, queued_at FROM client_outbox ORDER BY id")?;
        let rows = stmt.query_map([], read_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
        rows.into_iter().collect()
    }

    /// Sends queued message `id` (one still queued). Another process of this profile may have
    /// sent it meanwhile: then it is sent again under its id, and the platform answers with
    /// the same message.
    pub fn send_queued(&self, queued: &Queued) -> Attempt {
        let sent = match group_target(&queued.peer) {
            Some(group) => self.send_group_content_as(&group, &queued.content, &queued.client_message_id).map(|s| SentMessage {
                chat_id: 0,
                message_id: s.message_id,
                date: s.date,
            }),
            None => self.lookup(&queued.peer).and_then(|peer| self.send_content_as(&peer, &queued.content, &queued.client_message_id)),
        };
        let attempt = match sent {
            Ok(sent) => Attempt::Sent(sent),
            Err(e) if e.is_transient() => return Attempt::Waiting(e),
            Err(e) => Attempt::Refused(e),
        };
        if let Err(e) = self.write(|c| remove(c, queued.id)) {
            log::warn!("could not take message {} off the outbox: {e}", queued.id);
        }
        attempt
    }

    /// Sends the outbox in order until it is empty or the platform cannot be reached, handing
    /// each message's fate to `each`. Returns true when the outbox is empty.
    pub fn flush_outbox(&self, mut each: impl FnMut(&Queued, &Attempt)) -> Result<bool> {
        for queued in self.queued()? {
            let attempt = self.send_queued(&queued);
            each(&queued, &attempt);
            if matches!(attempt, Attempt::Waiting(_)) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The outbox's name for a group: `group:` and its id in hex.
pub fn group_target(target: &str) -> Option<GroupId> {
    target.strip_prefix(GROUP_PREFIX).and_then(crate::crypto::hex_decode_32).map(GroupId)
}

/// How a group is named in the outbox.
pub fn group_target_name(group: &GroupId) -> String {
    format!("{GROUP_PREFIX}{}", crate::crypto::hex_encode(&group.0))
}

const GROUP_PREFIX: &str = "group:";

fn remove(c: &Connection, id: i64) -> Result<()> {
    c.execute("DELETE FROM client_outbox WHERE id = ?1", [id])?;
    Ok(())
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Queued>> {
    let (id, peer, client_message_id, bytes, queued_at): (i64, String, String, Vec<u8>, i64) =
        (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
    Ok(Content::parse_from_bytes(&bytes)
        .map(|content| Queued { id, peer, client_message_id, content, queued_at })
        .map_err(|e| ClientError::Invalid(format!("queued message {id} is damaged: {e}"))))
}
