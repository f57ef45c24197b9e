//! What every command family of `e2e-chat` shares: the global options and the profile they
//! open, the usage error, the `--reply-to` option and message id arguments, and the one JSON
//! line each result is printed as (keys in order, controls escaped for the terminal). The
//! families (`cli/` and the `cli_*.rs` files) import it; it imports none of them.

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

use super::display;
use super::profile::Profile;
use crate::cli::{Opt, UsageError};

/// The options every command takes: the platform server and the profile directory.
pub(super) struct Global {
    pub(super) server: Option<String>,
    pub(super) profile: PathBuf,
}

pub(super) const REPLY_TO: Opt = Opt::value("--reply-to");

/// A usage error (exit status 2): a missing, extra or malformed argument.
pub(super) fn usage(message: String) -> anyhow::Error {
    UsageError(message).into()
}

/// The profile of the global options.
pub(super) fn open_profile(global: &Global) -> anyhow::Result<Profile> {
    Ok(Profile::open_at(&global.profile, global.server.as_deref())?)
}

/// A per-dialog message id (a positive whole number).
pub(super) fn message_id_arg(what: &str, v: &str) -> anyhow::Result<u64> {
    match v.parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(usage(format!("{what} {v:?} is not a message id (a positive whole number)"))),
    }
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
pub(super) fn print_line(line: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{}", display::json_for_terminal(line)).context("writing to stdout")?;
    out.flush().context("writing to stdout")
}
