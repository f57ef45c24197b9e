//! No copies of deleted secrets in the write-ahead log (forward secrecy at rest). With
//! `secure_delete` SQLite zeroes the pages it frees in the database file, but a WAL keeps the
//! old page images of every change until it is checkpointed and overwritten. So the databases
//! that hold device secrets (a bot's store, an `e2e-chat` profile):
//! - cut the log back to nothing at each checkpoint (`JOURNAL_SIZE_LIMIT`);
//! - checkpoint right after a transaction in which this thread deleted secrets
//!   (`secrets_deleted`, then `checkpoint_if_secrets_deleted` after the commit): past MLS
//!   epochs, expired skipped message keys, a used one-time prekey, a forgotten device, a bot
//!   secret once a config holds it;
//! - checkpoint every `AUTOCHECKPOINT_PAGES` pages otherwise (`WAL_AUTOCHECKPOINT`). Every
//!   message sent or received rewrites a session, and its old image holds chain keys that
//!   were just replaced: a checkpoint after each would double the cost of every message, so
//!   those images stay in the log for at most that many pages of writes (a few hundred
//!   messages), instead of SQLite's default of 1000 pages.

use std::cell::Cell;

use rusqlite::Connection;

/// Set on the connection of a database holding secrets, with WAL and `secure_delete`.
pub const JOURNAL_SIZE_LIMIT: &str = "PRAGMA journal_size_limit = 0;";

/// Pages written between automatic checkpoints (module doc): 256 KiB of 4 KiB pages.
pub const AUTOCHECKPOINT_PAGES: u32 = 64;
/// Set with `JOURNAL_SIZE_LIMIT`.
pub const WAL_AUTOCHECKPOINT: &str = "PRAGMA wal_autocheckpoint = 64;";
const _: () = assert!(AUTOCHECKPOINT_PAGES == 64, "WAL_AUTOCHECKPOINT says 64");

thread_local! {
    /// This thread deleted secrets in the transaction it is running.
    static DELETED: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread's transaction as one that deleted secrets. (A transaction that then
/// rolls back costs a needless checkpoint, nothing more.)
pub fn secrets_deleted() {
    DELETED.with(|d| d.set(true));
}

/// Takes this thread's mark (tests: which steps ask for the checkpoint).
#[cfg(test)]
pub(crate) fn take_mark() -> bool {
    DELETED.with(|d| d.replace(false))
}

/// After a commit: when this thread's transaction deleted secrets, copies the log into the
/// database file and truncates it. A reader in the middle of a read may keep part of the log
/// for now; the next checkpoint takes the rest.
pub fn checkpoint_if_secrets_deleted(conn: &Connection) {
    if DELETED.with(|d| d.replace(false)) {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            log::warn!("checkpointing the database after deleting secrets failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_that_deleted_secrets_leaves_an_empty_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s.db");
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA secure_delete = ON;").expect("wal");
        conn.execute_batch(JOURNAL_SIZE_LIMIT).expect("limit");
        conn.execute_batch("CREATE TABLE s (v BLOB); INSERT INTO s VALUES (randomblob(50000));").expect("secret");
        let wal = || std::fs::metadata(path.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);
        conn.execute_batch("DELETE FROM s").expect("delete");
        checkpoint_if_secrets_deleted(&conn);
        assert!(wal() > 0, "no checkpoint unless asked");
        secrets_deleted();
        checkpoint_if_secrets_deleted(&conn);
        assert_eq!(wal(), 0, "the log with the old page images is truncated");
    }
}
