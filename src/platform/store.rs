//! The platform server's storage: one SQLite database `platform.db` in the data directory.
//!
//! It owns accounts (users and bots share one id space), devices and their public keys,
//! one-time prekeys, per-dialog message counters, the idempotency records of sent messages and
//! the per-device inboxes. It stores public keys, digests of secrets and ciphertext only:
//! never a token secret, a recovery secret, a device secret or plaintext.
//!
//! The server holds one writing connection behind a mutex; inbox feeders read through their own
//! connections (WAL mode). Other processes (`platform-server create-bot`) may write at the same
//! time; `busy_timeout` serialises them. Signature checks are not this layer's concern: callers
//! hand in keys they have verified.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::error::{db_error, PlatformError, Result};
use super::rules;
use crate::migrations::{self, Step};

/// File name of the database inside the data directory.
pub const DB_FILE: &str = "platform.db";
/// How long a statement waits for another writer (e.g. `create-bot` next to a running server).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Every version of `platform.db`, in order (`crate::migrations`). The release before this list
/// already marked its files version 1; version 1 is frozen.
pub(crate) const STEPS: &[Step] = &[Step { version: 1, sql: &[SCHEMA_V1] }];

const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS accounts (
    id            INTEGER PRIMARY KEY,            -- numeric user/bot id in 1..2^52
    username      TEXT NOT NULL UNIQUE COLLATE NOCASE,
    display_name  TEXT NOT NULL,
    is_bot        INTEGER NOT NULL,
    identity_key  BLOB NOT NULL,                  -- Ed25519 public key (for a bot: the Bot ID)
    token_digest  BLOB,                           -- bots: digest of the token secret
    status        TEXT NOT NULL DEFAULT 'active', -- 'active' | 'disabled'
    capabilities  TEXT,                           -- bots: 'default' or e.g. 'dm,groups'
    owner_id      INTEGER,                        -- bots: the user who created it, if any
    created_at    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS devices (
    account_id     INTEGER NOT NULL,
    device_id      INTEGER NOT NULL,
    device_key     BLOB NOT NULL,
    certificate    BLOB NOT NULL,
    spk_id         INTEGER NOT NULL,
    spk_public     BLOB NOT NULL,
    spk_signature  BLOB NOT NULL,
    active         INTEGER NOT NULL DEFAULT 1,
    secret_digest  BLOB,                          -- user devices: digest of the device secret
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (account_id, device_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS one_time_prekeys (
    account_id  INTEGER NOT NULL,
    device_id   INTEGER NOT NULL,
    prekey_id   INTEGER NOT NULL,
    public_key  BLOB NOT NULL,
    PRIMARY KEY (account_id, device_id, prekey_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dialogs (
    low              INTEGER NOT NULL,             -- the smaller account id of the pair
    high             INTEGER NOT NULL,
    last_message_id  INTEGER NOT NULL,
    PRIMARY KEY (low, high)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sent_messages (
    sender_id          INTEGER NOT NULL,
    sender_device      INTEGER NOT NULL,
    client_message_id  TEXT NOT NULL,
    message_id         INTEGER NOT NULL,
    date               INTEGER NOT NULL,
    PRIMARY KEY (sender_id, sender_device, client_message_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS inbox (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so increasing per device
    account_id         INTEGER NOT NULL,
    device_id          INTEGER NOT NULL,
    sender_id          INTEGER NOT NULL,
    sender_device      INTEGER NOT NULL,
    message_id         INTEGER NOT NULL,
    date               INTEGER NOT NULL,
    client_message_id  TEXT NOT NULL,
    ciphertext         BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS inbox_by_device ON inbox (account_id, device_id, seq);
CREATE INDEX IF NOT EXISTS sent_by_date ON sent_messages (date);
-- Server-wide facts, e.g. 'manager_account_id': which account is the built-in management bot.
CREATE TABLE IF NOT EXISTS server_meta (
    key    TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
) WITHOUT ROWID;
";

/// `server_meta` key of the management bot's account id.
const META_MANAGER_ACCOUNT: &str = "manager_account_id";

// ── Types ──

/// One device of one account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceAddr {
    pub user_id: u64,
    pub device_id: u32,
}

/// Whether a bot may authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountStatus {
    Active,
    Disabled,
}

impl AccountStatus {
    fn parse(s: &str) -> AccountStatus {
        if s == "active" {
            AccountStatus::Active
        } else {
            AccountStatus::Disabled
        }
    }
}

/// A user or bot account as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub id: u64,
    pub username: String,
    pub display_name: String,
    pub is_bot: bool,
    pub identity_key: Vec<u8>,
    pub status: AccountStatus,
    /// Bots only.
    pub capabilities: Option<String>,
    /// Bots only: the creating user, if created through the management bot.
    pub owner_id: Option<u64>,
}

/// What authenticating a bot needs.
#[derive(Debug, Clone)]
pub struct BotCredential {
    /// `None` once revoked (a disabled bot has no valid token).
    pub token_digest: Option<[u8; 32]>,
    pub status: AccountStatus,
    pub identity_key: Vec<u8>,
}

/// A device as stored (what authentication and bundles need).
#[derive(Debug, Clone)]
pub struct DeviceRecord {
    pub addr: DeviceAddr,
    pub device_key: Vec<u8>,
    pub active: bool,
    pub secret_digest: Option<[u8; 32]>,
}

/// A signed prekey whose signature the caller has checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedPrekey {
    pub id: u32,
    pub public_key: [u8; 32],
    pub signature: [u8; 64],
}

/// A device's verified public keys at registration.
#[derive(Debug, Clone)]
pub struct NewDevice {
    pub device_key: [u8; 32],
    pub certificate: [u8; 64],
    pub signed_prekey: SignedPrekey,
    pub one_time_prekeys: Vec<(u32, [u8; 32])>,
}

/// One device's bundle; the one-time prekey has been removed from storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bundle {
    pub device_id: u32,
    pub device_key: Vec<u8>,
    pub certificate: Vec<u8>,
    pub signed_prekey: SignedPrekey,
    pub one_time_prekey: Option<(u32, [u8; 32])>,
}

/// One message to send: a ciphertext per recipient device.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub client_message_id: String,
    pub recipient_id: u64,
    pub ciphertexts: Vec<(u32, Vec<u8>)>,
}

/// The outcome for one message of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// Stored (or stored before: `repeat`), with its per-dialog id and date.
    Ok {
        message_id: u64,
        date: i64,
        repeat: bool,
    },
    /// The ciphertext set does not match the recipient's active devices; nothing stored.
    StaleDevices {
        missing: Vec<u32>,
        removed: Vec<u32>,
    },
    UnknownRecipient,
    Rejected(String),
}

/// The outcomes of one send request, and the devices whose inbox received entries.
#[derive(Debug, Default)]
pub struct SendBatch {
    pub outcomes: Vec<SendOutcome>,
    pub delivered_to: BTreeSet<DeviceAddr>,
}

/// One stored inbox entry, with the sender's profile joined in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxEntry {
    pub seq: u64,
    pub sender: DeviceAddr,
    pub sender_username: String,
    pub sender_display_name: String,
    pub sender_is_bot: bool,
    pub message_id: u64,
    pub date: i64,
    pub ciphertext: Vec<u8>,
    pub client_message_id: String,
}

/// Longest accepted client message id, in bytes.
pub const CLIENT_MESSAGE_ID_MAX: usize = 256;
/// Largest accepted ciphertext for one device, in bytes.
pub const CIPHERTEXT_MAX: usize = 16 << 20;
/// Most one-time prekeys a device may hold.
pub const ONE_TIME_PREKEYS_MAX: u32 = 10_000;

// ── Opening ──

/// The platform database.
pub struct Store {
    path: PathBuf,
    /// The one writing connection of this process.
    conn: Mutex<Connection>,
}

/// Creates the data directory (0700) if missing.
pub fn ensure_data_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // WAL lets inbox feeders read while a send commits; FULL makes every commit durable.
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        log::warn!("platform database did not switch to WAL (journal_mode is {mode})");
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

impl Store {
    /// Opens (creating if needed) `platform.db` in `data_dir`, creating the directory (0700).
    pub fn open(data_dir: &Path) -> Result<Store> {
        ensure_data_dir(data_dir).map_err(|e| {
            PlatformError::Internal(format!("cannot create data directory {}: {e}", data_dir.display()))
        })?;
        let path = data_dir.join(DB_FILE);
        let conn = Connection::open(&path)
            .map_err(|e| PlatformError::Internal(format!("cannot open platform database {}: {e}", path.display())))?;
        // SQLite gives the -wal and -shm files the database file's mode.
        {
            use std::os::unix::fs::PermissionsExt;
            if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
                log::warn!("cannot restrict {} to 0600: {e}", path.display());
            }
        }
        configure(&conn).map_err(db_error("configuring the platform database"))?;
        // The error names the file and, for a file from a newer release, both versions.
        migrations::migrate(&conn, STEPS).map_err(|e| PlatformError::Internal(e.to_string()))?;
        Ok(Store { path, conn: Mutex::new(conn) })
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A separate connection for reading (inbox feeders), so reads never wait for the writer mutex.
    pub fn open_reader(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path).map_err(db_error("opening a reader connection"))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db_error("configuring a reader connection"))?;
        Ok(conn)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves at worst an open transaction, which rusqlite
        // rolls back on drop, so the connection stays usable.
        self.conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    // ── Accounts ──

    /// Creates a bot account with a fresh token. Returns the bot id and the token
    /// `<id>:<64 hex>`; only the token's digest is stored.
    pub fn create_bot(
        &self,
        username: &str,
        display_name: &str,
        capabilities: &str,
        identity_key: &[u8; 32],
        owner_id: Option<u64>,
        now: i64,
    ) -> Result<(u64, String)> {
        let secret = crate::crypto::random_bytes::<32>();
        let (id, token, _) =
            self.create_bot_with_token(username, display_name, capabilities, identity_key, owner_id, &secret, now)?;
        Ok((id, token))
    }

    /// Like `create_bot`, with the token secret chosen by the caller, and idempotent: when a bot
    /// with this username, identity key, owner and token already exists (a retry after a crash),
    /// returns it with `true` instead of failing. Returns (bot id, token, existed before).
    #[allow(clippy::too_many_arguments)]
    pub fn create_bot_with_token(
        &self,
        username: &str,
        display_name: &str,
        capabilities: &str,
        identity_key: &[u8; 32],
        owner_id: Option<u64>,
        token_secret: &[u8; 32],
        now: i64,
    ) -> Result<(u64, String, bool)> {
        rules::validate_username(username)?;
        rules::validate_display_name(display_name)?;
        let capabilities = rules::parse_capabilities(capabilities)?;
        let digest = rules::token_digest(token_secret);
        let token = |id: u64| format!("{id}:{}", crate::crypto::hex_encode(token_secret));
        let mut conn = self.lock();
        let tx =
            conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error("starting create-bot"))?;
        let same: Option<u64> = tx
            .query_row(
                "SELECT id FROM accounts WHERE username = ?1 AND is_bot = 1 AND identity_key = ?2
                     AND owner_id IS ?3 AND token_digest = ?4",
                params![username, &identity_key[..], owner_id, &digest[..]],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_error("checking for an earlier create-bot"))?;
        if let Some(id) = same {
            return Ok((id, token(id), true));
        }
        ensure_username_free(&tx, username)?;
        let id = fresh_account_id(&tx)?;
        tx.execute(
            "INSERT INTO accounts (id, username, display_name, is_bot, identity_key, token_digest,
                                   status, capabilities, owner_id, created_at)
             VALUES (?1, ?2, ?3, 1, ?4, ?5, 'active', ?6, ?7, ?8)",
            params![id, username, display_name, &identity_key[..], &digest[..], capabilities, owner_id, now],
        )
        .map_err(db_error("inserting a bot account"))?;
        tx.commit().map_err(db_error("committing create-bot"))?;
        Ok((id, token(id), false))
    }

    /// Replaces a bot's token; the previous one stops working at once. Returns the new token.
    pub fn rotate_bot_token(&self, bot_id: u64) -> Result<String> {
        self.rotate_bot_token_to(bot_id, &crate::crypto::random_bytes::<32>())
    }

    /// Replaces a bot's token with one of the caller's secret (idempotent: a retry with the
    /// same secret changes nothing more). Returns the new token.
    pub fn rotate_bot_token_to(&self, bot_id: u64, secret: &[u8; 32]) -> Result<String> {
        let digest = rules::token_digest(secret);
        let changed = self
            .lock()
            .execute("UPDATE accounts SET token_digest = ?2 WHERE id = ?1 AND is_bot = 1", params![bot_id, &digest[..]])
            .map_err(db_error("rotating a bot token"))?;
        if changed == 0 {
            return Err(PlatformError::NotFound(format!("no bot with id {bot_id}")));
        }
        Ok(format!("{bot_id}:{}", crate::crypto::hex_encode(secret)))
    }

    /// Creates or updates the account of the built-in management bot and returns its id.
    ///
    /// The account is a bot without a token (nobody can authenticate as it over gRPC; it runs
    /// in-process) and without an owner. Its id is remembered in `server_meta`, so a later start
    /// with another `username` renames it, and a new `identity_key` (its state file was lost)
    /// replaces the key and deactivates its old devices, whose keys can no longer be proven.
    pub fn ensure_manager_account(
        &self,
        username: &str,
        display_name: &str,
        identity_key: &[u8; 32],
        now: i64,
    ) -> Result<u64> {
        rules::validate_username(username)?;
        rules::validate_display_name(display_name)?;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error("starting the management bot's account setup"))?;
        let known: Option<u64> = tx
            .query_row("SELECT value FROM server_meta WHERE key = ?1", params![META_MANAGER_ACCOUNT], |r| r.get(0))
            .optional()
            .map_err(db_error("reading the management bot's account id"))?;
        let existing: Option<(String, Vec<u8>)> = match known {
            None => None,
            Some(id) => tx
                .query_row("SELECT username, identity_key FROM accounts WHERE id = ?1", params![id], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
                .map_err(db_error("reading the management bot's account"))?,
        };
        let id = match (known, existing) {
            (Some(id), Some((old_username, old_key))) => {
                if old_username != username {
                    let taken: bool = tx
                        .query_row(
                            "SELECT EXISTS (SELECT 1 FROM accounts WHERE username = ?1 AND id != ?2)",
                            params![username, id],
                            |r| r.get(0),
                        )
                        .map_err(db_error("checking a username"))?;
                    if taken {
                        return Err(PlatformError::AlreadyExists(format!(
                            "username @{username} is taken by another account; choose another management bot username"
                        )));
                    }
                    log::info!("management bot renamed from @{old_username} to @{username}");
                }
                if old_key.as_slice() != identity_key.as_slice() {
                    log::warn!(
                        "management bot {id} has a new identity key (its state file was replaced); \
                         its old devices are deactivated"
                    );
                    tx.execute("UPDATE devices SET active = 0 WHERE account_id = ?1", params![id])
                        .map_err(db_error("deactivating the management bot's old devices"))?;
                    tx.execute("DELETE FROM one_time_prekeys WHERE account_id = ?1", params![id])
                        .map_err(db_error("dropping the management bot's old prekeys"))?;
                    // Sealed for devices whose keys are gone: nobody can ever open them.
                    tx.execute("DELETE FROM inbox WHERE account_id = ?1", params![id])
                        .map_err(db_error("dropping the management bot's old inbox"))?;
                }
                tx.execute(
                    "UPDATE accounts SET username = ?2, display_name = ?3, identity_key = ?4 WHERE id = ?1",
                    params![id, username, display_name, &identity_key[..]],
                )
                .map_err(db_error("updating the management bot's account"))?;
                id
            }
            _ => {
                ensure_username_free(&tx, username).map_err(|_| {
                    PlatformError::AlreadyExists(format!(
                        "username @{username} is taken by another account; choose another management bot username"
                    ))
                })?;
                let id = fresh_account_id(&tx)?;
                tx.execute(
                    "INSERT INTO accounts (id, username, display_name, is_bot, identity_key, token_digest,
                                           status, capabilities, owner_id, created_at)
                     VALUES (?1, ?2, ?3, 1, ?4, NULL, 'active', 'dm', NULL, ?5)",
                    params![id, username, display_name, &identity_key[..], now],
                )
                .map_err(db_error("inserting the management bot's account"))?;
                tx.execute(
                    "INSERT INTO server_meta (key, value) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    params![META_MANAGER_ACCOUNT, id],
                )
                .map_err(db_error("recording the management bot's account id"))?;
                log::info!("created the management bot account {id} (@{username})");
                id
            }
        };
        tx.commit().map_err(db_error("committing the management bot's account setup"))?;
        Ok(id)
    }

    /// The account id of the built-in management bot, once it has been set up.
    pub fn manager_account_id(&self) -> Result<Option<u64>> {
        self.lock()
            .query_row("SELECT value FROM server_meta WHERE key = ?1", params![META_MANAGER_ACCOUNT], |r| r.get(0))
            .optional()
            .map_err(db_error("reading the management bot's account id"))
    }

    /// Enables or disables a bot. Disabling also revokes its token (a later enable needs a
    /// rotation to get a working token).
    pub fn set_bot_status(&self, bot_id: u64, status: AccountStatus) -> Result<()> {
        let conn = self.lock();
        let changed = match status {
            AccountStatus::Active => {
                conn.execute("UPDATE accounts SET status = 'active' WHERE id = ?1 AND is_bot = 1", params![bot_id])
            }
            AccountStatus::Disabled => conn.execute(
                "UPDATE accounts SET status = 'disabled', token_digest = NULL WHERE id = ?1 AND is_bot = 1",
                params![bot_id],
            ),
        }
        .map_err(db_error("changing a bot's status"))?;
        if changed == 0 {
            return Err(PlatformError::NotFound(format!("no bot with id {bot_id}")));
        }
        Ok(())
    }

    /// Bots created by `owner_id`, by username.
    pub fn bots_owned_by(&self, owner_id: u64) -> Result<Vec<Account>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!("{ACCOUNT_SELECT} WHERE owner_id = ?1 AND is_bot = 1 ORDER BY username"))
            .map_err(db_error("listing bots"))?;
        let rows = stmt.query_map(params![owner_id], account_from_row).map_err(db_error("listing bots"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_error("listing bots"))
    }

    /// Registers a user with its first device (id 1). Returns the new user id.
    pub fn register_user(
        &self,
        username: &str,
        display_name: &str,
        identity_key: &[u8; 32],
        device: &NewDevice,
        device_secret_digest: &[u8; 32],
        now: i64,
    ) -> Result<DeviceAddr> {
        rules::validate_username(username)?;
        rules::validate_display_name(display_name)?;
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error("starting user registration"))?;
        ensure_username_free(&tx, username)?;
        let id = fresh_account_id(&tx)?;
        tx.execute(
            "INSERT INTO accounts (id, username, display_name, is_bot, identity_key, status, created_at)
             VALUES (?1, ?2, ?3, 0, ?4, 'active', ?5)",
            params![id, username, display_name, &identity_key[..], now],
        )
        .map_err(db_error("inserting a user account"))?;
        let addr = DeviceAddr { user_id: id, device_id: 1 };
        insert_device(&tx, addr, device, Some(device_secret_digest), now)?;
        tx.commit().map_err(db_error("committing user registration"))?;
        Ok(addr)
    }

    /// Adds a device to a bot, or, when a device with the same device key exists, refreshes and
    /// reactivates it (a retried registration gets the same id). Returns the device id.
    pub fn register_bot_device(&self, bot_id: u64, device: &NewDevice, now: i64) -> Result<u32> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error("starting bot device registration"))?;
        let existing: Option<u32> = tx
            .query_row(
                "SELECT device_id FROM devices WHERE account_id = ?1 AND device_key = ?2",
                params![bot_id, &device.device_key[..]],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_error("looking up a bot device"))?;
        let device_id = match existing {
            Some(device_id) => {
                let addr = DeviceAddr { user_id: bot_id, device_id };
                tx.execute(
                    "UPDATE devices SET certificate = ?3, spk_id = ?4, spk_public = ?5, spk_signature = ?6, active = 1
                     WHERE account_id = ?1 AND device_id = ?2",
                    params![
                        bot_id,
                        device_id,
                        &device.certificate[..],
                        device.signed_prekey.id,
                        &device.signed_prekey.public_key[..],
                        &device.signed_prekey.signature[..]
                    ],
                )
                .map_err(db_error("refreshing a bot device"))?;
                insert_one_time_prekeys(&tx, addr, &device.one_time_prekeys)?;
                device_id
            }
            None => {
                let max: Option<u32> = tx
                    .query_row("SELECT MAX(device_id) FROM devices WHERE account_id = ?1", params![bot_id], |r| {
                        r.get(0)
                    })
                    .map_err(db_error("allocating a device id"))?;
                let device_id = max
                    .unwrap_or(0)
                    .checked_add(1)
                    .ok_or_else(|| PlatformError::InvalidArgument(format!("bot {bot_id} has no device ids left")))?;
                insert_device(&tx, DeviceAddr { user_id: bot_id, device_id }, device, None, now)?;
                device_id
            }
        };
        tx.commit().map_err(db_error("committing bot device registration"))?;
        Ok(device_id)
    }

    /// Marks a device inactive: senders stop encrypting to it (they get it in `removed_devices`).
    pub fn deactivate_device(&self, addr: DeviceAddr) -> Result<()> {
        let changed = self
            .lock()
            .execute(
                "UPDATE devices SET active = 0 WHERE account_id = ?1 AND device_id = ?2",
                params![addr.user_id, addr.device_id],
            )
            .map_err(db_error("deactivating a device"))?;
        if changed == 0 {
            return Err(PlatformError::NotFound(format!("no device {} of user {}", addr.device_id, addr.user_id)));
        }
        Ok(())
    }

    pub fn account_by_id(&self, id: u64) -> Result<Option<Account>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!("{ACCOUNT_SELECT} WHERE id = ?1"))
            .map_err(db_error("looking up an account"))?;
        stmt.query_row(params![id], account_from_row).optional().map_err(db_error("looking up an account"))
    }

    /// Case-insensitive; a leading '@' is ignored.
    pub fn account_by_username(&self, username: &str) -> Result<Option<Account>> {
        let username = rules::strip_at(username);
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!("{ACCOUNT_SELECT} WHERE username = ?1"))
            .map_err(db_error("looking up a username"))?;
        stmt.query_row(params![username], account_from_row).optional().map_err(db_error("looking up a username"))
    }

    /// The stored credential of a bot, `None` when no bot has this id.
    pub fn bot_credential(&self, bot_id: u64) -> Result<Option<BotCredential>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT token_digest, status, identity_key FROM accounts WHERE id = ?1 AND is_bot = 1")
            .map_err(db_error("reading a bot credential"))?;
        let row: Option<(Option<Vec<u8>>, String, Vec<u8>)> = stmt
            .query_row(params![bot_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()
            .map_err(db_error("reading a bot credential"))?;
        Ok(row.map(|(digest, status, identity_key)| BotCredential {
            token_digest: digest.and_then(|d| d.try_into().ok()),
            status: AccountStatus::parse(&status),
            identity_key,
        }))
    }

    pub fn device(&self, addr: DeviceAddr) -> Result<Option<DeviceRecord>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT device_key, active, secret_digest FROM devices WHERE account_id = ?1 AND device_id = ?2",
            )
            .map_err(db_error("reading a device"))?;
        stmt.query_row(params![addr.user_id, addr.device_id], |r| {
            let digest: Option<Vec<u8>> = r.get(2)?;
            Ok(DeviceRecord {
                addr,
                device_key: r.get(0)?,
                active: r.get(1)?,
                secret_digest: digest.and_then(|d| d.try_into().ok()),
            })
        })
        .optional()
        .map_err(db_error("reading a device"))
    }

    /// Ids of the account's active devices, in order.
    pub fn active_device_ids(&self, user_id: u64) -> Result<Vec<u32>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT device_id FROM devices WHERE account_id = ?1 AND active = 1 ORDER BY device_id")
            .map_err(db_error("reading active devices"))?;
        let rows = stmt.query_map(params![user_id], |r| r.get(0)).map_err(db_error("reading active devices"))?;
        rows.collect::<rusqlite::Result<Vec<u32>>>().map_err(db_error("reading active devices"))
    }

    // ── Prekeys ──

    /// Bundles of the account's active devices (all, or those listed; unknown or inactive
    /// listed ids are left out), each consuming one one-time prekey, in one transaction.
    pub fn take_prekey_bundles(&self, user_id: u64, device_ids: &[u32]) -> Result<Vec<Bundle>> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error("starting a prekey fetch"))?;
        let mut bundles = Vec::new();
        {
            let mut devices = tx
                .prepare_cached(
                    "SELECT device_id, device_key, certificate, spk_id, spk_public, spk_signature
                     FROM devices WHERE account_id = ?1 AND active = 1 ORDER BY device_id",
                )
                .map_err(db_error("reading devices"))?;
            let rows = devices
                .query_map(params![user_id], |r| {
                    Ok((
                        r.get::<_, u32>(0)?,
                        r.get::<_, Vec<u8>>(1)?,
                        r.get::<_, Vec<u8>>(2)?,
                        r.get::<_, u32>(3)?,
                        r.get::<_, Vec<u8>>(4)?,
                        r.get::<_, Vec<u8>>(5)?,
                    ))
                })
                .map_err(db_error("reading devices"))?;
            for row in rows {
                let (device_id, device_key, certificate, spk_id, spk_public, spk_signature) =
                    row.map_err(db_error("reading devices"))?;
                if !device_ids.is_empty() && !device_ids.contains(&device_id) {
                    continue;
                }
                let signed_prekey = SignedPrekey {
                    id: spk_id,
                    public_key: to_array(spk_public, "signed prekey")?,
                    signature: to_array(spk_signature, "signed prekey signature")?,
                };
                bundles.push(Bundle { device_id, device_key, certificate, signed_prekey, one_time_prekey: None });
            }
        }
        for bundle in &mut bundles {
            let otk: Option<(u32, Vec<u8>)> = tx
                .prepare_cached(
                    "DELETE FROM one_time_prekeys
                     WHERE account_id = ?1 AND device_id = ?2 AND prekey_id = (
                         SELECT MIN(prekey_id) FROM one_time_prekeys WHERE account_id = ?1 AND device_id = ?2)
                     RETURNING prekey_id, public_key",
                )
                .and_then(|mut s| {
                    s.query_row(params![user_id, bundle.device_id], |r| Ok((r.get(0)?, r.get(1)?))).optional()
                })
                .map_err(db_error("taking a one-time prekey"))?;
            bundle.one_time_prekey = match otk {
                Some((id, key)) => Some((id, to_array(key, "one-time prekey")?)),
                None => None,
            };
        }
        tx.commit().map_err(db_error("committing a prekey fetch"))?;
        Ok(bundles)
    }

    /// Adds one-time prekeys (an id already present is replaced) and optionally replaces the
    /// signed prekey. Returns how many one-time prekeys the device now holds.
    pub fn upload_prekeys(
        &self,
        addr: DeviceAddr,
        one_time_prekeys: &[(u32, [u8; 32])],
        signed_prekey: Option<&SignedPrekey>,
    ) -> Result<u32> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error("starting a prekey upload"))?;
        if let Some(spk) = signed_prekey {
            tx.execute(
                "UPDATE devices SET spk_id = ?3, spk_public = ?4, spk_signature = ?5
                 WHERE account_id = ?1 AND device_id = ?2",
                params![addr.user_id, addr.device_id, spk.id, &spk.public_key[..], &spk.signature[..]],
            )
            .map_err(db_error("rotating a signed prekey"))?;
        }
        insert_one_time_prekeys(&tx, addr, one_time_prekeys)?;
        let count = count_one_time_prekeys(&tx, addr)?;
        if count > ONE_TIME_PREKEYS_MAX {
            return Err(PlatformError::InvalidArgument(format!(
                "device {} of user {} would hold {count} one-time prekeys; the limit is {ONE_TIME_PREKEYS_MAX}",
                addr.device_id, addr.user_id
            )));
        }
        tx.commit().map_err(db_error("committing a prekey upload"))?;
        Ok(count)
    }

    pub fn one_time_prekey_count(&self, addr: DeviceAddr) -> Result<u32> {
        let conn = self.lock();
        count_one_time_prekeys(&conn, addr)
    }

    // ── Messaging ──

    /// Stores a batch of messages in one transaction. Each message is idempotent by
    /// (sender device, client message id): a repeat answers the first result and stores nothing.
    pub fn send_messages(&self, sender: DeviceAddr, messages: &[Outgoing], now: i64) -> Result<SendBatch> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(db_error("starting a send"))?;
        let mut batch = SendBatch::default();
        for m in messages {
            let outcome = send_one(&tx, sender, m, now, &mut batch.delivered_to)?;
            batch.outcomes.push(outcome);
        }
        tx.commit().map_err(db_error("committing a send"))?;
        Ok(batch)
    }

    /// Deletes acknowledged entries of a device's inbox; returns how many existed.
    pub fn ack(&self, addr: DeviceAddr, seqs: &[u64]) -> Result<usize> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(db_error("starting an ack"))?;
        let mut deleted = 0;
        {
            let mut stmt = tx
                .prepare_cached("DELETE FROM inbox WHERE seq = ?1 AND account_id = ?2 AND device_id = ?3")
                .map_err(db_error("acknowledging"))?;
            for seq in seqs {
                let Ok(seq) = i64::try_from(*seq) else { continue };
                deleted +=
                    stmt.execute(params![seq, addr.user_id, addr.device_id]).map_err(db_error("acknowledging"))?;
            }
        }
        tx.commit().map_err(db_error("committing an ack"))?;
        Ok(deleted)
    }

    /// Forgets idempotency records older than `before` (unix seconds); returns how many.
    pub fn prune_sent_records(&self, before: i64) -> Result<usize> {
        self.lock()
            .execute("DELETE FROM sent_messages WHERE date < ?1", params![before])
            .map_err(db_error("pruning sent-message records"))
    }
}

