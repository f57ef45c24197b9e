//! The profile directory of one user device: a SQLite database with the e2e tables (keys,
//! prekeys, sessions) plus the account (server URL, identity key seed, user and device ids,
//! device secret, username) and the received messages (`history.rs`). Registration and
//! opening live here; sending is in `send.rs`, receiving in `inbox.rs`.
//!
//! # Concurrency
//! A `listen` process and a `send` process may use one profile at the same time. Every
//! read-modify-write of sessions and prekeys runs inside one `BEGIN IMMEDIATE` transaction
//! (`Profile::write`), the database is in WAL mode, and waits for the lock up to
//! `BUSY_TIMEOUT`. Network calls are never made while holding the write lock.
//!
//! # Files
//! The directory is created 0700 and the database 0600 (SQLite gives its -wal/-shm files the
//! database file's mode). The database is not encrypted: it is a person's test client, and the
//! directory permissions are its protection.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fs::{self, DirBuilder};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::error::{ClientError, E2eContext, Result, rpc};
use super::message::Incoming;
use super::reader::InboxReader;
use crate::crypto::{self, IdentityKeyPair};
use crate::e2e;
use crate::migrations;
use crate::wire::platform::RegisterUserRequest;
use crate::wire::{Credential, Platform};

/// The database file inside the profile directory.
pub const DB_FILE: &str = "profile.db";
/// How long a profile waits for another process holding its write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A registered user device: its database and a connection to the platform.
pub struct Profile {
    // Dropped first: stops the inbox reader thread before the platform channel goes away.
    // A RefCell so that `receive` can take `&self`, like sending (Profile is !Sync anyway).
    pub(super) inbox: RefCell<Option<InboxReader>>,
    /// Events processed while catching up with a group (`group.rs`) and not yet handed to a
    /// `receive_*` caller: the next one hands them out first, in order.
    pub(super) pending: RefCell<VecDeque<Incoming>>,
    /// Peers this process looked up and checked (`lookup`), by name, with when: a send to a
    /// name met a moment ago goes to the account it is bound to without asking the platform
    /// again (`identity::CHECKED_NAME_TTL`).
    pub(super) checked_names: RefCell<HashMap<String, (crate::wire::platform::Profile, Instant)>>,
    pub(super) conn: Connection,
    pub(super) platform: Platform,
    dir: PathBuf,
    server_url: String,
    identity: IdentityKeyPair,
    user_id: u64,
    device_id: u32,
    username: String,
    display_name: String,
}

/// The account row of the profile database.
struct Account {
    server_url: String,
    identity_seed: Vec<u8>,
    user_id: u64,
    device_id: u32,
    device_secret: Vec<u8>,
    username: String,
    display_name: String,
}

