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
    let recovery_secret = crypto::random_bytes::<32>();
    let identity = IdentityKeyPair::from_recovery_secret(&recovery_secret);
    let public_key = identity.public_key();
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (id, token) = store.create_bot(username, display_name, capabilities, &public_key, owner_id, now)?;
    log::info!("created bot {id} (@{username})");
    Ok(BotCredentials {
        token,
        bot_id_hex: crypto::hex_encode(&public_key),
        identity_recovery_secret_hex: crypto::hex_encode(&recovery_secret),
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
}
