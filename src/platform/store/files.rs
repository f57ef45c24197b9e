//! The file store: encrypted media as uploaded by devices. The platform holds ciphertext only
//! (the key travels inside end-to-end messages), in files under the data directory, and one
//! row per file in `platform.db`: its reference, size, uploader and time.
//!
//! Layout: `DIR/files/<first two hex digits>/<file_ref>` (0600, directories 0700). An upload is
//! written to `DIR/files/tmp/<random>.part` ([`StagedUpload`]) and only a complete one is
//! renamed into place and recorded ([`Store::commit_upload`]); a refused or broken upload is
//! deleted with its staging file, and staging files left by a crash are swept at start-up.
//! A crash between the rename and the row leaves a file nobody can name; it is never served
//! (downloads go through the row).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{params, OptionalExtension};

use super::{DeviceAddr, Store};
use crate::platform::error::{db_error, PlatformError, Result};

/// The schema step that adds the file table (appended to `STEPS`).
pub(super) const SCHEMA_FILES: &str = "
CREATE TABLE files (
    file_ref         TEXT PRIMARY KEY,            -- 64 hex: 32 random bytes
    size             INTEGER NOT NULL,            -- ciphertext bytes
    uploader_id      INTEGER NOT NULL,
    uploader_device  INTEGER NOT NULL,
    created_at       INTEGER NOT NULL
) WITHOUT ROWID;
";

/// The schema step that marks which files a message named (`Store::name_files`): files of
/// earlier releases count as named; a new upload is not until a message names it.
pub(super) const SCHEMA_FILES_NAMED: &str = "
ALTER TABLE files ADD COLUMN named INTEGER NOT NULL DEFAULT 1;
ALTER TABLE devices ADD COLUMN names_files INTEGER NOT NULL DEFAULT 0;
CREATE INDEX files_unnamed ON files (created_at) WHERE named = 0;
";

/// How long an upload may stay without a message naming it before it is swept: a sender
/// uploads, then seals and sends, within seconds; a day covers a sender that was offline
/// between the two (its outbox keeps the message).
pub const UNNAMED_FILE_GRACE_SECS: i64 = 24 * 3600;

/// At most this many expired uploads are swept after one upload, so an upload never waits long.
const SWEEP_AFTER_UPLOAD: usize = 16;

/// Directory of the file store inside the data directory. Every file opened here is under it,
/// named by us (a random staging name, or a checked 64-hex reference): no descriptor of the
/// database or its `-wal`/`-shm` is ever opened and closed outside SQLite (How To Corrupt, 2.2).
const FILES_DIR: &str = "files";
/// Staging directory of uploads in progress, inside `FILES_DIR`.
const STAGING_DIR: &str = "tmp";

/// Checks that `file_ref` has the shape the platform issues (64 lower-case hex characters), so
/// it can name a path safely.
pub fn check_file_ref(file_ref: &str) -> Result<()> {
    let ok = file_ref.len() == 64 && file_ref.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(PlatformError::InvalidArgument("file_ref must be 64 lower-case hex characters".into()))
    }
}

fn private_dir(path: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(path)
}

fn io_error(context: String) -> impl FnOnce(std::io::Error) -> PlatformError {
    move |e| {
        log::error!("platform file store: {context}: {e}");
        PlatformError::Internal(format!("storage error while {context}"))
    }
}

/// An upload being received: a private staging file, deleted on drop unless committed.
pub struct StagedUpload {
    path: PathBuf,
    file: File,
    len: u64,
    /// Bytes already handed to the disk's writeback (`start_writeback`).
    written_back: u64,
}

/// Staged bytes after which writeback to disk starts, so the sync of a committed upload has
/// little left to wait for.
const WRITEBACK_STEP: u64 = 4 << 20;

