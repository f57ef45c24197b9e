//! Devices their account removed for good: a removal signed by the account identity key
//! (`crypto::identity::device_removal_statement`), as the platform serves it with a user's
//! bundles and certificates. Once this device has checked one, it refuses that device, and its
//! key under any device id, as a session peer, as the sender of a first message and as a group
//! leaf, whatever the platform serves later: a removed device cannot come back on the
//! platform's word alone. (A removal the platform merely reports, unsigned, stops sessions too,
//! but only until the platform serves the device again.)
//!
//! A removal is checked against the identity key pinned for the user, or, for a user not met
//! yet, the key the platform serves with it (the one that is pinned next).

use rusqlite::{params, Connection};

use super::leaf::pinned_identity;
use super::{store, Result};
use crate::crypto::identity;
use crate::wire::platform::DeviceRemoval;

/// The table of this module (in each database's step with `leaf::TABLES_V2`).
pub const TABLES: &str = "
    CREATE TABLE e2e_removed_devices (
        user_id    INTEGER NOT NULL,
        device_id  INTEGER NOT NULL,
        device_key BLOB NOT NULL,
        removed_at INTEGER NOT NULL,
        PRIMARY KEY (user_id, device_id)
    );
    CREATE INDEX e2e_removed_devices_key ON e2e_removed_devices (user_id, device_key);";

/// Checks and records the signed removals the platform served for `user_id` with
/// `served_identity_key`; ends the sessions with the devices they remove. A removal whose
/// signature does not verify is ignored (logged). Returns the devices newly recorded.
pub fn record_removals(conn: &Connection, user_id: u64, served_identity_key: &[u8], removals: &[DeviceRemoval]) -> Result<Vec<u32>> {
    if removals.is_empty() {
        return Ok(Vec::new());
    }
    let identity_key = match pinned_identity(conn, user_id)? {
        Some(pinned) => pinned,
        None => match <[u8; 32]>::try_from(served_identity_key) {
            Ok(key) => key,
            Err(_) => return Ok(Vec::new()),
        },
    };
    let mut recorded = Vec::new();
    for r in removals {
        let Ok(device_key) = <[u8; 32]>::try_from(r.device_key.as_slice()) else { continue };
        let statement = identity::device_removal_statement(&identity_key, user_id, r.device_id, &device_key, r.removed_at);
        if !identity::verify_signature(&identity_key, &statement, &r.signature) {
            log::warn!("user {user_id} device {}: a removal not signed by the user's identity key was ignored", r.device_id);
            continue;
        }
        let new = conn
            .prepare_cached(
                "INSERT OR IGNORE INTO e2e_removed_devices (user_id, device_id, device_key, removed_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![user_id as i64, r.device_id, &device_key[..], r.removed_at])?;
        if new > 0 {
            store::delete_peer_device(conn, user_id, r.device_id)?;
            log::info!("user {user_id} device {}: removed by its account (signed); its sessions end", r.device_id);
            recorded.push(r.device_id);
        }
    }
    if !recorded.is_empty() {
        super::wal::secrets_deleted();
    }
    Ok(recorded)
}

/// Whether the account removed this device, or the device with this key, for good.
pub fn is_removed(conn: &Connection, user_id: u64, device_id: u32, device_key: &[u8]) -> Result<bool> {
    Ok(store::is_removed(conn, user_id, device_id, device_key)?)
}

/// A removal `account` signed, as the platform serves it (tests of every receiver).
#[cfg(test)]
pub(crate) fn signed_removal(account: &crate::crypto::IdentityKeyPair, user_id: u64, device_id: u32, key: &[u8; 32], at: i64) -> DeviceRemoval {
    let statement = identity::device_removal_statement(&account.public_key(), user_id, device_id, key, at);
    DeviceRemoval { device_id, device_key: key.to_vec(), removed_at: at, signature: account.sign(&statement).to_vec(), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::IdentityKeyPair;

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("db");
        super::super::create_all_tables(&c).expect("tables");
        c
    }

    fn removal(account: &IdentityKeyPair, user_id: u64, device_id: u32, key: &[u8; 32]) -> DeviceRemoval {
        signed_removal(account, user_id, device_id, key, 100)
    }

    #[test]
    fn a_signed_removal_is_kept_and_a_forged_one_ignored() {
        crate::crypto::init();
        let c = db();
        let account = IdentityKeyPair::generate();
        let key = IdentityKeyPair::generate().public_key();
        let forged = removal(&IdentityKeyPair::generate(), 7, 2, &key);
        assert_eq!(record_removals(&c, 7, &account.public_key(), &[forged]).expect("record"), Vec::<u32>::new());
        assert!(!is_removed(&c, 7, 2, &key).expect("read"));
        let signed = removal(&account, 7, 2, &key);
        assert_eq!(record_removals(&c, 7, &account.public_key(), &[signed.clone()]).expect("record"), vec![2]);
        assert!(is_removed(&c, 7, 2, &[0; 32]).expect("read"), "by its id");
        assert!(is_removed(&c, 7, 9, &key).expect("read"), "its key under another id");
        assert!(!is_removed(&c, 8, 2, &key).expect("read"), "another user");
        assert_eq!(record_removals(&c, 7, &account.public_key(), &[signed]).expect("again"), Vec::<u32>::new(), "once");
        // Under a pinned key, a removal signed by the key the platform serves now is ignored.
        let other = IdentityKeyPair::generate();
        super::super::leaf::pin_identity(&c, 9, &account.public_key()).expect("pin");
        let by_other = removal(&other, 9, 1, &key);
        assert_eq!(record_removals(&c, 9, &other.public_key(), &[by_other]).expect("record"), Vec::<u32>::new());
    }
}
