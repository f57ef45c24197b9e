//! A new user's first steps: a bot made with `e2e-chat newbot`, its gateway config (the one
//! @BotManager sent, with the secret the client drew) saved to a file in one step
//! (`e2e-chat save-config`), ready for `bot-gateway check-config` and `serve`; after `/token`
//! the saved config carries the new token.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use serde_json::Value;
use support::{ask_manager, bin_path, create_bot_via_manager, gateway_bin, reply_line, write_config, PlatformServer};

fn e2e_chat(profile: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(bin_path("e2e-chat")).arg("--profile").arg(profile).args(args).output().expect("run e2e-chat")
}

#[test]
fn save_config_writes_the_managers_config_ready_to_serve() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let alice_dir = dir.path().join("alice");
    let alice = bot_gateway::client::Profile::register(&platform.url, &alice_dir, "alice", "Alice").expect("register");
    // Made without --config: the secret is printed and kept in the profile for save-config.
    let made = e2e_chat(&alice_dir, &["newbot", "first_contact_bot", "--name", "First Contact"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let bot: Value = serde_json::from_slice(&made.stdout).expect("a JSON line");

    let file = dir.path().join("gateway.json");
    let state = dir.path().join("state");
    let out = e2e_chat(&alice_dir, &["save-config", "@BotManager", file.to_str().expect("path"), "--state-dir", state.to_str().expect("path")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: Value = serde_json::from_slice(&out.stdout).expect("a JSON line");
    assert_eq!((printed["bot"].as_str(), printed["token_replaced"].as_bool()), (Some("@first_contact_bot"), Some(false)));
    assert_eq!(std::fs::metadata(&file).expect("file").permissions().mode() & 0o777, 0o600);
    let config: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("the file is JSON");
    assert_eq!(config["bots"][0]["token"], bot["token"]);
    assert_eq!(config["bots"][0]["identity_recovery_secret_hex"], bot["identity_recovery_secret_hex"]);
    assert_eq!(config["state_dir"].as_str(), state.to_str());
    assert_eq!(config["bot_platform_endpoint"].as_str(), Some(platform.url.as_str()));
    // The config names the standard ports 8081/8082; this machine may be using them.
    let mut checked = config.clone();
    checked["compat_listen_addr"] = Value::String("127.0.0.1:0".into());
    checked["extensions_listen_addr"] = Value::String("127.0.0.1:0".into());
    let checked_file = dir.path().join("checked.json");
    write_config(&checked_file, &checked);
    let check = Command::new(gateway_bin()).arg("check-config").arg(&checked_file).arg("--connect").output().expect("check-config");
    assert!(check.status.success(), "check-config refused the saved config: {}{}", String::from_utf8_lossy(&check.stdout), String::from_utf8_lossy(&check.stderr));

    // An existing file is kept unless --force; after /token the new token is saved.
    let again = e2e_chat(&alice_dir, &["save-config", "@BotManager", file.to_str().expect("path")]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"), "{}", String::from_utf8_lossy(&again.stderr));
    let rotated = ask_manager(&alice, "/token @first_contact_bot");
    let token = reply_line(&rotated, "Token");
    let out = e2e_chat(&alice_dir, &["save-config", "@BotManager", file.to_str().expect("path"), "--force", "--state-dir", state.to_str().expect("path")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let config: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
    assert_eq!(config["bots"][0]["token"].as_str(), Some(token.as_str()));

    // A missing FILE is a usage error; another bot's name finds nothing.
    assert_eq!(e2e_chat(&alice_dir, &["save-config", "@BotManager"]).status.code(), Some(2));
    let none = e2e_chat(&alice_dir, &["save-config", "@BotManager", "/nonexistent/x.json", "--bot", "@other_bot"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no gateway config for @other_bot"));
}

/// `verify` prints the Bot ID that `/newbot` gave (and its short form, as the reply shows it);
/// `/mybots` names it too; `--mark` records that the person compared it.
#[test]
fn verify_prints_the_bot_id_that_newbot_gave_and_mybots_names_it() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let alice_dir = dir.path().join("alice");
    let alice = bot_gateway::client::Profile::register(&platform.url, &alice_dir, "alice", "Alice").expect("register");
    let bot = create_bot_via_manager(&alice, "verified_bot", "Verified");
    let bot_id = bot["bot_id_hex"].as_str().expect("bot id").to_string();
    let key = bot_gateway::crypto::hex_decode_32(&bot_id).expect("64 hex");
    let short_form = bot_gateway::crypto::fingerprint::readable(bot["compat_user_id"].as_u64().expect("id"), &key);

    let out = e2e_chat(&alice_dir, &["verify", "@verified_bot"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line: Value = serde_json::from_slice(&out.stdout).expect("a JSON line");
    assert_eq!(line["bot_id"].as_str(), Some(bot_id.as_str()), "{line}");
    assert_eq!(line["short_form"].as_str(), Some(short_form.as_str()));
    assert_eq!((line["is_bot"].as_bool(), line["verified"].as_bool(), line["key_changed"].as_bool()), (Some(true), Some(false), Some(false)));

    let marked = e2e_chat(&alice_dir, &["verify", "@verified_bot", "--mark"]);
    assert!(marked.status.success(), "{}", String::from_utf8_lossy(&marked.stderr));
    let again: Value = serde_json::from_slice(&e2e_chat(&alice_dir, &["verify", "@verified_bot"]).stdout).expect("JSON");
    assert_eq!(again["verified"].as_bool(), Some(true), "{again}");

    let listing = ask_manager(&alice, "/mybots");
    assert!(listing.contains(&format!("Bot ID {bot_id}")), "{listing}");

    // A user's safety number is one string on both sides.
    let bob_dir = dir.path().join("bob");
    bot_gateway::client::Profile::register(&platform.url, &bob_dir, "bob", "Bob").expect("register bob");
    let of = |profile: &std::path::Path, peer: &str| -> Value {
        serde_json::from_slice(&e2e_chat(profile, &["verify", peer]).stdout).expect("JSON")
    };
    let (from_alice, from_bob) = (of(&alice_dir, "@bob"), of(&bob_dir, "@alice"));
    assert_eq!(from_alice["safety_number"], from_bob["safety_number"]);
    assert_eq!(from_alice["safety_number"].as_str().map(str::len), Some(71), "{from_alice}");
}
