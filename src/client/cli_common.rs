//! What every command family of `e2e-chat` shares: the global options and the profile they
//! open, the usage error, the arguments more than one family reads (`--reply-to`, message ids,
//! `--timeout`, a text, an edit, a press), and the one JSON line each result is printed as
//! (keys in order, controls escaped for the terminal). The families (`cli/` and the
//! `cli_*.rs` files) import it; it imports none of them.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::display;
use super::error::ClientError;
use super::profile::Profile;
use crate::cli::{Args, CliError, Context, Opt, UsageError};

/// The options every command takes: the platform server and the profile directory.
pub(super) struct Global {
    pub(super) server: Option<String>,
    pub(super) profile: PathBuf,
}

pub(super) const REPLY_TO: Opt = Opt::value("--reply-to");

/// A usage error (exit status 2): a missing, extra or malformed argument.
pub(super) fn usage(message: String) -> CliError {
    CliError::Usage(UsageError(message))
}

/// A failed client operation, printed as its own message (which names what failed) with its
/// causes: `profile.send_message(..)?` in a command.
impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        CliError::Operation(Box::new(e))
    }
}

/// The profile of the global options.
pub(super) fn open_profile(global: &Global) -> Result<Profile, CliError> {
    Ok(Profile::open_at(&global.profile, global.server.as_deref())?)
}

/// A per-dialog message id (a positive whole number).
pub(super) fn message_id_arg(what: &str, v: &str) -> Result<u64, CliError> {
    match v.parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(usage(format!("{what} {v:?} is not a message id (a positive whole number)"))),
    }
}

/// Default `listen` duration.
const DEFAULT_LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// The `--timeout` of `command`: zero or more seconds, 30 when not given.
pub(super) fn timeout_arg(command: &str, a: &Args) -> Result<Duration, CliError> {
    let Some(v) = a.value("--timeout") else {
        return Ok(DEFAULT_LISTEN_TIMEOUT);
    };
    let secs: f64 = v.parse().map_err(|_| usage(format!("{command}: --timeout {v:?} is not a number of seconds")))?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(usage(format!("{command}: --timeout must be zero or more seconds")));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `COMMAND TARGET MESSAGE_ID TEXT...` of an edit.
pub(super) fn edit_args<'a>(command: &str, target: &str, a: &Args<'a>) -> Result<(&'a str, u64, String), CliError> {
    let [where_, id, text @ ..] = &a.words[..] else {
        return Err(usage(format!("{command}: expected {target} MESSAGE_ID TEXT")));
    };
    let message_id = message_id_arg(&format!("{command}: MESSAGE_ID"), id)?;
    let text = text.join(" ");
    if text.trim().is_empty() {
        return Err(usage(format!("{command}: no text given (a message cannot be edited to nothing)")));
    }
    Ok((*where_, message_id, text))
}

/// `COMMAND TARGET TEXT... [--reply-to M]`: the first word is the target, the others the text.
pub(super) fn text_args<'a>(command: &str, target: &str, a: &Args<'a>) -> Result<(&'a str, Option<u64>, String), CliError> {
    let Some((peer, text)) = a.words.split_first() else {
        return Err(usage(format!("{command}: {target} missing")));
    };
    let reply_to = a.value("--reply-to").map(|v| message_id_arg(&format!("{command}: --reply-to"), v)).transpose()?;
    let text = text.join(" ");
    if text.trim().is_empty() {
        return Err(usage(format!("{command}: no text given (an empty message is not sent)")));
    }
    Ok((*peer, reply_to, text))
}

/// The arguments of a press (`press`, `group press`): WHERE MESSAGE_ID CALLBACK_DATA and an
/// optional `--timeout S` for the answer.
pub(super) fn press_args<'a>(command: &str, where_: &str, a: &Args<'a>) -> Result<(&'a str, u64, &'a str, Duration), CliError> {
    let [target, message_id, data] = a.words[..] else {
        return Err(usage(format!("{command}: expected {where_} MESSAGE_ID CALLBACK_DATA")));
    };
    let message_id = message_id_arg(&format!("{command}: MESSAGE_ID"), message_id)?;
    Ok((target, message_id, data, timeout_arg(command, a)?))
}

/// A JSON object with keys in the given order (serde_json's own map sorts them).
pub(super) fn ordered(fields: &[(&str, Value)]) -> String {
    let raw: Vec<(&str, String)> = fields.iter().map(|(k, v)| (*k, v.to_string())).collect();
    ordered_raw(&raw)
}

/// Like `ordered`, with values that are already JSON text.
pub(super) fn ordered_raw(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{}:{v}", Value::from(*k))).collect();
    format!("{{{}}}", body.join(","))
}

/// Prints one JSON line, with DEL, C1 and bidi controls escaped too (`display::json_for_terminal`).
pub(super) fn print_line(line: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    writeln!(out, "{}", display::json_for_terminal(line)).context("writing to stdout")?;
    out.flush().context("writing to stdout")
}

/// Replaces (or creates) `path` atomically with `bytes`, private to the user: a new file
/// beside it (`tmp_extension`), 0600, synced, renamed over it, the directory synced. A crash
/// leaves the old file or the new one, never half of either; a failure leaves no temporary.
pub(super) fn replace_private(path: &Path, tmp_extension: &str, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension(tmp_extension);
    let write = || -> io::Result<()> {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        // A temporary left by a crash keeps its mode on open.
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}