impl StagedUpload {
    /// Appends received ciphertext.
    pub fn write(&mut self, data: &[u8]) -> Result<()> {
        self.file.write_all(data).map_err(io_error("writing an upload".into()))?;
        self.len += data.len() as u64;
        if self.len - self.written_back >= WRITEBACK_STEP {
            self.start_writeback();
        }
        Ok(())
    }

    /// Starts writing the staged bytes to disk without waiting (Linux `sync_file_range`); the
    /// commit's `sync_all` still makes them durable. A hint: elsewhere, or on failure, nothing.
    fn start_writeback(&mut self) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::io::AsRawFd;
            let (from, len) = (self.written_back as libc::off64_t, (self.len - self.written_back) as libc::off64_t);
            // SAFETY: a plain system call on a descriptor this struct owns, no memory passed.
            let _ = unsafe { libc::sync_file_range(self.file.as_raw_fd(), from, len, libc::SYNC_FILE_RANGE_WRITE) };
        }
        self.written_back = self.len;
    }

    /// Bytes received so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for StagedUpload {
    fn drop(&mut self) {
        // After a commit the path names nothing any more; otherwise this is the refused or
        // broken upload, of which nothing must stay.
        let _ = fs::remove_file(&self.path);
    }
}

impl Store {
    /// `DIR/files`.
    pub fn files_dir(&self) -> PathBuf {
        self.path.parent().unwrap_or_else(|| Path::new(".")).join(FILES_DIR)
    }

    fn stored_file_path(&self, file_ref: &str) -> PathBuf {
        self.files_dir().join(&file_ref[..2]).join(file_ref)
    }