impl Profile {
    /// Creates a profile in `dir` (created if missing) and registers a new user with the
    /// platform at `server_url`. An empty `display_name` means the username.
    pub fn register(server_url: &str, dir: impl AsRef<Path>, username: &str, display_name: &str) -> Result<Profile> {
        crypto::init();
        let dir = dir.as_ref();
        let username = username.trim_start_matches('@');
        let display_name = if display_name.is_empty() { username } else { display_name };
        create_private_dir(dir)?;
        let conn = open_db(dir)?;
        if let Some(account) = load_account(&conn)? {
            return Err(ClientError::AlreadyRegistered { dir: dir.to_path_buf(), username: account.username });
        }

        let identity = IdentityKeyPair::generate();
        let device_keys = write_txn(&conn, |c| {
            e2e::create_device_keys(c, &identity).context(|| format!("creating device keys in {}", dir.display()))
        })?;
        let platform = Platform::connect(server_url, Credential::Anonymous).map_err(ClientError::from)?;
        let mut req = RegisterUserRequest::new();
        req.username = username.to_string();
        req.display_name = display_name.to_string();
        req.identity_key = identity.public_key().to_vec();
        req.device = protobuf::MessageField::some(device_keys);
        let resp = platform.client.register_user(&req, platform.opt()).map_err(|status| {
            if crate::wire::rpc::code(&status) == Some(grpcio::RpcStatusCode::ALREADY_EXISTS) {
                ClientError::UsernameTaken(username.to_string())
            } else {
                ClientError::Rpc { call: "RegisterUser", status }
            }
        })?;

        let account = Account {
            server_url: server_url.to_string(),
            identity_seed: identity.seed().to_vec(),
            user_id: resp.user_id,
            device_id: resp.device_id,
            device_secret: resp.device_secret.clone(),
            username: username.to_string(),
            display_name: display_name.to_string(),
        };
        write_txn(&conn, |c| {
            e2e::save_registration(c, e2e::Registration { user_id: resp.user_id, device_id: resp.device_id })
                .context(|| "saving the registration".to_string())?;
            save_account(c, &account)
        })?;
        log::info!("registered @{username} as user {} device {}", resp.user_id, resp.device_id);
        let profile = Profile::from_account(dir, conn, account)?;
        profile.certify_own_device()?;
        // Others can add this device to a group only from its key packages.
        if let Err(e) = profile.keep_key_packages() {
            log::warn!("could not publish key packages of @{username}: {e}");
        }
        Ok(profile)
    }

    /// Opens the profile in `dir` and, when `server` is given and differs, points it there.
    pub fn open_at(dir: &Path, server: Option<&str>) -> Result<Profile> {
        let mut profile = Profile::open(dir)?;
        if let Some(url) = server {
            if url != profile.server_url() {
                profile.set_server_url(url)?;
            }
        }
        Ok(profile)
    }

    /// Opens a registered profile. A profile whose device has not given the platform its
    /// second-version certificate yet (one made before it existed) gives it now; a failure is
    /// logged, not the caller's.
    pub fn open(dir: impl AsRef<Path>) -> Result<Profile> {
        crypto::init();
        let dir = dir.as_ref();
        if !dir.join(DB_FILE).exists() {
            return Err(ClientError::NotRegistered(dir.to_path_buf()));
        }
        let conn = open_db(dir)?;
        let account = load_account(&conn)?.ok_or_else(|| ClientError::NotRegistered(dir.to_path_buf()))?;
        let profile = Profile::from_account(dir, conn, account)?;
        if let Err(e) = profile.certify_own_device() {
            log::warn!("the platform did not take this device's certificate (version 2) yet: {e}");
        }
        Ok(profile)
    }

    /// Gives the platform this device's second-version certificate (`e2e::leaf`), once: it
    /// binds the user id, the device id and a time, so the device cannot be relabelled.
    fn certify_own_device(&self) -> Result<()> {
        let registration = e2e::Registration { user_id: self.user_id, device_id: self.device_id };
        let uploaded = e2e::leaf::own_certificate_v2_uploaded(&self.conn).context(|| "reading the device's certificate".to_string())?;
        if uploaded {
            return Ok(());
        }
        let certificate = write_txn(&self.conn, |c| {
            e2e::leaf::certify_own_device(c, &self.identity, registration, crate::clock::unix_now())
                .context(|| "making the device's certificate".to_string())
        })?;
        let request = crate::wire::platform::CertifyDeviceRequest {
            certificate: protobuf::MessageField::some(certificate),
            ..Default::default()
        };
        self.platform.client.certify_device(&request, self.platform.opt()).map_err(rpc("CertifyDevice"))?;
        write_txn(&self.conn, |c| {
            e2e::leaf::set_own_certificate_v2_uploaded(c).context(|| "recording the device's certificate".to_string())
        })
    }

