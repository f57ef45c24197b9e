//! Copies of a bot's database: made while the gateway runs, with SQLite's online backup API
//! (`copy_online`), still encrypted under the bot's key; checked before they are trusted
//! (`check`: it opens, SQLCipher's page check and SQLite's integrity check pass); and made
//! ready to be the bot's state again (`prepare_restored`). The commands over a config are in
//! `gateway::state_commands`.

use std::path::{Path, PathBuf};

use rusqlite::backup::Backup;
use rusqlite::OpenFlags;
use zeroize::Zeroizing;

use super::fault::{self, Fault};
use super::{configure_and_migrate, database_key, open_connection, schema, StoreError, StoreOpenError};

/// The meta row a restored state carries until its first start has replaced the one-time
/// prekeys the platform stocks (`inbox::replenish_prekeys`): the unix time of the backup.
pub const RESTORED_FROM_BACKUP: &str = "restored_from_backup";

/// What a database that passed `check` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub bytes: u64,
    /// The bot it belongs to (`None`: never recorded, a state that never started).
    pub bot_id_hex: Option<String>,
    /// The platform device it is (`None`: it never registered).
    pub device_id: Option<u32>,
}

/// Why a copy or a check failed: the fault found, or what else went wrong.
#[derive(Debug)]
pub enum CopyError {
    Fault(Fault),
    Other(String),
}

impl std::fmt::Display for CopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CopyError::Fault(fault) => write!(f, "{fault}"),
            CopyError::Other(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for CopyError {}

/// An error met while a connection to `path` is open: damage, or what it says
/// (`fault::damage` reads nothing of the file).
fn failed<'a>(path: &'a Path, what: &str) -> impl Fn(rusqlite::Error) -> CopyError + 'a {
    let what = what.to_string();
    move |e| match fault::damage(path, &e) {
        Some(fault) => CopyError::Fault(fault),
        None => CopyError::Other(format!("{} {what}: {e}", path.display())),
    }
}

/// A failed open (its connection is gone): the fault it is (`fault::diagnose`).
fn open_failed(path: &Path, what: &str, e: StoreError) -> CopyError {
    match e {
        StoreError::Db(e) => match fault::diagnose(path, &e) {
            Some(fault) => CopyError::Fault(fault),
            None => CopyError::Other(format!("{} {what}: {e}", path.display())),
        },
        other => CopyError::Other(format!("{} {what}: {other}", path.display())),
    }
}

/// Opens the database at `path` read-only under the key of `recovery_secret` and checks it
/// whole: every page's authentication (`cipher_integrity_check`) and SQLite's structure
/// (`integrity_check`). Nothing is written. Safe while the gateway runs.
pub fn check(path: &Path, recovery_secret: &[u8; 32]) -> Result<Checked, CopyError> {
    let key = Zeroizing::new(database_key(recovery_secret));
    let bytes = std::fs::metadata(path).map_err(|e| CopyError::Other(format!("{}: {e}", path.display())))?.len();
    let conn = open_connection(path, &key, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| open_failed(path, "does not open", e))?;
    let damaged = |detail: String| CopyError::Fault(Fault::Corrupt { path: path.to_path_buf(), detail });
    let pages: Vec<String> = (|| {
        let mut stmt = conn.prepare("PRAGMA cipher_integrity_check")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
    })()
    .map_err(failed(path, "page check"))?;
    if !pages.is_empty() {
        return Err(damaged(format!("pages that fail their authentication: {}", pages.join("; "))));
    }
    let found: Vec<String> = (|| {
        let mut stmt = conn.prepare("PRAGMA integrity_check(20)")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
    })()
    .map_err(failed(path, "integrity check"))?;
    if found != ["ok"] {
        return Err(damaged(format!("the integrity check found: {}", found.join("; "))));
    }
    let has = |table: &str| -> rusqlite::Result<bool> {
        conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [table], |r| r.get::<_, i64>(0)).map(|n| n > 0)
    };
    let bot_id_hex = if has("meta").map_err(failed(path, "reading"))? { schema::meta_get(&conn, "bot_id_hex").map_err(failed(path, "reading"))? } else { None };
    let device_id = if has("e2e_registration").map_err(failed(path, "reading"))? {
        conn.query_row("SELECT device_id FROM e2e_registration WHERE id = 1", [], |r| r.get::<_, u32>(0))
            .map(Some)
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })
            .map_err(failed(path, "reading"))?
    } else {
        None
    };
    Ok(Checked { bytes, bot_id_hex, device_id })
}

