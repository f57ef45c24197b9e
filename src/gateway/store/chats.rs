//! Private chats that produced an update, the message history the bot may refer to (reply,
//! edit, delete, forward, copy, react), the callback presses awaiting an answer, and the
//! reactions in those chats.

use protobuf::Message as _;
use rusqlite::{params, Connection, OptionalExtension};

use super::Result;
use crate::wire::e2e::{Content, Reaction};

/// How many messages the history keeps per bot (the spec's 2048 is a floor); older ones can no
/// longer be replied to, edited, deleted, forwarded, copied or reacted to.
pub const HISTORY_LIMIT: i64 = 10_000;
/// How many answered callback presses are remembered (a second answer to one is accepted and
/// sends nothing). Unanswered presses do not count: they are kept until answered or expired.
pub const CALLBACK_LIMIT: i64 = 10_000;
/// How long an unanswered press can be answered (seconds): a day, so a bot that was down for
/// hours still answers the presses queued meanwhile. Older ones are forgotten and answering
/// them is 400 "query is too old", the reference server's words.
pub const CALLBACK_EXPIRY: i64 = 24 * 3600;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateChat {
    pub user_id: u64,
    pub username: String,
    pub first_name: String,
}

pub fn upsert_private_chat(conn: &Connection, chat: &PrivateChat, now: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO private_chats (user_id, username, first_name, last_seen) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET username = excluded.username, first_name = excluded.first_name,
         last_seen = excluded.last_seen",
    )?
    .execute(params![chat.user_id as i64, chat.username, chat.first_name, now])?;
    Ok(())
}

pub fn private_chat(conn: &Connection, user_id: u64) -> Result<Option<PrivateChat>> {
    Ok(conn.prepare_cached("SELECT username, first_name FROM private_chats WHERE user_id = ?1")?.query_row(
        params![user_id as i64],
            |r| Ok(PrivateChat { user_id, username: r.get(0)?, first_name: r.get(1)? }),
    )
        .optional()?)
}

/// One remembered message.
#[derive(Debug, Clone)]
pub struct HistoryEntry {
    pub chat_id: i64,
    pub message_id: i64,
    pub from_bot: bool,
    pub sender_id: i64,
    pub date: i64,
    pub content: Content,
    /// When the bot last edited it; 0 when never.
    pub edit_date: i64,
}

pub fn record(conn: &Connection, e: &HistoryEntry) -> Result<()> {
    let bytes = e.content.write_to_bytes().map_err(|err| super::StoreError::Corrupt(format!("encode content: {err}")))?;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO history (chat_id, message_id, from_bot, sender_id, date, content, edit_date)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![e.chat_id, e.message_id, e.from_bot, e.sender_id, e.date, bytes, e.edit_date])?;
    // Keep the newest HISTORY_LIMIT rows (rowid grows with insertion).
    conn.prepare_cached("DELETE FROM history WHERE rowid <= (SELECT max(rowid) FROM history) - ?1")?.execute(params![HISTORY_LIMIT])?;
    Ok(())
}

