//! In-process end to end: a real server on an ephemeral loopback port with its management bot,
//! and users driven through the user client library (`crate::client::Profile`), which looks
//! the bot up, verifies its device certificate, seals, sends and decrypts replies.

use std::path::Path;
use std::time::Duration;

use grpcio::RpcStatusCode;

use super::commands::{self, Effect};
use super::state;
use crate::client::Profile;
use crate::crypto::identity::BotKeyPurpose;
use crate::crypto::{self, IdentityKeyPair};
use crate::platform::rules;
use crate::platform::store::AccountStatus;
use crate::platform::bots::create_bot_for_key;
use crate::platform::{ManagerConfig, RunningServer, ServerOptions};
use crate::wire::platform::VerifyCredentialRequest;
use crate::wire::{Credential, Platform};

const WAIT: Duration = Duration::from_secs(20);

fn start(data: &Path) -> RunningServer {
    RunningServer::start("127.0.0.1:0", data).expect("server starts")
}

/// Sends `text` to the management bot and returns exactly `replies` reply texts.
fn ask(user: &Profile, text: &str, replies: usize) -> Vec<String> {
    user.send_text("@botmanager", text).expect("message sent");
    let got = user.receive(WAIT, replies).expect("receive");
    let texts: Vec<String> = got.iter().map(|m| m.text.clone()).collect();
    assert_eq!(texts.len(), replies, "replies to {text:?}: {texts:?}");
    for m in &got {
        assert!(m.sender.is_bot, "replies come from a bot");
        assert_eq!(m.sender.username, "BotManager");
    }
    texts
}

fn ask_one(user: &Profile, text: &str) -> String {
    ask(user, text, 1).remove(0)
}

/// Sends `text` with a bot key proof attached, as the owner's client does, and returns the reply.
fn ask_with_key(user: &Profile, text: &str, proof: crate::wire::e2e::BotKeyProof) -> String {
    let manager = user.lookup("@botmanager").expect("manager");
    let mut content = crate::e2e::text_content(text);
    content.bot_key = protobuf::MessageField::some(proof);
    user.send_content(&manager, &content).expect("sent");
    let got = user.receive(WAIT, 1).expect("receive");
    assert_eq!(got.len(), 1, "a reply to {text:?}");
    got[0].text.clone()
}

/// The value of the line `<prefix>...` of a reply.
fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("no line {prefix:?} in {text}"))
}

/// VerifyCredential with a bot token: the bot id, or the refusal's status code.
fn verify(server: &RunningServer, token: &str) -> Result<u64, RpcStatusCode> {
    let p = Platform::connect(&server.endpoint(), Credential::Bot { token: token.to_string(), device_id: None })
        .expect("endpoint parses");
    match p.client.verify_credential(&VerifyCredentialRequest::default(), p.opt()) {
        Ok(r) => Ok(r.user_id),
        Err(grpcio::Error::RpcFailure(s)) => Err(s.code()),
        Err(e) => panic!("VerifyCredential failed without a status: {e}"),
    }
}

