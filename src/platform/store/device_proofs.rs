//! What an account signs about its devices beyond the registration certificate: each device's
//! second-version certificate (it binds the user id, the device id and a time), and the signed
//! removal of a device. The platform checks both before storing them (`service::devices`) and
//! hands them to every receiver with the certificates and bundles it serves; receivers check
//! them again against the identity key they pinned (`e2e::removals`).

use rusqlite::{params, Connection, OptionalExtension};

use super::{DeviceAddr, Store};
use crate::platform::error::{db_error, Result};

/// Step 13: the second-version certificates and the signed removals.
pub const SCHEMA_DEVICE_PROOFS: &str = "
ALTER TABLE devices ADD COLUMN certificate_v2 BLOB;
ALTER TABLE devices ADD COLUMN certified_at INTEGER;
CREATE TABLE device_removals (
    account_id INTEGER NOT NULL,
    device_id  INTEGER NOT NULL,
    device_key BLOB NOT NULL,
    removed_at INTEGER NOT NULL,
    signature  BLOB NOT NULL,
    PRIMARY KEY (account_id, device_id)
);";

/// A device's second-version certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertificateV2 {
    pub created_at: i64,
    pub signature: [u8; 64],
}

/// An account's signed removal of one of its devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedRemoval {
    pub device_id: u32,
    pub device_key: [u8; 32],
    pub removed_at: i64,
    pub signature: [u8; 64],
}

impl Store {
    /// Stores a device's second-version certificate (the caller checked it).
    pub fn certify_device(&self, addr: DeviceAddr, certificate: &CertificateV2) -> Result<()> {
        self.lock()
            .execute(
                "UPDATE devices SET certificate_v2 = ?3, certified_at = ?4 WHERE account_id = ?1 AND device_id = ?2",
                params![addr.user_id, addr.device_id, &certificate.signature[..], certificate.created_at],
            )
            .map_err(db_error("storing a device certificate"))?;
        Ok(())
    }

    /// Every signed removal of the account's devices, by device id.
    pub fn signed_removals(&self, user_id: u64) -> Result<Vec<SignedRemoval>> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT device_id, device_key, removed_at, signature FROM device_removals
                 WHERE account_id = ?1 ORDER BY device_id",
            )
            .map_err(db_error("reading signed removals"))?;
        let rows = stmt.query_map(params![user_id], removal_from_row).map_err(db_error("reading signed removals"))?;
        let removals = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_error("reading signed removals"))?;
        Ok(removals.into_iter().flatten().collect())
    }
}

/// The second-version certificate of a device, if it gave one.
pub(super) fn certificate_v2(conn: &Connection, addr: DeviceAddr) -> Result<Option<CertificateV2>> {
    let row: Option<(Option<Vec<u8>>, Option<i64>)> = conn
        .prepare_cached("SELECT certificate_v2, certified_at FROM devices WHERE account_id = ?1 AND device_id = ?2")
        .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db_error("reading a device certificate"))?;
    Ok(match row {
        Some((Some(signature), Some(created_at))) => {
            signature.try_into().ok().map(|signature| CertificateV2 { created_at, signature })
        }
        _ => None,
    })
}

/// The signed removal of a device, if there is one.
pub(super) fn removal(conn: &Connection, addr: DeviceAddr) -> Result<Option<SignedRemoval>> {
    conn.prepare_cached(
        "SELECT device_id, device_key, removed_at, signature FROM device_removals WHERE account_id = ?1 AND device_id = ?2",
    )
    .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], removal_from_row).optional())
    .map(Option::flatten)
    .map_err(db_error("reading a signed removal"))
}

fn removal_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Option<SignedRemoval>> {
    let (device_id, key, removed_at, signature): (u32, Vec<u8>, i64, Vec<u8>) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
    Ok(match (key.try_into(), signature.try_into()) {
        (Ok(device_key), Ok(signature)) => Some(SignedRemoval { device_id, device_key, removed_at, signature }),
        _ => None,
    })
}
