//! The management bot's own database, `manager.db` in the platform data directory: its identity
//! key seed, its device state (the shared `e2e` tables: device keys, prekeys, ratchet sessions),
//! the inbox cursor, each user's scenario, effects between their two transactions, and the
//! outbox of sealed replies.
//!
//! Unlike `platform.db`, this file holds plaintext of the management bot's own dialogs: the
//! scenario answers (usernames, display names), and for the moments between committing and
//! sending, reply plaintexts and a new token's secret. It never holds a bot's identity secret:
//! the owner's client draws it and sends only the public key (step 6; a row an earlier version
//! wrote with one is finished once and deleted). `secure_delete` zeroes
//! deleted rows in the file and the rollback journal is truncated at each commit, so none of
//! that stays readable in the files once sent (blocks the file system freed are beyond reach);
//! the file is 0600 in the 0700 data directory.
//!
//! Plain row access on the caller's connection; the caller groups calls into transactions.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use zeroize::Zeroizing;

use super::commands::{Effect, Scenario};
use crate::crypto::IdentityKeyPair;
use crate::e2e;
use crate::migrations::{self, MigrationError, Step};

/// File name of the management bot's database inside the data directory.
pub const DB_FILE: &str = "manager.db";
/// How long opening waits for another process that holds the database (a second server).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Every version of `manager.db`, in order (`crate::migrations`); version 1 is frozen.
pub(crate) const STEPS: &[Step] = &[
    Step { version: 1, sql: &[MANAGER_V1, e2e::TABLES_V1] },
    Step { version: 2, sql: &[e2e::inbound::TABLES_V2, MANAGER_V2] },
    Step { version: 3, sql: &[MANAGER_EFFECT_DEVICE] },
    // The e2e tables of group-leaf proof (`e2e::leaf`): the device keys record their proof.
    Step { version: 4, sql: &[e2e::leaf::TABLES] },
    // First messages to the management bot cannot be replayed (`e2e::replay`).
    Step { version: 5, sql: &[e2e::REPLAY_TABLES] },
    // Bots' identity keys come from their owners' clients (`e2e::bot_key`).
    Step { version: 6, sql: &[MANAGER_EFFECT_IDENTITY_KEY] },
    // Devices' second-version certificates and signed removals (`e2e::leaf`, `e2e::removals`).
    Step { version: 7, sql: &e2e::DEVICE_PROOF_TABLES },
    // Messages numbered per conversation, and the gaps a receiver waits on (`e2e::sequence`).
    Step { version: 8, sql: &[e2e::sequence::TABLES] },
    // Ids and dates senders vouch for (`e2e::vouch`).
    Step { version: 9, sql: &[e2e::vouch::TABLES] },
    // Sessions a restored state only receives on (`e2e::sessions_receive_only_after_restore`).
    Step { version: 10, sql: &[e2e::RECEIVE_ONLY_TABLES] },
];

/// Step 6: `/newbot` and `/rekey` record the identity key the owner's client proved. The
/// `recovery_secret` column stays for rows written before this step (a creation under way when
/// the platform was upgraded), and is never written again.
const MANAGER_EFFECT_IDENTITY_KEY: &str = "ALTER TABLE manager_effects ADD COLUMN identity_key BLOB;";

/// Step 3: `/removedevice` records which device of the bot it removes.
const MANAGER_EFFECT_DEVICE: &str = "ALTER TABLE manager_effects ADD COLUMN device_id INTEGER;";

/// Step 2: the manager's inbox cursor moves to the one inbound rule of `e2e::inbound`.
const MANAGER_V2: &str = "
INSERT OR IGNORE INTO e2e_inbound_cursor (id, seq) SELECT 1, last_seq FROM manager_cursor;
DROP TABLE manager_cursor;
";

