//! HKDF-SHA256 (RFC 5869) composed from libsodium's HMAC-SHA256, and labelled derivation.
//!
//! Only the composition lives here; the HMAC itself is libsodium's `crypto_auth_hmacsha256`
//! streaming interface, which accepts keys of any length as HMAC requires.

use sodiumoxide::crypto::auth::hmacsha256;

/// SHA-256 output length, and so the HKDF block size.
const HASH_LEN: usize = 32;

/// HKDF-Extract then Expand into `out` (at most 255 * 32 bytes).
///
/// An empty `salt` behaves as RFC 5869's default of `HashLen` zero bytes (HMAC pads the key
/// with zeros either way).
pub fn hkdf_sha256(salt: &[u8], ikm: &[u8], info: &[u8], out: &mut [u8]) {
    assert!(out.len() <= 255 * HASH_LEN, "HKDF-SHA256 output is limited to 255 blocks");
    // Extract: PRK = HMAC-Hash(salt, IKM).
    let mut prk = hmac_sha256(salt, ikm);
    // Expand: T(i) = HMAC-Hash(PRK, T(i-1) | info | i), OKM = T(1) | T(2) | ...
    let mut previous = [0u8; HASH_LEN];
    for (i, chunk) in out.chunks_mut(HASH_LEN).enumerate() {
        let mut state = hmacsha256::State::init(&prk);
        if i > 0 {
            state.update(&previous);
        }
        state.update(info);
        state.update(&[(i + 1) as u8]);
        previous = state.finalize().0;
        chunk.copy_from_slice(&previous[..chunk.len()]);
    }
    sodiumoxide::utils::memzero(&mut prk);
    sodiumoxide::utils::memzero(&mut previous);
}

/// A 32-byte key derived from a 32-byte secret under a label (domain separation).
pub fn derive_key(secret: &[u8; 32], label: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    hkdf_sha256(&[], secret, label.as_bytes(), &mut out);
    out
}

/// HMAC-SHA256.
pub fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut state = hmacsha256::State::init(key);
    state.update(data);
    state.finalize().0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::{hex_decode, hex_encode};

    #[test]
    fn hkdf_rfc5869_test_case_1() {
        crate::crypto::init();
        let ikm = [0x0bu8; 22];
        let salt = hex_decode("000102030405060708090a0b0c").expect("hex");
        let info = hex_decode("f0f1f2f3f4f5f6f7f8f9").expect("hex");
        let mut okm = [0u8; 42];
        hkdf_sha256(&salt, &ikm, &info, &mut okm);
        assert_eq!(
            hex_encode(&okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        );
        // The PRK of the same test case checks the extract step alone.
        assert_eq!(
            hex_encode(&hmac_sha256(&salt, &ikm)),
            "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5"
        );
    }

    #[test]
    fn hkdf_rfc5869_test_case_3_empty_salt_and_info() {
        crate::crypto::init();
        let ikm = [0x0bu8; 22];
        let mut okm = [0u8; 42];
        hkdf_sha256(&[], &ikm, &[], &mut okm);
        assert_eq!(
            hex_encode(&okm),
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
        );
    }

    #[test]
    fn derive_key_separates_labels() {
        crate::crypto::init();
        let secret = [7u8; 32];
        assert_ne!(derive_key(&secret, "a"), derive_key(&secret, "b"));
        assert_eq!(derive_key(&secret, "a"), derive_key(&secret, "a"));
    }
}
