//! The `e2e-chat` command line: its commands and their options (read by the one option parser,
//! `crate::cli::Program::parse`: options anywhere before `--`), the one-JSON-object-per-line output of
//! `register`, `send`, `press`, `react` and `listen` (and `send-location`, `send-contact` in
//! `cli_places`), and the error line on stderr. Scripts depend on this output; change it only
//! together with them.
//!
//! By command family: `dialog.rs` (register, send, edit, press, react, inline, choose, listen,
//! commands, chat), `files.rs` (send-file, download), `groups.rs` (the `group` commands; their
//! administration is `cli_admin`), `usage.rs` (the help text) and `json.rs` (the output
//! contract: every JSON line the commands print, in one place).

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::bot_profile::BotMenu;
use super::group::GroupDetails;
use super::message::{
    role_name, Entity, GroupRef, GroupRole, Incoming, Keyboard, MediaInfo, MediaKind, ReactionType, ReceivedMessage, ReplyMarkup,
    Sender, SentPress,
};
use super::reply_keyboard::ReplyKeyboard;
use super::display;
use super::chat;
use super::profile::Profile;
use crate::cli::{Args, Opt, Until, UsageError};
use super::cli_common::{message_id_arg, open_profile, ordered, ordered_raw, print_line, usage, Global, REPLY_TO};

mod dialog;
mod files;
mod groups;
mod json;
mod usage;
#[cfg(test)]
mod tests;

use dialog::{chat, choose, commands, edit, inline, listen, press, react, register, send};
use files::{download, send_file};
use groups::{group, unknown_group_command, CHANNEL_SUBCOMMANDS, GROUP_SUBCOMMANDS};
use usage::USAGE;

/// The program's command-line conventions (`crate::cli`).
pub const PROGRAM: crate::cli::Program = crate::cli::Program {
    name: "e2e-chat",
    help: USAGE,
    commands: &[
        "register", "send", "edit", "press", "reply-button", "start", "react", "inline", "choose", "send-file",
        "send-location", "send-contact", "vote", "download", "listen", "commands", "chat", "group", "channel", "join",
        "save-config",
    ],
};

/// Default `listen` duration.
const DEFAULT_LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Entry point of the `e2e-chat` program. On failure prints one line to stderr and exits 1
/// (the error never reaches `main`, whose default report spans several lines).
pub fn run_cli(args: Vec<String>) -> anyhow::Result<()> {
    // Through the chat view's sink: while chat mode draws the screen, log lines are shown in it.
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .target(env_logger::Target::Pipe(Box::new(super::tui::logs::Sink)))
        .try_init();
    if let Err(e) = run(&args) {
        let _ = io::stdout().flush();
        let line = format!("{e:#}").replace('\n', " ");
        eprintln!("e2e-chat: {line}");
        let usage = e.downcast_ref::<crate::cli::UsageError>().is_some();
        std::process::exit(if usage { crate::cli::USAGE_EXIT } else { 1 });
    }
    Ok(())
}


/// The global options: before the command or anywhere among its arguments (before `--`).
const GLOBAL_OPTIONS: [Opt; 2] = [Opt::value("--server"), Opt::value("--profile")];
const TIMEOUT: Opt = Opt::value("--timeout");

/// The options of each command (besides the global ones); for `group` and `channel` those of
/// the subcommand, which is checked here (an unknown one is a usage error naming them all).
fn command_options(command: &str, sub: Option<&str>) -> Result<&'static [Opt], UsageError> {
    const NONE: &[Opt] = &[];
    const REGISTER: &[Opt] = &[Opt::value("--name")];
    const SEND_FILE: &[Opt] = &[Opt::value("--as"), Opt::value("--caption")];
    const LISTEN: &[Opt] = &[TIMEOUT, Opt::value("--count")];
    const COMMANDS: &[Opt] = &[Opt::value("--lang")];
    Ok(match (command, sub) {
        ("register", _) => REGISTER,
        ("send", _) | ("group", Some("send")) => &[REPLY_TO],
        ("press" | "inline", _) | ("group", Some("press")) => &[TIMEOUT],
        ("send-file", _) => SEND_FILE,
        ("send-location", _) => super::cli_places::LOCATION_OPTIONS,
        ("send-contact", _) => &[REPLY_TO],
        ("listen", _) => LISTEN,
        ("commands", _) => COMMANDS,
        ("save-config", _) => super::cli_config::OPTIONS,
        ("reply-button", _) => super::cli_bot::REPLY_BUTTON_OPTIONS,
        ("group", Some(s)) if super::cli_admin::GROUP_ADMIN_SUBCOMMANDS.contains(&s) => super::cli_admin::admin_options(s),
        ("group", Some("send-file")) => SEND_FILE,
        ("group", Some("create" | "add" | "remove" | "edit" | "title" | "members" | "leave" | "list" | "download")) => NONE,
        ("group", None) => return Err(UsageError(format!("group: which one? the group commands are: {GROUP_SUBCOMMANDS}"))),
        ("group", Some(other)) => return Err(unknown_group_command(other)),
        ("channel", Some("create" | "post")) => NONE,
        ("channel", None) => return Err(UsageError(format!("channel: which one? the channel commands are: {CHANNEL_SUBCOMMANDS}"))),
        ("channel", Some(other)) => {
            return Err(UsageError(format!("unknown channel command {other:?}; the channel commands are: {CHANNEL_SUBCOMMANDS}")))
        }
        _ => NONE,
    })
}

