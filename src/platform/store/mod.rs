//! The platform server's storage: one SQLite database `platform.db` in the data directory.
//!
//! It owns accounts (users and bots share one id space), devices and their public keys,
//! one-time prekeys, per-dialog message counters, the idempotency records of sent messages and
//! the per-device inboxes, and the file store (`files`: ciphertext files under `DIR/files`, a
//! row each). It stores public keys, digests of secrets and ciphertext only:
//! never a token secret, a recovery secret, a device secret or plaintext.
//!
//! The server holds one writing connection behind a mutex; inbox feeders read through their own
//! connections (WAL mode). Other processes (`platform-server create-bot`) may write at the same
//! time; `busy_timeout` serialises them. Signature checks are not this layer's concern: callers
//! hand in keys they have verified.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::error::{db_error, PlatformError, Result};
use crate::migrations::{self, Step};

mod accounts;
mod device_proofs;
mod devices;
mod files;
mod group_log;
mod groups;
mod inbox;
mod inline;
mod messages;
mod profile;
mod reservations;

pub use inline::{InlineSession, INLINE_SESSION_TTL_SECS};

pub use device_proofs::{CertificateV2, SignedRemoval};
pub use devices::{device_removed_message, DeviceCertificate};
pub use files::{check_file_ref, StagedUpload};
pub use groups::{
    parse_group_info, GroupMessage, GroupSendOutcome, LinkSettings, NewGroup, KEY_PACKAGES_PER_DEVICE_MAX, LINK_PREFIX,
};
pub use group_log::Listening;
pub use inbox::read_inbox;
pub use profile::{CommandsKey, DescriptionField};

/// File name of the database inside the data directory.
pub const DB_FILE: &str = "platform.db";
/// How long a statement waits for another writer (e.g. `create-bot` next to a running server).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Every version of `platform.db`, in order (`crate::migrations`). The release before this list
/// already marked its files version 1; version 1 is frozen.
pub(crate) const STEPS: &[Step] = &[
    Step { version: 1, sql: &[SCHEMA_V1] },
    Step { version: 2, sql: &[RESERVATIONS_V2, INLINE_V2] },
    // Bots' public profiles: command lists and descriptions (`profile`).
    Step { version: 3, sql: &[profile::SCHEMA_PROFILE] },
    Step { version: 4, sql: &[DEVICES_SEEN_AND_REMOVED] },
    // Encrypted files: one row per stored ciphertext (`files`).
    Step { version: 5, sql: &[files::SCHEMA_FILES] },
    // Groups: the MLS delivery service (`groups`); inbox rows may carry a group delivery.
    // openmls' own tables (`openmls_*`) are migrated by its storage crate after these steps.
    Step { version: 6, sql: &[groups::SCHEMA_GROUPS] },
    // Administration: ends of bans and restrictions, invite links, join requests, and who sent
    // which group message (`groups::admin`).
    Step { version: 7, sql: &[groups::SCHEMA_ADMIN] },
    // Who let an invited user in, named by the change of their join (`groups::admin`).
    Step { version: 8, sql: &[groups::SCHEMA_INVITED_BY] },
    // Group leaves carry proof: the key packages uploaded before are dropped (`groups`).
    Step { version: 9, sql: &[groups::SCHEMA_DROP_UNPROVEN] },
    // When each key package expires: an expired one is never handed out (`groups::key_packages`).
    Step { version: 10, sql: &[groups::SCHEMA_KEY_PACKAGE_EXPIRY] },
    // openmls' ratchet trees may be compact (`crypto::mls_codec`).
    Step { version: 11, sql: &[crate::crypto::mls_codec::SCHEMA_STEP] },
    // A group delivery stored once for all the devices it goes to (`inbox`).
    Step { version: 12, sql: &[inbox::SCHEMA_GROUP_DELIVERIES] },
    // Devices' second-version certificates and signed removals (`device_proofs`).
    Step { version: 13, sql: &[device_proofs::SCHEMA_DEVICE_PROOFS] },
    // Which uploads a message named, and which devices name theirs (`files`: the sweep).
    Step { version: 14, sql: &[files::SCHEMA_FILES_NAMED] },
    // openmls values may be postcard (`crypto::mls_codec`).
    Step { version: 15, sql: &[crate::crypto::mls_codec::SCHEMA_STEP_BINARY] },
    // A group's GroupInfo in its own table, and a channel's staff found by role (`groups`).
    Step { version: 16, sql: &[groups::SCHEMA_GROUP_INFOS] },
    // A delivery to the whole group is one row that each device reads by its cursor (`group_log`).
    Step { version: 17, sql: &[group_log::SCHEMA_GROUP_CURSORS] },
];

