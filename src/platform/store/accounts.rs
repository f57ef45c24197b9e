//! Accounts: users and bots (one id space), bot tokens, the management bot's account, status.

use rusqlite::{params, Connection, OptionalExtension};

use super::devices::{insert_device, remove_device_in};
use super::{Account, AccountStatus, BotCredential, DeviceAddr, NewDevice, Store};
use crate::platform::error::{db_error, PlatformError, Result};
use crate::platform::rules;

/// `server_meta` key of the management bot's account id.
const META_MANAGER_ACCOUNT: &str = "manager_account_id";

impl Store {
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
        self.write_tx("create-bot", |tx| {
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
            ensure_username_free(tx, username)?;
            ensure_identity_key_free(tx, identity_key)?;
            let id = fresh_account_id(tx)?;
            tx.execute(
                "INSERT INTO accounts (id, username, display_name, is_bot, identity_key, token_digest,
                                       status, capabilities, owner_id, created_at)
                 VALUES (?1, ?2, ?3, 1, ?4, ?5, 'active', ?6, ?7, ?8)",
                params![id, username, display_name, &identity_key[..], &digest[..], capabilities, owner_id, now],
            )
            .map_err(db_error("inserting a bot account"))?;
            Ok((id, token(id), false))
        })
    }

    /// Gives a bot a new identity key (its owner proved it, `/rekey`) and removes every device
    /// of the old one: their certificates chain to a key that is no longer the bot's. The token
    /// stays. Idempotent: when the bot has this key already (a retry after a crash), nothing
    /// more changes. Returns the ids of the devices removed now.
    pub fn rekey_bot(&self, bot_id: u64, identity_key: &[u8; 32], now: i64) -> Result<Vec<u32>> {
        self.write_tx("a bot's new identity key", |tx| {
            let current: Option<Vec<u8>> = tx
                .query_row("SELECT identity_key FROM accounts WHERE id = ?1 AND is_bot = 1", params![bot_id], |r| r.get(0))
                .optional()
                .map_err(db_error("reading a bot's identity key"))?;
            match current {
                None => return Err(PlatformError::NotFound(format!("no bot with id {bot_id}"))),
                Some(key) if key.as_slice() == identity_key.as_slice() => return Ok(Vec::new()),
                Some(_) => {}
            }
            ensure_identity_key_free(tx, identity_key)?;
            tx.execute("UPDATE accounts SET identity_key = ?2 WHERE id = ?1", params![bot_id, &identity_key[..]])
                .map_err(db_error("replacing a bot's identity key"))?;
            let active: Vec<u32> = {
                let mut stmt = tx
                    .prepare("SELECT device_id FROM devices WHERE account_id = ?1 AND removed_at IS NULL ORDER BY device_id")
                    .map_err(db_error("listing a bot's devices"))?;
                let rows = stmt.query_map(params![bot_id], |r| r.get(0)).map_err(db_error("listing a bot's devices"))?;
                rows.collect::<rusqlite::Result<Vec<u32>>>().map_err(db_error("listing a bot's devices"))?
            };
            for &device_id in &active {
                remove_device_in(tx, DeviceAddr { user_id: bot_id, device_id }, now)?;
            }
            Ok(active)
        })
    }

    /// Whether any account has `identity_key` (a Bot ID must be one account's).
    pub fn identity_key_in_use(&self, identity_key: &[u8; 32]) -> Result<bool> {
        identity_key_taken(&self.lock(), identity_key)
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
        self.write_tx("the management bot's account setup", |tx| {
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
                    ensure_username_free(tx, username).map_err(|_| {
                        PlatformError::AlreadyExists(format!(
                            "username @{username} is taken by another account; choose another management bot username"
                        ))
                    })?;
                    let id = fresh_account_id(tx)?;
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
            Ok(id)
        })
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
        self.write_tx("user registration", |tx| {
            ensure_username_free(tx, username)?;
            let id = fresh_account_id(tx)?;
            tx.execute(
                "INSERT INTO accounts (id, username, display_name, is_bot, identity_key, status, created_at)
                 VALUES (?1, ?2, ?3, 0, ?4, 'active', ?5)",
                params![id, username, display_name, &identity_key[..], now],
            )
            .map_err(db_error("inserting a user account"))?;
            let addr = DeviceAddr { user_id: id, device_id: 1 };
            insert_device(tx, addr, device, Some(device_secret_digest), now)?;
            Ok(addr)
        })
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
}

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

fn ensure_username_free(conn: &Connection, username: &str) -> Result<()> {
    let taken: bool = conn
        .query_row("SELECT EXISTS (SELECT 1 FROM accounts WHERE username = ?1)", params![username], |r| r.get(0))
        .map_err(db_error("checking a username"))?;
    if taken {
        return Err(PlatformError::AlreadyExists(format!("username @{username} is already taken")));
    }
    Ok(())
}

fn identity_key_taken(conn: &Connection, identity_key: &[u8; 32]) -> Result<bool> {
    conn.query_row("SELECT EXISTS (SELECT 1 FROM accounts WHERE identity_key = ?1)", params![&identity_key[..]], |r| r.get(0))
        .map_err(db_error("checking an identity key"))
}

/// Refuses an identity key some account already has: a Bot ID names one account.
fn ensure_identity_key_free(conn: &Connection, identity_key: &[u8; 32]) -> Result<()> {
    if identity_key_taken(conn, identity_key)? {
        return Err(PlatformError::FailedPrecondition(
            "that key is already the identity of another account: draw a new one".into(),
        ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::store::tests::{device, msg, store, user};
    use crate::platform::store::{read_inbox, DB_FILE};

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

    /// A Bot ID is one account's; `/rekey` replaces it, removes every device of the old one and
    /// keeps the token; a retry changes nothing more.
    #[test]
    fn a_bot_gets_a_new_identity_key_its_old_devices_go_and_its_token_stays() {
        let (_d, store) = store();
        let (id, token) = store.create_bot("key_bot", "Key", "default", &[3; 32], Some(5), 1).expect("create");
        let err = store.create_bot("twin_key_bot", "Twin", "default", &[3; 32], Some(5), 1).expect_err("the same key");
        assert!(matches!(err, PlatformError::FailedPrecondition(_)), "{err:?}");
        assert!(store.identity_key_in_use(&[3; 32]).expect("read"));
        let first = store.register_bot_device(id, &device(30, 1), 1).expect("device");
        let second = store.register_bot_device(id, &device(31, 1), 1).expect("device");
        assert!(matches!(store.rekey_bot(id, &[3; 32], 2), Ok(removed) if removed.is_empty()), "its own key: nothing to do");
        user(&store, "holder", 0);
        assert!(matches!(store.rekey_bot(id, &[7; 32], 2), Err(PlatformError::FailedPrecondition(_))), "a user's key");
        assert_eq!(store.rekey_bot(id, &[4; 32], 2).expect("rekey"), vec![first, second]);
        assert_eq!(store.rekey_bot(id, &[4; 32], 3).expect("again"), Vec::<u32>::new(), "a retry removes nothing more");
        let cred = store.bot_credential(id).expect("read").expect("exists");
        assert_eq!(cred.identity_key, vec![4; 32]);
        assert_eq!(cred.token_digest, Some(rules::token_digest(&rules::parse_bot_token(&token).expect("token").secret)));
        assert!(store.account_devices(id).expect("devices").iter().all(|d| !d.active && d.removed_at == Some(2)));
        assert!(!store.identity_key_in_use(&[3; 32]).expect("read"), "the old key is free");
        assert!(matches!(store.rekey_bot(12345, &[5; 32], 2), Err(PlatformError::NotFound(_))));
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
}
