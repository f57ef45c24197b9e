//! The `e2e-chat` commands that give a bot owner a gateway config, each written in one step,
//! mode 0600:
//! - `newbot USERNAME --name NAME`: creates the bot with `@BotManager` (`Profile::create_bot`:
//!   the identity secret is drawn here and never sent) and writes its config (`--config`) or
//!   its `bots[]` entry (`--out`), or prints the credentials.
//! - `rekey @BOT --config FILE`: moves the bot to a new identity drawn here, and puts the new
//!   secret, the new Bot ID and the old secret (`previous_identity_recovery_secret_hex`, so the
//!   gateway keeps its state) into FILE.
//! - `save-config @BotManager FILE`: the config `@BotManager` sent at `/newbot` (with the
//!   newest token a later `/token` issued), `state_dir` and the secret this profile drew filled in.
//!
//! A drawn secret stays in the profile only until a config holds it; a secret an earlier
//! platform drew and sent is removed from the remembered dialog once `save-config` wrote it.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::bot_config;
use super::bot_keys::NewBot;
use super::cli_common::{open_profile, ordered, print_line, usage, Global};
use crate::cli::{Args, CliError, Context, Opt};

/// The options of `save-config`.
pub(super) const OPTIONS: &[Opt] = &[Opt::value("--state-dir"), Opt::value("--bot"), Opt::switch("--force")];
/// The options of `newbot`.
pub(super) const NEWBOT_OPTIONS: &[Opt] = &[
    Opt::value("--name"),
    Opt::value("--capabilities"),
    Opt::value("--manager"),
    Opt::value("--config"),
    Opt::value("--out"),
    Opt::value("--state-dir"),
    Opt::switch("--force"),
];
/// The options of `rekey`.
pub(super) const REKEY_OPTIONS: &[Opt] = &[Opt::value("--manager"), Opt::value("--config")];

/// How many of the manager's newest messages are searched.
const SEARCHED: usize = 500;
/// The management bot unless `--manager` names another.
const MANAGER: &str = "@BotManager";

pub(super) fn save_config(global: &Global, a: &Args) -> Result<(), CliError> {
    let (manager, file) = match a.words[..] {
        [manager, file] => (manager, Path::new(file)),
        [_] => return Err(usage("save-config: FILE missing (where to write the config)".into())),
        [] => return Err(usage("save-config: @BotManager and FILE missing".into())),
        _ => return Err(usage("save-config: expected @BotManager FILE".into())),
    };
    let profile = open_profile(global)?;
    let peer = profile.lookup(manager)?;
    let texts = profile.remembered_texts(peer.user_id, SEARCHED)?;
    let bot = a.value("--bot");
    let found = bot_config::find(&texts, bot).ok_or_else(|| {
        CliError::Failed(match bot {
            Some(bot) => format!("no gateway config for {bot} in your dialog with @{}: create the bot with e2e-chat newbot (as this profile)", peer.username),
            None => format!("no gateway config in your dialog with @{}: create a bot with e2e-chat newbot (as this profile)", peer.username),
        })
    })?;
    let force = a.switch("--force");
    if file.exists() && !force {
        return Err(CliError::Failed(format!("{} exists already (--force replaces it)", file.display())));
    }
    let mut config = found.config;
    let bot_id_hex = config["bots"][0]["bot_id_hex"].as_str().unwrap_or_default().to_string();
    // The secret: the one this profile drew (the platform never had it), or, in a reply from an
    // earlier platform, the one that platform sent; or, when FILE is already this bot's config
    // (a new token saved over it), the one FILE holds.
    let sent_secret = config["bots"][0]["identity_recovery_secret_hex"].as_str().filter(|s| !s.starts_with('<')).map(str::to_string);
    if sent_secret.is_none() {
        let secret = match profile.stashed_bot_secret(&bot_id_hex)? {
            Some(secret) => secret,
            None => secret_in_config(file, &bot_id_hex).ok_or_else(|| {
                CliError::Failed(format!(
                    "the recovery secret of @{} is not in this profile: it stays only in the profile that ran e2e-chat \
                     newbot, and only until a config holds it (newbot --config or --out, or an earlier save-config; \
                     save-config --force over that config keeps it)",
                    found.username
                ))
            })?,
        };
        config["bots"][0]["identity_recovery_secret_hex"] = Value::String(secret.to_string());
    }
    let state_dir = state_dir_for(a, file, &found.username)?;
    config["state_dir"] = Value::String(state_dir.display().to_string());
    write_private(file, &config, force)?;
    match sent_secret {
        None => profile.forget_bot_secret(&bot_id_hex)?,
        Some(secret) => {
            let removed = profile.redact_remembered(peer.user_id, &secret, &format!("(written to {})", file.display()))?;
            log::info!("removed the recovery secret of @{} from {removed} remembered message(s)", found.username);
        }
    }
    print_line(&ordered(&[
        ("path", json!(file.display().to_string())),
        ("bot", json!(format!("@{}", found.username))),
        ("state_dir", json!(state_dir.display().to_string())),
        ("token_replaced", json!(found.token_replaced)),
    ]))
}

