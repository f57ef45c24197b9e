//! MLS (RFC 9420) building blocks through openmls: the ciphersuite and group configuration
//! every client uses, the provider over a SQLite connection (openmls keeps its group state in
//! the same encrypted database as the device's sessions), the device key as MLS signer, and
//! the leaf credential that names a device.
//!
//! Every leaf of a group is one device. Its BasicCredential identity is
//! [`credential_identity`]: user id, device id, the account's identity key and the device
//! certificate by which that key vouches for the leaf's signature key (the device's Ed25519
//! device key). The platform checks it against the device's registration; every member checks
//! it against the identity key it pinned for the user (`e2e::leaf`), so the platform cannot
//! slip in a leaf of its own. Two runtimes of one bot are two devices with two keys (an external commit
//! removes an older leaf with the same key, so a shared key would make them evict each other).

use std::borrow::{Borrow, BorrowMut};

use openmls::prelude::tls_codec::Deserialize as _;
use openmls::prelude::*;
use openmls_rust_crypto::RustCrypto;
use openmls_sqlite_storage::SqliteStorageProvider;
use openmls_traits::signatures::{Signer, SignerError};
use rusqlite::Connection;

use super::identity::IdentityKeyPair;
use super::mls_codec::StorageCodec;

/// X25519, ChaCha20-Poly1305, SHA-256, Ed25519: the same primitives as the 1:1 sessions.
pub const CIPHERSUITE: Ciphersuite = Ciphersuite::MLS_128_DHKEMX25519_CHACHA20POLY1305_SHA256_Ed25519;

/// How many past epochs' secrets a member keeps to decrypt application messages that were
/// sent before a commit it merged. The platform orders everything and refuses an application
/// message of any epoch but the current one, so a message of an older epoch only ever reaches
/// a member after a commit *of its own*, merged when the platform accepted it, possibly before
/// its inbox had read the messages accepted just earlier. Another member's commit arrives in
/// order, after everything of the epoch it ends. So the window is the number of own commits
/// that can be accepted before the inbox passes the first: one, plus one for a second in a row
/// (a removal right after a self-update, or the reverse). Once the inbox has passed our latest
/// commit, `e2e::group::delete_past_epochs` deletes even these (forward secrecy; a removed
/// member can then no longer inject messages into old epochs).
pub const MAX_PAST_EPOCHS: usize = 2;

/// How long a key package, and the group leaf it becomes, is valid: openmls' default and its
/// maximum (12 weeks; a longer one is refused). Joins skip this check for leaves that were
/// never updated, each member updates its own leaf (`e2e::group::self_update`), and devices
/// replace key packages older than half of it.
pub const KEY_PACKAGE_LIFETIME_SECS: u64 = 60 * 60 * 24 * 28 * 3;

/// Handshake messages (commits) travel as PublicMessage so that the platform can check who
/// adds and removes whom; application messages are always encrypted (PrivateMessage).
pub fn wire_format_policy() -> WireFormatPolicy {
    MIXED_PLAINTEXT_WIRE_FORMAT_POLICY
}

/// The configuration of a group its creator starts: the ratchet tree travels inside each
/// GroupInfo, so an external joiner needs nothing else.
pub fn create_config() -> MlsGroupCreateConfig {
    create_config_lasting(KEY_PACKAGE_LIFETIME_SECS)
}

/// `create_config` with the creator's first leaf valid for `lifetime_secs`.
pub fn create_config_lasting(lifetime_secs: u64) -> MlsGroupCreateConfig {
    MlsGroupCreateConfig::builder()
        .ciphersuite(CIPHERSUITE)
        .lifetime(Lifetime::new(lifetime_secs))
        .use_ratchet_tree_extension(true)
        .wire_format_policy(wire_format_policy())
        .max_past_epochs(MAX_PAST_EPOCHS)
        .build()
}

/// The configuration of a member who joins (by Welcome or external commit).
pub fn join_config() -> MlsGroupJoinConfig {
    MlsGroupJoinConfig::builder()
        .use_ratchet_tree_extension(true)
        .wire_format_policy(wire_format_policy())
        .max_past_epochs(MAX_PAST_EPOCHS)
        .build()
}

