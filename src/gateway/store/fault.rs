//! Which fault keeps a bot's state database from opening, told apart as far as SQLCipher
//! allows, each with its own fix. An encrypted database has no plain header: a wrong key and a
//! damaged first page look alike to SQLite ("file is not a database"). What the file is made
//! of tells the rest apart: a plain SQLite file, text, a size that is no whole number of pages,
//! or a file this user cannot read.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rusqlite::ErrorCode;

/// SQLCipher's page size (its default, which the gateway keeps): every database file, and
/// every copy of one, is a whole number of these.
const PAGE: u64 = 4096;

#[derive(Debug)]
pub enum Fault {
    /// This user cannot read the file: its owner and mode say why.
    Unreadable { path: PathBuf, error: io::Error, owner: Option<u32>, mode: Option<u32> },
    /// The file is no encrypted state database (`what` it is instead).
    NotADatabase { path: PathBuf, what: String },
    /// Shaped like an encrypted state database, but the key does not open it.
    WrongKey { path: PathBuf, size: u64 },
    /// SQLite, SQLCipher's page check or the integrity check found damage (`detail`).
    Corrupt { path: PathBuf, detail: String },
}

/// The fault behind `error`, met opening the database at `path`; `None` when it is none of
/// these (a lock held for too long, an I/O error of the disk), whose own message says.
///
/// Telling a file that is no database from one under another key reads its first page through
/// a descriptor of our own, and closing that descriptor would drop every POSIX lock this
/// process holds on the file ("How To Corrupt", 2.2). So it is read only when no connection of
/// this process ever opened the file ([`opened_by_sqlite`]); otherwise only its size speaks.
/// Errors met while a connection is open go through [`damage`], which reads nothing.
pub fn diagnose(path: &Path, error: &rusqlite::Error) -> Option<Fault> {
    let code = error.sqlite_error_code();
    let shown = path.to_path_buf();
    if !readable(path) {
        let meta = fs::metadata(path).ok();
        return Some(Fault::Unreadable {
            path: shown,
            error: io::Error::from(io::ErrorKind::PermissionDenied),
            owner: meta.as_ref().map(|m| m.uid()),
            mode: meta.map(|m| m.mode() & 0o7777),
        });
    }
    match code {
        Some(ErrorCode::DatabaseCorrupt) => {
            let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            let detail = match size % PAGE {
                0 => error.to_string(),
                _ => format!("{error}; {size} bytes, not a whole number of {PAGE}-byte pages: a copy cut short"),
            };
            Some(Fault::Corrupt { path: shown, detail })
        }
        Some(ErrorCode::NotADatabase) => Some(not_opened(path)),
        _ => None,
    }
}

/// The damage `error` reports, if it reports one (`SQLITE_CORRUPT`), without reading the file:
/// for errors met while a connection to it is open.
pub fn damage(path: &Path, error: &rusqlite::Error) -> Option<Fault> {
    (error.sqlite_error_code() == Some(ErrorCode::DatabaseCorrupt)).then(|| Fault::Corrupt { path: path.to_path_buf(), detail: error.to_string() })
}

/// Whether this user may read the file at `path` (`access(2)`: no descriptor is opened). A
/// missing file counts as readable: SQLite's error says it is missing.
fn readable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return true };
    // SAFETY: access(2) reads the NUL-terminated path and touches no memory of ours.
    let rc = unsafe { libc::access(c_path.as_ptr(), libc::R_OK) };
    rc == 0 || io::Error::last_os_error().kind() != io::ErrorKind::PermissionDenied
}

/// The database files this process has held a SQLite connection to, by device, inode and
/// birth time (a file renamed or written keeps them; a new file on a reused inode does not).
/// Such a file is never opened with a descriptor of our own, however long ago its connection
/// closed: one may still be open. A few numbers per bot.
static OPENED_BY_SQLITE: Mutex<BTreeSet<FileId>> = Mutex::new(BTreeSet::new());

type FileId = (u64, u64, Option<std::time::SystemTime>);

fn file_id(path: &Path) -> Option<FileId> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino(), m.created().ok()))
}

/// Notes that a SQLite connection of this process has the database file at `path` open
/// (`store::open_connection`, once the key opened it).
pub(super) fn opened_by_sqlite(path: &Path) {
    if let Some(id) = file_id(path) {
        OPENED_BY_SQLITE.lock().unwrap_or_else(PoisonError::into_inner).insert(id);
    }
}

/// The first page of the file at `path`, unless a connection of this process ever opened it
/// (then nothing: see [`diagnose`]).
fn head_if_never_opened(path: &Path) -> Vec<u8> {
    let mut head = Vec::with_capacity(PAGE as usize);
    let Some(id) = file_id(path) else { return head };
    if OPENED_BY_SQLITE.lock().unwrap_or_else(PoisonError::into_inner).contains(&id) {
        return head;
    }
    let _ = fs::File::open(path).and_then(|f| f.take(PAGE).read_to_end(&mut head));
    head
}

