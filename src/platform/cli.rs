//! The `platform-server` command line: serve, create-bot, help.
//!
//! Output contract (other programs and tests parse it):
//! - serving prints exactly one line to stdout once bound, `listening on HOST:PORT` with the
//!   real port, then logs only to stderr;
//! - `create-bot` prints exactly one line of JSON to stdout (see `BotCredentials::to_json_line`).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use crate::cli::{CliError, Context, UsageError};

use super::bots::provision_bot;
use super::manager::ManagerConfig;
use super::rules;
use super::server::{RunningServer, ServerOptions};
use super::store::Store;

const USAGE: &str = "\
platform-server: the reference platform server of Bot Gateway

Usage:
  platform-server [serve] --listen ADDR --data-dir DIR [--manager-username NAME] [--advertise-url URL]
      Serve gRPC on ADDR (host:port; port 0 picks a free port). Once bound, prints one line
      `listening on HOST:PORT` to stdout; logs go to stderr (RUST_LOG, default info).
      DIR is created (mode 0700) if missing. Runs until SIGINT or SIGTERM.
      The built-in management bot answers as @NAME (default BotManager; found ignoring case):
      users create and manage bots in a dialog with it (/help, /newbot, /mybots, /token,
      /disable, /devices, /removedevice, /rekey, /cancel). A bot's identity secret is drawn
      by its owner's client (e2e-chat newbot): this server never has it. Its state is
      DIR/manager.db.
      URL is this server's address as gateways reach it (e.g. https://platform.example:443),
      written into the gateway config @BotManager hands out; default http://ADDR with the
      bound port (needed when ADDR is 0.0.0.0 or behind a proxy).

  platform-server create-bot --data-dir DIR --username USERNAME --name NAME [--capabilities CAPS]
      Creates a bot account in DIR's database (also while a server runs on DIR) and prints one
      line of JSON: {\"token\", \"bot_id_hex\", \"identity_recovery_secret_hex\", \"compat_user_id\",
      \"username\", \"first_name\"}. USERNAME: 3 to 32 of A-Z a-z 0-9 _, unique ignoring case.
      NAME: 1 to 128 characters. CAPS: default, or a comma list of dm, groups, channels.
      The secrets are shown only this once. The identity recovery secret is drawn by this
      command, on this host (a note on stderr says so): for the operator's own bots and for
      tests. A bot whose owner must be the only one to hold it is made with e2e-chat newbot.

  platform-server help [COMMAND]
      This help, or one command's part of it (also: COMMAND --help).

  platform-server --version
      The version and the compatibility_profile_id.

Exit status: 0 success, help, version; 1 a failure; 2 a usage error.
";

/// The program's command-line conventions (`crate::cli`).
pub const PROGRAM: crate::cli::Program =
    crate::cli::Program { name: "platform-server", help: USAGE, commands: &["serve", "create-bot", "help"] };

/// Entry point of the `platform-server` program (`args` without the program name).
pub fn run_cli(args: Vec<String>) -> Result<(), CliError> {
    if let crate::cli::Early::Print(text) = PROGRAM.early(&args)? {
        crate::cli::print(&text);
        return Ok(());
    }
    // `--help` anywhere among serve's options (`--listen X --help`) is the whole help.
    if args.iter().any(|a| a == "--help" || a == "-h") {
        crate::cli::print(USAGE);
        return Ok(());
    }
    init_logging();
    match args.first().map(String::as_str) {
        Some("create-bot") => create_bot(&args[1..]),
        Some("serve") => serve(&args[1..]),
        Some(opt) if opt.starts_with("--") => serve(&args),
        Some(cmd) => Err(PROGRAM.unknown_command(cmd).into()),
        None => Err(UsageError("no command or option given (see platform-server --help)".into()).into()),
    }
}

fn init_logging() {
    let env = env_logger::Env::default().default_filter_or("info,refinery_core=warn");
    // A second init (tests calling run_cli twice) keeps the first logger.
    let _ = env_logger::Builder::from_env(env).target(env_logger::Target::Stderr).try_init();
}

/// Parses `--name value` / `--name=value` pairs; every name must be in `allowed`, at most once.
fn parse_flags(args: &[String], allowed: &[&str]) -> Result<HashMap<String, String>, CliError> {
    let mut flags = HashMap::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(body) = arg.strip_prefix("--") else {
            return Err(UsageError(format!("unexpected argument {arg:?} (see platform-server --help)")).into());
        };
        let (name, inline_value) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (body.to_string(), None),
        };
        if !allowed.contains(&name.as_str()) {
            let known: Vec<String> = allowed.iter().map(|a| format!("--{a}")).collect();
            return Err(UsageError(format!(
                "unknown option --{name}; the options here are: {} (see platform-server --help)",
                known.join(", ")
            ))
            .into());
        }
        let value = match inline_value {
            Some(v) => v,
            None => it
                .next()
                .cloned()
                .ok_or_else(|| UsageError(format!("--{name} needs a value (see platform-server --help)")))?,
        };
        if flags.insert(name.clone(), value).is_some() {
            return Err(UsageError(format!("--{name} given twice")).into());
        }
    }
    Ok(flags)
}

