//! Groups over MLS end to end: the real platform-server and bot-gateway processes on loopback,
//! users as real MLS members (`e2e::group` over their own databases, real gRPC), the bot
//! through the Bot API. The bot joins by external commit, reads and writes the group in the
//! one order every member sees, follows membership, survives a restart, and is removed.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use bot_gateway::e2e;
use bot_gateway::wire::platform::{self as pb, send_group_message_response::Status};
use support::group_member::{bot_world, Member};
use support::{gateway_config, write_config, Gateway};

/// Polls until an update matching `pick` arrives (acknowledging what came before it).
fn wait_update(gw: &Gateway, offset: &mut i64, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let (status, body) = gw.call(
            "getUpdates",
            json!({"offset": *offset, "timeout": 2, "allowed_updates": ["message", "callback_query", "my_chat_member", "chat_member"]}),
        );
        assert_eq!(status, 200, "{body}");
        for u in body["result"].as_array().expect("array") {
            *offset = u["update_id"].as_i64().expect("id") + 1;
            if pick(u) {
                return u.clone();
            }
        }
    }
    panic!("no {what} within 30 s");
}

fn pump_all(members: &mut [&mut Member]) {
    for m in members.iter_mut() {
        m.pump(Duration::from_millis(700));
    }
}

#[test]
fn a_bot_joins_talks_in_one_order_survives_a_restart_follows_membership_and_is_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "dm,groups");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let mut gw = Gateway::start(&config);
    gw.wait_connected();

    let (mut alice, mut bob, mut carol) =
        (Member::register(&platform.url, "alice"), Member::register(&platform.url, "bob"), Member::register(&platform.url, "carol"));
    let gid = alice.create_group("Rust fans");
    alice.add_by_welcome(&gid, &[&bob]);
    pump_all(&mut [&mut bob]);
    alice.add_by_welcome(&gid, &[&carol]);
    pump_all(&mut [&mut bob, &mut carol]);

    // Alice adds the bot: it joins by itself (external commit) and learns it in my_chat_member.
    alice.invite(&gid, bot_id).expect("invite the bot");
    let mut offset = 0;
    let joined = wait_update(&gw, &mut offset, "my_chat_member", |u| u.get("my_chat_member").is_some());
    let m = &joined["my_chat_member"];
    assert_eq!(m["chat"]["type"], "group");
    assert_eq!(m["chat"]["title"], "Rust fans");
    assert_eq!((m["old_chat_member"]["status"].as_str(), m["new_chat_member"]["status"].as_str()), (Some("left"), Some("member")));
    assert_eq!(m["new_chat_member"]["user"]["id"], bot_id);
    let chat_id = m["chat"]["id"].as_i64().expect("chat id");
    assert!(chat_id < 0 && chat_id.unsigned_abs() < (1 << 52), "a negative 52-bit chat id: {chat_id}");
    pump_all(&mut [&mut alice, &mut bob, &mut carol]);
    for member in [&alice, &bob, &carol] {
        let devices = e2e::group::members(&member.conn, &gid).expect("members");
        assert!(devices.iter().any(|(user, _)| *user == bot_id), "the bot has a leaf for user {}", member.user_id);
    }

    // Text from a member: a group message with a /command@bot entity.
    assert_eq!(alice.say(&gid, "/start@group_bot hello").status.enum_value_or_default(), Status::OK);
    // The bot's own join is also a service message (`new_chat_members`, from whoever added it):
    // bots greet from it.
    let service = wait_update(&gw, &mut offset, "the join's service message", |u| u["message"]["new_chat_members"][0]["id"] == bot_id);
    assert_eq!(service["message"]["new_chat_members"][0]["id"], bot_id, "{service}");
    assert_eq!(service["message"]["from"]["id"], alice.user_id, "{service}");
    assert_eq!(service["message"]["chat"]["id"].as_i64(), Some(chat_id), "{service}");
    let u = wait_update(&gw, &mut offset, "a message", |u| u["message"]["text"].is_string());
    let msg = &u["message"];
    assert_eq!((msg["chat"]["id"].as_i64(), msg["chat"]["type"].as_str()), (Some(chat_id), Some("group")));
    assert_eq!(msg["text"], "/start@group_bot hello");
    assert_eq!(msg["from"]["id"], alice.user_id);
    assert_eq!(msg["entities"][0]["type"], "bot_command");
    let alice_msg_id = msg["message_id"].as_i64().expect("message id");

    // The bot answers, replying, formatted; and Bob speaks: one order for everyone.
    let (status, sent) = gw.call(
        "sendMessage",
        json!({"chat_id": chat_id, "text": "<b>Hi</b> all", "parse_mode": "HTML", "reply_to_message_id": alice_msg_id}),
    );
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["result"]["chat"]["id"], chat_id);
    assert_eq!(sent["result"]["reply_to_message"]["message_id"], alice_msg_id);
    assert_eq!(bob.say(&gid, "from bob").status.enum_value_or_default(), Status::OK);
    pump_all(&mut [&mut alice, &mut bob, &mut carol]);
    let bob_seen = wait_update(&gw, &mut offset, "bob's message", |u| u["message"]["text"] == "from bob");
    assert_eq!(bob_seen["message"]["from"]["id"], bob.user_id);
    let carol_texts: Vec<&str> = carol.texts.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(carol_texts, ["/start@group_bot hello", "Hi all", "from bob"], "one order");
    assert_eq!(alice.texts.iter().map(|(u, t)| (*u, t.as_str())).collect::<Vec<_>>(), [(bot_id, "Hi all"), (bob.user_id, "from bob")]);

    // An inline keyboard in the group: signed for the group message's id; a member's press
    // (private to the bot) becomes a callback_query of the group message, which the bot edits.
    let (status, sent) = gw.call(
        "sendMessage",
        json!({"chat_id": chat_id, "text": "vote", "reply_markup": {"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}]]}}),
    );
    assert_eq!(status, 200, "{sent}");
    let vote_id = sent["result"]["message_id"].as_i64().expect("id");
    assert_eq!(sent["result"]["reply_markup"]["inline_keyboard"][0][0]["callback_data"], "yes");
    pump_all(&mut [&mut alice, &mut bob, &mut carol]);
    let (_, mid, vote) = carol.contents.iter().find(|(_, _, c)| c.has_text() && c.text().text == "vote").cloned().expect("carol got the vote");
    assert_eq!(mid as i64, vote_id, "members see the id the keyboard was signed for");
    carol.press(bot_id, mid, &vote, "yes");
    let q = wait_update(&gw, &mut offset, "callback_query", |u| u.get("callback_query").is_some());
    let q = &q["callback_query"];
    assert_eq!((q["data"].as_str(), q["from"]["id"].as_u64()), (Some("yes"), Some(carol.user_id)));
    assert_eq!((q["message"]["chat"]["id"].as_i64(), q["message"]["message_id"].as_i64()), (Some(chat_id), Some(vote_id)));
    let (status, body) = gw.call("answerCallbackQuery", json!({"callback_query_id": q["id"], "text": "counted"}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = gw.call("editMessageText", json!({"chat_id": chat_id, "message_id": vote_id, "text": "vote closed"}));
    assert_eq!(status, 200, "{body}");
    pump_all(&mut [&mut alice, &mut bob, &mut carol]);
    let edit = alice.contents.last().expect("an edit").2.clone();
    assert_eq!((edit.edit().message_id as i64, edit.edit().content.text().text.as_str()), (vote_id, "vote closed"));

    // Chat methods answer from the platform's roles.
    let (_, chat) = gw.call("getChat", json!({"chat_id": chat_id}));
    assert_eq!((chat["result"]["title"].as_str(), chat["result"]["type"].as_str()), (Some("Rust fans"), Some("group")));
    assert!(chat["result"]["accepted_gift_types"].is_object());
    let (_, count) = gw.call("getChatMemberCount", json!({"chat_id": chat_id}));
    assert_eq!(count["result"], 4);
    let (_, admins) = gw.call("getChatAdministrators", json!({"chat_id": chat_id}));
    assert_eq!(admins["result"][0]["status"], "creator");
    assert_eq!(admins["result"][0]["user"]["id"], alice.user_id);
    let (_, me) = gw.call("getChatMember", json!({"chat_id": chat_id, "user_id": bot_id}));
    assert_eq!(me["result"]["status"], "member");
    let (status, unknown) = gw.call("getChat", json!({"chat_id": -42}));
    assert_eq!(status, 400);
    assert!(unknown["description"].as_str().unwrap().contains("-42"), "{unknown}");

    // The title: only the owner (or an administrator with can_change_info) may change it; the
    // bot sees a new_chat_title message, and the chat's title from then on.
    let retitle = |m: &Member, title: &str| {
        let req = pb::SetGroupTitleRequest { group_id: gid.clone(), title: title.into(), ..Default::default() };
        m.p.client.set_group_title(&req, m.p.opt())
    };
    match retitle(&bob, "Bob's group") {
        Err(grpcio::Error::RpcFailure(s)) => assert_eq!(s.code(), grpcio::RpcStatusCode::PERMISSION_DENIED, "{}", s.message()),
        other => panic!("a member may not change the title: {other:?}"),
    }
    retitle(&alice, "Rustaceans").expect("the owner changes the title");
    let renamed = wait_update(&gw, &mut offset, "new_chat_title", |u| u["message"].get("new_chat_title").is_some());
    assert_eq!(renamed["message"]["new_chat_title"], "Rustaceans");
    assert_eq!((renamed["message"]["chat"]["title"].as_str(), renamed["message"]["from"]["id"].as_u64()), (Some("Rustaceans"), Some(alice.user_id)));
    assert!(renamed["message"]["message_id"].as_i64().unwrap() > 0);
    let (_, chat) = gw.call("getChat", json!({"chat_id": chat_id}));
    assert_eq!(chat["result"]["title"], "Rustaceans");

    // A restart in the middle of the conversation: the group goes on from the stored epoch.
    gw.proc.kill();
    assert_eq!(carol.say(&gid, "while you were away").status.enum_value_or_default(), Status::OK);
    gw = Gateway::start(&config);
    gw.wait_connected();
    wait_update(&gw, &mut offset, "the message sent while it was down", |u| u["message"]["text"] == "while you were away");
    let (status, body) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": "back"}));
    assert_eq!(status, 200, "{body}");
    pump_all(&mut [&mut alice, &mut bob, &mut carol]);
    assert_eq!(carol.texts.last().map(|(_, t)| t.as_str()), Some("back"));

    // A keyboard Bob sees while he is a member; he presses it once he has left, below.
    let (status, sent) = gw.call(
        "sendMessage",
        json!({"chat_id": chat_id, "text": "again?", "reply_markup": {"inline_keyboard": [[{"text": "Again", "callback_data": "again"}]]}}),
    );
    assert_eq!(status, 200, "{sent}");
    pump_all(&mut [&mut alice, &mut bob, &mut carol]);
    let (_, again_id, again) =
        bob.contents.iter().find(|(_, _, c)| c.has_text() && c.text().text == "again?").cloned().expect("bob got the keyboard");

    // Bob leaves: chat_member; the next commit removes his leaf (any member, here the bot when
    // it next speaks: the platform asks for the removal first).
    bob.p.client.leave_group(&pb::GroupRequest { group_id: gid.clone(), ..Default::default() }, bob.p.opt()).expect("leave");
    let left = wait_update(&gw, &mut offset, "chat_member", |u| u.get("chat_member").is_some());
    assert_eq!(left["chat_member"]["new_chat_member"]["status"], "left");
    assert_eq!(left["chat_member"]["new_chat_member"]["user"]["id"], bob.user_id);
    let gone = wait_update(&gw, &mut offset, "left_chat_member", |u| u["message"].get("left_chat_member").is_some());
    assert_eq!((gone["message"]["left_chat_member"]["id"].as_u64(), gone["message"]["from"]["id"].as_u64()), (Some(bob.user_id), Some(bob.user_id)));
    // A reply to the service message, as welcome and farewell bots write them.
    let gone_id = gone["message"]["message_id"].as_i64().expect("service message id");
    let (status, body) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": "bye bob", "reply_to_message_id": gone_id}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["reply_to_message"]["message_id"], gone_id, "{body}");
    let (status, body) = gw.call("copyMessage", json!({"chat_id": chat_id, "from_chat_id": chat_id, "message_id": gone_id}));
    assert_eq!(status, 400, "a service message is not copied: {body}");
    assert!(body["description"].as_str().unwrap_or("").contains("can't be"), "{body}");
    pump_all(&mut [&mut alice, &mut carol]);
    assert!(!e2e::group::members(&alice.conn, &gid).unwrap().iter().any(|(u, _)| *u == bob.user_id), "bob's leaf is gone");
    assert_eq!(alice.texts.last().map(|(_, t)| t.as_str()), Some("bye bob"));
    // His press of a button he saw as a member is no update: he has no leaf any more.
    bob.press(bot_id, again_id, &again, "again");
    assert_eq!(carol.say(&gid, "after bob's press").status.enum_value_or_default(), Status::OK);
    wait_update(&gw, &mut offset, "carol's message after bob's press", |u| {
        assert!(u.get("callback_query").is_none(), "a press by a member who left became an update: {u}");
        u["message"]["text"] == "after bob's press"
    });
    assert!(gw.proc.stderr_text().contains("is not a member of group"), "the refusal is logged");

    // Alice removes the bot: my_chat_member (kicked), and nothing after reaches it.
    let req = pb::RemoveGroupMemberRequest { group_id: gid.clone(), user_id: bot_id, ..Default::default() };
    alice.p.client.remove_group_member(&req, alice.p.opt()).expect("remove the bot");
    let removal = e2e::group::remove_users(&alice.conn, &gid, &[bot_id]).expect("removal").expect("the bot has leaves");
    alice.commit(&gid, &removal);
    let kicked = wait_update(&gw, &mut offset, "my_chat_member kicked", |u| u.get("my_chat_member").is_some());
    assert_eq!(kicked["my_chat_member"]["new_chat_member"]["status"], "kicked");
    assert_eq!(alice.say(&gid, "secret after the bot").status.enum_value_or_default(), Status::OK);
    let (status, body) = gw.call("getUpdates", json!({"offset": offset, "timeout": 2}));
    assert_eq!(status, 200);
    assert_eq!(body["result"], json!([]), "the removed bot receives nothing more");
    let (status, body) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": "still here?"}));
    assert_eq!(status, 400, "{body}");

    // The platform's data holds no group plaintext.
    gw.proc.kill();
    for file in ["platform.db", "platform.db-wal"] {
        let Ok(bytes) = std::fs::read(platform.data_dir.join(file)) else { continue };
        for text in ["while you were away", "from bob", "secret after the bot", "bye bob"] {
            assert!(!bytes.windows(text.len()).any(|w| w == text.as_bytes()), "{file} holds {text:?}");
        }
    }
}

#[test]
fn a_bot_without_the_groups_capability_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, _config) = bot_world(dir.path(), "dm");
    let alice = Member::register(&platform.url, "alice");
    let gid = alice.create_group("No bots");
    match alice.invite(&gid, bot["compat_user_id"].as_u64().unwrap()) {
        Err(grpcio::Error::RpcFailure(s)) => {
            assert_eq!(s.code(), grpcio::RpcStatusCode::FAILED_PRECONDITION);
            assert!(s.message().contains("groups capability"), "{}", s.message());
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn two_runtimes_of_one_bot_join_with_their_own_leaves_and_see_the_same_chat_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "groups");
    let bot_id = bot["compat_user_id"].as_u64().unwrap();
    let second = dir.path().join("gateway-2.json");
    write_config(&second, &gateway_config(&platform.url, &dir.path().join("state-2"), &bot));
    let (gw1, gw2) = (Gateway::start(&config), Gateway::start(&second));
    let mut alice = Member::register(&platform.url, "alice");
    let gid = alice.create_group("Two runtimes");
    alice.invite(&gid, bot_id).expect("invite");
    let (mut o1, mut o2) = (0, 0);
    let c1 = wait_update(&gw1, &mut o1, "my_chat_member", |u| u.get("my_chat_member").is_some())["my_chat_member"]["chat"]["id"].clone();
    let c2 = wait_update(&gw2, &mut o2, "my_chat_member", |u| u.get("my_chat_member").is_some())["my_chat_member"]["chat"]["id"].clone();
    assert!(c1.as_i64().unwrap() < 0);
    assert_eq!(c1, c2, "the same chat id on every runtime");
    alice.pump(Duration::from_millis(700));
    let bot_leaves = e2e::group::members(&alice.conn, &gid).unwrap().into_iter().filter(|(u, _)| *u == bot_id).count();
    assert_eq!(bot_leaves, 2, "one leaf per runtime (device)");
    assert_eq!(alice.say(&gid, "to both").status.enum_value_or_default(), Status::OK);
    for (gw, offset) in [(&gw1, &mut o1), (&gw2, &mut o2)] {
        let u = wait_update(gw, offset, "the group message", |u| u["message"]["text"] == "to both");
        assert_eq!(u["message"]["chat"]["id"], c1);
    }
}

#[test]
fn a_member_may_add_the_bot_by_its_key_packages_and_the_bot_leaves_with_leave_chat() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "dm,groups");
    let bot_id = bot["compat_user_id"].as_u64().unwrap();
    let gw = Gateway::start(&config);
    let mut alice = Member::register(&platform.url, "alice");
    let gid = alice.create_group("Welcome path");
    // The runtime published key packages at start; Alice adds its device from one. (The bot
    // also learns it was invited and may join by itself first: either way it ends a member.)
    alice.invite(&gid, bot_id).expect("invite");
    let claimed = alice
        .p
        .client
        .claim_key_packages(&pb::ClaimKeyPackagesRequest { user_id: bot_id, ..Default::default() }, alice.p.opt())
        .expect("claim");
    assert_eq!(claimed.key_packages.len(), 1, "the runtime's device has key packages: {claimed:?}");
    let kps: Vec<e2e::group::Claimed> = claimed
        .key_packages
        .into_iter()
        .map(|k| e2e::group::Claimed { user_id: bot_id, device_id: k.device_id, key_package: k.key_package })
        .collect();
    let out = e2e::group::add(&alice.conn, &gid, &kps).expect("add");
    let r = alice.send(&gid, &out);
    if r.status.enum_value_or_default() == Status::OK {
        e2e::group::commit_accepted(&alice.conn, &gid).expect("merge");
    } else {
        // The bot's own external commit came first.
        e2e::group::commit_refused(&alice.conn, &gid).expect("discard");
    }
    let mut offset = 0;
    let joined = wait_update(&gw, &mut offset, "my_chat_member", |u| u.get("my_chat_member").is_some());
    let chat_id = joined["my_chat_member"]["chat"]["id"].as_i64().unwrap();
    alice.pump(Duration::from_millis(700));
    assert_eq!(alice.say(&gid, "welcome").status.enum_value_or_default(), Status::OK);
    wait_update(&gw, &mut offset, "the group message", |u| u["message"]["text"] == "welcome");
    let (status, body) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": "thanks"}));
    assert_eq!(status, 200, "{body}");
    alice.pump(Duration::from_millis(700));
    assert_eq!(alice.texts.last().map(|(_, t)| t.as_str()), Some("thanks"));

    // leaveChat: the bot is out at once (my_chat_member: left); the platform asks the next
    // sender to commit the removal of its leaves first, and nothing after reaches the bot.
    let (status, body) = gw.call("leaveChat", json!({"chat_id": chat_id}));
    assert_eq!((status, body["result"].clone()), (200, json!(true)), "{body}");
    let left = wait_update(&gw, &mut offset, "my_chat_member left", |u| u.get("my_chat_member").is_some());
    assert_eq!(left["my_chat_member"]["new_chat_member"]["status"], "left");
    alice.pump(Duration::from_millis(700));
    let refused = alice.say(&gid, "after the bot left");
    assert_eq!(refused.status.enum_value_or_default(), Status::REMOVALS_PENDING);
    assert_eq!(refused.pending_removals, vec![bot_id]);
    let removal = e2e::group::remove_users(&alice.conn, &gid, &[bot_id]).expect("removal").expect("the bot's leaves");
    alice.commit(&gid, &removal);
    assert!(!e2e::group::members(&alice.conn, &gid).unwrap().iter().any(|(u, _)| *u == bot_id));
    assert_eq!(alice.say(&gid, "after the bot left").status.enum_value_or_default(), Status::OK);
    let (status, body) = gw.call("getUpdates", json!({"offset": offset, "timeout": 2}));
    assert_eq!((status, body["result"].clone()), (200, json!([])), "the bot reads nothing after leaving");
    let (status, body) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": "still here?"}));
    assert_eq!(status, 400, "{body}");
    assert!(body["description"].as_str().unwrap().contains(&chat_id.to_string()), "{body}");
}

/// Kills the gateway (SIGKILL) and starts it again on the same config.
fn crash_and_restart(gw: &mut Gateway) {
    let _ = gw.proc.child.kill();
    let _ = gw.proc.child.wait();
    let path = gw.config_path.clone();
    *gw = Gateway::start(&path);
}

#[test]
fn sigkill_during_group_traffic_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "groups");
    let bot_id = bot["compat_user_id"].as_u64().unwrap();
    let mut gw = Gateway::start(&config);
    let mut alice = Member::register(&platform.url, "alice");
    let gid = alice.create_group("Crash course");
    alice.invite(&gid, bot_id).expect("invite");
    let mut offset = 0;
    let joined = wait_update(&gw, &mut offset, "my_chat_member", |u| u.get("my_chat_member").is_some());
    let chat_id = joined["my_chat_member"]["chat"]["id"].as_i64().unwrap();
    alice.pump(Duration::from_millis(500));

    // Incoming: 60 member messages; the gateway is killed twice while importing them. Each
    // becomes exactly one update (a repeat after a crash keeps its update_id).
    const IN: usize = 60;
    let mut seen: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    for n in 0..IN {
        assert_eq!(alice.say(&gid, &format!("in-{n}")).status.enum_value_or_default(), Status::OK);
        if n == 20 || n == 45 {
            crash_and_restart(&mut gw);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < IN {
        assert!(Instant::now() < deadline, "only {} of {IN} group messages arrived", seen.len());
        let (status, body) = gw.call("getUpdates", json!({"offset": offset, "timeout": 2}));
        assert_eq!(status, 200, "{body}");
        for u in body["result"].as_array().expect("array") {
            let id = u["update_id"].as_i64().unwrap();
            offset = id + 1;
            let Some(text) = u["message"]["text"].as_str() else { continue };
            if let Some(prev) = seen.insert(text.to_string(), id) {
                assert_eq!(prev, id, "{text} became two updates");
            }
        }
    }

    // Outgoing: 3 threads send group messages while the gateway is killed twice.
    // Every message whose sendMessage was answered 200 reaches the group exactly once, and no
    // message reaches it twice (the outbox's client message id and its stored ciphertext).
    // The senders keep sending until both kills are over (bounded), so the kills always meet
    // sends in flight; then each sends 5 more, which must all be accepted.
    const MAX_PER_THREAD: usize = 2000;
    let crashes_done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let gw = std::sync::Arc::new(std::sync::Mutex::new(gw));
    let senders: Vec<_> = (0..3)
        .map(|t| {
            let (gw, crashes_done) = (gw.clone(), crashes_done.clone());
            std::thread::spawn(move || {
                let (mut accepted, mut refused, mut after) = (Vec::new(), 0, 0);
                let (base, token) = {
                    let g = gw.lock().unwrap();
                    (g.base.clone(), g.token.clone())
                };
                let url = format!("{base}/bot{token}/sendMessage");
                for n in 0..MAX_PER_THREAD {
                    let done = crashes_done.load(std::sync::atomic::Ordering::SeqCst);
                    let text = format!("out-{t}-{n}");
                    // A send cut off by the kill (connection reset or refused) is not accepted;
                    // it may still arrive once, never twice.
                    let sent = ureq::post(&url).timeout(Duration::from_secs(30)).send_json(json!({"chat_id": chat_id, "text": text}));
                    match sent {
                        Ok(r) if r.status() == 200 => accepted.push(text),
                        _ if done => panic!("a send after the gateway was back was refused: {text}"),
                        _ => {
                            refused += 1;
                            // The gateway is down or restarting: no spinning.
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                    if done {
                        after += 1;
                        if after == 5 {
                            break;
                        }
                    }
                }
                assert_eq!(after, 5, "sender {t} ran out of tries before the gateway was back");
                (accepted, refused)
            })
        })
        .collect();
    for pause in [150, 400] {
        std::thread::sleep(Duration::from_millis(pause));
        crash_and_restart(&mut gw.lock().unwrap());
    }
    crashes_done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut accepted, mut refused) = (Vec::new(), 0);
    for h in senders {
        let (a, r) = h.join().expect("sender");
        accepted.extend(a);
        refused += r;
    }
    eprintln!("{} group sends accepted, {refused} cut off by the kills", accepted.len());
    assert!(refused > 0, "the kills met sends in flight");
    assert!(accepted.len() >= 15, "every send after the restarts was accepted ({})", accepted.len());
    let deadline = Instant::now() + Duration::from_secs(60);
    let count = |m: &Member, t: &str| m.texts.iter().filter(|(_, x)| x == t).count();
    while !accepted.iter().all(|t| count(&alice, t) > 0) && Instant::now() < deadline {
        alice.pump(Duration::from_millis(500));
    }
    for t in &accepted {
        assert_eq!(count(&alice, t), 1, "accepted {t} arrived {} times", count(&alice, t));
    }
    let mut outgoing: Vec<&String> = alice.texts.iter().map(|(_, t)| t).filter(|t| t.starts_with("out-")).collect();
    let total = outgoing.len();
    outgoing.sort();
    outgoing.dedup();
    assert_eq!(outgoing.len(), total, "no group message arrived twice");
}

#[test]
fn a_batch_of_group_messages_is_ordered_and_answered_as_each_alone_and_refuses_a_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = support::PlatformServer::start(&dir.path().join("platform"));
    let alice = Member::register(&platform.url, "alice");
    let mut bob = Member::register(&platform.url, "bob");
    let gid = alice.create_group("Batch");
    alice.add_by_welcome(&gid, &[&bob]);
    bob.pump(Duration::from_millis(700));
    assert_eq!(e2e::group::epoch(&bob.conn, &gid).expect("epoch"), Some(1), "bob joined");

    let sealed = |text: &str| {
        use protobuf::Message as _;
        let content = e2e::text_content(text).write_to_bytes().expect("content");
        alice.request(&gid, &e2e::group::CommitOut { message: e2e::group::encrypt(&alice.conn, &gid, &content).expect("encrypt").0, ..Default::default() })
    };
    let (one, two, three) = (sealed("one"), sealed("two"), sealed("three"));
    let commit = alice.request(&gid, &e2e::group::self_update(&alice.conn, &gid).expect("a commit"));
    let broken = pb::SendGroupMessageRequest { message: b"not an MLS message".to_vec(), ..sealed("never sent") };
    let batch = vec![one, two, commit, broken, three];
    let results = alice.send_batch(batch.clone());
    let statuses: Vec<Status> = results.iter().map(|r| r.status.enum_value_or_default()).collect();
    assert_eq!(statuses, [Status::OK, Status::OK, Status::REJECTED, Status::REJECTED, Status::OK], "{results:?}");
    assert!(results[2].error.contains("send a commit alone"), "{}", results[2].error);
    assert!(!results[3].error.is_empty());
    let seqs: Vec<u64> = [0, 1, 4].iter().map(|&i| results[i].group_seq).collect();
    assert!(seqs[0] < seqs[1] && seqs[1] < seqs[2], "in the batch's order: {seqs:?}");
    e2e::group::commit_refused(&alice.conn, &gid).expect("drop the refused commit");

    // Sent again (a lost answer): the same answers, and nothing twice.
    let again = alice.send_batch(batch);
    assert_eq!([0, 1, 4].map(|i| again[i].group_seq).to_vec(), seqs);
    bob.pump(Duration::from_millis(700));
    let texts: Vec<&str> = bob.texts.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["one", "two", "three"]);
}

