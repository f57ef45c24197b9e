//! The gateway configuration file: parsing, validation and the permission checks.
//!
//! The file has exactly the fields of the spec's table; an unknown field is refused so that a
//! typo does not silently fall back to a default.

use std::fmt;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use zeroize::Zeroizing;

use crate::wire::{token, Invalid};
use crate::crypto::{self, IdentityKeyPair};

pub use crate::compat::COMPATIBILITY_PROFILE_ID;

/// One field of the config file: its name, type and meaning. These tables are the one list
/// of fields: the parser admits exactly them, and `bot-gateway --help` prints them.
pub struct Field {
    pub name: &'static str,
    pub kind: &'static str,
    pub meaning: &'static str,
}

/// The required top-level fields: none has a default, so a typo or an omission is refused
/// instead of silently running with something else. (The few tuning fields that may be left
/// out are [`OPTIONAL_FIELDS`].)
pub const FIELDS: &[Field] = &[
    Field { name: "compatibility_profile_id", kind: "string", meaning: "the contract the gateway implements; must be exactly the value `bot-gateway --version` prints" },
    Field { name: "bot_platform_endpoint", kind: "URL", meaning: "the platform server, http://HOST:PORT or https://HOST:PORT (as @BotManager's config snippet gives it); plain http only to loopback" },
    Field { name: "compat_listen_addr", kind: "IP:PORT", meaning: "the Bot API listener (standard 127.0.0.1:8081; localhost:PORT binds 127.0.0.1); keep it on loopback, in a container 0.0.0.0:8081" },
    Field { name: "extensions_listen_addr", kind: "IP:PORT", meaning: "the extensions listener: /healthz, /metrics, /outbox/given-up (standard 127.0.0.1:8082)" },
    Field { name: "state_dir", kind: "path", meaning: "the gateway's durable state (mode 0700, owned by the gateway's user; created if missing); one running gateway per state_dir" },
    Field { name: "bots", kind: "array", meaning: "one object per bot, at least one; fields below" },
];

/// Optional top-level fields: each has a default that the table states, so an old config keeps
/// working. A wrong value is refused like any other field.
pub const OPTIONAL_FIELDS: &[OptionalField] = &[
    OptionalField {
        name: "send_wait_seconds",
        kind: "integer 1-300",
        default: "25",
        meaning: "how long a sending method waits for the platform. A message it has not been handed to by then is \
                  withdrawn and answered 429 with retry_after (it was NOT sent and never will be); one already handed \
                  to it is waited for until the platform answers with its message id",
    },
    OptionalField {
        name: "webhook_secret_token_headers",
        kind: "array of header names",
        default: "[\"X-Compat-Bot-Api-Secret-Token\"]",
        meaning: "the request headers a webhook POST carries setWebhook's secret_token in, each the same secret; \
                  add \"X-Telegram-Bot-Api-Secret-Token\" for the stock webhook handlers of python-telegram-bot, \
                  aiogram and telegraf",
    },
    OptionalField {
        name: "group_self_update_days",
        kind: "integer 1-28",
        default: "7",
        meaning: "how often each bot replaces its own leaf in every MLS group it is in (a commit with new keys: \
                  post-compromise security, and a leaf that never expires); also done right after joining by a Welcome",
    },
    OptionalField {
        name: "allowed_host_names",
        kind: "array of host names",
        default: "[]",
        meaning: "names a loopback listener answers in the Host header besides 127.0.0.1, localhost and [::1] \
                  (a request naming any other host is refused with 421, against DNS rebinding); for a reverse proxy \
                  on this machine that passes its own name on",
    },
    OptionalField {
        name: "media_from_urls",
        kind: "object {enabled, allow_hosts, max_bytes}",
        default: "{\"enabled\": false}",
        meaning: "media by http(s) URL (sendPhoto with a link, InputMedia, inline results with photo_url and the like): \
                  enabled (true or false, required in the object) has the gateway fetch the file itself and send it end to \
                  end like an upload, the platform never seeing the URL; off, a URL is refused with 400. Up to 5 MiB for \
                  photos and 20 MiB for other files, max_bytes (optional) lowers both. Loopback, private, link-local and \
                  multicast addresses are refused, checked after DNS and at every redirect, except for the host names \
                  listed in allow_hosts (default [])",
    },
];

