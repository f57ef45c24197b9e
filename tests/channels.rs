//! Channels and group administration end to end: the real platform-server and bot-gateway
//! processes on loopback, users as real MLS members (real gRPC), the bot through the Bot API.
//! Posts reach every subscriber once (across SIGKILLs too), rights are the platform's, bans
//! remove a member from the MLS group, restrictions refuse messages, invite links and join
//! requests let users in.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use bot_gateway::wire::e2e::content::Body;
use bot_gateway::wire::platform::{self as pb, group_delivery::Kind, send_group_message_response::Status};
use support::group_member::{bot_world, Member};
use support::Gateway;

const ALL_KINDS: &[&str] = &["message", "channel_post", "callback_query", "my_chat_member", "chat_member", "chat_join_request"];

/// Polls until an update matching `pick` arrives (acknowledging what came before it).
fn wait_update(gw: &Gateway, offset: &mut i64, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let (status, body) = gw.call("getUpdates", json!({"offset": *offset, "timeout": 2, "allowed_updates": ALL_KINDS}));
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

fn refused(gw: &Gateway, method: &str, params: Value, says: &str) {
    let (status, body) = gw.call(method, params);
    assert_eq!(status, 400, "{method}: {body}");
    let d = body["description"].as_str().unwrap_or_default();
    assert!(d.contains(says), "{method}: {d:?} should say {says:?}");
}

fn ok(gw: &Gateway, method: &str, params: Value) -> Value {
    let (status, body) = gw.call(method, params);
    assert_eq!(status, 200, "{method}: {body}");
    body["result"].clone()
}

fn rights(post: bool, restrict: bool, invite: bool, delete: bool, promote: bool) -> pb::AdminRights {
    pb::AdminRights {
        can_post_messages: post,
        can_restrict_members: restrict,
        can_invite_users: invite,
        can_delete_messages: delete,
        can_promote_members: promote,
        ..Default::default()
    }
}

/// Pumps until `m` has received `text` (bounded); false when it never came.
fn receives(m: &mut Member, text: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if m.texts.iter().any(|(_, t)| t == text) {
            return true;
        }
        m.pump(Duration::from_millis(300));
    }
    m.texts.iter().any(|(_, t)| t == text)
}

/// The members' chat_member update about `user` (skipping others).
fn member_update(gw: &Gateway, offset: &mut i64, user: u64, new_status: &str) -> Value {
    let u = wait_update(gw, offset, &format!("chat_member {new_status} of {user}"), |u| {
        u["chat_member"]["new_chat_member"]["user"]["id"] == user && u["chat_member"]["new_chat_member"]["status"] == new_status
    });
    u["chat_member"].clone()
}

