//! The bot's history of each chat, as the inbox, the outbox and the group steps change it: what
//! an acknowledged content of the bot's does to it, and what a user's message must be to
//! enter it. One room both directions use, so the group steps and the outbox need not import
//! each other.

use rusqlite::Connection;

use super::send_wait::Sent;
use super::store::{chats, outbox, Result as StoreResult, StoreError};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::Content;
use crate::wire::places;

/// What an acknowledged content does to the history: a message (text, media, location, venue,
/// contact, dice) enters it, an edit replaces
/// the message it names, a deletion removes it; the other kinds (presses, answers, reactions,
/// chat actions) take no place in it.
pub fn record_in_history(c: &Connection, bot_user_id: u64, entry: &outbox::OutboxEntry, sent: &Sent) -> Result<(), StoreError> {
    match &entry.content.body {
        _ if entry.content.is_message() => chats::record(
            c,
            &chats::HistoryEntry {
                chat_id: entry.chat_id,
                message_id: sent.message_id,
                from_bot: true,
                sender_id: bot_user_id as i64,
                date: sent.date,
                content: entry.content.clone(),
                edit_date: 0,
            },
        ),
        Some(Body::Edit(edit)) => {
            chats::apply_edit(c, entry.chat_id, edit.message_id as i64, &edit.content, edit.edit_date).map(|_| ())
        }
        Some(Body::Delete(d)) => chats::forget(c, entry.chat_id, d.message_id as i64),
        _ => Ok(()),
    }
}

/// A user's message as the bot may see it: a location, venue, contact or dice must keep the
/// rules a bot's would (`wire::places`), else it is refused; a contact card's `user_id` is kept
/// only when it names the sender, the one claim the gateway can check (docs/decisions.md,
/// "Contact cards"). Private and group messages go through here.
pub fn checked_user_message(mut content: Content, sender: u64) -> StoreResult<Content> {
    places::check_shared(&content)
        .map_err(|why| StoreError::Refused(format!("a {} breaking the rules: {why}", content.kind_name())))?;
    if let Some(Body::Contact(card)) = &mut content.body {
        if card.user_id != sender {
            card.user_id = 0;
        }
    }
    Ok(content)
}