/// A file that SQLite, under this key, found to be no database: which of the three it is.
fn not_opened(path: &Path) -> Fault {
    let shown = path.to_path_buf();
    let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let head = head_if_never_opened(path);
    let not = |what: String| Fault::NotADatabase { path: shown.clone(), what };
    if head.starts_with(b"SQLite format 3\0") {
        return not("a plain, unencrypted SQLite database: the gateway's are all encrypted".into());
    }
    let printable = head.iter().filter(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()).count();
    if !head.is_empty() && printable * 10 >= head.len() * 9 {
        return not("text, not a database".into());
    }
    if size % PAGE != 0 {
        return not(format!("{size} bytes, not a whole number of {PAGE}-byte pages: another file, or a copy cut short"));
    }
    Fault::WrongKey { path: shown, size }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Unreadable { path, error, owner, mode } => {
                let p = path.display();
                // SAFETY: geteuid has no preconditions.
                let euid = unsafe { libc::geteuid() };
                write!(f, "state database {p} cannot be read by uid {euid} ({error}")?;
                if let (Some(owner), Some(mode)) = (owner, mode) {
                    write!(f, "; it belongs to uid {owner} with mode {mode:o}")?;
                }
                write!(f, "): give it to the user that runs the gateway: chown {euid} {p} && chmod 600 {p}")
            }
            Fault::NotADatabase { path, what } => write!(
                f,
                "{} is not a state database of the gateway ({what}). Put the bot's database back from a backup \
                 (bot-gateway restore CONFIG --from DIR), or, to start the bot anew, bot-gateway reset-state CONFIG @BOT",
                path.display()
            ),
            Fault::WrongKey { path, size } => write!(
                f,
                "state database {} ({size} bytes, encrypted) does not open under the key of this bot's \
                 identity_recovery_secret_hex: check that secret in the config; it must be the one this state was \
                 made with (after a /rekey, the old one goes in previous_identity_recovery_secret_hex). If the secret \
                 is right, the file is another bot's, or its first page is damaged: restore it from a backup \
                 (bot-gateway restore CONFIG --from DIR)",
                path.display()
            ),
            Fault::Corrupt { path, detail } => write!(
                f,
                "state database {} is damaged ({detail}). Stop the gateway and restore the bot's database from a \
                 backup (bot-gateway restore CONFIG --from DIR); bot-gateway check-state CONFIG checks every bot's",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Fault {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::store::Store;

    fn refused(path: &Path, secret: [u8; 32]) -> String {
        match Store::open(path, &secret, &"ab".repeat(32), "t") {
            Ok(_) => panic!("{} opened", path.display()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn each_fault_gets_its_own_sentence_and_fix() {
        crate::crypto::init();
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("bot.db");
        drop(Store::open(&db, &[1u8; 32], &"ab".repeat(32), "t").expect("open"));

        let wrong = refused(&db, [2u8; 32]);
        assert!(wrong.contains("does not open under the key") && wrong.contains("identity_recovery_secret_hex"), "{wrong}");

        let text = dir.path().join("notes.db");
        fs::write(&text, "these are my notes, not a database\n".repeat(200)).expect("write");
        let e = refused(&text, [1u8; 32]);
        assert!(e.contains("is not a state database") && e.contains("text"), "{e}");

        let cut = dir.path().join("cut.db");
        fs::write(&cut, &fs::read(&db).expect("read")[..5000]).expect("write");
        let e = refused(&cut, [1u8; 32]);
        assert!(e.contains("is damaged") && e.contains("not a whole number of 4096-byte pages: a copy cut short"), "{e}");

        let plain = dir.path().join("plain.db");
        rusqlite::Connection::open(&plain).and_then(|c| c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")).expect("plain");
        let e = refused(&plain, [1u8; 32]);
        assert!(e.contains("plain, unencrypted SQLite database"), "{e}");

        // Damage in the middle of the file: the page check of SQLCipher finds it.
        let damaged = dir.path().join("damaged.db");
        fs::copy(&db, &damaged).expect("copy");
        let mut bytes = fs::read(&damaged).expect("read");
        assert!(bytes.len() > 3 * PAGE as usize, "a database of several pages");
        for b in &mut bytes[2 * PAGE as usize + 100..2 * PAGE as usize + 300] {
            *b ^= 0x5a;
        }
        fs::write(&damaged, &bytes).expect("write");
        let found = crate::gateway::store::backup::check(&damaged, &[1u8; 32]).err().expect("damage found").to_string();
        assert!(found.contains("is damaged") && found.contains("restore"), "{found}");
    }

    /// "How To Corrupt", 2.2: a file a connection of this process opened is never read through
    /// a descriptor of our own (closing it would drop SQLite's locks); only its size speaks.
    #[test]
    fn a_file_sqlite_opened_here_is_not_read_by_the_diagnosis() {
        crate::crypto::init();
        let dir = tempfile::tempdir().expect("tempdir");
        let text = dir.path().join("notes.db");
        fs::write(&text, "these are my notes, not a database\n".repeat(200)).expect("write");
        assert!(!head_if_never_opened(&text).is_empty(), "never opened by SQLite: read");
        opened_by_sqlite(&text);
        assert!(head_if_never_opened(&text).is_empty(), "opened by SQLite: not read");
        let e = refused(&text, [1u8; 32]);
        assert!(e.contains("is not a state database") && e.contains("not a whole number of 4096-byte pages") && !e.contains("text"), "{e}");
    }

    #[test]
    fn a_file_this_user_cannot_read_names_its_owner_mode_and_the_fix() {
        let error = io::Error::from(io::ErrorKind::PermissionDenied);
        let fault = Fault::Unreadable { path: PathBuf::from("/s/bot-1.db"), error, owner: Some(0), mode: Some(0o400) };
        let said = fault.to_string();
        assert!(said.contains("belongs to uid 0 with mode 400") && said.contains("chown") && said.contains("chmod 600 /s/bot-1.db"), "{said}");
    }
}