/// The manager tables as the release before schema versions created them at every open.
const MANAGER_V1: &str = "
CREATE TABLE IF NOT EXISTS manager_identity (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seed  BLOB NOT NULL                          -- Ed25519 seed of the account identity key
);
CREATE TABLE IF NOT EXISTS manager_cursor (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    last_seq  INTEGER NOT NULL                   -- highest inbox seq processed (platform order)
);
CREATE TABLE IF NOT EXISTS manager_scenarios (
    user_id       INTEGER PRIMARY KEY,
    step          TEXT NOT NULL,                 -- 'username' | 'display_name' | 'capabilities'
    username      TEXT,
    display_name  TEXT
);
-- An effect decided in one transaction and applied to the platform before the next one.
CREATE TABLE IF NOT EXISTS manager_effects (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id         INTEGER NOT NULL,
    kind            TEXT NOT NULL,               -- 'create' | 'rotate' | 'disable'
    bot_id          INTEGER,
    username        TEXT NOT NULL,
    display_name    TEXT,
    capabilities    TEXT,
    recovery_secret BLOB,                        -- create: chosen before the account exists
    token_secret    BLOB                         -- create, rotate
);
-- Sealed replies, sent in id order; `content` is kept to seal for devices that appear later.
CREATE TABLE IF NOT EXISTS manager_outbox (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    client_message_id  TEXT NOT NULL UNIQUE,
    recipient_id       INTEGER NOT NULL,
    content            BLOB NOT NULL,
    stale_rounds       INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS manager_outbox_ciphertexts (
    outbox_id   INTEGER NOT NULL,
    device_id   INTEGER NOT NULL,
    ciphertext  BLOB NOT NULL,
    PRIMARY KEY (outbox_id, device_id)
) WITHOUT ROWID;
";

/// Why `manager.db` did not open.
#[derive(Debug)]
pub enum OpenError {
    /// SQLite refused (e.g. `DatabaseBusy`: another server holds the file).
    Db(rusqlite::Error),
    /// The file could not be brought to this release's schema, or is from a newer release.
    Schema(MigrationError),
}

impl From<rusqlite::Error> for OpenError {
    fn from(e: rusqlite::Error) -> Self {
        OpenError::Db(e)
    }
}

/// Opens (creating if needed) `manager.db` in `data_dir`, holds it exclusively, so a second
/// server on the same directory fails instead of sharing ratchet state, and migrates it to the
/// newest schema version.
pub fn open(data_dir: &Path) -> Result<Connection, OpenError> {
    let path = data_dir.join(DB_FILE);
    let conn = Connection::open(&path)?;
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            log::warn!("cannot restrict {} to 0600: {e}", path.display());
        }
    }
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
    conn.pragma_update(None, "secure_delete", "ON")?;
    // In EXCLUSIVE mode a DELETE-mode journal is kept with its old page images (which may hold
    // a secret just zeroed in the database); TRUNCATE empties it at every commit.
    let mode: String = conn.query_row("PRAGMA journal_mode = TRUNCATE", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("truncate") {
        log::warn!("manager database did not switch to journal_mode TRUNCATE (it is {mode})");
    }
    conn.pragma_update(None, "synchronous", "FULL")?;
    // In EXCLUSIVE locking mode the first exclusive lock is kept for the connection's life:
    // take it now, so a second server fails here rather than at its first write.
    conn.execute_batch("BEGIN EXCLUSIVE; COMMIT;")?;
    migrations::migrate(&conn, STEPS).map_err(OpenError::Schema)?;
    Ok(conn)
}

// ── Identity ──

pub fn identity_seed(conn: &Connection) -> rusqlite::Result<Option<[u8; 32]>> {
    let seed: Option<Vec<u8>> =
        conn.query_row("SELECT seed FROM manager_identity WHERE id = 1", [], |r| r.get(0)).optional()?;
    Ok(seed.and_then(|s| s.try_into().ok()))
}

pub fn save_identity_seed(conn: &Connection, seed: &[u8; 32]) -> rusqlite::Result<()> {
    conn.execute("INSERT INTO manager_identity (id, seed) VALUES (1, ?1)", params![&seed[..]])?;
    Ok(())
}

/// Forgets everything tied to one platform account (its inbox seqs, users, pending work):
/// used when the platform database was replaced under a kept `manager.db`.
pub fn reset_dialog_state(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "DELETE FROM manager_scenarios; DELETE FROM manager_effects;
         DELETE FROM manager_outbox; DELETE FROM manager_outbox_ciphertexts;",
    )?;
    e2e::inbound::reset(conn)
}

// ── Scenarios ──

