//! End to end: an encrypted private message reaches bot code through the gateway, and the
//! bot's reply reaches the user. Real platform server, real gateway, real crypto, over gRPC
//! and HTTP on loopback.

mod support;

use std::time::Duration;

use serde_json::json;
use support::World;

#[test]
fn hello_reaches_the_bot_and_the_reply_reaches_the_user() {
    let world = World::start("echo_bot");
    let alice = world.user("alice");
    let sent = alice.send_text(&format!("@{}", world.bot_username()), "hello").expect("send hello");

    let updates = world.gateway.poll_until(0, 1);
    let msg = &updates[0]["message"];
    assert_eq!(msg["text"], "hello");
    assert_eq!(msg["chat"]["type"], "private");
    assert_eq!(msg["chat"]["id"].as_u64(), Some(alice.user_id()));
    assert_eq!(msg["from"]["username"], "alice");
    assert_eq!(msg["from"]["is_bot"], false);
    assert_eq!(msg["message_id"].as_i64(), Some(sent.message_id as i64));
    assert!(msg["date"].as_i64().unwrap_or(0) > 0);

    let chat_id = msg["chat"]["id"].clone();
    let (status, body) = world.gateway.call("sendMessage", json!({ "chat_id": chat_id, "text": "hi alice" }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], true);
    assert_eq!(body["result"]["text"], "hi alice");
    assert_eq!(body["result"]["from"]["is_bot"], true);
    let reply_id = body["result"]["message_id"].as_i64().expect("message_id");

    let got = alice.receive(Duration::from_secs(30), 1).expect("receive");
    assert_eq!(got.len(), 1, "the reply arrived");
    assert_eq!(got[0].text, "hi alice");
    assert_eq!(got[0].message_id as i64, reply_id);
    assert!(got[0].sender.is_bot);

    // Acknowledge, then nothing comes back.
    let next = updates[0]["update_id"].as_i64().expect("update_id") + 1;
    let (status, body) = world.gateway.call("getUpdates", json!({ "offset": next, "timeout": 0 }));
    assert_eq!(status, 200);
    assert_eq!(body["result"], json!([]));
}

