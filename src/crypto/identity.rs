//! Ed25519 signing key pairs and the statements they sign.
//!
//! A bot's identity key pair is derived from its 256-bit identity recovery secret, so the
//! Bot ID (the hex public key) can be checked against the secret at start-up.
//!
//! Every signed statement starts with its own fixed label, so a signature made for one purpose
//! can never be replayed as another.

use std::fmt;

use sodiumoxide::crypto::sign::ed25519;

use super::kdf::derive_key;
use super::{CryptoError, Result};

/// HKDF label turning the recovery secret into the bot identity seed.
const BOT_IDENTITY_LABEL: &str = "bot-gateway/bot-identity/v1";
/// Prefix of a device certificate statement.
const DEVICE_CERTIFICATE_LABEL: &[u8] = b"bot-gateway/device-certificate/v1\0";
/// Prefix of a bot device registration statement.
const BOT_REGISTRATION_LABEL: &[u8] = b"bot-gateway/bot-registration/v1\0";
/// Domain separation of inline keyboard contexts (see `keyboard_context_statement`).
const KEYBOARD_CONTEXT_LABEL: &[u8] = b"bot-gateway/keyboard-context/v1\0";
/// Prefix of a new bot identity key's proof of possession at `/newbot` (`bot_key_statement`).
const BOT_CREATION_LABEL: &[u8] = b"bot-gateway/bot-creation/v1\0";
/// Prefix of a bot's new identity key's proof at `/rekey` (`bot_key_statement`).
const BOT_REKEY_LABEL: &[u8] = b"bot-gateway/bot-rekey/v1\0";
/// Prefix of a device certificate that also binds the user, the device id and a time.
const DEVICE_CERTIFICATE_V2_LABEL: &[u8] = b"bot-gateway/device-certificate/v2\0";
/// Prefix of an account's signed removal of one of its devices.
const DEVICE_REMOVAL_LABEL: &[u8] = b"bot-gateway/device-removal/v1\0";

/// An Ed25519 key pair: an account identity key or a device key.
///
/// Debug output shows the public key only.
#[derive(Clone)]
pub struct IdentityKeyPair {
    // libsodium's types zero themselves on drop.
    seed: ed25519::Seed,
    secret: ed25519::SecretKey,
    public: [u8; 32],
}

impl IdentityKeyPair {
    pub fn generate() -> Self {
        Self::from_seed(&super::random_bytes::<32>())
    }
    /// The bot identity: HKDF-SHA256 of the recovery secret under a fixed label gives the seed.
    pub fn from_recovery_secret(secret: &[u8; 32]) -> Self {
        let mut seed = derive_key(secret, BOT_IDENTITY_LABEL);
        let pair = Self::from_seed(&seed);
        sodiumoxide::utils::memzero(&mut seed);
        pair
    }
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let seed = ed25519::Seed(*seed);
        let (public, secret) = ed25519::keypair_from_seed(&seed);
        IdentityKeyPair { seed, secret, public: public.0 }
    }
    /// The 32-byte seed; the only secret to persist.
    pub fn seed(&self) -> [u8; 32] {
        self.seed.0
    }
    pub fn public_key(&self) -> [u8; 32] {
        self.public
    }
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        ed25519::sign_detached(message, &self.secret).to_bytes()
    }
    /// The X25519 secret of this key pair, used as the X3DH identity DH key.
    pub(crate) fn x25519_secret(&self) -> Result<[u8; 32]> {
        let sk = ed25519::to_curve25519_sk(&self.secret)
            .map_err(|()| CryptoError::InvalidKey("device key (x25519 form)"))?;
        Ok(sk.0)
    }
}

impl fmt::Debug for IdentityKeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdentityKeyPair").field("public", &super::hex_encode(&self.public)).finish_non_exhaustive()
    }
}

/// The X25519 form of an Ed25519 public key (the peer's X3DH identity DH key).
pub(crate) fn x25519_public(ed25519_public: &[u8; 32]) -> Result<[u8; 32]> {
    let pk = ed25519::PublicKey(*ed25519_public);
    let x = ed25519::to_curve25519_pk(&pk).map_err(|()| CryptoError::InvalidKey("device key (not a valid point)"))?;
    Ok(x.0)
}

/// Verifies a detached Ed25519 signature; false on any malformed input.
pub fn verify_signature(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let Some(pk) = ed25519::PublicKey::from_slice(public_key) else {
        return false;
    };
    let Ok(sig) = <[u8; 64]>::try_from(signature) else {
        return false;
    };
    ed25519::verify_detached(&ed25519::Signature::from(sig), message, &pk)
}

