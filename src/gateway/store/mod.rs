//! One bot's durable state: an SQLCipher database in `state_dir`, written only by the store
//! writer thread and read through a small pool of read-only connections.
//!
//! The database key is derived from the bot's identity recovery secret, so decrypted updates,
//! keys and sessions never lie on disk in clear, and a `state_dir` of another bot cannot be
//! opened at all.

pub mod backup;
pub mod fault;
mod open_error;
pub mod rekey;
mod schema;
mod writer;

pub mod chats;
pub mod files;
pub mod groups;
pub mod inline;
pub mod outbox;
pub mod polls;
pub mod queue;
pub mod webhook;

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use rusqlite::{Connection, OpenFlags};
use zeroize::Zeroizing;

pub use open_error::StoreOpenError;
pub use writer::Writer;

use crate::crypto;

#[derive(Debug)]
pub enum StoreError {
    Db(rusqlite::Error),
    E2e(crate::e2e::E2eError),
    /// The writer thread is gone (shutting down).
    Closed,
    /// Stored data does not read back, or a value cannot be encoded for storing; says what.
    Corrupt(String),
    /// The transaction that held the job could not commit (full disk, I/O error): nothing of
    /// it is stored, and the caller must not act as if it were.
    CommitFailed(String),
    /// A polling write (acknowledgement, filter change) refused because a webhook is set.
    WebhookActive,
    /// An incoming event that breaks a rule (a forged button press): it is dropped, says why.
    Refused(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Db(e) => write!(f, "state database: {e}"),
            StoreError::E2e(e) => write!(f, "{e}"),
            StoreError::Closed => write!(f, "state store is shutting down"),
            StoreError::Corrupt(m) => write!(f, "corrupt state: {m}"),
            StoreError::CommitFailed(m) => write!(f, "state database commit failed: {m}"),
            StoreError::WebhookActive => write!(f, "a webhook is set"),
            StoreError::Refused(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Db(e)
    }
}

impl From<crate::e2e::E2eError> for StoreError {
    fn from(e: crate::e2e::E2eError) -> Self {
        StoreError::E2e(e)
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Wakes long polls after commits (condition variable) and the webhook thread (a subscribed
/// channel, and a hook that starts the thread when it does not run), and arbitrates the
/// single waiting `getUpdates` per bot.
#[derive(Default)]
pub struct Notifier {
    state: Mutex<NotifyState>,
    cv: Condvar,
    /// Commit signals for threads that wait on a channel (so they can also select on others).
    subscribers: Mutex<Vec<Sender<()>>>,
    /// Called after every commit, once the signals are out: starts an on-demand thread that
    /// reads what was committed (`wh/<n>` in webhook mode).
    on_commit: OnceLock<CommitHook>,
}

/// What [`Notifier::on_commit`] installs. It runs on the committing thread (the writer): it
/// must be quick and must not write.
pub type CommitHook = Box<dyn Fn() + Send + Sync>;

#[derive(Default, Clone, Copy)]
struct NotifyState {
    commits: u64,
    poll_generation: u64,
    /// Set at shutdown: waiting polls return what they have at once.
    stopping: bool,
}

impl Notifier {
    pub fn committed(&self) {
        let mut s = self.state.lock().expect("notifier lock");
        s.commits += 1;
        self.cv.notify_all();
        drop(s);
        for tx in self.subscribers.lock().expect("notifier subscribers lock").iter() {
            // Capacity 1: one pending signal already means "look again"; never blocks.
            let _ = tx.try_send(());
        }
        if let Some(hook) = self.on_commit.get() {
            hook();
        }
    }

    /// From now on `hook` runs after every commit (installed once; a second call is ignored).
    pub fn on_commit(&self, hook: CommitHook) {
        let _ = self.on_commit.set(hook);
    }

    /// A channel that receives a signal after commits. Signals coalesce: after draining it,
    /// read the state, then wait on it; a commit in between leaves a signal, so none is missed.
    pub fn subscribe(&self) -> Receiver<()> {
        let (tx, rx) = bounded(1);
        self.subscribers.lock().expect("notifier subscribers lock").push(tx);
        rx
    }

    /// Starts a poll: any older waiting poll is told to give up. Returns this poll's ticket.
    pub fn begin_poll(&self) -> u64 {
        let mut s = self.state.lock().expect("notifier lock");
        s.poll_generation += 1;
        self.cv.notify_all();
        s.poll_generation
    }

    /// Ends every wait at once (graceful shutdown must not wait out a 50 s long poll).
    pub fn stop(&self) {
        let mut s = self.state.lock().expect("notifier lock");
        s.stopping = true;
        self.cv.notify_all();
    }

    pub fn is_stopping(&self) -> bool {
        self.state.lock().expect("notifier lock").stopping
    }

    pub fn commits(&self) -> u64 {
        self.state.lock().expect("notifier lock").commits
    }

    /// Waits until a commit after `seen_commits`, until `deadline`, or until a newer poll
    /// replaced `ticket`. Returns false when the poll was replaced.
    pub fn wait(&self, ticket: u64, seen_commits: u64, deadline: Instant) -> bool {
        let mut s = self.state.lock().expect("notifier lock");
        loop {
            if s.poll_generation != ticket {
                return false;
            }
            if s.commits != seen_commits || s.stopping {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            s = self.cv.wait_timeout(s, deadline - now).expect("notifier lock").0;
        }
    }

    /// True while `ticket` is the newest poll.
    pub fn is_current(&self, ticket: u64) -> bool {
        self.state.lock().expect("notifier lock").poll_generation == ticket
    }
}

/// A handle on one bot's database: the writer, readers and the notifier. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    path: PathBuf,
    /// True when this open created the database file.
    created: bool,
    key: Zeroizing<[u8; 32]>,
    writer: Writer,
    /// Read-only connections not in use; emptied when the store goes idle.
    readers: Arc<Mutex<Vec<Connection>>>,
    notifier: Arc<Notifier>,
    /// The database as its connections name it, for the groups kept loaded (`e2e::kept`).
    kept_as: Option<String>,
}

impl Drop for StoreInner {
    /// A bot stopped or removed leaves nothing of its groups in memory (the budget of kept
    /// groups is shared by every bot).
    fn drop(&mut self) {
        if let Some(db) = &self.kept_as {
            crate::e2e::kept::release(db);
        }
    }
}

/// The SQLCipher key of a bot's database.
pub fn database_key(recovery_secret: &[u8; 32]) -> [u8; 32] {
    crypto::kdf::derive_key(recovery_secret, "bot-gateway/state-db-key/v1")
}

/// SQLCipher's form of a raw key, `x'<64 hex>'`: no passphrase derivation, the key already is
/// 256 random-looking bits. Wiped when dropped, like every copy of the key.
fn key_literal(key: &[u8; 32]) -> Zeroizing<String> {
    let hex = Zeroizing::new(crypto::hex_encode(key));
    let mut literal = Zeroizing::new(String::with_capacity(67));
    literal.push_str("x'");
    literal.push_str(&hex);
    literal.push('\'');
    literal
}

fn open_connection(path: &Path, key: &[u8; 32], flags: OpenFlags) -> Result<Connection> {
    let conn = Connection::open_with_flags(path, flags)?;
    conn.set_prepared_statement_cache_capacity(crate::e2e::STATEMENT_CACHE);
    conn.pragma_update(None, "key", key_literal(key).as_str())?;
    conn.busy_timeout(Duration::from_secs(30))?;
    // Reading the schema is the first access that needs the key: a wrong key fails here.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))?;
    fault::opened_by_sqlite(path);
    Ok(conn)
}

/// What an idle store lets go of, once its writer has closed its connection (the next write
/// opens it again): the pooled readers (closed; the next read opens one). The pages they
/// freed go back to the kernel when the writer's thread ends (`crate::demand`).
/// A thousand idle bots would otherwise keep about half a MiB each of connections, schemas and
/// pages read at start-up (docs/decisions.md, "Many bots in one gateway"). A busy store keeps
/// everything: it is only idle after `IDLE_TRIM` without a write.
fn release_idle(readers: &Mutex<Vec<Connection>>) {
    let closed = std::mem::take(&mut *readers.lock().expect("reader pool lock"));
    drop(closed);
}

/// The writable connection, as `Store::open` set it up (after migrations, which need not run
/// again): for a writer that closed it when idle.
fn open_writable(path: &Path, key: &[u8; 32]) -> Result<Connection> {
    let conn = open_connection(path, key, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    schema::configure(&conn)?;
    Ok(conn)
}

/// The error of a database that did not open: the fault it is when `fault` can tell
/// (a wrong secret, damage, not a database, unreadable), else the error as it came.
fn open_failed(path: &Path, error: StoreError) -> StoreOpenError {
    match &error {
        StoreError::Db(e) => match fault::diagnose(path, e) {
            Some(fault) => StoreOpenError::Fault(fault),
            None => StoreOpenError::Open { path: path.to_path_buf(), error },
        },
        _ => StoreOpenError::Open { path: path.to_path_buf(), error },
    }
}

/// The sidecar files SQLite keeps beside a database in WAL mode, and the database itself.
fn with_sidecars(path: &Path) -> [PathBuf; 3] {
    ["", "-wal", "-shm"].map(|suffix| PathBuf::from(format!("{}{suffix}", path.display())))
}

/// Builds a new bot's database whole beside its place and renames it in
/// (`migrations::build_whole`): every migration, ours and openmls', and the bot it belongs to.
/// `on_commit` sees the number of each commit as it is made (tests crash there).
fn build_new(path: &Path, key: &[u8; 32], bot_id_hex: &str, mut on_commit: impl FnMut(u32) + Send + 'static) -> std::result::Result<(), StoreOpenError> {
    let built = crate::migrations::build_whole(path, |new| {
        let mut conn = open_connection(new, key, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE)
            .map_err(|error| StoreOpenError::Open { path: new.to_path_buf(), error })?;
        let mut commits = 0;
        conn.commit_hook(Some(move || {
            commits += 1;
            on_commit(commits);
            false
        }));
        configure_and_migrate(&mut conn, new, path)?;
        schema::meta_set(&conn, "bot_id_hex", bot_id_hex).map_err(StoreOpenError::Owner)?;
        conn.commit_hook(None::<fn() -> bool>);
        Ok(conn)
    });
    built.map_err(|e| match e {
        crate::migrations::BuildError::Build(e) => e,
        crate::migrations::BuildError::Io { path, error } => StoreOpenError::Build { path, error },
    })
}

/// Whether the database file at `path` alone (no `-wal` beside it) opens under
/// `recovery_secret`'s key and has no tables at all (`held_bots::lost`). Opened read-only and
/// `immutable` (no lock, no `-shm`): nothing is written or created, whatever it finds.
pub fn holds_no_schema(path: &Path, recovery_secret: &[u8; 32]) -> bool {
    let wal = std::fs::metadata(format!("{}-wal", path.display())).map(|m| m.len()).unwrap_or(0);
    if wal > 0 {
        return false; // the log may hold the tables
    }
    let key = Zeroizing::new(database_key(recovery_secret));
    let Ok(conn) = open_immutable(path, &key) else { return false };
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)).is_ok_and(|n| n == 0)
}

/// The database file at `path` opened read-only and `immutable` (no lock, no `-shm`, its `-wal`
/// not read): nothing is written or created, whatever it holds. `key` is set; reading the
/// schema is the first access that needs it.
fn open_immutable(path: &Path, key: &[u8; 32]) -> rusqlite::Result<Connection> {
    let mut uri = String::from("file:");
    for c in path.display().to_string().chars() {
        match c {
            '?' | '#' | '%' => uri.push_str(&format!("%{:02X}", c as u32)),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    let conn = Connection::open_with_flags(&uri, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI)?;
    conn.pragma_update(None, "key", key_literal(key).as_str())?;
    Ok(conn)
}

/// Whether the existing database at `path` opens under `key`, checked on its file alone
/// (`open_immutable`): a start that refuses it has written nothing. A read-write connection that
/// found the file unreadable would still checkpoint its `-wal` into it on close.
/// Only page 1 is read (the header's `user_version`): a database of an earlier release kept most
/// of its pages in its `-wal`, which an immutable connection does not read.
fn opens_untouched(path: &Path, key: &[u8; 32]) -> rusqlite::Result<()> {
    open_immutable(path, key)?.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).map(drop)
}

/// Sets up a writable connection to the database at `file` (mode 0600, the pragmas) and brings
/// it to the newest schema, ours and openmls' (`migrations::without_syncs`). Errors name
/// `shown`: the bot's database, also while its new file is built beside it.
fn configure_and_migrate(conn: &mut Connection, file: &Path, shown: &Path) -> std::result::Result<(), StoreOpenError> {
    let _ = std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600));
    let configure_failed = |error| StoreOpenError::Configure { path: shown.to_path_buf(), error };
    schema::configure(conn).map_err(configure_failed)?;
    crate::migrations::without_syncs(
        conn,
        |conn| {
            // The error names the file and, for a file from a newer release, both versions.
            schema::migrate(conn).map_err(StoreOpenError::Schema)?;
            // openmls' own tables (MLS group state), versioned by its storage crate.
            crypto::mls::migrate_storage(conn).map_err(|error| StoreOpenError::MlsStorage { path: shown.to_path_buf(), error })
        },
        configure_failed,
    )
}

impl Store {
    /// Opens (creating if needed) the database, migrates it to the newest schema version
    /// (refusing a file from a newer release), checks that it belongs to
    /// `bot_id_hex`, and starts the writer thread named `name` (`wr/<n>` in the gateway).
    pub fn open(path: &Path, recovery_secret: &[u8; 32], bot_id_hex: &str, name: &str) -> std::result::Result<Store, StoreOpenError> {
        let key = Zeroizing::new(database_key(recovery_secret));
        // An empty file of a bot never held (`held_bots` refuses a held bot's) is built over,
        // whole, unless a `-wal` beside it holds something: that is a state, not a new one.
        let [_, wal, shm] = with_sidecars(path);
        let wal_bytes = std::fs::metadata(&wal).map_or(0, |m| m.len());
        let created = std::fs::metadata(path).map_or(true, |m| m.len() == 0 && wal_bytes == 0);
        if created {
            // Sidecars of a file that held nothing must not be read as the new one's.
            for stale in [&wal, &shm] {
                match std::fs::remove_file(stale) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(StoreOpenError::Build { path: path.to_path_buf(), error: e });
                    }
                    _ => {}
                }
            }
            build_new(path, &key, bot_id_hex, |_| {})?;
        } else {
            opens_untouched(path, &key).map_err(|e| open_failed(path, StoreError::Db(e)))?;
        }
        let mut conn = open_connection(path, &key, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(|error| open_failed(path, error))?;
        configure_and_migrate(&mut conn, path, path)?;
        match schema::meta_get(&conn, "bot_id_hex").map_err(StoreOpenError::Owner)? {
            None => {
                // (Earlier versions also wrote a random `bot_runtime_id` that nothing read; an
                // old database keeps that row, harmlessly.)
                schema::meta_set(&conn, "bot_id_hex", bot_id_hex).map_err(StoreOpenError::Owner)?;
            }
            Some(existing) if existing == bot_id_hex => {}
            Some(existing) => {
                return Err(StoreOpenError::OtherBot {
                    path: path.to_path_buf(),
                    existing,
                    expected: bot_id_hex.to_string(),
                })
            }
        }
        let notifier = Arc::new(Notifier::default());
        let readers = Arc::new(Mutex::new(Vec::new()));
        let pool = readers.clone();
        let on_idle = Box::new(move || release_idle(&pool));
        let kept_as = conn.path().map(str::to_owned);
        let (reopen_path, reopen_key) = (path.to_path_buf(), key.clone());
        let reopen = Box::new(move || open_writable(&reopen_path, &reopen_key));
        let writer = Writer::start(conn, reopen, name, notifier.clone(), writer::IDLE_TRIM, on_idle)
            .map_err(StoreOpenError::Writer)?;
        Ok(Store { inner: Arc::new(StoreInner { path: path.to_path_buf(), created, key, writer, readers, notifier, kept_as }) })
    }