/// The platform's copy of group `gid`'s newest commit, spoiled (its last byte flipped) before
/// the bot fetched it: the bot cannot process it and rejoins from the GroupInfo the platform
/// serves. Played on the platform's database, as a platform (or its operator) can.
fn spoil_newest_commit(db: &rusqlite::Connection, gid: &[u8]) {
    let (id, mut ciphertext): (i64, Vec<u8>) = db
        .query_row(
            "SELECT id, ciphertext FROM group_deliveries WHERE group_id = ?1 AND group_kind = 0 ORDER BY id DESC LIMIT 1",
            [gid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the commit waits for the bot");
    *ciphertext.last_mut().expect("bytes") ^= 0x01;
    db.execute("UPDATE group_deliveries SET ciphertext = ?1 WHERE id = ?2", rusqlite::params![ciphertext, id]).expect("spoil");
}

/// Pumps Alice and Bob (bounded) until the bot's external commit moved the group past `epoch`
/// and the bot has a leaf again.
fn wait_rejoined(alice: &mut Member, bob: &mut Member, gid: &[u8], bot_id: u64, epoch: u64, gw: &Gateway) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        pump_all(&mut [alice, bob]);
        let members = e2e::group::members(&alice.conn, gid).expect("members");
        if members.iter().any(|(user, _)| *user == bot_id) && e2e::group::epoch(&alice.conn, gid).expect("epoch") > Some(epoch) {
            return;
        }
        assert!(Instant::now() < deadline, "the bot never rejoined: {}", gw.proc.stderr_text());
    }
}

