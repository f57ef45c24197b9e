//! The durable outbox: every outgoing message is recorded here before anything is sent, with
//! its per-device ciphertexts once sealed, until the platform acknowledges it.
//!
//! A row is *handed* once the outbox thread committed, in the job that seals it, that it is
//! about to go to the platform (`handed_at`). Until then the caller may withdraw it
//! ([`withdraw`]): it was never sent and never will be. From then on only the platform's answer
//! ends it: acknowledged (removed), or given up ([`give_up`], which keeps a record in
//! `given_up` that the operator lists).

use protobuf::Message as _;
use rusqlite::{params, Connection, OptionalExtension};

use super::{Result, StoreError};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::{Content, KeyboardContext};
use crate::wire::platform::{OutgoingMessage, SendGroupMessageRequest};

/// Schema step 6 (`schema::STEPS`).
pub(super) const SCHEMA_HANDED_AND_GIVEN_UP: &str = "
-- When the outbox thread committed that the row goes to the platform (unix seconds); NULL
-- while it was never handed, so the caller may still withdraw it. A row sealed by an older
-- release may have been sent: it counts as handed.
ALTER TABLE outbox ADD COLUMN handed_at INTEGER;
UPDATE outbox SET handed_at = created_at WHERE sealed IS NOT NULL OR group_sealed IS NOT NULL;
-- Sends the outbox gave up (never the content): what, to whom, when and why. The newest
-- GIVEN_UP_LIMIT are kept; /outbox/given-up on the extensions listener lists them.
CREATE TABLE given_up (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id           INTEGER NOT NULL,
    kind              TEXT NOT NULL,
    message_id        INTEGER,
    client_message_id TEXT NOT NULL,
    submitted_at      INTEGER NOT NULL,
    given_up_at       INTEGER NOT NULL,
    handed            INTEGER NOT NULL,
    reason            TEXT NOT NULL
);
-- Unanswered presses are trimmed by age, answered ones by count (chats::remember_callback).
CREATE INDEX callbacks_by_age ON callbacks (answered, created_at);
";

/// How many given-up sends are remembered.
pub const GIVEN_UP_LIMIT: i64 = 10_000;

#[derive(Debug, Clone)]
pub struct OutboxEntry {
    pub id: i64,
    pub client_message_id: String,
    pub chat_id: i64,
    pub content: Content,
    /// The sealed message (ciphertexts per device) once encryption was committed.
    pub sealed: Option<OutgoingMessage>,
    pub attempts: i64,
    /// Handed to the platform (or about to be): it can no longer be withdrawn.
    pub handed: bool,
    /// Unix seconds when the caller submitted it.
    pub created_at: i64,
}

pub fn insert(conn: &Connection, client_message_id: &str, chat_id: i64, content: &Content, now: i64) -> Result<i64> {
    let bytes = content.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode content: {e}")))?;
    conn.prepare_cached("INSERT INTO outbox (client_message_id, chat_id, content, created_at) VALUES (?1, ?2, ?3, ?4)")?.execute(params![client_message_id, chat_id, bytes, now])?;
    Ok(conn.last_insert_rowid())
}

/// The columns [`row_to_entry`] reads, in its order.
const COLUMNS: &str = "id, client_message_id, chat_id, content, sealed, attempts, handed_at IS NOT NULL, created_at";

type Raw = (i64, String, i64, Vec<u8>, Option<Vec<u8>>, i64, bool, i64);

fn row_to_entry(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
}

fn decode(raw: Raw) -> Result<OutboxEntry> {
    let (id, client_message_id, chat_id, content, sealed, attempts, handed, created_at) = raw;
    let content = Content::parse_from_bytes(&content).map_err(|e| StoreError::Corrupt(format!("outbox {id} content: {e}")))?;
    let sealed = match sealed {
        None => None,
        Some(b) => Some(OutgoingMessage::parse_from_bytes(&b).map_err(|e| StoreError::Corrupt(format!("outbox {id} sealed: {e}")))?),
    };
    Ok(OutboxEntry { id, client_message_id, chat_id, content, sealed, attempts, handed, created_at })
}

