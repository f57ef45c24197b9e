//! Devices, their one-time and signed prekeys, and prekey bundles.

use rusqlite::{params, Connection, OptionalExtension};

use super::{Bundle, DeviceAddr, DeviceRecord, NewDevice, SignedPrekey, Store, ONE_TIME_PREKEYS_MAX};
use crate::platform::error::{db_error, PlatformError, Result};

impl Store {
    /// Adds a device to a bot, or, when a device with the same device key exists, refreshes and
    /// reactivates it (a retried registration gets the same id). Returns the device id.
    pub fn register_bot_device(&self, bot_id: u64, device: &NewDevice, now: i64) -> Result<u32> {
        self.write_tx("bot device registration", |tx| {
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
    ) -> Result<u32> {
        self.write_tx("a prekey upload", |tx| {
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
}