/// What a leaf's credential says about its device: who it is, and the proof that the account
/// vouches for the leaf's signature key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafIdentity {
    pub user_id: u64,
    pub device_id: u32,
    /// `None` for a leaf made before leaves carried proof (a 12-byte identity).
    pub proof: Option<LeafProof>,
}

/// The account's identity key and its device certificate over the leaf's signature key (the
/// device key): `crypto::identity::verify_device_certificate` (or `_v2`) checks one against
/// the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafProof {
    pub identity_key: [u8; 32],
    pub certificate: [u8; 64],
    /// `Some(created_at)`: `certificate` is the second version, which also binds the user id
    /// and device id the credential names, and this time; `None`: the first version.
    pub created_at: Option<i64>,
}

impl LeafIdentity {
    /// The account identity key that vouches for `signature_key` in this credential; `None`
    /// when it carries no proof or its certificate does not verify that key (for a second
    /// version: under the user and device the credential names). The platform compares it with
    /// the account's registered key, a member with the key it pinned.
    pub fn vouching_key(&self, signature_key: &[u8]) -> Option<[u8; 32]> {
        let proof = self.proof?;
        let verified = match proof.created_at {
            None => super::identity::verify_device_certificate(&proof.identity_key, signature_key, &proof.certificate),
            Some(created_at) => {
                let binding = super::identity::DeviceBinding { user_id: self.user_id, device_id: self.device_id, created_at };
                super::identity::verify_device_certificate_v2(&proof.identity_key, signature_key, binding, &proof.certificate)
            }
        };
        verified.ok().map(|()| proof.identity_key)
    }
}

/// Bytes of a credential identity without proof (user id, device id), with a first-version
/// proof, and with a second-version one.
const IDENTITY_LEN: usize = 12;
const PROVEN_IDENTITY_LEN: usize = IDENTITY_LEN + 32 + 64;
const PROVEN_V2_IDENTITY_LEN: usize = IDENTITY_LEN + 32 + 8 + 64;

/// The credential identity of a device: user id (u64 BE), device id (u32 BE), then the
/// account's identity key (32 bytes), for a second-version certificate its time (i64 BE), and
/// the certificate (64 bytes).
pub fn credential_identity(user_id: u64, device_id: u32, proof: &LeafProof) -> Vec<u8> {
    let mut id = Vec::with_capacity(PROVEN_V2_IDENTITY_LEN);
    id.extend_from_slice(&user_id.to_be_bytes());
    id.extend_from_slice(&device_id.to_be_bytes());
    id.extend_from_slice(&proof.identity_key);
    if let Some(created_at) = proof.created_at {
        id.extend_from_slice(&created_at.to_be_bytes());
    }
    id.extend_from_slice(&proof.certificate);
    id
}

/// What a credential identity says; `None` for any shape but the three of ours.
pub fn parse_credential_identity(identity: &[u8]) -> Option<LeafIdentity> {
    let user_id = u64::from_be_bytes(identity.get(..8)?.try_into().ok()?);
    let device_id = u32::from_be_bytes(identity.get(8..12)?.try_into().ok()?);
    let proof = match identity.len() {
        IDENTITY_LEN => None,
        PROVEN_IDENTITY_LEN => Some(LeafProof {
            identity_key: identity[12..44].try_into().ok()?,
            certificate: identity[44..].try_into().ok()?,
            created_at: None,
        }),
        PROVEN_V2_IDENTITY_LEN => Some(LeafProof {
            identity_key: identity[12..44].try_into().ok()?,
            created_at: Some(i64::from_be_bytes(identity[44..52].try_into().ok()?)),
            certificate: identity[52..].try_into().ok()?,
        }),
        _ => return None,
    };
    Some(LeafIdentity { user_id, device_id, proof })
}

/// What a leaf's credential says, if it is a basic credential of our shape.
pub fn leaf_identity(credential: &Credential) -> Option<LeafIdentity> {
    let basic = BasicCredential::try_from(credential.clone()).ok()?;
    parse_credential_identity(basic.identity())
}