#[test]
fn pending_updates_survive_a_restart_and_acknowledged_ones_do_not_return() {
    let mut world = World::start("restart_bot");
    let bob = world.user("bob");
    let bot = format!("@{}", world.bot_username());
    for text in ["one", "two", "three"] {
        bob.send_text(&bot, text).expect("send");
    }
    let updates = world.gateway.poll_until(0, 3);
    let texts: Vec<&str> = updates.iter().map(|u| u["message"]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(texts, ["one", "two", "three"]);
    // Acknowledge "one" only.
    let second = updates[1]["update_id"].as_i64().expect("id");
    let (status, _) = world.gateway.call("getUpdates", json!({ "offset": second, "timeout": 0 }));
    assert_eq!(status, 200);

    world.restart_gateway();

    let (status, body) = world.gateway.call("getUpdates", json!({ "timeout": 0 }));
    assert_eq!(status, 200);
    let texts: Vec<&str> = body["result"].as_array().expect("array").iter().map(|u| u["message"]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(texts, ["two", "three"], "pending updates kept, the acknowledged one gone");

    // Messages sent while the gateway is down arrive after it is back.
    world.gateway.proc.kill();
    bob.send_text(&bot, "while down").expect("send while the gateway is down");
    let path = world.gateway.config_path.clone();
    world.gateway = support::Gateway::start(&path);
    let updates = world.gateway.poll_until(second, 3);
    assert_eq!(updates[2]["message"]["text"], "while down");
    assert!(updates[2]["update_id"].as_i64() > updates[1]["update_id"].as_i64());
}

#[test]
fn platform_data_dir_holds_no_plaintext() {
    let world = World::start("secret_bot");
    let carol = world.user("carol");
    let bot = format!("@{}", world.bot_username());
    let marker = "plaintext-marker-7f3a9c";
    carol.send_text(&bot, marker).expect("send");
    let updates = world.gateway.poll_until(0, 1);
    assert_eq!(updates[0]["message"]["text"], marker);
    let chat_id = updates[0]["message"]["chat"]["id"].clone();
    let reply_marker = "reply-marker-91bd02";
    let (status, _) = world.gateway.call("sendMessage", json!({ "chat_id": chat_id, "text": reply_marker }));
    assert_eq!(status, 200);
    carol.receive(Duration::from_secs(30), 1).expect("receive reply");

    let mut scanned = 0;
    for dir in [world.platform.data_dir.clone(), world.dir.path().join("state")] {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_file() {
                let bytes = std::fs::read(&path).expect("read file");
                scanned += 1;
                for m in [marker, reply_marker] {
                    assert!(
                        !bytes.windows(m.len()).any(|w| w == m.as_bytes()),
                        "{} contains plaintext {m:?}",
                        path.display()
                    );
                }
            }
        }
    }
    assert!(scanned >= 2, "scanned the platform database and the gateway state");
}

/// The platform serves another identity key for a bot this user met: nothing is sent and the
/// warning says what to do; after `trust` the dialog goes on. (The test plays the platform's
/// change by pinning, in the user's profile, a key other than the one the platform serves:
/// the served key and the pinned one differ, as after a change.)
#[test]
fn a_changed_identity_key_stops_sending_until_trusted() {
    let world = World::start("pinned_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    alice.send_text(&bot, "hello").expect("first contact pins the bot's key");
    world.gateway.poll_until(0, 1);
    let profile_dir = world.dir.path().join("user-alice");
    drop(alice);
    let db = rusqlite::Connection::open(profile_dir.join(bot_gateway::client::DB_FILE)).expect("profile db");
    let bot_id = world.bot["compat_user_id"].as_u64().expect("id") as i64;
    let changed = db.execute("UPDATE e2e_identity_pins SET identity_key = ?2 WHERE user_id = ?1", rusqlite::params![bot_id, vec![7u8; 32]]).expect("pin");
    assert_eq!(changed, 1, "the bot's key was pinned at first contact");
    drop(db);

    let e2e_chat = |args: &[&str]| {
        std::process::Command::new(support::bin_path("e2e-chat")).arg("--profile").arg(&profile_dir).args(args).output().expect("run")
    };
    let refused = e2e_chat(&["send", &bot, "are you still you?"]);
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("SECURITY WARNING") && err.contains("e2e-chat trust"), "{err}");
    let verify: serde_json::Value = serde_json::from_slice(&e2e_chat(&["verify", &bot]).stdout).expect("JSON");
    assert_eq!(verify["key_changed"].as_bool(), Some(true), "{verify}");
    assert_eq!(verify["served_key"], world.bot["bot_id_hex"], "the platform's key is shown beside the pinned one");

    let trusted = e2e_chat(&["trust", &bot]);
    assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
    let line: serde_json::Value = serde_json::from_slice(&trusted.stdout).expect("JSON");
    assert_eq!((line["bot_id"].clone(), line["key_changed"].as_bool()), (world.bot["bot_id_hex"].clone(), Some(false)));
    let sent = e2e_chat(&["send", &bot, "after trust"]);
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let updates = world.gateway.poll_until(0, 2);
    assert_eq!(updates[1]["message"]["text"], "after trust");
}

/// The platform re-points a name this user met to another account, which has valid keys of
/// its own (issue 45, part 1; the test plays the platform by renaming accounts in its
/// database): sending, chat mode and `verify --mark` stop with the SECURITY WARNING naming both
/// accounts, nothing reaches the other account, and only `trust` accepts the change.
#[test]
fn a_name_the_platform_re_points_stops_sending_until_trusted() {
    let world = World::start("names_bot");
    let alice_dir = world.dir.path().join("user-alice");
    drop(world.user("alice"));
    let bob = world.user("bob");
    let mallory = world.user("mallory");
    let e2e_chat = |args: &[&str]| {
        std::process::Command::new(support::bin_path("e2e-chat")).arg("--profile").arg(&alice_dir).args(args).output().expect("run")
    };
    let first = e2e_chat(&["send", "@bob", "hello bob"]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(said.contains("first contact with @bob") && said.contains(&format!("user {}", bob.user_id())), "trust on first use is said: {said}");
    let again = e2e_chat(&["send", "@Bob", "again"]);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("first contact"), "a name met before is not new");
    let got = bob.receive(Duration::from_secs(20), 2).expect("bob receives");
    assert_eq!(got.len(), 2);
    // A process that checked @bob a moment ago sends to the bound account without asking the
    // platform again (the echo path), before and after the platform re-points the name.
    let chatting = bot_gateway::client::Profile::open(&alice_dir).expect("alice");
    chatting.send_text("@bob", "checked").expect("send");

    let db = rusqlite::Connection::open(world.platform.data_dir.join("platform.db")).expect("platform db");
    db.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    db.execute_batch(&format!(
        "UPDATE accounts SET username = 'bob_gone' WHERE id = {}; UPDATE accounts SET username = 'bob' WHERE id = {};",
        bob.user_id(),
        mallory.user_id()
    ))
    .expect("the platform re-points @bob");
    drop(db);
    chatting.send_text("@bob", "still to bob").expect("send to the bound account");
    drop(chatting);
    let got = bob.receive(Duration::from_secs(20), 2).expect("bob receives");
    assert_eq!(got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["checked", "still to bob"]);

    let (was, now) = (bob.user_id().to_string(), mallory.user_id().to_string());
    for args in [&["send", "@bob", "for bob only"][..], &["chat", "@bob"], &["verify", "@bob", "--mark"]] {
        let out = e2e_chat(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("SECURITY WARNING") || err.contains("another account"), "{args:?}: {err}");
        if args[0] != "verify" {
            assert!(err.contains(&was) && err.contains(&now) && err.contains("e2e-chat trust @bob"), "{args:?} names both accounts: {err}");
        }
    }
    let verify: serde_json::Value = serde_json::from_slice(&e2e_chat(&["verify", "@bob"]).stdout).expect("JSON");
    assert_eq!((verify["user_id"].as_u64(), verify["name_was_user_id"].as_u64()), (Some(mallory.user_id()), Some(bob.user_id())), "{verify}");
    let alice = bot_gateway::client::Profile::open(&alice_dir).expect("alice");
    assert!(matches!(alice.lookup("@BOB"), Err(bot_gateway::client::ClientError::NameRebound { .. })), "the library refuses it too");
    drop(alice);
    assert!(mallory.receive(Duration::from_secs(3), 1).expect("receive").is_empty(), "nothing reached the other account");

    let trusted = e2e_chat(&["trust", "@bob"]);
    assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
    let line: serde_json::Value = serde_json::from_slice(&trusted.stdout).expect("JSON");
    assert_eq!((line["user_id"].as_u64(), line.get("name_was_user_id")), (Some(mallory.user_id()), None), "{line}");
    let sent = e2e_chat(&["send", "@bob", "to whoever is @bob now"]);
    assert!(sent.status.success(), "{}", String::from_utf8_lossy(&sent.stderr));
    let got = mallory.receive(Duration::from_secs(20), 1).expect("receive");
    assert_eq!(got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["to whoever is @bob now"]);
}

/// A device whose certificate does not chain to its account starts nothing: the gateway and
/// `e2e-chat` both refuse its first message, and say so as a security alert. (The test plays a
/// platform that made the device up by overwriting Mallory's certificate in its database; her
/// own sending is not affected, since a sender never checks itself.)
#[test]
fn a_first_message_from_a_device_that_does_not_chain_to_its_account_is_refused() {
    let world = World::start("chain_bot");
    let mallory = world.user("mallory");
    let bob = world.user("bob");
    let db = rusqlite::Connection::open(world.platform.data_dir.join("platform.db")).expect("platform db");
    db.busy_timeout(std::time::Duration::from_secs(10)).expect("busy timeout");
    let forged = db
        .execute(
            // The second-version certificate withheld, the first one forged.
            "UPDATE devices SET certificate = ?1, certificate_v2 = NULL WHERE account_id = ?2",
            rusqlite::params![vec![9u8; 64], mallory.user_id() as i64],
        )
        .expect("forge");
    assert_eq!(forged, 1);
    drop(db);

    mallory.send_text(&format!("@{}", world.bot_username()), "/start").expect("sent");
    mallory.send_text("@bob", "hello bob").expect("sent");

    // Bob's client shows a security alert and no message.
    let events = bob.receive_events(std::time::Duration::from_secs(20), 1).expect("receive");
    assert_eq!(events.len(), 1, "{events:?}");
    match &events[0] {
        bot_gateway::client::Incoming::SecurityAlert { user_id, text, .. } => {
            assert_eq!(*user_id, mallory.user_id());
            assert!(text.contains("certificate"), "{text}");
        }
        other => panic!("expected a security alert, got {other:?}"),
    }

    // The gateway counts a security alert and queues nothing.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let scrape = ureq::get(&format!("{}/metrics", world.gateway.ext_base)).call().expect("metrics").into_string().expect("text");
        if scrape.lines().any(|l| l.starts_with("botgw_security_alerts_total{") && l.ends_with(" 1")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no security alert counted:\n{scrape}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let (status, body) = world.gateway.call("getUpdates", serde_json::json!({ "timeout": 0 }));
    assert_eq!((status, body["result"].as_array().map(Vec::len)), (200, Some(0)), "{body}");
    assert!(world.gateway.health()["bots"][0]["security_alert"]["last"].as_str().is_some_and(|t| t.contains("certificate")));
}

/// A new device of a user whose identity key changed (as far as Bob's pin says): Bob's
/// `e2e-chat` shows nothing of it and stops with the `SECURITY WARNING`, leaving the message in
/// the inbox; after `trust @alice` the same message shows. (The test plays the change by
/// pinning another key for Alice in Bob's profile, and the new device by making both sides
/// forget their devices, so Alice starts a new session and Bob checks her device again.)
#[test]
fn a_message_from_a_user_whose_key_changed_shows_only_after_trust() {
    let world = World::start("unused_bot");
    let alice_dir = world.dir.path().join("user-alice");
    let bob_dir = world.dir.path().join("user-bob");
    let alice = world.user("alice");
    let bob = world.user("bob");
    alice.send_text("@bob", "hi bob").expect("sent");
    let first = bob.receive(Duration::from_secs(20), 1).expect("receive");
    assert_eq!(first.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["hi bob"], "Bob met Alice: her key is pinned");
    let (alice_id, bob_id) = (alice.user_id() as i64, bob.user_id() as i64);
    drop((alice, bob));

    let profile_db = |dir: &std::path::Path| rusqlite::Connection::open(dir.join(bot_gateway::client::DB_FILE)).expect("profile db");
    let db = profile_db(&bob_dir);
    assert_eq!(db.execute("UPDATE e2e_identity_pins SET identity_key = ?2 WHERE user_id = ?1", rusqlite::params![alice_id, vec![7u8; 32]]).expect("pin"), 1);
    db.execute_batch(&format!("DELETE FROM e2e_sessions WHERE user_id = {alice_id}; DELETE FROM e2e_peer_devices WHERE user_id = {alice_id};")).expect("forget");
    drop(db);
    profile_db(&alice_dir)
        .execute_batch(&format!("DELETE FROM e2e_sessions WHERE user_id = {bob_id}; DELETE FROM e2e_peer_devices WHERE user_id = {bob_id};"))
        .expect("forget");

    let alice = bot_gateway::client::Profile::open(&alice_dir).expect("alice");
    alice.send_text("@bob", "it is still me").expect("a new session");
    let bob = bot_gateway::client::Profile::open(&bob_dir).expect("bob");
    let err = bob.receive(Duration::from_secs(20), 1).expect_err("nothing is shown").to_string();
    assert!(err.contains("SECURITY WARNING") && err.contains("trust @alice"), "{err}");
    let err = bob.receive(Duration::from_secs(5), 1).expect_err("still nothing").to_string();
    assert!(err.contains("SECURITY WARNING"), "{err}");

    bob.trust("@alice").expect("trust");
    let shown = bob.receive(Duration::from_secs(20), 1).expect("receive");
    assert_eq!(shown.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["it is still me"]);
}

#[test]
fn a_negative_offset_serves_the_last_updates_and_forgets_the_rest() {
    // The reference's rule, which libraries use to skip what is pending at start.
    let world = World::start("skipping_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    for i in 1..=10 {
        alice.send_text(&bot, &format!("message {i}")).expect("send");
    }
    assert_eq!(world.gateway.poll_until(0, 10).len(), 10, "ten updates queued");

    let (status, body) = world.gateway.call("getUpdates", json!({ "offset": -3, "timeout": 0 }));
    assert_eq!(status, 200, "{body}");
    let texts: Vec<&str> = body["result"].as_array().expect("array").iter().map(|u| u["message"]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(texts, ["message 8", "message 9", "message 10"]);
    // The seven before are acknowledged for good: offset 0 starts at the eighth.
    let (status, again) = world.gateway.call("getUpdates", json!({ "offset": 0, "timeout": 0 }));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["result"], body["result"]);
    assert_eq!(world.gateway.health()["bots"][0]["queue_depth"], 3, "{}", world.gateway.health());
}