/// Copies the database at `source` to `dest` while the gateway may be writing it, with SQLite's
/// online backup API: all pages in one step, so one read transaction sees one consistent state.
/// The copy stays under the same key; it is built at `<dest>.part`, checked, synced and renamed,
/// so `dest` is whole or absent.
pub fn copy_online(source: &Path, recovery_secret: &[u8; 32], dest: &Path) -> Result<Checked, CopyError> {
    let key = Zeroizing::new(database_key(recovery_secret));
    let part = PathBuf::from(format!("{}.part", dest.display()));
    let io = |what: &str, e: std::io::Error| CopyError::Other(format!("{what} {}: {e}", part.display()));
    for leftover in super::with_sidecars(&part) {
        match std::fs::remove_file(&leftover) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io("removing a leftover", e)),
            _ => {}
        }
    }
    {
        let from = open_connection(source, &key, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| open_failed(source, "does not open", e))?;
        let mut to = open_connection(&part, &key, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE)
            .map_err(|e| open_failed(&part, "cannot be made", e))?;
        // Its commit syncs the copy to disk.
        to.pragma_update(None, "synchronous", "FULL").map_err(failed(&part, "cannot be made"))?;
        let backup = Backup::new(&from, &mut to).map_err(failed(&part, "backup"))?;
        // Busy or locked: the writer holds the file for a moment; bounded retries.
        let mut tries = 0;
        loop {
            match backup.step(-1).map_err(failed(source, "backup"))? {
                rusqlite::backup::StepResult::Done => break,
                _ if tries < 200 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                _ => return Err(CopyError::Other(format!("{} stayed locked for 10 s; try again", source.display()))),
            }
        }
    }
    // The backup's commit synced the copy (synchronous = FULL): no descriptor of a database
    // file is opened outside SQLite ("How To Corrupt", 2.2).
    let checked = check(&part, recovery_secret)?;
    std::fs::rename(&part, dest).map_err(|e| io("renaming", e))?;
    if let Some(dir) = dest.parent() {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("syncing the directory of", e))?;
    }
    Ok(checked)
}

/// Makes the copy at `path` (a checked backup, not in use) ready to be the bot's state again:
/// brought to this release's schema, its sessions only receive (`e2e` never sends again on
/// keys it may have used after the backup), its groups are rejoined at the next start (their
/// epochs moved on), and it carries [`RESTORED_FROM_BACKUP`] = `made_at` until that start has
/// replaced its one-time prekeys on the platform. Checkpointed: the file alone holds it.
pub fn prepare_restored(path: &Path, recovery_secret: &[u8; 32], made_at: i64) -> Result<usize, StoreOpenError> {
    let key = Zeroizing::new(database_key(recovery_secret));
    let mut conn = open_connection(path, &key, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|error| super::open_failed(path, error))?;
    configure_and_migrate(&mut conn, path, path)?;
    let configure = |error| StoreOpenError::Configure { path: path.to_path_buf(), error };
    let tx = conn.transaction().map_err(configure)?;
    let sessions = crate::e2e::sessions_receive_only_after_restore(&tx)
        .map_err(|e| StoreOpenError::Open { path: path.to_path_buf(), error: StoreError::E2e(e) })?;
    super::groups::join_again_as_new_device(&tx).map_err(|error| StoreOpenError::Open { path: path.to_path_buf(), error })?;
    schema::meta_set(&tx, RESTORED_FROM_BACKUP, &made_at.to_string()).map_err(StoreOpenError::Owner)?;
    tx.commit().map_err(configure)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(configure)?;
    Ok(sessions)
}
