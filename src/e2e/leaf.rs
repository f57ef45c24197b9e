//! Trusting a group leaf: the check every member makes of every new or changed leaf, so that
//! the platform alone cannot decide who reads a group.
//!
//! A leaf's credential carries its proof (`crypto::mls::LeafIdentity`): the account's identity
//! key and the device certificate by which that key vouches for the leaf's signature key. A
//! member accepts a leaf when
//! - the certificate verifies against the identity key it carries;
//! - that identity key is the one pinned for the user: the first key seen for a user is pinned
//!   (trust on first use; a bot's is its Bot ID), and a later leaf of the user under another
//!   key is refused; for this device's own user the key is its own account's;
//! - a device whose key this device already knows (from a private dialog) keeps that key.
//!
//! A leaf without proof (made before leaves carried one) is refused when it is new: the
//! platform could make one up. Leaves already in a group this device is in stay as they are.
//!
//! Like the rest of `e2e`, the functions write on the caller's connection (a pin is recorded in
//! the caller's transaction, and rolled back with it).

use rusqlite::{params, Connection, OptionalExtension};

use super::{device_key, registration, E2eError, Result};
use crate::clock::unix_now;
use crate::crypto::identity::{self, IdentityKeyPair};
use crate::crypto::mls::{self, LeafProof};
use crate::wire::platform::DeviceCertificateV2;

/// The tables of this module (schema step of each database that holds `e2e` tables): this
/// device's own proof, and the account identity key pinned for each user.
pub const TABLES: &str = "
    CREATE TABLE e2e_own_proof (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        identity_key BLOB NOT NULL,
        certificate BLOB NOT NULL
    );
    CREATE TABLE e2e_identity_pins (
        user_id INTEGER PRIMARY KEY,
        identity_key BLOB NOT NULL,
        pinned_at INTEGER NOT NULL
    );";

/// The second step of these tables (in each database's next step, with `removals::TABLES`):
/// this device's second-version certificate (`certify_own_device`) and whether the platform
/// has it.
pub const TABLES_V2: &str = "
    ALTER TABLE e2e_own_proof ADD COLUMN created_at INTEGER;
    ALTER TABLE e2e_own_proof ADD COLUMN certificate_v2 BLOB;
    ALTER TABLE e2e_own_proof ADD COLUMN v2_uploaded INTEGER NOT NULL DEFAULT 0;";

/// Records this device's proof (the account's identity key and its certificate over the device
/// key) for the leaves it makes. Idempotent: made with the device keys, and again at every
/// start, so a database made before leaves carried proof gets one. Under another identity
/// key than before, the second-version certificate is dropped (it is made again).
pub fn save_own_proof(conn: &Connection, account: &IdentityKeyPair) -> Result<()> {
    let identity_key = account.public_key();
    let certificate = identity::sign_device_certificate(account, &device_key(conn)?.public_key());
    conn.prepare_cached(
        "INSERT INTO e2e_own_proof (id, identity_key, certificate) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET
             created_at = CASE WHEN identity_key = excluded.identity_key THEN created_at END,
             certificate_v2 = CASE WHEN identity_key = excluded.identity_key THEN certificate_v2 END,
             v2_uploaded = CASE WHEN identity_key = excluded.identity_key THEN v2_uploaded ELSE 0 END,
             identity_key = excluded.identity_key, certificate = excluded.certificate",
    )?
    .execute(params![identity_key.to_vec(), certificate.to_vec()])?;
    Ok(())
}

/// This device's second-version certificate (`crypto::identity::sign_device_certificate_v2`),
/// made once the platform has given the device its id, and kept: the same certificate every
/// time after. Returns it as `CertifyDevice` sends it.
pub fn certify_own_device(
    conn: &Connection,
    account: &IdentityKeyPair,
    registration: super::Registration,
    now: i64,
) -> Result<DeviceCertificateV2> {
    save_own_proof(conn, account)?;
    let stored: (Option<i64>, Option<Vec<u8>>) =
        conn.prepare_cached("SELECT created_at, certificate_v2 FROM e2e_own_proof WHERE id = 1")?.query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let (created_at, signature) = match stored {
        (Some(created_at), Some(signature)) => (created_at, signature),
        _ => {
            let binding = identity::DeviceBinding { user_id: registration.user_id, device_id: registration.device_id, created_at: now };
            let signature = identity::sign_device_certificate_v2(account, &device_key(conn)?.public_key(), binding).to_vec();
            conn.prepare_cached("UPDATE e2e_own_proof SET created_at = ?1, certificate_v2 = ?2, v2_uploaded = 0 WHERE id = 1")?
                .execute(params![now, signature])?;
            (now, signature)
        }
    };
    Ok(DeviceCertificateV2 { created_at, signature, ..Default::default() })
}