/// Up to `limit` entries of a device's inbox with `seq > after`, in order.
pub fn read_inbox(conn: &Connection, addr: DeviceAddr, after: u64, limit: usize) -> Result<Vec<InboxEntry>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT i.seq, i.sender_id, i.sender_device, a.username, a.display_name, a.is_bot,
                    i.message_id, i.date, i.ciphertext, i.client_message_id
             FROM inbox i LEFT JOIN accounts a ON a.id = i.sender_id
             WHERE i.account_id = ?1 AND i.device_id = ?2 AND i.seq > ?3
             ORDER BY i.seq LIMIT ?4",
        )
        .map_err(db_error("reading an inbox"))?;
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt
        .query_map(params![addr.user_id, addr.device_id, after, limit], |r| {
            Ok(InboxEntry {
                seq: r.get(0)?,
                sender: DeviceAddr { user_id: r.get(1)?, device_id: r.get(2)? },
                sender_username: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                sender_display_name: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                sender_is_bot: r.get::<_, Option<bool>>(5)?.unwrap_or(false),
                message_id: r.get(6)?,
                date: r.get(7)?,
                ciphertext: r.get(8)?,
                client_message_id: r.get(9)?,
            })
        })
        .map_err(db_error("reading an inbox"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_error("reading an inbox"))
}

