//! Gaps are noticed. Each sending device numbers what it sends to a conversation inside the
//! encrypted content (`Content.sender_seq`: 1, 2, … per conversation; 0 is "not numbered", as
//! earlier releases and chat actions send), so the platform cannot withhold a message unseen:
//! a receiver that gets number n + 2 from a device after n notes n + 1 as missing, and one
//! still missing `GRACE_SECS` later is withheld: its caller logs and counts it ("the platform
//! withheld N messages from X"). One that arrives late (the platform reordered) clears its gap.
//!
//! The first number a receiver sees from a device starts its count, whatever it is: a device
//! that joins a group, or a conversation numbered only since an upgrade, has no gap behind it.
//! So the platform can withhold the very first messages of a conversation unnoticed; from the
//! first one it delivers on, it cannot.
//!
//! A conversation is named from this device's side: a private one by the peer's user id (the
//! sender numbers by recipient, the receiver counts by sender), a group by its id.

use rusqlite::{params, Connection, OptionalExtension};

use super::Result;
use crate::wire::e2e::{content::Body, Content};

/// The tables of this module (a step of each database holding `e2e` tables).
pub const TABLES: &str = "
    CREATE TABLE e2e_sent_seq (
        conversation BLOB PRIMARY KEY,
        last         INTEGER NOT NULL
    );
    CREATE TABLE e2e_received_seq (
        conversation BLOB NOT NULL,
        user_id      INTEGER NOT NULL,
        device_id    INTEGER NOT NULL,
        highest      INTEGER NOT NULL,
        PRIMARY KEY (conversation, user_id, device_id)
    );
    CREATE TABLE e2e_seq_gaps (
        conversation BLOB NOT NULL,
        user_id      INTEGER NOT NULL,
        device_id    INTEGER NOT NULL,
        seq          INTEGER NOT NULL,
        noticed_at   INTEGER NOT NULL,
        PRIMARY KEY (conversation, user_id, device_id, seq)
    );
    CREATE INDEX e2e_seq_gaps_noticed ON e2e_seq_gaps (noticed_at);";

/// How long a missing number may wait for its message: the platform delivers in order, so
/// only a batch boundary or a slow import stands between a gap and its fill.
pub const GRACE_SECS: i64 = 60;

/// At most this many missing numbers are kept per gap; a larger jump counts the rest as
/// withheld at once (a number far ahead is no reordering).
const MAX_GAP_ROWS: u64 = 1000;

/// A conversation, from this device's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversation<'a> {
    /// The private chat with this user.
    Private(u64),
    /// A group or channel, by its id.
    Group(&'a [u8]),
}

impl Conversation<'_> {
    fn key(&self) -> Vec<u8> {
        match self {
            Conversation::Private(user) => [b"p".as_slice(), &user.to_be_bytes()].concat(),
            Conversation::Group(id) => [b"g".as_slice(), id].concat(),
        }
    }
}

/// Messages a sender's device numbered that never arrived here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    /// "user 42" or "group 0a1b…", for the log.
    pub conversation: String,
    pub user_id: u64,
    pub device_id: u32,
    pub count: u64,
}

/// What a received number says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The next one, the first one seen, or not numbered.
    InOrder,
    /// Ahead of the next one: this many numbers are missing now.
    Gap(u64),
    /// A number that was missing: the platform reordered.
    Late,
    /// A number seen before (a sender restored from a backup, say): nothing to note.
    Again,
}

/// Numbers `content` as the next message of this device to `conversation`, unless it is
/// numbered already (a message sent again keeps its number) or is a chat action (ephemeral:
/// never a message, and nothing to miss).
pub fn number(conn: &Connection, conversation: Conversation, content: &mut Content) -> Result<()> {
    if content.sender_seq != 0 || matches!(content.body, Some(Body::ChatAction(_))) {
        return Ok(());
    }
    let next: i64 = conn
        .prepare_cached(
            "INSERT INTO e2e_sent_seq (conversation, last) VALUES (?1, 1)
             ON CONFLICT (conversation) DO UPDATE SET last = last + 1 RETURNING last",
        )?
        .query_row([conversation.key()], |r| r.get(0))?;
    content.sender_seq = next as u64;
    Ok(())
}

