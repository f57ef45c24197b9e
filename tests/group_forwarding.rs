//! forwardMessage, copyMessage, sendChatAction and files into and out of groups and channels,
//! end to end: the real platform-server and bot-gateway processes on loopback, users on `e2e-chat`'s
//! client library (real MLS, real gRPC), the bot through the Bot API.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use bot_gateway::client::{GroupId, Incoming, MediaKind, Profile};
use bot_gateway::wire::platform::AdminRights;
use serde_json::{json, Value};
use support::group_member::bot_world;
use support::{Gateway, PlatformServer};

const ALL_KINDS: &[&str] = &["message", "channel_post", "my_chat_member", "chat_member"];
/// Longest wait for something that is on its way.
const WAIT: Duration = Duration::from_secs(30);

fn user(platform: &PlatformServer, dir: &Path, name: &str) -> Profile {
    Profile::register(&platform.url, dir.join(name), name, &format!("User {name}")).unwrap_or_else(|e| panic!("register {name}: {e}"))
}

/// Polls until an update matching `pick` arrives (acknowledging what came before it).
fn wait_update(gw: &Gateway, offset: &mut i64, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
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
    panic!("no {what} within {WAIT:?}");
}

/// Receives until `pick` accepts an event (bounded); returns that event.
fn receive_until(p: &Profile, what: &str, pick: impl Fn(&Incoming) -> bool) -> Incoming {
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    loop {
        if let Some(e) = got.iter().find(|e| pick(e)) {
            return Incoming::clone(e);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "@{} waited for {what}; got {got:#?}", p.username());
        got.extend(p.receive_events(left, 1).unwrap_or_else(|e| panic!("@{} receives: {e}", p.username())));
    }
}

fn ok(gw: &Gateway, method: &str, params: Value) -> Value {
    let (status, body) = gw.call(method, params);
    assert_eq!(status, 200, "{method}: {body}");
    body["result"].clone()
}

fn refused(gw: &Gateway, method: &str, params: Value, says: &str) {
    let (status, body) = gw.call(method, params);
    assert_eq!(status, 400, "{method}: {body}");
    let d = body["description"].as_str().unwrap_or_default();
    assert!(d.contains(says), "{method}: {d:?} should say {says:?}");
}

fn group_text<'a>(e: &'a Incoming, group: &GroupId, text: &str) -> Option<&'a bot_gateway::client::ReceivedMessage> {
    match e {
        Incoming::GroupMessage { group: g, message } if g.id == *group && message.text == text => Some(message),
        _ => None,
    }
}