/// Pending entries in order, at most `limit`.
pub fn pending(conn: &Connection, limit: usize) -> Result<Vec<OutboxEntry>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM outbox ORDER BY id LIMIT ?1"))?;
    let rows = stmt.query_map(params![limit as i64], row_to_entry)?.collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(decode).collect()
}

pub fn get(conn: &Connection, id: i64) -> Result<Option<OutboxEntry>> {
    let raw = conn
        .query_row(&format!("SELECT {COLUMNS} FROM outbox WHERE id = ?1"), params![id], row_to_entry)
        .optional()?;
    raw.map(decode).transpose()
}

/// Replaces an unsealed entry's content (its keyboard got its signed context).
pub fn set_content(conn: &Connection, id: i64, content: &Content) -> Result<()> {
    let bytes = content.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode content: {e}")))?;
    conn.prepare_cached("UPDATE outbox SET content = ?2 WHERE id = ?1 AND sealed IS NULL")?.execute(params![id, bytes])?;
    Ok(())
}

pub fn set_sealed(conn: &Connection, id: i64, sealed: &OutgoingMessage) -> Result<()> {
    let bytes = sealed.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode sealed: {e}")))?;
    conn.prepare_cached("UPDATE outbox SET sealed = ?2 WHERE id = ?1")?.execute(params![id, bytes])?;
    Ok(())
}

/// A group message's recorded ciphertext (the request sent, and resent on a retry in the same
/// epoch); `None` before it is encrypted or after the platform said the epoch moved on.
pub fn group_sealed(conn: &Connection, id: i64) -> Result<Option<SendGroupMessageRequest>> {
    let raw: Option<Option<Vec<u8>>> =
        conn.prepare_cached("SELECT group_sealed FROM outbox WHERE id = ?1")?.query_row(params![id], |r| r.get(0)).optional()?;
    raw.flatten()
        .map(|b| SendGroupMessageRequest::parse_from_bytes(&b).map_err(|e| StoreError::Corrupt(format!("outbox {id} group_sealed: {e}"))))
        .transpose()
}

pub fn set_group_sealed(conn: &Connection, id: i64, req: Option<&SendGroupMessageRequest>) -> Result<()> {
    let bytes = req
        .map(|r| r.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode group message: {e}"))))
        .transpose()?;
    conn.prepare_cached("UPDATE outbox SET group_sealed = ?2 WHERE id = ?1")?.execute(params![id, bytes])?;
    Ok(())
}

pub fn note_failure(conn: &Connection, id: i64, error: &str) -> Result<()> {
    conn.prepare_cached("UPDATE outbox SET attempts = attempts + 1, last_error = ?2 WHERE id = ?1")?.execute(params![id, error])?;
    Ok(())
}

pub fn remove(conn: &Connection, id: i64) -> Result<()> {
    conn.prepare_cached("DELETE FROM outbox WHERE id = ?1")?.execute(params![id])?;
    Ok(())
}

/// Marks the row as going to the platform now, in the job that commits what is sent. False
/// when the row is gone: its caller withdrew it, and it must not be sent.
pub fn mark_handed(conn: &Connection, id: i64, now: i64) -> Result<bool> {
    let n = conn.prepare_cached("UPDATE outbox SET handed_at = coalesce(handed_at, ?2) WHERE id = ?1")?.execute(params![id, now])?;
    Ok(n == 1)
}

/// Removes a row that was never handed to the platform, for a caller that stops waiting. True
/// when it was removed (never sent, and never will be); false when it is handed (or already
/// answered), and only the platform's answer ends it.
pub fn withdraw(conn: &Connection, id: i64) -> Result<bool> {
    let n = conn.prepare_cached("DELETE FROM outbox WHERE id = ?1 AND handed_at IS NULL")?.execute(params![id])?;
    Ok(n == 1)
}

/// A send the outbox gave up: what the record and the log say of it (never its content).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenUp {
    pub chat_id: i64,
    /// What it was: `message`, `file`, `edit`, `deletion`, `callback answer`, ...
    pub kind: String,
    /// The message it is (its reserved id) or concerns (the one edited, deleted, reacted to).
    pub message_id: Option<i64>,
    pub client_message_id: String,
    pub submitted_at: i64,
    pub given_up_at: i64,
    /// It had been handed to the platform (so an earlier try may have reached it).
    pub handed: bool,
    pub reason: String,
}

