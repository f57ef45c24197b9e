//! Devices, their one-time and signed prekeys, and prekey bundles.

use rusqlite::{params, Connection, OptionalExtension};

use super::device_proofs::{self, CertificateV2, SignedRemoval};
use super::group_log;
use super::{
    Bundle, DeviceAddr, DeviceInfo, DeviceRecord, NewDevice, Removal, SignedPrekey, Store, LAST_SEEN_EVERY_SECS,
    ONE_TIME_PREKEYS_MAX,
};
use crate::platform::error::{db_error, PlatformError, Result};

/// A device's key and the certificates its account signed over it, and its signed removal.
pub struct DeviceCertificate {
    pub device_id: u32,
    pub device_key: Vec<u8>,
    pub certificate: Vec<u8>,
    pub certificate_v2: Option<CertificateV2>,
    pub removal: Option<SignedRemoval>,
}

impl Store {
    /// Adds a device to a bot, or, when a device with the same device key exists, refreshes and
    /// reactivates it (a retried registration gets the same id). Returns the device id. A
    /// device the owner removed is refused: removal is final, a fresh `state_dir` makes a new one.
    pub fn register_bot_device(&self, bot_id: u64, device: &NewDevice, now: i64) -> Result<u32> {
        self.write_tx("bot device registration", |tx| {
            let existing: Option<(u32, Option<i64>)> = tx
                .query_row(
                    "SELECT device_id, removed_at FROM devices WHERE account_id = ?1 AND device_key = ?2",
                    params![bot_id, &device.device_key[..]],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(db_error("looking up a bot device"))?;
            let device_id = match existing {
                Some((device_id, Some(_))) => {
                    return Err(PlatformError::Unauthenticated(device_removed_message(bot_id, device_id)));
                }
                Some((device_id, None)) => {
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
                    insert_one_time_prekeys(tx, addr, &device.one_time_prekeys)?;
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
                    insert_device(tx, DeviceAddr { user_id: bot_id, device_id }, device, None, now)?;
                    device_id
                }
            };
            Ok(device_id)
        })
    }

    /// Marks a device inactive: senders stop encrypting to it (they get it in `removed_devices`).
    /// It reads nothing more of its groups (its cursors close).
    pub fn deactivate_device(&self, addr: DeviceAddr) -> Result<()> {
        self.write_tx("a device deactivation", |tx| {
            let changed = tx
                .execute(
                    "UPDATE devices SET active = 0 WHERE account_id = ?1 AND device_id = ?2",
                    params![addr.user_id, addr.device_id],
                )
                .map_err(db_error("deactivating a device"))?;
            if changed == 0 {
                return Err(PlatformError::NotFound(format!("no device {} of user {}", addr.device_id, addr.user_id)));
            }
            group_log::close_all(tx, addr)
        })
    }
    /// Removes a device for good (the owner's `/removedevice`): inactive, so senders get it in
    /// `removed_devices`; its undelivered inbox and one-time prekeys are dropped; its
    /// credential is refused from now on. Idempotent. The caller ends its open Inbox stream.
    pub fn remove_device(&self, addr: DeviceAddr, now: i64) -> Result<Removal> {
        self.write_tx("a device removal", |tx| remove_device_in(tx, addr, now))
    }

    /// Removes the device (if still active) and stores its signed removal (the caller checked
    /// the signature), in one transaction.
    pub fn remove_device_signed(&self, user_id: u64, removal: &SignedRemoval, now: i64) -> Result<Removal> {
        self.write_tx("a signed device removal", |tx| {
            let addr = DeviceAddr { user_id, device_id: removal.device_id };
            let outcome = remove_device_in(tx, addr, now)?;
            tx.execute(
                "INSERT INTO device_removals (account_id, device_id, device_key, removed_at, signature)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (account_id, device_id) DO UPDATE SET
                     device_key = excluded.device_key, removed_at = excluded.removed_at, signature = excluded.signature",
                params![user_id, removal.device_id, &removal.device_key[..], removal.removed_at, &removal.signature[..]],
            )
            .map_err(db_error("storing a signed removal"))?;
            Ok(outcome)
        })
    }

    /// Why a removed device of `addr.user_id` is refused, in the words the gateway reads: its
    /// certificate no longer verifies under the account's identity key when `/rekey` removed it,
    /// and still does after `/removedevice`.
    pub fn removal_message(&self, addr: DeviceAddr) -> Result<String> {
        let conn = self.lock();
        let row: Option<(Vec<u8>, Vec<u8>, Vec<u8>)> = conn
            .prepare_cached(
                "SELECT d.device_key, d.certificate, a.identity_key FROM devices d JOIN accounts a ON a.id = d.account_id
                 WHERE d.account_id = ?1 AND d.device_id = ?2",
            )
            .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
            .map_err(db_error("reading a removed device"))?;
        let moved = row.is_some_and(|(key, certificate, identity)| {
            crate::crypto::identity::verify_device_certificate(&identity, &key, &certificate).is_err()
        });
        Ok(if moved {
            identity_moved_message(addr.user_id, addr.device_id)
        } else {
            device_removed_message(addr.user_id, addr.device_id)
        })
    }

    /// Every device of the account (active and not), by id.
    pub fn account_devices(&self, user_id: u64) -> Result<Vec<DeviceInfo>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT d.device_id, d.created_at, d.last_seen, d.active, d.removed_at, d.device_key,
                        r.device_id IS NOT NULL
                 FROM devices d LEFT JOIN device_removals r ON r.account_id = d.account_id AND r.device_id = d.device_id
                 WHERE d.account_id = ?1 ORDER BY d.device_id",
            )
            .map_err(db_error("listing devices"))?;
        let rows = stmt
            .query_map(params![user_id], |r| {
                Ok(DeviceInfo {
                    device_id: r.get(0)?,
                    registered_at: r.get(1)?,
                    last_seen: r.get(2)?,
                    active: r.get(3)?,
                    removed_at: r.get(4)?,
                    device_key: r.get(5)?,
                    removal_signed: r.get(6)?,
                })
            })
            .map_err(db_error("listing devices"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_error("listing devices"))
    }

