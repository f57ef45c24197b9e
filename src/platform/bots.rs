//! Provisioning a bot account: a fresh identity recovery secret, the identity key derived from
//! it (whose hex public key is the Bot ID), a token, and the one-time JSON answer.
//!
//! Used by `platform-server create-bot`, and by whatever else creates bots (the management bot).
//! Only the identity public key and the token digest are stored; the secrets are returned once.

use super::error::Result;
use super::rules;
use super::store::Store;
use crate::crypto::{self, IdentityKeyPair};

/// Everything a bot operator needs, shown once at creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotCredentials {
    /// `<numeric_id>:<64 hex>`.
    pub token: String,
    /// Hex of the identity public key.
    pub bot_id_hex: String,
    /// 64 hex characters (256 bits); derives the identity key.
    pub identity_recovery_secret_hex: String,
    /// The numeric id (token prefix, user id of the bot).
    pub compat_user_id: u64,
    pub username: String,
    pub first_name: String,
}

impl BotCredentials {
    /// One line of JSON:
    /// `{"token":…,"bot_id_hex":…,"identity_recovery_secret_hex":…,"compat_user_id":N,"username":…,"first_name":…}`.
    pub fn to_json_line(&self) -> String {
        let s = |v: &str| serde_json::to_string(v).expect("a string always serialises");
        format!(
            "{{\"token\":{},\"bot_id_hex\":{},\"identity_recovery_secret_hex\":{},\"compat_user_id\":{},\"username\":{},\"first_name\":{}}}",
            s(&self.token),
            s(&self.bot_id_hex),
            s(&self.identity_recovery_secret_hex),
            self.compat_user_id,
            s(&self.username),
            s(&self.first_name),
        )
    }
}

/// Creates a bot account (rules as for the management bot's /newbot) and returns its
/// credentials. `capabilities` is `default` or a comma list of dm, groups, channels.
pub fn provision_bot(
    store: &Store,
    username: &str,
    display_name: &str,
    capabilities: &str,
    owner_id: Option<u64>,
) -> Result<BotCredentials> {
    // Refuse bad input before making any secret.
    rules::validate_username(username)?;
    rules::validate_display_name(display_name)?;
    rules::parse_capabilities(capabilities)?;
    crypto::init();
    let secrets = BotSecrets::generate();
    provision_bot_with(store, username, display_name, capabilities, owner_id, &secrets)
}

/// The two secrets of a new bot, chosen before the account exists so that a creation can be
/// retried after a crash with the same result (see `provision_bot_with`).
pub struct BotSecrets {
    /// Derives the identity key; becomes `identity_recovery_secret_hex`.
    pub recovery_secret: [u8; 32],
    /// The token's secret part; the platform stores its digest only.
    pub token_secret: [u8; 32],
}

impl BotSecrets {
    pub fn generate() -> BotSecrets {
        BotSecrets { recovery_secret: crypto::random_bytes(), token_secret: crypto::random_bytes() }
    }
}

impl std::fmt::Debug for BotSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BotSecrets(..)")
    }
}

/// `provision_bot` with the secrets chosen by the caller. Idempotent: a repeat with the same
/// username, owner and secrets returns the same credentials instead of "username taken".
pub fn provision_bot_with(
    store: &Store,
    username: &str,
    display_name: &str,
    capabilities: &str,
    owner_id: Option<u64>,
    secrets: &BotSecrets,
) -> Result<BotCredentials> {
    let identity = IdentityKeyPair::from_recovery_secret(&secrets.recovery_secret);
    let public_key = identity.public_key();
    let now = crate::clock::unix_now();
    let (id, token, existed) = store.create_bot_with_token(
        username,
        display_name,
        capabilities,
        &public_key,
        owner_id,
        &secrets.token_secret,
        now,
    )?;
    if existed {
        log::info!("bot {id} (@{username}) was already created by an earlier attempt");
    } else {
        log::info!("created bot {id} (@{username})");
    }
    Ok(BotCredentials {
        token,
        bot_id_hex: crypto::hex_encode(&public_key),
        identity_recovery_secret_hex: crypto::hex_encode(&secrets.recovery_secret),
        compat_user_id: id,
        username: username.to_string(),
        first_name: display_name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line_has_the_fields_in_order() {
        let c = BotCredentials {
            token: "12:ab".into(),
            bot_id_hex: "cd".into(),
            identity_recovery_secret_hex: "ef".into(),
            compat_user_id: 12,
            username: "echo_bot".into(),
            first_name: "Echo \"Bot\"".into(),
        };
        let line = c.to_json_line();
        assert_eq!(
            line,
            r#"{"token":"12:ab","bot_id_hex":"cd","identity_recovery_secret_hex":"ef","compat_user_id":12,"username":"echo_bot","first_name":"Echo \"Bot\""}"#
        );
        let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
        assert_eq!(v["compat_user_id"], 12);
    }

    #[test]
    fn a_repeated_provision_with_the_same_secrets_returns_the_same_bot() {
        crypto::init();
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::open(dir.path()).expect("store");
        let secrets = BotSecrets::generate();
        let first = provision_bot_with(&store, "again_bot", "Again", "dm", Some(7), &secrets).expect("created");
        let second = provision_bot_with(&store, "again_bot", "Again", "dm", Some(7), &secrets).expect("repeat");
        assert_eq!(first, second);
        // Another owner or other secrets are a different request: the username is taken.
        let err = provision_bot_with(&store, "again_bot", "Again", "dm", Some(8), &secrets).expect_err("taken");
        assert_eq!(err.code(), grpcio::RpcStatusCode::ALREADY_EXISTS);
        let err = provision_bot_with(&store, "AGAIN_bot", "Again", "dm", Some(7), &BotSecrets::generate())
            .expect_err("taken");
        assert_eq!(err.code(), grpcio::RpcStatusCode::ALREADY_EXISTS);
        let parsed = rules::parse_bot_token(&first.token).expect("token");
        assert_eq!(parsed.numeric_id, first.compat_user_id);
        assert_eq!(parsed.secret, secrets.token_secret);
    }
}
