//! Key packages: each device keeps a stock on the platform, and a member adding a user claims
//! one per device of theirs (the Welcome path). An expired one is never handed out (the adder
//! would refuse it) and is deleted; devices replace theirs long before (docs/groups.md).

use super::*;

/// Step 9 of `platform.db`: key packages stored before leaves carried proof (every one at the
/// time) would be refused by the members who add them; the devices upload new ones when they
/// see their stock is short.
pub(in crate::platform::store) const SCHEMA_DROP_UNPROVEN: &str = "DELETE FROM key_packages;";

/// Step 10 of platform.db: the end of each key package's lifetime (unix seconds). Rows of
/// earlier releases were made with openmls' default lifetime, counted from their upload.
pub const SCHEMA_KEY_PACKAGE_EXPIRY: &str = "
ALTER TABLE key_packages ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
UPDATE key_packages SET expires_at = created_at + 7257600;
";

/// The end of a key package's lifetime, as its (signed) leaf states it.
fn expiry(kp: &[u8]) -> Result<i64> {
    let not_after = mls::key_package_expiry(kp)
        .map_err(|e| PlatformError::InvalidArgument(format!("a key package to store: {e}")))?;
    Ok(i64::try_from(not_after).unwrap_or(i64::MAX))
}

/// Deletes a device's expired key packages.
fn drop_expired(tx: &Connection, addr: DeviceAddr, now: i64) -> Result<()> {
    tx.prepare_cached("DELETE FROM key_packages WHERE account_id = ?1 AND device_id = ?2 AND expires_at <= ?3")
        .and_then(|mut s| s.execute(params![addr.user_id, addr.device_id, now]))
        .map_err(db_error("deleting expired key packages"))?;
    Ok(())
}

impl Store {
    /// Keeps a device's key packages (checked by the caller), dropping its expired ones and
    /// the oldest beyond `KEY_PACKAGES_PER_DEVICE_MAX`; returns how many valid ones it holds now.
    pub fn upload_key_packages(&self, addr: DeviceAddr, packages: &[Vec<u8>], now: i64) -> Result<u32> {
        let expiries = packages.iter().map(|kp| expiry(kp)).collect::<Result<Vec<i64>>>()?;
        self.write_tx("a key package upload", |tx| {
            drop_expired(tx, addr, now)?;
            for (kp, expires_at) in packages.iter().zip(expiries) {
                tx.prepare_cached(
                    "INSERT INTO key_packages (account_id, device_id, key_package, created_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut s| s.execute(params![addr.user_id, addr.device_id, kp, now, expires_at]))
                .map_err(db_error("storing a key package"))?;
            }
            tx.prepare_cached(
                "DELETE FROM key_packages WHERE account_id = ?1 AND device_id = ?2 AND id NOT IN
                   (SELECT id FROM key_packages WHERE account_id = ?1 AND device_id = ?2 ORDER BY id DESC LIMIT ?3)",
            )
            .and_then(|mut s| s.execute(params![addr.user_id, addr.device_id, KEY_PACKAGES_PER_DEVICE_MAX]))
            .map_err(db_error("trimming key packages"))?;
            tx.prepare_cached("SELECT COUNT(*) FROM key_packages WHERE account_id = ?1 AND device_id = ?2")
                .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], |r| r.get(0)))
                .map_err(db_error("counting key packages"))
        })
    }

    /// Takes one key package (the newest) of each active device of `user_id` but `caller`;
    /// returns them and the devices that had none that is still valid.
    pub fn claim_key_packages(&self, caller: DeviceAddr, user_id: u64) -> Result<Claimed> {
        self.claim_key_packages_at(caller, user_id, crate::clock::unix_now())
    }

    /// `claim_key_packages` at the time `now`: expired key packages are deleted, not handed out.
    pub fn claim_key_packages_at(&self, caller: DeviceAddr, user_id: u64, now: i64) -> Result<Claimed> {
        self.write_tx("a key package claim", |tx| {
            profile(tx, user_id)?;
            let (mut taken, mut without) = (Vec::new(), Vec::new());
            for addr in active_devices(tx, user_id)? {
                if addr == caller {
                    continue;
                }
                drop_expired(tx, addr, now)?;
                let kp: Option<Vec<u8>> = tx
                    .prepare_cached(
                        "DELETE FROM key_packages WHERE id = (SELECT id FROM key_packages
                           WHERE account_id = ?1 AND device_id = ?2 ORDER BY id DESC LIMIT 1)
                         RETURNING key_package",
                    )
                    .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], |r| r.get(0)).optional())
                    .map_err(db_error("claiming a key package"))?;
                match kp {
                    Some(kp) => taken.push((addr.device_id, kp)),
                    None => without.push(addr.device_id),
                }
            }
            Ok((taken, without))
        })
    }
}