/// Ends the row without sending it and records why. `None` when the row is gone already
/// (withdrawn by its caller): nothing was given up.
pub fn give_up(conn: &Connection, entry: &OutboxEntry, reason: &str, now: i64) -> Result<Option<GivenUp>> {
    if conn.prepare_cached("DELETE FROM outbox WHERE id = ?1")?.execute(params![entry.id])? == 0 {
        return Ok(None);
    }
    let record = GivenUp {
        chat_id: entry.chat_id,
        kind: entry.content.kind_name().to_string(),
        message_id: message_id_of(&entry.content),
        client_message_id: entry.client_message_id.clone(),
        submitted_at: entry.created_at,
        given_up_at: now,
        handed: entry.handed,
        reason: reason.to_string(),
    };
    conn.prepare_cached(
        "INSERT INTO given_up (chat_id, kind, message_id, client_message_id, submitted_at, given_up_at, handed, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(
        params![
            record.chat_id,
            record.kind,
            record.message_id,
            record.client_message_id,
            record.submitted_at,
            record.given_up_at,
            record.handed,
            record.reason
        ],
    )?;
    conn.prepare_cached("DELETE FROM given_up WHERE id <= (SELECT max(id) FROM given_up) - ?1")?.execute(params![GIVEN_UP_LIMIT])?;
    Ok(Some(record))
}