/// What an account identity key signs to vouch for one of its devices.
pub fn device_certificate_statement(identity_key: &[u8; 32], device_key: &[u8; 32]) -> Vec<u8> {
    let mut s = Vec::with_capacity(DEVICE_CERTIFICATE_LABEL.len() + 64);
    s.extend_from_slice(DEVICE_CERTIFICATE_LABEL);
    s.extend_from_slice(identity_key);
    s.extend_from_slice(device_key);
    s
}

/// Signs a device certificate.
pub fn sign_device_certificate(identity: &IdentityKeyPair, device_key: &[u8; 32]) -> [u8; 64] {
    identity.sign(&device_certificate_statement(&identity.public_key(), device_key))
}

/// Checks a device certificate against the account identity key.
pub fn verify_device_certificate(identity_key: &[u8], device_key: &[u8], certificate: &[u8]) -> Result<()> {
    let identity: [u8; 32] = identity_key.try_into().map_err(|_| CryptoError::InvalidKey("identity key length"))?;
    let device: [u8; 32] = device_key.try_into().map_err(|_| CryptoError::InvalidKey("device key length"))?;
    if verify_signature(&identity, &device_certificate_statement(&identity, &device), certificate) {
        Ok(())
    } else {
        Err(CryptoError::BadSignature("device certificate"))
    }
}

/// What the bot identity key signs to register a new gateway device (proof of the recovery secret).
///
/// Layout: label, bot user id (u64 BE), device key length (u32 BE), device key, timestamp (i64 BE).
pub fn bot_registration_statement(bot_user_id: u64, device_key: &[u8], timestamp: i64) -> Vec<u8> {
    let mut s = Vec::with_capacity(BOT_REGISTRATION_LABEL.len() + 20 + device_key.len());
    s.extend_from_slice(BOT_REGISTRATION_LABEL);
    s.extend_from_slice(&bot_user_id.to_be_bytes());
    s.extend_from_slice(&(device_key.len() as u32).to_be_bytes());
    s.extend_from_slice(device_key);
    s.extend_from_slice(&timestamp.to_be_bytes());
    s
}

/// Why a bot identity key signs its owner's request: a new bot, or a new key for a bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BotKeyPurpose {
    /// `/newbot`: the key becomes the new bot's identity (its Bot ID).
    Creation,
    /// `/rekey`: the key replaces an existing bot's identity.
    Rekey,
}

/// What a bot identity key drawn on its owner's device signs, so the platform can check that
/// the owner holds its secret before it makes the key a bot's identity, and so that the proof
/// cannot serve another owner, username, capability set or moment.
///
/// Layout: the purpose's label, owner user id (u64 BE), username length (u32 BE), username
/// (UTF-8, as the owner gave it), capabilities length (u32 BE), capabilities (the canonical
/// form, `wire::bot_account::parse_capabilities`), time (i64 BE, unix seconds).
pub fn bot_key_statement(purpose: BotKeyPurpose, owner_user_id: u64, username: &str, capabilities: &str, time: i64) -> Vec<u8> {
    let label = match purpose {
        BotKeyPurpose::Creation => BOT_CREATION_LABEL,
        BotKeyPurpose::Rekey => BOT_REKEY_LABEL,
    };
    let mut s = Vec::with_capacity(label.len() + 24 + username.len() + capabilities.len());
    s.extend_from_slice(label);
    s.extend_from_slice(&owner_user_id.to_be_bytes());
    put_field(&mut s, username.as_bytes());
    put_field(&mut s, capabilities.as_bytes());
    s.extend_from_slice(&time.to_be_bytes());
    s
}

/// A length-prefixed field of a statement (u32 BE length, then the bytes).
fn put_field(s: &mut Vec<u8>, bytes: &[u8]) {
    s.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    s.extend_from_slice(bytes);
}

/// Who a device is, as its account's second-version certificate names it: besides the two
/// keys, the account's user id, the device id the platform gave it and when the device
/// made it, so a certificate cannot be moved to another device id or account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceBinding {
    pub user_id: u64,
    pub device_id: u32,
    /// Unix seconds.
    pub created_at: i64,
}