    fn from_account(dir: &Path, conn: Connection, account: Account) -> Result<Profile> {
        let seed: [u8; 32] = account
            .identity_seed
            .as_slice()
            .try_into()
            .map_err(|_| ClientError::Invalid(format!("profile {}: stored identity key is damaged", dir.display())))?;
        let credential = Credential::Device {
            user_id: account.user_id,
            device_id: account.device_id,
            secret_hex: crypto::hex_encode(&account.device_secret),
        };
        let platform = Platform::connect(&account.server_url, credential).map_err(ClientError::from)?;
        let identity = IdentityKeyPair::from_seed(&seed);
        // A profile from before group leaves carried proof gets its proof here (idempotent).
        write_txn(&conn, |c| {
            e2e::leaf::save_own_proof(c, &identity).context(|| format!("recording the device's proof in {}", dir.display()))
        })?;
        Ok(Profile {
            inbox: RefCell::new(None),
            pending: RefCell::new(VecDeque::new()),
            checked_names: RefCell::new(HashMap::new()),
            conn,
            platform,
            dir: dir.to_path_buf(),
            server_url: account.server_url,
            identity,
            user_id: account.user_id,
            device_id: account.device_id,
            username: account.username,
            display_name: account.display_name,
        })
    }

    /// Talks to another server address from now on (not stored in the profile).
    pub fn set_server_url(&mut self, server_url: &str) -> Result<()> {
        let credential = self.platform.credential().clone();
        self.platform = Platform::connect(server_url, credential).map_err(ClientError::from)?;
        *self.inbox.get_mut() = None;
        // Names are checked again against the server now reached.
        self.checked_names.get_mut().clear();
        self.server_url = server_url.to_string();
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn server_url(&self) -> &str {
        &self.server_url
    }
    pub fn user_id(&self) -> u64 {
        self.user_id
    }
    pub fn device_id(&self) -> u32 {
        self.device_id
    }
    pub fn username(&self) -> &str {
        &self.username
    }
    pub fn display_name(&self) -> &str {
        &self.display_name
    }
    /// The account's Ed25519 identity public key.
    pub fn identity_key(&self) -> [u8; 32] {
        self.identity.public_key()
    }
    /// The connected platform client (for calls this library does not wrap).
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// Runs `f` inside one `BEGIN IMMEDIATE` transaction; commits on Ok, rolls back on Err.
    pub(super) fn write<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        write_txn(&self.conn, f)
    }
}

pub(super) fn write_txn<T>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    let value = f(&tx)?;
    tx.commit()?;
    crate::e2e::wal::checkpoint_if_secrets_deleted(conn);
    Ok(value)
}


fn create_private_dir(dir: &Path) -> Result<()> {
    let io = |source| ClientError::Io { what: format!("creating profile directory {}", dir.display()), source };
    DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io)?;
    // An existing directory may be wider; the keys inside must not be.
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io)
}

/// Opens (creating 0600 if needed) the profile database, migrated to the newest schema version.
///
/// The file is touched by SQLite alone. Opening and closing any other descriptor of it would
/// drop every POSIX lock this process holds on it (close(2) semantics), including the locks of
/// another connection of this process (chat mode opens the profile twice): another process
/// could then delete the WAL under that connection and reuse a ratchet position it had already
/// used (SQLite's "How To Corrupt an SQLite Database File", section 2.2). So the mode is set by
/// path, after SQLite created the file and before it creates the -wal and -shm files, which
/// take the database file's mode; the 0700 directory covers the moment in between.
fn open_db(dir: &Path) -> Result<Connection> {
    let path = dir.join(DB_FILE);
    if !path.exists() {
        // A first start is all or nothing (`migrations::build_whole`).
        migrations::build_whole(&path, open_file).map_err(|e| match e {
            migrations::BuildError::Build(e) => e,
            migrations::BuildError::Io { path, error } => ClientError::Io { what: format!("putting the new profile database {} in place", path.display()), source: error },
        })?;
    }
    open_file(&path)
}