/// A field that may be left out, with the default it then has.
pub struct OptionalField {
    pub name: &'static str,
    pub kind: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// The header the spec names for the webhook secret (SPEC "Webhook delivery" 2).
pub const SPEC_SECRET_HEADER: &str = "X-Compat-Bot-Api-Secret-Token";
/// The default of `send_wait_seconds`.
pub const DEFAULT_SEND_WAIT: Duration = Duration::from_secs(25);
const SEND_WAIT_RANGE: std::ops::RangeInclusive<u64> = 1..=300;
/// The default of `group_self_update_days`.
pub const DEFAULT_GROUP_SELF_UPDATE: Duration = Duration::from_secs(7 * 86_400);
/// Up to 4 weeks: well inside the 12 weeks a key package's leaf is valid.
const GROUP_SELF_UPDATE_DAYS: std::ops::RangeInclusive<u64> = 1..=28;
/// Headers the webhook request sets itself or that would change how it travels: naming one of
/// them for the secret is refused.
const RESERVED_HEADERS: &[&str] =
    &["content-type", "content-length", "host", "connection", "transfer-encoding", "user-agent", "te", "upgrade", "expect", "keep-alive", "trailer"];

/// The most a file by URL may have (the reference's limits): photos, and every other kind.
pub const URL_PHOTO_LIMIT: u64 = 5 * 1024 * 1024;
pub const URL_FILE_LIMIT: u64 = 20 * 1024 * 1024;
/// The fields of `media_from_urls`.
const MEDIA_FROM_URLS_FIELDS: &[&str] = &["enabled", "allow_hosts", "max_bytes"];

/// `media_from_urls`: whether a media parameter or an inline result may name an http(s) URL
/// that the gateway fetches (off by default: the gateway then fetches nothing on a bot's behalf).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MediaFromUrls {
    pub enabled: bool,
    /// Host names (lower case) that may resolve to loopback, private or link-local addresses.
    pub allow_hosts: Vec<String>,
    /// A cap below the reference's limits, in bytes.
    pub max_bytes: Option<u64>,
}

/// How the gateway delivers, the same for every bot: the optional fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// `send_wait_seconds`.
    pub send_wait: Duration,
    /// `webhook_secret_token_headers`: never empty, no two alike (ignoring case).
    pub webhook_secret_headers: Vec<String>,
    /// `group_self_update_days`: the period of the bot's self-updates in its groups.
    pub group_self_update: Duration,
    /// `media_from_urls`.
    pub media_from_urls: MediaFromUrls,
}

impl Default for Delivery {
    fn default() -> Delivery {
        Delivery {
            send_wait: DEFAULT_SEND_WAIT,
            webhook_secret_headers: vec![SPEC_SECRET_HEADER.to_string()],
            group_self_update: DEFAULT_GROUP_SELF_UPDATE,
            media_from_urls: MediaFromUrls::default(),
        }
    }
}

/// The fields of each `bots[]` entry, all required, as @BotManager's /newbot reply gives them.
pub const BOT_FIELDS: &[Field] = &[
    Field { name: "bot_id_hex", kind: "64 hex", meaning: "the Bot ID (public)" },
    Field { name: "token", kind: "string", meaning: "the bot token, <numeric_id>:<64 hex> (secret; a new one from @BotManager /token @bot)" },
    Field { name: "identity_recovery_secret_hex", kind: "64 hex", meaning: "the identity recovery secret (secret; must derive bot_id_hex)" },
    Field { name: "compat_user_id", kind: "integer", meaning: "the numeric part of the token" },
    Field { name: "username", kind: "string", meaning: "the bot's username on the platform, without @ (getMe serves it)" },
    Field { name: "first_name", kind: "string", meaning: "the bot's display name on the platform (getMe serves it)" },
];

/// Optional fields of each `bots[]` entry.
pub const OPTIONAL_BOT_FIELDS: &[OptionalField] = &[
    OptionalField {
        name: "accept_identity_changes",
        kind: "boolean",
        default: "false",
        meaning: "when the platform serves another account identity key for a user than the one this bot pinned when \
                  it first met them, accept it (pin the new key, with a warning) instead of keeping that user's messages \
                  out of the queue (counted in botgw_identity_changes_total) and sending them nothing",
    },
    OptionalField {
        name: "previous_identity_recovery_secret_hex",
        kind: "64 hex",
        default: "none",
        meaning: "after @BotManager /rekey (e2e-chat rekey --config writes it): the bot's recovery secret before the \
                  move (secret). At start the state database is re-encrypted from it to identity_recovery_secret_hex, \
                  keeping the queue and history, and a device of the new identity is registered; the field may be \
                  removed after that start",
    },
];

