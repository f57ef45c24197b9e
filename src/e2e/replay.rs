//! First messages cannot be replayed. A first message sent without a one-time prekey (the
//! platform had none left) starts a session from the signed prekey alone, so the platform could
//! deliver it again later and start a second session that runs the same command twice. Every
//! such message's X3DH ephemeral key is remembered while its signed prekey is kept; a header
//! with a remembered key starts nothing. (A first message with a one-time prekey cannot repeat:
//! the prekey is deleted when it is used.)

use rusqlite::{params, Connection, OptionalExtension};

use super::Result;
use crate::crypto::x3dh::PrekeyHeader;

/// The table of this module (a schema step of each database that holds `e2e` tables).
pub const TABLES: &str = "
    CREATE TABLE e2e_accepted_ephemerals (
        ephemeral_key    BLOB PRIMARY KEY,
        signed_prekey_id INTEGER NOT NULL
    );";

/// Whether a session was already started from this header's ephemeral key.
pub(super) fn seen(conn: &Connection, header: &PrekeyHeader) -> Result<bool> {
    Ok(conn.prepare_cached("SELECT 1 FROM e2e_accepted_ephemerals WHERE ephemeral_key = ?1")?.query_row(
        params![header.ephemeral_key.to_vec()],
            |_| Ok(()),
    )
        .optional()?
        .is_some())
}

/// Remembers the ephemeral key of an accepted first message without a one-time prekey.
pub(super) fn remember(conn: &Connection, header: &PrekeyHeader) -> Result<()> {
    if header.one_time_prekey_id.is_none() {
        conn.prepare_cached("INSERT OR IGNORE INTO e2e_accepted_ephemerals (ephemeral_key, signed_prekey_id) VALUES (?1, ?2)")?.execute(params![header.ephemeral_key.to_vec(), header.signed_prekey_id])?;
    }
    Ok(())
}

/// Forgets the keys whose signed prekey is gone: a replay under it fails as an unknown prekey.
pub(super) fn forget_pruned(conn: &Connection) -> Result<()> {
    conn.prepare_cached("DELETE FROM e2e_accepted_ephemerals WHERE signed_prekey_id NOT IN (SELECT id FROM e2e_signed_prekeys)")?.execute([])?;
    Ok(())
}