/// Step 4: devices of a bot: when each was last seen (an authenticated call or an Inbox stream,
/// written at most once a minute per device), and when the owner removed it through
/// `@BotManager /removedevice` (a removed device is never reactivated).
const DEVICES_SEEN_AND_REMOVED: &str = "
ALTER TABLE devices ADD COLUMN last_seen INTEGER;
ALTER TABLE devices ADD COLUMN removed_at INTEGER;
";

/// Step 2 too: inline sessions (`Store::start_inline_session`). The query and the results
/// never reach the platform in clear; it keeps who, which bot, until when, and the choice.
const INLINE_V2: &str = "
CREATE TABLE inline_sessions (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id        INTEGER NOT NULL,
    bot_id         INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    chosen_result  TEXT                           -- NULL while open
);
CREATE INDEX inline_sessions_by_creation ON inline_sessions (created_at);
";

/// Step 2: message ids reserved before sealing (`Store::reserve_message_ids`). A row lives
/// until its message is sent (then `sent_messages` answers repeats) or it is pruned with the
/// idempotency records.
const RESERVATIONS_V2: &str = "
CREATE TABLE reserved_messages (
    sender_id          INTEGER NOT NULL,
    sender_device      INTEGER NOT NULL,
    client_message_id  TEXT NOT NULL,
    recipient_id       INTEGER NOT NULL,
    message_id         INTEGER NOT NULL,
    date               INTEGER NOT NULL,
    PRIMARY KEY (sender_id, sender_device, client_message_id)
) WITHOUT ROWID;
CREATE INDEX reserved_by_date ON reserved_messages (date);
";

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
    /// Removed by the owner (`/removedevice`): refused for good, never reactivated.
    pub removed: bool,
}

/// One device of an account as listed (`/devices`, ListDevices); times are unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub device_id: u32,
    pub device_key: Vec<u8>,
    /// Its removal carries the account's signature (`device_proofs`).
    pub removal_signed: bool,
    pub registered_at: i64,
    /// `None` until the device first authenticated a call after this column existed.
    pub last_seen: Option<i64>,
    pub active: bool,
    pub removed_at: Option<i64>,
}

/// What removing a device did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// Deactivated now; this many undelivered inbox entries were dropped.
    Removed { dropped: usize },
    /// It had been removed before (a retried removal changes nothing).
    AlreadyRemoved,
}

/// How often at most `last_seen` is written for one device, in seconds.
pub const LAST_SEEN_EVERY_SECS: i64 = 60;

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
    pub certificate_v2: Option<CertificateV2>,
    pub signed_prekey: SignedPrekey,
    pub one_time_prekey: Option<(u32, [u8; 32])>,
}

/// One message to send: a ciphertext per recipient device.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub client_message_id: String,
    pub recipient_id: u64,
    pub ciphertexts: Vec<(u32, Vec<u8>)>,
    /// A bot's answer to this inline session of the recipient (0: an ordinary message).
    pub inline_session_id: u64,
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

/// The outcome of reserving one message id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reserved {
    Id { message_id: u64, date: i64 },
    Refused(String),
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
    /// Set for group traffic (the wire's `GroupDelivery`).
    pub group: Option<GroupEntry>,
}

