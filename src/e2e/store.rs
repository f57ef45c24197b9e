//! SQLite tables for crypto state: own device key, registration, prekeys, peer devices and
//! sessions. Plain row access only; the protocol logic lives in `e2e/mod.rs`.
//!
//! Every function runs on the caller's connection and never opens a transaction: the caller
//! (the gateway's store writer, or the client's `BEGIN IMMEDIATE`) decides what commits together.
//! Ids are stored as SQLite INTEGER (i64); user ids are 52-bit and device/prekey ids 32-bit.

use rusqlite::{params, Connection, OptionalExtension};
use zeroize::Zeroizing;

/// The e2e tables as the release before schema versions created them: part of step 1 of every
/// database that holds device state (`crate::migrations`). Frozen, and idempotent, so that step 1
/// adopts an unversioned database; a change to these tables is a new step of each such database.
pub const TABLES_V1: &str = "
         CREATE TABLE IF NOT EXISTS e2e_own_device (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             device_key_seed BLOB NOT NULL,
             next_signed_prekey_id INTEGER NOT NULL,
             next_one_time_prekey_id INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS e2e_registration (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             user_id INTEGER NOT NULL,
             device_id INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS e2e_signed_prekeys (
             id INTEGER PRIMARY KEY,
             keypair BLOB NOT NULL,
             created_at INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS e2e_one_time_prekeys (
             id INTEGER PRIMARY KEY,
             keypair BLOB NOT NULL
         );
         CREATE TABLE IF NOT EXISTS e2e_peer_devices (
             user_id INTEGER NOT NULL,
             device_id INTEGER NOT NULL,
             device_key BLOB NOT NULL,
             PRIMARY KEY (user_id, device_id)
         );
         -- `session` is the current session with the device; `previous` the one it replaced,
         -- kept so that both sides starting a session at once still converge.
         CREATE TABLE IF NOT EXISTS e2e_sessions (
             user_id INTEGER NOT NULL,
             device_id INTEGER NOT NULL,
             session BLOB NOT NULL,
             previous BLOB,
             PRIMARY KEY (user_id, device_id)
         );";

// ── Own device ──

/// The stored device key seed and the next free prekey ids.
pub(crate) struct OwnDevice {
    pub seed: Vec<u8>,
    pub next_signed_prekey_id: u32,
    pub next_one_time_prekey_id: u32,
}

pub(crate) fn own_device(conn: &Connection) -> rusqlite::Result<Option<OwnDevice>> {
    conn.prepare_cached("SELECT device_key_seed, next_signed_prekey_id, next_one_time_prekey_id FROM e2e_own_device WHERE id = 1")?.query_row(
        [],
        |r| {
            Ok(OwnDevice {
                seed: r.get(0)?,
                next_signed_prekey_id: r.get(1)?,
                next_one_time_prekey_id: r.get(2)?,
            })
        },
    )
    .optional()
}

pub(crate) fn insert_own_device(conn: &Connection, dev: &OwnDevice) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO e2e_own_device (id, device_key_seed, next_signed_prekey_id, next_one_time_prekey_id)
         VALUES (1, ?1, ?2, ?3)",
    )?
    .execute(params![dev.seed, dev.next_signed_prekey_id, dev.next_one_time_prekey_id])?;
    Ok(())
}

pub(crate) fn set_next_one_time_prekey_id(conn: &Connection, next: u32) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE e2e_own_device SET next_one_time_prekey_id = ?1 WHERE id = 1")?.execute(params![next])?;
    Ok(())
}

pub(crate) fn set_next_signed_prekey_id(conn: &Connection, next: u32) -> rusqlite::Result<()> {
    conn.prepare_cached("UPDATE e2e_own_device SET next_signed_prekey_id = ?1 WHERE id = 1")?.execute(params![next])?;
    Ok(())
}

// ── Registration ──

pub(crate) fn save_registration(conn: &Connection, user_id: u64, device_id: u32) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO e2e_registration (id, user_id, device_id) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, device_id = excluded.device_id",
    )?
    .execute(params![user_id as i64, device_id])?;
    Ok(())
}

pub(crate) fn registration(conn: &Connection) -> rusqlite::Result<Option<(u64, u32)>> {
    conn.prepare_cached("SELECT user_id, device_id FROM e2e_registration WHERE id = 1")?.query_row(
        [], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))
    },
    )
    .optional()
}

// ── Prekeys ──

pub(crate) fn insert_signed_prekey(conn: &Connection, id: u32, keypair: &[u8], created_at: i64) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO e2e_signed_prekeys (id, keypair, created_at) VALUES (?1, ?2, ?3)")?.execute(params![id, keypair, created_at])?;
    Ok(())
}

pub(crate) fn signed_prekey(conn: &Connection, id: u32) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT keypair FROM e2e_signed_prekeys WHERE id = ?1")?.query_row(params![id], |r| r.get(0))
        .optional()
}