pub fn scenario(conn: &Connection, user_id: u64) -> rusqlite::Result<Scenario> {
    let row: Option<(String, Option<String>, Option<String>)> = conn
        .query_row(
            "SELECT step, username, display_name FROM manager_scenarios WHERE user_id = ?1",
            params![user_id as i64],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    Ok(match row {
        None => Scenario::Idle,
        Some((step, username, display_name)) => match (step.as_str(), username, display_name) {
            ("username", _, _) => Scenario::NewBotUsername,
            ("display_name", Some(username), _) => Scenario::NewBotDisplayName { username },
            ("capabilities", Some(username), Some(display_name)) => {
                Scenario::NewBotCapabilities { username, display_name }
            }
            (other, _, _) => {
                log::warn!("management bot: unreadable scenario step {other:?} of user {user_id}; starting over");
                Scenario::Idle
            }
        },
    })
}

pub fn set_scenario(conn: &Connection, user_id: u64, scenario: &Scenario) -> rusqlite::Result<()> {
    let (step, username, display_name) = match scenario {
        Scenario::Idle => {
            conn.execute("DELETE FROM manager_scenarios WHERE user_id = ?1", params![user_id as i64])?;
            return Ok(());
        }
        Scenario::NewBotUsername => ("username", None, None),
        Scenario::NewBotDisplayName { username } => ("display_name", Some(username.as_str()), None),
        Scenario::NewBotCapabilities { username, display_name } => {
            ("capabilities", Some(username.as_str()), Some(display_name.as_str()))
        }
    };
    conn.execute(
        "INSERT INTO manager_scenarios (user_id, step, username, display_name) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET step = excluded.step, username = excluded.username,
                                             display_name = excluded.display_name",
        params![user_id as i64, step, username, display_name],
    )?;
    Ok(())
}

// ── Effects between their two transactions ──

/// An effect with the token secret chosen for it.
#[derive(Clone, PartialEq, Eq)]
pub struct PendingEffect {
    pub id: i64,
    pub user_id: u64,
    pub effect: Effect,
    pub token_secret: Option<[u8; 32]>,
    /// A creation an earlier version recorded with a recovery secret it drew: finished with that
    /// secret (shown to its owner once, with a warning), never made again.
    pub legacy_recovery_secret: Option<Zeroizing<[u8; 32]>>,
}

impl std::fmt::Debug for PendingEffect {
    // Never print the secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingEffect")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("effect", &self.effect)
            .finish_non_exhaustive()
    }
}

pub fn insert_effect(conn: &Connection, user_id: u64, effect: &Effect, token_secret: Option<&[u8; 32]>) -> rusqlite::Result<i64> {
    let mut device_id = None;
    let mut identity_key = None;
    let (kind, bot_id, username, display_name, capabilities) = match effect {
        Effect::CreateBot { username, display_name, capabilities, identity_key: key } => {
            identity_key = Some(key.to_vec());
            ("create", None, username, Some(display_name), Some(capabilities))
        }
        Effect::Rekey { bot_id, username, identity_key: key } => {
            identity_key = Some(key.to_vec());
            ("rekey", Some(*bot_id as i64), username, None, None)
        }
        Effect::RotateToken { bot_id, username } => ("rotate", Some(*bot_id as i64), username, None, None),
        Effect::DisableBot { bot_id, username } => ("disable", Some(*bot_id as i64), username, None, None),
        Effect::RemoveDevice { bot_id, username, device_id: device } => {
            device_id = Some(*device);
            ("remove_device", Some(*bot_id as i64), username, None, None)
        }
    };
    conn.execute(
        "INSERT INTO manager_effects (user_id, kind, bot_id, username, display_name, capabilities,
                                      token_secret, device_id, identity_key)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            user_id as i64,
            kind,
            bot_id,
            username,
            display_name,
            capabilities,
            token_secret.map(|s| s.to_vec()),
            device_id,
            identity_key
        ],
    )?;
    Ok(conn.last_insert_rowid())
}

/// One row of `manager_effects` as stored.
struct EffectRow {
    id: i64,
    user_id: i64,
    kind: String,
    bot_id: Option<i64>,
    username: String,
    display_name: Option<String>,
    capabilities: Option<String>,
    recovery_secret: Option<Zeroizing<Vec<u8>>>,
    token_secret: Option<Vec<u8>>,
    device_id: Option<u32>,
    identity_key: Option<Vec<u8>>,
}