/// The config reference of `bot-gateway --help`: every field, its type, that it is required,
/// and what it means.
pub fn reference() -> String {
    let mut text = String::from(
        "Config file (JSON, mode 0600, no other fields; these are required, with no defaults;\n\
         a value still holding a <...> placeholder is refused):\n",
    );
    let mut table = |prefix: &str, fields: &[Field]| {
        for f in fields {
            text.push_str(&format!("  {prefix}{} ({})\n      {}\n", f.name, f.kind, f.meaning));
        }
    };
    table("", FIELDS);
    table("bots[].", BOT_FIELDS);
    text.push_str("Optional fields (top level; left out, each has its default):\n");
    for f in OPTIONAL_FIELDS {
        text.push_str(&format!("  {} ({}, default {})\n      {}\n", f.name, f.kind, f.default, f.meaning));
    }
    text.push_str("Optional fields of each bot:\n");
    for f in OPTIONAL_BOT_FIELDS {
        text.push_str(&format!("  bots[].{} ({}, default {})\n      {}\n", f.name, f.kind, f.default, f.meaning));
    }
    text
}

fn names(fields: &[Field]) -> Vec<&'static str> {
    fields.iter().map(|f| f.name).collect()
}

pub struct Config {
    pub bot_platform_endpoint: String,
    pub compat_listen_addr: SocketAddr,
    pub extensions_listen_addr: SocketAddr,
    pub state_dir: PathBuf,
    pub bots: Vec<BotConfig>,
    pub delivery: Delivery,
    /// `allowed_host_names`: lower case, no port.
    pub allowed_host_names: Vec<String>,
    /// What is allowed but unwise (plain http to another host, a listener off loopback outside
    /// a container): `serve` logs each at warn, `check-config` prints them.
    pub warnings: Vec<String>,
}

pub struct BotConfig {
    pub bot_id_hex: String,
    pub token: String,
    pub recovery_secret: Zeroizing<[u8; 32]>,
    /// `previous_identity_recovery_secret_hex`: the secret before a `/rekey`, whose key the
    /// state database may still be under.
    pub previous_recovery_secret: Option<Zeroizing<[u8; 32]>>,
    pub compat_user_id: u64,
    pub username: String,
    pub first_name: String,
    /// `accept_identity_changes`: pin a user's changed identity key instead of refusing it.
    pub accept_identity_changes: bool,
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

/// Why the config file cannot be used. Each names the file, and says the field and the fix.
#[derive(Debug)]
pub enum ConfigError {
    Unreadable { path: PathBuf, error: std::io::Error },
    /// Group or others may read it, and it holds bot secrets.
    Mode { path: PathBuf, mode: u32 },
    NotJson { path: PathBuf, error: serde_json::Error },
    /// A field is missing, unknown or wrong (`parse`'s sentence says which and why).
    Field { path: PathBuf, why: Invalid },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Unreadable { path, error } => write!(f, "cannot read config {}: {error}", path.display()),
            ConfigError::Mode { path, mode } => write!(
                f,
                "config {} is readable by group or others (mode {mode:o}); it holds bot secrets: run chmod 600 {}",
                path.display(),
                path.display()
            ),
            ConfigError::NotJson { path, error } => write!(f, "config {} is not valid JSON: {error}", path.display()),
            ConfigError::Field { path, why } => write!(f, "config {}: {why}", path.display()),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads and validates the config file. Every error names the file, the field and the fix.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    check_mode(path)?;
    read(path)
}

/// The file holds bot secrets: nobody but its owner may read it (0600).
pub fn check_mode(path: &Path) -> Result<(), ConfigError> {
    let meta = std::fs::metadata(path).map_err(|error| ConfigError::Unreadable { path: path.to_path_buf(), error })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(ConfigError::Mode { path: path.to_path_buf(), mode });
    }
    Ok(())
}

/// Reads and validates the file's content (not its mode: [`check_mode`]).
pub fn read(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Unreadable { path: path.to_path_buf(), error })?;
    let value: Value = serde_json::from_str(&text).map_err(|error| ConfigError::NotJson { path: path.to_path_buf(), error })?;
    parse(&value).map_err(|why| ConfigError::Field { path: path.to_path_buf(), why })
}