/// The arguments of `command` (`sub`: of its subcommand), with the global options among them.
pub(super) fn parse_command<'a>(command: &str, sub: Option<&str>, args: &'a [String]) -> Result<Args<'a>, UsageError> {
    let mut options = command_options(command, sub)?.to_vec();
    options.extend_from_slice(&GLOBAL_OPTIONS);
    let context = match sub {
        Some(sub) => format!("{command} {sub}"),
        None => command.to_string(),
    };
    Ok(PROGRAM.parse(&context, args, &options, Until::End)?.0)
}


pub(super) fn run(args: &[String]) -> anyhow::Result<()> {
    let mut top_options = GLOBAL_OPTIONS.to_vec();
    top_options.push(Opt::switch("--version").or("-V"));
    let (top, rest) = PROGRAM.parse("e2e-chat", args, &top_options, Until::FirstWord)?;
    if top.help {
        print!("{USAGE}");
        return Ok(());
    }
    if top.switch("--version") {
        println!("{}", crate::cli::version_line("e2e-chat"));
        return Ok(());
    }
    let Some((command, rest)) = rest.split_first() else {
        return Err(usage(format!(
            "no command given; the commands are: {} (see e2e-chat --help)",
            PROGRAM.commands.join(", ")
        )));
    };
    if command == "help" {
        // `help` and `help COMMAND`.
        let early: Vec<String> = std::iter::once(command.clone()).chain(rest.first().cloned()).collect();
        if let crate::cli::Early::Print(text) = PROGRAM.early(&early)? {
            print!("{text}");
        }
        return Ok(());
    }
    if !PROGRAM.commands.contains(&command.as_str()) {
        return Err(PROGRAM.unknown_command(command).into());
    }
    let mut server = top.value("--server");
    let mut profile = top.value("--profile");
    // `group` and `channel`: the subcommand is their first word (global options may come
    // before it too).
    let (sub, rest) = match command.as_str() {
        "group" | "channel" => {
            let (before, rest) = PROGRAM.parse(command, rest, &GLOBAL_OPTIONS, Until::FirstWord)?;
            if before.help {
                print!("{}", PROGRAM.command_help(command).unwrap_or_else(|| USAGE.to_string()));
                return Ok(());
            }
            server = before.value("--server").or(server);
            profile = before.value("--profile").or(profile);
            match rest.split_first() {
                Some((sub, rest)) => (Some(sub.as_str()), rest),
                None => (None, rest),
            }
        }
        _ => (None, rest),
    };
    let a = parse_command(command, sub, rest)?;
    // `-h`/`--help` anywhere before `--`: a text that is "--help" itself goes after `--`.
    if a.help {
        print!("{}", PROGRAM.command_help(command).unwrap_or_else(|| USAGE.to_string()));
        return Ok(());
    }
    let global = Global {
        server: a.value("--server").or(server).map(str::to_string),
        profile: a.value("--profile").or(profile).map(PathBuf::from).unwrap_or_else(default_profile_dir),
    };
    let sub = sub.unwrap_or_default();
    match command.as_str() {
        "register" => register(&global, &a),
        "send" => send(&global, &a),
        "edit" => edit(&global, &a),
        "listen" => listen(&global, &a),
        "commands" => commands(&global, &a),
        "press" => press(&global, &a),
        "reply-button" => super::cli_bot::reply_button(&global, &a),
        "start" => super::cli_bot::start(&global, &a),
        "react" => react(&global, &a),
        "inline" => inline(&global, &a),
        "choose" => choose(&global, &a),
        "send-file" => send_file(&global, &a),
        "send-location" => super::cli_places::send_location(&global, &a),
        "send-contact" => super::cli_places::send_contact(&global, &a),
        "vote" => super::cli_places::vote(&global, &a),
        "download" => download(&global, &a),
        "chat" => chat(&global, &a),
        "save-config" => super::cli_config::save_config(&global, &a),
        "group" => group(&global, sub, &a),
        "channel" => super::cli_admin::channel(&global, sub, &a),
        "join" => super::cli_admin::join(&global, &a),
        other => Err(PROGRAM.unknown_command(other).into()),
    }
}

fn default_profile_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("E2E_CHAT_PROFILE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".e2e-chat")
}

/// The `--timeout` of `command`: zero or more seconds, 30 when not given.
pub(super) fn timeout_arg(command: &str, a: &Args) -> anyhow::Result<Duration> {
    let Some(v) = a.value("--timeout") else {
        return Ok(DEFAULT_LISTEN_TIMEOUT);
    };
    let secs: f64 = v.parse().map_err(|_| usage(format!("{command}: --timeout {v:?} is not a number of seconds")))?;
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(usage(format!("{command}: --timeout must be zero or more seconds")));
    }
    Ok(Duration::from_secs_f64(secs))
}