#[test]
fn a_bot_posts_to_a_channel_and_administers_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "dm,groups,channels");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let gw = Gateway::start(&config);
    let (mut alice, mut bob, mut carol) =
        (Member::register(&platform.url, "alice"), Member::register(&platform.url, "bob"), Member::register(&platform.url, "carol"));
    let gid = alice.create_channel("Cat news");
    alice.add_by_welcome(&gid, &[&bob, &carol]);
    bob.pump(Duration::from_millis(300));
    carol.pump(Duration::from_millis(300));

    // Subscribed: my_chat_member left → member in a channel; no post right yet.
    alice.invite(&gid, bot_id).expect("add the bot");
    let mut offset = 0;
    let u = wait_update(&gw, &mut offset, "my_chat_member", |u| u["my_chat_member"]["new_chat_member"]["status"] == "member");
    let chat = u["my_chat_member"]["chat"].clone();
    assert_eq!((chat["type"].as_str(), chat["title"].as_str()), (Some("channel"), Some("Cat news")));
    let chat_id = chat["id"].as_i64().expect("id");
    assert!(chat_id < 0);
    refused(&gw, "sendMessage", json!({"chat_id": chat_id, "text": "too early"}), "not enough rights to post");

    alice.promote(&gid, bot_id, rights(true, true, true, true, false)).expect("promote the bot");
    let u = wait_update(&gw, &mut offset, "promotion", |u| u["my_chat_member"]["new_chat_member"]["status"] == "administrator");
    let admin = &u["my_chat_member"]["new_chat_member"];
    assert_eq!((admin["can_post_messages"].as_bool(), admin["can_promote_members"].as_bool()), (Some(true), Some(false)));

    // A formatted post with a keyboard reaches every subscriber.
    let keyboard = json!({"inline_keyboard": [[{"text": "Like", "callback_data": "like"}]]});
    let sent = ok(&gw, "sendMessage", json!({"chat_id": chat_id, "text": "<b>Hello</b> cats", "parse_mode": "HTML", "reply_markup": keyboard}));
    assert_eq!((sent["chat"]["type"].as_str(), sent["sender_chat"]["id"].as_i64()), (Some("channel"), Some(chat_id)));
    assert!(sent.get("from").is_none(), "a channel post has no from: {sent}");
    for m in [&mut alice, &mut bob, &mut carol] {
        assert!(receives(m, "Hello cats", Duration::from_secs(20)), "user {} got the post", m.user_id);
    }
    let (_, _, content) = bob.contents.iter().find(|(_, _, c)| c.text().text == "Hello cats").expect("content");
    assert_eq!(content.keyboard.rows.len(), 1, "the keyboard travels with the post");

    // The owner's post is a channel_post; a subscriber may not post.
    assert_eq!(alice.say(&gid, "owner speaking").status.enum_value_or_default(), Status::OK);
    let post = wait_update(&gw, &mut offset, "channel_post", |u| u.get("channel_post").is_some())["channel_post"].clone();
    assert_eq!((post["text"].as_str(), post["chat"]["id"].as_i64()), (Some("owner speaking"), Some(chat_id)));
    assert_eq!(post["sender_chat"]["type"], "channel");
    assert!(post.get("from").is_none(), "{post}");
    let owner_post_id = post["message_id"].as_i64().expect("id");
    let r = bob.say(&gid, "subscriber speaking");
    assert_eq!(r.status.enum_value_or_default(), Status::REJECTED, "{}", r.error);

    // What the spec leaves out answers 400.
    refused(&gw, "sendDocument", json!({"chat_id": chat_id, "document": "AAAA"}), "media publications in channels are not supported");
    refused(&gw, "sendMessage", json!({"chat_id": chat_id, "text": "x", "message_thread_id": 3}), "forum topics are not supported");
    refused(&gw, "createForumTopic", json!({"chat_id": chat_id, "name": "x"}), "forum topics are not supported");

    // The bot (can_delete_messages) deletes the owner's post: every member is told.
    assert_eq!(ok(&gw, "deleteMessage", json!({"chat_id": chat_id, "message_id": owner_post_id})), true);
    let d = bob.wait_delivery(Kind::DELETED, Duration::from_secs(20));
    assert_eq!(d.group.deleted_message_id, owner_post_id as u64);
    // The platform's notice alone deletes nothing: the bot's own MLS Delete follows it
    // (`e2e::deletions`).
    let deleted = |m: &Member| {
        m.contents.iter().any(|(s, _, c)| *s == bot_id && matches!(&c.body, Some(Body::Delete(d)) if d.message_id == owner_post_id as u64))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !deleted(&bob) {
        assert!(Instant::now() < deadline, "the bot's Delete never reached Bob");
        bob.pump(Duration::from_millis(200));
    }
    // Everything the bot sent vouches for the id and date it arrived under (`e2e::vouch`).
    let from_bot: Vec<_> = bob.contents.iter().filter(|(s, _, _)| *s == bot_id).collect();
    assert!(from_bot.len() >= 2, "the post and the Delete");
    for (_, id, c) in from_bot {
        assert_eq!(c.vouched.message_id, *id, "{c:?}");
    }
    refused(&gw, "deleteMessage", json!({"chat_id": chat_id, "message_id": owner_post_id}), "not found");

    // A ban: chat_member member → kicked; the bot removes Carol's leaf, and she cannot read the
    // next post while Bob can.
    assert_eq!(ok(&gw, "banChatMember", json!({"chat_id": chat_id, "user_id": carol.user_id})), true);
    let banned = member_update(&gw, &mut offset, carol.user_id, "kicked");
    assert_eq!((banned["from"]["id"].as_u64(), banned["new_chat_member"]["until_date"].as_i64()), (Some(bot_id), Some(0)));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        alice.pump(Duration::from_millis(300));
        let leaves = bot_gateway::e2e::group::members(&alice.conn, &gid).expect("members");
        if !leaves.iter().any(|(u, _)| *u == carol.user_id) {
            break;
        }
        assert!(Instant::now() < deadline, "carol's leaf was never removed");
    }
    ok(&gw, "sendMessage", json!({"chat_id": chat_id, "text": "after the ban"}));
    assert!(receives(&mut bob, "after the ban", Duration::from_secs(20)));
    assert!(!receives(&mut carol, "after the ban", Duration::from_secs(2)), "the banned member read a later post");

    // Unbanned, Carol may come back (here by being added again); she is `left` until then.
    assert_eq!(ok(&gw, "unbanChatMember", json!({"chat_id": chat_id, "user_id": carol.user_id, "only_if_banned": true})), true);
    member_update(&gw, &mut offset, carol.user_id, "left");
    assert_eq!(ok(&gw, "getChatMember", json!({"chat_id": chat_id, "user_id": carol.user_id}))["status"], "left");

    // Invite links: a named link for one member; Dave joins by it (chat_member with the link).
    let link = ok(&gw, "createChatInviteLink", json!({"chat_id": chat_id, "name": "for dave", "member_limit": 1}));
    for f in ["invite_link", "creator", "creates_join_request", "is_primary", "is_revoked"] {
        assert!(link.get(f).is_some(), "{f}: {link}");
    }
    assert_eq!((link["name"].as_str(), link["member_limit"].as_i64(), link["creator"]["id"].as_u64()), (Some("for dave"), Some(1), Some(bot_id)));
    let url = link["invite_link"].as_str().expect("link").to_string();
    assert!(url.starts_with("e2e://join/"), "{url}");
    let dave = Member::register(&platform.url, "dave");
    dave.join_by_link(&url).expect("dave joins");
    let joined = member_update(&gw, &mut offset, dave.user_id, "member");
    assert_eq!(joined["invite_link"]["invite_link"], url.as_str());
    let erin = Member::register(&platform.url, "erin");
    let e = erin.join_by_link(&url).expect_err("full");
    assert!(format!("{e:?}").contains("member limit"), "{e:?}");
    // Revoked and expired links refuse.
    let revocable = ok(&gw, "createChatInviteLink", json!({"chat_id": chat_id}))["invite_link"].as_str().unwrap().to_string();
    let edited = ok(&gw, "editChatInviteLink", json!({"chat_id": chat_id, "invite_link": revocable, "name": "renamed", "member_limit": 9}));
    assert_eq!((edited["name"].as_str(), edited["member_limit"].as_i64(), edited["invite_link"].as_str()), (Some("renamed"), Some(9), Some(revocable.as_str())));
    let revoked = ok(&gw, "revokeChatInviteLink", json!({"chat_id": chat_id, "invite_link": revocable}));
    assert_eq!(revoked["is_revoked"], true);
    assert!(format!("{:?}", erin.join_by_link(&revocable).expect_err("revoked")).contains("revoked"));
    let soon = bot_gateway::clock::unix_now() + 2;
    let expiring = ok(&gw, "createChatInviteLink", json!({"chat_id": chat_id, "expire_date": soon}));
    assert_eq!(expiring["expire_date"], soon);
    while bot_gateway::clock::unix_now() <= soon {
        std::thread::sleep(Duration::from_millis(200));
    }
    let e = erin.join_by_link(expiring["invite_link"].as_str().unwrap()).expect_err("expired");
    assert!(format!("{e:?}").contains("expired"), "{e:?}");
    refused(&gw, "createChatInviteLink", json!({"chat_id": chat_id, "member_limit": 5, "creates_join_request": true}), "exclude each other");
    let primary = ok(&gw, "exportChatInviteLink", json!({"chat_id": chat_id}));
    assert!(primary.as_str().is_some_and(|l| l.starts_with("e2e://join/")), "{primary}");

    // Join requests: Erin asks (chat_join_request), is approved and reads the next post; Frank
    // asks, is declined, and is told.
    let ask = ok(&gw, "createChatInviteLink", json!({"chat_id": chat_id, "creates_join_request": true}));
    let ask_url = ask["invite_link"].as_str().unwrap().to_string();
    let mut erin = erin;
    let r = erin.join_by_link(&ask_url).expect("erin asks");
    assert_eq!(r.status.enum_value_or_default(), pb::join_by_link_response::Status::REQUESTED);
    let req = wait_update(&gw, &mut offset, "chat_join_request", |u| u.get("chat_join_request").is_some())["chat_join_request"].clone();
    assert_eq!((req["from"]["id"].as_u64(), req["user_chat_id"].as_u64()), (Some(erin.user_id), Some(erin.user_id)));
    assert_eq!((req["chat"]["id"].as_i64(), req["invite_link"]["invite_link"].as_str()), (Some(chat_id), Some(ask_url.as_str())));
    assert_eq!(ok(&gw, "approveChatJoinRequest", json!({"chat_id": chat_id, "user_id": erin.user_id})), true);
    let approved = erin.wait_delivery(Kind::MEMBERSHIP, Duration::from_secs(20));
    assert!(approved.group.change.via_join_request, "the approval says so");
    erin.join_external(&gid);
    let joined = member_update(&gw, &mut offset, erin.user_id, "member");
    assert_eq!(joined["via_join_request"], true);
    ok(&gw, "sendMessage", json!({"chat_id": chat_id, "text": "welcome erin"}));
    assert!(receives(&mut erin, "welcome erin", Duration::from_secs(20)));
    let mut frank = Member::register(&platform.url, "frank");
    frank.join_by_link(&ask_url).expect("frank asks");
    wait_update(&gw, &mut offset, "frank's request", |u| u["chat_join_request"]["from"]["id"] == frank.user_id);
    assert_eq!(ok(&gw, "declineChatJoinRequest", json!({"chat_id": chat_id, "user_id": frank.user_id})), true);
    let outcome = frank.wait_delivery(Kind::JOIN_REQUEST, Duration::from_secs(20));
    assert_eq!(outcome.group.join_request.outcome.enum_value_or_default(), pb::join_request::Outcome::DECLINED);
    refused(&gw, "approveChatJoinRequest", json!({"chat_id": chat_id, "user_id": frank.user_id}), "no pending join request");
    refused(&gw, "getChatMember", json!({"chat_id": chat_id, "user_id": frank.user_id}), "never been in this chat");
}

