//! The messages a profile received, remembered per dialog: for each (peer, message id) the
//! latest `Content` as it arrived — edits applied, deletions removing it — so that a press can
//! send back a keyboard's signed context exactly as the bot signed it.
//!
//! Every change runs inside the transaction that opened the envelope (`inbox.rs`), so the store
//! and the ratchet state never disagree after a crash. Only the newest `MAX_REMEMBERED` messages
//! of a profile are kept; a press on an older one is refused as unknown.

use protobuf::Message as _;
use rusqlite::{params, Connection, OptionalExtension};

use super::error::{ClientError, Result};
use crate::wire::e2e::{Content, Edit};

/// How many received messages a profile remembers (the newest).
pub const MAX_REMEMBERED: i64 = 10_000;



/// The `peer_user_id` under which a group's messages are remembered: the top bit set (user
/// ids stay below 2^53), then 63 bits of the group id, so a group's message ids never meet a
/// dialog's.
pub(super) fn group_peer(group_id: &[u8; 32]) -> u64 {
    let head = u64::from_be_bytes(group_id[..8].try_into().expect("8 bytes"));
    (1 << 63) | (head >> 1)
}

/// Remembers a received message, replacing one with the same id, and forgets the oldest
/// beyond `MAX_REMEMBERED`.
pub(super) fn remember(c: &Connection, peer: u64, message_id: u64, date: i64, content: &Content) -> Result<()> {
    keep(c, "client_messages", "date = excluded.date, content = excluded.content", (peer, message_id, date), content)
}

/// Stores `content` as message `message_id` of `peer` in `table` (`client_messages` or
/// `client_sent`; a repeat updates the columns `on_repeat` names), then forgets the oldest rows
/// beyond `MAX_REMEMBERED`.
fn keep(c: &Connection, table: &str, on_repeat: &str, (peer, message_id, date): (u64, u64, i64), content: &Content) -> Result<()> {
    let bytes = encode(content, peer, message_id)?;
    c.prepare_cached(&format!(
        "INSERT INTO {table} (peer_user_id, message_id, date, content) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (peer_user_id, message_id) DO UPDATE SET {on_repeat}"
    ))?
    .execute(params![peer as i64, message_id as i64, date, bytes])?;
    c.prepare_cached(&format!(
        "DELETE FROM {table} WHERE rowid <= (SELECT rowid FROM {table} ORDER BY rowid DESC LIMIT 1 OFFSET ?1)"
    ))?
    .execute([MAX_REMEMBERED])?;
    Ok(())
}

impl super::profile::Profile {
    /// A message received from `peer_user_id` as this profile remembers it (edits applied),
    /// if it does.
    pub fn remembered(&self, peer_user_id: u64, message_id: u64) -> Result<Option<Content>> {
        load(&self.conn, peer_user_id, message_id)
    }

    /// A text or file we sent to `peer` (a dialog's user id, or `group_peer`) as this profile
    /// remembers it (our edits applied), if it does.
    pub fn remembered_sent(&self, peer: u64, message_id: u64) -> Result<Option<Content>> {
        load_sent(&self.conn, peer, message_id)
    }

