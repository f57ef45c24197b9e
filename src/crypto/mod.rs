//! All cryptography of the project. Every libsodium call lives under this module, so the
//! binding could be swapped alone.
//!
//! - `identity`: Ed25519 signing key pairs (account identities, the bot identity derived from the
//!   recovery secret, device keys) and the statements they sign.
//! - `prekeys`: X25519 key pairs, signed prekeys and one-time prekeys.
//! - `x3dh`: the X3DH key agreement that starts a session.
//! - `ratchet`: the Double Ratchet session (`Session`) and its envelope format.
//! - `kdf`: HKDF-SHA256 composed from libsodium's HMAC-SHA256, and labelled key derivation.
//! - `file`: per-file encryption of media (secretstream in 64 KiB chunks) and the ciphertext's
//!   BLAKE2b-256 digest.
//! - `mls`: openmls' configuration, provider over SQLite, the device key as MLS signer and
//!   the leaf credential that names a device.
//! - `mls_versions`: a version per group, set by triggers on every write to its openmls rows.
//!
//! This module knows nothing of storage, the network or the Bot API.

mod error;
pub mod file;
pub mod fingerprint;
pub mod identity;
pub mod kdf;
pub mod mls;
pub mod mls_codec;
pub mod mls_versions;
pub mod prekeys;
pub mod ratchet;
pub mod x3dh;

pub use error::{CryptoError, Result};
pub use identity::IdentityKeyPair;
pub use prekeys::{OneTimePrekeyPair, SignedPrekeyPair, X25519KeyPair};
pub use ratchet::Session;
pub use x3dh::{PrekeyBundle, PrekeyHeader};

/// Initializes libsodium; call once at program start (idempotent).
pub fn init() {
    sodiumoxide::init().expect("libsodium initialises");
}

/// `N` bytes from libsodium's CSPRNG.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    sodiumoxide::randombytes::randombytes_into(&mut out);
    out
}

/// base64url (no padding) of `bytes`: for opaque identifiers that travel in URLs (file ids).
pub fn base64url_encode(bytes: &[u8]) -> String {
    sodiumoxide::base64::encode(bytes, sodiumoxide::base64::Variant::UrlSafeNoPadding)
}

/// A uniformly random integer in `0..upper` (upper > 0).
pub fn random_below(upper: u64) -> u64 {
    assert!(upper > 0, "random_below needs a positive bound");
    // Rejection sampling keeps the distribution uniform.
    let zone = u64::MAX - (u64::MAX % upper);
    loop {
        let v = u64::from_le_bytes(random_bytes::<8>());
        if v < zone {
            return v % upper;
        }
    }
}

/// BLAKE2b-256 of `data` (used to store token secrets as digests, never in clear).
pub fn digest(data: &[u8]) -> [u8; 32] {
    let d = sodiumoxide::crypto::generichash::hash(data, Some(32), None).expect("32 is a valid BLAKE2b length");
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Compares two byte strings in constant time (for secrets).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && sodiumoxide::utils::memcmp(a, b)
}

/// Lower-case hex.
pub fn hex_encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Decodes hex (either case); `None` on odd length or a non-hex character.
pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let b = s.as_bytes();
    if b.len() & 1 != 0 {
        return None;
    }
    b.chunks(2).map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?)).collect()
}

/// Decodes exactly 32 bytes of hex.
pub fn hex_decode_32(s: &str) -> Option<[u8; 32]> {
    hex_decode(s)?.try_into().ok()
}
