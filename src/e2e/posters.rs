//! Who may post in each channel, as this device received it: the owner and the administrators
//! with `can_post_messages` (`wire::roles::may_post_in_channel`). The gateway and `e2e-chat`
//! drop a channel post from anyone else, instead of trusting the platform alone to refuse it.
//!
//! The list of a channel is read whole from the platform's member list once the device joined
//! (`set_posters`), then kept by the role changes it receives (`set_poster`). Until then it is
//! not known, and posts are not checked (`may_post` is `None`).

use rusqlite::{params, Connection, OptionalExtension};

use super::Result;

/// The tables of this module (schema step of the gateway's and the profile's database).
pub const TABLES: &str = "
    CREATE TABLE e2e_channel_posters (
        group_id BLOB NOT NULL,
        user_id  INTEGER NOT NULL,
        PRIMARY KEY (group_id, user_id)
    );
    CREATE TABLE e2e_channel_posters_known (group_id BLOB PRIMARY KEY);";

/// Records whether `user_id` may post in the channel `group_id` (a role change received).
pub fn set_poster(conn: &Connection, group_id: &[u8], user_id: u64, may_post: bool) -> Result<()> {
    if may_post {
        conn.prepare_cached("INSERT OR IGNORE INTO e2e_channel_posters (group_id, user_id) VALUES (?1, ?2)")?.execute(params![group_id, user_id as i64])?;
    } else {
        conn.prepare_cached("DELETE FROM e2e_channel_posters WHERE group_id = ?1 AND user_id = ?2")?.execute(params![group_id, user_id as i64])?;
    }
    Ok(())
}

/// The whole list of who may post in the channel `group_id`, from the platform's member list.
pub fn set_posters(conn: &Connection, group_id: &[u8], users: &[u64]) -> Result<()> {
    conn.prepare_cached("DELETE FROM e2e_channel_posters WHERE group_id = ?1")?.execute(params![group_id])?;
    for user in users {
        set_poster(conn, group_id, *user, true)?;
    }
    conn.prepare_cached("INSERT OR IGNORE INTO e2e_channel_posters_known (group_id) VALUES (?1)")?.execute(params![group_id])?;
    Ok(())
}

/// Whether the list of the channel `group_id` was read.
pub fn known(conn: &Connection, group_id: &[u8]) -> Result<bool> {
    let row: Option<i64> =
        conn.prepare_cached("SELECT 1 FROM e2e_channel_posters_known WHERE group_id = ?1")?.query_row(params![group_id], |r| r.get(0)).optional()?;
    Ok(row.is_some())
}

/// Whether `user_id` may post in the channel `group_id`; `None` while its list is not known.
pub fn may_post(conn: &Connection, group_id: &[u8], user_id: u64) -> Result<Option<bool>> {
    if !known(conn, group_id)? {
        return Ok(None);
    }
    let row: Option<i64> = conn.prepare_cached("SELECT 1 FROM e2e_channel_posters WHERE group_id = ?1 AND user_id = ?2")?.query_row(
        params![group_id, user_id as i64],
            |r| r.get(0),
    )
        .optional()?;
    Ok(Some(row.is_some()))
}

/// Forgets the list of a channel this device left.
pub fn forget(conn: &Connection, group_id: &[u8]) -> Result<()> {
    conn.prepare_cached("DELETE FROM e2e_channel_posters WHERE group_id = ?1")?.execute(params![group_id])?;
    conn.prepare_cached("DELETE FROM e2e_channel_posters_known WHERE group_id = ?1")?.execute(params![group_id])?;
    Ok(())
}