/// Whether a database file or its journal holds `needle`, while the in-process server has it
/// open. The bytes are read by a child process: a descriptor of a database file that this
/// process opened and closed outside SQLite would drop SQLite's POSIX locks on it (the
/// manager's EXCLUSIVE lock included; SQLite's "How To Corrupt", 2.2).
fn file_contains(path: &Path, needle: &[u8]) -> bool {
    let mut found = false;
    for suffix in ["", "-wal", "-journal"] {
        let file = path.with_file_name(format!("{}{suffix}", path.file_name().expect("name").to_string_lossy()));
        if !file.exists() {
            continue;
        }
        let out = std::process::Command::new("cat").arg(&file).output().expect("cat runs");
        assert!(out.status.success(), "cat {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        found |= out.stdout.windows(needle.len()).any(|w| w == needle);
    }
    found
}

#[test]
fn users_create_and_manage_bots_through_the_encrypted_dialog() {
    crypto::init();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("platform");
    let server = start(&data);
    let alice = Profile::register(&server.endpoint(), dir.path().join("alice"), "alice", "Alice").expect("alice");
    let bob = Profile::register(&server.endpoint(), dir.path().join("bob"), "bob", "Bob").expect("bob");

    // ── Finding it: case-insensitive, '@' optional, a bot. ──
    for name in ["@botmanager", "BOTMANAGER", "BotManager"] {
        let profile = alice.lookup(name).expect("found");
        assert!(profile.is_bot);
        assert_eq!(profile.username, "BotManager");
        assert_eq!(profile.user_id, server.manager().expect("runs").user_id());
    }

    // ── Help and hints. ──
    let help = ask_one(&alice, "/start");
    assert_eq!(help, commands::HELP);
    for command in ["/newbot", "/mybots", "/token", "/disable", "/cancel", "/help"] {
        assert!(help.contains(command), "{help}");
    }
    assert_eq!(ask_one(&alice, "/help"), commands::HELP);
    assert_eq!(ask_one(&alice, "hello there"), commands::NOT_UNDERSTOOD);
    assert_eq!(ask_one(&alice, "/mybots"), commands::NO_BOTS);

    // ── /newbot with every kind of wrong answer on the way. ──
    assert!(ask_one(&alice, "/newbot").ends_with(commands::ASK_USERNAME));
    let refused_username = |answer: &str, reason: &str| {
        let reply = ask_one(&alice, answer);
        assert!(reply.starts_with("Invalid username: "), "{answer}: {reply}");
        assert!(reply.contains(reason), "{answer}: {reply}");
        assert!(reply.ends_with(commands::ASK_USERNAME), "{reply}");
    };
    refused_username("bad-name", "Latin letters, digits and '_'");
    refused_username("no", "got 2");
    refused_username(&"x".repeat(33), "got 33");
    refused_username("ALICE", "@ALICE is already taken");
    refused_username("botMANAGER", "already taken");
    assert!(ask_one(&alice, "@Echo_Bot_1").ends_with(commands::ASK_DISPLAY_NAME));
    let refused_name = |answer: &str, reason: &str| {
        let reply = ask_one(&alice, answer);
        assert!(reply.starts_with("Invalid display name: "), "{reply}");
        assert!(reply.contains(reason), "{reply}");
        assert!(reply.ends_with(commands::ASK_DISPLAY_NAME), "{reply}");
    };
    refused_name("   ", "must not be empty");
    refused_name(&"n".repeat(129), "got 129");
    refused_name(&"🤖".repeat(129), "got 129");
    let display_name = format!("Echo {}", "🤖".repeat(123));
    assert_eq!(display_name.chars().count(), 128);
    assert!(ask_one(&alice, &display_name).ends_with(commands::ASK_CAPABILITIES));
    let reply = ask_one(&alice, "all, of, them");
    assert!(reply.starts_with("Invalid capabilities: "), "{reply}");
    assert!(reply.ends_with(commands::ASK_CAPABILITIES), "{reply}");
    // Typed by hand, with no key: nothing is created, and the reply names the command.
    let reply = ask_one(&alice, "groups, dm");
    assert!(reply.starts_with("No bot was created"), "{reply}");
    assert!(reply.contains("e2e-chat newbot Echo_Bot_1 --name"), "{reply}");
    assert!(server.store().account_by_username("Echo_Bot_1").expect("read").is_none());
    // The client drew the key; the platform gets its public half and a proof.
    ask_one(&alice, "/newbot");
    ask_one(&alice, "Echo_Bot_1");
    ask_one(&alice, &display_name);
    let key = crate::e2e::bot_key::DrawnBotKey::draw();
    let recovery: [u8; 32] = *key.secret();
    let recovery_hex = key.secret_hex().to_string();
    let proof = key.proof(BotKeyPurpose::Creation, alice.user_id(), "Echo_Bot_1", "dm,groups", crate::clock::unix_now());
    let created = ask_with_key(&alice, "groups, dm", proof);

    // ── The final reply. ──
    let token = line(&created, "Token: ").to_string();
    let bot_id_hex = line(&created, "Bot ID: ").to_string();
    assert!(line(&created, "Recovery secret: ").starts_with("only on your device"), "{created}");
    assert!(!created.contains(&recovery_hex), "the reply never carries the secret");
    let parsed = rules::parse_bot_token(&token).expect("token format <numeric_id>:<64 hex>");
    assert!((1..rules::ID_LIMIT).contains(&parsed.numeric_id));
    assert_eq!(line(&created, "Numeric id: "), parsed.numeric_id.to_string());
    assert_eq!(line(&created, "Capabilities: "), "dm,groups");
    assert_eq!(bot_id_hex, key.bot_id_hex(), "the key the client drew");
    assert_eq!(crypto::hex_encode(&IdentityKeyPair::from_recovery_secret(&recovery).public_key()), bot_id_hex);
    let entry_start = created.find("Gateway config entry (bots[]):\n").expect("entry") + 31;
    let entry_end = entry_start + created[entry_start..].find("\n}").expect("entry end") + 2;
    let entry: serde_json::Value = serde_json::from_str(&created[entry_start..entry_end]).expect("entry is JSON");
    assert_eq!(entry["token"], token.as_str());
    assert_eq!(entry["bot_id_hex"], bot_id_hex.as_str());
    assert_eq!(entry["identity_recovery_secret_hex"], crate::platform::manager::replies::SECRET_PLACEHOLDER);
    assert_eq!(entry["compat_user_id"], parsed.numeric_id);
    assert_eq!(entry["username"], "Echo_Bot_1");
    assert_eq!(entry["first_name"], display_name.as_str());

    // The platform has the bot, owned by alice, with the identity public key only.
    let account = server.store().account_by_id(parsed.numeric_id).expect("read").expect("bot exists");
    assert!(account.is_bot);
    assert_eq!(account.owner_id, Some(alice.user_id()));
    assert_eq!(crypto::hex_encode(&account.identity_key), bot_id_hex);
    assert_eq!(verify(&server, &token), Ok(parsed.numeric_id), "the new token works");
    let platform_db = data.join(crate::platform::store::DB_FILE);
    let manager_db = data.join(state::DB_FILE);
    assert!(!file_contains(&platform_db, &recovery), "no recovery secret in platform.db");
    assert!(!file_contains(&platform_db, recovery_hex.as_bytes()));
    assert!(!file_contains(&platform_db, &parsed.secret), "no token secret in platform.db");
    assert!(!file_contains(&platform_db, b"Echo_Bot_1\n"), "no dialog plaintext in platform.db");

    // ── /mybots ──
    let listing = ask_one(&alice, "/mybots");
    // The platform plays no part in the secret: no stored row of the creation, sent or
    // pending, in either database, ever holds it.
    assert!(!file_contains(&manager_db, &recovery), "no identity secret in manager.db");
    assert!(!file_contains(&manager_db, recovery_hex.as_bytes()));
    assert!(!file_contains(&manager_db, &parsed.secret), "the token's reply is zeroed once sent");
    assert_eq!(
        listing,
        format!(
            "Your bots:\n@Echo_Bot_1: \"{display_name}\", id {}, Bot ID {}, capabilities dm,groups, active",
            parsed.numeric_id,
            bot_id_hex
        )
    );
    assert_eq!(ask_one(&bob, "/mybots"), commands::NO_BOTS);

    // ── /token: only the owner; the old token is refused at once, the numeric id stays. ──
    let refused = ask_one(&bob, "/token @echo_bot_1");
    assert!(refused.starts_with("You have no bot @echo_bot_1"), "{refused}");
    assert_eq!(verify(&server, &token), Ok(parsed.numeric_id), "bob's attempt changed nothing");
    let rotated = ask_one(&alice, "/token @ECHO_BOT_1");
    assert!(rotated.starts_with("New token for @Echo_Bot_1:"), "{rotated}");
    let new_token = line(&rotated, "Token: ").to_string();
    assert_ne!(new_token, token);
    assert_eq!(rules::parse_bot_token(&new_token).expect("format").numeric_id, parsed.numeric_id, "same numeric id");
    assert_eq!(verify(&server, &token), Err(RpcStatusCode::UNAUTHENTICATED), "old token refused");
    assert_eq!(verify(&server, &new_token), Ok(parsed.numeric_id));

    // ── /disable: only the owner; every credential is revoked. ──
    let refused = ask_one(&bob, "/disable @Echo_Bot_1");
    assert!(refused.starts_with("You have no bot @Echo_Bot_1"), "{refused}");
    assert_eq!(verify(&server, &new_token), Ok(parsed.numeric_id));
    let disabled = ask_one(&alice, "/disable @Echo_Bot_1");
    assert!(disabled.starts_with("@Echo_Bot_1 is disabled."), "{disabled}");
    assert_eq!(verify(&server, &new_token), Err(RpcStatusCode::UNAUTHENTICATED));
    let account = server.store().account_by_id(parsed.numeric_id).expect("read").expect("bot exists");
    assert_eq!(account.status, AccountStatus::Disabled);
    assert!(ask_one(&alice, "/mybots").ends_with(", disabled"));
    assert!(ask_one(&alice, "/token @Echo_Bot_1").contains("is disabled"));

    // ── /cancel mid-scenario. ──
    ask_one(&bob, "/newbot");
    assert!(ask_one(&bob, "bobs_bot").ends_with(commands::ASK_DISPLAY_NAME));
    assert_eq!(ask_one(&bob, "/cancel"), commands::CANCELLED);
    assert_eq!(ask_one(&bob, "Bob's Bot"), commands::NOT_UNDERSTOOD, "the scenario is over");
    assert!(server.store().account_by_username("bobs_bot").expect("read").is_none());
    assert_eq!(ask_one(&bob, "/cancel"), commands::NOTHING_TO_CANCEL);

    server.shutdown();
}

#[test]
fn a_scenario_survives_a_restart_and_an_interrupted_effect_completes_once() {
    crypto::init();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("platform");
    let server = start(&data);
    let manager_id = server.manager().expect("runs").user_id();
    let mut alice = Profile::register(&server.endpoint(), dir.path().join("alice"), "alice", "Alice").expect("alice");
    ask_one(&alice, "/newbot");
    assert!(ask_one(&alice, "restart_bot").ends_with(commands::ASK_DISPLAY_NAME));
    server.shutdown();

    // ── Same directory, new port: the scenario goes on at the display name. ──
    let server = start(&data);
    assert_eq!(server.manager().expect("runs").user_id(), manager_id, "the same account");
    alice.set_server_url(&server.endpoint()).expect("reconnect");
    assert!(ask_one(&alice, "Restart Bot").ends_with(commands::ASK_CAPABILITIES));
    let key = crate::e2e::bot_key::DrawnBotKey::draw();
    let proof = key.proof(BotKeyPurpose::Creation, alice.user_id(), "restart_bot", "default", crate::clock::unix_now());
    let created = ask_with_key(&alice, "default", proof);
    let token = line(&created, "Token: ").to_string();
    assert_eq!(verify(&server, &token).map(|_| ()), Ok(()));
    server.shutdown();

    // ── A crash after the effect was recorded and applied, before its reply was queued: ──
    // the restarted bot applies it again (same key and token secret, so the same bot, not
    // "taken") and answers.
    let key = crate::e2e::bot_key::DrawnBotKey::draw();
    let token_secret = crypto::random_bytes::<32>();
    {
        let conn = state::open(&data).expect("manager db");
        let effect = Effect::CreateBot {
            username: "crashed_bot".into(),
            display_name: "Crashed".into(),
            capabilities: "dm".into(),
            identity_key: key.public_key(),
        };
        state::insert_effect(&conn, alice.user_id(), &effect, Some(&token_secret)).expect("record the effect");
        let store = crate::platform::Store::open(&data).expect("store");
        let owner = Some(alice.user_id());
        create_bot_for_key(&store, "crashed_bot", "Crashed", "dm", owner, &key.public_key(), &token_secret).expect("applied");
    }
    let server = RunningServer::start_with(
        "127.0.0.1:0",
        &data,
        &ServerOptions {
            manager: Some(ManagerConfig { username: "BotManager".into(), display_name: "Manager".into() }),
            advertise_url: None,
        },
    )
    .expect("restart");
    alice.set_server_url(&server.endpoint()).expect("reconnect");
    let got = alice.receive(WAIT, 1).expect("receive");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].text.starts_with("Done! Your bot @crashed_bot is created."), "{}", got[0].text);
    assert_eq!(line(&got[0].text, "Bot ID: "), key.bot_id_hex());
    let listing = ask_one(&alice, "/mybots");
    assert_eq!(listing.matches("@crashed_bot").count(), 1, "one bot, not two: {listing}");
    assert!(listing.contains("@restart_bot"), "{listing}");
    server.shutdown();

    // ── Another username on the next start renames the same account. ──
    let options =
        ServerOptions { manager: Some(ManagerConfig { username: "Helper_Bot".into(), display_name: "Helper".into() }), advertise_url: None };
    let server = RunningServer::start_with("127.0.0.1:0", &data, &options).expect("restart renamed");
    assert_eq!(server.manager().expect("runs").user_id(), manager_id);
    alice.set_server_url(&server.endpoint()).expect("reconnect");
    let profile = alice.lookup("@helper_bot").expect("found under the new name");
    assert_eq!((profile.user_id, profile.is_bot), (manager_id, true));
    assert!(alice.lookup("BotManager").is_err(), "the old name is free");
    alice.send_text("@Helper_Bot", "/mybots").expect("sent");
    let got = alice.receive(WAIT, 1).expect("receive");
    assert!(got[0].text.starts_with("Your bots:"), "{:?}", got);
    server.shutdown();
}

