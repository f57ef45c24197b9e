//! The output contract and the argument rules of `e2e-chat`.

use super::dialog::*;
use super::files::*;
use super::groups::*;
use super::json::*;
use super::*;
use crate::client::message::{Button, ForwardOrigin};

#[test]
fn message_line_has_the_contract_fields_in_order() {
    let mut m = ReceivedMessage {
        chat_id: 5,
        sender: Sender { user_id: 5, username: "echo_bot".into(), display_name: "Echo \"Bot\"".into(), is_bot: true },
        date: 1_700_000_000,
        ..ReceivedMessage::sample("echo_bot", 12, "héllo\nworld")
    };
    let line = message_json(&m);
    assert_eq!(
        line,
        r#"{"chat_id":5,"message_id":12,"date":1700000000,"from":{"user_id":5,"username":"echo_bot","display_name":"Echo \"Bot\"","is_bot":true},"text":"héllo\nworld"}"#
    );
    m.entities.push(Entity { url: Some("https://a.test".into()), ..Entity::new("text_link", 0, 5) });
    m.reply_to_message_id = Some(11);
    let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
    assert_eq!(v["entities"][0]["type"], "text_link");
    assert_eq!(v["entities"][0]["url"], "https://a.test");
    assert!(v["entities"][0].get("language").is_none());
    assert_eq!(v["reply_to_message_id"], 11);
    assert_eq!(v["from"]["is_bot"], true);
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn message_line_shows_keyboard_and_forward_origin() {
    let m = ReceivedMessage {
        chat_id: 5,
        sender: Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true },
        message_id: 3,
        date: 1,
        text: "t".into(),
        entities: vec![],
        reply_to_message_id: None,
        keyboard: vec![
            vec![Button { text: "Yes".into(), callback_data: "y".into(), ..Default::default() }, Button { text: "No".into(), callback_data: "n".into(), ..Default::default() }],
            vec![Button { text: "Later".into(), callback_data: "l".into(), ..Default::default() }],
        ],
        forward_origin: Some(ForwardOrigin {
            sender_user_id: 9,
            sender_username: "carol".into(),
            sender_first_name: "Carol".into(),
            sender_is_bot: false,
            date: 2,
            channel: None,
        }),
        via_bot_user_id: None,
        reply_markup: None,
        media: None,
        shared: None,
    };
    let line = incoming_json(&Incoming::Message(m));
    assert!(line.contains(r#""keyboard":[[{"text":"Yes","callback_data":"y"},{"text":"No","callback_data":"n"}],[{"text":"Later","callback_data":"l"}]]"#), "{line}");
    let v: Value = serde_json::from_str(&line).expect("valid JSON");
    assert!(v.get("event").is_none(), "messages keep the shape scripts parse");
    assert_eq!(v["forward_origin"], json!({"sender_user_id": 9, "sender_username": "carol", "sender_first_name": "Carol", "sender_is_bot": false, "date": 2}));

    // A channel's post forwarded: the channel, not a user.
    let mut m = ReceivedMessage::sample("b", 4, "t");
    m.forward_origin = Some(ForwardOrigin { date: 3, channel: Some(("Cat news".into(), 8)), ..Default::default() });
    let v: Value = serde_json::from_str(&incoming_json(&Incoming::Message(m))).expect("valid JSON");
    assert_eq!(v["forward_origin"], json!({"channel_title": "Cat news", "channel_message_id": 8, "date": 3}));
}

#[test]
fn message_line_shows_link_buttons_and_the_reply_markup() {
    use crate::client::reply_keyboard::{ButtonRequest, ReplyButton};
    let mut m = ReceivedMessage::sample("b", 3, "t");
    m.keyboard = vec![vec![Button { text: "Docs".into(), url: "https://a.test/".into(), ..Default::default() }]];
    m.reply_markup = Some(ReplyMarkup::Keyboard(ReplyKeyboard {
        rows: vec![vec![
            ReplyButton { text: "Yes".into(), request: ButtonRequest::Text },
            ReplyButton { text: "Phone".into(), request: ButtonRequest::Contact },
        ]],
        one_time: true,
        resize: false,
        persistent: false,
        placeholder: "Pick".into(),
    }));
    let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
    assert_eq!(v["keyboard"], json!([[{"text": "Docs", "url": "https://a.test/"}]]));
    assert_eq!(
        v["reply_keyboard"],
        json!({"rows": [[{"text": "Yes", "request": "text"}, {"text": "Phone", "request": "contact"}]], "one_time": true, "placeholder": "Pick"})
    );
    m.reply_markup = Some(ReplyMarkup::Remove);
    let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
    assert_eq!((v["remove_keyboard"].as_bool(), v.get("reply_keyboard")), (Some(true), None));
    m.reply_markup = Some(ReplyMarkup::ForceReply { placeholder: "Name".into() });
    let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
    assert_eq!(v["force_reply"], json!({"placeholder": "Name"}));
    let answer = Incoming::CallbackAnswer { chat_id: 5, press_id: "p".into(), text: String::new(), show_alert: false, url: "https://t.me/b?start=x".into() };
    let v: Value = serde_json::from_str(&incoming_json(&answer)).expect("valid JSON");
    assert_eq!(v["url"], "https://t.me/b?start=x");
}

#[test]
fn other_events_carry_an_event_field() {
    let bot = Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true };
    let parse = |e: Incoming| -> Value { serde_json::from_str(&incoming_json(&e)).expect("valid JSON") };
    let v = parse(Incoming::Edited {
        chat_id: 5,
        message_id: 3,
        edit_date: 7,
        text: "new".into(),
        entities: vec![],
        keyboard: vec![],
        shared: None,
    });
    assert_eq!(v, json!({"event": "edited", "chat_id": 5, "message_id": 3, "edit_date": 7, "text": "new", "entities": [], "keyboard": []}));
    assert_eq!(parse(Incoming::Deleted { chat_id: 5, message_id: 3 }), json!({"event": "deleted", "chat_id": 5, "message_id": 3}));
    let v = parse(Incoming::Reaction {
        chat_id: 5,
        message_id: 3,
        from: bot.clone(),
        reactions: vec![ReactionType::Emoji("👍".into()), ReactionType::CustomEmoji("c1".into()), ReactionType::Paid],
    });
    assert_eq!(v["event"], "reaction");
    assert_eq!(v["from"]["username"], "b");
    assert_eq!(v["reactions"], json!([{"type": "emoji", "emoji": "👍"}, {"type": "custom_emoji", "custom_emoji_id": "c1"}, {"type": "paid"}]));
    let v = parse(Incoming::ChatAction { chat_id: 5, from: bot, action: "typing".into() });
    assert_eq!((v["event"].as_str(), v["action"].as_str(), v["from"]["is_bot"].as_bool()), (Some("chat_action"), Some("typing"), Some(true)));
    let line = incoming_json(&Incoming::CallbackAnswer { chat_id: 5, press_id: "ab".into(), text: "ok".into(), show_alert: false, url: String::new() });
    assert_eq!(line, r#"{"event":"callback_answer","chat_id":5,"press_id":"ab","text":"ok","show_alert":false}"#);
}

#[test]
fn a_file_message_line_has_media_and_caption_instead_of_text() {
    let m = ReceivedMessage {
        chat_id: 5,
        sender: Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true },
        message_id: 4,
        date: 9,
        text: String::new(),
        entities: vec![],
        reply_to_message_id: None,
        keyboard: vec![],
        forward_origin: None,
        via_bot_user_id: None,
        reply_markup: None,
        media: Some(MediaInfo {
            kind: MediaKind::Photo,
            file_name: "report.png".into(),
            mime_type: "image/png".into(),
            size: 12_345,
            width: 640,
            height: 480,
            duration: 0,
            caption: "Q3 \u{1b}".into(),
            caption_entities: vec![Entity::new("bold", 0, 2)],
            media_group_id: String::new(),
        }),
        shared: None,
    };
    let line = incoming_json(&Incoming::Message(m.clone()));
    assert!(
        line.starts_with(r#"{"chat_id":5,"message_id":4,"date":9,"from":{"user_id":5,"username":"b","display_name":"B","is_bot":true},"media":{"kind":"photo","file_name":"report.png","mime_type":"image/png","size":12345,"width":640,"height":480},"caption":"Q3 \u001b""#),
        "{line}"
    );
    let v: Value = serde_json::from_str(&line).expect("valid JSON");
    assert!(v.get("text").is_none(), "a file message has a caption, not a text");
    assert!(v["media"].get("duration").is_none(), "unknown dimensions are left out");
    assert_eq!(v["caption_entities"], json!([{"type": "bold", "offset": 0, "length": 2}]));
    assert!(!line.contains("key") && !line.contains("file_ref"), "{line}");
}

#[test]
fn send_file_and_download_parse_their_arguments() {
    let send_file = |a: &[&str]| {
        let v = strings(a);
        let parsed = parse_command("send-file", None, &v)?;
        send_file_args(&parsed)
    };
    let a = send_file(&["@bot", "r.png", "--as", "document", "--caption=hi there"]).expect("ok");
    assert_eq!(
        a,
        SendFileArgs { peer: "@bot".into(), paths: vec!["r.png".into()], kind: Some(MediaKind::Document), caption: "hi there".into() }
    );
    let a = send_file(&["--caption", "--help", "@bot", "v.ogg"]).expect("a caption may look like an option");
    assert_eq!((a.kind, a.caption.as_str()), (None, "--help"));
    let err = send_file(&["@bot", "x", "--as", "gif"]).expect_err("unknown kind");
    assert!(err.to_string().contains("photo, document, audio, video, voice, animation, video_note, sticker"), "{err}");
    assert!(send_file(&["@bot"]).expect_err("no path").to_string().contains("1 file, or 2 to 10 files"));
    let album = send_file(&["@bot", "a.png", "b.png", "--caption", "two"]).expect("an album");
    assert_eq!((album.paths.len(), album.caption.as_str()), (2, "two"));
    let eleven: Vec<String> = std::iter::once("@bot".to_string()).chain((0..11).map(|i| format!("{i}.png"))).collect();
    let eleven: Vec<&str> = eleven.iter().map(String::as_str).collect();
    assert!(send_file(&eleven).expect_err("too many").to_string().contains("2 to 10 files"));
    assert!(send_file(&["@bot", "a", "--bogus"]).expect_err("unknown").to_string().contains("--bogus"));
    assert_eq!(send_file(&["@bot", "--", "-x.png"]).expect("ok").paths, vec![PathBuf::from("-x.png")]);

    let download = |a: &[&str]| {
        let v = strings(a);
        let parsed = parse_command("download", None, &v)?;
        download_args(&parsed).map(|(peer, id, out)| (peer.to_string(), id, out))
    };
    assert_eq!(download(&["@bob", "7", "/tmp/o.png"]).expect("ok"), ("@bob".into(), 7, PathBuf::from("/tmp/o.png")));
    assert!(download(&["@bob", "0", "o"]).expect_err("ids start at 1").to_string().contains("not a message id"));
    assert!(download(&["@bob", "7"]).expect_err("no path").to_string().contains("OUT_PATH"));
    let run_in = |args: &[&str]| {
        let mut all = strings(&["--profile", "/nonexistent/e2e"]);
        all.extend(strings(args));
        format!("{:#}", run(&all).expect_err("refused"))
    };
    assert!(run_in(&["send-file", "@bot", "a", "--as", "x"]).contains("--as"));
    assert!(run_in(&["download", "@bot", "1", "out"]).contains("no registered profile"));
}

#[test]
fn send_takes_its_options_anywhere_before_the_double_dash() {
    let send = |a: &[&str]| {
        let v = strings(a);
        let parsed = parse_command("send", None, &v)?;
        send_args(&parsed).map(|(peer, reply_to, text)| (peer.to_string(), reply_to, text))
    };
    let ok = |peer: &str, reply_to: Option<u64>, text: &str| (peer.to_string(), reply_to, text.to_string());
    for a in [
        &["@bot", "hello", "--reply-to", "5"][..],
        &["@bot", "--reply-to", "5", "hello"],
        &["--reply-to=5", "@bot", "hello"],
        &["@bot", "--reply-to=4", "hello", "--reply-to", "5"],
    ] {
        assert_eq!(send(a).expect("ok"), ok("@bot", Some(5), "hello"), "{a:?}");
    }
    assert_eq!(send(&["@bot", "it", "is", "--reply-to", "2", "warm"]).expect("ok"), ok("@bot", Some(2), "it is warm"));
    assert_eq!(send(&["@bot", "plain"]).expect("ok"), ok("@bot", None, "plain"));
    // A text that starts with - (or is an option's name) goes after --.
    assert_eq!(send(&["@bot", "--", "-5", "degrees"]).expect("ok"), ok("@bot", None, "-5 degrees"));
    assert_eq!(send(&["@bot", "--reply-to", "3", "--", "--reply-to", "-"]).expect("ok"), ok("@bot", Some(3), "--reply-to -"));
    let err = send(&["@bot", "-5", "degrees"]).expect_err("an unknown option");
    assert!(err.downcast_ref::<UsageError>().is_some() && err.to_string().contains("unknown option -5 for send"), "{err}");
    let err = send(&["@bot", "--reply-to", "x", "hi"]).expect_err("not a number");
    assert!(err.to_string().contains("not a message id"), "{err}");
    assert!(send(&["@bot", "hi", "--reply-to", "0"]).is_err(), "ids start at 1");
    assert!(send(&["@bot", "hi", "--reply-to"]).expect_err("no value").to_string().contains("--reply-to needs a value"));
    assert!(send(&["@bot", "--reply-to", "3"]).expect_err("no text").to_string().contains("no text"));
    assert!(send(&["@bot", "--"]).expect_err("no text").to_string().contains("no text"));
}

/// `run`'s error for `args` after `--profile /nonexistent/e2e`: (a usage error?, message).
fn refused(args: &[&str]) -> (bool, String) {
    let mut all = strings(&["--profile", "/nonexistent/e2e"]);
    all.extend(strings(args));
    let err = run(&all).expect_err("refused");
    (err.downcast_ref::<UsageError>().is_some(), format!("{err:#}"))
}

#[test]
fn every_argument_problem_is_a_usage_error_and_the_operations_own_failures_are_not() {
    for args in [
        &["send"][..],
        &["send", "@bot"],
        &["send", "@bot", "hi", "--bogus"],
        &["register"],
        &["register", "a", "b"],
        &["register", "alice"], // no --server
        &["press", "@bot", "1"],
        &["press", "@bot", "1", "d", "--timeout", "x"],
        &["react", "@bot"],
        &["react", "@bot", "x"],
        &["inline"],
        &["inline", "@bot", "q", "--timeout"],
        &["choose", "@bot", "1"],
        &["send-file", "@bot"],
        &["send-file", "@bot", "f", "--as", "gif"],
        &["download", "@bot", "1"],
        &["listen", "extra"],
        &["listen", "--count", "many"],
        &["commands"],
        &["commands", "@a", "@b"],
        &["chat"],
        &["chat", "@a", "@b"],
        &["join"],
        &["group"],
        &["group", "frob"],
        &["group", "create"],
        &["group", "add", "T"],
        &["group", "send", "T"],
        &["group", "press", "T", "1"],
        &["group", "title", "T"],
        &["group", "members"],
        &["group", "list", "x"],
        &["group", "ban", "T", "@u", "--until", "soon"],
        &["group", "promote", "T", "@u"],
        &["group", "link", "T", "--limit"],
        &["group", "link", "T", "--request=yes"],
        &["group", "delete", "T", "x"],
        &["group", "export-link"],
        &["channel"],
        &["channel", "frob"],
        &["channel", "create"],
        &["channel", "post", "C"],
    ] {
        let (usage, message) = refused(args);
        assert!(usage, "{args:?}: {message}");
    }
    // Well-formed: the failure is the operation's own (no profile here), status 1.
    for args in [
        &["send", "@bot", "hi", "--reply-to", "3"][..],
        &["send", "@bot", "--", "--help"],
        &["listen", "--timeout", "0"],
        &["group", "members", "Team"],
        &["group", "link", "T", "--request", "--limit=3"],
        &["channel", "post", "C", "hello", "--", "-world"],
        &["join", "e2e://join/x"],
    ] {
        let (usage, message) = refused(args);
        assert!(!usage && message.contains("no registered profile"), "{args:?}: {message}");
    }
}

#[test]
fn global_options_may_come_after_the_command() {
    // A profile directory that cannot be made (its parent is a file): register fails
    // there, after it took the --server from wherever it came.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("file"), "").expect("write");
    let p = dir.path().join("file").join("p").display().to_string();
    for args in [
        vec!["--profile", &p, "register", "alice", "--server", "http://127.0.0.1:9"],
        vec!["register", "alice", "--server=http://127.0.0.1:9", "--profile", &p],
        vec!["register", "--profile", &p, "--server", "http://127.0.0.1:9", "alice"],
    ] {
        let err = run(&strings(&args)).expect_err("no profile directory");
        assert!(err.downcast_ref::<UsageError>().is_none() && !format!("{err:#}").contains("--server"), "{args:?}: {err:#}");
    }
    // --profile after the command is the profile opened; the last one counts.
    let err = run(&strings(&["send", "@bot", "hi", "--profile", "/nonexistent/second"])).expect_err("no profile");
    assert!(format!("{err:#}").contains("/nonexistent/second"), "{err:#}");
    let err = run(&strings(&["--profile", "/nonexistent/first", "listen", "--profile=/nonexistent/second"])).expect_err("no profile");
    assert!(format!("{err:#}").contains("/nonexistent/second") && !format!("{err:#}").contains("/nonexistent/first"), "{err:#}");
    // Between `group` and its subcommand, too.
    let err = run(&strings(&["group", "--profile", "/nonexistent/g", "members", "Team"])).expect_err("no profile");
    assert!(format!("{err:#}").contains("/nonexistent/g"), "{err:#}");
    let err = run(&strings(&["send", "@bot", "hi", "--profile"])).expect_err("no value");
    assert!(err.downcast_ref::<UsageError>().is_some() && err.to_string().contains("--profile needs a value"), "{err}");
}

#[test]
fn group_subcommands_parse_their_arguments_before_opening_the_profile() {
    let parse = |a: &[&str]| {
        let v = strings(a);
        let (sub, rest) = v.split_first().expect("a subcommand");
        parse_command("group", Some(sub), rest)
            .map_err(anyhow::Error::from)
            .and_then(|parsed| group_args(sub, &parsed).map(|c| format!("{c:?}")))
            .map_err(|e| format!("{e:#}"))
    };
    let ok = |c: GroupCommand| Ok::<String, String>(format!("{c:?}"));
    assert_eq!(parse(&["create", "Team", "Rocket"]), ok(GroupCommand::Create { title: "Team Rocket".into() }));
    assert_eq!(parse(&["add", "abcdef01", "@bob"]), ok(GroupCommand::Add { group: "abcdef01", user: "@bob" }));
    assert_eq!(parse(&["remove", "Team", "@bob"]), ok(GroupCommand::Remove { group: "Team", user: "@bob" }));
    assert_eq!(
        parse(&["send", "Team", "--reply-to", "3", "hi", "--reply-to", "4"]),
        ok(GroupCommand::Send { group: "Team", reply_to: Some(4), text: "hi".into() })
    );
    assert_eq!(
        parse(&["send", "Team", "hi", "--", "--reply-to", "4"]),
        ok(GroupCommand::Send { group: "Team", reply_to: None, text: "hi --reply-to 4".into() })
    );
    assert_eq!(
        parse(&["press", "Team", "3", "--timeout=2", "--", "-data"]),
        ok(GroupCommand::Press { group: "Team", message_id: 3, data: "-data", timeout: Duration::from_secs(2) })
    );
    assert_eq!(
        parse(&["edit", "Team", "3", "hi", "--", "-all"]),
        ok(GroupCommand::Edit { group: "Team", message_id: 3, text: "hi -all".into() })
    );
    assert!(parse(&["edit", "Team", "3"]).expect_err("no text").contains("group edit: no text"));
    assert!(parse(&["edit", "Team"]).expect_err("no id").contains("group edit: expected GROUP MESSAGE_ID TEXT"));
    assert!(parse(&["edit", "Team", "x", "hi"]).expect_err("bad id").contains("not a message id"));
    assert_eq!(parse(&["members", "Team"]), ok(GroupCommand::Members { group: "Team" }));
    assert_eq!(parse(&["leave", "Team"]), ok(GroupCommand::Leave { group: "Team" }));
    assert_eq!(parse(&["list"]), ok(GroupCommand::List));
    assert!(parse(&["create"]).expect_err("no title").contains("TITLE missing"));
    assert!(parse(&["add", "Team"]).expect_err("no user").contains("expected GROUP @USER_OR_BOT"));
    assert!(parse(&["send", "Team"]).expect_err("no text").contains("group send: no text"));
    assert!(parse(&["send", "Team", "--reply-to", "x", "hi"]).expect_err("bad id").contains("not a message id"));
    assert!(parse(&["list", "x"]).is_err());
    assert!(parse(&["send", "Team", "hi", "--timeout", "3"]).expect_err("press's").contains("unknown option --timeout for group send"));
    let (usage, err) = refused(&["group", "frob", "--bogus"]);
    assert!(usage, "an unknown group command is a usage error");
    assert!(err.contains("unknown group command \"frob\"") && err.contains(GROUP_SUBCOMMANDS), "{err}");
    assert!(refused(&["group"]).0);
    let mut all = strings(&["--profile", "/nonexistent/e2e", "group", "members", "Team"]);
    assert!(format!("{:#}", run(&all).expect_err("no profile")).contains("no registered profile"));
    all.push("extra".into());
    assert!(format!("{:#}", run(&all).expect_err("refused")).contains("expected GROUP"));
}

#[test]
fn group_events_carry_the_group_and_an_event_field() {
    use crate::client::message::{GroupId, GroupRef};
    let group = GroupRef { id: GroupId([0xab; 32]), title: "Team \u{1b}[2J".into(), channel: false };
    let alice = Sender { user_id: 7, username: "alice".into(), display_name: "Alice".into(), is_bot: false };
    let parse = |e: Incoming| -> Value { serde_json::from_str(&incoming_json(&e)).expect("valid JSON") };
    let message = ReceivedMessage {
        chat_id: 0,
        sender: alice.clone(),
        message_id: 3,
        date: 9,
        text: "hi".into(),
        entities: vec![],
        reply_to_message_id: Some(2),
        keyboard: vec![],
        forward_origin: None,
        via_bot_user_id: None,
        reply_markup: None,
        media: None,
        shared: None,
    };
    let line = incoming_json(&Incoming::GroupMessage { group: group.clone(), message: message.clone() });
    assert!(line.starts_with(&format!(r#"{{"event":"group_message","group":{{"id":"{}","title":"Team \u001b[2J"}},"message_id":3"#, "ab".repeat(32))), "{line}");
    let v: Value = serde_json::from_str(&line).expect("valid JSON");
    assert!(v.get("chat_id").is_none(), "a group is no dialog");
    assert_eq!((v["from"]["username"].as_str(), v["text"].as_str(), v["reply_to_message_id"].as_u64()), (Some("alice"), Some("hi"), Some(2)));
    let v = parse(Incoming::GroupMembership {
        group: group.clone(),
        user: alice.clone(),
        old: GroupRole::MEMBER,
        new: GroupRole::BANNED,
        actor: Sender { user_id: 1, username: "owner".into(), display_name: "O".into(), is_bot: false },
        invite_link: String::new(),
    });
    assert_eq!((v["event"].as_str(), v["old_role"].as_str(), v["new_role"].as_str()), (Some("group_membership"), Some("member"), Some("banned")));
    assert_eq!((v["user"]["user_id"].as_u64(), v["actor"]["username"].as_str()), (Some(7), Some("owner")));
    assert!(v.get("invite_link").is_none(), "only for joins by link");
    let v = parse(Incoming::JoinRequest { group: group.clone(), user: alice.clone(), invite_link: "e2e://join/x".into() });
    assert_eq!((v["event"].as_str(), v["invite_link"].as_str()), (Some("join_request"), Some("e2e://join/x")));
    let v = parse(Incoming::GroupDeleted { group: group.clone(), message_id: 4, actor: alice.clone() });
    assert_eq!((v["event"].as_str(), v["message_id"].as_u64()), (Some("group_message_deleted"), Some(4)));
    let post = Incoming::GroupMessage { group: GroupRef { channel: true, ..group.clone() }, message };
    assert_eq!(parse(post)["event"], "channel_post");
    let v = parse(Incoming::GroupCommit { group: group.clone(), added: vec![(7, 1)], removed: vec![], removed_me: false, epoch: 4 });
    assert_eq!(v["added"], json!([{"user_id": 7, "device_id": 1}]));
    assert_eq!((v["epoch"].as_u64(), v["removed_me"].as_bool()), (Some(4), Some(false)));
    let v = parse(Incoming::GroupChatAction { group: group.clone(), from: alice.clone(), action: "typing".into() });
    assert_eq!((v["event"].as_str(), v["action"].as_str(), v["from"]["user_id"].as_u64()), (Some("chat_action"), Some("typing"), Some(7)));
    assert_eq!(v["group"]["id"], "ab".repeat(32));
    assert!(v.get("chat_id").is_none(), "scoped to the group, not a dialog");
    assert_eq!(parse(Incoming::GroupJoined { group })["event"], "group_joined");
}

#[test]
fn press_and_react_check_their_arguments_before_opening_the_profile() {
    let run_in = |args: &[&str]| {
        let mut all = strings(&["--profile", "/nonexistent/e2e"]);
        all.extend(strings(args));
        format!("{:#}", run(&all).expect_err("refused"))
    };
    assert!(run_in(&["press", "@bot", "3"]).contains("expected @BOT MESSAGE_ID CALLBACK_DATA"));
    assert!(run_in(&["press", "@bot", "x", "data"]).contains("not a message id"));
    assert!(run_in(&["press", "@bot", "3", "d", "--timeout", "-1"]).contains("zero or more seconds"));
    assert!(run_in(&["react", "@bot"]).contains("expected @PEER MESSAGE_ID [EMOJI]"));
    assert!(run_in(&["react", "@bot", "1", "a", "b"]).contains("expected @PEER MESSAGE_ID [EMOJI]"));
    assert!(run_in(&["react", "@bot", "--", "-3"]).contains("not a message id"));
    assert!(run_in(&["react", "@bot", "-3"]).contains("unknown option -3 for react"));
    assert!(run_in(&["react", "@bot", "3", "👍"]).contains("no registered profile"));
}

#[test]
fn commands_lines_start_with_the_bot_then_one_per_command() {
    let menu = BotMenu {
        bot: "echo_bot".into(),
        commands: vec![super::super::bot_profile::BotCommand { command: "start".into(), description: "Go \"now\"".into() }],
        description: "An echo".into(),
        short_description: String::new(),
    };
    assert_eq!(
        menu_lines(&menu),
        vec![
            r#"{"bot":"echo_bot","description":"An echo","short_description":""}"#.to_string(),
            r#"{"command":"start","description":"Go \"now\""}"#.to_string(),
        ]
    );
    assert!(run(&["commands".to_string()]).is_err(), "@BOT missing");
}

#[test]
fn options_accept_both_spellings_and_refuse_unknown_ones() {
    let args = strings(&["--server=http://127.0.0.1:1", "--profile", "/tmp/p", "listen"]);
    let (top, rest) = PROGRAM.parse("e2e-chat", &args, &GLOBAL_OPTIONS, Until::FirstWord).expect("ok");
    assert_eq!((top.value("--server"), top.value("--profile"), rest), (Some("http://127.0.0.1:1"), Some("/tmp/p"), &args[3..]));
    assert!(run(&strings(&["--profile"])).expect_err("no value").to_string().contains("--profile needs a value"));
    for args in [&["--bogus"][..], &["frobnicate"], &["--", "listen"], &["--profile", "/tmp/p"]] {
        let err = run(&strings(args)).expect_err("refused");
        assert!(err.downcast_ref::<UsageError>().is_some(), "{args:?}: {err}");
    }
    let err = run(&["--profile".into(), "/nonexistent/e2e".into(), "send".into(), "@x".into()]).expect_err("no text");
    assert!(err.to_string().contains("no text"));
}

#[test]
fn register_needs_a_server_and_open_names_missing_profile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("p").display().to_string();
    let err = run(&["--profile".into(), p.clone(), "register".into(), "alice".into()]).expect_err("no server");
    assert!(err.to_string().contains("--server"), "{err}");
    let err = run(&["--profile".into(), p, "listen".into(), "--timeout".into(), "0".into()]).expect_err("no profile");
    assert!(format!("{err:#}").contains("no registered profile"), "{err:#}");
}

#[test]
fn listen_fields_follow_the_bot_api_names() {
    use crate::client::places::{ContactCard, DiceInfo, LocationInfo, Shared, VenueInfo};
    use super::json::shared_field;
    let (name, v) = shared_field(&Shared::Location(LocationInfo { live_period: 60, ..LocationInfo::point(1.5, 2.0) }));
    assert_eq!((name, v.as_str()), ("location", r#"{"latitude":1.5,"longitude":2.0,"live_period":60}"#));
    let (name, v) = shared_field(&Shared::Venue(VenueInfo {
        location: LocationInfo::point(1.0, 2.0),
        title: "Cafe".into(),
        address: "Main St".into(),
        ..Default::default()
    }));
    assert_eq!(name, "venue");
    let v: Value = serde_json::from_str(&v).expect("json");
    assert_eq!(v, json!({"location": {"latitude": 1.0, "longitude": 2.0}, "title": "Cafe", "address": "Main St"}));
    let (name, v) = shared_field(&Shared::Contact(ContactCard { first_name: "Ann".into(), user_id: 3, ..Default::default() }));
    assert_eq!((name, v.as_str()), ("contact", r#"{"phone_number":"","first_name":"Ann","user_id":3}"#));
    let (name, v) = shared_field(&Shared::Dice(DiceInfo { emoji: "🎲".into(), value: 4 }));
    assert_eq!((name, v.as_str()), ("dice", r#"{"emoji":"🎲","value":4}"#));
}