#[test]
fn forwards_copies_and_chat_actions_go_into_and_out_of_groups_and_channels() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "dm,groups,channels");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let gw = Gateway::start(&config);
    gw.wait_connected();
    let (alice, bob) = (user(&platform, dir.path(), "alice"), user(&platform, dir.path(), "bob"));
    let mut offset = 0;

    // Alice writes to the bot privately: a text and a file.
    alice.send_text("@group_bot", "private hello").expect("private text");
    let private = wait_update(&gw, &mut offset, "the private text", |u| u["message"]["text"] == "private hello")["message"].clone();
    let private_id = private["message_id"].as_i64().expect("id");
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, b"some notes").expect("write the file");
    alice.send_file("@group_bot", &file, None, "a file").expect("private file");
    let doc = wait_update(&gw, &mut offset, "the private file", |u| u["message"].get("document").is_some())["message"].clone();
    let doc_id = doc["message_id"].as_i64().expect("id");

    // A group of Alice and Bob, with the bot.
    let team = alice.create_group("Team").expect("create the group");
    alice.add_to_group(&team, "bob").expect("add bob");
    receive_until(&bob, "the Welcome", |e| matches!(e, Incoming::GroupJoined { group } if group.id == team));
    alice.add_to_group(&team, "group_bot").expect("add the bot");
    let joined = wait_update(&gw, &mut offset, "my_chat_member of the group", |u| {
        u["my_chat_member"]["chat"]["type"] == "group" && u["my_chat_member"]["new_chat_member"]["status"] == "member"
    });
    let group_chat = joined["my_chat_member"]["chat"]["id"].as_i64().expect("group chat id");

    // Alice's private message forwarded into the group: members see whose it was.
    let fwd = ok(&gw, "forwardMessage", json!({"chat_id": group_chat, "from_chat_id": alice.user_id(), "message_id": private_id}));
    assert_eq!((fwd["chat"]["id"].as_i64(), fwd["chat"]["type"].as_str()), (Some(group_chat), Some("group")));
    assert_eq!(fwd["text"], "private hello");
    assert_eq!(fwd["forward_origin"]["type"], "user");
    assert_eq!(fwd["forward_origin"]["sender_user"]["id"].as_u64(), Some(alice.user_id()));
    assert!(fwd["forward_origin"]["date"].as_i64().unwrap_or(0) > 0, "{fwd}");
    let seen = receive_until(&bob, "the forward in the group", |e| group_text(e, &team, "private hello").is_some());
    let origin = group_text(&seen, &team, "private hello").and_then(|m| m.forward_origin.clone()).expect("a forward origin");
    assert_eq!((origin.sender_user_id, origin.sender_username.as_str(), origin.channel), (alice.user_id(), "alice", None));

    // Files go into a group through MLS, the per-file key inside the application message: a
    // forward of Alice's private file, and a photo the bot uploads. Bob downloads both.
    let fwd = ok(&gw, "forwardMessage", json!({"chat_id": group_chat, "from_chat_id": alice.user_id(), "message_id": doc_id}));
    assert_eq!(fwd["document"]["file_id"], doc["document"]["file_id"], "the same file, no upload");
    let fwd_id = fwd["message_id"].as_u64().expect("id");
    receive_until(&bob, "the forwarded file", |e| matches!(e, Incoming::GroupMessage { message, .. } if message.message_id == fwd_id));
    let (status, photo) = gw.multipart(
        "sendPhoto",
        &[("chat_id", group_chat.to_string()), ("caption", "<b>team</b> photo".into()), ("parse_mode", "HTML".into())],
        &[("photo", "team.jpg", b"jpeg bytes of the team")],
    );
    assert_eq!(status, 200, "{photo}");
    let photo_id = photo["result"]["message_id"].as_u64().expect("id");
    assert_eq!((photo["result"]["chat"]["id"].as_i64(), photo["result"]["caption"].as_str()), (Some(group_chat), Some("team photo")));
    let seen = receive_until(&bob, "the bot's photo in the group", |e| {
        matches!(e, Incoming::GroupMessage { group, message } if group.id == team && message.message_id == photo_id)
    });
    let Incoming::GroupMessage { message, .. } = seen else { unreachable!() };
    let media = message.media.expect("a file");
    assert_eq!((media.kind, media.caption.as_str(), media.caption_entities[0].kind.as_str()), (MediaKind::Photo, "team photo", "bold"));
    let out = dir.path().join("bob-photo.jpg");
    assert_eq!(bob.download_group(&team, photo_id, &out).expect("bob downloads the photo"), 22);
    assert_eq!(std::fs::read(&out).expect("read"), b"jpeg bytes of the team");
    let out = dir.path().join("bob-notes.txt");
    bob.download_group(&team, fwd_id, &out).expect("bob downloads the forwarded file");
    assert_eq!(std::fs::read(&out).expect("read"), b"some notes");

    // Bob's file into the group reaches the bot as a message with the file, which getFile and
    // the download URL serve.
    let voice = dir.path().join("hello.ogg");
    std::fs::write(&voice, b"bob's voice note").expect("write");
    bob.send_group_file(&team, &voice, None, "listen").expect("bob sends a voice note");
    let got = wait_update(&gw, &mut offset, "bob's voice note", |u| u["message"].get("voice").is_some())["message"].clone();
    assert_eq!((got["chat"]["id"].as_i64(), got["from"]["id"].as_u64(), got["caption"].as_str()), (Some(group_chat), Some(bob.user_id()), Some("listen")));
    let file = ok(&gw, "getFile", json!({"file_id": got["voice"]["file_id"]}));
    let url = format!("{}/file/bot{}/{}", gw.base, gw.token, file["file_path"].as_str().expect("file_path"));
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut ureq::get(&url).call().expect("download").into_reader(), &mut bytes).expect("read");
    assert_eq!(bytes, b"bob's voice note");

    // A chat action in the group: Bob's client shows the bot typing there.
    assert_eq!(ok(&gw, "sendChatAction", json!({"chat_id": group_chat, "action": "typing"})), true);
    let typing = receive_until(&bob, "the chat action", |e| matches!(e, Incoming::GroupChatAction { .. }));
    let Incoming::GroupChatAction { group, from, action } = typing else { unreachable!() };
    assert_eq!((group.id, from.user_id, action.as_str()), (team, bot_id, "typing"));

    // Bob's group message: copied to Alice privately (no forward mark), forwarded to her
    // (origin: Bob, the member who wrote it).
    bob.send_group_text(&team, "group words", None).expect("bob speaks");
    let said = wait_update(&gw, &mut offset, "bob's group message", |u| u["message"]["text"] == "group words")["message"].clone();
    let said_id = said["message_id"].as_i64().expect("id");
    let copy = ok(&gw, "copyMessage", json!({"chat_id": alice.user_id(), "from_chat_id": group_chat, "message_id": said_id}));
    let copy_id = copy["message_id"].as_u64().expect("a MessageId");
    assert_eq!(copy.as_object().map(|o| o.len()), Some(1), "copyMessage answers a MessageId: {copy}");
    let got = receive_until(&alice, "the copy", |e| matches!(e, Incoming::Message(m) if m.message_id == copy_id));
    let Incoming::Message(m) = got else { unreachable!() };
    assert_eq!((m.text.as_str(), m.forward_origin.is_none()), ("group words", true));
    let fwd = ok(&gw, "forwardMessage", json!({"chat_id": alice.user_id(), "from_chat_id": group_chat, "message_id": said_id}));
    assert_eq!((fwd["chat"]["type"].as_str(), fwd["forward_origin"]["type"].as_str()), (Some("private"), Some("user")));
    assert_eq!(fwd["forward_origin"]["sender_user"]["id"].as_u64(), Some(bob.user_id()));
    assert_eq!(fwd["forward_origin"]["sender_user"]["username"], "bob");

    // A channel of Alice's with the bot: without the post right, nothing goes in.
    let news = alice.create_channel("News").expect("create the channel");
    alice.add_to_group(&news, "group_bot").expect("add the bot");
    let joined = wait_update(&gw, &mut offset, "my_chat_member of the channel", |u| {
        u["my_chat_member"]["chat"]["type"] == "channel" && u["my_chat_member"]["new_chat_member"]["status"] == "member"
    });
    let channel_chat = joined["my_chat_member"]["chat"]["id"].as_i64().expect("channel chat id");
    let copy_in = json!({"chat_id": channel_chat, "from_chat_id": group_chat, "message_id": said_id});
    refused(&gw, "copyMessage", copy_in.clone(), "not enough rights to post in channel");
    refused(&gw, "forwardMessage", copy_in.clone(), "not enough rights to post in channel");
    refused(&gw, "sendChatAction", json!({"chat_id": channel_chat, "action": "typing"}), "not enough rights to post in channel");
    refused(
        &gw,
        "copyMessage",
        json!({"chat_id": channel_chat, "from_chat_id": alice.user_id(), "message_id": doc_id}),
        "media publications in channels are not supported",
    );
    refused(&gw, "sendDocument", json!({"chat_id": channel_chat, "document": doc["document"]["file_id"]}), "media publications in channels are not supported");

    // With the post right, the copy is posted once and Alice (the owner) reads it.
    alice.promote(&news, "group_bot", AdminRights { can_post_messages: true, ..Default::default() }).expect("promote the bot");
    wait_update(&gw, &mut offset, "the promotion", |u| u["my_chat_member"]["new_chat_member"]["status"] == "administrator");
    let posted = ok(&gw, "copyMessage", copy_in);
    let posted_id = posted["message_id"].as_u64().expect("a MessageId");
    let post = receive_until(&alice, "the copied post", |e| group_text(e, &news, "group words").is_some());
    assert_eq!(group_text(&post, &news, "group words").map(|m| m.message_id), Some(posted_id));
    assert_eq!(ok(&gw, "sendChatAction", json!({"chat_id": channel_chat, "action": "upload_document"})), true);

    // Alice's own post, forwarded into the group: MessageOriginChannel (the channel and the
    // post's id), and Bob's client names the channel.
    alice.send_group_text(&news, "owner post", None).expect("alice posts");
    let cp = wait_update(&gw, &mut offset, "the channel post", |u| u["channel_post"]["text"] == "owner post")["channel_post"].clone();
    let post_id = cp["message_id"].as_i64().expect("id");
    let fwd = ok(&gw, "forwardMessage", json!({"chat_id": group_chat, "from_chat_id": channel_chat, "message_id": post_id}));
    let origin = &fwd["forward_origin"];
    assert_eq!(origin["type"], "channel", "{fwd}");
    assert_eq!((origin["chat"]["id"].as_i64(), origin["chat"]["type"].as_str()), (Some(channel_chat), Some("channel")));
    assert_eq!((origin["chat"]["title"].as_str(), origin["message_id"].as_i64()), (Some("News"), Some(post_id)));
    assert!(origin["date"].as_i64().unwrap_or(0) > 0 && origin.get("sender_user").is_none(), "{origin}");
    let seen = receive_until(&bob, "the forwarded post", |e| group_text(e, &team, "owner post").is_some());
    let origin = group_text(&seen, &team, "owner post").and_then(|m| m.forward_origin.clone()).expect("a forward origin");
    assert_eq!(origin.channel, Some(("News".to_string(), post_id as u64)));

    // A source the bot cannot read is named.
    refused(
        &gw,
        "copyMessage",
        json!({"chat_id": group_chat, "from_chat_id": -42, "message_id": 1}),
        "from_chat_id -42 is neither a private chat",
    );
}
