//! The `e2e-chat` command line: option parsing, the one-JSON-object-per-line output of
//! `register`, `send` and `listen`, and the error line on stderr. Scripts depend on this
//! output; change it only together with them.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};

use super::bot_profile::BotMenu;
use super::message::{Entity, ReceivedMessage};
use super::interactive;
use super::profile::Profile;

const USAGE: &str = "\
e2e-chat: a terminal client for people on the platform (end-to-end encrypted dialogs with bots)

Usage:
  e2e-chat [--server URL] [--profile DIR] <command> [arguments]

Global options (before the command):
  --server URL    platform server, e.g. http://127.0.0.1:50051 (needed for register;
                  stored in the profile, and overrides it for one run when given later)
  --profile DIR   profile directory (default: $E2E_CHAT_PROFILE, else ~/.e2e-chat)
  -h, --help      this help

Commands:
  register USERNAME [--name NAME]
        create the profile and a user; prints {\"user_id\":N,\"username\":\"U\",\"device_id\":D}
  send @PEER TEXT...
        send the words of TEXT joined by spaces; prints {\"chat_id\":N,\"message_id\":M,\"date\":T}
  listen [--timeout SECONDS] [--count N]
        print each received message as one JSON object per line; stop after SECONDS
        (default 30) or after N messages
  commands @BOT [--lang XX]
        what the bot offers in your private chat with it: first one line
        {\"bot\":\"B\",\"description\":\"...\",\"short_description\":\"...\"}, then one line
        {\"command\":\"start\",\"description\":\"...\"} per command; --lang picks the bot's
        texts in that two-letter language where it has them
  chat @PEER
        interactive dialog: incoming messages print as `[@sender] text`, each line you type
        is sent; /quit or end of input leaves

Errors go to stderr as one line and make the exit status non-zero.
Set RUST_LOG=info (or debug) for more detail on stderr.
";

/// Default `listen` duration.
const DEFAULT_LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Entry point of the `e2e-chat` program. On failure prints one line to stderr and exits 1
/// (the error never reaches `main`, whose default report spans several lines).
pub fn run_cli(args: Vec<String>) -> anyhow::Result<()> {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).try_init();
    if let Err(e) = run(&args) {
        let _ = io::stdout().flush();
        let line = format!("{e:#}").replace('\n', " ");
        eprintln!("e2e-chat: {line}");
        std::process::exit(1);
    }
    Ok(())
}

struct Global {
    server: Option<String>,
    profile: PathBuf,
}

fn run(args: &[String]) -> anyhow::Result<()> {
    let mut server = None;
    let mut profile = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if let Some(v) = option_value(args, &mut i, "--server")? {
            server = Some(v);
        } else if let Some(v) = option_value(args, &mut i, "--profile")? {
            profile = Some(PathBuf::from(v));
        } else if arg == "-h" || arg == "--help" {
            print!("{USAGE}");
            return Ok(());
        } else if arg.starts_with('-') {
            bail!("unknown option {arg} (see e2e-chat --help)");
        } else {
            break;
        }
        i += 1;
    }
    let Some(command) = args.get(i) else {
        bail!("no command given (see e2e-chat --help)");
    };
    let rest = &args[i + 1..];
    if rest.iter().any(|a| a == "-h" || a == "--help") && command != "send" {
        print!("{USAGE}");
        return Ok(());
    }
    let global = Global { server, profile: profile.unwrap_or_else(default_profile_dir) };
    match command.as_str() {
        "register" => register(&global, rest),
        "send" => send(&global, rest),
        "listen" => listen(&global, rest),
        "commands" => commands(&global, rest),
        "chat" => chat(&global, rest),
        "help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?} (see e2e-chat --help)"),
    }
}

/// `--name value` or `--name=value` at `args[*i]`; advances `i` past a separate value.
fn option_value(args: &[String], i: &mut usize, name: &str) -> anyhow::Result<Option<String>> {
    let arg = &args[*i];
    if arg == name {
        *i += 1;
        return match args.get(*i) {
            Some(v) => Ok(Some(v.clone())),
            None => bail!("{name} needs a value"),
        };
    }
    Ok(arg.strip_prefix(name).and_then(|r| r.strip_prefix('=')).map(str::to_string))
}

fn default_profile_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("E2E_CHAT_PROFILE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".e2e-chat")
}

fn open_profile(global: &Global) -> anyhow::Result<Profile> {
    Ok(Profile::open_at(&global.profile, global.server.as_deref())?)
}

fn register(global: &Global, args: &[String]) -> anyhow::Result<()> {
    let mut username = None;
    let mut name = None;
    let mut i = 0;
    while i < args.len() {
        if let Some(v) = option_value(args, &mut i, "--name")? {
            name = Some(v);
        } else if args[i].starts_with('-') {
            bail!("register: unknown option {}", args[i]);
        } else if username.is_none() {
            username = Some(args[i].clone());
        } else {
            bail!("register: unexpected argument {:?} (quote a display name with spaces: --name \"A B\")", args[i]);
        }
        i += 1;
    }
    let username = username.ok_or_else(|| anyhow!("register: USERNAME missing"))?;
    let server = global.server.as_deref().ok_or_else(|| anyhow!("register needs --server URL"))?;
    let profile = Profile::register(server, &global.profile, &username, name.as_deref().unwrap_or(""))
        .with_context(|| format!("register @{}", username.trim_start_matches('@')))?;
    print_line(&ordered(&[
        ("user_id", json!(profile.user_id())),
        ("username", json!(profile.username())),
        ("device_id", json!(profile.device_id())),
    ]))
}

fn send(global: &Global, args: &[String]) -> anyhow::Result<()> {
    let Some((peer, words)) = args.split_first() else {
        bail!("send: @PEER missing");
    };
    let text = words.join(" ");
    if text.trim().is_empty() {
        bail!("send: no text given (an empty message is not sent)");
    }
    let profile = open_profile(global)?;
    let sent = profile.send_text(peer, &text)?;
    print_line(&ordered(&[
        ("chat_id", json!(sent.chat_id)),
        ("message_id", json!(sent.message_id)),
        ("date", json!(sent.date)),
    ]))
}

fn listen(global: &Global, args: &[String]) -> anyhow::Result<()> {
    let mut timeout = DEFAULT_LISTEN_TIMEOUT;
    let mut count = usize::MAX;
    let mut i = 0;
    while i < args.len() {
        if let Some(v) = option_value(args, &mut i, "--timeout")? {
            let secs: f64 = v.parse().map_err(|_| anyhow!("listen: --timeout {v:?} is not a number of seconds"))?;
            if !(secs.is_finite() && secs >= 0.0) {
                bail!("listen: --timeout must be zero or more seconds");
            }
            timeout = Duration::from_secs_f64(secs);
        } else if let Some(v) = option_value(args, &mut i, "--count")? {
            count = v.parse().map_err(|_| anyhow!("listen: --count {v:?} is not a whole number"))?;
        } else {
            bail!("listen: unexpected argument {:?}", args[i]);
        }
        i += 1;
    }
    let profile = open_profile(global)?;
    let deadline = Instant::now() + timeout;
    let mut received = 0;
    while received < count {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        // One message per call, so a failed write stops us before more are acknowledged.
        let mut write_error = None;
        received += profile.receive_with(left, 1, |m| {
            if let Err(e) = print_line(&message_json(m)) {
                write_error = Some(e);
            }
        })?;
        if let Some(e) = write_error {
            return Err(e);
        }
    }
    Ok(())
}

fn commands(global: &Global, args: &[String]) -> anyhow::Result<()> {
    let mut bot = None;
    let mut lang = None;
    let mut i = 0;
    while i < args.len() {
        if let Some(v) = option_value(args, &mut i, "--lang")? {
            lang = Some(v);
        } else if args[i].starts_with('-') {
            bail!("commands: unknown option {}", args[i]);
        } else if bot.is_none() {
            bot = Some(args[i].clone());
        } else {
            bail!("commands: expected exactly one @BOT");
        }
        i += 1;
    }
    let bot = bot.ok_or_else(|| anyhow!("commands: @BOT missing"))?;
    let profile = open_profile(global)?;
    let menu = profile.bot_menu(&bot, lang.as_deref())?;
    for line in menu_lines(&menu) {
        print_line(&line)?;
    }
    Ok(())
}

/// The `commands` output: the bot line, then a line per command.
fn menu_lines(menu: &BotMenu) -> Vec<String> {
    let mut lines = vec![ordered(&[
        ("bot", json!(menu.bot)),
        ("description", json!(menu.description)),
        ("short_description", json!(menu.short_description)),
    ])];
    lines.extend(
        menu.commands
            .iter()
            .map(|c| ordered(&[("command", json!(c.command)), ("description", json!(c.description))])),
    );
    lines
}

fn chat(global: &Global, args: &[String]) -> anyhow::Result<()> {
    match args {
        [peer] => interactive::chat(&global.profile, global.server.as_deref(), peer),
        [] => bail!("chat: @PEER missing"),
        _ => bail!("chat: expected exactly one @PEER"),
    }
}

/// The `listen` line of one message.
pub(super) fn message_json(m: &ReceivedMessage) -> String {
    let from = ordered(&[
        ("user_id", json!(m.sender.user_id)),
        ("username", json!(m.sender.username)),
        ("display_name", json!(m.sender.display_name)),
        ("is_bot", json!(m.sender.is_bot)),
    ]);
    let mut fields = vec![
        ("chat_id", json!(m.chat_id).to_string()),
        ("message_id", json!(m.message_id).to_string()),
        ("date", json!(m.date).to_string()),
        ("from", from),
        ("text", json!(m.text).to_string()),
    ];
    if !m.entities.is_empty() {
        fields.push(("entities", Value::Array(m.entities.iter().map(entity_json).collect()).to_string()));
    }
    if let Some(r) = m.reply_to_message_id {
        fields.push(("reply_to_message_id", json!(r).to_string()));
    }
    ordered_raw(&fields)
}

fn entity_json(e: &Entity) -> Value {
    let mut v = json!({"type": e.kind, "offset": e.offset, "length": e.length});
    if let Some(url) = &e.url {
        v["url"] = json!(url);
    }
    if let Some(language) = &e.language {
        v["language"] = json!(language);
    }
    v
}

/// A JSON object with keys in the given order (serde_json's own map sorts them).
fn ordered(fields: &[(&str, Value)]) -> String {
    let raw: Vec<(&str, String)> = fields.iter().map(|(k, v)| (*k, v.to_string())).collect();
    ordered_raw(&raw)
}

/// Like `ordered`, with values that are already JSON text.
fn ordered_raw(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{}:{v}", Value::from(*k))).collect();
    format!("{{{}}}", body.join(","))
}

fn print_line(line: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{line}").context("writing to stdout")?;
    out.flush().context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::message::Sender;

    #[test]
    fn message_line_has_the_contract_fields_in_order() {
        let mut m = ReceivedMessage {
            chat_id: 5,
            sender: Sender { user_id: 5, username: "echo_bot".into(), display_name: "Echo \"Bot\"".into(), is_bot: true },
            message_id: 12,
            date: 1_700_000_000,
            text: "héllo\nworld".into(),
            entities: vec![],
            reply_to_message_id: None,
        };
        let line = message_json(&m);
        assert_eq!(
            line,
            r#"{"chat_id":5,"message_id":12,"date":1700000000,"from":{"user_id":5,"username":"echo_bot","display_name":"Echo \"Bot\"","is_bot":true},"text":"héllo\nworld"}"#
        );
        m.entities.push(Entity { url: Some("https://a.test".into()), ..Entity::new("text_link", 0, 5) });
        m.reply_to_message_id = Some(11);
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!(v["entities"][0]["type"], "text_link");
        assert_eq!(v["entities"][0]["url"], "https://a.test");
        assert!(v["entities"][0].get("language").is_none());
        assert_eq!(v["reply_to_message_id"], 11);
        assert_eq!(v["from"]["is_bot"], true);
    }

    #[test]
    fn commands_lines_start_with_the_bot_then_one_per_command() {
        let menu = BotMenu {
            bot: "echo_bot".into(),
            commands: vec![super::super::bot_profile::BotCommand { command: "start".into(), description: "Go \"now\"".into() }],
            description: "An echo".into(),
            short_description: String::new(),
        };
        assert_eq!(
            menu_lines(&menu),
            vec![
                r#"{"bot":"echo_bot","description":"An echo","short_description":""}"#.to_string(),
                r#"{"command":"start","description":"Go \"now\""}"#.to_string(),
            ]
        );
        assert!(run(&["commands".to_string()]).is_err(), "@BOT missing");
    }

    #[test]
    fn options_accept_both_spellings_and_refuse_unknown_ones() {
        let args: Vec<String> = ["--server=http://127.0.0.1:1", "--profile", "/tmp/p"].iter().map(|s| s.to_string()).collect();
        let mut i = 0;
        assert_eq!(option_value(&args, &mut i, "--server").expect("ok"), Some("http://127.0.0.1:1".into()));
        i = 1;
        assert_eq!(option_value(&args, &mut i, "--profile").expect("ok"), Some("/tmp/p".into()));
        assert_eq!(i, 2);
        let missing = vec!["--profile".to_string()];
        assert!(option_value(&missing, &mut 0, "--profile").is_err());
        assert!(run(&["--bogus".to_string()]).is_err());
        assert!(run(&["frobnicate".to_string()]).is_err());
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
