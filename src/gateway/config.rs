//! The gateway configuration file: parsing, validation and the permission checks.
//!
//! The file has exactly the fields of the spec's table; an unknown field is refused so that a
//! typo does not silently fall back to a default.

use std::fmt;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::wire::token;
use crate::crypto::{self, IdentityKeyPair};

pub use crate::compat::COMPATIBILITY_PROFILE_ID;

pub struct Config {
    pub bot_platform_endpoint: String,
    pub compat_listen_addr: SocketAddr,
    pub extensions_listen_addr: SocketAddr,
    pub state_dir: PathBuf,
    pub bots: Vec<BotConfig>,
}

pub struct BotConfig {
    pub bot_id_hex: String,
    pub token: String,
    pub recovery_secret: [u8; 32],
    pub compat_user_id: u64,
    pub username: String,
    pub first_name: String,
}

impl fmt::Debug for BotConfig {
    // Never print the token secret or the recovery secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BotConfig")
            .field("compat_user_id", &self.compat_user_id)
            .field("username", &self.username)
            .field("bot_id_hex", &self.bot_id_hex)
            .finish_non_exhaustive()
    }
}

impl BotConfig {
    /// The bot identity key pair derived from the recovery secret.
    pub fn identity(&self) -> IdentityKeyPair {
        IdentityKeyPair::from_recovery_secret(&self.recovery_secret)
    }
}

/// Reads and validates the config file. Every error names the file, the field and the fix.
pub fn load(path: &Path) -> Result<Config, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "config {} is readable by group or others (mode {mode:o}); it holds bot secrets: run chmod 600 {}",
            path.display(),
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("config {} is not valid JSON: {e}", path.display()))?;
    parse(&value).map_err(|e| format!("config {}: {e}", path.display()))
}

/// Validates a parsed config document.
pub fn parse(value: &Value) -> Result<Config, String> {
    let obj = value.as_object().ok_or("the top level must be a JSON object")?;
    only_fields(
        obj,
        "",
        &[
            "compatibility_profile_id",
            "bot_platform_endpoint",
            "compat_listen_addr",
            "extensions_listen_addr",
            "state_dir",
            "bots",
        ],
    )?;
    let profile = string(obj, "compatibility_profile_id")?;
    if profile != COMPATIBILITY_PROFILE_ID {
        return Err(format!(
            "compatibility_profile_id is {profile:?}, but this gateway implements {COMPATIBILITY_PROFILE_ID:?}"
        ));
    }
    let endpoint = string(obj, "bot_platform_endpoint")?;
    let (tls, addr) = crate::wire::connect::parse_endpoint(&endpoint).map_err(|e| format!("bot_platform_endpoint: {e}"))?;
    if !tls && !is_loopback_host(&addr) {
        log::warn!("bot_platform_endpoint {endpoint} is plain http:// to a non-loopback host; use https://");
    }
    let compat_listen_addr = socket_addr(obj, "compat_listen_addr")?;
    let extensions_listen_addr = socket_addr(obj, "extensions_listen_addr")?;
    if compat_listen_addr == extensions_listen_addr && compat_listen_addr.port() != 0 {
        return Err("compat_listen_addr and extensions_listen_addr must differ".into());
    }
    let state_dir = PathBuf::from(string(obj, "state_dir")?);
    if state_dir.as_os_str().is_empty() {
        return Err("state_dir is empty".into());
    }
    let bots_value = obj.get("bots").ok_or("missing field bots")?;
    let bots_array = bots_value.as_array().ok_or("bots must be an array")?;
    if bots_array.is_empty() {
        return Err("bots is empty: configure at least one bot".into());
    }
    let mut bots: Vec<BotConfig> = Vec::new();
    for (i, b) in bots_array.iter().enumerate() {
        let bot = parse_bot(b).map_err(|e| format!("bots[{i}]: {e}"))?;
        if bots.iter().any(|o| o.compat_user_id == bot.compat_user_id) {
            return Err(format!("bots[{i}]: bot {} is configured twice", bot.compat_user_id));
        }
        bots.push(bot);
    }
    Ok(Config { bot_platform_endpoint: endpoint, compat_listen_addr, extensions_listen_addr, state_dir, bots })
}

fn parse_bot(value: &Value) -> Result<BotConfig, String> {
    let obj = value.as_object().ok_or("must be an object")?;
    only_fields(
        obj,
        "",
        &["bot_id_hex", "token", "identity_recovery_secret_hex", "compat_user_id", "username", "first_name"],
    )?;
    let username = string(obj, "username")?;
    let at = format!("bot @{username}");
    let bot_id_hex = string(obj, "bot_id_hex")?.to_ascii_lowercase();
    if crypto::hex_decode_32(&bot_id_hex).is_none() {
        return Err(format!("{at}: bot_id_hex must be 64 hex characters"));
    }
    let token = string(obj, "token")?;
    let parsed = token::parse(&token).ok_or_else(|| {
        format!("{at}: token is not in the <numeric_id>:<64 hex> format (tokens of the old format must be reissued with /token)")
    })?;
    let secret_hex = string(obj, "identity_recovery_secret_hex")?;
    let recovery_secret = crypto::hex_decode_32(&secret_hex)
        .ok_or_else(|| format!("{at}: identity_recovery_secret_hex must be 64 hex characters"))?;
    let compat_user_id = obj
        .get("compat_user_id")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("{at}: compat_user_id must be a positive integer"))?;
    if compat_user_id != parsed.numeric_id {
        return Err(format!(
            "{at}: compat_user_id {compat_user_id} does not match the token's numeric id {}",
            parsed.numeric_id
        ));
    }
    let first_name = string(obj, "first_name")?;
    let bot = BotConfig { bot_id_hex, token, recovery_secret, compat_user_id, username, first_name };
    if crypto::hex_encode(&bot.identity().public_key()) != bot.bot_id_hex {
        return Err(format!(
            "{at}: identity_recovery_secret_hex does not belong to bot_id_hex (the recovery secret derives a different Bot ID)"
        ));
    }
    Ok(bot)
}