/// `newbot USERNAME --name NAME [--capabilities CAPS] [--config FILE [--state-dir DIR] [--force] | --out FILE]`.
pub(super) fn newbot(global: &Global, a: &Args) -> Result<(), CliError> {
    let username = match a.words[..] {
        [username] => username,
        [] => return Err(usage("newbot: USERNAME missing (3 to 32 of A-Z a-z 0-9 _)".into())),
        _ => return Err(usage("newbot: expected one USERNAME (a display name with spaces goes in --name \"...\")".into())),
    };
    let name = a.value("--name").ok_or_else(|| usage("newbot: --name NAME missing (the bot's display name)".into()))?;
    let (config_file, out_file) = (a.value("--config").map(Path::new), a.value("--out").map(Path::new));
    if config_file.is_some() && out_file.is_some() {
        return Err(usage("newbot: --config and --out exclude each other (a whole config, or its bots[] entry)".into()));
    }
    if config_file.is_none() && a.value("--state-dir").is_some() {
        return Err(usage("newbot: --state-dir goes with --config".into()));
    }
    for file in config_file.iter().chain(out_file.iter()) {
        // Refused before the bot exists, not after.
        if file.exists() && !a.switch("--force") {
            return Err(CliError::Failed(format!("{} exists already (--force replaces it)", file.display())));
        }
    }
    let request = NewBot {
        username: username.to_string(),
        display_name: name.to_string(),
        capabilities: a.value("--capabilities").unwrap_or("default").to_string(),
    };
    let profile = open_profile(global)?;
    let bot = profile.create_bot(a.value("--manager").unwrap_or(MANAGER), &request)?;
    let mut fields = vec![
        ("bot", json!(format!("@{}", bot.username))),
        ("compat_user_id", json!(bot.compat_user_id)),
        ("bot_id_hex", json!(bot.bot_id_hex)),
        ("short_form", json!(bot.short_form())),
        ("token", json!(bot.token)),
    ];
    let entry = json!({
        "bot_id_hex": bot.bot_id_hex,
        "token": bot.token,
        "identity_recovery_secret_hex": bot.secret_hex.as_str(),
        "compat_user_id": bot.compat_user_id,
        "username": bot.username,
        "first_name": bot.first_name,
    });
    let written = if let Some(file) = config_file {
        let found = bot_config::find(std::slice::from_ref(&bot.reply), Some(&bot.username))
            .ok_or_else(|| CliError::Failed("the final reply of the management bot carries no gateway config".into()))?;
        let mut config = found.config;
        config["bots"][0] = entry;
        let state_dir = state_dir_for(a, file, &bot.username)?;
        config["state_dir"] = Value::String(state_dir.display().to_string());
        write_private(file, &config, a.switch("--force"))?;
        fields.push(("config", json!(file.display().to_string())));
        fields.push(("state_dir", json!(state_dir.display().to_string())));
        true
    } else if let Some(file) = out_file {
        write_private(file, &entry, a.switch("--force"))?;
        fields.push(("out", json!(file.display().to_string())));
        true
    } else {
        fields.push(("identity_recovery_secret_hex", json!(bot.secret_hex.as_str())));
        eprintln!(
            "e2e-chat: the recovery secret stays in this profile until `e2e-chat save-config {MANAGER} FILE` writes \
             it into a gateway config"
        );
        false
    };
    if written {
        profile.forget_bot_secret(&bot.bot_id_hex)?;
    }
    print_line(&ordered(&fields))
}

