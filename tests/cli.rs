//! The command-line conventions of the three programs (`--version`, `--help`, `help COMMAND`,
//! `COMMAND --help`, usage errors with exit status 2 that say what exists), `e2e-chat`'s
//! options anywhere before `--`, and `bot-gateway check-config`.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::json;
use support::{bin_path, gateway_config, write_config, PlatformServer};

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(bin_path(program)).args(args).env("RUST_LOG", "warn").output().expect("run")
}

fn text(out: &Output) -> (i32, String, String) {
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// Checks one program's conventions; `commands` are (command, a phrase of its help).
fn conventions(program: &str, commands: &[(&str, &str)]) {
    let (code, out, _) = text(&run(program, &["--version"]));
    assert_eq!(code, 0);
    assert_eq!(out, format!("{program} {} (compatibility_profile_id compat-v1-core-preview-4)\n", env!("CARGO_PKG_VERSION")));
    let (code, full, _) = text(&run(program, &["--help"]));
    assert_eq!(code, 0);
    assert_eq!(text(&run(program, &["-h"])).1, full);
    for (cmd, phrase) in commands {
        assert!(full.contains(phrase), "{program} --help mentions {phrase:?}");
        for args in [vec!["help", cmd], vec![cmd, "--help"]] {
            let (code, part, err) = text(&run(program, &args));
            assert_eq!(code, 0, "{program} {args:?}: {err}");
            assert!(part.contains(phrase) && part.len() < full.len(), "{program} {args:?}: {part}");
        }
    }
    let (code, _, err) = text(&run(program, &["frobnicate"]));
    assert_eq!(code, 2, "{program} frobnicate: {err}");
    assert!(err.contains("unknown command \"frobnicate\"") && err.contains(commands[0].0), "{err}");
    let (code, _, err) = text(&run(program, &["--frobnicate"]));
    assert_eq!(code, 2, "{program} --frobnicate: {err}");
    assert!(err.contains("--frobnicate") && err.contains("--"), "{err}");
}

#[test]
fn every_program_follows_the_conventions() {
    conventions("bot-gateway", &[("serve", "bot-gateway serve CONFIG"), ("check-config", "--connect")]);
    conventions(
        "platform-server",
        &[("create-bot", "--username USERNAME"), ("serve", "--advertise-url URL")],
    );
    conventions(
        "e2e-chat",
        &[
            ("register", "register USERNAME"),
            ("send", "--reply-to"),
            ("edit", "edit @PEER MESSAGE_ID TEXT"),
            ("listen", "--count N"),
            ("group", "group edit GROUP MESSAGE_ID TEXT"),
        ],
    );
    // `group` alone or an unknown group command is a usage error naming the group commands.
    for args in [vec!["group"], vec!["group", "frob"]] {
        let (code, _, err) = text(&run("e2e-chat", &args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("create, add, remove, send, send-file, send-poll, download, edit, press, title, members, leave, list"), "{err}");
    }

    // The gateway's help is a config reference: every field.
    let (_, help, _) = text(&run("bot-gateway", &["--help"]));
    for field in [
        "compatibility_profile_id",
        "bot_platform_endpoint",
        "compat_listen_addr",
        "extensions_listen_addr",
        "state_dir",
        "bots[].bot_id_hex",
        "bots[].token",
        "bots[].identity_recovery_secret_hex",
        "bots[].compat_user_id",
        "bots[].username",
        "bots[].first_name",
    ] {
        assert!(help.contains(field), "the reference names {field}");
    }
    // `serve --help` is help, not a config path (it once said "cannot read config --help").
    let (code, out, err) = text(&run("bot-gateway", &["serve", "--help"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("bot-gateway serve CONFIG") && !err.contains("cannot read config"), "{out}{err}");
    let (code, _, err) = text(&run("bot-gateway", &["serve"]));
    assert_eq!(code, 2);
    assert!(err.contains("serve needs the config file"), "{err}");
    let (code, _, err) = text(&run("bot-gateway", &["check-config", "x.json", "--bogus"]));
    assert_eq!(code, 2);
    assert!(err.contains("unknown option --bogus for check-config") && err.contains("--connect"), "{err}");
    // A failure that is not a usage error is 1.
    let (code, _, err) = text(&run("bot-gateway", &["serve", "/nonexistent/config.json"]));
    assert_eq!(code, 1, "{err}");
    // `--help` anywhere before `--` is help, also among a command's words; a text that is
    // "--help" itself goes after `--` and is sent (here: no profile, so 1).
    let (code, out, err) = text(&run("e2e-chat", &["--profile", "/nonexistent/p", "send", "@bot", "hi", "--help"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("send @PEER TEXT...") && out.contains("--reply-to"), "{out}");
    let (code, _, err) = text(&run("e2e-chat", &["--profile", "/nonexistent/p", "send", "@bot", "--", "--help"]));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no registered profile"), "{err}");
}

/// `e2e-chat` ARGS: (status, JSON lines on stdout, stderr).
fn e2e_chat(args: &[&str]) -> (i32, Vec<serde_json::Value>, String) {
    let (code, out, err) = text(&run("e2e-chat", args));
    let lines = out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect();
    (code, lines, err)
}

#[test]
fn e2e_chat_takes_options_anywhere_before_the_double_dash() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let alice = dir.path().join("alice").display().to_string();
    let bob = dir.path().join("bob").display().to_string();

    // Global options after the command, and after its words.
    let (code, out, err) = e2e_chat(&["register", "alice", "--server", &platform.url, "--profile", &alice]);
    assert_eq!((code, out[0]["username"].as_str()), (0, Some("alice")), "{err}");
    let server = format!("--server={}", platform.url);
    let (code, _, err) = e2e_chat(&["register", "--profile", &bob, "bob", &server]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = e2e_chat(&["send", "@bob", "how", "warm", "is", "it?", "--profile", &alice]);
    assert_eq!(code, 0, "{err}");
    let first = out[0]["message_id"].as_u64().expect("message_id");

    // --reply-to after the text; a text starting with - after --.
    let (code, _, err) = e2e_chat(&["--profile", &bob, "send", "@alice", "it", "is", "--reply-to", &first.to_string(), "cold"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = e2e_chat(&["--profile", &bob, "send", "@alice", "--", "-5", "degrees", "--reply-to", "1"]);
    assert_eq!(code, 0, "{err}");

    // Usage errors exit 2 and send nothing: a missing argument, a text starting with -
    // before --, an unknown option, an option without its value.
    for (args, says) in [
        (vec!["send", "@alice"], "no text"),
        (vec!["send"], "@PEER missing"),
        (vec!["react", "@alice"], "expected @PEER MESSAGE_ID"),
        (vec!["send", "@alice", "-5", "degrees"], "unknown option -5 for send"),
        (vec!["send", "@alice", "hi", "--bogus"], "unknown option --bogus for send"),
        (vec!["send", "@alice", "hi", "--reply-to"], "--reply-to needs a value"),
        (vec!["listen", "--count", "many"], "not a whole number"),
    ] {
        let mut all = vec!["--profile", bob.as_str()];
        all.extend(&args);
        let (code, _, err) = e2e_chat(&all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.starts_with("e2e-chat: ") && err.contains(says), "{args:?}: {err}");
    }

    // Alice sees the two messages, the first a reply; nothing else came. Her --profile
    // comes after the command's options.
    let (code, got, err) = e2e_chat(&["listen", "--timeout", "3", "--count", "3", "--profile", &alice]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0]["text"].as_str(), got[0]["reply_to_message_id"].as_u64()), (Some("it is cold"), Some(first)));
    assert_eq!(got[1]["text"], "-5 degrees --reply-to 1");
    assert!(got[1].get("reply_to_message_id").is_none(), "after -- it is text: {:?}", got[1]);
}

fn check(config: &Path, connect: bool) -> (i32, String) {
    let mut args = vec!["check-config", config.to_str().expect("utf-8")];
    if connect {
        args.push("--connect");
    }
    let (code, out, err) = text(&run("bot-gateway", &args));
    assert!(err.is_empty() || !err.contains("panicked"), "{err}");
    (code, out)
}

#[test]
fn check_config_reports_each_problem_and_its_fix() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let bot = platform.create_bot("checked_bot", "Checked");
    let state = dir.path().join("state");
    let path = dir.path().join("gateway.json");
    let good = gateway_config(&platform.url, &state, &bot);
    write_config(&path, &good);

    // Fine, with and without the platform; nothing was created or registered.
    let (code, out) = check(&path, true);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ok: bot @checked_bot:") && out.contains("accepts the token"), "{out}");
    assert!(out.contains("does not exist yet") && out.lines().last().expect("line").contains("is ready"), "{out}");
    assert!(!state.exists(), "check-config creates nothing");
    let (code, out) = check(&path, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("add --connect"), "{out}");

    // Two problems at once: the config's mode and state_dir's mode; each with its fix.
    std::fs::create_dir(&state).expect("mkdir");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, out) = check(&path, false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("problem: config {} is readable by group or others", path.display())), "{out}");
    assert!(out.contains("chmod 600") && out.contains("chmod 700"), "{out}");
    assert!(out.contains("2 problem(s)"), "{out}");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).expect("chmod");

    // A placeholder left in: refused naming the field.
    let mut placeholder = good.clone();
    placeholder["state_dir"] = json!("<STATE_DIR: a directory for this gateway's state, e.g. /var/lib/bot-gateway>");
    write_config(&path, &placeholder);
    let (code, out) = check(&path, false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("state_dir is still the placeholder"), "{out}");

    // A listen port in use.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut busy = good.clone();
    busy["compat_listen_addr"] = json!(taken.local_addr().expect("addr").to_string());
    write_config(&path, &busy);
    let (code, out) = check(&path, false);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("problem: compat_listen_addr") && out.contains("cannot be bound"), "{out}");

    // --connect with a token that is not the bot's current one: says what to do.
    let mut stale = good.clone();
    let id = bot["compat_user_id"].as_u64().expect("id");
    stale["bots"][0]["token"] = json!(format!("{id}:{}", "ab".repeat(32)));
    write_config(&path, &stale);
    let (code, out) = check(&path, true);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no longer accepts bot @checked_bot's token") && out.contains("/token @checked_bot"), "{out}");
    // A username the platform does not know the bot by.
    let mut renamed = good.clone();
    renamed["bots"][0]["username"] = json!("checked_bot_typo");
    write_config(&path, &renamed);
    let (code, out) = check(&path, true);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not match the platform"), "{out}");
}

/// One profile, two readers: while `listen` reads the inbox, a second `listen` says in one
/// sentence which process reads and what to do, exits 1, and takes nothing away from the
/// first, which still gets what arrives.
#[test]
fn a_second_reader_of_a_profile_says_who_reads_instead_of_taking_the_inbox() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let alice = dir.path().join("alice").display().to_string();
    let bob = dir.path().join("bob").display().to_string();
    for (profile, name) in [(&alice, "alice"), (&bob, "bob")] {
        let (code, _, err) = e2e_chat(&["--server", &platform.url, "--profile", profile, "register", name]);
        assert_eq!(code, 0, "{err}");
    }
    let first = std::process::Command::new(support::bin_path("e2e-chat"))
        .args(["--profile", &alice, "listen", "--timeout", "30", "--count", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the first reader");
    let lock = dir.path().join("alice").join("inbox.lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&lock).is_ok_and(|holder| holder.contains(&first.id().to_string())) {
        assert!(std::time::Instant::now() < deadline, "the first reader never took the inbox");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (code, _, err) = e2e_chat(&["--profile", &alice, "listen", "--timeout", "1"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(&format!("another e2e-chat reads this profile's inbox now (pid {}", first.id())), "{err}");
    assert!(err.contains("Stop it") && !err.contains("ABORTED"), "a sentence, not a gRPC status: {err}");
    let (code, _, err) = e2e_chat(&["--profile", &bob, "send", "@alice", "still yours"]);
    assert_eq!(code, 0, "{err}");
    let out = first.wait_with_output().expect("the first reader ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("still yours"), "the first reader kept the inbox");
}
