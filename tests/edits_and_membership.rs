//! Who did it, and edits of users' messages, end to end: the real platform-server and
//! bot-gateway on loopback, users driven through `e2e-chat` (and the client library where a
//! misbehaving client is needed). A user's edit of their own text reaches the bot as
//! `edited_message` (or `edited_channel_post`), filtered by `allowed_updates`; an edit of
//! someone else's message is refused by the client and ignored by the gateway; membership
//! updates name who caused them in `from`.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use bot_gateway::client::Profile;
use bot_gateway::wire::e2e::{Content, Edit};
use support::group_member::bot_world;
use support::{bin_path, Gateway, World};

fn e2e_chat(profile: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin_path("e2e-chat")).arg("--profile").arg(profile).args(args).env("RUST_LOG", "warn").output().expect("run");
    (out.status.code().expect("exited"), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Runs an `e2e-chat` command that must succeed; its output lines as JSON.
fn ok(profile: &Path, args: &[&str]) -> Vec<Value> {
    let (code, out, err) = e2e_chat(profile, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect()
}

fn fails(profile: &Path, args: &[&str], says: &str) {
    let (code, _, err) = e2e_chat(profile, args);
    assert_eq!(code, 1, "{args:?} should fail: {err}");
    assert!(err.contains(says), "{args:?}: {err:?} should say {says:?}");
}

/// Polls (with `allowed_updates` when given) until an update matching `pick` arrives; returns
/// it and every update seen up to it (all acknowledged).
fn wait_update(gw: &Gateway, offset: &mut i64, allowed: Option<&[&str]>, what: &str, pick: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let mut params = json!({"offset": *offset, "timeout": 2});
        if let Some(kinds) = allowed {
            params["allowed_updates"] = json!(kinds);
        }
        let (status, body) = gw.call("getUpdates", params);
        assert_eq!(status, 200, "{body}");
        for u in body["result"].as_array().expect("array") {
            *offset = u["update_id"].as_i64().expect("id") + 1;
            seen.push(u.clone());
            if pick(u) {
                return (u.clone(), seen);
            }
        }
    }
    panic!("no {what} within 40 s; seen {seen:?}; gateway stderr:\n{}", gw.proc.stderr_text());
}

#[test]
fn a_user_edits_their_own_message_and_the_bot_gets_edited_message() {
    let world = World::start("edit_bot");
    let gw = &world.gateway;
    let alice = world.dir.path().join("alice");
    ok(&alice, &["--server", &world.platform.url, "register", "alice"]);

    let sent = &ok(&alice, &["send", "@edit_bot", "helo", "world"])[0];
    let mid = sent["message_id"].as_u64().expect("id");
    let mut offset = 0;
    let (m, _) = wait_update(gw, &mut offset, None, "the message", |u| u["message"]["text"] == "helo world");
    let (date, chat_id) = (m["message"]["date"].as_i64().expect("date"), m["message"]["chat"]["id"].as_i64().expect("chat"));

    // The edit, end to end: the whole message with the new text and edit_date.
    let edited = &ok(&alice, &["edit", "@edit_bot", &mid.to_string(), "hello", "world"])[0];
    assert_eq!((&edited["chat_id"], edited["message_id"].as_u64()), (&sent["chat_id"], Some(mid)), "the dialog with the bot");
    assert!(edited["edit_date"].as_i64().expect("edit_date") >= date);
    let (u, _) = wait_update(gw, &mut offset, None, "edited_message", |u| u.get("edited_message").is_some());
    let e = &u["edited_message"];
    assert_eq!((e["message_id"].as_u64(), e["text"].as_str()), (Some(mid), Some("hello world")));
    assert_eq!((e["chat"]["id"].as_i64(), e["from"]["username"].as_str(), e["date"].as_i64()), (Some(chat_id), Some("alice"), Some(date)));
    assert!(e["edit_date"].as_i64().expect("edit_date is set") >= date, "{e}");
    fails(&alice, &["edit", "@edit_bot", &mid.to_string(), "hello", "world"], "already says that");

    // The bot's message is not hers: the client refuses to edit it.
    let (status, reply) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": "noted"}));
    assert_eq!(status, 200, "{reply}");
    let bot_mid = reply["result"]["message_id"].as_u64().expect("id");
    let heard = ok(&alice, &["listen", "--timeout", "10", "--count", "1"]);
    assert_eq!(heard[0]["text"], "noted");
    fails(&alice, &["edit", "@edit_bot", &bot_mid.to_string(), "mine", "now"], "was not sent by you");
    fails(&alice, &["edit", "@edit_bot", "999", "what"], "no text you sent");

    // A client that sends such an edit anyway: the gateway ignores it (logged), and the inbox
    // goes on with the next message.
    let profile = Profile::open_at(&alice, None).expect("open the profile");
    let bot = profile.lookup("@edit_bot").expect("lookup");
    let mut forged = Content::new();
    forged.set_edit(Edit { message_id: bot_mid, content: protobuf::MessageField::some(bot_gateway::e2e::text_content("hijacked")), ..Default::default() });
    profile.send_content(&bot, &forged).expect("sent anyway");
    drop(profile);
    ok(&alice, &["send", "@edit_bot", "next"]);
    let (_, seen) = wait_update(gw, &mut offset, None, "the next message", |u| u["message"]["text"] == "next");
    assert!(seen.iter().all(|u| u.get("edited_message").is_none()), "the forged edit made an update: {seen:?}");
    assert!(gw.proc.stderr_text().contains(&format!("edit of message {bot_mid} in chat {chat_id} refused")), "logged");
    assert_eq!(gw.health()["bots"][0]["connected"], true);

    // A filter without edited_message: the edit makes no update.
    let (status, body) = gw.call("getUpdates", json!({"offset": offset, "timeout": 0, "allowed_updates": ["message"]}));
    assert_eq!((status, body["result"].as_array().map(Vec::len)), (200, Some(0)), "{body}");
    ok(&alice, &["edit", "@edit_bot", &mid.to_string(), "hello", "again"]);
    ok(&alice, &["send", "@edit_bot", "after"]);
    let (_, seen) = wait_update(gw, &mut offset, Some(&["message"]), "the message after", |u| u["message"]["text"] == "after");
    assert!(seen.iter().all(|u| u.get("edited_message").is_none()), "filtered out: {seen:?}");
}

/// Chat mode's `/edit N TEXT`: our line changes, the bot gets `edited_message`; the bot's
/// message is refused with the reason.
#[test]
fn chat_mode_edits_our_own_line() {
    use std::io::Write;
    use support::chat::{piped_chat, read_until};

    let world = World::start("chat_edit_bot");
    let gw = &world.gateway;
    let alice = world.dir.path().join("alice");
    ok(&alice, &["--server", &world.platform.url, "register", "alice"]);
    let (mut chat, mut stdin, out, err) = piped_chat(&alice, "@chat_edit_bot");
    writeln!(stdin, "helo there").expect("type");
    let sent = read_until(&out, "our line", |l| l.starts_with("[you] helo there (#"));
    let mid: u64 = sent.last().and_then(|l| l.rsplit("(#").next()).and_then(|n| n.trim_end_matches(')').parse().ok()).expect("id");
    let mut offset = 0;
    let (m, _) = wait_update(gw, &mut offset, None, "the message", |u| u["message"]["text"] == "helo there");
    let chat_id = m["message"]["chat"]["id"].as_i64().expect("chat");

    writeln!(stdin, "/edit {mid} hello there").expect("type");
    read_until(&out, "the edit", |l| l == format!("[you] #{mid} edited: hello there"));
    let (u, _) = wait_update(gw, &mut offset, None, "edited_message", |u| u.get("edited_message").is_some());
    assert_eq!((u["edited_message"]["message_id"].as_u64(), u["edited_message"]["text"].as_str()), (Some(mid), Some("hello there")));

    let (status, reply) = gw.call("sendMessage", json!({"chat_id": chat_id, "text": "a bot's line"}));
    assert_eq!(status, 200, "{reply}");
    let bot_mid = reply["result"]["message_id"].as_u64().expect("id");
    read_until(&out, "the bot's line", |l| l.contains("a bot's line"));
    writeln!(stdin, "/edit {bot_mid} mine now").expect("type");
    read_until(&err, "the refusal", |l| l.starts_with("/edit:") && l.contains("was not sent by you"));
    writeln!(stdin, "/quit").expect("type");
    assert!(chat.wait_exit("after /quit").success());
}

/// The `from` of each membership update names who caused it; members' edits in a group and
/// the owner's edit of a channel post reach the bot.
#[test]
fn membership_updates_name_who_did_it_and_group_edits_reach_the_bot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "dm,groups,channels");
    let bot_id = bot["compat_user_id"].as_i64().expect("bot id");
    let gw = Gateway::start(&config);
    let [ann, ben, cat] = ["ann", "ben", "cat"].map(|n| dir.path().join(n));
    for (p, name) in [(&ann, "ann"), (&ben, "ben"), (&cat, "cat")] {
        ok(p, &["--server", &platform.url, "register", name]);
    }
    let user_id = |p: &Path| Profile::open_at(p, None).expect("profile").user_id() as i64;
    let (ann_id, ben_id, cat_id) = (user_id(&ann), user_id(&ben), user_id(&cat));

    // Ann adds the bot: it joins by its own commit, and my_chat_member names Ann.
    ok(&ann, &["group", "create", "Team"]);
    ok(&ann, &["group", "add", "Team", "@group_bot"]);
    let mut offset = 0;
    let (u, _) = wait_update(&gw, &mut offset, None, "my_chat_member", |u| u.get("my_chat_member").is_some());
    let m = &u["my_chat_member"];
    assert_eq!((m["new_chat_member"]["status"].as_str(), m["new_chat_member"]["user"]["id"].as_i64()), (Some("member"), Some(bot_id)));
    assert_eq!(m["from"]["id"].as_i64(), Some(ann_id), "the user who added the bot: {m}");
    let chat_id = m["chat"]["id"].as_i64().expect("chat id");

    // Ann adds Ben (his device by Welcome): chat_member names Ann, not Ben.
    ok(&ann, &["group", "add", "Team", "@ben"]);
    let joined = |user: i64, status: &'static str| {
        move |u: &Value| u["chat_member"]["new_chat_member"]["user"]["id"].as_i64() == Some(user) && u["chat_member"]["new_chat_member"]["status"] == status
    };
    let (u, _) = wait_update(&gw, &mut offset, None, "ben joined", joined(ben_id, "member"));
    assert_eq!(u["chat_member"]["from"]["id"].as_i64(), Some(ann_id), "{u}");

    // Ben's message and his edit of it; Ann cannot edit it.
    let sent = &ok(&ben, &["group", "send", "Team", "hi", "al"])[0];
    let mid = sent["message_id"].as_u64().expect("id").to_string();
    wait_update(&gw, &mut offset, None, "ben's message", |u| u["message"]["text"] == "hi al");
    let edited = &ok(&ben, &["group", "edit", "Team", &mid, "hi", "all"])[0];
    assert_eq!(edited["message_id"].as_u64().map(|m| m.to_string()), Some(mid.clone()));
    let (u, _) = wait_update(&gw, &mut offset, None, "edited_message", |u| u.get("edited_message").is_some());
    let e = &u["edited_message"];
    assert_eq!((e["text"].as_str(), e["chat"]["id"].as_i64(), e["from"]["id"].as_i64()), (Some("hi all"), Some(chat_id), Some(ben_id)));
    assert_eq!(e["message_id"].as_u64().map(|m| m.to_string()), Some(mid.clone()));
    assert!(e["edit_date"].as_i64().is_some(), "{e}");
    // Ann's client shows Ben's edit; she cannot edit his message.
    let heard = ok(&ann, &["listen", "--timeout", "4"]);
    let shown = heard.iter().find(|v| v["event"] == "group_edited").unwrap_or_else(|| panic!("{heard:?}"));
    assert_eq!((shown["text"].as_str(), shown["from"]["username"].as_str()), (Some("hi all"), Some("ben")), "{shown}");
    assert_eq!(shown["message_id"].as_u64().map(|m| m.to_string()), Some(mid.clone()));
    fails(&ann, &["group", "edit", "Team", &mid, "hijacked"], "was not sent by you");

    // Ann promotes Ben (invite, restrict): from = Ann. Cat asks by link, Ben approves:
    // Cat's join names Ben. Ben bans Cat: from = Ben.
    ok(&ann, &["group", "promote", "Team", "@ben", "invite,restrict"]);
    let (u, _) = wait_update(&gw, &mut offset, None, "ben promoted", joined(ben_id, "administrator"));
    assert_eq!(u["chat_member"]["from"]["id"].as_i64(), Some(ann_id), "{u}");
    let ask = ok(&ann, &["group", "link", "Team", "--request"])[0]["invite_link"].as_str().expect("link").to_string();
    assert_eq!(ok(&cat, &["join", &ask])[0]["status"], "requested");
    ok(&ben, &["listen", "--timeout", "3"]);
    ok(&ben, &["group", "approve", "Team", "@cat"]);
    ok(&cat, &["listen", "--timeout", "5"]); // the approval: Cat's device joins by its own commit
    let (u, _) = wait_update(&gw, &mut offset, None, "cat joined", joined(cat_id, "member"));
    let c = &u["chat_member"];
    assert_eq!((c["from"]["id"].as_i64(), c["via_join_request"].as_bool()), (Some(ben_id), Some(true)), "the approving administrator: {c}");
    ok(&ben, &["group", "ban", "Team", "@cat"]);
    let (u, _) = wait_update(&gw, &mut offset, None, "cat banned", joined(cat_id, "kicked"));
    assert_eq!(u["chat_member"]["from"]["id"].as_i64(), Some(ben_id), "{u}");

    // A channel: Ann's post and her edit of it, as edited_channel_post.
    ok(&ann, &["channel", "create", "News"]);
    ok(&ann, &["group", "add", "News", "@group_bot"]);
    let (u, _) = wait_update(&gw, &mut offset, None, "added to the channel", |u| u["my_chat_member"]["chat"]["type"] == "channel");
    assert_eq!(u["my_chat_member"]["from"]["id"].as_i64(), Some(ann_id), "{u}");
    let post = ok(&ann, &["channel", "post", "News", "release", "on", "friday"])[0]["message_id"].as_u64().expect("id").to_string();
    wait_update(&gw, &mut offset, None, "the post", |u| u["channel_post"]["text"] == "release on friday");
    ok(&ann, &["group", "edit", "News", &post, "release", "on", "monday"]);
    let (u, _) = wait_update(&gw, &mut offset, None, "edited_channel_post", |u| u.get("edited_channel_post").is_some());
    let p = &u["edited_channel_post"];
    assert_eq!((p["text"].as_str(), p["chat"]["type"].as_str()), (Some("release on monday"), Some("channel")));
    assert!(p.get("from").is_none() && p["edit_date"].as_i64().is_some(), "{p}");
}