/// `rekey @BOT [--config FILE]`: a new identity for the bot, drawn here.
pub(super) fn rekey(global: &Global, a: &Args) -> Result<(), CliError> {
    let bot = match a.words[..] {
        [bot] => bot,
        [] => return Err(usage("rekey: @BOT missing (one of your bots)".into())),
        _ => return Err(usage("rekey: expected one @BOT".into())),
    };
    // The config is read and checked before anything changes on the platform.
    let config = match a.value("--config") {
        Some(file) => {
            let path = Path::new(file);
            let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let config: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
            bot_entry_index(&config, bot).ok_or_else(|| CliError::Failed(format!("{} has no bots[] entry for {bot}", path.display())))?;
            Some((path, config))
        }
        None => None,
    };
    let profile = open_profile(global)?;
    let moved = profile.rekey_bot(a.value("--manager").unwrap_or(MANAGER), bot)?;
    let mut fields = vec![
        ("bot", json!(format!("@{}", moved.username))),
        ("compat_user_id", json!(moved.compat_user_id)),
        ("bot_id_hex", json!(moved.bot_id_hex)),
        ("short_form", json!(moved.short_form())),
        ("removed_devices", json!(moved.removed_devices)),
    ];
    match config {
        Some((path, mut config)) => {
            let i = bot_entry_index(&config, bot).expect("checked above");
            let entry = &mut config["bots"][i];
            let previous = entry["identity_recovery_secret_hex"].clone();
            entry["previous_identity_recovery_secret_hex"] = previous;
            entry["identity_recovery_secret_hex"] = Value::String(moved.secret_hex.to_string());
            entry["bot_id_hex"] = Value::String(moved.bot_id_hex.clone());
            replace_private(path, &config).map_err(|e| {
                CliError::Failed(format!(
                    "@{} has its new identity, but {e}; its secret stays in this profile (`e2e-chat save-config` cannot \
                     write a rekeyed bot: run rekey again once the file is writable)",
                    moved.username
                ))
            })?;
            fields.push(("config", json!(path.display().to_string())));
        }
        None => fields.push(("identity_recovery_secret_hex", json!(moved.secret_hex.as_str()))),
    }
    profile.forget_bot_secret(&moved.bot_id_hex)?;
    print_line(&ordered(&fields))
}

/// The recovery secret an existing config at `path` holds for the bot with this Bot ID.
fn secret_in_config(path: &Path, bot_id_hex: &str) -> Option<zeroize::Zeroizing<String>> {
    let text = zeroize::Zeroizing::new(fs::read_to_string(path).ok()?);
    let config: Value = serde_json::from_str(&text).ok()?;
    let entry = config["bots"].as_array()?.iter().find(|b| b["bot_id_hex"].as_str() == Some(bot_id_hex))?;
    let secret = entry["identity_recovery_secret_hex"].as_str().filter(|s| !s.starts_with('<'))?;
    Some(zeroize::Zeroizing::new(secret.to_string()))
}

/// Which `bots[]` entry of a config is `bot` (by username, any case, `@` optional).
fn bot_entry_index(config: &Value, bot: &str) -> Option<usize> {
    let wanted = bot.trim_start_matches('@');
    config["bots"].as_array()?.iter().position(|b| b["username"].as_str().is_some_and(|u| u.eq_ignore_ascii_case(wanted)))
}

/// `--state-dir`, else a directory `state-BOT` beside `file`; absolute either way.
fn state_dir_for(a: &Args, file: &Path, username: &str) -> Result<PathBuf, CliError> {
    match a.value("--state-dir") {
        Some(dir) => absolute(Path::new(dir)),
        None => absolute(&file.parent().unwrap_or(Path::new(".")).join(format!("state-{username}"))),
    }
}

/// `path` made absolute (the gateway may run from another directory).
fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir().context("finding the current directory")?.join(path))
}

/// Writes the JSON 0600; an existing file only with `force`.
fn write_private(path: &Path, value: &Value, force: bool) -> Result<(), CliError> {
    let mut options = OpenOptions::new();
    options.write(true).mode(0o600);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut f = options.open(path).with_context(|| {
        if path.exists() && !force {
            format!("{} exists already (--force replaces it)", path.display())
        } else {
            format!("writing {}", path.display())
        }
    })?;
    // A file that existed keeps its mode on open: it holds a token now.
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).with_context(|| format!("restricting {} to 0600", path.display()))?;
    let text = serde_json::to_string_pretty(value).context("encoding the config")?;
    f.write_all(text.as_bytes()).and_then(|()| f.write_all(b"\n")).with_context(|| format!("writing {}", path.display()))
}

/// Replaces an existing config atomically (a new file beside it, 0600, synced, renamed over
/// it), so a crash leaves the old config or the new one, never half of either.
fn replace_private(path: &Path, value: &Value) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| format!("encoding {} failed: {e}", path.display()))?;
    text.push('\n');
    super::cli_common::replace_private(path, "json.rekey-tmp", text.as_bytes()).map_err(|e| format!("writing {} failed: {e}", path.display()))
}