    /// Starts receiving an upload into a new private staging file.
    pub fn begin_upload(&self) -> Result<StagedUpload> {
        let staging = self.files_dir().join(STAGING_DIR);
        private_dir(&staging).map_err(io_error(format!("creating {}", staging.display())))?;
        let path = staging.join(format!("{}.part", crate::crypto::hex_encode(&crate::crypto::random_bytes::<16>())));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_error(format!("creating {}", path.display())))?;
        Ok(StagedUpload { path, file, len: 0, written_back: 0 })
    }

    /// Makes a complete upload durable under a new random reference and records it; returns
    /// the reference and the size.
    pub fn commit_upload(&self, staged: StagedUpload, uploader: DeviceAddr, now: i64) -> Result<(String, u64)> {
        staged.file.sync_all().map_err(io_error("syncing an upload".into()))?;
        let file_ref = crate::crypto::hex_encode(&crate::crypto::random_bytes::<32>());
        let target = self.stored_file_path(&file_ref);
        let dir = target.parent().expect("a stored file has a directory");
        private_dir(dir).map_err(io_error(format!("creating {}", dir.display())))?;
        fs::rename(&staged.path, &target).map_err(io_error(format!("storing {}", target.display())))?;
        let size = staged.len;
        let recorded = self.write_tx("recording a file", |tx| {
            tx.execute(
                "INSERT INTO files (file_ref, size, uploader_id, uploader_device, created_at, named) VALUES (?1, ?2, ?3, ?4, ?5, 0)",
                params![file_ref, size, uploader.user_id, uploader.device_id, now],
            )
            .map_err(db_error("inserting a file row"))?;
            Ok(())
        });
        if let Err(e) = recorded {
            let _ = fs::remove_file(&target);
            return Err(e);
        }
        let swept = self.sweep_unnamed_files(now, SWEEP_AFTER_UPLOAD);
        if swept > 0 {
            log::info!("deleted {swept} uploads no message named within {UNNAMED_FILE_GRACE_SECS} s");
        }
        Ok((file_ref, size))
    }

    /// A sender says which files its messages carry (before it sends them: a crash in between
    /// keeps a file, never loses one). With `names_files` its device is marked as naming its
    /// files, which lets `sweep_unnamed_files` delete its uploads that no message named.
    /// References that are not files are ignored: the message is the recipients' to judge.
    pub fn name_files(&self, sender: DeviceAddr, names_files: bool, file_refs: &[String]) -> Result<()> {
        if !names_files && file_refs.is_empty() {
            return Ok(());
        }
        self.write_tx("naming files", |tx| {
            if names_files {
                tx.prepare_cached("UPDATE devices SET names_files = 1 WHERE account_id = ?1 AND device_id = ?2 AND names_files = 0")
                    .and_then(|mut s| s.execute(params![sender.user_id, sender.device_id]))
                    .map_err(db_error("marking a device that names its files"))?;
            }
            let mut stmt = tx.prepare_cached("UPDATE files SET named = 1 WHERE file_ref = ?1 AND named = 0").map_err(db_error("naming a file"))?;
            for file_ref in file_refs {
                stmt.execute(params![file_ref]).map_err(db_error("naming a file"))?;
            }
            Ok(())
        })
    }

    /// Deletes up to `limit` uploads older than [`UNNAMED_FILE_GRACE_SECS`] that no message
    /// named, of devices that name their files (an upload killed after its last byte, a send
    /// given up): their rows, then their files. Returns how many; errors are logged.
    pub fn sweep_unnamed_files(&self, now: i64, limit: usize) -> usize {
        let cutoff = now.saturating_sub(UNNAMED_FILE_GRACE_SECS);
        let swept = self.write_tx("sweeping unnamed uploads", |tx| {
            let refs: Vec<String> = tx
                .prepare_cached(
                    "SELECT f.file_ref FROM files f JOIN devices d ON d.account_id = f.uploader_id AND d.device_id = f.uploader_device
                     WHERE f.named = 0 AND f.created_at < ?1 AND d.names_files = 1 ORDER BY f.created_at LIMIT ?2",
                )
                .and_then(|mut s| s.query_map(params![cutoff, limit as i64], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>())
                .map_err(db_error("finding unnamed uploads"))?;
            let mut delete = tx.prepare_cached("DELETE FROM files WHERE file_ref = ?1").map_err(db_error("deleting an unnamed upload"))?;
            for r in &refs {
                delete.execute(params![r]).map_err(db_error("deleting an unnamed upload"))?;
            }
            Ok(refs)
        });
        match swept {
            Ok(refs) => {
                // After the commit: a file without its row is never served, a row without its
                // file would be.
                for r in &refs {
                    if let Err(e) = fs::remove_file(self.stored_file_path(r)) {
                        log::warn!("platform file store: deleting the unnamed upload {}: {e}", &r[..8]);
                    }
                }
                refs.len()
            }
            Err(e) => {
                log::warn!("platform file store: sweeping unnamed uploads: {e}");
                0
            }
        }
    }

    /// Opens a stored file for reading; returns it and its recorded size. NOT_FOUND for a
    /// reference that was never issued.
    pub fn open_file(&self, file_ref: &str) -> Result<(File, u64)> {
        check_file_ref(file_ref)?;
        let size: Option<u64> = self
            .lock()
            .query_row("SELECT size FROM files WHERE file_ref = ?1", [file_ref], |r| r.get(0))
            .optional()
            .map_err(db_error("looking a file up"))?;
        let size = size.ok_or_else(|| PlatformError::NotFound(format!("no file {file_ref}")))?;
        let path = self.stored_file_path(file_ref);
        let file = File::open(&path).map_err(io_error(format!("opening {}", path.display())))?;
        Ok((file, size))
    }

    /// Deletes staging files a crash left behind (at start-up, before serving); returns how many.
    pub fn sweep_staged_uploads(&self) -> usize {
        let staging = self.files_dir().join(STAGING_DIR);
        let Ok(entries) = fs::read_dir(&staging) else { return 0 };
        entries.flatten().filter(|e| fs::remove_file(e.path()).is_ok()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::store;
    use super::*;
    use std::io::Read;

    const UPLOADER: DeviceAddr = DeviceAddr { user_id: 7, device_id: 1 };

    fn files_in(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    out.extend(files_in(&p));
                } else {
                    out.push(p);
                }
            }
        }
        out
    }

    #[test]
    fn a_committed_upload_is_stored_privately_and_served() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, store) = store();
        let mut up = store.begin_upload().expect("begin");
        up.write(b"cipher").expect("write");
        up.write(b"text").expect("write");
        let (file_ref, size) = store.commit_upload(up, UPLOADER, 100).expect("commit");
        check_file_ref(&file_ref).expect("issued refs have the checked shape");
        assert_eq!(size, 10);
        let path = store.files_dir().join(&file_ref[..2]).join(&file_ref);
        assert_eq!(fs::metadata(&path).expect("stored").permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(path.parent().unwrap()).expect("dir").permissions().mode() & 0o777, 0o700);
        let (mut f, size) = store.open_file(&file_ref).expect("open");
        let mut back = Vec::new();
        f.read_to_end(&mut back).expect("read");
        assert_eq!((back.as_slice(), size), (&b"ciphertext"[..], 10));
        assert_eq!(files_in(&store.files_dir().join(STAGING_DIR)), Vec::<PathBuf>::new(), "nothing staged is left");
    }

    #[test]
    fn uploads_no_message_named_are_swept_after_a_day_only_for_devices_that_name_their_files() {
        let (_d, store) = store();
        let namer = super::super::tests::user(&store, "namer", 0);
        let older = super::super::tests::user(&store, "older_release", 0);
        let upload = |who: DeviceAddr, at: i64| {
            let mut up = store.begin_upload().expect("begin");
            up.write(b"ciphertext").expect("write");
            store.commit_upload(up, who, at).expect("commit").0
        };
        let t = 1_000_000;
        let sent = upload(namer, t);
        let killed = upload(namer, t); // its sender died after the last byte: no message names it
        let kept = upload(older, t); // a sender of an earlier release names nothing
        store.name_files(namer, true, std::slice::from_ref(&sent)).expect("named by the message");
        store.name_files(older, false, &[]).expect("nothing");

        assert_eq!(store.sweep_unnamed_files(t + UNNAMED_FILE_GRACE_SECS - 1, 100), 0, "within the grace period");
        assert_eq!(store.sweep_unnamed_files(t + UNNAMED_FILE_GRACE_SECS + 1, 100), 1);
        assert!(store.open_file(&killed).is_err(), "the unnamed upload is gone");
        assert!(!store.files_dir().join(&killed[..2]).join(&killed).exists(), "and its file");
        store.open_file(&sent).expect("the named one stays");
        store.open_file(&kept).expect("an older sender's upload stays");
        assert_eq!(store.sweep_unnamed_files(t + 10 * UNNAMED_FILE_GRACE_SECS, 100), 0, "nothing else to sweep");
    }

    #[test]
    fn a_dropped_upload_leaves_nothing() {
        let (_d, store) = store();
        let mut up = store.begin_upload().expect("begin");
        up.write(&[1; 1000]).expect("write");
        drop(up);
        assert!(files_in(&store.files_dir()).is_empty());
    }

    #[test]
    fn unknown_and_malformed_refs_are_refused() {
        let (_d, store) = store();
        let unknown = "ab".repeat(32);
        assert!(matches!(store.open_file(&unknown), Err(PlatformError::NotFound(_))));
        for bad in ["../../platform.db", "AB".repeat(32).as_str(), "abc", ""] {
            assert!(matches!(store.open_file(bad), Err(PlatformError::InvalidArgument(_))), "{bad:?}");
        }
    }

    #[test]
    fn staged_leftovers_are_swept() {
        let (_d, store) = store();
        let up = store.begin_upload().expect("begin");
        std::mem::forget(up); // as if the process had died mid-upload
        assert_eq!(store.sweep_staged_uploads(), 1);
        assert!(files_in(&store.files_dir()).is_empty());
    }
}