#[test]
fn messages_from_bots_get_no_answer_and_a_lost_state_file_gets_a_new_device() {
    crypto::init();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("platform");
    let server = start(&data);
    let manager = server.manager().expect("runs");
    let (manager_id, first_device) = (manager.user_id(), manager.device().device_id);
    let alice = Profile::register(&server.endpoint(), dir.path().join("alice"), "alice", "Alice").expect("alice");
    assert_eq!(ask_one(&alice, "/mybots"), commands::NO_BOTS);
    server.shutdown();

    // manager.db is lost: a new identity and device under the same account. Users who met the
    // management bot before see the changed key (nothing is sent), and carry on once they trust it.
    std::fs::remove_file(data.join(state::DB_FILE)).expect("remove manager.db");
    let server = start(&data);
    let manager = server.manager().expect("runs");
    assert_eq!(manager.user_id(), manager_id);
    assert_ne!(manager.device().device_id, first_device);
    let mut alice = alice;
    alice.set_server_url(&server.endpoint()).expect("reconnect");
    match alice.send_text("@botmanager", "/mybots") {
        Err(crate::client::ClientError::IdentityChanged { user_id, .. }) => assert_eq!(user_id, manager_id),
        other => panic!("expected the changed key to stop the send, got {other:?}"),
    }
    let trusted = alice.trust("@botmanager").expect("trust");
    assert_eq!(trusted.changed_to, None);
    assert_eq!(ask_one(&alice, "/mybots"), commands::NO_BOTS);

    // A bot writing to the management bot is ignored (answering could loop between two bots),
    // and its message is acknowledged, so it does not block the inbox. (Its ciphertext is junk
    // too: an envelope that cannot be opened is skipped the same way.)
    let store = server.store().clone();
    let (bot_id, _) = store.create_bot("chatty_bot", "Chatty", "default", &[3; 32], None, 1).expect("bot");
    store.register_bot_device(bot_id, &fake_device(), 1).expect("bot device");
    let from = crate::platform::store::DeviceAddr { user_id: bot_id, device_id: 1 };
    let manager_addr = server.manager().expect("runs").device();
    let sent = store
        .send_messages(
            from,
            &[crate::platform::store::Outgoing {
                client_message_id: "b1".into(),
                recipient_id: manager_id,
                ciphertexts: vec![(manager_addr.device_id, vec![1, 2, 3])],
                inline_session_id: 0,
            }],
            1,
        )
        .expect("send");
    assert!(matches!(sent.outcomes[0], crate::platform::store::SendOutcome::Ok { .. }));
    // Sent past the service, so nothing wakes the management bot yet; alice's message does,
    // and entries are handled in order: the bot's first (skipped), then alice's (answered).
    assert_eq!(ask_one(&alice, "/cancel"), commands::NOTHING_TO_CANCEL);
    let reader = store.open_reader().expect("reader");
    assert!(
        crate::platform::store::read_inbox(&reader, manager_addr, 0, 10).expect("read").is_empty(),
        "every entry acknowledged"
    );
    server.shutdown();
}