/// Whether the gateway runs in a container, where listeners bind all interfaces by design
/// (SPEC: the host publishes the ports on loopback): our image sets
/// `BOT_GATEWAY_IN_CONTAINER=1`; Docker creates `/.dockerenv`, Podman `/run/.containerenv`.
pub fn in_container() -> bool {
    std::env::var("BOT_GATEWAY_IN_CONTAINER").is_ok_and(|v| v == "1")
        || Path::new("/.dockerenv").exists()
        || Path::new("/run/.containerenv").exists()
}

/// The warning for a listener off loopback outside a container (SPEC "Authentication" 8):
/// anyone who reaches the port can try tokens and read `/metrics`.
fn listener_warning(field: &str, addr: SocketAddr, in_container: bool) -> Option<String> {
    (!addr.ip().is_loopback() && !in_container).then(|| {
        format!(
            "{field} {addr} is not a loopback address and this is not a container: the listener is reachable \
             from other hosts. Keep it on 127.0.0.1 and put an authenticated reverse proxy in front for remote \
             access (in a container, set BOT_GATEWAY_IN_CONTAINER=1 to silence this)"
        )
    })
}

/// Validates a parsed config document.
pub fn parse(value: &Value) -> Result<Config, Invalid> {
    let obj = value.as_object().ok_or_else(|| Invalid::new("the top level must be a JSON object"))?;
    let allowed: Vec<&str> = names(FIELDS).into_iter().chain(OPTIONAL_FIELDS.iter().map(|f| f.name)).collect();
    only_fields(obj, &allowed)?;
    let profile = string(obj, "compatibility_profile_id")?;
    if profile != COMPATIBILITY_PROFILE_ID {
        return Err(Invalid::new(format!(
            "compatibility_profile_id is {profile:?}, but this gateway implements {COMPATIBILITY_PROFILE_ID:?}"
        )));
    }
    let mut warnings = Vec::new();
    let endpoint = string(obj, "bot_platform_endpoint")?;
    let (tls, addr) = crate::wire::connect::parse_endpoint(&endpoint).map_err(|e| Invalid::new(format!("bot_platform_endpoint: {e}")))?;
    if !tls && !is_loopback_host(&addr) {
        warnings.push(format!("bot_platform_endpoint {endpoint} is plain http:// to a non-loopback host; use https://"));
    }
    let compat_listen_addr = socket_addr(obj, "compat_listen_addr")?;
    let extensions_listen_addr = socket_addr(obj, "extensions_listen_addr")?;
    if compat_listen_addr == extensions_listen_addr && compat_listen_addr.port() != 0 {
        return Err(Invalid::new("compat_listen_addr and extensions_listen_addr must differ"));
    }
    let container = in_container();
    warnings.extend(listener_warning("compat_listen_addr", compat_listen_addr, container));
    warnings.extend(listener_warning("extensions_listen_addr", extensions_listen_addr, container));
    let state_dir = PathBuf::from(string(obj, "state_dir")?);
    if state_dir.as_os_str().is_empty() {
        return Err(Invalid::new("state_dir is empty"));
    }
    let bots_value = obj.get("bots").ok_or_else(|| Invalid::new("missing field bots"))?;
    let bots_array = bots_value.as_array().ok_or_else(|| Invalid::new("bots must be an array"))?;
    if bots_array.is_empty() {
        return Err(Invalid::new("bots is empty: configure at least one bot"));
    }
    let mut bots: Vec<BotConfig> = Vec::new();
    for (i, b) in bots_array.iter().enumerate() {
        let bot = parse_bot(b).map_err(|e| Invalid::new(format!("bots[{i}]: {e}")))?;
        if bots.iter().any(|o| o.compat_user_id == bot.compat_user_id) {
            return Err(Invalid::new(format!("bots[{i}]: bot {} is configured twice", bot.compat_user_id)));
        }
        bots.push(bot);
    }
    let delivery = delivery(obj)?;
    let allowed_host_names = match obj.get("allowed_host_names") {
        None => Vec::new(),
        Some(v) => host_names(v).map_err(|e| Invalid::new(format!("allowed_host_names: {e}")))?,
    };
    Ok(Config {
        bot_platform_endpoint: endpoint,
        compat_listen_addr,
        extensions_listen_addr,
        state_dir,
        bots,
        delivery,
        allowed_host_names,
        warnings,
    })
}

