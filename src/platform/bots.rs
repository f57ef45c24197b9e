//! Provisioning a bot account: its identity key (whose hex public key is the Bot ID), a token,
//! and the one-time answer.
//!
//! Two ways in:
//! - `@BotManager`'s `/newbot` (`create_bot_for_key`): the owner's client drew the identity
//!   secret and proved the key (`e2e::bot_key`); the platform never holds the secret.
//! - `platform-server create-bot` on the operator's own host (`provision_bot`): the secret is
//!   drawn here, for the operator's own bots and for tests, and the command says so.
//!
//! Only the identity public key and the token digest are stored.

use zeroize::Zeroizing;

use super::error::Result;
use super::rules;
use super::store::Store;
use crate::crypto::{self, IdentityKeyPair};

/// Everything a bot operator needs, shown once at creation. Debug output leaves out the token
/// and the recovery secret.
#[derive(Clone, PartialEq, Eq)]
pub struct BotCredentials {
    /// `<numeric_id>:<64 hex>`.
    pub token: String,
    /// Hex of the identity public key.
    pub bot_id_hex: String,
    /// 64 hex characters (256 bits); derives the identity key. `None` when the owner's client
    /// drew it: the platform never had it.
    pub identity_recovery_secret_hex: Option<Zeroizing<String>>,
    /// The numeric id (token prefix, user id of the bot).
    pub compat_user_id: u64,
    pub username: String,
    pub first_name: String,
}

impl std::fmt::Debug for BotCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotCredentials")
            .field("bot_id_hex", &self.bot_id_hex)
            .field("compat_user_id", &self.compat_user_id)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl BotCredentials {
    /// The recovery secret in hex, when it was drawn here (`create-bot`).
    pub fn recovery_secret_hex(&self) -> Option<&str> {
        self.identity_recovery_secret_hex.as_deref().map(String::as_str)
    }

    /// One line of JSON:
    /// `{"token":…,"bot_id_hex":…,"identity_recovery_secret_hex":…,"compat_user_id":N,"username":…,"first_name":…}`.
    pub fn to_json_line(&self) -> String {
        let s = |v: &str| serde_json::to_string(v).expect("a string always serialises");
        format!(
            "{{\"token\":{},\"bot_id_hex\":{},\"identity_recovery_secret_hex\":{},\"compat_user_id\":{},\"username\":{},\"first_name\":{}}}",
            s(&self.token),
            s(&self.bot_id_hex),
            s(self.recovery_secret_hex().unwrap_or_default()),
            self.compat_user_id,
            s(&self.username),
            s(&self.first_name),
        )
    }
}

/// Creates a bot account (rules as for the management bot's /newbot) with a recovery secret
/// drawn here, and returns its credentials. `capabilities` is `default` or a comma list of dm,
/// groups, channels. For `create-bot` on the operator's host and for tests; the management bot
/// uses `create_bot_for_key`.
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
    pub recovery_secret: Zeroizing<[u8; 32]>,
    /// The token's secret part; the platform stores its digest only.
    pub token_secret: [u8; 32],
}

impl BotSecrets {
    pub fn generate() -> BotSecrets {
        BotSecrets { recovery_secret: Zeroizing::new(crypto::random_bytes()), token_secret: crypto::random_bytes() }
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
    let mut credentials = create_bot_for_key(
        store,
        username,
        display_name,
        capabilities,
        owner_id,
        &identity.public_key(),
        &secrets.token_secret,
    )?;
    credentials.identity_recovery_secret_hex = Some(Zeroizing::new(crypto::hex_encode(&secrets.recovery_secret[..])));
    Ok(credentials)
}

/// Creates a bot whose identity key someone else holds the secret of (the owner's client, at
/// `/newbot`): the credentials carry no recovery secret. Idempotent like `provision_bot_with`
/// (the same username, owner, key and token secret give the same bot).
pub fn create_bot_for_key(
    store: &Store,
    username: &str,
    display_name: &str,
    capabilities: &str,
    owner_id: Option<u64>,
    identity_key: &[u8; 32],
    token_secret: &[u8; 32],
) -> Result<BotCredentials> {
    let now = crate::clock::unix_now();
    let (id, token, existed) =
        store.create_bot_with_token(username, display_name, capabilities, identity_key, owner_id, token_secret, now)?;
    if existed {
        log::info!("bot {id} (@{username}) was already created by an earlier attempt");
    } else {
        log::info!("created bot {id} (@{username})");
    }
    Ok(BotCredentials {
        token,
        bot_id_hex: crypto::hex_encode(identity_key),
        identity_recovery_secret_hex: None,
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
            identity_recovery_secret_hex: Some(Zeroizing::new("ef".into())),
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
        assert!(!format!("{first:?}").contains(&first.token), "Debug leaves the token out");
    }
}