/// The (user id, device id) a leaf's credential names, proven or not (for naming and removing
/// leaves; trusting one is `e2e::leaf`'s check).
pub fn device_of(credential: &Credential) -> Option<(u64, u32)> {
    leaf_identity(credential).map(|l| (l.user_id, l.device_id))
}

/// A device's leaf credential with its signature key.
pub fn credential_with_key(user_id: u64, device_id: u32, proof: &LeafProof, signer: &DeviceSigner) -> CredentialWithKey {
    CredentialWithKey {
        credential: BasicCredential::new(credential_identity(user_id, device_id, proof)).into(),
        signature_key: signer.0.public_key().to_vec().into(),
    }
}

/// The device's Ed25519 key as openmls' signer: openmls hands over the labelled content to
/// sign, libsodium signs it (pure Ed25519).
pub struct DeviceSigner(pub IdentityKeyPair);

impl Signer for DeviceSigner {
    fn sign(&self, payload: &[u8]) -> Result<Vec<u8>, SignerError> {
        Ok(self.0.sign(payload).to_vec())
    }

    fn signature_scheme(&self) -> SignatureScheme {
        SignatureScheme::ED25519
    }
}

/// openmls' crypto and its storage over one borrowed connection: inside a writer job, every
/// MLS state change commits (or rolls back) with the rest of that job.
pub struct MlsProvider<C: Borrow<Connection>> {
    crypto: RustCrypto,
    storage: SqliteStorageProvider<StorageCodec, C>,
}

impl<C: Borrow<Connection>> MlsProvider<C> {
    pub fn new(conn: C) -> Self {
        MlsProvider { crypto: RustCrypto::default(), storage: SqliteStorageProvider::new(conn) }
    }
}

impl<C: Borrow<Connection>> OpenMlsProvider for MlsProvider<C> {
    type CryptoProvider = RustCrypto;
    type RandProvider = RustCrypto;
    type StorageProvider = SqliteStorageProvider<StorageCodec, C>;

    fn crypto(&self) -> &RustCrypto {
        &self.crypto
    }

    fn rand(&self) -> &RustCrypto {
        &self.crypto
    }

    fn storage(&self) -> &Self::StorageProvider {
        &self.storage
    }
}

/// Why one of the MLS helpers below failed.
#[derive(Debug)]
pub enum MlsError {
    /// openmls' own tables could not be created or upgraded.
    StorageMigrations(Box<dyn std::error::Error + Send + Sync>),
    /// The bytes are not exactly one MLSMessage.
    NotAMessage(tls_codec::Error),
    /// A message could not be serialised for the wire.
    Encoding(openmls::framing::errors::MlsMessageError),
    /// An MLSMessage that should be a KeyPackage is another kind.
    NotAKeyPackage,
    /// A KeyPackage whose signature or contents do not verify.
    BadKeyPackage(KeyPackageVerifyError),
}

impl std::fmt::Display for MlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MlsError::StorageMigrations(e) => write!(f, "openmls storage migrations: {e}"),
            MlsError::NotAMessage(e) => write!(f, "not an MLS message: {e}"),
            MlsError::Encoding(e) => write!(f, "encoding an MLS message: {e}"),
            MlsError::NotAKeyPackage => write!(f, "not a KeyPackage"),
            MlsError::BadKeyPackage(e) => write!(f, "does not verify: {e}"),
        }
    }
}

impl std::error::Error for MlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MlsError::StorageMigrations(e) => Some(e.as_ref()),
            MlsError::NotAMessage(e) => Some(e),
            MlsError::Encoding(e) => Some(e),
            MlsError::NotAKeyPackage => None,
            MlsError::BadKeyPackage(e) => Some(e),
        }
    }
}

/// Creates or upgrades openmls' own tables (`openmls_*`, versioned by the storage crate in
/// `openmls_sqlite_storage_migrations`) in a database, then the groups' versions on them
/// (`mls_versions`); call once at open.
pub fn migrate_storage<C: BorrowMut<Connection>>(mut conn: C) -> Result<(), MlsError> {
    SqliteStorageProvider::<StorageCodec, &mut Connection>::new(conn.borrow_mut())
        .run_migrations()
        .map_err(|e| MlsError::StorageMigrations(Box::new(e)))?;
    super::mls_versions::install(conn.borrow()).map_err(|e| MlsError::StorageMigrations(Box::new(e)))
}