/// The newest signed prekey (highest id).
pub(crate) fn latest_signed_prekey(conn: &Connection) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT keypair FROM e2e_signed_prekeys ORDER BY id DESC LIMIT 1")?.query_row([], |r| r.get(0))
        .optional()
}

/// When the newest signed prekey was created (unix seconds).
pub(crate) fn latest_signed_prekey_created_at(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached("SELECT created_at FROM e2e_signed_prekeys ORDER BY id DESC LIMIT 1")?.query_row([], |r| r.get(0))
        .optional()
}

/// Deletes the signed prekeys that a newer one replaced at or before `replaced_by`: every key
/// older than the newest key created by then. That key itself stays (it was replaced later,
/// or is the current one).
pub(crate) fn prune_signed_prekeys(conn: &Connection, replaced_by: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM e2e_signed_prekeys WHERE id <
             (SELECT max(id) FROM e2e_signed_prekeys WHERE created_at <= ?1)",
    )?
    .execute(params![replaced_by])
}

pub(crate) fn insert_one_time_prekey(conn: &Connection, id: u32, keypair: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO e2e_one_time_prekeys (id, keypair) VALUES (?1, ?2)")?.execute(params![id, keypair])?;
    Ok(())
}

pub(crate) fn one_time_prekey(conn: &Connection, id: u32) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT keypair FROM e2e_one_time_prekeys WHERE id = ?1")?.query_row(params![id], |r| r.get(0))
        .optional()
}

pub(crate) fn all_one_time_prekeys(conn: &Connection) -> rusqlite::Result<Vec<Vec<u8>>> {
    let mut stmt = conn.prepare("SELECT keypair FROM e2e_one_time_prekeys ORDER BY id")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    rows.collect()
}

pub(crate) fn delete_one_time_prekey(conn: &Connection, id: u32) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM e2e_one_time_prekeys WHERE id = ?1")?.execute(params![id])?;
    Ok(())
}

pub(crate) fn count_one_time_prekeys(conn: &Connection) -> rusqlite::Result<u32> {
    conn.prepare_cached("SELECT COUNT(*) FROM e2e_one_time_prekeys")?.query_row([], |r| r.get(0))
}

/// Deletes the oldest one-time prekeys so that at most `keep` remain.
pub(crate) fn prune_one_time_prekeys(conn: &Connection, keep: u32) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM e2e_one_time_prekeys WHERE id NOT IN
             (SELECT id FROM e2e_one_time_prekeys ORDER BY id DESC LIMIT ?1)",
    )?
    .execute(params![keep])
}

// ── Peer devices and sessions ──

pub(crate) fn peer_device_key(conn: &Connection, user_id: u64, device_id: u32) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.prepare_cached("SELECT device_key FROM e2e_peer_devices WHERE user_id = ?1 AND device_id = ?2")?.query_row(
        params![user_id as i64, device_id],
        |r| r.get(0),
    )
    .optional()
}

pub(crate) fn upsert_peer_device(conn: &Connection, user_id: u64, device_id: u32, device_key: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO e2e_peer_devices (user_id, device_id, device_key) VALUES (?1, ?2, ?3)
         ON CONFLICT (user_id, device_id) DO UPDATE SET device_key = excluded.device_key",
    )?
    .execute(params![user_id as i64, device_id, device_key])?;
    Ok(())
}

pub(crate) fn peer_devices(conn: &Connection, user_id: u64) -> rusqlite::Result<Vec<u32>> {
    let mut stmt = conn.prepare("SELECT device_id FROM e2e_peer_devices WHERE user_id = ?1 ORDER BY device_id")?;
    let rows = stmt.query_map(params![user_id as i64], |r| r.get(0))?;
    rows.collect()
}

/// Devices of `user_id` that are recorded and have a session to send on (not one that only
/// receives, `device::sessions_receive_only_after_restore`).
pub(crate) fn devices_with_session(conn: &Connection, user_id: u64) -> rusqlite::Result<Vec<u32>> {
    let mut stmt = conn.prepare_cached(
        "SELECT d.device_id FROM e2e_peer_devices d
         JOIN e2e_sessions s ON s.user_id = d.user_id AND s.device_id = d.device_id
         WHERE d.user_id = ?1
           AND NOT EXISTS (SELECT 1 FROM e2e_receive_only r WHERE r.user_id = d.user_id AND r.device_id = d.device_id)
         ORDER BY d.device_id",
    )?;
    let rows = stmt.query_map(params![user_id as i64], |r| r.get(0))?;
    rows.collect()
}

/// Whether `user_id` removed this device, or the device with this key, in a signed removal
/// this device recorded (`removals`).
pub(crate) fn is_removed(conn: &Connection, user_id: u64, device_id: u32, device_key: &[u8]) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM e2e_removed_devices WHERE user_id = ?1 AND (device_id = ?2 OR device_key = ?3)")?
        .exists(params![user_id as i64, device_id, device_key])
}