/// `open_db` of the file at `path`, which SQLite creates when missing (`build_whole`'s).
fn open_file(path: &Path) -> Result<Connection> {
    let path = path.to_path_buf();
    let mut conn = Connection::open(&path)?;
    conn.set_prepared_statement_cache_capacity(crate::e2e::STATEMENT_CACHE);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
        .map_err(|source| ClientError::Io { what: format!("restricting {} to 0600", path.display()), source })?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Deleted epoch secrets and message keys are zeroed in the file (forward secrecy), and
    // leave no old page images in the write-ahead log (`e2e::wal`).
    conn.execute_batch("PRAGMA secure_delete = ON;")?;
    conn.execute_batch(crate::e2e::wal::JOURNAL_SIZE_LIMIT)?;
    conn.execute_batch(crate::e2e::wal::WAL_AUTOCHECKPOINT)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        log::warn!("profile database {} is in journal mode {mode}, not WAL", path.display());
    }
    migrations::without_syncs(
        &mut conn,
        |conn| {
            migrations::migrate(conn, super::schema::STEPS)?;
            // openmls' own tables (`openmls_*`, versioned by the storage crate), after ours.
            crypto::mls::migrate_storage(conn).map_err(|e| ClientError::Invalid(e.to_string()))
        },
        ClientError::from,
    )?;
    Ok(conn)
}


fn load_account(conn: &Connection) -> Result<Option<Account>> {
    Ok(conn
        .query_row(
            "SELECT server_url, identity_seed, user_id, device_id, device_secret, username, display_name
             FROM client_account WHERE id = 1",
            [],
            |r| {
                Ok(Account {
                    server_url: r.get(0)?,
                    identity_seed: r.get(1)?,
                    user_id: r.get::<_, i64>(2)? as u64,
                    device_id: r.get(3)?,
                    device_secret: r.get(4)?,
                    username: r.get(5)?,
                    display_name: r.get(6)?,
                })
            },
        )
        .optional()?)
}

