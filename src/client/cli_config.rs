//! `e2e-chat save-config @BotManager FILE`: the gateway config the management bot sent at
//! `/newbot` (with the newest token a later `/token` issued), written to FILE in one step,
//! mode 0600, with `state_dir` filled in. Nothing is asked of the platform: the token and the
//! recovery secret are in the profile's remembered dialog with the manager and nowhere else.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::bot_config;
use super::cli_common::{open_profile, ordered, print_line, usage, Global};
use crate::cli::{Args, CliError, Context, Opt};

/// The options of `save-config`.
pub(super) const OPTIONS: &[Opt] = &[Opt::value("--state-dir"), Opt::value("--bot"), Opt::switch("--force")];

/// How many of the manager's newest messages are searched.
const SEARCHED: usize = 500;

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
            Some(bot) => format!("no gateway config for {bot} in your dialog with @{}: create the bot there with /newbot (as this profile)", peer.username),
            None => format!("no gateway config in your dialog with @{}: create a bot there with /newbot (as this profile)", peer.username),
        })
    })?;
    let state_dir = match a.value("--state-dir") {
        Some(dir) => absolute(Path::new(dir))?,
        None => absolute(&file.parent().unwrap_or(Path::new(".")).join(format!("state-{}", found.username)))?,
    };
    let mut config = found.config;
    config["state_dir"] = Value::String(state_dir.display().to_string());
    write_private(file, &config, a.switch("--force"))?;
    print_line(&ordered(&[
        ("path", json!(file.display().to_string())),
        ("bot", json!(format!("@{}", found.username))),
        ("state_dir", json!(state_dir.display().to_string())),
        ("token_replaced", json!(found.token_replaced)),
    ]))
}

/// `path` made absolute (the gateway may run from another directory).
fn absolute(path: &Path) -> Result<PathBuf, CliError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(std::env::current_dir().context("finding the current directory")?.join(path))
}

/// Writes the config 0600; an existing file only with `force`.
fn write_private(path: &Path, config: &Value, force: bool) -> Result<(), CliError> {
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
    let text = serde_json::to_string_pretty(config).context("encoding the config")?;
    f.write_all(text.as_bytes()).and_then(|()| f.write_all(b"\n")).with_context(|| format!("writing {}", path.display()))
}
