//! X25519 key pairs, signed prekeys and one-time prekeys, with their storage encodings.
//!
//! Storage encodings are a versioned fixed binary layout (see `to_bytes`); they hold secrets and
//! belong only in the encrypted state database.

use std::fmt;

use sodiumoxide::crypto::scalarmult::curve25519;

use super::identity::verify_signature;
use super::{CryptoError, IdentityKeyPair, Result};

/// Prefix of what a device key signs to vouch for its signed prekey.
const SIGNED_PREKEY_LABEL: &[u8] = b"bot-gateway/signed-prekey/v1\0";
/// Version byte of the storage layouts below.
const STORAGE_VERSION: u8 = 1;

/// An X25519 key pair. Debug output shows the public key only; the secret is zeroed on drop.
#[derive(Clone)]
pub struct X25519KeyPair {
    pub public: [u8; 32],
    secret: [u8; 32],
}

impl X25519KeyPair {
    pub fn generate() -> Self {
        Self::from_secret(super::random_bytes::<32>())
    }
    /// Rebuilds the pair from its secret scalar (libsodium clamps it).
    pub(crate) fn from_secret(secret: [u8; 32]) -> Self {
        let scalar = curve25519::Scalar(secret);
        let public = curve25519::scalarmult_base(&scalar).0;
        X25519KeyPair { public, secret }
    }
    /// The pair from a secret and the public key stored with it (`from_secret` derived it when
    /// the pair was made), without deriving it again.
    pub(crate) fn from_parts(secret: [u8; 32], public: [u8; 32]) -> Self {
        X25519KeyPair { public, secret }
    }
    pub(crate) fn secret_bytes(&self) -> &[u8; 32] {
        &self.secret
    }
    /// X25519 with a peer public key; refuses low-order points (an all-zero shared secret).
    pub(crate) fn dh(&self, their_public: &[u8; 32]) -> Result<[u8; 32]> {
        dh(&self.secret, their_public)
    }
}

/// X25519 of a secret scalar and a public point; refuses low-order points.
pub(crate) fn dh(secret: &[u8; 32], their_public: &[u8; 32]) -> Result<[u8; 32]> {
    let scalar = curve25519::Scalar(*secret);
    let point = curve25519::GroupElement(*their_public);
    curve25519::scalarmult(&scalar, &point)
        .map(|shared| shared.0)
        .map_err(|()| CryptoError::InvalidKey("x25519 public key (low order)"))
}

impl Drop for X25519KeyPair {
    fn drop(&mut self) {
        sodiumoxide::utils::memzero(&mut self.secret);
    }
}

impl fmt::Debug for X25519KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("X25519KeyPair").field("public", &super::hex_encode(&self.public)).finish_non_exhaustive()
    }
}

/// What a device key signs over its signed prekey.
pub fn signed_prekey_statement(prekey: &[u8; 32]) -> Vec<u8> {
    let mut s = Vec::with_capacity(SIGNED_PREKEY_LABEL.len() + 32);
    s.extend_from_slice(SIGNED_PREKEY_LABEL);
    s.extend_from_slice(prekey);
    s
}

/// Checks a signed prekey signature against the device key that published it.
pub fn verify_signed_prekey(device_key: &[u8], prekey: &[u8; 32], signature: &[u8]) -> Result<()> {
    if verify_signature(device_key, &signed_prekey_statement(prekey), signature) {
        Ok(())
    } else {
        Err(CryptoError::BadSignature("signed prekey"))
    }
}

/// A medium-term prekey signed by the device key.
#[derive(Clone, Debug)]
pub struct SignedPrekeyPair {
    pub id: u32,
    pub key: X25519KeyPair,
    pub signature: [u8; 64],
}

/// Storage layout length: version, id (u32 BE), secret, signature.
const SIGNED_PREKEY_BYTES: usize = 1 + 4 + 32 + 64;
/// Storage layout length: version, id (u32 BE), secret.
const ONE_TIME_PREKEY_BYTES: usize = 1 + 4 + 32;

