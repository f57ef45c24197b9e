//! The management bot's replies that carry data: the lists (`/mybots`, `/devices`), the
//! final `/newbot` reply with its gateway config, and the `/token` and `/rekey` answers. Their
//! formats are documented in `commands` (other programs parse them); this file renders them.

use super::super::bots::BotCredentials;
use super::directory::{BotInfo, DeviceView};
pub use crate::compat::COMPATIBILITY_PROFILE_ID;

/// What the config snippet holds in place of a recovery secret the platform never had; the
/// owner's client (`e2e-chat save-config`) fills in the one it drew.
pub const SECRET_PLACEHOLDER: &str = "<RECOVERY_SECRET: the one your client drew; e2e-chat save-config fills it in>";

pub const NO_BOTS: &str = "You have no bots yet. Send /newbot to create one.";

/// `/mybots`: one line per bot.
pub fn my_bots_reply(bots: &[BotInfo]) -> String {
    if bots.is_empty() {
        return NO_BOTS.to_string();
    }
    let mut text = String::from("Your bots:");
    for b in bots {
        let status = if b.active { "active" } else { "disabled" };
        text.push_str(&format!(
            "\n@{}: \"{}\", id {}, Bot ID {}, capabilities {}, {status}",
            b.username, b.display_name, b.id, b.bot_id_hex, b.capabilities
        ));
    }
    text
}