/// An array of DNS names (letters, digits, `-` and `.`, up to 253 characters, no port), lower
/// cased.
fn host_names(v: &Value) -> Result<Vec<String>, Invalid> {
    let list = v.as_array().ok_or_else(|| Invalid::new("must be an array of host names, e.g. [\"gateway.internal\"]"))?;
    let mut names = Vec::with_capacity(list.len());
    for item in list {
        let name = item.as_str().ok_or_else(|| Invalid::new(format!("{item} is not a string")))?;
        let valid = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
        if name.is_empty() || name.len() > 253 || !name.bytes().all(valid) {
            return Err(Invalid::new(format!("{name:?} is not a host name (letters, digits, - and ., no port)")));
        }
        names.push(name.to_ascii_lowercase());
    }
    Ok(names)
}

/// The optional fields, or their defaults.
fn delivery(obj: &Map<String, Value>) -> Result<Delivery, Invalid> {
    let mut d = Delivery::default();
    if let Some(v) = obj.get("send_wait_seconds") {
        let secs = integer_in("send_wait_seconds", v, &SEND_WAIT_RANGE, "seconds", DEFAULT_SEND_WAIT.as_secs())?;
        d.send_wait = Duration::from_secs(secs);
    }
    if let Some(v) = obj.get("webhook_secret_token_headers") {
        d.webhook_secret_headers = secret_headers(v).map_err(|e| Invalid::new(format!("webhook_secret_token_headers: {e}")))?;
    }
    if let Some(v) = obj.get("group_self_update_days") {
        let default = DEFAULT_GROUP_SELF_UPDATE.as_secs() / 86_400;
        let days = integer_in("group_self_update_days", v, &GROUP_SELF_UPDATE_DAYS, "days", default)?;
        d.group_self_update = Duration::from_secs(days * 86_400);
    }
    if let Some(v) = obj.get("media_from_urls") {
        d.media_from_urls = media_from_urls(v).map_err(|e| Invalid::new(format!("media_from_urls: {e}")))?;
    }
    Ok(d)
}

/// `{"enabled": bool, "allow_hosts": [names], "max_bytes": n}`: `enabled` must be said, so that
/// an object holding only `allow_hosts` does not read as switched on.
fn media_from_urls(v: &Value) -> Result<MediaFromUrls, Invalid> {
    let obj = v.as_object().ok_or_else(|| Invalid::new(format!("must be an object such as {{\"enabled\": true}}, not {v}")))?;
    only_fields(obj, MEDIA_FROM_URLS_FIELDS)?;
    let enabled = match obj.get("enabled") {
        Some(Value::Bool(b)) => *b,
        None => return Err(Invalid::new("enabled is required (true or false)")),
        Some(v) => return Err(Invalid::new(format!("enabled must be true or false, not {v}"))),
    };
    let allow_hosts = match obj.get("allow_hosts") {
        None => Vec::new(),
        Some(v) => host_names(v).map_err(|e| Invalid::new(format!("allow_hosts: {e}")))?,
    };
    let max_bytes = match obj.get("max_bytes") {
        None => None,
        Some(v) => Some(v.as_u64().filter(|n| (1..=URL_FILE_LIMIT).contains(n)).ok_or_else(|| {
            Invalid::new(format!(
                "max_bytes must be an integer from 1 to {URL_FILE_LIMIT} (it can only lower the limits of {URL_PHOTO_LIMIT} \
                 bytes for photos and {URL_FILE_LIMIT} for other files), not {v}"
            ))
        })?),
    };
    Ok(MediaFromUrls { enabled, allow_hosts, max_bytes })
}

/// An optional field's whole number within `range` (in `unit`), or why not.
fn integer_in(name: &str, v: &Value, range: &std::ops::RangeInclusive<u64>, unit: &str, default: u64) -> Result<u64, Invalid> {
    v.as_u64().filter(|n| range.contains(n)).ok_or_else(|| {
        Invalid(format!(
            "{name} must be an integer from {} to {} ({unit}; default {default}), not {v}",
            range.start(),
            range.end()
        ))
    })
}