// ── Helpers (inside a transaction) ──

const ACCOUNT_SELECT: &str =
    "SELECT id, username, display_name, is_bot, identity_key, status, capabilities, owner_id FROM accounts";

fn account_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Account> {
    Ok(Account {
        id: r.get(0)?,
        username: r.get(1)?,
        display_name: r.get(2)?,
        is_bot: r.get(3)?,
        identity_key: r.get(4)?,
        status: AccountStatus::parse(&r.get::<_, String>(5)?),
        capabilities: r.get(6)?,
        owner_id: r.get(7)?,
    })
}

fn to_array<const N: usize>(bytes: Vec<u8>, what: &str) -> Result<[u8; N]> {
    let len = bytes.len();
    bytes.try_into().map_err(|_| {
        log::error!("platform storage: stored {what} has {len} bytes, expected {N}");
        PlatformError::Internal(format!("stored {what} is corrupt"))
    })
}

fn ensure_username_free(conn: &Connection, username: &str) -> Result<()> {
    let taken: bool = conn
        .query_row("SELECT EXISTS (SELECT 1 FROM accounts WHERE username = ?1)", params![username], |r| r.get(0))
        .map_err(db_error("checking a username"))?;
    if taken {
        return Err(PlatformError::AlreadyExists(format!("username @{username} is already taken")));
    }
    Ok(())
}

