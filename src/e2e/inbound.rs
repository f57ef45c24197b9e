//! The one rule that decides whether an inbound envelope is new, for every program that
//! receives (the gateway, `e2e-chat`, `@BotManager`): it is new when its inbox seq is above the
//! stored cursor and its sender's client message id is not among the last [`REMEMBERED`]
//! accepted. The cursor skips what the platform delivers again after a crash or a lost
//! acknowledgement; the memory skips one message accepted twice under two seqs. Both change in
//! the caller's transaction, together with the message's effects, so a crash either keeps all
//! of it or none.

use rusqlite::{params, Connection, OptionalExtension};

/// How many accepted client message ids are remembered.
pub const REMEMBERED: i64 = 2048;

/// The tables of the rule (step 2 of every receiving database; each step copies what its
/// program remembered before into them).
pub const TABLES_V2: &str = "
CREATE TABLE IF NOT EXISTS e2e_inbound_cursor (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL                      -- highest inbox seq accepted (platform order)
);
CREATE TABLE IF NOT EXISTS e2e_inbound_seen (
    source TEXT PRIMARY KEY,                  -- <sender user id>:<client message id>
    n      INTEGER NOT NULL                   -- order of acceptance, to forget the oldest
);
CREATE INDEX IF NOT EXISTS e2e_inbound_seen_n ON e2e_inbound_seen (n);
";

fn source(sender_user_id: u64, client_message_id: &str) -> String {
    format!("{sender_user_id}:{client_message_id}")
}

/// The highest seq accepted (0 before any).
pub fn cursor(conn: &Connection) -> rusqlite::Result<u64> {
    Ok(conn.prepare_cached("SELECT seq FROM e2e_inbound_cursor WHERE id = 1")?.query_row([], |r| r.get::<_, i64>(0))
        .optional()?
        .map_or(0, |v| v as u64))
}

/// True if this envelope was accepted before: at or below the cursor, or its client message id
/// already seen from this sender.
pub fn is_repeat(conn: &Connection, seq: u64, sender_user_id: u64, client_message_id: &str) -> rusqlite::Result<bool> {
    if seq <= cursor(conn)? {
        return Ok(true);
    }
    if client_message_id.is_empty() {
        return Ok(false);
    }
    let mut stmt = conn.prepare_cached("SELECT 1 FROM e2e_inbound_seen WHERE source = ?1")?;
    stmt.exists(params![source(sender_user_id, client_message_id)])
}

/// Records the envelope as accepted (whatever became of it: opened, or dropped as bad), so it
/// is never taken again.
pub fn accept(conn: &Connection, seq: u64, sender_user_id: u64, client_message_id: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO e2e_inbound_cursor (id, seq) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET seq = max(seq, excluded.seq)",
    )?
    .execute(params![seq as i64])?;
    if client_message_id.is_empty() {
        return Ok(());
    }
    conn.prepare_cached(
        "INSERT OR IGNORE INTO e2e_inbound_seen (source, n)
         VALUES (?1, COALESCE((SELECT max(n) FROM e2e_inbound_seen), 0) + 1)",
    )?
    .execute(params![source(sender_user_id, client_message_id)])?;
    conn.prepare_cached("DELETE FROM e2e_inbound_seen WHERE n <= (SELECT max(n) FROM e2e_inbound_seen) - ?1")?.execute(params![REMEMBERED])?;
    Ok(())
}

/// Forgets everything accepted (the platform account behind it was replaced).
pub fn reset(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("DELETE FROM e2e_inbound_cursor; DELETE FROM e2e_inbound_seen;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("memory db");
        c.execute_batch(TABLES_V2).expect("tables");
        c
    }

    #[test]
    fn the_cursor_and_the_memory_each_catch_a_repeat() {
        let c = db();
        assert!(!is_repeat(&c, 1, 7, "a").expect("new"));
        accept(&c, 1, 7, "a").expect("accept");
        assert!(is_repeat(&c, 1, 7, "b").expect("redelivered seq"));
        assert!(is_repeat(&c, 5, 7, "a").expect("the same message under a new seq"));
        assert!(!is_repeat(&c, 5, 8, "a").expect("another sender's id"));
        // An older seq accepted late never moves the cursor back.
        accept(&c, 9, 7, "c").expect("accept");
        accept(&c, 6, 7, "d").expect("accept");
        assert_eq!(cursor(&c).expect("cursor"), 9);
        reset(&c).expect("reset");
        assert!(!is_repeat(&c, 1, 7, "a").expect("forgotten"));
    }

    #[test]
    fn the_memory_is_bounded() {
        let c = db();
        for i in 0..(REMEMBERED + 10) {
            accept(&c, i as u64 + 1, 7, &format!("m{i}")).expect("accept");
        }
        let n: i64 = c.query_row("SELECT count(*) FROM e2e_inbound_seen", [], |r| r.get(0)).expect("count");
        assert_eq!(n, REMEMBERED);
        c.execute("DELETE FROM e2e_inbound_cursor", []).expect("cursor gone");
        assert!(!is_repeat(&c, 1, 7, "m0").expect("the oldest is forgotten"));
        assert!(is_repeat(&c, 1, 7, &format!("m{}", REMEMBERED + 9)).expect("the newest is remembered"));
    }
}
