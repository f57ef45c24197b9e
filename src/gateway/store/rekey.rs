//! A bot's database moved from the key of its old recovery secret to the key of its new one,
//! when its owner gave the bot a new identity (`/rekey`, `previous_identity_recovery_secret_hex`
//! in the config). Everything is kept: the queue, history, files, chats and groups.
//!
//! The database is copied whole into a new file under the new key (`sqlcipher_export`), which
//! then replaces the old one by a rename, so a crash leaves either the old file, whole and
//! under the old key (the next start moves it again), or the new one. The new copy records the
//! new Bot ID; `registration` then sees that the device in it belongs to the old identity.

use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use zeroize::Zeroizing;

use super::{database_key, key_literal, open_connection, Result, StoreError, StoreOpenError};

/// What `move_to_new_secret` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// No database yet, or it opens under the new secret already (moved before).
    Nothing,
    /// The database was under the previous secret and is now under the new one.
    Moved,
}

/// Moves the database at `path` from the key of `previous` to the key of `current` (module
/// doc), recording `bot_id_hex` as its bot.
pub fn move_to_new_secret(path: &Path, previous: &[u8; 32], current: &[u8; 32], bot_id_hex: &str) -> std::result::Result<Moved, StoreOpenError> {
    let copy = copy_path(path);
    // A copy a crash left behind is incomplete or unused: the database itself is the truth.
    remove_with_journals(&copy);
    if !path.exists() {
        return Ok(Moved::Nothing);
    }
    let current_key = Zeroizing::new(database_key(current));
    if open_connection(path, &current_key, OpenFlags::SQLITE_OPEN_READ_WRITE).is_ok() {
        return Ok(Moved::Nothing);
    }
    let previous_key = Zeroizing::new(database_key(previous));
    let failed = |error: StoreError| StoreOpenError::Rekey { path: path.to_path_buf(), error };
    // CREATE: the attached copy inherits the flags, and is a new file.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
    // Neither key opens it: the fault says which it is.
    let old = open_connection(path, &previous_key, flags).map_err(|error| super::open_failed(path, error))?;
    export(&old, &copy, &current_key, bot_id_hex).map_err(failed)?;
    // Closing the last connection checkpoints and deletes the old log.
    drop(old);
    replace(path, &copy).map_err(|e| failed(StoreError::Corrupt(format!("replacing the database by its copy: {e}"))))?;
    log::info!("state database {} re-encrypted under the bot's new identity", path.display());
    Ok(Moved::Moved)
}

/// Where the re-encrypted copy is made, beside the database.
fn copy_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".rekey");
    path.with_file_name(name)
}

/// Copies everything into `copy` under `key`, with the schema version and the new Bot ID.
fn export(old: &Connection, copy: &Path, key: &[u8; 32], bot_id_hex: &str) -> Result<()> {
    old.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let copy_name = copy.to_str().ok_or_else(|| StoreError::Corrupt(format!("{} is not UTF-8", copy.display())))?;
    old.execute("ATTACH DATABASE ?1 AS moved KEY ?2", rusqlite::params![copy_name, key_literal(key).as_str()])?;
    let exported = (|| -> Result<()> {
        // SQLite makes the copy durable itself: every write to it is synced before it commits.
        // (Opening the file to sync it here would close a descriptor of a database file behind
        // SQLite's back, which drops its POSIX locks: sqlite.org/howtocorrupt.html, 2.2.)
        old.execute_batch("PRAGMA moved.synchronous = FULL;")?;
        old.query_row("SELECT sqlcipher_export('moved')", [], |_| Ok(()))?;
        let version: i64 = old.query_row("PRAGMA main.user_version", [], |r| r.get(0))?;
        old.execute_batch(&format!("PRAGMA moved.user_version = {version};"))?;
        old.execute("UPDATE moved.meta SET value = ?1 WHERE key = 'bot_id_hex'", [bot_id_hex])?;
        Ok(())
    })();
    old.execute_batch("DETACH DATABASE moved;")?;
    exported?;
    // By path (chmod): no descriptor of the database file is opened outside SQLite.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(copy, fs::Permissions::from_mode(0o600))
        .map_err(|e| StoreError::Corrupt(format!("restricting {}: {e}", copy.display())))?;
    Ok(())
}

/// Puts `copy` in the place of `path`: the old log and shared memory go first (they belong to
/// the old file), then the rename, then the directory is synced. No connection to either file
/// is open here (the caller dropped its own), so unlinking and renaming cannot pull a file
/// from under SQLite.
fn replace(path: &Path, copy: &Path) -> std::io::Result<()> {
    for journal in journals(path) {
        match fs::remove_file(&journal) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    fs::rename(copy, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn journals(path: &Path) -> [PathBuf; 2] {
    let with = |suffix: &str| {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        path.with_file_name(name)
    };
    [with("-wal"), with("-shm")]
}

fn remove_with_journals(path: &Path) {
    for file in std::iter::once(path.to_path_buf()).chain(journals(path)) {
        let _ = fs::remove_file(file);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Store;
    use super::*;

    #[test]
    fn a_moved_database_keeps_everything_and_opens_only_under_the_new_secret() {
        crate::crypto::init();
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bot.db");
        let (old_secret, new_secret) = ([1u8; 32], [2u8; 32]);
        let old_id = crate::crypto::hex_encode(&crate::crypto::IdentityKeyPair::from_recovery_secret(&old_secret).public_key());
        let new_id = crate::crypto::hex_encode(&crate::crypto::IdentityKeyPair::from_recovery_secret(&new_secret).public_key());
        {
            let store = Store::open(&path, &old_secret, &old_id, "wr-test").expect("open");
            store.write(|c| Ok(super::super::meta_set(c, "kept", "yes")?)).expect("write");
            drop(store);
        }
        assert_eq!(move_to_new_secret(&path, &old_secret, &new_secret, &new_id).expect("moved"), Moved::Moved);
        assert!(!copy_path(&path).exists(), "the copy took the database's place");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).expect("file").permissions().mode() & 0o777, 0o600);
        // The old secret opens nothing any more; the new one opens everything.
        assert!(Store::open(&path, &old_secret, &old_id, "wr-test").is_err());
        let store = Store::open(&path, &new_secret, &new_id, "wr-test").expect("opens under the new secret");
        let kept = store.read(|c| Ok(super::super::meta_get(c, "kept")?)).expect("read");
        assert_eq!(kept.as_deref(), Some("yes"));
        drop(store);
        // Moving again is nothing: the database is under the new secret already.
        assert_eq!(move_to_new_secret(&path, &old_secret, &new_secret, &new_id).expect("again"), Moved::Nothing);
        // A leftover copy from a crash is removed, the database untouched.
        fs::write(copy_path(&path), b"half a copy").expect("leftover");
        assert_eq!(move_to_new_secret(&path, &old_secret, &new_secret, &new_id).expect("again"), Moved::Nothing);
        assert!(!copy_path(&path).exists());
        // A secret that is neither: refused, nothing changed.
        assert!(move_to_new_secret(&path, &[3; 32], &[4; 32], &new_id).is_err());
        assert!(Store::open(&path, &new_secret, &new_id, "wr-test").is_ok());
    }
}