#[test]
fn restrictions_promotions_and_missing_rights_in_a_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "groups");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let gw = Gateway::start(&config);
    let (alice, mut bob, mut carol) =
        (Member::register(&platform.url, "alice"), Member::register(&platform.url, "bob"), Member::register(&platform.url, "carol"));
    let gid = alice.create_group("Rules");
    alice.add_by_welcome(&gid, &[&bob, &carol]);
    bob.pump(Duration::from_millis(300));
    carol.pump(Duration::from_millis(300));
    alice.invite(&gid, bot_id).expect("add the bot");
    let mut offset = 0;
    let u = wait_update(&gw, &mut offset, "joined", |u| u["my_chat_member"]["new_chat_member"]["status"] == "member");
    let chat_id = u["my_chat_member"]["chat"]["id"].as_i64().unwrap();

    // A plain member has no rights: each refusal says which and changes nothing.
    refused(&gw, "banChatMember", json!({"chat_id": chat_id, "user_id": bob.user_id}), "not enough rights to ban a member");
    refused(&gw, "restrictChatMember", json!({"chat_id": chat_id, "user_id": bob.user_id, "permissions": {"can_send_messages": false}}), "not enough rights");
    refused(&gw, "createChatInviteLink", json!({"chat_id": chat_id}), "not enough rights");
    refused(&gw, "setChatTitle", json!({"chat_id": chat_id, "title": "Mine"}), "not enough rights");
    assert_eq!(ok(&gw, "getChatMember", json!({"chat_id": chat_id, "user_id": bob.user_id}))["status"], "member");

    // With restrict + promote (no delete): Carol restricted, her message refused; Bob promoted;
    // a right the bot lacks cannot be granted; deleting Bob's message needs a right it lacks.
    alice.promote(&gid, bot_id, rights(false, true, false, false, true)).expect("promote the bot");
    wait_update(&gw, &mut offset, "promotion", |u| u["my_chat_member"]["new_chat_member"]["status"] == "administrator");
    let until = bot_gateway::clock::unix_now() + 3600;
    let permissions = json!({"can_send_messages": false, "can_send_photos": true});
    assert_eq!(ok(&gw, "restrictChatMember", json!({"chat_id": chat_id, "user_id": carol.user_id, "permissions": permissions, "until_date": until})), true);
    let r = member_update(&gw, &mut offset, carol.user_id, "restricted");
    assert_eq!((r["new_chat_member"]["until_date"].as_i64(), r["new_chat_member"]["can_send_messages"].as_bool()), (Some(until), Some(false)));
    carol.pump(Duration::from_millis(300));
    let refused_send = carol.say(&gid, "may I?");
    assert_eq!(refused_send.status.enum_value_or_default(), Status::REJECTED);
    assert!(refused_send.error.contains("restricted"), "{}", refused_send.error);
    assert_eq!(ok(&gw, "restrictChatMember", json!({"chat_id": chat_id, "user_id": carol.user_id, "permissions": {"can_send_messages": true}})), true);
    member_update(&gw, &mut offset, carol.user_id, "member");
    assert_eq!(carol.say(&gid, "thanks").status.enum_value_or_default(), Status::OK);

    assert_eq!(ok(&gw, "promoteChatMember", json!({"chat_id": chat_id, "user_id": bob.user_id, "can_restrict_members": true})), true);
    let p = member_update(&gw, &mut offset, bob.user_id, "administrator");
    assert_eq!((p["new_chat_member"]["can_restrict_members"].as_bool(), p["new_chat_member"]["can_delete_messages"].as_bool()), (Some(true), Some(false)));
    refused(&gw, "promoteChatMember", json!({"chat_id": chat_id, "user_id": carol.user_id, "can_delete_messages": true}), "not enough rights to promote");
    bob.pump(Duration::from_millis(300));
    assert_eq!(bob.say(&gid, "delete me").status.enum_value_or_default(), Status::OK);
    let m = wait_update(&gw, &mut offset, "bob's message", |u| u["message"]["text"] == "delete me");
    let mid = m["message"]["message_id"].as_i64().unwrap();
    refused(&gw, "deleteMessage", json!({"chat_id": chat_id, "message_id": mid}), "not enough rights to delete");
    // Demoting with no rights makes Bob a member again.
    assert_eq!(ok(&gw, "promoteChatMember", json!({"chat_id": chat_id, "user_id": bob.user_id})), true);
    member_update(&gw, &mut offset, bob.user_id, "member");
}