/// A random unused id in 1..2^52 (users and bots share the space).
fn fresh_account_id(conn: &Connection) -> Result<u64> {
    loop {
        let id = rules::random_id();
        let taken: bool = conn
            .query_row("SELECT EXISTS (SELECT 1 FROM accounts WHERE id = ?1)", params![id], |r| r.get(0))
            .map_err(db_error("allocating an account id"))?;
        if !taken {
            return Ok(id);
        }
    }
}

fn insert_device(
    conn: &Connection,
    addr: DeviceAddr,
    d: &NewDevice,
    secret_digest: Option<&[u8; 32]>,
    now: i64,
) -> Result<()> {
    conn.execute(
        "INSERT INTO devices (account_id, device_id, device_key, certificate, spk_id, spk_public, spk_signature,
                              active, secret_digest, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9)",
        params![
            addr.user_id,
            addr.device_id,
            &d.device_key[..],
            &d.certificate[..],
            d.signed_prekey.id,
            &d.signed_prekey.public_key[..],
            &d.signed_prekey.signature[..],
            secret_digest.map(|s| s.to_vec()),
            now
        ],
    )
    .map_err(db_error("inserting a device"))?;
    insert_one_time_prekeys(conn, addr, &d.one_time_prekeys)
}

fn insert_one_time_prekeys(conn: &Connection, addr: DeviceAddr, keys: &[(u32, [u8; 32])]) -> Result<()> {
    let mut stmt = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO one_time_prekeys (account_id, device_id, prekey_id, public_key) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(db_error("storing one-time prekeys"))?;
    for (id, key) in keys {
        stmt.execute(params![addr.user_id, addr.device_id, id, &key[..]])
            .map_err(db_error("storing one-time prekeys"))?;
    }
    Ok(())
}