fn save_account(conn: &Connection, a: &Account) -> Result<()> {
    conn.execute(
        "INSERT INTO client_account
             (id, server_url, identity_seed, user_id, device_id, device_secret, username, display_name)
         VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![a.server_url, a.identity_seed, a.user_id as i64, a.device_id, a.device_secret, a.username, a.display_name],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::history;

    #[test]
    fn a_new_profile_database_is_built_whole_and_a_leftover_of_a_killed_build_is_thrown_away() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(format!("{DB_FILE}.new")), b"half of a database").expect("leftover");
        let conn = open_db(dir.path()).expect("built");
        assert_eq!(migrations::version(&conn).expect("version"), migrations::latest(crate::client::schema::STEPS));
        assert!(!dir.path().join(format!("{DB_FILE}.new")).exists());
        drop(conn);
        open_db(dir.path()).expect("opens again");
    }

    #[test]
    fn step_2_turns_the_processed_seqs_into_the_inbound_cursor() {
        let c = Connection::open_in_memory().expect("db");
        migrations::migrate(&c, &crate::client::schema::STEPS[..1]).expect("version 1");
        c.execute_batch("INSERT INTO client_processed (seq) VALUES (3), (9), (5)").expect("old rows");
        migrations::migrate(&c, &crate::client::schema::STEPS[..2]).expect("version 2");
        assert_eq!(e2e::inbound::cursor(&c).expect("cursor"), 9);
        assert!(e2e::inbound::is_repeat(&c, 9, 1, "x").expect("check"), "what was processed stays processed");
    }

    #[test]
    fn step_3_gives_a_version_2_profile_an_empty_message_history() {
        let c = Connection::open_in_memory().expect("db");
        migrations::migrate(&c, &crate::client::schema::STEPS[..2]).expect("version 2");
        migrations::migrate(&c, crate::client::schema::STEPS).expect("version 3");
        assert_eq!(history::load(&c, 1, 1).expect("load"), None);
        let content = crate::wire::e2e::Content::new();
        history::remember(&c, 1, 1, 0, &content).expect("remember");
        assert_eq!(history::load(&c, 1, 1).expect("load"), Some(content));
    }

    #[test]
    fn later_steps_add_groups_the_outbox_and_reply_keyboards_and_open_adds_openmls_tables() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = open_db(dir.path()).expect("open");
        let version: u32 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).expect("version");
        assert_eq!(version, crate::client::schema::STEPS.last().expect("steps").version);
        let count = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).expect("count") };
        assert_eq!(count("SELECT COUNT(*) FROM client_groups"), 0);
        assert_eq!(count("SELECT COUNT(*) FROM client_outbox"), 0);
        assert_eq!(count("SELECT COUNT(*) FROM client_reply_keyboards"), 0);
        assert_eq!(count("SELECT COUNT(*) FROM client_sent"), 0);
        assert!(count("SELECT COUNT(*) FROM sqlite_master WHERE name = 'openmls_group_data'") == 1, "openmls storage migrated");
        drop(c);
        open_db(dir.path()).expect("opening again runs nothing twice");
    }

    #[test]
    fn step_6_keeps_what_a_version_5_profile_holds() {
        let c = Connection::open_in_memory().expect("db");
        migrations::migrate(&c, &crate::client::schema::STEPS[..5]).expect("version 5");
        let content = crate::e2e::text_content("kept");
        history::remember(&c, 1, 1, 0, &content).expect("remember");
        c.execute("INSERT INTO client_outbox (peer, client_message_id, content, queued_at) VALUES ('bot', 'c1', x'', 0)", [])
            .expect("queued");
        migrations::migrate(&c, crate::client::schema::STEPS).expect("version 6");
        assert_eq!(history::load(&c, 1, 1).expect("load"), Some(content.clone()));
        assert_eq!(c.query_row("SELECT COUNT(*) FROM client_outbox", [], |r| r.get::<_, i64>(0)).expect("count"), 1);
        assert_eq!(history::load_sent(&c, 1, 1).expect("load"), None, "nothing was sent before");
        history::remember_sent(&c, 1, 2, 0, &content).expect("remember a sent text");
        assert_eq!(history::load_sent(&c, 1, 2).expect("load"), Some(content));
    }

    #[test]
    fn open_without_profile_names_the_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Profile::open(dir.path()).err().expect("no profile yet");
        assert!(matches!(err, ClientError::NotRegistered(_)));
        assert!(err.to_string().contains(&dir.path().display().to_string()));
    }

    #[test]
    fn database_is_private_and_concurrent_writers_wait() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("p");
        create_private_dir(&sub).expect("dir");
        let a = open_db(&sub).expect("open a");
        let b = open_db(&sub).expect("open b");
        let mode = |p: &Path| fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode(&sub), 0o700);
        assert_eq!(mode(&sub.join(DB_FILE)), 0o600);
        // One holds the write lock; the other waits for it instead of failing.
        let t = std::thread::Builder::new()
            .name("test-writer".into())
            .spawn(move || {
                write_txn(&b, |c| {
                    c.execute("INSERT INTO e2e_inbound_seen (source, n) VALUES ('b', 2)", [])?;
                    Ok(())
                })
            })
            .expect("spawn");
        write_txn(&a, |c| {
            c.execute("INSERT INTO e2e_inbound_seen (source, n) VALUES ('a', 1)", [])?;
            std::thread::sleep(Duration::from_millis(200));
            Ok(())
        })
        .expect("first writer");
        t.join().expect("join").expect("second writer");
        let n: i64 = a.query_row("SELECT COUNT(*) FROM e2e_inbound_seen", [], |r| r.get(0)).expect("count");
        assert_eq!(n, 2);
        if sub.join(format!("{DB_FILE}-wal")).exists() {
            assert_eq!(mode(&sub.join(format!("{DB_FILE}-wal"))), 0o600);
        }
    }
}