#[test]
fn a_reply_with_a_stale_device_list_is_fixed_and_delivered() {
    crypto::init();
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("platform");
    let server = start(&data);
    let mut alice = Profile::register(&server.endpoint(), dir.path().join("alice"), "alice", "Alice").expect("alice");
    assert_eq!(ask_one(&alice, "/mybots"), commands::NO_BOTS);
    server.shutdown();

    // A reply committed for a device that is gone (7) and not for alice's device 1: the platform
    // answers STALE_DEVICES (missing 1, removed 7); the bot fixes the list and sends again.
    {
        let conn = state::open(&data).expect("manager db");
        let mut text = crate::wire::e2e::Text::new();
        text.text = "sealed later".into();
        let mut content = crate::wire::e2e::Content::new();
        content.set_text(text);
        let bytes = protobuf::Message::write_to_bytes(&content).expect("encode");
        state::insert_outbox(&conn, "stale-1", alice.user_id(), &bytes, &[(7, vec![1, 2, 3])]).expect("queue");
    }
    let server = start(&data);
    alice.set_server_url(&server.endpoint()).expect("reconnect");
    let got = alice.receive(WAIT, 1).expect("receive");
    assert_eq!(got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), vec!["sealed later"]);
    // And the dialog goes on in the same sessions.
    assert_eq!(ask_one(&alice, "/cancel"), commands::NOTHING_TO_CANCEL);
    server.shutdown();
}

fn fake_device() -> crate::platform::store::NewDevice {
    crate::platform::store::NewDevice {
        device_key: crypto::random_bytes(),
        certificate: [0; 64],
        signed_prekey: crate::platform::store::SignedPrekey { id: 1, public_key: [1; 32], signature: [2; 64] },
        one_time_prekeys: vec![],
    }
}