#[test]
fn a_bot_without_channels_is_refused_by_a_channel() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, _config) = bot_world(dir.path(), "dm,groups");
    let alice = Member::register(&platform.url, "alice");
    let gid = alice.create_channel("No bots");
    let e = alice.invite(&gid, bot["compat_user_id"].as_u64().unwrap()).expect_err("refused");
    assert!(format!("{e:?}").contains("channels capability"), "{e:?}");
    let link = alice.p.client.export_invite_link(&pb::GroupRequest { group_id: gid, ..Default::default() }, alice.p.opt()).expect("link");
    assert!(link.link.starts_with("e2e://join/"));
}

/// Kills the gateway (SIGKILL) and starts it again on the same config.
fn crash_and_restart(gw: &mut Gateway) {
    let _ = gw.proc.child.kill();
    let _ = gw.proc.child.wait();
    let path = gw.config_path.clone();
    *gw = Gateway::start(&path);
}

/// Waits (bounded) until the bot's outbox is empty, by `/metrics`.
fn outbox_drained(gw: &Gateway) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let scrape = ureq::get(&format!("{}/metrics", gw.ext_base)).call().expect("metrics").into_string().expect("text");
        let depth = scrape.lines().find(|l| l.starts_with("botgw_outbox_depth{")).and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        if depth == Some(0.0) {
            return;
        }
        assert!(Instant::now() < deadline, "the outbox never drained: {depth:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn two_hundred_posts_across_sigkills_arrive_exactly_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "channels");
    let bot_id = bot["compat_user_id"].as_u64().unwrap();
    let gw = Gateway::start(&config);
    let (alice, mut bob) = (Member::register(&platform.url, "alice"), Member::register(&platform.url, "bob"));
    let gid = alice.create_channel("Firehose");
    alice.add_by_welcome(&gid, &[&bob]);
    alice.invite(&gid, bot_id).expect("add the bot");
    let mut offset = 0;
    wait_update(&gw, &mut offset, "joined", |u| u["my_chat_member"]["new_chat_member"]["status"] == "member");
    alice.promote(&gid, bot_id, rights(true, false, false, false, false)).expect("promote");
    let u = wait_update(&gw, &mut offset, "post right", |u| u["my_chat_member"]["new_chat_member"]["status"] == "administrator");
    let chat_id = u["my_chat_member"]["chat"]["id"].as_i64().unwrap();

    // The posts go one by one while another thread kills the gateway at seeded random points
    // of the sequence (after post k, plus a random few milliseconds: mid-request or between).
    const POSTS: usize = 200;
    const KILLS: usize = 4;
    let gw = std::sync::Arc::new(std::sync::Mutex::new(gw));
    let url = {
        let g = gw.lock().unwrap();
        format!("{}/bot{}/sendMessage", g.base, g.token)
    };
    let progress = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let killer = {
        let (gw, progress) = (gw.clone(), progress.clone());
        std::thread::spawn(move || {
            let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut next = || {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (seed >> 33) as usize
            };
            let mut at: Vec<usize> = (0..KILLS).map(|i| 20 + i * 40 + next() % 30).collect();
            at.sort();
            for k in at {
                let deadline = Instant::now() + Duration::from_secs(120);
                while progress.load(std::sync::atomic::Ordering::SeqCst) < k {
                    assert!(Instant::now() < deadline, "the posts stalled before post {k}");
                    std::thread::sleep(Duration::from_millis(2));
                }
                std::thread::sleep(Duration::from_millis((next() % 15) as u64));
                crash_and_restart(&mut gw.lock().unwrap());
            }
        })
    };
    let mut unknown = Vec::new();
    for n in 0..POSTS {
        let text = format!("post {n}");
        match ureq::post(&url).timeout(Duration::from_secs(30)).send_json(json!({"chat_id": chat_id, "text": text})) {
            Ok(r) if r.status() == 200 => {}
            // Cut off by a kill: it may or may not have been recorded; settled below.
            _ => {
                unknown.push(text);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        progress.store(n + 1, std::sync::atomic::Ordering::SeqCst);
    }
    killer.join().expect("killer");
    let kills = KILLS;
    // A post whose call was cut off is sent again only if it never arrived: once the outbox has
    // drained, whatever the platform took has reached Bob's inbox.
    let g = gw.lock().unwrap();
    g.wait_connected();
    outbox_drained(&g);
    bob.pump(Duration::from_millis(1500));
    eprintln!("{kills} kills; {} posts cut off", unknown.len());
    for text in &unknown {
        if !bob.texts.iter().any(|(_, t)| t == text) {
            ok(&g, "sendMessage", json!({"chat_id": chat_id, "text": text}));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let posts = |m: &Member| m.texts.iter().filter(|(_, t)| t.starts_with("post ")).count();
    while posts(&bob) < POSTS && Instant::now() < deadline {
        bob.pump(Duration::from_millis(500));
    }
    bob.pump(Duration::from_millis(1000));
    for n in 0..POSTS {
        let text = format!("post {n}");
        let count = bob.texts.iter().filter(|(_, t)| *t == text).count();
        assert_eq!(count, 1, "{text} arrived {count} times");
    }
    assert_eq!(posts(&bob), POSTS, "nothing else arrived");
}