/// Waits (bounded) until `/healthz` says `what`.
fn wait_health(gw: &Gateway, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let health = gw.health().to_string();
        if health.contains(what) {
            return health;
        }
        assert!(Instant::now() < deadline, "/healthz never said {what:?}: {health}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A group rejoin as a malicious platform can force it, black box: a commit the bot cannot
/// process makes it rejoin from the GroupInfo the platform serves. An honest GroupInfo (signed
/// by a member of the tree the bot verified) is joined and the group goes on; a tree the
/// platform built around a leaf of its own, at a higher epoch and under the same group id, is
/// refused with a security alert and nothing of the bot's state is lost, so once the honest
/// GroupInfo is served again the bot rejoins the real group.
#[test]
fn a_rejoin_the_platform_forces_joins_only_the_group_the_bot_was_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "groups");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let mut gw = Gateway::start(&config);
    gw.wait_connected();
    let (mut alice, mut bob, mallory) =
        (Member::register(&platform.url, "alice"), Member::register(&platform.url, "bob"), Member::register(&platform.url, "mallory"));
    let gid = alice.create_group("Rejoin");
    alice.invite(&gid, bot_id).expect("invite the bot");
    let mut offset = 0;
    wait_update(&gw, &mut offset, "my_chat_member", |u| u.get("my_chat_member").is_some());
    alice.pump(Duration::from_millis(700));
    assert_eq!(alice.say(&gid, "before").status.enum_value_or_default(), Status::OK);
    wait_update(&gw, &mut offset, "the first message", |u| u["message"]["text"] == "before");
    let db = rusqlite::Connection::open(platform.data_dir.join("platform.db")).expect("platform db");
    db.busy_timeout(Duration::from_secs(10)).expect("busy timeout");

    // An honest rejoin: the commit adding Bob reaches the bot spoiled.
    gw.proc.kill();
    alice.add_by_welcome(&gid, &[&bob]);
    spoil_newest_commit(&db, &gid);
    gw = Gateway::start(&config);
    gw.wait_connected();
    let added = e2e::group::epoch(&alice.conn, &gid).expect("epoch").expect("in the group");
    wait_rejoined(&mut alice, &mut bob, &gid, bot_id, added, &gw);
    assert!(gw.proc.stderr_text().contains("rejoining by external commit"), "{}", gw.proc.stderr_text());
    assert_eq!(alice.say(&gid, "after the rejoin").status.enum_value_or_default(), Status::OK);
    wait_update(&gw, &mut offset, "a message after the rejoin", |u| u["message"]["text"] == "after the rejoin");
    assert!(!gw.health().to_string().contains("security_alert"), "an honest rejoin alerts nobody: {}", gw.health());

    // A forced rejoin into the platform's own tree: Mallory's group under the same id, at a
    // higher epoch than the real one, served as its GroupInfo.
    let mut forged = e2e::group::create(&mallory.conn, &gid).expect("mallory's tree");
    let real_epoch = e2e::group::epoch(&alice.conn, &gid).expect("epoch").expect("in the group");
    while e2e::group::epoch(&mallory.conn, &gid).expect("epoch").expect("hers") <= real_epoch + 1 {
        forged = e2e::group::self_update(&mallory.conn, &gid).expect("a commit of hers").group_info;
        e2e::group::commit_accepted(&mallory.conn, &gid).expect("merged");
    }
    gw.proc.kill();
    let update = e2e::group::self_update(&alice.conn, &gid).expect("alice's self-update");
    alice.commit(&gid, &update);
    bob.pump(Duration::from_millis(700));
    spoil_newest_commit(&db, &gid);
    let honest: Vec<u8> = db.query_row("SELECT group_info FROM group_infos WHERE group_id = ?1", [&gid], |r| r.get(0)).expect("info");
    db.execute("UPDATE group_infos SET group_info = ?1 WHERE group_id = ?2", rusqlite::params![forged, gid]).expect("forge");
    gw = Gateway::start(&config);
    gw.wait_connected();
    let health = wait_health(&gw, "security_alert");
    assert!(health.contains("does not vouch for"), "{health}");
    assert!(e2e::group::members(&mallory.conn, &gid).expect("members").iter().all(|(user, _)| *user == mallory.user_id), "nobody joined her tree");

    // The honest GroupInfo again: the next group delivery makes the bot try again, and it joins
    // the real group from the tree it kept.
    db.execute("UPDATE group_infos SET group_info = ?1 WHERE group_id = ?2", rusqlite::params![honest, gid]).expect("restore");
    assert_eq!(bob.say(&gid, "poke").status.enum_value_or_default(), Status::OK);
    wait_rejoined(&mut alice, &mut bob, &gid, bot_id, real_epoch + 1, &gw);
    assert_eq!(alice.say(&gid, "welcome back").status.enum_value_or_default(), Status::OK);
    wait_update(&gw, &mut offset, "a message after the second rejoin", |u| u["message"]["text"] == "welcome back");
}