/// Decodes an MLSMessage from the wire.
pub fn parse_message(bytes: &[u8]) -> Result<MlsMessageIn, MlsError> {
    MlsMessageIn::tls_deserialize_exact(bytes).map_err(MlsError::NotAMessage)
}

/// The end of a key package's lifetime (unix seconds), once its signature verifies.
pub fn key_package_expiry(bytes: &[u8]) -> Result<u64, MlsError> {
    let MlsMessageBodyIn::KeyPackage(kp) = parse_message(bytes)?.extract() else {
        return Err(MlsError::NotAKeyPackage);
    };
    let kp = kp.validate(&RustCrypto::default(), ProtocolVersion::Mls10).map_err(MlsError::BadKeyPackage)?;
    Ok(kp.life_time().not_after())
}

/// Serialises an MLSMessage for the wire.
pub fn to_bytes(message: &MlsMessageOut) -> Result<Vec<u8>, MlsError> {
    message.to_bytes().map_err(MlsError::Encoding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_identity_round_trips_and_refuses_other_shapes() {
        let proof = LeafProof { identity_key: [3; 32], certificate: [4; 64], created_at: None };
        let id = credential_identity(2061135349770142, 7, &proof);
        assert_eq!(id.len(), 108);
        let parsed = parse_credential_identity(&id).expect("ours");
        assert_eq!((parsed.user_id, parsed.device_id, parsed.proof), (2061135349770142, 7, Some(proof)));
        let v2 = LeafProof { created_at: Some(1_800_000_000), ..proof };
        let id2 = credential_identity(2061135349770142, 7, &v2);
        assert_eq!(id2.len(), 116);
        assert_eq!(parse_credential_identity(&id2).expect("ours").proof, Some(v2));
        let old = parse_credential_identity(&id[..12]).expect("an earlier leaf");
        assert_eq!((old.user_id, old.device_id, old.proof), (2061135349770142, 7, None));
        assert_eq!(parse_credential_identity(&id[..11]), None);
        assert_eq!(parse_credential_identity(&id[..107]), None);
        assert_eq!(parse_credential_identity(&[0u8; 13]), None);
    }

    #[test]
    fn the_device_signer_makes_signatures_the_device_key_verifies() {
        crate::crypto::init();
        let signer = DeviceSigner(IdentityKeyPair::generate());
        let sig = signer.sign(b"labelled content").unwrap();
        assert!(crate::crypto::identity::verify_signature(&signer.0.public_key(), b"labelled content", &sig));
        assert_eq!(signer.signature_scheme(), SignatureScheme::ED25519);
        let cwk = credential_with_key(5, 9, &LeafProof { identity_key: [1; 32], certificate: [2; 64], created_at: None }, &signer);
        assert_eq!(device_of(&cwk.credential), Some((5, 9)));
    }

    /// A second-version proof vouches for its leaf only under the user and device it names:
    /// the same credential bytes moved to another device id (or account) vouch for nothing.
    #[test]
    fn a_second_version_proof_cannot_be_relabelled() {
        crate::crypto::init();
        let account = IdentityKeyPair::generate();
        let signer = DeviceSigner(IdentityKeyPair::generate());
        let key = signer.0.public_key();
        let binding = crate::crypto::identity::DeviceBinding { user_id: 5, device_id: 9, created_at: 1_800_000_000 };
        let certificate = crate::crypto::identity::sign_device_certificate_v2(&account, &key, binding);
        let proof = LeafProof { identity_key: account.public_key(), certificate, created_at: Some(binding.created_at) };
        let leaf = parse_credential_identity(&credential_identity(5, 9, &proof)).expect("ours");
        assert_eq!(leaf.vouching_key(&key), Some(account.public_key()));
        for (user, device) in [(5, 10), (6, 9)] {
            let moved = parse_credential_identity(&credential_identity(user, device, &proof)).expect("ours");
            assert_eq!(moved.vouching_key(&key), None, "relabelled as device {device} of user {user}");
        }
        assert_eq!(leaf.vouching_key(&IdentityKeyPair::generate().public_key()), None, "another key");
    }
}