/// The group part of an inbox entry; title and type are the group's current ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEntry {
    pub group_id: Vec<u8>,
    /// `GroupDelivery.Kind` as a number.
    pub kind: i32,
    pub group_seq: u64,
    pub epoch: u64,
    pub title: String,
    /// `GroupType` as a number.
    pub group_type: i32,
    /// MEMBERSHIP: the encoded `MembershipChange`.
    pub change: Option<Vec<u8>>,
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
    /// When this process last wrote each device's `last_seen` (the write throttle).
    seen_written: Mutex<HashMap<DeviceAddr, i64>>,
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
        if !path.exists() {
            // A first start is all or nothing (`migrations::build_whole`).
            migrations::build_whole(&path, Store::open_database).map_err(|e| match e {
                migrations::BuildError::Build(e) => e,
                migrations::BuildError::Io { path, error } => PlatformError::Internal(format!("cannot put the new platform database {} in place: {error}", path.display())),
            })?;
        }
        let conn = Store::open_database(&path)?;
        Ok(Store { path, conn: Mutex::new(conn), seen_written: Mutex::new(HashMap::new()) })
    }

    /// Opens (creating when missing: `build_whole`'s new file) and migrates the database at
    /// `path`.
    fn open_database(path: &Path) -> Result<Connection> {
        let path = path.to_path_buf();
        let mut conn = Connection::open(&path)
            .map_err(|e| PlatformError::Internal(format!("cannot open platform database {}: {e}", path.display())))?;
        // SQLite gives the -wal and -shm files the database file's mode.
        {
            use std::os::unix::fs::PermissionsExt;
            if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
                log::warn!("cannot restrict {} to 0600: {e}", path.display());
            }
        }
        configure(&conn).map_err(db_error("configuring the platform database"))?;
        migrations::without_syncs(
            &mut conn,
            |conn| {
                // The error names the file and, for a file from a newer release, both versions.
                migrations::migrate(conn, STEPS).map_err(|e| PlatformError::Internal(e.to_string()))?;
                // The public group states of the delivery service (`groups`).
                crate::crypto::mls::migrate_storage(conn).map_err(|e| PlatformError::Internal(format!("{}: {e}", path.display())))
            },
            |e| db_error("configuring the platform database")(e),
        )?;
        Ok(conn)
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

    /// Runs `f` in one IMMEDIATE transaction of the writing connection and commits when it
    /// returns `Ok`; an `Err` rolls back. `what` names the work in errors ("starting {what}",
    /// "committing {what}").
    fn write_tx<T>(&self, what: &str, f: impl FnOnce(&Transaction<'_>) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_error(&format!("starting {what}")))?;
        let value = f(&tx)?;
        tx.commit().map_err(db_error(&format!("committing {what}")))?;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(&dir.path().join("data")).expect("open store");
        (dir, store)
    }

    /// SQLite's plan for `sql` with `params` bound: one line per step ("SEARCH …", "SCAN …").
    pub(super) fn query_plan(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Vec<String> {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("explain");
        let plan = stmt.query_map(params, |r| r.get::<_, String>(3)).expect("plan").collect::<rusqlite::Result<_>>();
        plan.expect("plan steps")
    }

    pub(super) fn device(seed: u8, otks: u32) -> NewDevice {
        NewDevice {
            device_key: [seed; 32],
            certificate: [seed; 64],
            signed_prekey: SignedPrekey { id: 1, public_key: [seed ^ 1; 32], signature: [seed ^ 2; 64] },
            one_time_prekeys: (1..=otks).map(|i| (i, [i as u8; 32])).collect(),
        }
    }

    pub(super) fn user(store: &Store, name: &str, otks: u32) -> DeviceAddr {
        store.register_user(name, "User", &[7; 32], &device(name.len() as u8, otks), &[9; 32], 100).expect("register")
    }

    pub(super) fn msg(id: &str, to: u64, devices: &[u32]) -> Outgoing {
        Outgoing {
            client_message_id: id.into(),
            recipient_id: to,
            ciphertexts: devices.iter().map(|d| (*d, vec![1, 2, *d as u8])).collect(),
            inline_session_id: 0,
        }
    }

    #[test]
    fn a_first_start_killed_half_way_leaves_a_file_beside_that_the_next_start_throws_away() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        ensure_data_dir(&data).expect("dir");
        // What a kill during the build leaves: the half-built file beside its place.
        std::fs::write(data.join(format!("{DB_FILE}.new")), b"half of a database").expect("leftover");
        let store = Store::open(&data).expect("opens");
        assert!(store.path().exists() && !data.join(format!("{DB_FILE}.new")).exists());
        drop(store);
        Store::open(&data).expect("and again");
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

    /// Inbox rows written before step 12 keep their own columns (a private message's, and a
    /// group delivery's written per device): they read and acknowledge as before once the file
    /// is upgraded.
    #[test]
    fn inbox_rows_of_the_release_before_read_the_same_after_the_upgrade() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let (bob_id, bob_device) = {
            let store = Store::open(&data).expect("open");
            let bob = user(&store, "bob", 0);
            (bob.user_id, bob.device_id)
        };
        {
            // Back to version 11, as the release before left it, with a row it wrote.
            let conn = Connection::open(data.join(DB_FILE)).expect("raw");
            conn.execute_batch(
                "DROP TABLE group_cursors; DROP INDEX inbox_group_rows; DROP INDEX devices_inactive;
                 DROP INDEX group_members_by_role; DROP INDEX accounts_bots; DROP TABLE group_infos;
                 ALTER TABLE groups ADD COLUMN group_info BLOB NOT NULL DEFAULT X'';
                 DROP INDEX files_unnamed; ALTER TABLE files DROP COLUMN named; ALTER TABLE devices DROP COLUMN names_files;
                 DROP TABLE device_removals; ALTER TABLE devices DROP COLUMN certificate_v2;
                 ALTER TABLE devices DROP COLUMN certified_at;
                 DROP TRIGGER inbox_delivery_release; ALTER TABLE inbox DROP COLUMN delivery_id;
                 DROP TABLE group_deliveries; PRAGMA user_version = 11;",
            )
            .expect("as version 11");
            conn.execute(
                "INSERT INTO inbox (account_id, device_id, sender_id, sender_device, message_id, date, client_message_id, ciphertext)
                 VALUES (?1, ?2, 1, 1, 5, 100, 'old', X'0A0B0C')",
                rusqlite::params![bob_id, bob_device],
            )
            .expect("an old private row");
            conn.execute(
                "INSERT INTO inbox (account_id, device_id, sender_id, sender_device, message_id, date, client_message_id,
                                    ciphertext, group_id, group_kind, group_seq, group_epoch, group_change)
                 VALUES (?1, ?2, 1, 1, 6, 101, 'old-group', X'0D', X'07', 2, 9, 3, X'0E')",
                rusqlite::params![bob_id, bob_device],
            )
            .expect("an old group row");
        }
        let store = Store::open(&data).expect("upgraded");
        let version: u32 = store.lock().query_row("PRAGMA user_version", [], |r| r.get(0)).expect("version");
        assert_eq!(version, STEPS.last().expect("steps").version);
        let bob = DeviceAddr { user_id: bob_id, device_id: bob_device };
        let entries = read_inbox(&store.open_reader().expect("reader"), bob, 0, 10).expect("read");
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].message_id, entries[0].ciphertext.as_slice(), entries[0].group.is_none()), (5, &[10u8, 11, 12][..], true));
        let (old, g) = (&entries[1], entries[1].group.as_ref().expect("the group columns"));
        assert_eq!((old.message_id, old.client_message_id.as_str(), old.ciphertext.as_slice()), (6, "old-group", &[13u8][..]));
        assert_eq!((g.group_id.as_slice(), g.kind, g.group_seq, g.epoch, g.change.as_deref()), (&[7u8][..], 2, 9, 3, Some(&[14u8][..])));
        assert_eq!(store.ack(bob, &[entries[0].seq, entries[1].seq]).expect("ack"), 2);
        assert!(read_inbox(&store.open_reader().expect("reader"), bob, 0, 10).expect("read").is_empty());
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
