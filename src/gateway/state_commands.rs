//! The commands that look after the bots' state without serving: `backup` (while a gateway
//! runs), `restore` (while none does) and `check-state`. Each says per bot what it did and
//! what that means; the SQLite work is `store::backup`.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::config::{self, BotConfig, Config};
use super::store::backup::{self, Checked};
use super::{held_bots, state_dir, StartError};

/// The manifest of a backup directory: when it was made, and each bot's file and device.
pub const MANIFEST: &str = "backup.json";

fn load(config_path: &Path) -> Result<Config, StartError> {
    config::load(config_path).map_err(StartError::Config)
}

fn file_name(bot: &BotConfig) -> String {
    format!("bot-{}.db", bot.compat_user_id)
}

fn made_at_text(at: i64) -> String {
    format!("unix time {at}")
}

/// `backup CONFIG --out DIR`: a consistent, still encrypted copy of every bot's database in
/// `out` (made 0700 if missing), with [`MANIFEST`]. A gateway may be running.
pub fn backup(config_path: &Path, out: &Path) -> Result<String, StartError> {
    let config = load(config_path)?;
    if !out.exists() {
        fs::DirBuilder::new().recursive(true).mode(0o700).create(out).map_err(|e| StartError::State(format!("cannot create {}: {e}", out.display())))?;
    }
    let made_at = crate::clock::unix_now();
    let mut said = Vec::new();
    let mut bots = Vec::new();
    let mut failed = Vec::new();
    for bot in &config.bots {
        let source = state_dir::bot_database_in(&config.state_dir, bot.compat_user_id);
        if !source.exists() {
            said.push(format!("bot @{}: no state yet ({} does not exist); nothing to back up", bot.username, source.display()));
            continue;
        }
        let dest = out.join(file_name(bot));
        match backup::copy_online(&source, &bot.recovery_secret, &dest) {
            Ok(checked) => {
                let _ = fs::set_permissions(&dest, fs::Permissions::from_mode(0o600));
                said.push(format!("bot @{}: backed up to {} ({} bytes, checked)", bot.username, dest.display(), checked.bytes));
                bots.push(json!({
                    "username": bot.username,
                    "compat_user_id": bot.compat_user_id,
                    "file": file_name(bot),
                    "device_id": checked.device_id,
                }));
            }
            Err(e) => failed.push(format!("bot @{}: not backed up: {e}", bot.username)),
        }
    }
    let manifest = json!({ "made_at": made_at, "version": env!("CARGO_PKG_VERSION"), "bots": bots });
    let path = out.join(MANIFEST);
    let part = out.join(format!("{MANIFEST}.part"));
    fs::write(&part, serde_json::to_vec_pretty(&manifest).expect("json")).and_then(|_| fs::rename(&part, &path))
        .map_err(|e| StartError::State(format!("cannot write {}: {e}", path.display())))?;
    said.push(format!(
        "backup made at {} in {}: restore it with bot-gateway restore {} --from {} (while no gateway runs)",
        made_at_text(made_at),
        out.display(),
        config_path.display(),
        out.display()
    ));
    if failed.is_empty() {
        Ok(said.join("\n"))
    } else {
        crate::cli::print(&format!("{}\n", said.join("\n")));
        Err(StartError::State(failed.join("; ")))
    }
}

/// `restore CONFIG --from DIR`: puts each bot's database in `from` back into the state_dir,
/// once it has passed `backup::check` and belongs to the config's bot. Takes the state_dir's
/// lock: no gateway may run on it. The files it replaces are moved aside, not deleted.
pub fn restore(config_path: &Path, from: &Path) -> Result<String, StartError> {
    let config = load(config_path)?;
    let manifest: Value = fs::read(from.join(MANIFEST))
        .map_err(|e| StartError::State(format!("{} is not a backup of bot-gateway: {e} reading {MANIFEST}", from.display())))
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| StartError::State(format!("{} is damaged: {e}", from.join(MANIFEST).display()))))?;
    let made_at = manifest["made_at"].as_i64().unwrap_or(0);
    let state = state_dir::StateDir::open(&config.state_dir).map_err(StartError::StateDir)?;
    let mut held = held_bots::HeldBots::load(state.path()).map_err(StartError::Held)?;
    let now = crate::clock::unix_now();
    let mut said = Vec::new();
    for bot in &config.bots {
        let source = from.join(file_name(bot));
        if !source.exists() {
            said.push(format!("bot @{}: no copy in {}; its state is left as it is", bot.username, from.display()));
            continue;
        }
        let (device, aside) = restore_one(&state, bot, &source, made_at, now)?;
        if let Some(device) = device {
            held.record(bot.compat_user_id, device, now).map_err(|e| StartError::State(format!("cannot record @{} in {}: {e}", bot.username, held_bots::FILE)))?;
        }
        let device = device.map_or_else(|| "no device yet".to_string(), |d| format!("device {d}"));
        let aside = if aside.is_empty() { String::new() } else { format!(" The files it replaced were moved aside: {}.", aside.join(", ")) };
        said.push(format!(
            "bot @{}: restored ({device}) from the backup made at {}. What happened after the backup is gone: updates \
             queued since, messages and changes; its users' messages sent since are not delivered again. Its sessions \
             with users only receive until its next message to each starts a new one, and its groups are rejoined at \
             the next start.{aside}",
            bot.username,
            made_at_text(made_at)
        ));
    }
    Ok(said.join("\n"))
}