/// Notes number `seq` from `sender` in `conversation`, received at `now`.
pub fn received(conn: &Connection, conversation: Conversation, sender: (u64, u32), seq: u64, now: i64) -> Result<Arrival> {
    if seq == 0 {
        return Ok(Arrival::InOrder);
    }
    let key = conversation.key();
    let (user, device) = (sender.0 as i64, sender.1 as i64);
    let highest: Option<i64> = conn
        .prepare_cached("SELECT highest FROM e2e_received_seq WHERE conversation = ?1 AND user_id = ?2 AND device_id = ?3")?
        .query_row(params![key, user, device], |r| r.get(0))
        .optional()?;
    let seq_i = seq.min(i64::MAX as u64) as i64;
    let Some(highest) = highest else {
        conn.prepare_cached("INSERT INTO e2e_received_seq (conversation, user_id, device_id, highest) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![key, user, device, seq_i])?;
        return Ok(Arrival::InOrder);
    };
    if seq_i <= highest {
        let filled = conn
            .prepare_cached("DELETE FROM e2e_seq_gaps WHERE conversation = ?1 AND user_id = ?2 AND device_id = ?3 AND seq = ?4")?
            .execute(params![key, user, device, seq_i])?;
        return Ok(if filled > 0 { Arrival::Late } else { Arrival::Again });
    }
    conn.prepare_cached("UPDATE e2e_received_seq SET highest = ?4 WHERE conversation = ?1 AND user_id = ?2 AND device_id = ?3")?
        .execute(params![key, user, device, seq_i])?;
    let missing = (seq_i - highest - 1) as u64;
    if missing == 0 {
        return Ok(Arrival::InOrder);
    }
    // The numbers just below `seq` are kept (reordering is local); any beyond them count as
    // withheld at once, noted as already due.
    let kept = missing.min(MAX_GAP_ROWS) as i64;
    let mut insert =
        conn.prepare_cached("INSERT OR IGNORE INTO e2e_seq_gaps (conversation, user_id, device_id, seq, noticed_at) VALUES (?1, ?2, ?3, ?4, ?5)")?;
    for n in seq_i - kept..seq_i {
        insert.execute(params![key, user, device, n, now])?;
    }
    if missing > MAX_GAP_ROWS {
        // One row stands for the rest, due at once (`noticed_at` far in the past), counted by
        // its negative seq.
        insert.execute(params![key, user, device, -((missing - MAX_GAP_ROWS) as i64), i64::MIN])?;
    }
    Ok(Arrival::Gap(missing))
}

impl Withheld {
    /// The sentence for the log.
    pub fn describe(&self) -> String {
        let Withheld { conversation, user_id, device_id, count } = self;
        format!(
            "{count} message(s) that device {device_id} of user {user_id} numbered in {conversation} never arrived: the platform withheld them, or they were lost before reaching it"
        )
    }
}

/// Whether a gap noticed at or before `before` is still open (a read, for the check after
/// every batch).
pub fn withheld_due(conn: &Connection, before: i64) -> Result<bool> {
    let due: Option<i64> =
        conn.prepare_cached("SELECT 1 FROM e2e_seq_gaps WHERE noticed_at <= ?1 LIMIT 1")?.query_row([before], |r| r.get(0)).optional()?;
    Ok(due.is_some())
}

/// Takes the gaps noticed at or before `before` off the list: the messages withheld, per
/// conversation and sending device.
pub fn take_withheld(conn: &Connection, before: i64) -> Result<Vec<Withheld>> {
    let rows = conn
        .prepare_cached("DELETE FROM e2e_seq_gaps WHERE noticed_at <= ?1 RETURNING conversation, user_id, device_id, seq")?
        .query_map([before], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut withheld: Vec<Withheld> = Vec::new();
    for (key, user, device, seq) in rows {
        let count = if seq < 0 { seq.unsigned_abs() } else { 1 };
        let (conversation, user_id, device_id) = (name(&key), user as u64, device as u32);
        match withheld.iter_mut().find(|w| w.conversation == conversation && w.user_id == user_id && w.device_id == device_id) {
            Some(w) => w.count += count,
            None => withheld.push(Withheld { conversation, user_id, device_id, count }),
        }
    }
    Ok(withheld)
}

fn name(key: &[u8]) -> String {
    match key.split_first() {
        Some((b'p', user)) if user.len() == 8 => format!("the private chat with user {}", u64::from_be_bytes(user.try_into().expect("8 bytes"))),
        Some((b'g', id)) => format!("group {}", crate::crypto::hex_encode(&id[..id.len().min(8)])),
        _ => "a conversation".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::e2e::ChatAction;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch(TABLES).expect("tables");
        conn
    }

    #[test]
    fn a_sender_numbers_each_conversation_from_one_and_keeps_a_number() {
        let c = db();
        let mut a = crate::e2e::text_content("a");
        number(&c, Conversation::Private(7), &mut a).unwrap();
        number(&c, Conversation::Private(7), &mut a).unwrap();
        assert_eq!(a.sender_seq, 1, "a message sent again keeps its number");
        let mut b = crate::e2e::text_content("b");
        number(&c, Conversation::Private(7), &mut b).unwrap();
        let mut g = crate::e2e::text_content("g");
        number(&c, Conversation::Group(&[1; 32]), &mut g).unwrap();
        let mut typing = Content { body: Some(Body::ChatAction(ChatAction::new())), ..Default::default() };
        number(&c, Conversation::Private(7), &mut typing).unwrap();
        assert_eq!((b.sender_seq, g.sender_seq, typing.sender_seq), (2, 1, 0));
    }

    /// The platform withholds numbers 3 and 4 of Alice's device and delivers 5; it delivers 4
    /// late. After the grace, 3 alone is withheld, once.
    #[test]
    fn a_gap_not_filled_within_the_grace_is_withheld_and_a_late_one_clears_its_own() {
        let c = db();
        let chat = Conversation::Private(1);
        let alice = (1, 2);
        assert_eq!(received(&c, chat, alice, 1, 100).unwrap(), Arrival::InOrder);
        assert_eq!(received(&c, chat, alice, 2, 100).unwrap(), Arrival::InOrder);
        assert_eq!(received(&c, chat, alice, 5, 101).unwrap(), Arrival::Gap(2));
        assert_eq!(received(&c, chat, alice, 4, 102).unwrap(), Arrival::Late);
        assert_eq!(received(&c, chat, alice, 4, 102).unwrap(), Arrival::Again);
        assert_eq!(received(&c, chat, alice, 0, 102).unwrap(), Arrival::InOrder, "not numbered");
        assert!(!withheld_due(&c, 100).unwrap() && take_withheld(&c, 100).unwrap().is_empty(), "within the grace");
        assert!(withheld_due(&c, 101).unwrap());
        let withheld = take_withheld(&c, 101).unwrap();
        assert_eq!(withheld, vec![Withheld { conversation: "the private chat with user 1".into(), user_id: 1, device_id: 2, count: 1 }]);
        assert!(take_withheld(&c, 1000).unwrap().is_empty(), "reported once");
        // Another device of hers, first seen at 40, has nothing behind it.
        assert_eq!(received(&c, chat, (1, 3), 40, 200).unwrap(), Arrival::InOrder);
    }

    #[test]
    fn a_far_jump_keeps_a_bounded_list_and_counts_the_rest() {
        let c = db();
        let group = Conversation::Group(&[9; 32]);
        received(&c, group, (5, 1), 1, 10).unwrap();
        assert_eq!(received(&c, group, (5, 1), 5002, 10).unwrap(), Arrival::Gap(5000));
        let rows: i64 = c.query_row("SELECT COUNT(*) FROM e2e_seq_gaps", [], |r| r.get(0)).unwrap();
        assert_eq!(rows, MAX_GAP_ROWS as i64 + 1);
        let withheld = take_withheld(&c, 10).unwrap();
        assert_eq!(withheld.len(), 1);
        assert_eq!((withheld[0].count, withheld[0].conversation.as_str()), (5000, "group 0909090909090909"));
    }
}