/// `/devices`: one line per device (format in the module doc).
pub fn devices_reply(username: &str, devices: &[DeviceView]) -> String {
    if devices.is_empty() {
        return format!(
            "@{username} has no devices yet. A gateway started with the bot's credentials and a fresh \
             state_dir registers one."
        );
    }
    let mut text = format!("Devices of @{username}:");
    for d in devices {
        let last_seen = match (d.connected, d.last_seen) {
            (true, _) => "now".to_string(),
            (false, Some(t)) => utc(t),
            (false, None) => "never".to_string(),
        };
        let connected = if d.connected { "connected" } else { "not connected" };
        let state = match d.removed_at {
            None => "active".to_string(),
            Some(t) => format!("removed {}", utc(t)),
        };
        text.push_str(&format!(
            "\n#{}: registered {}, last seen {last_seen}, {connected}, {state}",
            d.device_id,
            utc(d.registered_at)
        ));
    }
    let live = devices.iter().filter(|d| d.connected && d.removed_at.is_none()).count();
    if live > 1 {
        text.push_str(&format!(
            "\n\n{live} devices are connected now: every one of them receives and answers each message."
        ));
    }
    text.push_str(&format!("\n\nRemove a stale one with /removedevice @{username} <number>."));
    text
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC` (proleptic Gregorian, no time-zone database).
pub fn utc(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", secs / 3600, secs % 3600 / 60, secs % 60)
}

pub fn rotated_reply(username: &str, token: &str) -> String {
    format!(
        "New token for @{username}:\nToken: {token}\n\n\
         The previous token no longer works. Put the new one in the gateway config (bots[].token) \
         and restart the gateway; pending updates stay in its state_dir. \
         The Bot ID and the recovery secret are unchanged."
    )
}

fn json(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

/// The `bots[]` entry of the gateway config, fields in the spec's order, indented by `indent`.
pub fn bot_config_entry(c: &BotCredentials, indent: &str) -> String {
    let fields = [
        ("bot_id_hex", json(&c.bot_id_hex)),
        ("token", json(&c.token)),
        ("identity_recovery_secret_hex", json(c.identity_recovery_secret_hex.as_deref().map_or(SECRET_PLACEHOLDER, |s| s.as_str()))),
        ("compat_user_id", c.compat_user_id.to_string()),
        ("username", json(&c.username)),
        ("first_name", json(&c.first_name)),
    ];
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{indent}  \"{k}\": {v}")).collect();
    format!("{{\n{}\n{indent}}}", body.join(",\n"))
}

/// A whole gateway config around one bot, ready to run once `state_dir` (the one choice left
/// to the user, a `<...>` placeholder the gateway refuses) is filled in: the platform endpoint
/// this server is reached at (a placeholder only when it cannot know it, see
/// `server::advertised_endpoint`) and the standard loopback listeners.
pub fn gateway_config(c: &BotCredentials, endpoint: Option<&str>) -> String {
    let endpoint = endpoint.map_or_else(|| json("<PLATFORM_URL: this server's address, e.g. http://HOST:PORT>"), json);
    format!(
        "{{\n  \"compatibility_profile_id\": {},\n  \
         \"bot_platform_endpoint\": {endpoint},\n  \
         \"compat_listen_addr\": \"127.0.0.1:8081\",\n  \
         \"extensions_listen_addr\": \"127.0.0.1:8082\",\n  \
         \"state_dir\": \"<STATE_DIR: a directory for this gateway's state, e.g. /var/lib/bot-gateway>\",\n  \
         \"bots\": [\n    {}\n  ]\n}}",
        json(COMPATIBILITY_PROFILE_ID),
        bot_config_entry(c, "    ")
    )
}

/// The 30 digits of the Bot ID that a person reads aloud (`crypto::fingerprint`; what
/// `e2e-chat verify` prints as `short_form`).
fn bot_id_short_form(c: &BotCredentials) -> String {
    match crate::crypto::hex_decode_32(&c.bot_id_hex) {
        Some(key) => crate::crypto::fingerprint::readable(c.compat_user_id, &key),
        None => String::from("(the Bot ID is not 64 hex digits)"),
    }
}

/// The final `/newbot` reply (format in the module doc). A bot whose key the owner's client
/// drew (`identity_recovery_secret_hex` is `None`) gets no secret here: the platform never had
/// it. One made from a request an earlier version had begun shows the secret that version drew,
/// and says so.
pub fn created_reply(c: &BotCredentials, capabilities: &str, endpoint: Option<&str>) -> String {
    let (secret, advice) = match c.identity_recovery_secret_hex.as_deref() {
        None => (
            "only on your device (your client drew it; the platform never had it)".to_string(),
            format!(
                "The Bot ID is the public key of the secret your client drew: check that your client shows the \
                 same one. Keep the token safe: it is shown only now and the platform keeps only its digest; \
                 /token @{username} issues a new one. Keep the recovery secret safe too: it cannot be reissued \
                 (/rekey @{username} gives the bot a new identity).",
                username = c.username
            ),
        ),
        Some(secret) => (
            secret.to_string(),
            format!(
                "This bot was requested from an earlier version of the platform, which drew the recovery secret \
                 itself: the platform could know it. Move the bot to a key only you hold with \
                 e2e-chat rekey @{username}. Keep the token safe: /token @{username} issues a new one.",
                username = c.username
            ),
        ),
    };
    format!(
        "Done! Your bot @{username} is created.\n\n\
         Token: {token}\n\
         Bot ID: {bot_id}\n\
         Bot ID short form: {short_form}\n\
         Recovery secret: {secret}\n\
         Numeric id: {id}\n\
         Username: @{username}\n\
         Display name: {name}\n\
         Capabilities: {capabilities}\n\n\
         {advice}\n\n\
         Gateway config entry (bots[]):\n{entry}\n\n\
         Full gateway config (fill in state_dir and the recovery secret, or let e2e-chat save-config do \
         it; save it with mode 0600, then: bot-gateway serve FILE):\n{config}",
        username = c.username,
        token = c.token,
        bot_id = c.bot_id_hex,
        short_form = bot_id_short_form(c),
        id = c.compat_user_id,
        name = c.first_name,
        entry = bot_config_entry(c, ""),
        config = gateway_config(c, endpoint),
    )
}

/// The `/rekey` answer: the bot's new Bot ID and what its owner does next.
pub fn rekeyed_reply(username: &str, bot_id: u64, identity_key: &[u8; 32], removed_devices: usize) -> String {
    format!(
        "@{username} has a new identity.\n\n\
         Bot ID: {bot_id_hex}\n\
         Bot ID short form: {short_form}\n\
         Devices removed: {removed_devices}\n\n\
         Every device of the old identity is removed, and the token is unchanged. Give the gateway the new \
         secret as identity_recovery_secret_hex, the new Bot ID as bot_id_hex and the old secret as \
         previous_identity_recovery_secret_hex, then restart it: it keeps its queue and state and registers \
         a new device (e2e-chat rekey --config does all of it). Users see a security warning until they \
         compare the new Bot ID and trust it (docs/verify.md).",
        bot_id_hex = crate::crypto::hex_encode(identity_key),
        short_form = crate::crypto::fingerprint::readable(bot_id, identity_key),
    )
}