/// What an account identity key signs to vouch for one of its devices (version 2).
///
/// Layout: label, identity key, device key, user id (u64 BE), device id (u32 BE),
/// created_at (i64 BE).
pub fn device_certificate_v2_statement(identity_key: &[u8; 32], device_key: &[u8; 32], binding: DeviceBinding) -> Vec<u8> {
    let mut s = Vec::with_capacity(DEVICE_CERTIFICATE_V2_LABEL.len() + 84);
    s.extend_from_slice(DEVICE_CERTIFICATE_V2_LABEL);
    s.extend_from_slice(identity_key);
    s.extend_from_slice(device_key);
    s.extend_from_slice(&binding.user_id.to_be_bytes());
    s.extend_from_slice(&binding.device_id.to_be_bytes());
    s.extend_from_slice(&binding.created_at.to_be_bytes());
    s
}

/// Signs a version-2 device certificate.
pub fn sign_device_certificate_v2(identity: &IdentityKeyPair, device_key: &[u8; 32], binding: DeviceBinding) -> [u8; 64] {
    identity.sign(&device_certificate_v2_statement(&identity.public_key(), device_key, binding))
}

/// Checks a version-2 device certificate against the account identity key and the device it
/// must name.
pub fn verify_device_certificate_v2(identity_key: &[u8], device_key: &[u8], binding: DeviceBinding, certificate: &[u8]) -> Result<()> {
    let identity: [u8; 32] = identity_key.try_into().map_err(|_| CryptoError::InvalidKey("identity key length"))?;
    let device: [u8; 32] = device_key.try_into().map_err(|_| CryptoError::InvalidKey("device key length"))?;
    if verify_signature(&identity, &device_certificate_v2_statement(&identity, &device, binding), certificate) {
        Ok(())
    } else {
        Err(CryptoError::BadSignature("device certificate (version 2)"))
    }
}

/// What an account identity key signs to remove one of its devices for good: receivers that
/// saw it refuse the device from then on, whatever the platform serves later.
///
/// Layout: label, identity key, user id (u64 BE), device id (u32 BE), device key,
/// removed_at (i64 BE).
pub fn device_removal_statement(identity_key: &[u8; 32], user_id: u64, device_id: u32, device_key: &[u8; 32], removed_at: i64) -> Vec<u8> {
    let mut s = Vec::with_capacity(DEVICE_REMOVAL_LABEL.len() + 84);
    s.extend_from_slice(DEVICE_REMOVAL_LABEL);
    s.extend_from_slice(identity_key);
    s.extend_from_slice(&user_id.to_be_bytes());
    s.extend_from_slice(&device_id.to_be_bytes());
    s.extend_from_slice(device_key);
    s.extend_from_slice(&removed_at.to_be_bytes());
    s
}

/// What the bot identity key signs to bind an inline keyboard to its message: the label, then
/// the encoded `e2e.KeyboardContext` exactly as it travels. Any runtime of the bot checks a
/// press against it with the public identity key (the Bot ID).
pub fn keyboard_context_statement(context: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(KEYBOARD_CONTEXT_LABEL.len() + context.len());
    s.extend_from_slice(KEYBOARD_CONTEXT_LABEL);
    s.extend_from_slice(context);
    s
}

/// Signs an encoded keyboard context.
pub fn sign_keyboard_context(identity: &IdentityKeyPair, context: &[u8]) -> [u8; 64] {
    identity.sign(&keyboard_context_statement(context))
}