/// The newest given-up sends first, at most `limit`.
pub fn given_up(conn: &Connection, limit: usize) -> Result<Vec<GivenUp>> {
    let mut stmt = conn.prepare_cached(
        "SELECT chat_id, kind, message_id, client_message_id, submitted_at, given_up_at, handed, reason
         FROM given_up ORDER BY id DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map(params![limit as i64], |r| {
        Ok(GivenUp {
            chat_id: r.get(0)?,
            kind: r.get(1)?,
            message_id: r.get(2)?,
            client_message_id: r.get(3)?,
            submitted_at: r.get(4)?,
            given_up_at: r.get(5)?,
            handed: r.get(6)?,
            reason: r.get(7)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// The message id a content carries: the id reserved for a new message with buttons (in its
/// signed keyboard context), or the message an edit, deletion or reaction names.
pub fn message_id_of(content: &Content) -> Option<i64> {
    let named = match &content.body {
        Some(Body::Edit(e)) => e.message_id,
        Some(Body::Delete(d)) => d.message_id,
        Some(Body::Reaction(r)) => r.message_id,
        _ => content
            .keyboard
            .as_ref()
            .and_then(|k| k.context.as_ref())
            .and_then(|signed| KeyboardContext::parse_from_bytes(&signed.context).ok())
            .map_or(0, |ctx| ctx.message_id),
    };
    (named != 0).then_some(named as i64)
}

pub fn depth(conn: &Connection) -> Result<i64> {
    Ok(conn.prepare_cached("SELECT count(*) FROM outbox")?.query_row([], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use protobuf::MessageField;

    use super::*;
    use crate::wire::e2e::{Delete, InlineKeyboard, SignedKeyboardContext};

    fn text(t: &str) -> Content {
        crate::e2e::text_content(t)
    }

    #[test]
    fn a_row_is_withdrawn_only_before_it_is_handed() {
        let c = super::super::memory_db();
        let a = insert(&c, "a", 42, &text("a"), 100).expect("insert");
        let b = insert(&c, "b", 42, &text("b"), 100).expect("insert");
        assert!(!get(&c, a).expect("get").expect("row").handed);
        assert!(mark_handed(&c, a, 101).expect("hand"));
        assert!(get(&c, a).expect("get").expect("row").handed);
        assert!(!withdraw(&c, a).expect("withdraw"), "a handed row stays: only the platform's answer ends it");
        assert!(get(&c, a).expect("get").is_some());
        assert!(withdraw(&c, b).expect("withdraw"), "never handed: withdrawn");
        assert!(get(&c, b).expect("get").is_none());
        assert!(!mark_handed(&c, b, 102).expect("hand"), "a withdrawn row is never handed (nor sent)");
        assert!(!withdraw(&c, b).expect("withdraw"), "withdrawn once");
    }

    #[test]
    fn a_given_up_send_leaves_the_outbox_and_is_recorded_without_its_content() {
        let c = super::super::memory_db();
        let mut content = text("secret words");
        let ctx = KeyboardContext { message_id: 77, ..Default::default() };
        content.keyboard = MessageField::some(InlineKeyboard {
            context: MessageField::some(SignedKeyboardContext { context: ctx.write_to_bytes().expect("encode"), ..Default::default() }),
            ..Default::default()
        });
        let id = insert(&c, "cmid-1", 42, &content, 100).expect("insert");
        mark_handed(&c, id, 101).expect("hand");
        let entry = get(&c, id).expect("get").expect("row");
        let record = give_up(&c, &entry, "the recipient's device list keeps changing", 200).expect("give up").expect("recorded");
        assert_eq!(
            record,
            GivenUp {
                chat_id: 42,
                kind: "message".into(),
                message_id: Some(77),
                client_message_id: "cmid-1".into(),
                submitted_at: 100,
                given_up_at: 200,
                handed: true,
                reason: "the recipient's device list keeps changing".into(),
            }
        );
        assert!(get(&c, id).expect("get").is_none(), "it left the outbox");
        assert_eq!(given_up(&c, 10).expect("list"), vec![record]);
        assert!(give_up(&c, &entry, "again", 201).expect("give up").is_none(), "a row that is gone is not given up twice");

        // A withdrawn row is not given up: its caller was told it was not sent.
        let mut delete = Content::new();
        delete.set_delete(Delete { message_id: 5, ..Default::default() });
        let d = insert(&c, "cmid-2", 42, &delete, 300).expect("insert");
        let entry = get(&c, d).expect("get").expect("row");
        assert_eq!(message_id_of(&entry.content), Some(5));
        assert!(withdraw(&c, d).expect("withdraw"));
        assert!(give_up(&c, &entry, "late", 301).expect("give up").is_none());
        let all = given_up(&c, 10).expect("list");
        assert_eq!(all.len(), 1);
        let stored: String = c.query_row("SELECT group_concat(reason || kind) FROM given_up", [], |r| r.get(0)).expect("read");
        assert!(!stored.contains("secret words"));
    }

    #[test]
    fn rows_sealed_by_an_older_release_count_as_handed() {
        let c = rusqlite::Connection::open_in_memory().expect("db");
        crate::migrations::migrate(&c, &super::super::schema::STEPS[..5]).expect("version 5");
        c.execute_batch(
            "INSERT INTO outbox (client_message_id, chat_id, content, sealed, created_at) VALUES ('s', 1, x'', x'00', 9);
             INSERT INTO outbox (client_message_id, chat_id, content, created_at) VALUES ('u', 1, x'', 9);",
        )
        .expect("old rows");
        crate::migrations::migrate(&c, super::super::schema::STEPS).expect("newest");
        let handed: Vec<(String, bool)> = c
            .prepare("SELECT client_message_id, handed_at IS NOT NULL FROM outbox ORDER BY id")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        assert_eq!(handed, vec![("s".to_string(), true), ("u".to_string(), false)]);
    }
}
