//! The durable outbox: every outgoing message is recorded here before anything is sent, with
//! its per-device ciphertexts once sealed, until the platform acknowledges it.

use protobuf::Message as _;
use rusqlite::{params, Connection, OptionalExtension};

use super::{Result, StoreError};
use crate::wire::e2e::Content;
use crate::wire::platform::{OutgoingMessage, SendGroupMessageRequest};

#[derive(Debug, Clone)]
pub struct OutboxEntry {
    pub id: i64,
    pub client_message_id: String,
    pub chat_id: i64,
    pub content: Content,
    /// The sealed message (ciphertexts per device) once encryption was committed.
    pub sealed: Option<OutgoingMessage>,
    pub attempts: i64,
}

pub fn insert(conn: &Connection, client_message_id: &str, chat_id: i64, content: &Content, now: i64) -> Result<i64> {
    let bytes = content.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode content: {e}")))?;
    conn.execute(
        "INSERT INTO outbox (client_message_id, chat_id, content, created_at) VALUES (?1, ?2, ?3, ?4)",
        params![client_message_id, chat_id, bytes, now],
    )?;
    Ok(conn.last_insert_rowid())
}

fn row_to_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, String, i64, Vec<u8>, Option<Vec<u8>>, i64)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
}

fn decode(raw: (i64, String, i64, Vec<u8>, Option<Vec<u8>>, i64)) -> Result<OutboxEntry> {
    let (id, client_message_id, chat_id, content, sealed, attempts) = raw;
    let content = Content::parse_from_bytes(&content).map_err(|e| StoreError::Corrupt(format!("outbox {id} content: {e}")))?;
    let sealed = match sealed {
        None => None,
        Some(b) => Some(OutgoingMessage::parse_from_bytes(&b).map_err(|e| StoreError::Corrupt(format!("outbox {id} sealed: {e}")))?),
    };
    Ok(OutboxEntry { id, client_message_id, chat_id, content, sealed, attempts })
}

/// Pending entries in order, at most `limit`.
pub fn pending(conn: &Connection, limit: usize) -> Result<Vec<OutboxEntry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, client_message_id, chat_id, content, sealed, attempts FROM outbox ORDER BY id LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![limit as i64], row_to_entry)?.collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(decode).collect()
}

pub fn get(conn: &Connection, id: i64) -> Result<Option<OutboxEntry>> {
    let raw = conn
        .query_row(
            "SELECT id, client_message_id, chat_id, content, sealed, attempts FROM outbox WHERE id = ?1",
            params![id],
            row_to_entry,
        )
        .optional()?;
    raw.map(decode).transpose()
}

/// Replaces an unsealed entry's content (its keyboard got its signed context).
pub fn set_content(conn: &Connection, id: i64, content: &Content) -> Result<()> {
    let bytes = content.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode content: {e}")))?;
    conn.execute("UPDATE outbox SET content = ?2 WHERE id = ?1 AND sealed IS NULL", params![id, bytes])?;
    Ok(())
}

pub fn set_sealed(conn: &Connection, id: i64, sealed: &OutgoingMessage) -> Result<()> {
    let bytes = sealed.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode sealed: {e}")))?;
    conn.execute("UPDATE outbox SET sealed = ?2 WHERE id = ?1", params![id, bytes])?;
    Ok(())
}

/// A group message's recorded ciphertext (the request sent, and resent on a retry in the same
/// epoch); `None` before it is encrypted or after the platform said the epoch moved on.
pub fn group_sealed(conn: &Connection, id: i64) -> Result<Option<SendGroupMessageRequest>> {
    let raw: Option<Option<Vec<u8>>> =
        conn.query_row("SELECT group_sealed FROM outbox WHERE id = ?1", params![id], |r| r.get(0)).optional()?;
    raw.flatten()
        .map(|b| SendGroupMessageRequest::parse_from_bytes(&b).map_err(|e| StoreError::Corrupt(format!("outbox {id} group_sealed: {e}"))))
        .transpose()
}

pub fn set_group_sealed(conn: &Connection, id: i64, req: Option<&SendGroupMessageRequest>) -> Result<()> {
    let bytes = req
        .map(|r| r.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode group message: {e}"))))
        .transpose()?;
    conn.execute("UPDATE outbox SET group_sealed = ?2 WHERE id = ?1", params![id, bytes])?;
    Ok(())
}

pub fn note_failure(conn: &Connection, id: i64, error: &str) -> Result<()> {
    conn.execute("UPDATE outbox SET attempts = attempts + 1, last_error = ?2 WHERE id = ?1", params![id, error])?;
    Ok(())
}

pub fn remove(conn: &Connection, id: i64) -> Result<()> {
    conn.execute("DELETE FROM outbox WHERE id = ?1", params![id])?;
    Ok(())
}

pub fn depth(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("SELECT count(*) FROM outbox", [], |r| r.get(0))?)
}
