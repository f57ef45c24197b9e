//! End to end, through the real binaries: what a bot's interface asks of the person and how
//! `e2e-chat` answers it — reply keyboards (one-time, removed, request buttons), a reply the
//! bot forces, URL buttons, a callback answer's link, and deep links (`e2e-chat start`).

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bot_gateway::client::{ButtonRequest, Incoming, Profile, ReplyMarkup};
use serde_json::{json, Value};
use support::{bin_path, World};

fn ok(world: &World, method: &str, params: Value) -> Value {
    let (status, body) = world.gateway.call(method, params.clone());
    assert_eq!(status, 200, "{method} {params}: {body}");
    body["result"].clone()
}

/// `e2e-chat --profile DIR ARGS`: (exit status, the JSON lines it printed, stderr).
fn e2e_chat(profile: &Path, args: &[&str]) -> (i32, Vec<Value>, String) {
    let out = Command::new(bin_path("e2e-chat"))
        .arg("--profile")
        .arg(profile)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run e2e-chat");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let lines = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect();
    (out.status.code().expect("exited"), lines, String::from_utf8_lossy(&out.stderr).to_string())
}

/// The next message from the bot (bounded); other events are processed and dropped.
fn next_message(user: &Profile) -> bot_gateway::client::ReceivedMessage {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no message arrived");
        let mut found = None;
        user.receive_events_with(left, 1, |e| {
            if let Incoming::Message(m) = e {
                found.get_or_insert_with(|| m.clone());
            }
        })
        .expect("receive");
        if let Some(m) = found {
            return m;
        }
    }
}

/// The bot's next message updates after `offset` (bounded): (next offset, messages).
fn bot_messages(world: &World, offset: i64, n: usize) -> (i64, Vec<Value>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    let mut offset = offset;
    while got.len() < n {
        assert!(Instant::now() < deadline, "{n} messages did not reach the bot; got {got:?}");
        let (_, body) = world.gateway.call("getUpdates", json!({"offset": offset, "timeout": 1}));
        for u in body["result"].as_array().expect("updates") {
            offset = u["update_id"].as_i64().expect("id") + 1;
            if let Some(m) = u.get("message") {
                got.push(m.clone());
            }
        }
    }
    (offset, got)
}