pub(crate) fn delete_peer_device(conn: &Connection, user_id: u64, device_id: u32) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM e2e_sessions WHERE user_id = ?1 AND device_id = ?2")?.execute(params![user_id as i64, device_id])?;
    conn.prepare_cached("DELETE FROM e2e_peer_devices WHERE user_id = ?1 AND device_id = ?2")?.execute(params![user_id as i64, device_id])?;
    Ok(())
}

/// A device's current session and the one it replaced, serialized: every secret of both, so
/// the buffers are wiped when dropped.
pub(crate) type SessionPair = (Zeroizing<Vec<u8>>, Option<Zeroizing<Vec<u8>>>);

fn session_pair(current: Vec<u8>, previous: Option<Vec<u8>>) -> SessionPair {
    (Zeroizing::new(current), previous.map(Zeroizing::new))
}

/// The device's sessions when the current one may send: `None` without a session, or when the
/// current one only receives (a restored state's). One read for both.
pub(crate) fn sending_sessions(conn: &Connection, user_id: u64, device_id: u32) -> rusqlite::Result<Option<SessionPair>> {
    conn.prepare_cached(
        "SELECT s.session, s.previous FROM e2e_sessions s
         WHERE s.user_id = ?1 AND s.device_id = ?2
           AND NOT EXISTS (SELECT 1 FROM e2e_receive_only r WHERE r.user_id = s.user_id AND r.device_id = s.device_id)",
    )?
    .query_row(params![user_id as i64, device_id], |r| Ok(session_pair(r.get(0)?, r.get(1)?)))
    .optional()
}

/// A new session with the device began (either side started it): it sends again.
pub(crate) fn sends_again(conn: &Connection, user_id: u64, device_id: u32) -> rusqlite::Result<()> {
    conn.prepare_cached("DELETE FROM e2e_receive_only WHERE user_id = ?1 AND device_id = ?2")?.execute(params![user_id as i64, device_id])?;
    Ok(())
}

pub(crate) fn sessions(conn: &Connection, user_id: u64, device_id: u32) -> rusqlite::Result<Option<SessionPair>> {
    conn.prepare_cached("SELECT session, previous FROM e2e_sessions WHERE user_id = ?1 AND device_id = ?2")?.query_row(
        params![user_id as i64, device_id],
        |r| Ok(session_pair(r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Every stored session: (user, device, (current, previous)).
pub(crate) fn all_sessions(conn: &Connection) -> rusqlite::Result<Vec<(u64, u32, SessionPair)>> {
    let mut stmt = conn.prepare("SELECT user_id, device_id, session, previous FROM e2e_sessions ORDER BY user_id, device_id")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?, session_pair(r.get(2)?, r.get(3)?))))?;
    rows.collect()
}

pub(crate) fn put_sessions(
    conn: &Connection,
    user_id: u64,
    device_id: u32,
    current: &[u8],
    previous: Option<&[u8]>,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO e2e_sessions (user_id, device_id, session, previous) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id, device_id) DO UPDATE SET session = excluded.session, previous = excluded.previous",
    )?
    .execute(params![user_id as i64, device_id, current, previous])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_idempotent_and_sessions_round_trip() {
        let conn = Connection::open_in_memory().expect("in-memory db");
        conn.execute_batch(TABLES_V1).expect("create");
        conn.execute_batch(TABLES_V1).expect("again: step 1 adopts an unversioned database this way");
        conn.execute_batch(super::super::RECEIVE_ONLY_TABLES).expect("sessions that only receive");
        upsert_peer_device(&conn, 7, 1, b"key").expect("device");
        put_sessions(&conn, 7, 1, b"s1", None).expect("session");
        put_sessions(&conn, 7, 1, b"s2", Some(b"s1")).expect("replace");
        assert_eq!(sessions(&conn, 7, 1).expect("read"), Some((Zeroizing::new(b"s2".to_vec()), Some(Zeroizing::new(b"s1".to_vec())))));
        assert_eq!(devices_with_session(&conn, 7).expect("list"), vec![1]);
        delete_peer_device(&conn, 7, 1).expect("delete");
        assert_eq!(sessions(&conn, 7, 1).expect("read"), None);
        assert!(peer_devices(&conn, 7).expect("list").is_empty());
    }

    #[test]
    fn prune_keeps_newest_one_time_prekeys() {
        let conn = Connection::open_in_memory().expect("in-memory db");
        conn.execute_batch(TABLES_V1).expect("tables");
        for id in 1..=10 {
            insert_one_time_prekey(&conn, id, &[id as u8]).expect("insert");
        }
        assert_eq!(prune_one_time_prekeys(&conn, 4).expect("prune"), 6);
        assert_eq!(count_one_time_prekeys(&conn).expect("count"), 4);
        assert!(one_time_prekey(&conn, 6).expect("read").is_none());
        assert_eq!(one_time_prekey(&conn, 7).expect("read"), Some(vec![7]));
    }
}