/// One bot's restore: the copy checked beside its place, prepared, then renamed in. Returns its
/// device and the files moved aside.
fn restore_one(state: &state_dir::StateDir, bot: &BotConfig, source: &Path, made_at: i64, now: i64) -> Result<(Option<u32>, Vec<String>), StartError> {
    let failed = |why: String| StartError::State(format!("bot @{}: not restored: {why}", bot.username));
    let db = state.bot_database(bot.compat_user_id);
    let copy = PathBuf::from(format!("{}.restore", db.display()));
    for leftover in ["", "-wal", "-shm"].map(|s| PathBuf::from(format!("{}{s}", copy.display()))) {
        let _ = fs::remove_file(leftover);
    }
    // Neither file is open in SQLite in this process (no gateway runs: the lock above), so the
    // descriptors of this copy drop no lock ("How To Corrupt", 2.2); `prepare_restored`'s
    // checkpoint syncs the copy.
    fs::copy(source, &copy).map_err(|e| failed(format!("copying {} to {}: {e}", source.display(), copy.display())))?;
    let _ = fs::set_permissions(&copy, fs::Permissions::from_mode(0o600));
    let checked: Checked = match backup::check(&copy, &bot.recovery_secret) {
        Ok(checked) => checked,
        Err(e) => {
            let _ = fs::remove_file(&copy);
            return Err(failed(format!("the copy {}: {e}", source.display())));
        }
    };
    if checked.bot_id_hex.as_deref() != Some(bot.bot_id_hex.as_str()) {
        let _ = fs::remove_file(&copy);
        return Err(failed(format!(
            "{} belongs to bot {}, not to this bot's bot_id_hex {}",
            source.display(),
            checked.bot_id_hex.as_deref().unwrap_or("(none recorded)"),
            bot.bot_id_hex
        )));
    }
    backup::prepare_restored(&copy, &bot.recovery_secret, made_at).map_err(|e| failed(e.to_string()))?;
    let mut aside = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", db.display()));
        if file.exists() {
            let moved = PathBuf::from(format!("{}.before-restore-{now}", file.display()));
            fs::rename(&file, &moved).map_err(|e| failed(format!("moving {} aside: {e}", file.display())))?;
            aside.push(moved.display().to_string());
        }
    }
    fs::rename(&copy, &db).map_err(|e| failed(format!("putting {} in place: {e}", db.display())))?;
    fs::File::open(state.path()).and_then(|d| d.sync_all()).map_err(|e| failed(format!("syncing {}: {e}", state.path().display())))?;
    Ok((checked.device_id, aside))
}

/// `check-state CONFIG`: every bot's database checked whole without starting (safe while a
/// gateway runs). The report, and whether all is well.
pub fn check_state(config_path: &Path) -> Result<(String, bool), StartError> {
    let config = load(config_path)?;
    let held = held_bots::HeldBots::load(&config.state_dir).map_err(StartError::Held)?;
    let mut lines = Vec::new();
    let mut ok = true;
    for bot in &config.bots {
        let db = state_dir::bot_database_in(&config.state_dir, bot.compat_user_id);
        let name = &bot.username;
        if let Some(h) = held.get(bot.compat_user_id) {
            if let Some(what) = held_bots::lost(&db, &bot.recovery_secret) {
                ok = false;
                lines.push(format!("bot @{name}: {}", held_bots::refusal(&db, h, &what, &config_path.display().to_string(), name)));
                continue;
            }
        } else if !db.exists() {
            lines.push(format!("bot @{name}: no state yet; the next start registers its device"));
            continue;
        }
        match backup::check(&db, &bot.recovery_secret) {
            Ok(c) if c.bot_id_hex.as_deref().is_some_and(|id| id != bot.bot_id_hex) => {
                ok = false;
                lines.push(format!("bot @{name}: {} belongs to another bot ({})", db.display(), c.bot_id_hex.unwrap_or_default()));
            }
            Ok(c) => {
                let device = c.device_id.map_or_else(|| "no device yet".to_string(), |d| format!("device {d}"));
                lines.push(format!("bot @{name}: {} is whole ({} bytes, {device})", db.display(), c.bytes));
            }
            Err(e) => {
                ok = false;
                lines.push(format!("bot @{name}: {e}"));
            }
        }
    }
    Ok((lines.join("\n"), ok))
}