/// A non-empty array of distinct HTTP header names that the webhook request does not set
/// itself.
fn secret_headers(v: &Value) -> Result<Vec<String>, Invalid> {
    let list = v.as_array().ok_or_else(|| Invalid::new(format!("must be an array of header names, e.g. [\"{SPEC_SECRET_HEADER}\"]")))?;
    if list.is_empty() {
        return Err(Invalid::new(format!(
            "is empty: name at least one header to carry the secret (the spec's is \"{SPEC_SECRET_HEADER}\"), or leave the field out"
        )));
    }
    let mut names: Vec<String> = Vec::with_capacity(list.len());
    for item in list {
        let name = item.as_str().ok_or_else(|| Invalid::new(format!("{item} is not a string")))?;
        // RFC 9110 token characters; a name is short.
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || name.len() > 64 || !name.bytes().all(token) {
            return Err(Invalid::new(format!("{name:?} is not an HTTP header name (1 to 64 letters, digits and -, e.g. X-Telegram-Bot-Api-Secret-Token)")));
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(Invalid::new(format!("{name:?} is a header the webhook request sets itself; choose another name")));
        }
        if names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return Err(Invalid::new(format!("{name:?} is named twice (header names ignore case)")));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

fn parse_bot(value: &Value) -> Result<BotConfig, Invalid> {
    let obj = value.as_object().ok_or_else(|| Invalid::new("must be an object"))?;
    let mut allowed = names(BOT_FIELDS);
    allowed.extend(OPTIONAL_BOT_FIELDS.iter().map(|f| f.name));
    only_fields(obj, &allowed)?;
    let username = string(obj, "username")?;
    let at = format!("bot @{username}");
    let bot_id_hex = string(obj, "bot_id_hex")?.to_ascii_lowercase();
    if crypto::hex_decode_32(&bot_id_hex).is_none() {
        return Err(Invalid::new(format!("{at}: bot_id_hex must be 64 hex characters")));
    }
    let token = string(obj, "token")?;
    let parsed = token::parse(&token).ok_or_else(|| {
        Invalid(format!("{at}: token is not in the <numeric_id>:<64 hex> format (tokens of the old format must be reissued with /token)"))
    })?;
    let secret_hex = Zeroizing::new(string(obj, "identity_recovery_secret_hex")?);
    let recovery_secret = crypto::hex_decode_32(&secret_hex)
        .map(Zeroizing::new)
        .ok_or_else(|| Invalid::new(format!("{at}: identity_recovery_secret_hex must be 64 hex characters")))?;
    let previous_recovery_secret = match obj.get("previous_identity_recovery_secret_hex") {
        None => None,
        Some(Value::String(hex)) => Some(crypto::hex_decode_32(hex).map(Zeroizing::new).ok_or_else(|| {
            Invalid::new(format!("{at}: previous_identity_recovery_secret_hex must be 64 hex characters"))
        })?),
        Some(_) => return Err(Invalid::new(format!("{at}: previous_identity_recovery_secret_hex must be a string of 64 hex characters"))),
    };
    let compat_user_id = obj
        .get("compat_user_id")
        .and_then(Value::as_u64)
        .ok_or_else(|| Invalid::new(format!("{at}: compat_user_id must be a positive integer")))?;
    if compat_user_id != parsed.numeric_id {
        return Err(Invalid::new(format!(
            "{at}: compat_user_id {compat_user_id} does not match the token's numeric id {}",
            parsed.numeric_id
        )));
    }
    let first_name = string(obj, "first_name")?;
    let accept_identity_changes = match obj.get("accept_identity_changes") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(Invalid::new(format!("{at}: accept_identity_changes must be true or false, not {v}"))),
    };
    let bot = BotConfig {
        bot_id_hex,
        token,
        recovery_secret,
        previous_recovery_secret,
        compat_user_id,
        username,
        first_name,
        accept_identity_changes,
    };
    if crypto::hex_encode(&bot.identity().public_key()) != bot.bot_id_hex {
        return Err(Invalid::new(format!(
            "{at}: identity_recovery_secret_hex does not belong to bot_id_hex (the recovery secret derives a different Bot ID)"
        )));
    }
    Ok(bot)
}

fn only_fields(obj: &Map<String, Value>, allowed: &[&str]) -> Result<(), Invalid> {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(Invalid::new(format!("unknown field {k:?} (allowed: {})", allowed.join(", "))));
        }
    }
    Ok(())
}

fn string(obj: &Map<String, Value>, key: &str) -> Result<String, Invalid> {
    match obj.get(key) {
        None => Err(Invalid::new(format!("missing field {key}"))),
        // first_name is free text (a display name may well read "<Bot>"); the platform checks it.
        Some(Value::String(s)) if key != "first_name" && is_placeholder(s) => Err(Invalid::new(format!(
            "{key} is still the placeholder {s:?} from the example config: replace it with the real value{}",
            if key == "state_dir" { " (a directory of your choice for this gateway's state, created 0700 if missing)" } else { "" }
        ))),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(Invalid::new(format!("{key} must be a string"))),
    }
}