    /// Runs `f` in the writer thread inside a transaction and waits for the commit.
    pub fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.inner.writer.write(f)
    }

    /// [`Store::write`] for a write whose loss in a power failure costs nothing: its commit
    /// does not wait for the disk (`writer::Writer::write_relaxed`). A process crash loses it
    /// no more than any commit; the next synced commit takes it to disk.
    pub fn write_relaxed<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.inner.writer.write_relaxed(f)
    }

    /// Runs `f` on a read-only connection (never blocks the writer; sees committed data).
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.inner.readers.lock().expect("reader pool lock").pop();
        let conn = match conn {
            Some(c) => c,
            None => open_connection(&self.inner.path, &self.inner.key, OpenFlags::SQLITE_OPEN_READ_ONLY)?,
        };
        let out = f(&conn);
        let mut pool = self.inner.readers.lock().expect("reader pool lock");
        // A handful of readers covers the HTTP workers; extra ones are closed.
        if pool.len() < 8 {
            pool.push(conn);
        }
        out
    }

    /// True when this open created the database (a new state for this bot).
    /// Why this store cannot commit now (the last commit failed, none since succeeded).
    pub fn failing(&self) -> Option<String> {
        self.inner.writer.failing()
    }

    pub fn created(&self) -> bool {
        self.inner.created
    }

    /// Deletes a database this open created, with its WAL files. Used when start-up fails
    /// before the new state was ever used, so a corrected config starts clean instead of
    /// meeting a database keyed for the wrong secret.
    pub fn discard_new(self) {
        if !self.inner.created {
            return;
        }
        let path = self.inner.path.clone();
        // Only when this is the last handle: dropping it closes every connection and joins the
        // writer, so no open database is unlinked under SQLite.
        if Arc::strong_count(&self.inner) != 1 {
            log::warn!("state database {} is still in use; not discarding it", path.display());
            return;
        }
        drop(self);
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }

    /// The directory the database is in (the `state_dir`): where a download's private,
    /// unlinked ciphertext file goes.
    pub fn directory(&self) -> &Path {
        self.inner.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    }

    pub fn notifier(&self) -> &Arc<Notifier> {
        &self.inner.notifier
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>> {
        self.read(|c| Ok(schema::meta_get(c, key)?))
    }

    pub fn set_meta(&self, key: &'static str, value: String) -> Result<()> {
        self.write(move |c| Ok(schema::meta_set(c, key, &value)?))
    }
}