fn only_fields(obj: &Map<String, Value>, _at: &str, allowed: &[&str]) -> Result<(), String> {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!("unknown field {k:?} (allowed: {})", allowed.join(", ")));
        }
    }
    Ok(())
}

fn string(obj: &Map<String, Value>, key: &str) -> Result<String, String> {
    match obj.get(key) {
        None => Err(format!("missing field {key}")),
        // first_name is free text (a display name may well read "<Bot>"); the platform checks it.
        Some(Value::String(s)) if key != "first_name" && is_placeholder(s) => Err(format!(
            "{key} is still the placeholder {s:?} from the example config: replace it with the real value"
        )),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{key} must be a string")),
    }
}

/// A value copied from an example without being filled in: `<TOKEN>`, `<STATE_DIR, e.g. ...>`,
/// or a path or address with such a part in it (`/srv/<name>/state`).
fn is_placeholder(value: &str) -> bool {
    value.find('<').is_some_and(|open| value[open..].contains('>'))
}

fn socket_addr(obj: &Map<String, Value>, key: &str) -> Result<SocketAddr, String> {
    let s = string(obj, key)?;
    s.parse().map_err(|_| format!("{key} {s:?} is not host:port with a numeric IP (e.g. 127.0.0.1:8081)"))
}

fn is_loopback_host(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr).trim_matches(['[', ']']);
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bot_json(secret: [u8; 32], numeric: u64) -> Value {
        let id = crypto::hex_encode(&IdentityKeyPair::from_recovery_secret(&secret).public_key());
        json!({
            "bot_id_hex": id,
            "token": format!("{numeric}:{}", "ab".repeat(32)),
            "identity_recovery_secret_hex": crypto::hex_encode(&secret),
            "compat_user_id": numeric,
            "username": "echo_bot",
            "first_name": "Echo"
        })
    }

    fn config_json(bot: Value) -> Value {
        json!({
            "compatibility_profile_id": COMPATIBILITY_PROFILE_ID,
            "bot_platform_endpoint": "http://127.0.0.1:7001",
            "compat_listen_addr": "127.0.0.1:8081",
            "extensions_listen_addr": "127.0.0.1:8082",
            "state_dir": "/tmp/x",
            "bots": [bot]
        })
    }

    #[test]
    fn accepts_a_consistent_config() {
        crypto::init();
        let c = parse(&config_json(bot_json([7; 32], 42))).expect("valid");
        assert_eq!(c.bots[0].compat_user_id, 42);
        assert_eq!(c.compat_listen_addr.port(), 8081);
    }

    #[test]
    fn refuses_placeholders_naming_the_field() {
        crypto::init();
        let cases = [
            ("bot_platform_endpoint", json!("<PLATFORM_URL, e.g. http://127.0.0.1:50051>")),
            ("compat_listen_addr", json!("<HOST:PORT, e.g. 127.0.0.1:8081>")),
            ("state_dir", json!("<STATE_DIR, e.g. /var/lib/bot-gateway>")),
            ("state_dir", json!("/srv/<bot>/state")),
        ];
        for (field, value) in cases {
            let mut c = config_json(bot_json([7; 32], 42));
            c[field] = value;
            let err = parse(&c).err().expect("refused");
            assert!(err.starts_with(&format!("{field} is still the placeholder")), "{field}: {err}");
        }
        let mut b = bot_json([7; 32], 42);
        b["token"] = json!("<TOKEN>");
        let err = parse(&config_json(b)).err().expect("refused");
        assert!(err.contains("token is still the placeholder \"<TOKEN>\""), "{err}");
        // A display name is free text.
        let mut b = bot_json([7; 32], 42);
        b["first_name"] = json!("<Echo>");
        assert!(parse(&config_json(b)).is_ok());
        // The manager's example config is refused as it stands.
        assert!(is_placeholder("<STATE_DIR, e.g. /var/lib/bot-gateway>") && !is_placeholder("/var/lib/a>b"));
    }

    #[test]
    fn refuses_mismatches_and_unknown_fields() {
        crypto::init();
        let mut b = bot_json([7; 32], 42);
        b["compat_user_id"] = json!(43);
        assert!(parse(&config_json(b)).err().expect("refused").contains("does not match the token"));

        let mut b = bot_json([7; 32], 42);
        b["identity_recovery_secret_hex"] = json!(crypto::hex_encode(&[8; 32]));
        assert!(parse(&config_json(b)).err().expect("refused").contains("does not belong to bot_id_hex"));

        let mut c = config_json(bot_json([7; 32], 42));
        c["state_dri"] = json!("/tmp");
        assert!(parse(&c).err().expect("refused").contains("unknown field \"state_dri\""));

        let mut c = config_json(bot_json([7; 32], 42));
        c["compatibility_profile_id"] = json!("compat-v0");
        assert!(parse(&c).is_err());

        let mut b = bot_json([7; 32], 42);
        b["token"] = json!("abcdef");
        assert!(parse(&config_json(b)).err().expect("refused").contains("format"));
    }
}