/// A value copied from an example without being filled in: `<TOKEN>`, `<STATE_DIR, e.g. ...>`,
/// or a path or address with such a part in it (`/srv/<name>/state`).
fn is_placeholder(value: &str) -> bool {
    value.find('<').is_some_and(|open| value[open..].contains('>'))
}

/// A listen address: IP:PORT, or `localhost:PORT`, which binds loopback (127.0.0.1) and
/// nothing else: as often as not a listener is named by name, and this one is safe.
fn socket_addr(obj: &Map<String, Value>, key: &str) -> Result<SocketAddr, Invalid> {
    let s = string(obj, key)?;
    let bad = || Invalid::new(format!("{key} {s:?} is not IP:PORT or localhost:PORT (e.g. 127.0.0.1:8081)"));
    match s.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => {
            let port: u16 = port.parse().map_err(|_| bad())?;
            Ok(SocketAddr::from(([127, 0, 0, 1], port)))
        }
        _ => s.parse().map_err(|_| bad()),
    }
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

    /// `localhost:PORT` binds loopback; a name of any other host is refused with the forms.
    #[test]
    fn a_listener_named_localhost_binds_loopback() {
        crypto::init();
        let mut v = config_json(bot_json([7; 32], 42));
        v["compat_listen_addr"] = json!("localhost:8081");
        v["extensions_listen_addr"] = json!("LOCALHOST:0");
        let c = parse(&v).expect("valid");
        assert_eq!((c.compat_listen_addr.to_string(), c.extensions_listen_addr.to_string()), ("127.0.0.1:8081".into(), "127.0.0.1:0".into()));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        for bad in ["example.com:8081", "localhost", "localhost:http"] {
            v["compat_listen_addr"] = json!(bad);
            let e = parse(&v).err().expect("refused").to_string();
            assert!(e.contains("is not IP:PORT or localhost:PORT"), "{bad}: {e}");
        }
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
    fn warns_of_listeners_off_loopback_outside_containers() {
        let any: SocketAddr = "0.0.0.0:8081".parse().expect("addr");
        let lo: SocketAddr = "127.0.0.1:8081".parse().expect("addr");
        assert!(listener_warning("compat_listen_addr", any, false).expect("warned").contains("not a loopback address"));
        assert_eq!(listener_warning("compat_listen_addr", any, true), None);
        assert_eq!(listener_warning("compat_listen_addr", lo, false), None);
        let text = reference();
        for f in FIELDS.iter().chain(BOT_FIELDS) {
            assert!(text.contains(f.name), "{} in the reference", f.name);
        }
        for f in OPTIONAL_FIELDS {
            assert!(text.contains(&format!("{} ({}, default {})", f.name, f.kind, f.default)), "{} in the reference", f.name);
        }
    }

    #[test]
    fn allowed_host_names_are_names_without_ports() {
        crypto::init();
        assert!(parse(&config_json(bot_json([7; 32], 42))).expect("valid").allowed_host_names.is_empty());
        let with = |v: Value| {
            let mut j = config_json(bot_json([7; 32], 42));
            j["allowed_host_names"] = v;
            parse(&j)
        };
        assert_eq!(with(json!(["Gateway.Internal"])).expect("valid").allowed_host_names, ["gateway.internal"]);
        for bad in [json!("gateway.internal"), json!(["gw:8081"]), json!([""]), json!([7])] {
            let err = with(bad.clone()).err().expect("refused").to_string();
            assert!(err.contains("allowed_host_names"), "{bad}: {err}");
        }
    }

    #[test]
    fn group_self_update_days_is_a_week_by_default_and_checked() {
        crypto::init();
        let c = parse(&config_json(bot_json([7; 32], 42))).expect("valid");
        assert_eq!(c.delivery.group_self_update, Duration::from_secs(7 * 86_400));
        let with = |v: Value| {
            let mut j = config_json(bot_json([7; 32], 42));
            j["group_self_update_days"] = v;
            parse(&j)
        };
        assert_eq!(with(json!(1)).expect("valid").delivery.group_self_update, Duration::from_secs(86_400));
        for bad in [json!(0), json!(29), json!(1.5), json!("7")] {
            let e = with(bad.clone()).err().expect("refused");
            assert!(e.starts_with("group_self_update_days must be an integer from 1 to 28 (days; default 7)"), "{bad}: {e}");
        }
    }

    #[test]
    fn optional_fields_have_their_defaults_and_wrong_values_are_refused() {
        crypto::init();
        let c = parse(&config_json(bot_json([7; 32], 42))).expect("valid");
        assert_eq!(c.delivery, Delivery::default());
        assert_eq!(c.delivery.send_wait, Duration::from_secs(25));
        assert_eq!(c.delivery.webhook_secret_headers, ["X-Compat-Bot-Api-Secret-Token"]);

        let mut j = config_json(bot_json([7; 32], 42));
        j["send_wait_seconds"] = json!(3);
        j["webhook_secret_token_headers"] = json!(["X-Compat-Bot-Api-Secret-Token", "X-Telegram-Bot-Api-Secret-Token"]);
        let c = parse(&j).expect("valid");
        assert_eq!(c.delivery.send_wait, Duration::from_secs(3));
        assert_eq!(c.delivery.webhook_secret_headers, ["X-Compat-Bot-Api-Secret-Token", "X-Telegram-Bot-Api-Secret-Token"]);

        let refused = |field: &str, v: Value| {
            let mut j = config_json(bot_json([7; 32], 42));
            j[field] = v;
            parse(&j).err().expect("refused")
        };
        for bad in [json!(0), json!(301), json!(2.5), json!("25"), json!(-1)] {
            assert!(refused("send_wait_seconds", bad.clone()).starts_with("send_wait_seconds must be an integer from 1 to 300"), "{bad}");
        }
        let cases = [
            (json!("X-Telegram-Bot-Api-Secret-Token"), "must be an array"),
            (json!([]), "is empty"),
            (json!([5]), "is not a string"),
            (json!(["X Bad"]), "is not an HTTP header name"),
            (json!(["X-Secret:"]), "is not an HTTP header name"),
            (json!([""]), "is not an HTTP header name"),
            (json!(["Content-Type"]), "sets itself"),
            (json!(["X-A", "x-a"]), "named twice"),
        ];
        for (v, why) in cases {
            let e = refused("webhook_secret_token_headers", v.clone());
            assert!(e.starts_with("webhook_secret_token_headers: ") && e.contains(why), "{v}: {e}");
        }
        assert!(refused("send_wait_second", json!(3)).contains("unknown field \"send_wait_second\""));
    }

    #[test]
    fn media_from_urls_is_off_by_default_and_checked_field_by_field() {
        crypto::init();
        let c = parse(&config_json(bot_json([7; 32], 42))).expect("valid");
        assert_eq!(c.delivery.media_from_urls, MediaFromUrls { enabled: false, allow_hosts: vec![], max_bytes: None });
        let with = |v: Value| {
            let mut j = config_json(bot_json([7; 32], 42));
            j["media_from_urls"] = v;
            parse(&j).map(|c| c.delivery.media_from_urls)
        };
        assert_eq!(with(json!({"enabled": true})).expect("valid"), MediaFromUrls { enabled: true, ..Default::default() });
        let full = with(json!({"enabled": true, "allow_hosts": ["Media.Internal", "localhost"], "max_bytes": 1_000_000})).expect("valid");
        assert_eq!(full, MediaFromUrls { enabled: true, allow_hosts: vec!["media.internal".into(), "localhost".into()], max_bytes: Some(1_000_000) });
        assert!(!with(json!({"enabled": false, "allow_hosts": ["a"]})).expect("valid").enabled);
        let cases = [
            (json!(true), "must be an object"),
            (json!({"allow_hosts": ["a"]}), "enabled is required"),
            (json!({"enabled": "yes"}), "enabled must be true or false"),
            (json!({"enabled": true, "allowed_hosts": ["a"]}), "unknown field \"allowed_hosts\" (allowed: enabled, allow_hosts, max_bytes)"),
            (json!({"enabled": true, "allow_hosts": "a"}), "allow_hosts: must be an array"),
            (json!({"enabled": true, "allow_hosts": ["a:80"]}), "allow_hosts: \"a:80\" is not a host name"),
            (json!({"enabled": true, "max_bytes": 0}), "max_bytes must be an integer from 1 to 20971520"),
            (json!({"enabled": true, "max_bytes": 20 * 1024 * 1024 + 1}), "it can only lower the limits"),
            (json!({"enabled": true, "max_bytes": "5"}), "max_bytes must be an integer"),
        ];
        for (v, why) in cases {
            let e = with(v.clone()).err().expect("refused");
            assert!(e.starts_with("media_from_urls: ") && e.contains(why), "{v}: {e}");
        }
        assert!(reference().contains("media_from_urls (object {enabled, allow_hosts, max_bytes}, default {\"enabled\": false})"));
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