/// The oldest pending effect.
pub fn first_effect(conn: &Connection) -> rusqlite::Result<Option<PendingEffect>> {
    let row = conn
        .query_row(
            "SELECT id, user_id, kind, bot_id, username, display_name, capabilities, recovery_secret, token_secret,
                    device_id, identity_key
             FROM manager_effects ORDER BY id LIMIT 1",
            [],
            |r| {
                Ok(EffectRow {
                    id: r.get(0)?,
                    user_id: r.get(1)?,
                    kind: r.get(2)?,
                    bot_id: r.get(3)?,
                    username: r.get(4)?,
                    display_name: r.get(5)?,
                    capabilities: r.get(6)?,
                    recovery_secret: r.get::<_, Option<Vec<u8>>>(7)?.map(Zeroizing::new),
                    token_secret: r.get(8)?,
                    device_id: r.get(9)?,
                    identity_key: r.get(10)?,
                })
            },
        )
        .optional()?;
    let Some(row) = row else {
        return Ok(None);
    };
    let key32 = |v: Option<&[u8]>| v.and_then(|v| <[u8; 32]>::try_from(v).ok());
    let legacy_recovery_secret = key32(row.recovery_secret.as_deref().map(|v| v.as_slice())).map(Zeroizing::new);
    // A creation recorded before step 6 names no key: the one its secret derives.
    let identity_key = key32(row.identity_key.as_deref())
        .or_else(|| legacy_recovery_secret.as_ref().map(|s| IdentityKeyPair::from_recovery_secret(s).public_key()));
    let (id, username) = (row.id, row.username);
    let effect = match (row.kind.as_str(), row.bot_id, row.display_name, row.capabilities, identity_key) {
        ("create", _, Some(display_name), Some(capabilities), Some(identity_key)) => {
            Effect::CreateBot { username, display_name, capabilities, identity_key }
        }
        ("rekey", Some(bot_id), _, _, Some(identity_key)) => Effect::Rekey { bot_id: bot_id as u64, username, identity_key },
        ("rotate", Some(bot_id), _, _, _) => Effect::RotateToken { bot_id: bot_id as u64, username },
        ("disable", Some(bot_id), _, _, _) => Effect::DisableBot { bot_id: bot_id as u64, username },
        ("remove_device", Some(bot_id), _, _, _) if row.device_id.is_some() => {
            Effect::RemoveDevice { bot_id: bot_id as u64, username, device_id: row.device_id.unwrap_or_default() }
        }
        (kind, ..) => {
            log::error!("management bot: pending effect {id} ({kind}) is unreadable; dropping it");
            delete_effect(conn, id)?;
            return first_effect(conn);
        }
    };
    Ok(Some(PendingEffect {
        id,
        user_id: row.user_id as u64,
        effect,
        token_secret: key32(row.token_secret.as_deref()),
        legacy_recovery_secret,
    }))
}

pub fn delete_effect(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM manager_effects WHERE id = ?1", params![id])?;
    Ok(())
}

// ── Outbox ──

/// One reply waiting to be accepted by the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub id: i64,
    pub client_message_id: String,
    pub recipient_id: u64,
    /// The encoded `e2e::Content`.
    pub content: Vec<u8>,
    pub stale_rounds: u32,
    /// (device id, ciphertext), by device id.
    pub ciphertexts: Vec<(u32, Vec<u8>)>,
}

pub fn insert_outbox(
    conn: &Connection,
    client_message_id: &str,
    recipient_id: u64,
    content: &[u8],
    ciphertexts: &[(u32, Vec<u8>)],
) -> rusqlite::Result<i64> {
    conn.execute(
        "INSERT INTO manager_outbox (client_message_id, recipient_id, content) VALUES (?1, ?2, ?3)",
        params![client_message_id, recipient_id as i64, content],
    )?;
    let id = conn.last_insert_rowid();
    put_ciphertexts(conn, id, ciphertexts)?;
    Ok(id)
}

pub fn put_ciphertexts(conn: &Connection, outbox_id: i64, ciphertexts: &[(u32, Vec<u8>)]) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT OR REPLACE INTO manager_outbox_ciphertexts (outbox_id, device_id, ciphertext) VALUES (?1, ?2, ?3)",
    )?;
    for (device_id, ciphertext) in ciphertexts {
        stmt.execute(params![outbox_id, device_id, ciphertext])?;
    }
    Ok(())
}

pub fn remove_ciphertexts(conn: &Connection, outbox_id: i64, device_ids: &[u32]) -> rusqlite::Result<()> {
    let mut stmt =
        conn.prepare_cached("DELETE FROM manager_outbox_ciphertexts WHERE outbox_id = ?1 AND device_id = ?2")?;
    for device_id in device_ids {
        stmt.execute(params![outbox_id, device_id])?;
    }
    Ok(())
}

pub fn bump_stale_rounds(conn: &Connection, outbox_id: i64) -> rusqlite::Result<()> {
    conn.execute("UPDATE manager_outbox SET stale_rounds = stale_rounds + 1 WHERE id = ?1", params![outbox_id])?;
    Ok(())
}

