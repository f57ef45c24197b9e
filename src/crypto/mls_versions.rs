//! A version for each MLS group in a database: every write to a group's openmls rows (its
//! tree, secrets, context, pending state, proposals, own leaf nodes) sets the group's version
//! to a fresh random number, by triggers, whoever writes and however the write ends. A copy of
//! a group loaded at one version is the stored state exactly while the version is unchanged:
//! a rollback, a restored backup or another connection's write all show as another version.
//! `e2e::kept` uses it to keep groups loaded between calls (decision 0134).
//!
//! The table and triggers are (re)made at every open, after openmls' own migrations: one of
//! those may rebuild a table (its V2 did), which drops the triggers on it. Their contents are
//! derived: a database without them (from an earlier release) gets them, and a version they
//! never set only means the group is loaded again.

use openmls::prelude::GroupId;
use openmls_sqlite_storage::Codec as _;
use rusqlite::{Connection, OptionalExtension as _};

use super::mls_codec::StorageCodec;

/// openmls' tables that hold what `MlsGroup::load` reads, and the column that names the group.
const GROUP_TABLES: [&str; 3] = ["openmls_group_data", "openmls_proposals", "openmls_own_leaf_nodes"];

/// Creates the version table and its triggers where they are missing.
pub fn install(conn: &Connection) -> rusqlite::Result<()> {
    let mut sql = String::from(
        "CREATE TABLE IF NOT EXISTS mls_group_versions (group_id BLOB PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;\n",
    );
    for table in GROUP_TABLES {
        for (op, row) in [("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")] {
            sql.push_str(&format!(
                "CREATE TRIGGER IF NOT EXISTS {table}_versioned_{op} AFTER {op} ON {table} BEGIN \
                 INSERT OR REPLACE INTO mls_group_versions (group_id, version) VALUES ({row}.group_id, random()); END;\n",
                op = op.to_lowercase()
            ));
        }
    }
    conn.execute_batch(&sql)
}

/// A group's version now, and the bytes of its stored state (what loading it decodes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupVersion {
    pub version: i64,
    pub stored_bytes: u64,
}

/// The version of a group and the size of its state; `None` when no state of it is stored or
/// nothing has versioned it yet (a group last written before the triggers existed).
pub fn read(conn: &Connection, group_id: &[u8]) -> rusqlite::Result<Option<GroupVersion>> {
    // The key as openmls' storage writes it.
    let key = StorageCodec::to_vec(&GroupId::from_slice(group_id)).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
    let row: Option<(Option<i64>, Option<i64>)> = conn
        .prepare_cached(
            "SELECT (SELECT version FROM mls_group_versions WHERE group_id = ?1), \
                    (SELECT SUM(LENGTH(group_data)) FROM openmls_group_data WHERE group_id = ?1)",
        )?
        .query_row([&key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match row {
        Some((Some(version), Some(bytes))) if bytes > 0 => Some(GroupVersion { version, stored_bytes: bytes as u64 }),
        _ => None,
    })
}
