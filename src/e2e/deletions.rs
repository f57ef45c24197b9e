//! Group deletions a member asked for. The platform's `DELETED` notice alone deletes nothing:
//! a message leaves a member's history only on an MLS `Delete` from a member, which is either
//! the message's sender, or an administrator the platform's notice named as the deleter (the
//! platform checks the right to delete, as it keeps every role; the member's own MLS message
//! shows that it asked). So the platform can no longer take a message out of a group's
//! history on its own.
//!
//! The deleter asks the platform first (`DeleteGroupMessage`, which checks the right and sends
//! the notice) and then sends its MLS `Delete`; the platform orders both, so the notice is
//! noted here before the `Delete` that it allows arrives.

use rusqlite::{params, Connection};

use super::Result;

/// The table of this module (a step of each database holding group state).
pub const TABLES: &str = "
    CREATE TABLE e2e_group_deletions (
        group_id   BLOB NOT NULL,
        message_id INTEGER NOT NULL,
        actor      INTEGER NOT NULL,
        noted_at   INTEGER NOT NULL,
        PRIMARY KEY (group_id, message_id, actor)
    );
    CREATE INDEX e2e_group_deletions_noted ON e2e_group_deletions (noted_at);";

/// A notice whose `Delete` never came is forgotten after this long.
const KEEP_SECS: i64 = 24 * 3600;

/// Notes the platform's notice that `actor` deleted `message_id` of `group_id`: the right it
/// checked, kept until that member's own `Delete` arrives.
pub fn note_notice(conn: &Connection, group_id: &[u8], message_id: u64, actor: u64, now: i64) -> Result<()> {
    conn.prepare_cached("DELETE FROM e2e_group_deletions WHERE noted_at < ?1")?.execute([now - KEEP_SECS])?;
    conn.prepare_cached(
        "INSERT OR REPLACE INTO e2e_group_deletions (group_id, message_id, actor, noted_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![group_id, message_id as i64, actor as i64, now])?;
    Ok(())
}

/// Whether a `Delete` of `message_id` that `deleter` sent (MLS-authenticated) takes effect:
/// `deleter` sent the message (`sender`, from the history; `None` when it is not known here),
/// or the platform's notice named `deleter` as its deleter (the notice is used up).
pub fn may_delete(conn: &Connection, group_id: &[u8], message_id: u64, deleter: u64, sender: Option<u64>) -> Result<bool> {
    let noticed = conn
        .prepare_cached("DELETE FROM e2e_group_deletions WHERE group_id = ?1 AND message_id = ?2 AND actor = ?3")?
        .execute(params![group_id, message_id as i64, deleter as i64])?
        > 0;
    Ok(noticed || sender == Some(deleter))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GROUP: &[u8] = b"group";

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("db");
        c.execute_batch(TABLES).expect("tables");
        c
    }

    #[test]
    fn the_sender_deletes_its_own_message_without_a_notice() {
        let c = db();
        assert!(may_delete(&c, GROUP, 5, 42, Some(42)).expect("check"));
        assert!(!may_delete(&c, GROUP, 5, 43, Some(42)).expect("check"), "another member, no notice");
    }

    #[test]
    fn an_administrator_deletes_once_the_platform_named_it() {
        let c = db();
        note_notice(&c, GROUP, 5, 7, 1_000).expect("notice");
        assert!(!may_delete(&c, GROUP, 5, 8, Some(42)).expect("check"), "the notice named another deleter");
        assert!(!may_delete(&c, GROUP, 6, 7, Some(42)).expect("check"), "the notice named another message");
        assert!(may_delete(&c, GROUP, 5, 7, Some(42)).expect("check"));
        assert!(!may_delete(&c, GROUP, 5, 7, Some(42)).expect("check"), "a notice allows one deletion");
    }

    #[test]
    fn old_notices_are_forgotten() {
        let c = db();
        note_notice(&c, GROUP, 5, 7, 1_000).expect("notice");
        note_notice(&c, GROUP, 6, 7, 1_000 + KEEP_SECS + 1).expect("a later notice prunes");
        assert!(!may_delete(&c, GROUP, 5, 7, None).expect("check"));
        assert!(may_delete(&c, GROUP, 6, 7, None).expect("check"));
    }
}