fn required(flags: &HashMap<String, String>, name: &str) -> Result<String, CliError> {
    flags.get(name).cloned().ok_or_else(|| UsageError(format!("--{name} is required (see platform-server --help)")).into())
}

fn serve(args: &[String]) -> Result<(), CliError> {
    let flags = parse_flags(args, &["listen", "data-dir", "manager-username", "advertise-url"])?;
    let listen = required(&flags, "listen")?;
    let data_dir = PathBuf::from(required(&flags, "data-dir")?);
    let mut manager = ManagerConfig::default();
    if let Some(name) = flags.get("manager-username") {
        let name = rules::strip_at(name);
        rules::validate_username(name).map_err(|e| CliError::Failed(format!("--manager-username: {}", e.message())))?;
        manager.username = name.to_string();
    }
    if let Some(url) = flags.get("advertise-url") {
        crate::wire::connect::parse_endpoint(url).map_err(|e| UsageError(format!("--advertise-url: {e}")))?;
    }
    let options = ServerOptions { manager: Some(manager), advertise_url: flags.get("advertise-url").cloned() };
    // Block the stop signals before gRPC starts its threads, so they inherit the mask and the
    // main thread alone receives them in `sigwait`.
    let signals = crate::signals::block();
    let server = RunningServer::start_with(&listen, &data_dir, &options).context("cannot start")?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", server.address()).context("writing the listening line to stdout")?;
        out.flush().context("flushing stdout")?;
    }
    let signal = crate::signals::wait(&signals);
    log::info!("received {signal}, stopping");
    server.shutdown();
    Ok(())
}

fn create_bot(args: &[String]) -> Result<(), CliError> {
    let flags = parse_flags(args, &["data-dir", "username", "name", "capabilities"])?;
    let data_dir = PathBuf::from(required(&flags, "data-dir")?);
    let username = required(&flags, "username")?;
    let name = required(&flags, "name")?;
    let capabilities = flags.get("capabilities").cloned().unwrap_or_else(|| "default".into());
    let store = Store::open(&data_dir).with_context(|| format!("cannot open {}", data_dir.display()))?;
    let created = provision_bot(&store, &username, &name, &capabilities, None)
        .map_err(|e| CliError::Failed(format!("cannot create bot @{username}: {}", e.message())))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", created.to_json_line()).context("writing the bot credentials to stdout")?;
    out.flush().context("flushing stdout")?;
    eprintln!(
        "platform-server: the identity recovery secret of @{username} was drawn by this command on this host (the \
         platform operator's), not by the bot's owner; for a bot only its owner holds the key of, use e2e-chat newbot"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_parse_both_forms_and_refuse_unknown() {
        let f = parse_flags(&args(&["--listen", "127.0.0.1:0", "--data-dir=/tmp/x"]), &["listen", "data-dir"])
            .expect("valid");
        assert_eq!(f["listen"], "127.0.0.1:0");
        assert_eq!(f["data-dir"], "/tmp/x");
        assert!(parse_flags(&args(&["--bogus", "1"]), &["listen"]).is_err());
        assert!(parse_flags(&args(&["stray"]), &["listen"]).is_err());
        assert!(parse_flags(&args(&["--listen"]), &["listen"]).is_err());
        assert!(parse_flags(&args(&["--listen", "a", "--listen", "b"]), &["listen"]).is_err());
    }

    #[test]
    fn unknown_arguments_fail_before_doing_anything() {
        let err = run_cli(args(&["--listen", "127.0.0.1:0", "--frobnicate", "1"])).expect_err("unknown option");
        assert!(err.to_string().contains("--frobnicate"), "{err}");
        assert!(run_cli(args(&["create-bot", "--username", "x"])).is_err());
        let err =
            run_cli(args(&["--listen", "127.0.0.1:0", "--data-dir", "/nonexistent", "--manager-username", "a-b"]))
                .expect_err("bad manager username");
        assert!(err.to_string().contains("--manager-username"), "{err}");
        assert!(run_cli(args(&["--help"])).is_ok());
    }

    #[test]
    fn create_bot_validates_before_touching_crypto() {
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path().to_str().expect("utf-8 path");
        let err =
            run_cli(args(&["create-bot", "--data-dir", d, "--username", "no", "--name", "N"])).expect_err("short");
        assert!(err.to_string().contains("3 to 32"), "{err}");
        let err = run_cli(args(&[
            "create-bot",
            "--data-dir",
            d,
            "--username",
            "okay_bot",
            "--name",
            "N",
            "--capabilities",
            "all",
        ]))
        .expect_err("bad capabilities");
        assert!(err.to_string().contains("capability"), "{err}");
    }
}
