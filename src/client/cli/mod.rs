//! The `e2e-chat` command line: its commands and their options (read by the one option parser,
//! `crate::cli::Program::parse`: options anywhere before `--`), the dispatch to each command
//! family's file, and the error line on stderr.
//!
//! - `usage`: the help text and the lists usage errors name.
//! - `dialog`: the private-dialog commands (`register`, `send`, `edit`, `press`, `react`,
//!   `inline`, `choose`, `listen`, `commands`, `chat`).
//! - `files`: `send-file` and `download`.
//! - `groups`: the `group` subcommands; `admin`: the administering ones, `channel` and `join`.
//! - `json`: the one-JSON-object-per-line output of every command (and of `send-location`,
//!   `send-contact`, `reply-button` and `start` in `client/cli_*.rs`). Scripts depend on this
//!   output; change it only together with them.
//!
//! This file imports the families; they import `json`, `usage`, `client::cli_common` and the
//! rest of `client`, and `groups` builds on `dialog`, `files` and `admin`, never the reverse.

mod admin;
mod dialog;
mod files;
mod groups;
mod identity;
pub(super) mod json;
mod usage;

use std::path::PathBuf;

use self::usage::{unknown_group_command, CHANNEL_SUBCOMMANDS, GROUP_SUBCOMMANDS, USAGE};
use super::cli_common::{usage, Global, REPLY_TO};
use super::{cli_bot, cli_config, cli_places, tui};
use crate::cli::{Args, CliError, Opt, Until, UsageError};

/// The program's command-line conventions (`crate::cli`).
pub(crate) const PROGRAM: crate::cli::Program = crate::cli::Program {
    name: "e2e-chat",
    help: USAGE,
    commands: &[
        "register", "send", "edit", "press", "reply-button", "start", "react", "inline", "choose", "send-file",
        "send-location", "send-contact", "send-poll", "vote", "download", "listen", "commands", "chat", "web", "group", "channel", "join",
        "newbot", "rekey", "save-config", "verify", "trust",
    ],
};