/// The oldest unsent reply with its ciphertexts.
pub fn outbox_head(conn: &Connection) -> rusqlite::Result<Option<OutboxRow>> {
    let row = conn
        .query_row(
            "SELECT id, client_message_id, recipient_id, content, stale_rounds FROM manager_outbox ORDER BY id LIMIT 1",
            [],
            |r| {
                Ok(OutboxRow {
                    id: r.get(0)?,
                    client_message_id: r.get(1)?,
                    recipient_id: r.get::<_, i64>(2)? as u64,
                    content: r.get(3)?,
                    stale_rounds: r.get(4)?,
                    ciphertexts: Vec::new(),
                })
            },
        )
        .optional()?;
    let Some(mut row) = row else { return Ok(None) };
    let mut stmt = conn.prepare_cached(
        "SELECT device_id, ciphertext FROM manager_outbox_ciphertexts WHERE outbox_id = ?1 ORDER BY device_id",
    )?;
    let cts = stmt.query_map(params![row.id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    row.ciphertexts = cts.collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some(row))
}

pub fn delete_outbox(conn: &Connection, outbox_id: i64) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM manager_outbox_ciphertexts WHERE outbox_id = ?1", params![outbox_id])?;
    conn.execute("DELETE FROM manager_outbox WHERE id = ?1", params![outbox_id])?;
    Ok(())
}