impl SignedPrekeyPair {
    pub fn generate(id: u32, device: &IdentityKeyPair) -> Self {
        let key = X25519KeyPair::generate();
        let signature = device.sign(&signed_prekey_statement(&key.public));
        SignedPrekeyPair { id, key, signature }
    }
    /// Layout: version 1, id (u32 BE), X25519 secret (32), signature (64).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SIGNED_PREKEY_BYTES);
        out.push(STORAGE_VERSION);
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(self.key.secret_bytes());
        out.extend_from_slice(&self.signature);
        out
    }
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != SIGNED_PREKEY_BYTES || bytes[0] != STORAGE_VERSION {
            return Err(CryptoError::Malformed("stored signed prekey"));
        }
        let id = u32::from_be_bytes(bytes[1..5].try_into().expect("4-byte slice"));
        let key = X25519KeyPair::from_secret(bytes[5..37].try_into().expect("32-byte slice"));
        let signature = bytes[37..101].try_into().expect("64-byte slice");
        Ok(SignedPrekeyPair { id, key, signature })
    }
}

/// A single-use prekey; its secret is deleted once a session has used it.
#[derive(Clone, Debug)]
pub struct OneTimePrekeyPair {
    pub id: u32,
    pub key: X25519KeyPair,
}

impl OneTimePrekeyPair {
    /// `count` fresh prekeys with ids `first_id..first_id + count`.
    pub fn generate_batch(first_id: u32, count: u32) -> Vec<Self> {
        (0..count)
            .map(|i| OneTimePrekeyPair { id: first_id.wrapping_add(i), key: X25519KeyPair::generate() })
            .collect()
    }
    /// Layout: version 1, id (u32 BE), X25519 secret (32).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ONE_TIME_PREKEY_BYTES);
        out.push(STORAGE_VERSION);
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(self.key.secret_bytes());
        out
    }
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != ONE_TIME_PREKEY_BYTES || bytes[0] != STORAGE_VERSION {
            return Err(CryptoError::Malformed("stored one-time prekey"));
        }
        let id = u32::from_be_bytes(bytes[1..5].try_into().expect("4-byte slice"));
        let key = X25519KeyPair::from_secret(bytes[5..37].try_into().expect("32-byte slice"));
        Ok(OneTimePrekeyPair { id, key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dh_agrees_and_refuses_low_order_points() {
        crate::crypto::init();
        let a = X25519KeyPair::generate();
        let b = X25519KeyPair::generate();
        assert_eq!(a.dh(&b.public), b.dh(&a.public));
        assert_ne!(a.public, b.public);
        assert_eq!(a.dh(&[0u8; 32]), Err(CryptoError::InvalidKey("x25519 public key (low order)")));
        assert!(!format!("{a:?}").contains(&crate::crypto::hex_encode(a.secret_bytes())));
    }

    #[test]
    fn signed_prekey_round_trips_and_verifies() {
        crate::crypto::init();
        let device = IdentityKeyPair::generate();
        let spk = SignedPrekeyPair::generate(7, &device);
        assert_eq!(verify_signed_prekey(&device.public_key(), &spk.key.public, &spk.signature), Ok(()));
        let other = IdentityKeyPair::generate();
        assert!(verify_signed_prekey(&other.public_key(), &spk.key.public, &spk.signature).is_err());
        let back = SignedPrekeyPair::from_bytes(&spk.to_bytes()).expect("decodes");
        assert_eq!((back.id, back.key.public, back.signature), (7, spk.key.public, spk.signature));
        assert_eq!(back.key.secret_bytes(), spk.key.secret_bytes());
        assert!(SignedPrekeyPair::from_bytes(&spk.to_bytes()[1..]).is_err());
        let mut wrong_version = spk.to_bytes();
        wrong_version[0] = 9;
        assert!(SignedPrekeyPair::from_bytes(&wrong_version).is_err());
    }

    #[test]
    fn one_time_prekeys_batch_and_round_trip() {
        crate::crypto::init();
        let batch = OneTimePrekeyPair::generate_batch(10, 3);
        assert_eq!(batch.iter().map(|k| k.id).collect::<Vec<_>>(), vec![10, 11, 12]);
        assert_ne!(batch[0].key.public, batch[1].key.public);
        let back = OneTimePrekeyPair::from_bytes(&batch[2].to_bytes()).expect("decodes");
        assert_eq!((back.id, back.key.public), (12, batch[2].key.public));
        assert!(OneTimePrekeyPair::from_bytes(&[]).is_err());
    }
}