/// Entry point of the `e2e-chat` program (`args` without the program name); `main` prints an
/// error as one line (`crate::cli::exit_with`).
pub fn run_cli(args: Vec<String>) -> Result<(), CliError> {
    // Through the chat view's sink: while chat mode draws the screen, log lines are shown in it.
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .target(env_logger::Target::Pipe(Box::new(tui::logs::Sink)))
        .try_init();
    run(&args)
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
    const VERIFY: &[Opt] = &[Opt::switch("--mark")];
    const WEB: &[Opt] = &[Opt::value("--listen"), Opt::switch("--open")];
    Ok(match (command, sub) {
        ("register", _) => REGISTER,
        ("send", _) | ("group", Some("send")) => &[REPLY_TO],
        ("press" | "inline", _) | ("group", Some("press")) => &[TIMEOUT],
        ("send-file", _) => SEND_FILE,
        ("send-location", _) => cli_places::LOCATION_OPTIONS,
        ("send-contact", _) => &[REPLY_TO],
        ("send-poll", _) => &cli_places::SEND_POLL_OPTIONS,
        ("group", Some("send-poll")) => &cli_places::POLL_OPTIONS,
        ("listen", _) => LISTEN,
        ("commands", _) => COMMANDS,
        ("verify", _) => VERIFY,
        ("web", _) => WEB,
        ("save-config", _) => cli_config::OPTIONS,
        ("newbot", _) => cli_config::NEWBOT_OPTIONS,
        ("rekey", _) => cli_config::REKEY_OPTIONS,
        ("reply-button", _) => &cli_bot::REPLY_BUTTON_OPTIONS,
        ("group", Some(s)) if admin::GROUP_ADMIN_SUBCOMMANDS.contains(&s) => admin::admin_options(s),
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

pub(super) fn run(args: &[String]) -> Result<(), CliError> {
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
        "register" => dialog::register(&global, &a),
        "send" => dialog::send(&global, &a),
        "edit" => dialog::edit(&global, &a),
        "listen" => dialog::listen(&global, &a),
        "commands" => dialog::commands(&global, &a),
        "press" => dialog::press(&global, &a),
        "reply-button" => cli_bot::reply_button(&global, &a),
        "start" => cli_bot::start(&global, &a),
        "react" => dialog::react(&global, &a),
        "inline" => dialog::inline(&global, &a),
        "choose" => dialog::choose(&global, &a),
        "send-file" => files::send_file(&global, &a),
        "send-location" => cli_places::send_location(&global, &a),
        "send-contact" => cli_places::send_contact(&global, &a),
        "send-poll" => cli_places::send_poll(&global, &a),
        "vote" => cli_places::vote(&global, &a),
        "download" => files::download(&global, &a),
        "chat" => dialog::chat(&global, &a),
        "web" => dialog::web(&global, &a),
        "save-config" => cli_config::save_config(&global, &a),
        "newbot" => cli_config::newbot(&global, &a),
        "rekey" => cli_config::rekey(&global, &a),
        "group" => groups::group(&global, sub, &a),
        "channel" => admin::channel(&global, sub, &a),
        "join" => admin::join(&global, &a),
        "verify" => identity::verify(&global, &a),
        "trust" => identity::trust(&global, &a),
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

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    /// `run`'s error for `args` after `--profile /nonexistent/e2e`: (a usage error?, message).
    pub(super) fn refused(args: &[&str]) -> (bool, String) {
        let mut all = strings(&["--profile", "/nonexistent/e2e"]);
        all.extend(strings(args));
        let err = run(&all).expect_err("refused");
        (matches!(err, CliError::Usage(_)), format!("{err:#}"))
    }

    #[test]
    fn every_argument_problem_is_a_usage_error_and_the_operations_own_failures_are_not() {
        for args in [
            &["send"][..],
            &["send", "@bot"],
            &["send", "@bot", "hi", "--bogus"],
            &["register"],
            &["register", "a", "b"],
            &["register", "alice"], // no --server
            &["press", "@bot", "1"],
            &["press", "@bot", "1", "d", "--timeout", "x"],
            &["react", "@bot"],
            &["react", "@bot", "x"],
            &["inline"],
            &["inline", "@bot", "q", "--timeout"],
            &["choose", "@bot", "1"],
            &["send-file", "@bot"],
            &["send-file", "@bot", "f", "--as", "gif"],
            &["download", "@bot", "1"],
            &["listen", "extra"],
            &["listen", "--count", "many"],
            &["commands"],
            &["commands", "@a", "@b"],
            &["chat"],
            &["chat", "@a", "@b"],
            &["join"],
            &["group"],
            &["group", "frob"],
            &["group", "create"],
            &["group", "add", "T"],
            &["group", "send", "T"],
            &["group", "press", "T", "1"],
            &["group", "title", "T"],
            &["group", "members"],
            &["group", "list", "x"],
            &["group", "ban", "T", "@u", "--until", "soon"],
            &["group", "promote", "T", "@u"],
            &["group", "link", "T", "--limit"],
            &["group", "link", "T", "--request=yes"],
            &["group", "delete", "T", "x"],
            &["group", "export-link"],
            &["channel"],
            &["channel", "frob"],
            &["channel", "create"],
            &["channel", "post", "C"],
        ] {
            let (usage, message) = refused(args);
            assert!(usage, "{args:?}: {message}");
        }
        // Well-formed: the failure is the operation's own (no profile here), status 1.
        for args in [
            &["send", "@bot", "hi", "--reply-to", "3"][..],
            &["send", "@bot", "--", "--help"],
            &["listen", "--timeout", "0"],
            &["group", "members", "Team"],
            &["group", "link", "T", "--request", "--limit=3"],
            &["channel", "post", "C", "hello", "--", "-world"],
            &["join", "e2e://join/x"],
        ] {
            let (usage, message) = refused(args);
            assert!(!usage && message.contains("no registered profile"), "{args:?}: {message}");
        }
    }

    #[test]
    fn global_options_may_come_after_the_command() {
        // A profile directory that cannot be made (its parent is a file): register fails
        // there, after it took the --server from wherever it came.
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("file"), "").expect("write");
        let p = dir.path().join("file").join("p").display().to_string();
        for args in [
            vec!["--profile", &p, "register", "alice", "--server", "http://127.0.0.1:9"],
            vec!["register", "alice", "--server=http://127.0.0.1:9", "--profile", &p],
            vec!["register", "--profile", &p, "--server", "http://127.0.0.1:9", "alice"],
        ] {
            let err = run(&strings(&args)).expect_err("no profile directory");
            assert!(!matches!(err, CliError::Usage(_)) && !format!("{err:#}").contains("--server"), "{args:?}: {err:#}");
        }
        // --profile after the command is the profile opened; the last one counts.
        let err = run(&strings(&["send", "@bot", "hi", "--profile", "/nonexistent/second"])).expect_err("no profile");
        assert!(format!("{err:#}").contains("/nonexistent/second"), "{err:#}");
        let err = run(&strings(&["--profile", "/nonexistent/first", "listen", "--profile=/nonexistent/second"])).expect_err("no profile");
        assert!(format!("{err:#}").contains("/nonexistent/second") && !format!("{err:#}").contains("/nonexistent/first"), "{err:#}");
        // Between `group` and its subcommand, too.
        let err = run(&strings(&["group", "--profile", "/nonexistent/g", "members", "Team"])).expect_err("no profile");
        assert!(format!("{err:#}").contains("/nonexistent/g"), "{err:#}");
        let err = run(&strings(&["send", "@bot", "hi", "--profile"])).expect_err("no value");
        assert!(matches!(err, CliError::Usage(_)) && err.to_string().contains("--profile needs a value"), "{err}");
    }

    #[test]
    fn options_accept_both_spellings_and_refuse_unknown_ones() {
        let args = strings(&["--server=http://127.0.0.1:1", "--profile", "/tmp/p", "listen"]);
        let (top, rest) = PROGRAM.parse("e2e-chat", &args, &GLOBAL_OPTIONS, Until::FirstWord).expect("ok");
        assert_eq!((top.value("--server"), top.value("--profile"), rest), (Some("http://127.0.0.1:1"), Some("/tmp/p"), &args[3..]));
        assert!(run(&strings(&["--profile"])).expect_err("no value").to_string().contains("--profile needs a value"));
        for args in [&["--bogus"][..], &["frobnicate"], &["--", "listen"], &["--profile", "/tmp/p"]] {
            let err = run(&strings(args)).expect_err("refused");
            assert!(matches!(err, CliError::Usage(_)), "{args:?}: {err}");
        }
        let err = run(&["--profile".into(), "/nonexistent/e2e".into(), "send".into(), "@x".into()]).expect_err("no text");
        assert!(err.to_string().contains("no text"));
    }

    #[test]
    fn register_needs_a_server_and_open_names_missing_profile() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("p").display().to_string();
        let err = run(&["--profile".into(), p.clone(), "register".into(), "alice".into()]).expect_err("no server");
        assert!(err.to_string().contains("--server"), "{err}");
        let err = run(&["--profile".into(), p, "listen".into(), "--timeout".into(), "0".into()]).expect_err("no profile");
        assert!(format!("{err:#}").contains("no registered profile"), "{err:#}");
    }
}