    /// Records that the device was seen at `now`: written at most once per
    /// `LAST_SEEN_EVERY_SECS` per device unless `force` (a stream closing), so a busy device
    /// does not write on every call. A failure is logged, never the caller's problem.
    pub fn device_seen(&self, addr: DeviceAddr, now: i64, force: bool) {
        {
            let mut written = self.seen_written.lock().unwrap_or_else(|p| p.into_inner());
            match written.get(&addr) {
                Some(at) if !force && now.saturating_sub(*at) < LAST_SEEN_EVERY_SECS => return,
                _ => {
                    written.insert(addr, now);
                }
            }
        }
        let result = self.lock().execute(
            "UPDATE devices SET last_seen = ?3 WHERE account_id = ?1 AND device_id = ?2",
            params![addr.user_id, addr.device_id, now],
        );
        if let Err(e) = result {
            log::warn!("cannot record when device {} of user {} was last seen: {e}", addr.device_id, addr.user_id);
        }
    }

    pub fn device(&self, addr: DeviceAddr) -> Result<Option<DeviceRecord>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT device_key, active, secret_digest, removed_at FROM devices
                 WHERE account_id = ?1 AND device_id = ?2",
            )
            .map_err(db_error("reading a device"))?;
        stmt.query_row(params![addr.user_id, addr.device_id], |r| {
            let digest: Option<Vec<u8>> = r.get(2)?;
            let removed_at: Option<i64> = r.get(3)?;
            Ok(DeviceRecord {
                addr,
                device_key: r.get(0)?,
                active: r.get(1)?,
                secret_digest: digest.and_then(|d| d.try_into().ok()),
                removed: removed_at.is_some(),
            })
        })
        .optional()
        .map_err(db_error("reading a device"))
    }

    /// The key and certificate of each of `device_ids` the account has or had (removed ones
    /// too), in order; an id it never had is left out. Reads only: no prekey is taken.
    pub fn device_certificates(&self, user_id: u64, device_ids: &[u32]) -> Result<Vec<DeviceCertificate>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT device_key, certificate FROM devices WHERE account_id = ?1 AND device_id = ?2")
            .map_err(db_error("reading device certificates"))?;
        let mut ids = device_ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let mut found = Vec::with_capacity(ids.len());
        for device_id in ids {
            let row: Option<(Vec<u8>, Vec<u8>)> = stmt
                .query_row(params![user_id, device_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(db_error("reading device certificates"))?;
            if let Some((device_key, certificate)) = row {
                let addr = DeviceAddr { user_id, device_id };
                let certificate_v2 = device_proofs::certificate_v2(&conn, addr)?;
                let removal = device_proofs::removal(&conn, addr)?;
                found.push(DeviceCertificate { device_id, device_key, certificate, certificate_v2, removal });
            }
        }
        Ok(found)
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

    /// Bundles of the account's active devices (all, or those listed; unknown or inactive
    /// listed ids are left out), each consuming one one-time prekey, in one transaction.
    pub fn take_prekey_bundles(&self, user_id: u64, device_ids: &[u32]) -> Result<Vec<Bundle>> {
        self.write_tx("a prekey fetch", |tx| {
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
                    let certificate_v2 = device_proofs::certificate_v2(tx, DeviceAddr { user_id, device_id })?;
                    bundles.push(Bundle { device_id, device_key, certificate, certificate_v2, signed_prekey, one_time_prekey: None });
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
            Ok(bundles)
        })
    }

    /// Adds one-time prekeys (an id already present is replaced) and optionally replaces the
    /// signed prekey. Returns how many one-time prekeys the device now holds.
    pub fn upload_prekeys(
        &self,
        addr: DeviceAddr,
        one_time_prekeys: &[(u32, [u8; 32])],
        signed_prekey: Option<&SignedPrekey>,
        replace: bool,
    ) -> Result<u32> {
        self.write_tx("a prekey upload", |tx| {
            if replace {
                // The device lost these secrets (a restored backup): none may be handed out.
                tx.execute("DELETE FROM one_time_prekeys WHERE account_id = ?1 AND device_id = ?2", params![addr.user_id, addr.device_id])
                    .map_err(db_error("dropping one-time prekeys"))?;
            }
            if let Some(spk) = signed_prekey {
                tx.execute(
                    "UPDATE devices SET spk_id = ?3, spk_public = ?4, spk_signature = ?5
                     WHERE account_id = ?1 AND device_id = ?2",
                    params![addr.user_id, addr.device_id, spk.id, &spk.public_key[..], &spk.signature[..]],
                )
                .map_err(db_error("rotating a signed prekey"))?;
            }
            insert_one_time_prekeys(tx, addr, one_time_prekeys)?;
            let count = count_one_time_prekeys(tx, addr)?;
            if count > ONE_TIME_PREKEYS_MAX {
                return Err(PlatformError::InvalidArgument(format!(
                    "device {} of user {} would hold {count} one-time prekeys; the limit is {ONE_TIME_PREKEYS_MAX}",
                    addr.device_id, addr.user_id
                )));
            }
            Ok(count)
        })
    }

    pub fn one_time_prekey_count(&self, addr: DeviceAddr) -> Result<u32> {
        let conn = self.lock();
        count_one_time_prekeys(&conn, addr)
    }
}

/// The refusal of a removed bot device's credential: its wording starts with
/// `wire::rpc::DEVICE_REMOVED`, which is how a gateway tells it from a revoked token.
/// `Store::remove_device` inside the caller's transaction (a rekey removes every device).
pub(super) fn remove_device_in(tx: &Connection, addr: DeviceAddr, now: i64) -> Result<Removal> {
    let removed_at: Option<Option<i64>> = tx
        .query_row(
            "SELECT removed_at FROM devices WHERE account_id = ?1 AND device_id = ?2",
            params![addr.user_id, addr.device_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_error("reading a device"))?;
    match removed_at {
        None => {
            return Err(PlatformError::NotFound(format!(
                "no device {} of user {}",
                addr.device_id, addr.user_id
            )))
        }
        Some(Some(_)) => return Ok(Removal::AlreadyRemoved),
        Some(None) => {}
    }
    tx.execute(
        "UPDATE devices SET active = 0, removed_at = ?3 WHERE account_id = ?1 AND device_id = ?2",
        params![addr.user_id, addr.device_id, now],
    )
    .map_err(db_error("removing a device"))?;
    // Sealed for a device that will never read again.
    let dropped = tx
        .execute(
            "DELETE FROM inbox WHERE account_id = ?1 AND device_id = ?2",
            params![addr.user_id, addr.device_id],
        )
        .map_err(db_error("dropping a removed device's inbox"))?;
    group_log::drop_all(tx, addr)?;
    tx.execute(
        "DELETE FROM one_time_prekeys WHERE account_id = ?1 AND device_id = ?2",
        params![addr.user_id, addr.device_id],
    )
    .map_err(db_error("dropping a removed device's prekeys"))?;
    Ok(Removal::Removed { dropped })
}

pub fn device_removed_message(bot_id: u64, device_id: u32) -> String {
    format!(
        "{} device {device_id} of bot {bot_id} was removed by the bot's owner via @BotManager /removedevice",
        crate::wire::rpc::DEVICE_REMOVED
    )
}

/// The refusal of a device of the bot's old identity: `/rekey` removed it (`wire::rpc::
/// IDENTITY_MOVED` tells the gateway to restart with the new secret rather than a new state).
pub fn identity_moved_message(bot_id: u64, device_id: u32) -> String {
    format!(
        "{} device {device_id} of bot {bot_id} belongs to the bot's old identity {}: its owner gave the bot a new one \
         via @BotManager /rekey",
        crate::wire::rpc::DEVICE_REMOVED,
        crate::wire::rpc::IDENTITY_MOVED
    )
}

fn to_array<const N: usize>(bytes: Vec<u8>, what: &str) -> Result<[u8; N]> {
    let len = bytes.len();
    bytes.try_into().map_err(|_| {
        log::error!("platform storage: stored {what} has {len} bytes, expected {N}");
        PlatformError::Internal(format!("stored {what} is corrupt"))
    })
}

pub(super) fn insert_device(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::store::tests::{device, store, user};
    use crate::platform::store;

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
    fn removal_is_final_drops_the_inbox_and_is_listed() {
        let (_d, store) = store();
        let (id, _) = store.create_bot("gone_bot", "Gone", "default", &[3; 32], None, 1).expect("create");
        store.register_bot_device(id, &device(1, 2), 10).expect("first");
        store.register_bot_device(id, &device(2, 2), 20).expect("second");
        let bob = user(&store, "bob", 2);
        let two = DeviceAddr { user_id: id, device_id: 2 };
        let sent = store.send_messages(bob, &[crate::platform::store::tests::msg("m1", id, &[1, 2])], 30).expect("send");
        assert!(sent.delivered_to.contains(&two));

        store.device_seen(two, 40, false);
        store.device_seen(two, 41, false); // throttled: within a minute
        assert_eq!(store.account_devices(id).expect("list")[1].last_seen, Some(40));
        store.device_seen(two, 41, true);
        assert_eq!(store.account_devices(id).expect("list")[1].last_seen, Some(41));

        assert_eq!(store.remove_device(two, 50).expect("remove"), Removal::Removed { dropped: 1 });
        assert_eq!(store.remove_device(two, 60).expect("again"), Removal::AlreadyRemoved);
        assert!(store.remove_device(DeviceAddr { user_id: id, device_id: 9 }, 60).is_err());
        assert!(store::read_inbox(&store.open_reader().expect("reader"), two, 0, 10).expect("read").is_empty());
        assert_eq!(store.active_device_ids(id).expect("active"), vec![1]);
        let listed = store.account_devices(id).expect("list");
        assert_eq!(listed.len(), 2);
        assert_eq!((listed[0].registered_at, listed[0].active, listed[0].removed_at), (10, true, None));
        assert_eq!((listed[1].registered_at, listed[1].active, listed[1].removed_at), (20, false, Some(50)));
        assert!(store.device(two).expect("read").expect("exists").removed);

        // Registering the removed device's key again is refused: removal is final.
        let err = store.register_bot_device(id, &device(2, 2), 70).expect_err("refused");
        assert!(err.message().starts_with(crate::wire::rpc::DEVICE_REMOVED), "{err}");
        assert_eq!(store.register_bot_device(id, &device(3, 2), 70).expect("a new key is a new device"), 3);
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
        assert_eq!(store.upload_prekeys(bob, &[(10, [1; 32]), (11, [2; 32])], None, false).expect("upload"), 2);
        let spk = SignedPrekey { id: 2, public_key: [5; 32], signature: [6; 64] };
        assert_eq!(store.upload_prekeys(bob, &[], Some(&spk), false).expect("rotate"), 2);
        let b4 = store.take_prekey_bundles(bob.user_id, &[]).expect("fetch");
        assert_eq!(b4[0].signed_prekey, spk);
        assert_eq!(b4[0].one_time_prekey.map(|p| p.0), Some(10));
        // A restored device replaces the stock: key 11, whose secret it lost, is never served.
        assert_eq!(store.upload_prekeys(bob, &[(2_000_000, [3; 32])], None, true).expect("replace"), 1);
        let b5 = store.take_prekey_bundles(bob.user_id, &[]).expect("fetch");
        assert_eq!(b5[0].one_time_prekey.map(|p| p.0), Some(2_000_000));
    }
}