/// Whether the platform took this device's second-version certificate.
pub fn own_certificate_v2_uploaded(conn: &Connection) -> Result<bool> {
    let uploaded: Option<bool> =
        conn.prepare_cached("SELECT v2_uploaded FROM e2e_own_proof WHERE id = 1")?.query_row([], |r| r.get(0)).optional()?;
    Ok(uploaded.unwrap_or(false))
}

/// Records that the platform took it (`CertifyDevice` answered).
pub fn set_own_certificate_v2_uploaded(conn: &Connection) -> Result<()> {
    conn.prepare_cached("UPDATE e2e_own_proof SET v2_uploaded = 1 WHERE id = 1")?.execute([])?;
    Ok(())
}

/// This device's proof, for the leaves it makes: the second version once there is one.
pub(super) fn own_proof(conn: &Connection) -> Result<LeafProof> {
    type Row = (Vec<u8>, Vec<u8>, Option<i64>, Option<Vec<u8>>);
    let row: Option<Row> = conn
        .prepare_cached("SELECT identity_key, certificate, created_at, certificate_v2 FROM e2e_own_proof WHERE id = 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .optional()?;
    let (identity_key, certificate, created_at, certificate_v2) = row.ok_or(E2eError::NotInitialized)?;
    let (certificate, created_at) = match (created_at, certificate_v2) {
        (Some(at), Some(v2)) => (v2, Some(at)),
        _ => (certificate, None),
    };
    Ok(LeafProof {
        identity_key: identity_key.try_into().map_err(|_| E2eError::Mls("the stored own identity key is damaged".into()))?,
        certificate: certificate.try_into().map_err(|_| E2eError::Mls("the stored own certificate is damaged".into()))?,
        created_at,
    })
}

/// The identity key pinned for `user_id`, if any: for this device's own user, its account's.
pub fn pinned_identity(conn: &Connection, user_id: u64) -> Result<Option<[u8; 32]>> {
    LeafCheck::new(conn)?.pinned(user_id)
}

/// Where an identity key the platform served for a user stands against the pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// None was pinned: this one is now (trust on first use).
    New,
    /// The pinned key.
    Same,
    /// Another key than the pinned one, which stays pinned.
    Changed { pinned: [u8; 32] },
}

/// Checks a served identity key against the one pinned for `user_id`, pinning it when none is:
/// the one rule for group leaves, private sessions and every profile `e2e-chat` looks up.
pub fn pin_identity(conn: &Connection, user_id: u64, identity_key: &[u8; 32]) -> Result<Pin> {
    LeafCheck::new(conn)?.pin(user_id, identity_key)
}

/// Pins `identity_key` for `user_id` in place of what was pinned: the person accepted a
/// changed key (`e2e-chat trust`).
pub fn repin_identity(conn: &Connection, user_id: u64, identity_key: &[u8; 32]) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO e2e_identity_pins (user_id, identity_key, pinned_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (user_id) DO UPDATE SET identity_key = excluded.identity_key, pinned_at = excluded.pinned_at",
    )?
    .execute(params![user_id as i64, identity_key.to_vec(), unix_now()])?;
    Ok(())
}

/// Checks the leaves of one step (a commit, a join, an add): this device's own user and
/// identity are read once, and the per-leaf statements are cached (a join checks every leaf of
/// the tree).
pub(super) struct LeafCheck<'c> {
    conn: &'c Connection,
    own: Option<(u64, [u8; 32])>,
}

