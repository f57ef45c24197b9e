//! Inline sessions this runtime imported: the inline server cursor (spec "Delivery
//! semantics"). A session is imported once: its id stays here (the newest `INLINE_LIMIT`), and
//! ids at or below the highest one pruned count as seen.

use rusqlite::{params, Connection, OptionalExtension};

use super::schema::{meta_get, meta_set};
use super::Result;

/// How many sessions are remembered by id.
pub const INLINE_LIMIT: i64 = 10_000;
const PRUNED_BELOW: &str = "inline_pruned_below";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineQueryRow {
    pub session_id: u64,
    pub user_id: u64,
    pub query: String,
    pub chosen: bool,
}

/// Records a new session; false when it was imported before (no second update).
pub fn import(conn: &Connection, session_id: u64, user_id: u64, query: &str, now: i64) -> Result<bool> {
    if !is_new(conn, session_id)? {
        return Ok(false);
    }
    conn.prepare_cached("INSERT INTO inline_queries (session_id, user_id, query, received_at) VALUES (?1, ?2, ?3, ?4)")?.execute(params![session_id as i64, user_id as i64, query, now])?;
    let oldest_kept: Option<i64> = conn.prepare_cached("SELECT session_id FROM inline_queries ORDER BY session_id DESC LIMIT 1 OFFSET ?1")?.query_row(
        params![INLINE_LIMIT],
            |r| r.get(0),
    )
        .optional()?;
    if let Some(cut) = oldest_kept {
        conn.prepare_cached("DELETE FROM inline_queries WHERE session_id <= ?1")?.execute(params![cut])?;
        meta_set(conn, PRUNED_BELOW, &cut.max(pruned_below(conn)?).to_string())?;
    }
    Ok(true)
}

/// Whether `import` would take the session: never seen, and not below what was pruned.
pub fn is_new(conn: &Connection, session_id: u64) -> Result<bool> {
    Ok((session_id as i64) > pruned_below(conn)? && get(conn, session_id)?.is_none())
}

/// Sessions up to this id were pruned: a repeat of one is not taken again.
fn pruned_below(conn: &Connection) -> Result<i64> {
    Ok(meta_get(conn, PRUNED_BELOW)?.and_then(|v| v.parse().ok()).unwrap_or(0))
}

pub fn get(conn: &Connection, session_id: u64) -> Result<Option<InlineQueryRow>> {
    Ok(conn.prepare_cached("SELECT user_id, query, chosen FROM inline_queries WHERE session_id = ?1")?.query_row(
        params![session_id as i64],
            |r| Ok(InlineQueryRow { session_id, user_id: r.get::<_, i64>(0)? as u64, query: r.get(1)?, chosen: r.get(2)? }),
    )
        .optional()?)
}

/// Marks a session chosen; false when it already was (a repeated choice).
pub fn mark_chosen(conn: &Connection, session_id: u64) -> Result<bool> {
    let n = conn.prepare_cached("UPDATE inline_queries SET chosen = 1 WHERE session_id = ?1 AND chosen = 0")?.execute(params![session_id as i64])?;
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::store::memory_db;

    #[test]
    fn a_session_is_imported_once_even_after_it_is_pruned() {
        let c = memory_db();
        assert!(import(&c, 5, 42, "cats", 1).expect("import"));
        assert!(!import(&c, 5, 42, "cats", 2).expect("repeat"));
        assert!(import(&c, 3, 43, "dogs", 2).expect("an older id from another user still counts"));
        assert_eq!(get(&c, 5).expect("get").expect("row").query, "cats");
        assert!(mark_chosen(&c, 5).expect("choose"));
        assert!(!mark_chosen(&c, 5).expect("again"));
        for id in 100..(100 + INLINE_LIMIT as u64 + 1) {
            import(&c, id, 1, "", 3).expect("fill");
        }
        assert_eq!(get(&c, 5).expect("get"), None, "pruned");
        assert!(!import(&c, 5, 42, "cats", 4).expect("still a repeat"));
        assert!(!import(&c, 100, 1, "", 4).expect("pruned too"));
        assert!(import(&c, 100 + INLINE_LIMIT as u64 + 1, 1, "", 4).expect("new"));
    }
}