pub fn lookup(conn: &Connection, chat_id: i64, message_id: i64) -> Result<Option<HistoryEntry>> {
    let row: Option<(bool, i64, i64, Vec<u8>, i64)> = conn.prepare_cached(
        "SELECT from_bot, sender_id, date, content, edit_date FROM history
             WHERE chat_id = ?1 AND message_id = ?2 AND deleted = 0",
    )?
    .query_row(
        params![chat_id, message_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
        .optional()?;
    Ok(match row {
        None => None,
        Some((from_bot, sender_id, date, bytes, edit_date)) => Some(HistoryEntry {
            chat_id,
            message_id,
            from_bot,
            sender_id,
            date,
            content: Content::parse_from_bytes(&bytes)
                .map_err(|err| super::StoreError::Corrupt(format!("stored message {chat_id}/{message_id}: {err}")))?,
            edit_date,
        }),
    })
}

/// Replaces a remembered message's content after an edit; false when it is not remembered.
pub fn apply_edit(conn: &Connection, chat_id: i64, message_id: i64, content: &Content, edit_date: i64) -> Result<bool> {
    let bytes = content.write_to_bytes().map_err(|err| super::StoreError::Corrupt(format!("encode content: {err}")))?;
    let n = conn.prepare_cached("UPDATE history SET content = ?3, edit_date = ?4 WHERE chat_id = ?1 AND message_id = ?2 AND deleted = 0")?.execute(params![chat_id, message_id, bytes, edit_date])?;
    Ok(n > 0)
}

/// Forgets a deleted message's content (and the reactions to it), keeping the mark that it was
/// deleted (see [`was_deleted`]).
pub fn forget(conn: &Connection, chat_id: i64, message_id: i64) -> Result<()> {
    conn.prepare_cached("UPDATE history SET deleted = 1, content = x'' WHERE chat_id = ?1 AND message_id = ?2")?.execute(params![chat_id, message_id])?;
    conn.prepare_cached("DELETE FROM reactions WHERE chat_id = ?1 AND message_id = ?2")?.execute(params![chat_id, message_id])?;
    Ok(())
}

/// Whether the bot deleted this message (while the history still remembers it).
pub fn was_deleted(conn: &Connection, chat_id: i64, message_id: i64) -> Result<bool> {
    Ok(conn.prepare_cached("SELECT deleted FROM history WHERE chat_id = ?1 AND message_id = ?2")?.query_row(
        params![chat_id, message_id],
            |r| r.get::<_, bool>(0),
    )
        .optional()?
        .unwrap_or(false))
}

/// A callback press awaiting (or given) an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callback {
    pub id: String,
    pub chat_id: i64,
    pub press_id: String,
    pub answered: bool,
}

/// Remembers a press; false when it was known already (a repeat). Forgets the unanswered
/// presses older than [`CALLBACK_EXPIRY`] and the answered ones beyond the newest
/// [`CALLBACK_LIMIT`] rows; an unanswered press is never pushed out by newer ones.
pub fn remember_callback(conn: &Connection, cb: &Callback, now: i64) -> Result<bool> {
    let n = conn.prepare_cached("INSERT OR IGNORE INTO callbacks (id, chat_id, press_id, answered, created_at) VALUES (?1, ?2, ?3, 0, ?4)")?.execute(params![cb.id, cb.chat_id, cb.press_id, now])?;
    conn.prepare_cached("DELETE FROM callbacks WHERE answered = 0 AND created_at < ?1")?.execute(params![now - CALLBACK_EXPIRY])?;
    conn.prepare_cached("DELETE FROM callbacks WHERE answered = 1 AND rowid <= (SELECT max(rowid) FROM callbacks) - ?1")?.execute(params![CALLBACK_LIMIT])?;
    Ok(n > 0)
}

/// Whether a press `id` is remembered, answered or not, expired or not: `remember_callback`
/// would take it as a repeat.
pub fn is_press_known(conn: &Connection, id: &str) -> Result<bool> {
    Ok(conn.prepare_cached("SELECT 1 FROM callbacks WHERE id = ?1")?.query_row(params![id], |_| Ok(())).optional()?.is_some())
}

/// The press `id` as of `now`: `None` when unknown, or unanswered and older than
/// [`CALLBACK_EXPIRY`].
pub fn callback(conn: &Connection, id: &str, now: i64) -> Result<Option<Callback>> {
    Ok(conn.prepare_cached("SELECT chat_id, press_id, answered FROM callbacks WHERE id = ?1 AND (answered = 1 OR created_at >= ?2)")?.query_row(
        params![id, now - CALLBACK_EXPIRY],
            |r| Ok(Callback { id: id.to_string(), chat_id: r.get(0)?, press_id: r.get(1)?, answered: r.get(2)? }),
    )
        .optional()?)
}

pub fn mark_answered(conn: &Connection, id: &str) -> Result<()> {
    conn.prepare_cached("UPDATE callbacks SET answered = 1 WHERE id = ?1")?.execute(params![id])?;
    Ok(())
}

/// The answer to press `id` was not sent after all: it may be answered again.
pub fn mark_unanswered(conn: &Connection, id: &str) -> Result<()> {
    conn.prepare_cached("UPDATE callbacks SET answered = 0 WHERE id = ?1")?.execute(params![id])?;
    Ok(())
}

/// The current reaction of `user_id` to a message (empty when none).
pub fn reaction(conn: &Connection, chat_id: i64, message_id: i64, user_id: i64) -> Result<Reaction> {
    let bytes: Option<Vec<u8>> = conn.prepare_cached("SELECT reaction FROM reactions WHERE chat_id = ?1 AND message_id = ?2 AND user_id = ?3")?.query_row(
        params![chat_id, message_id, user_id],
            |r| r.get(0),
    )
        .optional()?;
    match bytes {
        None => Ok(Reaction::new()),
        Some(b) => Reaction::parse_from_bytes(&b)
            .map_err(|err| super::StoreError::Corrupt(format!("stored reaction {chat_id}/{message_id}: {err}"))),
    }
}

/// Records `user_id`'s reaction to a message; an empty one removes it.
pub fn set_reaction(conn: &Connection, chat_id: i64, message_id: i64, user_id: i64, reaction: &Reaction) -> Result<()> {
    if reaction.reactions.is_empty() {
        conn.prepare_cached("DELETE FROM reactions WHERE chat_id = ?1 AND message_id = ?2 AND user_id = ?3")?.execute(params![chat_id, message_id, user_id])?;
        return Ok(());
    }
    let bytes = reaction.write_to_bytes().map_err(|err| super::StoreError::Corrupt(format!("encode reaction: {err}")))?;
    conn.prepare_cached("INSERT OR REPLACE INTO reactions (chat_id, message_id, user_id, reaction) VALUES (?1, ?2, ?3, ?4)")?.execute(params![chat_id, message_id, user_id, bytes])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(n: i64) -> Callback {
        Callback { id: format!("7_p{n}"), chat_id: 7, press_id: format!("p{n}"), answered: false }
    }

    #[test]
    fn unanswered_presses_outlive_any_number_of_newer_ones_until_they_expire() {
        let c = super::super::memory_db();
        let start = 1_000_000;
        assert!(remember_callback(&c, &press(0), start).expect("remember"));
        assert!(!remember_callback(&c, &press(0), start).expect("repeat"), "a repeat is no new press");
        // More presses than the limit, all answered at once: the old unanswered one stays.
        for n in 1..=CALLBACK_LIMIT + 5 {
            remember_callback(&c, &press(n), start + 1).expect("remember");
            mark_answered(&c, &press(n).id).expect("answer");
        }
        let kept = callback(&c, "7_p0", start + 2).expect("read").expect("the unanswered press is kept");
        assert!(!kept.answered);
        let answered: i64 = c.query_row("SELECT count(*) FROM callbacks WHERE answered = 1", [], |r| r.get(0)).expect("count");
        assert!(answered <= CALLBACK_LIMIT, "answered presses are trimmed by count ({answered})");
        assert!(callback(&c, "7_p1", start + 2).expect("read").is_none(), "the oldest answered ones went");
        // Past its expiry it cannot be answered, and the next press forgets it.
        let late = start + CALLBACK_EXPIRY + 1;
        assert!(callback(&c, "7_p0", late).expect("read").is_none(), "expired");
        assert!(callback(&c, "7_p0", start + CALLBACK_EXPIRY).expect("read").is_some(), "not yet at the limit");
        remember_callback(&c, &press(-1), late).expect("remember");
        let rows: i64 = c.query_row("SELECT count(*) FROM callbacks WHERE id = '7_p0'", [], |r| r.get(0)).expect("count");
        assert_eq!(rows, 0, "an expired unanswered press is forgotten");
        // An answered press is still known as answered, whatever its age.
        let last = format!("7_p{}", CALLBACK_LIMIT + 5);
        assert!(callback(&c, &last, late + CALLBACK_EXPIRY).expect("read").expect("known").answered);
    }
}
