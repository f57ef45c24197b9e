//! Key packages: each device keeps a stock on the platform, and a member adding a user claims
//! one per device of theirs (the Welcome path).

use super::*;

/// Step 9 of `platform.db`: key packages stored before leaves carried proof (every one at the
/// time) would be refused by the members who add them; the devices upload new ones when they
/// see their stock is short.
pub(in crate::platform::store) const SCHEMA_DROP_UNPROVEN: &str = "DELETE FROM key_packages;";

impl Store {
    /// Keeps a device's key packages (checked by the caller), dropping the oldest beyond
    /// `KEY_PACKAGES_PER_DEVICE_MAX`; returns how many it holds now.
    pub fn upload_key_packages(&self, addr: DeviceAddr, packages: &[Vec<u8>], now: i64) -> Result<u32> {
        self.write_tx("a key package upload", |tx| {
            for kp in packages {
                tx.prepare_cached(
                    "INSERT INTO key_packages (account_id, device_id, key_package, created_at) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute(params![addr.user_id, addr.device_id, kp, now]))
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
    /// returns them and the devices that had none.
    pub fn claim_key_packages(&self, caller: DeviceAddr, user_id: u64) -> Result<Claimed> {
        self.write_tx("a key package claim", |tx| {
            profile(tx, user_id)?;
            let (mut taken, mut without) = (Vec::new(), Vec::new());
            for addr in active_devices(tx, user_id)? {
                if addr == caller {
                    continue;
                }
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
