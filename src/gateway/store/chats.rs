//! Private chats that produced an update, and the message history the bot may refer to.

use protobuf::Message as _;
use rusqlite::{params, Connection, OptionalExtension};

use super::Result;
use crate::wire::e2e::Content;

/// How many messages the history keeps per bot; older ones can no longer be replied to.
pub const HISTORY_LIMIT: i64 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateChat {
    pub user_id: u64,
    pub username: String,
    pub first_name: String,
}

pub fn upsert_private_chat(conn: &Connection, chat: &PrivateChat, now: i64) -> Result<()> {
    conn.execute(
        "INSERT INTO private_chats (user_id, username, first_name, last_seen) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET username = excluded.username, first_name = excluded.first_name,
         last_seen = excluded.last_seen",
        params![chat.user_id as i64, chat.username, chat.first_name, now],
    )?;
    Ok(())
}

pub fn private_chat(conn: &Connection, user_id: u64) -> Result<Option<PrivateChat>> {
    Ok(conn
        .query_row(
            "SELECT username, first_name FROM private_chats WHERE user_id = ?1",
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
}

pub fn record(conn: &Connection, e: &HistoryEntry) -> Result<()> {
    let bytes = e.content.write_to_bytes().map_err(|err| super::StoreError::Corrupt(format!("encode content: {err}")))?;
    conn.execute(
        "INSERT OR REPLACE INTO history (chat_id, message_id, from_bot, sender_id, date, content)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![e.chat_id, e.message_id, e.from_bot, e.sender_id, e.date, bytes],
    )?;
    // Keep the newest HISTORY_LIMIT rows (rowid grows with insertion).
    conn.execute(
        "DELETE FROM history WHERE rowid <= (SELECT max(rowid) FROM history) - ?1",
        params![HISTORY_LIMIT],
    )?;
    Ok(())
}

pub fn lookup(conn: &Connection, chat_id: i64, message_id: i64) -> Result<Option<HistoryEntry>> {
    let row: Option<(bool, i64, i64, Vec<u8>)> = conn
        .query_row(
            "SELECT from_bot, sender_id, date, content FROM history WHERE chat_id = ?1 AND message_id = ?2",
            params![chat_id, message_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    Ok(match row {
        None => None,
        Some((from_bot, sender_id, date, bytes)) => Some(HistoryEntry {
            chat_id,
            message_id,
            from_bot,
            sender_id,
            date,
            content: Content::parse_from_bytes(&bytes)
                .map_err(|err| super::StoreError::Corrupt(format!("stored message {chat_id}/{message_id}: {err}")))?,
        }),
    })
}