impl<'c> LeafCheck<'c> {
    pub(super) fn new(conn: &'c Connection) -> Result<LeafCheck<'c>> {
        let own = match registration(conn)? {
            Some(reg) => Some((reg.user_id, own_proof(conn)?.identity_key)),
            None => None,
        };
        Ok(LeafCheck { conn, own })
    }

    fn pinned(&self, user_id: u64) -> Result<Option<[u8; 32]>> {
        if let Some((own_user, own_identity)) = self.own {
            if own_user == user_id {
                return Ok(Some(own_identity));
            }
        }
        let key: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT identity_key FROM e2e_identity_pins WHERE user_id = ?1")?
            .query_row(params![user_id as i64], |r| r.get(0))
            .optional()?;
        Ok(key.and_then(|k| k.try_into().ok()))
    }

    fn pin(&self, user_id: u64, identity_key: &[u8; 32]) -> Result<Pin> {
        Ok(match self.pinned(user_id)? {
            Some(pinned) if pinned != *identity_key => Pin::Changed { pinned },
            Some(_) => Pin::Same,
            None => {
                self.conn
                    .prepare_cached("INSERT INTO e2e_identity_pins (user_id, identity_key, pinned_at) VALUES (?1, ?2, ?3)")?
                    .execute(params![user_id as i64, identity_key.to_vec(), unix_now()])?;
                Pin::New
            }
        })
    }

    /// Checks one new or changed leaf (module doc); pins the user's identity key on first use.
    /// `Ok(Err(_))` for a leaf this device does not trust.
    pub(super) fn check(
        &self,
        credential: &openmls::prelude::Credential,
        signature_key: &[u8],
    ) -> Result<std::result::Result<(u64, u32), LeafRefusal>> {
        let Some(leaf) = mls::leaf_identity(credential) else {
            return Ok(Err(LeafRefusal { user_id: 0, device_id: 0, why: Untrusted::NoDevice }));
        };
        let refused = |why| Ok(Err(LeafRefusal { user_id: leaf.user_id, device_id: leaf.device_id, why }));
        if leaf.proof.is_none() {
            return refused(Untrusted::NoProof);
        }
        if super::store::is_removed(self.conn, leaf.user_id, leaf.device_id, signature_key)? {
            return refused(Untrusted::Removed);
        }
        let Some(identity_key) = leaf.vouching_key(signature_key) else {
            return refused(Untrusted::BadCertificate);
        };
        if let Pin::Changed { .. } = self.pin(leaf.user_id, &identity_key)? {
            return refused(Untrusted::IdentityChanged);
        }
        let known: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT device_key FROM e2e_peer_devices WHERE user_id = ?1 AND device_id = ?2")?
            .query_row(params![leaf.user_id as i64, leaf.device_id], |r| r.get(0))
            .optional()?;
        if known.is_some_and(|k| k != signature_key) {
            return refused(Untrusted::DeviceKeyChanged);
        }
        Ok(Ok((leaf.user_id, leaf.device_id)))
    }
}

/// A leaf this device refused, and why: what a security alert names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafRefusal {
    /// The user and device the leaf claims (0 when it names none).
    pub user_id: u64,
    pub device_id: u32,
    pub why: Untrusted,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Untrusted {
    /// The credential is not one of ours.
    NoDevice,
    /// A new leaf without proof.
    NoProof,
    /// The certificate does not verify the leaf's signature key under the identity key.
    BadCertificate,
    /// The identity key is not the one pinned for the user.
    IdentityChanged,
    /// The device is known under another key.
    DeviceKeyChanged,
    /// A claimed key package that names another device than the one asked for.
    NotRequested { user_id: u64, device_id: u32 },
    /// The account removed this device, or a device with this key, in a signed removal.
    Removed,
    /// An external joiner's commit removes a leaf other than its own earlier one (the same
    /// user and device under the same identity key): `(0, 0)` when it removes several.
    RemovesAnother { user_id: u64, device_id: u32 },
}

impl std::fmt::Display for LeafRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let LeafRefusal { user_id, device_id, why } = self;
        let who = format!("a leaf claiming device {device_id} of user {user_id}");
        match why {
            Untrusted::NoDevice => write!(f, "a leaf whose credential names no device"),
            Untrusted::NoProof => write!(f, "{who} carries no proof of its account"),
            Untrusted::BadCertificate => write!(f, "{who} carries a certificate that does not verify its key"),
            Untrusted::IdentityChanged => write!(f, "{who} is vouched for by another identity key than the one pinned for the user"),
            Untrusted::DeviceKeyChanged => write!(f, "{who} carries another key than the one known for that device"),
            Untrusted::Removed => write!(f, "{who} is a device its account removed (a signed removal)"),
            Untrusted::RemovesAnother { user_id: 0, device_id: 0 } => write!(f, "{who} joins by external commit and removes several leaves"),
            Untrusted::RemovesAnother { user_id: u, device_id: d } => {
                write!(f, "{who} joins by external commit and removes another leaf (device {d} of user {u})")
            }
            Untrusted::NotRequested { user_id: u, device_id: d } => {
                write!(f, "{who} was handed out for device {d} of user {u}")
            }
        }
    }
}
