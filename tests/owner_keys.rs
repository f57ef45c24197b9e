//! A bot's identity that only its owner holds (docs/security.md, "Bot identity"): the secret is
//! drawn by the owner's `e2e-chat`, and the platform gets only the Bot ID and a proof. Played
//! with the real programs: the platform is searched, file by file and in its process memory,
//! for the secret; a bot moves to a new identity and keeps its queue, and its users are warned.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use support::{bin_path, write_config, Gateway, PlatformServer};

fn e2e_chat(profile: &Path, args: &[&str]) -> std::process::Output {
    Command::new(bin_path("e2e-chat")).arg("--profile").arg(profile).args(args).output().expect("run e2e-chat")
}

/// The one JSON line a successful command printed.
fn ok_line(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("a JSON line")
}

/// Every file under `dir` (recursively) that holds `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path) {
            if bytes.windows(needle.len()).any(|w| w == needle) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

/// Whether the memory of process `pid` (every mapping it can read) holds `needle`.
fn memory_holds(pid: u32, needle: &[u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("read maps");
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("open /proc/PID/mem (the test's own child)");
    let mut read_any = false;
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        if !perms.starts_with('r') || line.ends_with("[vvar]") || line.ends_with("[vsyscall]") {
            continue;
        }
        let (start, end) = range.split_once('-').expect("a range");
        let (start, end) = (u64::from_str_radix(start, 16).expect("hex"), u64::from_str_radix(end, 16).expect("hex"));
        let mut buf = vec![0u8; (end - start) as usize];
        if mem.seek(SeekFrom::Start(start)).is_err() || mem.read_exact(&mut buf).is_err() {
            continue;
        }
        read_any = true;
        if buf.windows(needle.len()).any(|w| w == needle) {
            return true;
        }
    }
    assert!(read_any, "no mapping of process {pid} could be read");
    false
}

/// A platform server and its user `alice`, the bot owner: (the directory, the server, her
/// profile's directory).
fn owner_world() -> (tempfile::TempDir, PlatformServer, std::path::PathBuf) {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let alice_dir = dir.path().join("alice");
    bot_gateway::client::Profile::register(&platform.url, &alice_dir, "alice", "Alice").expect("register");
    (dir, platform, alice_dir)
}

#[test]
fn newbot_draws_the_secret_on_the_owners_machine_and_the_platform_never_holds_it() {
    let (dir, platform, alice_dir) = owner_world();

    let file = dir.path().join("gateway.json");
    let state = dir.path().join("state");
    let out = e2e_chat(
        &alice_dir,
        &["newbot", "owned_bot", "--name", "Owned Bot", "--capabilities", "dm,groups", "--config", file.to_str().expect("path"), "--state-dir", state.to_str().expect("path")],
    );
    let printed = ok_line(&out);
    assert!(printed.get("identity_recovery_secret_hex").is_none(), "written to the config, not printed: {printed}");
    let config: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
    let bot = &config["bots"][0];
    let secret_hex = bot["identity_recovery_secret_hex"].as_str().expect("the secret").to_string();
    let secret = bot_gateway::crypto::hex_decode_32(&secret_hex).expect("64 hex");
    let derived = bot_gateway::crypto::IdentityKeyPair::from_recovery_secret(&secret).public_key();
    assert_eq!(bot["bot_id_hex"].as_str(), Some(bot_gateway::crypto::hex_encode(&derived).as_str()));
    assert_eq!(printed["bot_id_hex"], bot["bot_id_hex"]);
    assert_eq!(config["state_dir"].as_str(), state.to_str());

    // The platform: no file of its data directory, and nothing in its memory, holds the
    // secret, as bytes or as hex. (Its process is searched while it runs; the search does find
    // what the platform does hold, the Bot ID.)
    assert!(memory_holds(platform.proc.child.id(), &derived), "the scan reads the platform's memory");
    for needle in [&secret[..], secret_hex.as_bytes()] {
        assert_eq!(files_holding(&platform.data_dir, needle), Vec::<String>::new());
        assert!(!memory_holds(platform.proc.child.id(), needle), "the platform process holds the secret");
    }
    // The owner's profile keeps no copy either once the config holds it.
    assert_eq!(files_holding(&alice_dir, secret_hex.as_bytes()), Vec::<String>::new());
    assert_eq!(files_holding(&alice_dir, &secret), Vec::<String>::new());

    // The config runs as written (free ports only because tests share this machine).
    let mut runnable = config.clone();
    runnable["compat_listen_addr"] = json!("127.0.0.1:0");
    runnable["extensions_listen_addr"] = json!("127.0.0.1:0");
    let runnable_file = dir.path().join("runnable.json");
    write_config(&runnable_file, &runnable);
    let gw = Gateway::start(&runnable_file);
    let bob = bot_gateway::client::Profile::register(&platform.url, dir.path().join("bob"), "bob", "Bob").expect("bob");
    bob.send_text("@owned_bot", "hello owned bot").expect("send");
    assert_eq!(gw.poll_until(0, 1)[0]["message"]["text"], "hello owned bot");
}