    /// Replaces `needle` with `replacement` in every text remembered from `peer_user_id` (a
    /// secret a reply carried, once it is kept elsewhere), with no copy left in the log.
    /// Returns how many messages changed.
    pub fn redact_remembered(&self, peer_user_id: u64, needle: &str, replacement: &str) -> Result<usize> {
        super::profile::write_txn(&self.conn, |c| {
            let mut stmt = c.prepare("SELECT message_id, content FROM client_messages WHERE peer_user_id = ?1")?;
            let rows = stmt
                .query_map(params![peer_user_id as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut changed = 0;
            for (id, bytes) in rows {
                let Ok(mut content) = Content::parse_from_bytes(&bytes) else { continue };
                if !content.has_text() || !content.text().text.contains(needle) {
                    continue;
                }
                let text = content.text().text.replace(needle, replacement);
                content.mut_text().text = text;
                let bytes = encode(&content, peer_user_id, id as u64)?;
                c.execute(
                    "UPDATE client_messages SET content = ?3 WHERE peer_user_id = ?1 AND message_id = ?2",
                    params![peer_user_id as i64, id, bytes],
                )?;
                changed += 1;
            }
            if changed > 0 {
                crate::e2e::wal::secrets_deleted();
            }
            Ok(changed)
        })
    }

    /// The texts of the newest `limit` messages remembered from `peer_user_id`, newest first.
    pub fn remembered_texts(&self, peer_user_id: u64, limit: usize) -> Result<Vec<String>> {
        recent_texts(&self.conn, peer_user_id, limit)
    }
}

/// The texts of the newest `limit` messages remembered from `peer`, newest first (a
/// message without text, a file say, is left out).
pub(super) fn recent_texts(c: &Connection, peer: u64, limit: usize) -> Result<Vec<String>> {
    let mut stmt = c.prepare(
        "SELECT message_id, content FROM client_messages WHERE peer_user_id = ?1 ORDER BY rowid DESC LIMIT ?2",
    )?;
    let rows = stmt
        .query_map(params![peer as i64, limit as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut texts = Vec::new();
    for (id, bytes) in rows {
        let content = Content::parse_from_bytes(&bytes)
            .map_err(|e| ClientError::Invalid(format!("remembered message {id} from user {peer} is damaged: {e}")))?;
        if content.has_text() {
            texts.push(content.text().text.clone());
        }
    }
    Ok(texts)
}

/// The message as it is now, if remembered.
pub(super) fn load(c: &Connection, peer: u64, message_id: u64) -> Result<Option<Content>> {
    load_from(c, "SELECT content FROM client_messages WHERE peer_user_id = ?1 AND message_id = ?2", peer, message_id, "from")
}

/// A message of a conversation as the profile remembers it, for a view that opens.
pub struct Remembered {
    /// We sent it (`client_sent`); else the peer did.
    pub own: bool,
    /// Who sent a group's message (0: not kept, or a dialog's peer, or ours).
    pub sender: u64,
    pub message_id: u64,
    pub date: i64,
    pub content: Content,
}

/// The newest `limit` messages of conversation `peer` (received and our own texts), oldest
/// first. A damaged row is skipped: a view is no place to fail.
pub(super) fn recent(c: &Connection, peer: u64, limit: usize) -> Result<Vec<Remembered>> {
    let mut rows = c.prepare_cached(
        "SELECT own, sender, message_id, date, content FROM (
             SELECT 0 AS own, sender_user_id AS sender, message_id, date, content FROM client_messages WHERE peer_user_id = ?1
             UNION ALL
             SELECT 1 AS own, 0 AS sender, message_id, date, content FROM client_sent WHERE peer_user_id = ?1)
         ORDER BY message_id DESC, own DESC LIMIT ?2",
    )?;
    let found = rows.query_map(params![peer as i64, limit as i64], |r| {
        Ok((r.get::<_, bool>(0)?, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64, r.get::<_, i64>(3)?, r.get::<_, Vec<u8>>(4)?))
    })?;
    let mut out = Vec::new();
    for row in found {
        let (own, sender, message_id, date, bytes) = row?;
        match Content::parse_from_bytes(&bytes) {
            Ok(content) => out.push(Remembered { own, sender, message_id, date, content }),
            Err(e) => log::warn!("remembered message {message_id} of user {peer} is damaged ({e}); not shown"),
        }
    }
    out.reverse();
    Ok(out)
}

impl super::profile::Profile {
    /// The newest `limit` messages of a dialog (the peer's user id) or a group
    /// (`group_peer`), oldest first, for a chat view that opens.
    pub fn recent_messages(&self, peer: u64, limit: usize) -> Result<Vec<Remembered>> {
        recent(&self.conn, peer, limit)
    }
}

/// One remembered content by (peer, message id), with `sql` naming the table; `direction`
/// ("from", "sent to") says in the error which side it was.
fn load_from(c: &Connection, sql: &str, peer: u64, message_id: u64, direction: &str) -> Result<Option<Content>> {
    let bytes: Option<Vec<u8>> = c.query_row(sql, params![peer as i64, message_id as i64], |r| r.get(0)).optional()?;
    bytes
        .map(|b| {
            Content::parse_from_bytes(&b).map_err(|e| {
                ClientError::Invalid(format!("remembered message {message_id} {direction} user {peer} is damaged: {e}"))
            })
        })
        .transpose()
}

/// Applies an edit by `peer` and returns the message as it is now: the edit's text and
/// keyboard (absent: none), the remembered reply and forward fields. An edit of a message not
/// remembered (older than the store, or received before this release) is remembered as it
/// comes, so that its new buttons can be pressed.
pub(super) fn apply_edit(c: &Connection, peer: u64, date: i64, edit: &Edit) -> Result<Content> {
    let new = edit.content.get_or_default();
    let now = match load(c, peer, edit.message_id)? {
        Some(mut old) => {
            if new.body.is_some() {
                old.body = new.body.clone();
            }
            old.keyboard = new.keyboard.clone();
            let bytes = encode(&old, peer, edit.message_id)?;
            c.execute(
                "UPDATE client_messages SET content = ?3 WHERE peer_user_id = ?1 AND message_id = ?2",
                params![peer as i64, edit.message_id as i64, bytes],
            )?;
            old
        }
        None => {
            remember(c, peer, edit.message_id, date, new)?;
            new.clone()
        }
    };
    Ok(now)
}

/// Remembers a group's message (`peer`: `group_peer`) with its sender, as `remember` does.
pub(super) fn remember_group_message(c: &Connection, peer: u64, message_id: u64, date: i64, content: &Content, sender: u64) -> Result<()> {
    remember(c, peer, message_id, date, content)?;
    c.execute(
        "UPDATE client_messages SET sender_user_id = ?3 WHERE peer_user_id = ?1 AND message_id = ?2",
        params![peer as i64, message_id as i64, sender as i64],
    )?;
    Ok(())
}

/// Who sent a remembered group message (none: not remembered, or from before step 6).
pub(super) fn group_message_sender(c: &Connection, peer: u64, message_id: u64) -> Result<Option<u64>> {
    let sender: Option<i64> = c
        .query_row(
            "SELECT sender_user_id FROM client_messages WHERE peer_user_id = ?1 AND message_id = ?2",
            params![peer as i64, message_id as i64],
            |r| r.get(0),
        )
        .optional()?;
    Ok(sender.filter(|&s| s != 0).map(|s| s as u64))
}

/// Remembers a text, file or shared item we sent to `peer` (a group: `group_peer`), or its content after
/// our edit; forgets the oldest beyond `MAX_REMEMBERED`. Other kinds (presses, reactions) are
/// not remembered: nothing shows or edits them later.
pub(super) fn remember_sent(c: &Connection, peer: u64, message_id: u64, date: i64, content: &Content) -> Result<()> {
    // Our texts (to edit them), our files (to show them again), and anything carrying a bot's
    // buttons (a chosen inline result).
    if !worth_remembering(content) && content.keyboard.is_none() {
        return Ok(());
    }
    keep(c, "client_sent", "content = excluded.content", (peer, message_id, date), content)
}

/// Whether a content we send is kept in `client_sent`: a text (to edit it), a file, a
/// location, contact or poll (to show them again); a press, a reaction or an edit is not.
pub(super) fn worth_remembering(content: &Content) -> bool {
    content.has_text() || content.has_media() || super::shared_item::Shared::from_content(content).is_some()
}

/// A text we sent to `peer`, as it is now (our edits applied), if remembered.
pub(super) fn load_sent(c: &Connection, peer: u64, message_id: u64) -> Result<Option<Content>> {
    load_from(c, "SELECT content FROM client_sent WHERE peer_user_id = ?1 AND message_id = ?2", peer, message_id, "sent to")
}

/// Forgets a text this profile sent to `peer` (a bot deleted it from their dialog).
pub(super) fn forget_sent(c: &Connection, peer: u64, message_id: u64) -> Result<()> {
    c.execute(
        "DELETE FROM client_sent WHERE peer_user_id = ?1 AND message_id = ?2",
        params![peer as i64, message_id as i64],
    )?;
    Ok(())
}

/// Forgets a message `peer` deleted (nothing to do when it is not remembered).
pub(super) fn forget(c: &Connection, peer: u64, message_id: u64) -> Result<()> {
    c.execute(
        "DELETE FROM client_messages WHERE peer_user_id = ?1 AND message_id = ?2",
        params![peer as i64, message_id as i64],
    )?;
    Ok(())
}

fn encode(content: &Content, peer: u64, message_id: u64) -> Result<Vec<u8>> {
    content
        .write_to_bytes()
        .map_err(|e| ClientError::Invalid(format!("encoding message {message_id} from user {peer}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::e2e::{InlineButton, InlineKeyboard, KeyboardRow};

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("db");
        c.execute_batch(crate::client::schema::HISTORY_V3).expect("table");
        c
    }

    fn text(s: &str) -> Content {
        crate::e2e::text_content(s)
    }

    fn with_button(mut content: Content, data: &str) -> Content {
        let mut b = InlineButton::new();
        b.text = data.to_uppercase();
        b.callback_data = data.to_string();
        let mut row = KeyboardRow::new();
        row.buttons.push(b);
        let mut k = InlineKeyboard::new();
        k.rows.push(row);
        content.keyboard = protobuf::MessageField::some(k);
        content
    }

    #[test]
    fn a_view_gets_the_newest_of_both_sides_oldest_first() {
        let c = db();
        c.execute_batch(crate::client::schema::SENT_V6).expect("table");
        remember(&c, 7, 1, 100, &text("one")).expect("received");
        remember_sent(&c, 7, 2, 101, &text("two")).expect("sent");
        remember(&c, 7, 3, 102, &text("three")).expect("received");
        remember(&c, 8, 4, 103, &text("elsewhere")).expect("another dialog");
        let got: Vec<(bool, u64, String)> =
            recent(&c, 7, 10).expect("recent").into_iter().map(|r| (r.own, r.message_id, r.content.text().text.clone())).collect();
        assert_eq!(got, vec![(false, 1, "one".into()), (true, 2, "two".into()), (false, 3, "three".into())]);
        let newest: Vec<u64> = recent(&c, 7, 2).expect("recent").iter().map(|r| r.message_id).collect();
        assert_eq!(newest, vec![2, 3], "the limit keeps the newest");
    }

    #[test]
    fn edits_replace_text_and_keyboard_but_keep_the_reply() {
        let c = db();
        let mut original = with_button(text("pick"), "a");
        original.reply_to_message_id = 4;
        remember(&c, 7, 5, 100, &original).expect("remember");
        let mut edit = Edit::new();
        edit.message_id = 5;
        edit.content = protobuf::MessageField::some(text("picked"));
        let now = apply_edit(&c, 7, 101, &edit).expect("edit");
        assert_eq!(now.text().text, "picked");
        assert!(now.keyboard.is_none(), "no keyboard in the edit: the buttons are gone");
        assert_eq!(now.reply_to_message_id, 4);
        assert_eq!(load(&c, 7, 5).expect("load"), Some(now));
        assert_eq!(load(&c, 8, 5).expect("load"), None, "another dialog's message 5 is another message");

        // An edit of a message never seen is remembered as it comes.
        edit.message_id = 9;
        edit.content = protobuf::MessageField::some(with_button(text("new"), "b"));
        apply_edit(&c, 7, 102, &edit).expect("edit unknown");
        assert_eq!(load(&c, 7, 9).expect("load").expect("remembered").keyboard.rows[0].buttons[0].callback_data, "b");

        forget(&c, 7, 5).expect("forget");
        assert_eq!(load(&c, 7, 5).expect("load"), None);
        forget(&c, 7, 5).expect("forgetting twice is fine");
    }

    #[test]
    fn sent_texts_are_remembered_apart_from_received_ones() {
        let c = db();
        c.execute_batch(crate::client::schema::SENT_V6).expect("table");
        remember(&c, 7, 5, 100, &text("from the bot")).expect("received");
        assert_eq!(load_sent(&c, 7, 5).expect("load"), None, "a received message is not ours");
        let mut mine = text("hello");
        mine.reply_to_message_id = 5;
        remember_sent(&c, 7, 6, 101, &mine).expect("sent");
        assert_eq!(load_sent(&c, 7, 6).expect("load"), Some(mine.clone()));
        assert_eq!(load(&c, 7, 6).expect("load"), None, "nor is ours a received one");
        let mut edited = mine.clone();
        edited.mut_text().text = "hello, world".into();
        remember_sent(&c, 7, 6, 999, &edited).expect("edited");
        assert_eq!(load_sent(&c, 7, 6).expect("load"), Some(edited));
        let mut reaction = Content::new();
        reaction.set_reaction(crate::wire::e2e::Reaction::new());
        remember_sent(&c, 7, 8, 102, &reaction).expect("not a text");
        assert_eq!(load_sent(&c, 7, 8).expect("load"), None, "a reaction is not remembered");
        let mut file = Content::new();
        file.mut_media().file_name = "cat.png".into();
        remember_sent(&c, 7, 9, 103, &file).expect("a file");
        assert_eq!(load_sent(&c, 7, 9).expect("load"), Some(file), "our file is remembered, to show it again");
    }

    #[test]
    fn a_group_message_remembers_its_sender() {
        let c = db();
        c.execute_batch(crate::client::schema::SENT_V6).expect("step 6");
        remember_group_message(&c, 1 << 63, 4, 100, &text("hi"), 42).expect("remember");
        assert_eq!(group_message_sender(&c, 1 << 63, 4).expect("sender"), Some(42));
        assert_eq!(group_message_sender(&c, 1 << 63, 5).expect("sender"), None, "not remembered");
        remember(&c, 7, 4, 100, &text("a dialog's")).expect("remember");
        assert_eq!(group_message_sender(&c, 7, 4).expect("sender"), None, "a dialog's message names no sender");
        remember_sent(&c, 1 << 63, 5, 101, &text("mine")).expect("ours");
        let senders: Vec<(bool, u64)> = recent(&c, 1 << 63, 10).expect("recent").iter().map(|r| (r.own, r.sender)).collect();
        assert_eq!(senders, vec![(false, 42), (true, 0)], "a group's history names each sender");
    }

    #[test]
    fn only_the_newest_are_kept() {
        let c = db();
        for id in 1..=(MAX_REMEMBERED as u64 + 3) {
            remember(&c, 1, id, 0, &text("x")).expect("remember");
        }
        let n: i64 = c.query_row("SELECT COUNT(*) FROM client_messages", [], |r| r.get(0)).expect("count");
        assert_eq!(n, MAX_REMEMBERED);
        assert!(load(&c, 1, 3).expect("load").is_none(), "the oldest are gone");
        assert!(load(&c, 1, 4).expect("load").is_some());
        assert!(load(&c, 1, MAX_REMEMBERED as u64 + 3).expect("load").is_some());
    }
}