/// Whether `signature` is the bot identity's signature of the encoded keyboard context.
pub fn verify_keyboard_context(bot_identity_key: &[u8], context: &[u8], signature: &[u8]) -> bool {
    verify_signature(bot_identity_key, &keyboard_context_statement(context), signature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_secret_derivation_is_deterministic_and_distinct() {
        crate::crypto::init();
        let a1 = IdentityKeyPair::from_recovery_secret(&[1u8; 32]);
        let a2 = IdentityKeyPair::from_recovery_secret(&[1u8; 32]);
        let b = IdentityKeyPair::from_recovery_secret(&[2u8; 32]);
        assert_eq!(a1.public_key(), a2.public_key());
        assert_eq!(a1.seed(), a2.seed());
        assert_ne!(a1.public_key(), b.public_key());
        // The seed is derived, not the secret itself.
        assert_ne!(a1.seed(), [1u8; 32]);
        // Seed round trip gives the same key pair.
        assert_eq!(IdentityKeyPair::from_seed(&a1.seed()).public_key(), a1.public_key());
        assert_ne!(IdentityKeyPair::generate().public_key(), IdentityKeyPair::generate().public_key());
    }

    #[test]
    fn signatures_verify_and_tampering_fails() {
        crate::crypto::init();
        let k = IdentityKeyPair::generate();
        let sig = k.sign(b"hello");
        assert!(verify_signature(&k.public_key(), b"hello", &sig));
        assert!(!verify_signature(&k.public_key(), b"hellp", &sig));
        let mut bad = sig;
        bad[10] ^= 1;
        assert!(!verify_signature(&k.public_key(), b"hello", &bad));
        assert!(!verify_signature(&IdentityKeyPair::generate().public_key(), b"hello", &sig));
        assert!(!verify_signature(&k.public_key()[..31], b"hello", &sig));
        assert!(!verify_signature(&k.public_key(), b"hello", &sig[..63]));
    }

    #[test]
    fn device_certificate_verifies_and_tampering_fails() {
        crate::crypto::init();
        let account = IdentityKeyPair::generate();
        let device = IdentityKeyPair::generate();
        let cert = sign_device_certificate(&account, &device.public_key());
        assert_eq!(verify_device_certificate(&account.public_key(), &device.public_key(), &cert), Ok(()));
        let other = IdentityKeyPair::generate();
        assert_eq!(
            verify_device_certificate(&account.public_key(), &other.public_key(), &cert),
            Err(CryptoError::BadSignature("device certificate"))
        );
        let mut bad = cert;
        bad[0] ^= 0x80;
        assert!(verify_device_certificate(&account.public_key(), &device.public_key(), &bad).is_err());
        assert!(verify_device_certificate(&other.public_key(), &device.public_key(), &cert).is_err());
        assert!(verify_device_certificate(&account.public_key()[..5], &device.public_key(), &cert).is_err());
        // A registration signature over the same keys is not a certificate (domain separation).
        let reg = account.sign(&bot_registration_statement(1, &device.public_key(), 0));
        assert!(verify_device_certificate(&account.public_key(), &device.public_key(), &reg).is_err());
    }

    #[test]
    fn bot_key_statements_bind_every_field_and_their_purpose() {
        use BotKeyPurpose::{Creation, Rekey};
        let base = bot_key_statement(Creation, 7, "cat_bot", "dm,groups", 100);
        assert!(base.starts_with(BOT_CREATION_LABEL));
        for other in [
            bot_key_statement(Rekey, 7, "cat_bot", "dm,groups", 100),
            bot_key_statement(Creation, 8, "cat_bot", "dm,groups", 100),
            bot_key_statement(Creation, 7, "Cat_bot", "dm,groups", 100),
            bot_key_statement(Creation, 7, "cat_bot", "dm", 100),
            bot_key_statement(Creation, 7, "cat_bot", "dm,groups", 101),
            // The lengths keep the two strings apart.
            bot_key_statement(Creation, 7, "cat_botd", "m,groups", 100),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn a_version_2_certificate_binds_the_device_and_is_no_version_1_certificate() {
        crate::crypto::init();
        let account = IdentityKeyPair::generate();
        let device = IdentityKeyPair::generate().public_key();
        let binding = DeviceBinding { user_id: 5, device_id: 2, created_at: 1_700_000_000 };
        let cert = sign_device_certificate_v2(&account, &device, binding);
        assert_eq!(verify_device_certificate_v2(&account.public_key(), &device, binding, &cert), Ok(()));
        for relabelled in [
            DeviceBinding { device_id: 3, ..binding },
            DeviceBinding { user_id: 6, ..binding },
            DeviceBinding { created_at: 1_700_000_001, ..binding },
        ] {
            assert!(verify_device_certificate_v2(&account.public_key(), &device, relabelled, &cert).is_err());
        }
        assert!(verify_device_certificate(&account.public_key(), &device, &cert).is_err(), "not a v1 certificate");
        let v1 = sign_device_certificate(&account, &device);
        assert!(verify_device_certificate_v2(&account.public_key(), &device, binding, &v1).is_err(), "nor the reverse");
        let removal = account.sign(&device_removal_statement(&account.public_key(), 5, 2, &device, 1_700_000_000));
        assert!(verify_device_certificate_v2(&account.public_key(), &device, binding, &removal).is_err());
    }

    #[test]
    fn registration_statement_binds_every_field() {
        let base = bot_registration_statement(5, &[1, 2, 3], 100);
        assert_ne!(base, bot_registration_statement(6, &[1, 2, 3], 100));
        assert_ne!(base, bot_registration_statement(5, &[1, 2, 4], 100));
        assert_ne!(base, bot_registration_statement(5, &[1, 2, 3], 101));
        assert!(base.starts_with(BOT_REGISTRATION_LABEL));
    }
}