#[test]
fn reply_keyboards_are_shown_used_once_and_removed() {
    let world = World::start("quiz_bot");
    let alice = world.user("alice");
    let dir = world.dir.path().join("user-alice");
    let bot = format!("@{}", world.bot_username());
    alice.send_text(&bot, "/start").expect("start");
    let (offset, first) = bot_messages(&world, 0, 1);
    let chat = first[0]["chat"]["id"].as_i64().expect("chat");

    // A one-time keyboard with a placeholder and a contact button.
    let keyboard = json!({"keyboard": [["Cats", {"text": "Dogs"}], [{"text": "Share my contact", "request_contact": true}]],
        "one_time_keyboard": true, "resize_keyboard": true, "input_field_placeholder": "Pick a pet"});
    let sent = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Cats or dogs?", "reply_markup": keyboard}));
    assert!(sent.get("reply_markup").is_none(), "a Message shows inline keyboards only: {sent}");
    let m = next_message(&alice);
    let Some(ReplyMarkup::Keyboard(k)) = &m.reply_markup else { panic!("a reply keyboard: {m:?}") };
    assert!(k.one_time && k.resize);
    assert_eq!(k.placeholder, "Pick a pet");
    let texts: Vec<Vec<(&str, ButtonRequest)>> = k.rows.iter().map(|r| r.iter().map(|b| (b.text.as_str(), b.request)).collect()).collect();
    assert_eq!(
        texts,
        vec![vec![("Cats", ButtonRequest::Text), ("Dogs", ButtonRequest::Text)], vec![("Share my contact", ButtonRequest::Contact)]]
    );
    drop(alice);

    // The person answers with button 2 from another process; the bot gets its text.
    let (code, out, err) = e2e_chat(&dir, &["reply-button", &bot, "2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!((out[0]["button"].as_str(), out[0]["sent"].as_str()), (Some("Dogs"), Some("text")));
    let (offset, got) = bot_messages(&world, offset, 1);
    assert_eq!(got[0]["text"], "Dogs");
    assert_eq!(got[0]["message_id"], out[0]["message_id"]);
    // One-time: it is gone.
    let (code, _, err) = e2e_chat(&dir, &["reply-button", &bot, "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("shows no reply keyboard"), "{err}");

    // A lasting keyboard stays after use; a number beyond it is refused; ReplyKeyboardRemove removes it.
    ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Again?", "reply_markup": {"keyboard": [[{"text": "Yes"}]]}}));
    let (code, out, err) = e2e_chat(&dir, &["listen", "--count", "1", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["reply_keyboard"], json!({"rows": [[{"text": "Yes", "request": "text"}]], "one_time": false, "placeholder": ""}));
    for _ in 0..2 {
        let (code, _, err) = e2e_chat(&dir, &["reply-button", &bot, "1"]);
        assert_eq!(code, 0, "{err}");
    }
    let (offset, got) = bot_messages(&world, offset, 2);
    assert_eq!((got[0]["text"].as_str(), got[1]["text"].as_str()), (Some("Yes"), Some("Yes")));
    let (code, _, err) = e2e_chat(&dir, &["reply-button", &bot, "2"]);
    assert_eq!(code, 1);
    assert!(err.contains("has buttons 1 to 1, not 2"), "{err}");
    let (code, _, err) = e2e_chat(&dir, &["reply-button", &bot, "zero"]);
    assert_eq!(code, 2, "a usage error: {err}");
    ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Bye", "reply_markup": {"remove_keyboard": true}}));
    let (code, out, err) = e2e_chat(&dir, &["listen", "--count", "1", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["remove_keyboard"], true);
    let (code, _, err) = e2e_chat(&dir, &["reply-button", &bot, "1"]);
    assert_eq!(code, 1);
    assert!(err.contains("shows no reply keyboard"), "{err}");

    // Request buttons send the person's contact card and a location they give.
    let keyboard = json!({"keyboard": [[{"text": "My card", "request_contact": true}, {"text": "Where I am", "request_location": true}]]});
    ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Who and where?", "reply_markup": keyboard}));
    let (code, _, err) = e2e_chat(&dir, &["listen", "--count", "1", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = e2e_chat(&dir, &["reply-button", &bot, "1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["sent"], "contact");
    let (code, _, err) = e2e_chat(&dir, &["reply-button", &bot, "2"]);
    assert_eq!(code, 1, "a location button needs the location");
    assert!(err.contains("sends your location"), "{err}");
    let (code, out, err) = e2e_chat(&dir, &["reply-button", &bot, "2", "--location", "52.52,13.405"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["sent"], "location");
    let (offset, got) = bot_messages(&world, offset, 2);
    let me = got[0]["from"]["id"].clone();
    assert_eq!((got[0]["contact"]["user_id"].clone(), got[0]["contact"]["phone_number"].as_str()), (me, Some("")), "{}", got[0]);
    assert_eq!((got[1]["location"]["latitude"].as_f64(), got[1]["location"]["longitude"].as_f64()), (Some(52.52), Some(13.405)));

    // ForceReply travels to the person.
    ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Your name?", "reply_markup": {"force_reply": true, "input_field_placeholder": "Name"}}));
    let (code, out, err) = e2e_chat(&dir, &["listen", "--count", "1", "--timeout", "30"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["force_reply"], json!({"placeholder": "Name"}));
    let _ = offset;
}

#[test]
fn url_buttons_callback_links_and_deep_links_reach_each_side() {
    let world = World::start("link_bot");
    let bob = world.user("bob");
    let dir = world.dir.path().join("user-bob");
    let bot = format!("@{}", world.bot_username());

    // A deep link: `start @bot PAYLOAD` and the link form both send /start PAYLOAD, a command.
    let (code, out, err) = e2e_chat(&dir, &["start", &bot, "ref-42"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out[0]["text"], "/start ref-42");
    let link = format!("https://t.me/{}?start=promo_7", world.bot_username());
    let (code, _, err) = e2e_chat(&dir, &["start", &link]);
    assert_eq!(code, 0, "{err}");
    let (offset, got) = bot_messages(&world, 0, 2);
    assert_eq!(got[0]["text"], "/start ref-42");
    assert_eq!(got[0]["entities"], json!([{"type": "bot_command", "offset": 0, "length": 6}]));
    assert_eq!(got[1]["text"], "/start promo_7");
    let (code, _, err) = e2e_chat(&dir, &["start", &bot, "a b"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("start payload"), "{err}");
    let (code, _, err) = e2e_chat(&dir, &["start", "https://example.org/x?start=1"]);
    assert_eq!(code, 2, "{err}");
    let chat = got[0]["chat"]["id"].as_i64().expect("chat");

    // A URL button beside a callback button: the bot's Message names both; the person sees the link.
    let keyboard = json!({"inline_keyboard": [[{"text": "Docs", "url": "https://example.org/docs"}, {"text": "Go", "callback_data": "go"}]]});
    let sent = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Read or go", "reply_markup": keyboard}));
    assert_eq!(sent["reply_markup"], keyboard);
    let (status, body) = world.gateway.call(
        "sendMessage",
        json!({"chat_id": chat, "text": "x", "reply_markup": {"inline_keyboard": [[{"text": "Bad", "url": "javascript:alert(1)"}]]}}),
    );
    assert_eq!(status, 400, "{body}");
    let m = next_message(&bob);
    assert_eq!((m.keyboard[0][0].url.as_str(), m.keyboard[0][0].callback_data.as_str()), ("https://example.org/docs", ""));
    assert!(bob.press(&bot, m.message_id, "").is_err(), "a link is no button to press");

    // A press answered with a link: the person's client gets it.
    bob.press(&bot, m.message_id, "go").expect("press");
    let deadline = Instant::now() + Duration::from_secs(30);
    let press_id = loop {
        assert!(Instant::now() < deadline, "the press did not reach the bot");
        let (_, body) = world.gateway.call("getUpdates", json!({"offset": offset, "timeout": 1}));
        if let Some(q) = body["result"].as_array().expect("updates").iter().find_map(|u| u.get("callback_query")) {
            break q["id"].as_str().expect("id").to_string();
        }
    };
    let (status, body) =
        world.gateway.call("answerCallbackQuery", json!({"callback_query_id": press_id, "url": "javascript:x"}));
    assert_eq!(status, 400, "{body}");
    let url = format!("https://t.me/{}?start=from_button", world.bot_username());
    ok(&world, "answerCallbackQuery", json!({"callback_query_id": press_id, "url": url}));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut answer = None;
    while answer.is_none() {
        assert!(Instant::now() < deadline, "no callback answer");
        bob.receive_events_with(Duration::from_secs(5), 1, |e| {
            if let Incoming::CallbackAnswer { url, .. } = e {
                answer = Some(url.clone());
            }
        })
        .expect("receive");
    }
    assert_eq!(answer.as_deref(), Some(url.as_str()));
}

/// The next update of `kind` after `offset` (bounded); advances `offset`.
fn next_update(world: &World, offset: &mut i64, kind: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no {kind} update");
        let (_, body) = world.gateway.call("getUpdates", json!({"offset": *offset, "timeout": 1}));
        for u in body["result"].as_array().expect("updates") {
            *offset = u["update_id"].as_i64().expect("id") + 1;
            if let Some(v) = u.get(kind) {
                return v.clone();
            }
        }
    }
}

#[test]
fn chat_mode_answers_keyboards_by_number_forced_replies_links_and_at_bot_queries() {
    use std::io::Write;
    use support::chat::{piped_chat, read_until};

    let world = World::start("pick_bot");
    let dir = world.user("carol").dir().to_path_buf();
    let (mut chat, mut stdin, out, err) = piped_chat(&dir, "@pick_bot");
    read_until(&err, "banner", |l| l.starts_with("chatting with bot @pick_bot"));
    writeln!(stdin, "/open https://t.me/pick_bot?start=hello-1").expect("type");
    read_until(&out, "own /start", |l| l.starts_with("[you] /start hello-1 (#"));
    let mut offset = 0;
    let first = next_update(&world, &mut offset, "message");
    assert_eq!(first["text"], "/start hello-1");
    let chat_id = first["chat"]["id"].as_i64().expect("chat");

    // A one-time reply keyboard, drawn under its message; a typed number uses its button.
    let keyboard = json!({"keyboard": [["Red", "Green"], [{"text": "Near me", "request_location": true}]], "one_time_keyboard": true});
    ok(&world, "sendMessage", json!({"chat_id": chat_id, "text": "Colour?", "reply_markup": keyboard}));
    read_until(&out, "the keyboard's title", |l| l.starts_with("  reply keyboard (type a number or /choose N, one-time)"));
    let rows = read_until(&out, "its second row", |l| l.starts_with("  (3 "));
    assert_eq!(rows[rows.len() - 2..], ["  (1 Red) (2 Green)".to_string(), "  (3 Near me ⌖)".to_string()]);
    writeln!(stdin, "3").expect("type");
    read_until(&err, "the location button needs one", |l| l.starts_with("/choose: ") && l.contains("sends your location"));
    writeln!(stdin, "2").expect("type");
    read_until(&out, "the button's text sent", |l| l.starts_with("[you] Green (#"));
    assert_eq!(next_update(&world, &mut offset, "message")["text"], "Green");
    // One-time: a number is text now.
    writeln!(stdin, "2").expect("type");
    read_until(&out, "a plain 2", |l| l.starts_with("[you] 2 (#"));
    assert_eq!(next_update(&world, &mut offset, "message")["text"], "2");
    writeln!(stdin, "/choose 1").expect("type");
    read_until(&err, "no keyboard any more", |l| l.starts_with("/choose: ") && l.contains("shows no reply keyboard"));

    // A lasting keyboard: /choose N, twice; ForceReply makes the next line a reply.
    ok(&world, "sendMessage", json!({"chat_id": chat_id, "text": "More?", "reply_markup": {"keyboard": [["More"]]}}));
    read_until(&out, "the lasting keyboard", |l| l == "  (1 More)");
    for _ in 0..2 {
        writeln!(stdin, "/choose 1").expect("type");
        read_until(&out, "More sent", |l| l.starts_with("[you] More (#"));
        assert_eq!(next_update(&world, &mut offset, "message")["text"], "More");
    }
    let asked = ok(&world, "sendMessage", json!({"chat_id": chat_id, "text": "Name?", "reply_markup": {"force_reply": true}}));
    read_until(&out, "the forced reply", |l| l.contains("the bot asks for an answer"));
    writeln!(stdin, "Carol").expect("type");
    read_until(&out, "own answer", |l| l.starts_with("[you] Carol (#"));
    let answer = next_update(&world, &mut offset, "message");
    assert_eq!((answer["text"].as_str(), answer["reply_to_message"]["message_id"].as_i64()), (Some("Carol"), asked["message_id"].as_i64()));

    // "@pick_bot query" is inline mode; "@nobody_here hi" is an ordinary message.
    writeln!(stdin, "@pick_bot red things").expect("type");
    read_until(&out, "the inline query", |l| l.starts_with("inline query sent to @pick_bot (session "));
    assert_eq!(next_update(&world, &mut offset, "inline_query")["query"], "red things");
    writeln!(stdin, "@nobody_here hi").expect("type");
    read_until(&out, "a line to nobody", |l| l.starts_with("[you] @nobody_here hi (#"));
    assert_eq!(next_update(&world, &mut offset, "message")["text"], "@nobody_here hi");

    writeln!(stdin, "/quit").expect("type");
    assert!(chat.wait_exit("on /quit").success());
}