#[cfg(test)]
pub fn outbox_len(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row("SELECT COUNT(*) FROM manager_outbox", [], |r| r.get::<_, i64>(0)).map(|n| n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_2_moves_the_manager_cursor_to_the_inbound_rule() {
        let c = Connection::open_in_memory().expect("db");
        migrations::migrate(&c, &STEPS[..1]).expect("version 1");
        c.execute("INSERT INTO manager_cursor (id, last_seq) VALUES (1, 42)", []).expect("old cursor");
        migrations::migrate(&c, STEPS).expect("version 2");
        assert_eq!(e2e::inbound::cursor(&c).expect("cursor"), 42);
    }

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = open(dir.path()).expect("open");
        (dir, conn)
    }

    #[test]
    fn scenarios_round_trip_and_idle_deletes() {
        let (_d, conn) = db();
        assert_eq!(scenario(&conn, 7).expect("read"), Scenario::Idle);
        for s in [
            Scenario::NewBotUsername,
            Scenario::NewBotDisplayName { username: "a_bot".into() },
            Scenario::NewBotCapabilities { username: "a_bot".into(), display_name: "A 🤖".into() },
        ] {
            set_scenario(&conn, 7, &s).expect("write");
            assert_eq!(scenario(&conn, 7).expect("read"), s);
        }
        assert_eq!(scenario(&conn, 8).expect("read"), Scenario::Idle, "per user");
        set_scenario(&conn, 7, &Scenario::Idle).expect("write");
        let rows: i64 = conn.query_row("SELECT COUNT(*) FROM manager_scenarios", [], |r| r.get(0)).expect("count");
        assert_eq!(rows, 0);
    }

    #[test]
    fn effects_keep_their_keys_and_order() {
        let (_d, conn) = db();
        assert!(first_effect(&conn).expect("read").is_none());
        let create = Effect::CreateBot {
            username: "c_bot".into(),
            display_name: "C".into(),
            capabilities: "dm".into(),
            identity_key: [7; 32],
        };
        let rotate = Effect::RotateToken { bot_id: 42, username: "r_bot".into() };
        let first = insert_effect(&conn, 5, &create, Some(&[2; 32])).expect("insert");
        insert_effect(&conn, 6, &rotate, Some(&[3; 32])).expect("insert");
        let p = first_effect(&conn).expect("read").expect("one");
        assert_eq!((p.id, p.user_id, &p.effect), (first, 5, &create));
        assert_eq!((p.token_secret, p.legacy_recovery_secret.is_none()), (Some([2; 32]), true));
        assert!(!format!("{p:?}").contains("[2, 2"), "Debug hides secrets");
        let stored: Option<Vec<u8>> =
            conn.query_row("SELECT recovery_secret FROM manager_effects WHERE id = ?1", [first], |r| r.get(0)).expect("row");
        assert_eq!(stored, None, "no identity secret is ever written");
        delete_effect(&conn, first).expect("delete");
        let p = first_effect(&conn).expect("read").expect("second");
        assert_eq!((p.effect, p.token_secret), (rotate, Some([3; 32])));
        delete_effect(&conn, p.id).expect("delete");
        let remove = Effect::RemoveDevice { bot_id: 42, username: "r_bot".into(), device_id: 3 };
        insert_effect(&conn, 6, &remove, None).expect("insert");
        let p = first_effect(&conn).expect("read").expect("third");
        assert_eq!(p.effect, remove, "the device number is kept");
        delete_effect(&conn, p.id).expect("delete");
        let rekey = Effect::Rekey { bot_id: 42, username: "r_bot".into(), identity_key: [9; 32] };
        insert_effect(&conn, 6, &rekey, None).expect("insert");
        assert_eq!(first_effect(&conn).expect("read").expect("fourth").effect, rekey, "the new key is kept");
    }

    /// A creation under way when an earlier version was stopped: the row it wrote (secret, no
    /// key) still reads after the upgrade, as a creation under the key its secret derives.
    #[test]
    fn step_6_reads_a_creation_an_earlier_version_recorded() {
        crate::crypto::init();
        let c = Connection::open_in_memory().expect("db");
        migrations::migrate(&c, &STEPS[..5]).expect("version 5");
        c.execute(
            "INSERT INTO manager_effects (user_id, kind, username, display_name, capabilities, recovery_secret, token_secret)
             VALUES (5, 'create', 'old_bot', 'Old', 'dm', ?1, ?2)",
            params![vec![1u8; 32], vec![2u8; 32]],
        )
        .expect("old row");
        migrations::migrate(&c, STEPS).expect("version 6");
        let p = first_effect(&c).expect("read").expect("the row");
        let key = IdentityKeyPair::from_recovery_secret(&[1; 32]).public_key();
        assert_eq!(
            p.effect,
            Effect::CreateBot { username: "old_bot".into(), display_name: "Old".into(), capabilities: "dm".into(), identity_key: key }
        );
        assert_eq!(p.legacy_recovery_secret.as_deref(), Some(&[1; 32]));
        assert_eq!(p.token_secret, Some([2; 32]));
    }

    #[test]
    fn outbox_is_ordered_and_ciphertexts_change() {
        let (_d, conn) = db();
        assert!(outbox_head(&conn).expect("read").is_none());
        let a = insert_outbox(&conn, "m-a", 9, b"content a", &[(2, vec![2]), (1, vec![1])]).expect("insert");
        insert_outbox(&conn, "m-b", 9, b"content b", &[]).expect("insert");
        assert!(insert_outbox(&conn, "m-a", 9, b"dup", &[]).is_err(), "client message ids are unique");
        let head = outbox_head(&conn).expect("read").expect("row");
        assert_eq!(head.id, a);
        assert_eq!(head.ciphertexts, vec![(1, vec![1]), (2, vec![2])]);
        remove_ciphertexts(&conn, a, &[1]).expect("remove");
        put_ciphertexts(&conn, a, &[(3, vec![3])]).expect("add");
        bump_stale_rounds(&conn, a).expect("bump");
        let head = outbox_head(&conn).expect("read").expect("row");
        assert_eq!(head.ciphertexts, vec![(2, vec![2]), (3, vec![3])]);
        assert_eq!(head.stale_rounds, 1);
        delete_outbox(&conn, a).expect("delete");
        assert_eq!(outbox_head(&conn).expect("read").expect("row").client_message_id, "m-b");
        assert_eq!(outbox_len(&conn).expect("len"), 1);
    }

    #[test]
    fn cursor_identity_and_exclusive_open() {
        let (dir, conn) = db();
        let cursor = |c: &Connection| e2e::inbound::cursor(c).expect("read");
        assert_eq!(cursor(&conn), 0);
        e2e::inbound::accept(&conn, 17, 5, "m").expect("write");
        assert_eq!(cursor(&conn), 17);
        assert_eq!(identity_seed(&conn).expect("read"), None);
        save_identity_seed(&conn, &[4; 32]).expect("write");
        assert_eq!(identity_seed(&conn).expect("read"), Some([4; 32]));
        // A second opener (another server on the same directory) is refused.
        let started = std::time::Instant::now();
        assert!(open(dir.path()).is_err(), "held exclusively");
        assert!(started.elapsed() < Duration::from_secs(30));
        drop(conn);
        let again = open(dir.path()).expect("free again");
        assert_eq!(cursor(&again), 17);
        reset_dialog_state(&again).expect("reset");
        assert_eq!(cursor(&again), 0);
        assert_eq!(identity_seed(&again).expect("read"), Some([4; 32]), "identity survives a reset");
        let mode = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(dir.path().join(DB_FILE)).expect("file").permissions().mode()
        };
        assert_eq!(mode & 0o777, 0o600);
    }
}