#[test]
fn a_person_typing_newbot_by_hand_gets_the_command_and_no_bot() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let alice = bot_gateway::client::Profile::register(&platform.url, dir.path().join("alice"), "alice", "Alice").expect("register");
    for text in ["/newbot", "hand_bot", "Hand Bot"] {
        support::ask_manager(&alice, text);
    }
    let reply = support::ask_manager(&alice, "dm");
    assert!(reply.starts_with("No bot was created"), "{reply}");
    assert!(reply.ends_with("e2e-chat newbot hand_bot --name 'Hand Bot' --capabilities dm"), "{reply}");
    assert!(support::ask_manager(&alice, "/mybots").starts_with("You have no bots yet"));
}

#[test]
fn save_config_fills_in_the_secret_newbot_kept_and_then_forgets_it() {
    let (dir, _platform, alice_dir) = owner_world();

    let printed = ok_line(&e2e_chat(&alice_dir, &["newbot", "kept_bot", "--name", "Kept"]));
    let secret_hex = printed["identity_recovery_secret_hex"].as_str().expect("printed without --config").to_string();
    assert_eq!(files_holding(&alice_dir, secret_hex.as_bytes()), Vec::<String>::new(), "stored as bytes, never as text");
    let secret = bot_gateway::crypto::hex_decode_32(&secret_hex).expect("hex");
    assert!(!files_holding(&alice_dir, &secret).is_empty(), "kept in the profile until a config holds it");

    let file = dir.path().join("gateway.json");
    let saved = ok_line(&e2e_chat(&alice_dir, &["save-config", "@BotManager", file.to_str().expect("path")]));
    assert_eq!(saved["bot"], "@kept_bot");
    let config: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
    assert_eq!(config["bots"][0]["identity_recovery_secret_hex"].as_str(), Some(secret_hex.as_str()));
    assert_eq!(config["bots"][0]["token"], printed["token"]);
    assert_eq!(files_holding(&alice_dir, &secret), Vec::<String>::new(), "forgotten once saved");

    // Saved again over that config (a new token, say), the secret it holds is kept; into
    // another file, the profile has no secret to give: said so.
    let again = ok_line(&e2e_chat(&alice_dir, &["save-config", "@BotManager", file.to_str().expect("path"), "--force"]));
    assert_eq!(again["bot"], "@kept_bot");
    let config: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
    assert_eq!(config["bots"][0]["identity_recovery_secret_hex"].as_str(), Some(secret_hex.as_str()));
    let elsewhere = dir.path().join("other.json");
    let refused = e2e_chat(&alice_dir, &["save-config", "@BotManager", elsewhere.to_str().expect("path")]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("recovery secret of @kept_bot is not in this profile"), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(!elsewhere.exists());
}

#[test]
fn a_bot_moves_to_a_new_identity_keeping_its_queue_and_its_users_are_warned() {
    let (dir, platform, alice_dir) = owner_world();
    let file = dir.path().join("gateway.json");
    let created = ok_line(&e2e_chat(
        &alice_dir,
        &["newbot", "moving_bot", "--name", "Moving", "--config", file.to_str().expect("path"), "--state-dir", dir.path().join("state").to_str().expect("path")],
    ));
    let mut config: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
    config["compat_listen_addr"] = json!("127.0.0.1:0");
    config["extensions_listen_addr"] = json!("127.0.0.1:0");
    write_config(&file, &config);
    let old_secret = config["bots"][0]["identity_recovery_secret_hex"].clone();

    let mut gw = Gateway::start(&file);
    let bob_dir = dir.path().join("bob");
    let bob = bot_gateway::client::Profile::register(&platform.url, &bob_dir, "bob", "Bob").expect("bob");
    bob.send_text("@moving_bot", "before the move").expect("send");
    // Seen but not acknowledged: it stays queued.
    assert_eq!(gw.poll_until(0, 1)[0]["message"]["text"], "before the move");

    // The owner moves the bot; the config gets the new secret and keeps the old one.
    let moved = ok_line(&e2e_chat(&alice_dir, &["rekey", "@moving_bot", "--config", file.to_str().expect("path")]));
    assert_ne!(moved["bot_id_hex"], created["bot_id_hex"]);
    assert_eq!(moved["removed_devices"], 1, "the gateway's device of the old identity");
    let config: Value = serde_json::from_slice(&std::fs::read(&file).expect("read")).expect("JSON");
    let entry = &config["bots"][0];
    assert_eq!(entry["bot_id_hex"], moved["bot_id_hex"]);
    assert_eq!(entry["previous_identity_recovery_secret_hex"], old_secret);
    assert_ne!(entry["identity_recovery_secret_hex"], old_secret);

    // The old runtime's device is gone: it stops, and says how to go on.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !gw.proc.stderr_text().contains("has a new identity (its owner's @BotManager /rekey)") {
        assert!(std::time::Instant::now() < deadline, "no advice in the log:\n{}", gw.proc.stderr_text());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(gw.health()["bots"][0]["credential"], "identity_moved", "{}", gw.health());
    // The new start moves the state and registers anew.
    gw.proc.kill();
    let gw = Gateway::start(&file);
    let queued = gw.poll_until(0, 1);
    assert_eq!(queued[0]["message"]["text"], "before the move", "the queue is kept");
    let log = gw.proc.stderr_text();
    assert!(log.contains("re-encrypted under the bot's new identity"), "{log}");
    assert!(log.contains("has a new identity"), "{log}");

    // Bob's client sees the changed key and sends nothing until he trusts it.
    match bob.send_text("@moving_bot", "after the move") {
        Err(bot_gateway::client::ClientError::IdentityChanged { .. }) => {}
        other => panic!("expected the SECURITY WARNING, got {other:?}"),
    }
    let verify = ok_line(&e2e_chat(&bob_dir, &["verify", "@moving_bot"]));
    assert_eq!(verify["key_changed"], true, "{verify}");
    assert_eq!(verify["served_key"], moved["bot_id_hex"], "{verify}");
    bob.trust("@moving_bot").expect("trust");
    bob.send_text("@moving_bot", "after the move").expect("send after trust");
    let updates = gw.poll_until(0, 2);
    assert_eq!(updates[1]["message"]["text"], "after the move");

    // And the bot answers from its new device.
    let chat_id = updates[1]["message"]["chat"]["id"].clone();
    let (status, body) = gw.call("sendMessage", json!({ "chat_id": chat_id, "text": "hello from the new identity" }));
    assert_eq!(status, 200, "{body}");
    let got = bob.receive(std::time::Duration::from_secs(30), 1).expect("receive");
    assert_eq!(got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), vec!["hello from the new identity"]);

    // A hand-typed /rekey changes nothing and names the command.
    let alice = bot_gateway::client::Profile::open(&alice_dir).expect("alice");
    let reply = support::ask_manager(&alice, "/rekey @moving_bot");
    assert!(reply.contains("e2e-chat rekey @moving_bot"), "{reply}");
}
