//! A bot identity drawn on its owner's device, and the proof the platform checks before it
//! makes the key a bot's identity (`/newbot`) or a bot's next one (`/rekey`).
//!
//! The owner's client draws the 256-bit recovery secret, derives the identity key from it
//! (`IdentityKeyPair::from_recovery_secret`, the same derivation the gateway makes at start),
//! and sends only the public key (the Bot ID) with a signature over who asks for what and when
//! (`crypto::identity::bot_key_statement`). The platform never holds the secret, so it can
//! neither certify a device of the bot, nor sign its keyboards, nor open its `state_dir`.

use zeroize::Zeroizing;

use crate::crypto::identity::{self, BotKeyPurpose};
use crate::crypto::{self, IdentityKeyPair};
use crate::wire::e2e::BotKeyProof;

/// How far a proof's time may be from the platform's clock, either way.
pub const MAX_SKEW_SECS: i64 = 600;

/// A bot identity drawn here: the recovery secret and the key pair it derives.
pub struct DrawnBotKey {
    secret: Zeroizing<[u8; 32]>,
    identity: IdentityKeyPair,
}

impl DrawnBotKey {
    /// A fresh recovery secret from libsodium's generator.
    pub fn draw() -> DrawnBotKey {
        crypto::init();
        DrawnBotKey::from_secret(Zeroizing::new(crypto::random_bytes::<32>()))
    }

    /// The identity of a recovery secret drawn earlier (kept until the owner saved it).
    pub fn from_secret(secret: Zeroizing<[u8; 32]>) -> DrawnBotKey {
        let identity = IdentityKeyPair::from_recovery_secret(&secret);
        DrawnBotKey { secret, identity }
    }

    /// The recovery secret as the gateway config holds it (64 hex digits).
    pub fn secret_hex(&self) -> Zeroizing<String> {
        Zeroizing::new(crypto::hex_encode(&self.secret[..]))
    }

    pub fn secret(&self) -> &[u8; 32] {
        &self.secret
    }

    /// The Bot ID: the identity public key.
    pub fn public_key(&self) -> [u8; 32] {
        self.identity.public_key()
    }

    pub fn bot_id_hex(&self) -> String {
        crypto::hex_encode(&self.public_key())
    }

    /// The proof that goes to `@BotManager` with the owner's request.
    pub fn proof(&self, purpose: BotKeyPurpose, owner_user_id: u64, username: &str, capabilities: &str, now: i64) -> BotKeyProof {
        let statement = identity::bot_key_statement(purpose, owner_user_id, username, capabilities, now);
        BotKeyProof {
            identity_key: self.public_key().to_vec(),
            created_at: now,
            signature: self.identity.sign(&statement).to_vec(),
            ..Default::default()
        }
    }
}

impl std::fmt::Debug for DrawnBotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrawnBotKey").field("bot_id", &self.bot_id_hex()).finish_non_exhaustive()
    }
}

/// Why a proof was refused; each says what the owner's client must do differently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProofError {
    /// The key is not 32 bytes or the signature not 64.
    Malformed,
    /// The signature does not verify for this owner, username, capabilities and time: the
    /// client signed something else, or does not hold the key's secret.
    BadSignature,
    /// The time is more than `MAX_SKEW_SECS` from the platform's clock.
    Stale { skew_secs: i64 },
}

impl std::fmt::Display for ProofError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProofError::Malformed => f.write_str("the bot key proof is malformed (a 32-byte key and a 64-byte signature)"),
            ProofError::BadSignature => f.write_str(
                "the bot key proof does not verify for this owner, username and capabilities (it was made for another request)",
            ),
            ProofError::Stale { skew_secs } => write!(
                f,
                "the bot key proof was made {} s from the platform's clock (at most {MAX_SKEW_SECS} s): check the clock and try again",
                skew_secs.abs()
            ),
        }
    }
}

/// Checks `proof` for this request; the proven key on success.
pub fn check(
    proof: &BotKeyProof,
    purpose: BotKeyPurpose,
    owner_user_id: u64,
    username: &str,
    capabilities: &str,
    now: i64,
) -> Result<[u8; 32], ProofError> {
    let key: [u8; 32] = proof.identity_key.as_slice().try_into().map_err(|_| ProofError::Malformed)?;
    if proof.signature.len() != 64 {
        return Err(ProofError::Malformed);
    }
    let skew_secs = proof.created_at.saturating_sub(now);
    if skew_secs.abs() > MAX_SKEW_SECS {
        return Err(ProofError::Stale { skew_secs });
    }
    let statement = identity::bot_key_statement(purpose, owner_user_id, username, capabilities, proof.created_at);
    if !identity::verify_signature(&key, &statement, &proof.signature) {
        return Err(ProofError::BadSignature);
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_for_its_own_request_only() {
        let drawn = DrawnBotKey::draw();
        let now = 1_800_000_000;
        let proof = drawn.proof(BotKeyPurpose::Creation, 42, "cat_bot", "dm,groups", now);
        assert_eq!(check(&proof, BotKeyPurpose::Creation, 42, "cat_bot", "dm,groups", now + 5), Ok(drawn.public_key()));
        // The Bot ID is what the gateway derives from the same secret.
        let again = DrawnBotKey::from_secret(Zeroizing::new(*drawn.secret()));
        assert_eq!(again.bot_id_hex(), drawn.bot_id_hex());
        assert_eq!(IdentityKeyPair::from_recovery_secret(drawn.secret()).public_key(), drawn.public_key());
        for (purpose, owner, username, capabilities) in [
            (BotKeyPurpose::Rekey, 42, "cat_bot", "dm,groups"),
            (BotKeyPurpose::Creation, 43, "cat_bot", "dm,groups"),
            (BotKeyPurpose::Creation, 42, "dog_bot", "dm,groups"),
            (BotKeyPurpose::Creation, 42, "cat_bot", "default"),
        ] {
            assert_eq!(check(&proof, purpose, owner, username, capabilities, now), Err(ProofError::BadSignature));
        }
        assert_eq!(
            check(&proof, BotKeyPurpose::Creation, 42, "cat_bot", "dm,groups", now + MAX_SKEW_SECS + 1),
            Err(ProofError::Stale { skew_secs: -(MAX_SKEW_SECS + 1) })
        );
        let mut other_key = proof.clone();
        other_key.identity_key = DrawnBotKey::draw().public_key().to_vec();
        assert_eq!(check(&other_key, BotKeyPurpose::Creation, 42, "cat_bot", "dm,groups", now), Err(ProofError::BadSignature));
        let mut short = proof;
        short.signature.pop();
        assert_eq!(check(&short, BotKeyPurpose::Creation, 42, "cat_bot", "dm,groups", now), Err(ProofError::Malformed));
    }
}