pub use schema::{meta_delete, meta_get, meta_set};

/// A database in memory with the current schema, for unit tests of the layers above.
#[cfg(test)]
pub fn memory_db() -> Connection {
    let mut c = Connection::open_in_memory().expect("memory db");
    schema::migrate(&c).expect("migrate");
    crypto::mls::migrate_storage(&mut c).expect("openmls tables");
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_get_one_coalesced_signal_per_burst_of_commits() {
        let n = Notifier::default();
        let rx = n.subscribe();
        assert!(rx.try_recv().is_err(), "no commit yet");
        n.committed();
        n.committed();
        assert!(rx.try_recv().is_ok(), "a commit leaves a signal");
        assert!(rx.try_recv().is_err(), "signals coalesce; committed() never blocks");
        n.committed();
        assert!(rx.recv_timeout(Duration::from_secs(5)).is_ok(), "a later commit signals again");
    }

    #[test]
    fn writer_commits_wake_subscribers() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&tmp.path().join("s.db"), &[3u8; 32], &"cd".repeat(32), "t").expect("open");
        let rx = store.notifier().subscribe();
        store.set_meta("k", "v".into()).expect("write");
        assert!(rx.recv_timeout(Duration::from_secs(5)).is_ok(), "the commit signalled");
        assert_eq!(store.meta("k").expect("read"), Some("v".to_string()));
    }

    #[test]
    fn the_writer_zeroes_what_it_deletes_and_holds_the_openmls_tables() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&tmp.path().join("s.db"), &[4u8; 32], &"ef".repeat(32), "t").expect("open");
        let (secure_delete, mls_tables, autocheckpoint, size_limit): (i64, i64, i64, i64) = store
            .write(|c| {
                let on = c.query_row("PRAGMA secure_delete", [], |r| r.get(0))?;
                let n = c.query_row(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'openmls_%'",
                    [],
                    |r| r.get(0),
                )?;
                let pages = c.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))?;
                let limit = c.query_row("PRAGMA journal_size_limit", [], |r| r.get(0))?;
                Ok((on, n, pages, limit))
            })
            .expect("query");
        assert_eq!(secure_delete, 1, "freed pages are zeroed (forward secrecy of deleted MLS secrets)");
        assert_eq!(autocheckpoint, i64::from(crate::e2e::wal::AUTOCHECKPOINT_PAGES), "old session images leave the log soon");
        assert_eq!(size_limit, 0, "the log is cut back to nothing at each checkpoint");
        assert!(mls_tables >= 8, "openmls' tables are created at open ({mls_tables})");
    }

    #[test]
    fn an_idle_store_closes_its_pooled_readers_and_reads_again_after() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&tmp.path().join("s.db"), &[6u8; 32], &"ab".repeat(32), "t").expect("open");
        store.set_meta("k", "v".into()).expect("write");
        assert_eq!(store.meta("k").expect("read"), Some("v".to_string()));
        assert_eq!(store.inner.readers.lock().expect("pool").len(), 1, "the reader went back to the pool");
        release_idle(&store.inner.readers);
        assert!(store.inner.readers.lock().expect("pool").is_empty(), "pooled readers closed");
        assert_eq!(store.meta("k").expect("a new reader"), Some("v".to_string()));
        store.set_meta("k", "w".into()).expect("the writer still writes");
        assert_eq!(store.meta("k").expect("read"), Some("w".to_string()));
    }

    /// A closed store's `.db` alone is its state (its `-wal` checkpointed and cut to nothing),
    /// whether it was written since it opened or not: a copy of the `.db` without the `-wal`
    /// loses nothing.
    #[test]
    fn a_closed_stores_database_file_alone_holds_everything() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("s.db");
        let wal = || std::fs::metadata(tmp.path().join("s.db-wal")).map(|m| m.len()).unwrap_or(0);
        for written in [false, true] {
            let store = Store::open(&path, &[6u8; 32], &"ab".repeat(32), "t").expect("open");
            if written {
                store.set_meta("k", "v".into()).expect("write");
                assert_eq!(store.meta("k").expect("read"), Some("v".to_string()), "a pooled reader stays open");
            }
            drop(store);
            assert_eq!(wal(), 0, "written: {written}");
        }
        let copy = tmp.path().join("copy.db");
        std::fs::copy(&path, &copy).expect("copy the .db alone");
        let store = Store::open(&copy, &[6u8; 32], &"ab".repeat(32), "t").expect("the copy opens");
        assert_eq!(store.meta("k").expect("read"), Some("v".to_string()), "the copy holds the last write");
    }

    /// A database of an earlier release that never checkpointed: its `.db` holds little and its
    /// `-wal` the schema and everything else. It opens: the check before the read-write open
    /// reads only page 1 of the file, which holds the key's proof.
    #[test]
    fn a_state_whose_pages_are_in_its_wal_opens() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let (live, copy) = (tmp.path().join("live.db"), tmp.path().join("copy.db"));
        let key = Zeroizing::new(database_key(&[9u8; 32]));
        let mut conn = open_connection(&live, &key, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE).expect("create");
        // As an earlier release left it: the schema made in WAL mode and never checkpointed.
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;").expect("no checkpoints");
        schema::migrate(&conn).expect("our schema");
        crypto::mls::migrate_storage(&mut conn).expect("openmls' tables");
        schema::meta_set(&conn, "bot_id_hex", &"ab".repeat(32)).expect("owner");
        schema::meta_set(&conn, "k", "in the log").expect("write");
        // Copied while open, as a crash or a kill leaves it.
        for (from, to) in with_sidecars(&live).iter().zip(with_sidecars(&copy).iter()) {
            std::fs::copy(from, to).expect("copy");
        }
        drop(conn);
        let (db, wal) = (std::fs::metadata(&copy).expect("db").len(), std::fs::metadata(with_sidecars(&copy)[1].clone()).expect("wal").len());
        assert!(db < wal, "the pages are in the log: .db {db} bytes, -wal {wal}");
        let store = Store::open(&copy, &[9u8; 32], &"ab".repeat(32), "t").expect("opens");
        assert_eq!(store.meta("k").expect("read"), Some("in the log".to_string()));
    }

    /// Run in a child process by the test below: builds a new database at `FIRST_START_PATH`
    /// and, at commit number `FIRST_START_CRASH_AT`, ends the process at once, as a kill does.
    #[test]
    #[ignore = "a child process of a_first_start_killed_after_any_commit_leaves_a_state_that_opens"]
    fn first_start_child() {
        let (Ok(path), Ok(at)) = (std::env::var("FIRST_START_PATH"), std::env::var("FIRST_START_CRASH_AT")) else { return };
        let at: u32 = at.parse().expect("a commit number");
        crate::crypto::init();
        let key = database_key(&[8u8; 32]);
        build_new(Path::new(&path), &key, &"ab".repeat(32), move |n| {
            if n == at {
                // SAFETY: _exit ends the process at once: no destructor, no flush, as a kill.
                unsafe { libc::_exit(77) }
            }
        })
        .expect("built");
    }

    /// A first start killed after any of its commits leaves a state_dir whose next start opens
    /// (issue 46: openmls' migrations left tables without their record, which never opened).
    #[test]
    fn a_first_start_killed_after_any_commit_leaves_a_state_that_opens() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("s.db");
        let exe = std::env::current_exe().expect("test binary");
        let mut crashes = 0;
        for at in 1..=200 {
            let status = std::process::Command::new(&exe)
                .args(["--ignored", "--exact", "gateway::store::tests::first_start_child", "--test-threads=1", "-q"])
                .env("FIRST_START_PATH", &path)
                .env("FIRST_START_CRASH_AT", at.to_string())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .expect("child");
            let finished = match status.code() {
                Some(77) => false,
                Some(0) => true,
                other => panic!("the child at commit {at} ended with {other:?}"),
            };
            if !finished {
                crashes += 1;
                assert!(!path.exists(), "killed at commit {at}: nothing is in place yet");
            }
            let store = Store::open(&path, &[8u8; 32], &"ab".repeat(32), "t").unwrap_or_else(|e| panic!("killed at commit {at}: {e}"));
            store.set_meta("k", "v".into()).expect("writes");
            drop(store);
            assert!(!tmp.path().join("s.db.new").exists(), "no leftover after commit {at}");
            if finished {
                break;
            }
            for file in with_sidecars(&path) {
                let _ = std::fs::remove_file(file);
            }
        }
        assert!(crashes >= 10, "a first start makes more than ten commits (our steps and openmls'); killed at {crashes}");
    }

    /// A database with openmls' tables but not the record of their migrations (left by an
    /// earlier release's interrupted first start) is refused with the way on, not the
    /// migration error alone.
    #[test]
    fn openmls_tables_without_their_record_are_refused_with_the_fix() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("s.db");
        drop(Store::open(&path, &[8u8; 32], &"ab".repeat(32), "t").expect("open"));
        let c = Connection::open(&path).expect("raw");
        c.pragma_update(None, "key", key_literal(&database_key(&[8u8; 32])).as_str()).expect("key");
        c.execute("DELETE FROM openmls_sqlite_storage_migrations WHERE version = (SELECT max(version) FROM openmls_sqlite_storage_migrations)", [])
            .expect("the record of the last one lost");
        drop(c);
        let e = Store::open(&path, &[8u8; 32], &"ab".repeat(32), "t").err().expect("refused").to_string();
        assert!(e.contains("without the record of their migrations") && e.contains("reset-state"), "{e}");
    }

    /// SQLCipher is built without its mlock (`.cargo/config.toml`): each lock split a heap
    /// mapping, and a gateway of a thousand bots ran out of mappings. Nothing in the process
    /// locks memory, so any locked page is SQLCipher's.
    #[cfg(target_os = "linux")]
    #[test]
    fn sqlcipher_locks_no_memory() {
        crate::crypto::init();
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&tmp.path().join("s.db"), &[5u8; 32], &"ab".repeat(32), "t").expect("open");
        store.set_meta("k", "v".into()).expect("write");
        assert_eq!(store.meta("k").expect("read"), Some("v".to_string()));
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        let locked = status.lines().find(|l| l.starts_with("VmLck:")).expect("VmLck line");
        assert_eq!(locked.split_whitespace().nth(1), Some("0"), "no locked memory: {locked}");
    }
}