fn count_one_time_prekeys(conn: &Connection, addr: DeviceAddr) -> Result<u32> {
    conn.query_row(
        "SELECT COUNT(*) FROM one_time_prekeys WHERE account_id = ?1 AND device_id = ?2",
        params![addr.user_id, addr.device_id],
        |r| r.get(0),
    )
    .map_err(db_error("counting one-time prekeys"))
}

fn send_one(
    tx: &Connection,
    sender: DeviceAddr,
    m: &Outgoing,
    now: i64,
    delivered_to: &mut BTreeSet<DeviceAddr>,
) -> Result<SendOutcome> {
    if m.client_message_id.is_empty() || m.client_message_id.len() > CLIENT_MESSAGE_ID_MAX {
        return Ok(SendOutcome::Rejected(format!(
            "client_message_id must be 1 to {CLIENT_MESSAGE_ID_MAX} bytes, got {}",
            m.client_message_id.len()
        )));
    }
    let previous: Option<(u64, i64)> = tx
        .prepare_cached(
            "SELECT message_id, date FROM sent_messages
             WHERE sender_id = ?1 AND sender_device = ?2 AND client_message_id = ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![sender.user_id, sender.device_id, m.client_message_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(db_error("looking up a sent message"))?;
    if let Some((message_id, date)) = previous {
        return Ok(SendOutcome::Ok { message_id, date, repeat: true });
    }

    let recipient: Option<(bool, String)> = tx
        .prepare_cached("SELECT is_bot, status FROM accounts WHERE id = ?1")
        .and_then(|mut s| s.query_row(params![m.recipient_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db_error("looking up a recipient"))?;
    let Some((is_bot, status)) = recipient else {
        return Ok(SendOutcome::UnknownRecipient);
    };
    if is_bot && AccountStatus::parse(&status) == AccountStatus::Disabled {
        return Ok(SendOutcome::Rejected(format!("bot {} is disabled", m.recipient_id)));
    }

    let mut active: BTreeSet<u32> = BTreeSet::new();
    {
        let mut stmt = tx
            .prepare_cached("SELECT device_id FROM devices WHERE account_id = ?1 AND active = 1")
            .map_err(db_error("reading recipient devices"))?;
        let rows = stmt
            .query_map(params![m.recipient_id], |r| r.get::<_, u32>(0))
            .map_err(db_error("reading recipient devices"))?;
        for row in rows {
            active.insert(row.map_err(db_error("reading recipient devices"))?);
        }
    }
    // A message to one's own account goes to the other devices only.
    if m.recipient_id == sender.user_id {
        active.remove(&sender.device_id);
    }

    let mut given: BTreeSet<u32> = BTreeSet::new();
    for (device_id, ciphertext) in &m.ciphertexts {
        if !given.insert(*device_id) {
            return Ok(SendOutcome::Rejected(format!("two ciphertexts for device {device_id}")));
        }
        if ciphertext.is_empty() || ciphertext.len() > CIPHERTEXT_MAX {
            return Ok(SendOutcome::Rejected(format!(
                "ciphertext for device {device_id} is {} bytes; it must be 1 to {CIPHERTEXT_MAX}",
                ciphertext.len()
            )));
        }
    }
    let missing: Vec<u32> = active.difference(&given).copied().collect();
    let removed: Vec<u32> = given.difference(&active).copied().collect();
    if !missing.is_empty() || !removed.is_empty() {
        return Ok(SendOutcome::StaleDevices { missing, removed });
    }
    if active.is_empty() {
        return Ok(SendOutcome::Rejected(format!("user {} has no active devices", m.recipient_id)));
    }

    let (low, high) = if sender.user_id <= m.recipient_id {
        (sender.user_id, m.recipient_id)
    } else {
        (m.recipient_id, sender.user_id)
    };
    let message_id: u64 = tx
        .prepare_cached(
            "INSERT INTO dialogs (low, high, last_message_id) VALUES (?1, ?2, 1)
             ON CONFLICT (low, high) DO UPDATE SET last_message_id = last_message_id + 1
             RETURNING last_message_id",
        )
        .and_then(|mut s| s.query_row(params![low, high], |r| r.get(0)))
        .map_err(db_error("assigning a message id"))?;
    {
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO inbox (account_id, device_id, sender_id, sender_device, message_id, date,
                                    client_message_id, ciphertext)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(db_error("appending to an inbox"))?;
        for (device_id, ciphertext) in &m.ciphertexts {
            stmt.execute(params![
                m.recipient_id,
                device_id,
                sender.user_id,
                sender.device_id,
                message_id,
                now,
                m.client_message_id,
                ciphertext
            ])
            .map_err(db_error("appending to an inbox"))?;
            delivered_to.insert(DeviceAddr { user_id: m.recipient_id, device_id: *device_id });
        }
    }
    tx.prepare_cached(
        "INSERT INTO sent_messages (sender_id, sender_device, client_message_id, message_id, date)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| s.execute(params![sender.user_id, sender.device_id, m.client_message_id, message_id, now]))
    .map_err(db_error("recording a sent message"))?;
    Ok(SendOutcome::Ok { message_id, date: now, repeat: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(&dir.path().join("data")).expect("open store");
        (dir, store)
    }

    fn device(seed: u8, otks: u32) -> NewDevice {
        NewDevice {
            device_key: [seed; 32],
            certificate: [seed; 64],
            signed_prekey: SignedPrekey { id: 1, public_key: [seed ^ 1; 32], signature: [seed ^ 2; 64] },
            one_time_prekeys: (1..=otks).map(|i| (i, [i as u8; 32])).collect(),
        }
    }

    fn user(store: &Store, name: &str, otks: u32) -> DeviceAddr {
        store.register_user(name, "User", &[7; 32], &device(name.len() as u8, otks), &[9; 32], 100).expect("register")
    }

    fn msg(id: &str, to: u64, devices: &[u32]) -> Outgoing {
        Outgoing {
            client_message_id: id.into(),
            recipient_id: to,
            ciphertexts: devices.iter().map(|d| (*d, vec![1, 2, *d as u8])).collect(),
        }
    }

    #[test]
    fn data_dir_and_file_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, store) = store();
        let mode = std::fs::metadata(dir.path().join("data")).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let mode = std::fs::metadata(store.path()).expect("db").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn usernames_are_unique_case_insensitively() {
        let (_d, store) = store();
        user(&store, "Alice", 0);
        let err = store.register_user("alice", "x", &[1; 32], &device(1, 0), &[0; 32], 1).expect_err("taken");
        assert!(matches!(err, PlatformError::AlreadyExists(_)), "{err}");
        let err = store.create_bot("ALICE", "Bot", "default", &[1; 32], None, 1).expect_err("taken");
        assert!(matches!(err, PlatformError::AlreadyExists(_)), "{err}");
        assert!(store.create_bot("a-b", "Bot", "default", &[1; 32], None, 1).is_err());
        let found = store.account_by_username("@aLiCe").expect("lookup").expect("exists");
        assert_eq!(found.username, "Alice");
        assert!(!found.is_bot);
        assert!(store.account_by_username("bob").expect("lookup").is_none());
    }

    #[test]
    fn bot_token_is_stored_as_digest_only() {
        let (_d, store) = store();
        let (id, token) = store.create_bot("echo_bot", "Echo", "dm,groups", &[3; 32], None, 1).expect("create");
        assert!((1..rules::ID_LIMIT).contains(&id));
        let parsed = rules::parse_bot_token(&token).expect("well-formed token");
        assert_eq!(parsed.numeric_id, id);
        let cred = store.bot_credential(id).expect("read").expect("exists");
        assert_eq!(cred.status, AccountStatus::Active);
        assert_eq!(cred.token_digest, Some(rules::token_digest(&parsed.secret)));
        assert_eq!(cred.identity_key, vec![3; 32]);
        // The secret itself is nowhere in the database file.
        drop(store);
        let bytes = std::fs::read(_d.path().join("data").join(DB_FILE)).expect("db bytes");
        let hex = token.split_once(':').expect("token").1.as_bytes().to_vec();
        assert!(!bytes.windows(32).any(|w| w == parsed.secret));
        assert!(!bytes.windows(64).any(|w| w == hex.as_slice()));
    }

    #[test]
    fn rotation_and_disable_change_the_credential() {
        let (_d, store) = store();
        let (id, token) = store.create_bot("rot_bot", "Rot", "default", &[3; 32], Some(5), 1).expect("create");
        let new = store.rotate_bot_token(id).expect("rotate");
        assert_ne!(new, token);
        let cred = store.bot_credential(id).expect("read").expect("exists");
        assert_eq!(cred.token_digest, Some(rules::token_digest(&rules::parse_bot_token(&new).expect("token").secret)));
        assert_eq!(store.bots_owned_by(5).expect("list").len(), 1);
        store.set_bot_status(id, AccountStatus::Disabled).expect("disable");
        let cred = store.bot_credential(id).expect("read").expect("exists");
        assert_eq!(cred.status, AccountStatus::Disabled);
        assert_eq!(cred.token_digest, None, "disabling revokes the token");
        assert!(store.bot_credential(12345).expect("read").is_none());
    }

    #[test]
    fn bot_device_registration_is_idempotent_by_key() {
        let (_d, store) = store();
        let (id, _) = store.create_bot("dev_bot", "Dev", "default", &[3; 32], None, 1).expect("create");
        assert_eq!(store.register_bot_device(id, &device(1, 2), 1).expect("first"), 1);
        assert_eq!(store.register_bot_device(id, &device(2, 2), 1).expect("second"), 2);
        assert_eq!(store.register_bot_device(id, &device(1, 2), 1).expect("retry"), 1);
        assert_eq!(store.one_time_prekey_count(DeviceAddr { user_id: id, device_id: 1 }).expect("count"), 2);
    }

    #[test]
    fn prekeys_are_consumed_one_per_fetch() {
        let (_d, store) = store();
        let bob = user(&store, "bob", 2);
        let b1 = store.take_prekey_bundles(bob.user_id, &[]).expect("fetch");
        assert_eq!(b1.len(), 1);
        assert_eq!(b1[0].one_time_prekey.map(|p| p.0), Some(1));
        let b2 = store.take_prekey_bundles(bob.user_id, &[1]).expect("fetch");
        assert_eq!(b2[0].one_time_prekey.map(|p| p.0), Some(2));
        let b3 = store.take_prekey_bundles(bob.user_id, &[]).expect("fetch");
        assert_eq!(b3[0].one_time_prekey, None, "exhausted");
        assert_eq!(b3[0].signed_prekey.id, 1);
        assert!(store.take_prekey_bundles(bob.user_id, &[9]).expect("fetch").is_empty());
        assert_eq!(store.upload_prekeys(bob, &[(10, [1; 32]), (11, [2; 32])], None).expect("upload"), 2);
        let spk = SignedPrekey { id: 2, public_key: [5; 32], signature: [6; 64] };
        assert_eq!(store.upload_prekeys(bob, &[], Some(&spk)).expect("rotate"), 2);
        let b4 = store.take_prekey_bundles(bob.user_id, &[]).expect("fetch");
        assert_eq!(b4[0].signed_prekey, spk);
        assert_eq!(b4[0].one_time_prekey.map(|p| p.0), Some(10));
    }

    #[test]
    fn send_is_idempotent_and_ids_are_per_dialog() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let bob = user(&store, "bob", 0);
        let carol = user(&store, "carol", 0);
        let batch = store
            .send_messages(
                alice,
                &[msg("m1", bob.user_id, &[1]), msg("m2", bob.user_id, &[1]), msg("m1", bob.user_id, &[1])],
                50,
            )
            .expect("send");
        assert_eq!(
            batch.outcomes,
            vec![
                SendOutcome::Ok { message_id: 1, date: 50, repeat: false },
                SendOutcome::Ok { message_id: 2, date: 50, repeat: false },
                SendOutcome::Ok { message_id: 1, date: 50, repeat: true },
            ]
        );
        assert_eq!(batch.delivered_to.into_iter().collect::<Vec<_>>(), vec![bob]);
        // The other direction shares the dialog counter; another dialog starts at 1.
        let back = store.send_messages(bob, &[msg("r1", alice.user_id, &[1])], 60).expect("send");
        assert_eq!(back.outcomes[0], SendOutcome::Ok { message_id: 3, date: 60, repeat: false });
        let other = store.send_messages(alice, &[msg("m1-carol", carol.user_id, &[1])], 60).expect("send");
        assert_eq!(other.outcomes[0], SendOutcome::Ok { message_id: 1, date: 60, repeat: false });
        // A later repeat returns the first result and stores nothing new.
        let again = store.send_messages(alice, &[msg("m2", bob.user_id, &[1])], 99).expect("send");
        assert_eq!(again.outcomes[0], SendOutcome::Ok { message_id: 2, date: 50, repeat: true });
        assert!(again.delivered_to.is_empty());
        let reader = store.open_reader().expect("reader");
        let inbox = read_inbox(&reader, bob, 0, 100).expect("read");
        assert_eq!(inbox.len(), 2);
        assert!(inbox[0].seq < inbox[1].seq);
        assert_eq!(inbox[0].sender, alice);
        assert_eq!(inbox[0].sender_username, "alice");
        assert_eq!(inbox[0].client_message_id, "m1");
        assert_eq!(inbox[1].message_id, 2);
        assert_eq!(read_inbox(&reader, bob, inbox[0].seq, 100).expect("read").len(), 1);
    }

    #[test]
    fn stale_devices_store_nothing() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let (bot, _) = store.create_bot("two_dev_bot", "Two", "default", &[3; 32], None, 1).expect("create");
        let r = store.send_messages(alice, &[msg("x", bot, &[])], 1).expect("send");
        assert!(
            matches!(&r.outcomes[0], SendOutcome::Rejected(e) if e.contains("no active devices")),
            "{:?}",
            r.outcomes
        );
        store.register_bot_device(bot, &device(1, 0), 1).expect("device 1");
        store.register_bot_device(bot, &device(2, 0), 1).expect("device 2");
        let r = store.send_messages(alice, &[msg("x", bot, &[1, 3])], 1).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::StaleDevices { missing: vec![2], removed: vec![3] });
        assert!(r.delivered_to.is_empty());
        let reader = store.open_reader().expect("reader");
        assert!(read_inbox(&reader, DeviceAddr { user_id: bot, device_id: 1 }, 0, 10).expect("read").is_empty());
        // The same client message id, now complete, is accepted: a stale answer is not remembered.
        let r = store.send_messages(alice, &[msg("x", bot, &[1, 2])], 2).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::Ok { message_id: 1, date: 2, repeat: false });
        assert_eq!(r.delivered_to.len(), 2);
        store.deactivate_device(DeviceAddr { user_id: bot, device_id: 2 }).expect("deactivate");
        let r = store.send_messages(alice, &[msg("y", bot, &[1, 2])], 3).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::StaleDevices { missing: vec![], removed: vec![2] });
        let r = store.send_messages(alice, &[msg("z", 4242, &[1])], 3).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::UnknownRecipient);
        let r = store.send_messages(alice, &[msg("w", bot, &[1, 1])], 3).expect("send");
        assert!(matches!(&r.outcomes[0], SendOutcome::Rejected(_)));
        store.set_bot_status(bot, AccountStatus::Disabled).expect("disable");
        let r = store.send_messages(alice, &[msg("v", bot, &[1])], 3).expect("send");
        assert!(matches!(&r.outcomes[0], SendOutcome::Rejected(e) if e.contains("disabled")));
    }

    #[test]
    fn ack_deletes_only_own_entries() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let bob = user(&store, "bob", 0);
        store.send_messages(alice, &[msg("a", bob.user_id, &[1]), msg("b", bob.user_id, &[1])], 1).expect("send");
        let reader = store.open_reader().expect("reader");
        let inbox = read_inbox(&reader, bob, 0, 10).expect("read");
        assert_eq!(store.ack(alice, &[inbox[0].seq]).expect("ack"), 0, "alice cannot ack bob's inbox");
        assert_eq!(store.ack(bob, &[inbox[0].seq, u64::MAX]).expect("ack"), 1);
        let left = read_inbox(&reader, bob, 0, 10).expect("read");
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].client_message_id, "b");
    }

    #[test]
    fn the_manager_account_is_created_renamed_and_rekeyed() {
        let (_d, store) = store();
        assert_eq!(store.manager_account_id().expect("read"), None);
        let id = store.ensure_manager_account("BotManager", "Bot Manager", &[1; 32], 1).expect("create");
        assert_eq!(store.manager_account_id().expect("read"), Some(id));
        let a = store.account_by_username("@botmanager").expect("read").expect("exists");
        assert!(a.is_bot);
        assert_eq!((a.owner_id, a.status), (None, AccountStatus::Active));
        let cred = store.bot_credential(id).expect("read").expect("a bot");
        assert_eq!(cred.token_digest, None, "nobody can authenticate as the management bot");
        assert_eq!(store.ensure_manager_account("BotManager", "Bot Manager", &[1; 32], 2).expect("again"), id);

        store.register_bot_device(id, &device(1, 3), 1).expect("device");
        let alice = user(&store, "alice", 0);
        store.send_messages(alice, &[msg("m", id, &[1])], 1).expect("send");
        assert_eq!(store.ensure_manager_account("Helper", "Helper", &[1; 32], 3).expect("rename"), id);
        assert!(store.account_by_username("BotManager").expect("read").is_none());
        assert_eq!(store.active_device_ids(id).expect("devices"), vec![1]);

        // A new identity key: the old devices, prekeys and undecryptable inbox entries go.
        assert_eq!(store.ensure_manager_account("Helper", "Helper", &[2; 32], 4).expect("rekey"), id);
        assert!(store.active_device_ids(id).expect("devices").is_empty());
        let reader = store.open_reader().expect("reader");
        assert!(read_inbox(&reader, DeviceAddr { user_id: id, device_id: 1 }, 0, 10).expect("read").is_empty());
        assert_eq!(store.one_time_prekey_count(DeviceAddr { user_id: id, device_id: 1 }).expect("count"), 0);

        let err = store.ensure_manager_account("alice", "x", &[2; 32], 5).expect_err("a user's name");
        assert!(matches!(err, PlatformError::AlreadyExists(_)), "{err}");
    }

    #[test]
    fn a_second_store_sees_writes_of_the_first() {
        // create-bot runs in another process next to the server: two connections, one file.
        let (d, store) = store();
        let other = Store::open(&d.path().join("data")).expect("second open");
        let (id, _) = other.create_bot("side_bot", "Side", "default", &[3; 32], None, 1).expect("create");
        assert!(store.bot_credential(id).expect("read").is_some());
    }
}
