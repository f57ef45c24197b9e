//! End to end: the interactive private-dialog methods through the real binaries — keyboards,
//! edits, deletions, forwards, copies, chat actions, reactions, callbacks and inline answers —
//! and every rejection the Bot API side must give before anything is sent.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{wait_for, World};

/// A world where `user` wrote "hello" to the bot; returns the user's chat id and the update.
fn with_chat(world: &World, user: &bot_gateway::client::Profile) -> (u64, Value) {
    user.send_text(&format!("@{}", world.bot_username()), "hello").expect("send hello");
    let updates = world.gateway.poll_until(0, 1);
    (user.user_id(), updates[0]["message"].clone())
}

fn ok(world: &World, method: &str, params: Value) -> Value {
    let (status, body) = world.gateway.call(method, params.clone());
    assert_eq!(status, 200, "{method} {params}: {body}");
    assert_eq!(body["ok"], true);
    body["result"].clone()
}

fn refused(world: &World, method: &str, params: Value, status: u16, needle: &str) {
    let (got, body) = world.gateway.call(method, params.clone());
    assert_eq!(got, status, "{method} {params}: {body}");
    assert_eq!(body["ok"], false);
    assert_eq!(body["error_code"], status);
    let d = body["description"].as_str().unwrap_or("");
    assert!(d.contains(needle), "{method} {params}: description {d:?} lacks {needle:?}");
}

#[test]
fn keyboards_edits_deletions_forwards_copies_and_actions_are_served() {
    let world = World::start("menu_bot");
    let alice = world.user("alice");
    let (chat, hello) = with_chat(&world, &alice);
    let hello_id = hello["message_id"].as_i64().expect("id");

    let keyboard = json!({"inline_keyboard": [[{"text": "One", "callback_data": "one"}, {"text": "Two", "callback_data": "two"}]]});
    let menu = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "<b>Menu</b>", "parse_mode": "HTML", "reply_markup": keyboard}));
    let menu_id = menu["message_id"].as_i64().expect("message_id");
    assert_eq!(menu["reply_markup"], keyboard);
    assert_eq!(menu["entities"], json!([{"type": "bold", "offset": 0, "length": 4}]));

    // A reply to the user's message, legacy and new forms.
    let reply = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "re", "reply_parameters": {"message_id": hello_id}}));
    assert_eq!(reply["reply_to_message"]["message_id"], hello_id);
    assert_eq!(reply["reply_to_message"]["text"], "hello");
    refused(&world, "sendMessage", json!({"chat_id": chat, "text": "re", "reply_to_message_id": 999_999}), 400, "message to be replied not found");
    let dropped = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "re", "reply_to_message_id": 999_999, "allow_sending_without_reply": true}));
    assert!(dropped.get("reply_to_message").is_none());

    // Edits: text (with a new keyboard), then the keyboard alone; an edit changing nothing is 400.
    let new_kb = json!({"inline_keyboard": [[{"text": "Back", "callback_data": "back"}]]});
    let edited = ok(&world, "editMessageText", json!({"chat_id": chat, "message_id": menu_id, "text": "Page 2", "reply_markup": new_kb}));
    assert_eq!((edited["message_id"].as_i64(), edited["text"].as_str()), (Some(menu_id), Some("Page 2")));
    assert!(edited["edit_date"].as_i64().unwrap_or(0) > 0, "{edited}");
    assert_eq!(edited["reply_markup"], new_kb);
    refused(&world, "editMessageText", json!({"chat_id": chat, "message_id": menu_id, "text": "Page 2", "reply_markup": new_kb}), 400, "message is not modified");
    let bare = ok(&world, "editMessageReplyMarkup", json!({"chat_id": chat, "message_id": menu_id}));
    assert!(bare.get("reply_markup").is_none(), "{bare}");
    assert_eq!(bare["text"], "Page 2");

    // Only the bot's own messages in the history.
    refused(&world, "editMessageText", json!({"chat_id": chat, "message_id": hello_id, "text": "x"}), 400, "not sent by this bot");
    refused(&world, "editMessageText", json!({"chat_id": chat, "message_id": 424_242, "text": "x"}), 400, "message to edit not found");
    refused(&world, "editMessageText", json!({"inline_message_id": "abc", "text": "x"}), 400, "inline_message_id");

    // Forward and copy (from this chat to itself: the only chat there is).
    let fwd = ok(&world, "forwardMessage", json!({"chat_id": chat, "from_chat_id": chat, "message_id": hello_id}));
    assert_eq!(fwd["forward_origin"]["type"], "user");
    assert_eq!(fwd["forward_origin"]["sender_user"]["id"].as_u64(), Some(chat));
    assert_eq!(fwd["forward_origin"]["date"], hello["date"]);
    assert_eq!(fwd["text"], "hello");
    let copy = ok(&world, "copyMessage", json!({"chat_id": chat, "from_chat_id": chat, "message_id": hello_id}));
    let copy_id = copy["message_id"].as_i64().expect("MessageId");
    assert_eq!(copy.as_object().map(|o| o.len()), Some(1), "copyMessage answers a MessageId: {copy}");
    refused(&world, "forwardMessage", json!({"chat_id": chat, "from_chat_id": 777, "message_id": hello_id}), 400, "from_chat_id");
    refused(&world, "copyMessage", json!({"chat_id": chat, "from_chat_id": chat, "message_id": 424_242}), 400, "not found");

    // Chat actions take no place in the history.
    assert_eq!(ok(&world, "sendChatAction", json!({"chat_id": chat, "action": "typing"})), json!(true));
    refused(&world, "sendChatAction", json!({"chat_id": chat, "action": "dancing"}), 400, "not a chat action");
    refused(&world, "sendChatAction", json!({"chat_id": 777, "action": "typing"}), 400, "chat not found");

    // Deleting: then it is gone from the history.
    assert_eq!(ok(&world, "deleteMessage", json!({"chat_id": chat, "message_id": copy_id})), json!(true));
    refused(&world, "deleteMessage", json!({"chat_id": chat, "message_id": copy_id}), 400, "message to delete not found");
    refused(&world, "editMessageText", json!({"chat_id": chat, "message_id": copy_id, "text": "x"}), 400, "message to edit not found");

    // Reactions: one ordinary emoji; the spec's rejections.
    assert_eq!(ok(&world, "setMessageReaction", json!({"chat_id": chat, "message_id": hello_id, "reaction": [{"type": "emoji", "emoji": "👍"}]})), json!(true));
    assert_eq!(ok(&world, "setMessageReaction", json!({"chat_id": chat, "message_id": hello_id, "reaction": []})), json!(true));
    for (reaction, needle) in [
        (json!([{"type": "emoji", "emoji": "👍"}, {"type": "emoji", "emoji": "🔥"}]), "REACTIONS_TOO_MANY"),
        (json!([{"type": "custom_emoji", "custom_emoji_id": "1"}]), "custom emoji"),
        (json!([{"type": "paid"}]), "paid"),
    ] {
        refused(&world, "setMessageReaction", json!({"chat_id": chat, "message_id": hello_id, "reaction": reaction}), 400, needle);
    }
    // is_big=true is refused, as the SPEC says; false is the ordinary reaction.
    refused(&world, "setMessageReaction", json!({"chat_id": chat, "message_id": hello_id, "reaction": [], "is_big": true}), 400, "is_big=true is not supported");
    assert_eq!(ok(&world, "setMessageReaction", json!({"chat_id": chat, "message_id": hello_id, "reaction": [], "is_big": false})), json!(true));
    refused(&world, "setMessageReaction", json!({"chat_id": -5, "message_id": 1, "reaction": []}), 400, "private chats only");

    // Buttons the gateway cannot deliver are refused, never dropped.
    refused(&world, "sendMessage", json!({"chat_id": chat, "text": "x", "reply_markup": {"inline_keyboard": [[{"text": "Log in", "login_url": {"url": "https://example.org"}}]]}}), 400, "login_url buttons are not supported");
    refused(&world, "sendMessage", json!({"chat_id": chat, "text": "x", "reply_markup": {"keyboard": [[{"text": "Who", "request_chat": {"request_id": 1}}]]}}), 400, "request_chat buttons are not supported");
    refused(&world, "sendMessage", json!({"chat_id": chat, "text": "x", "reply_markup": {"inline_keyboard": [[{"text": "b", "callback_data": "x".repeat(65)}]]}}), 400, "1 to 64 bytes");

    // Unknown callbacks and inline sessions; methods not served yet are 400, not 404.
    refused(&world, "answerCallbackQuery", json!({"callback_query_id": "42_nope"}), 400, "query ID is invalid");
    refused(&world, "answerInlineQuery", json!({"inline_query_id": "77", "results": []}), 400, "query ID is invalid");
    refused(&world, "pinChatMessage", json!({"chat_id": chat, "message_id": hello_id}), 400, "not supported by this gateway yet");
    refused(&world, "sendInvoice", json!({"chat_id": chat}), 400, "payments and Telegram Stars are not supported by this gateway");
    refused(&world, "sendGame", json!({"chat_id": chat, "game_short_name": "g"}), 400, "games are not supported by this gateway");
    refused(&world, "sendCarrierPigeon", json!({}), 404, "not found");

    // The bot deletes the user's own message of their private chat (the Bot API's rule, which
    // menu bots use to tidy up): end to end from the bot's device, so alice's client removes
    // it from her view and from the texts she may edit.
    assert_eq!(ok(&world, "deleteMessage", json!({"chat_id": chat, "message_id": hello_id})), json!(true));
    let deleted = wait_for(&alice, "the deletion of alice's message", |e| match e {
        Incoming::Deleted { message_id, .. } if *message_id == hello_id as u64 => Some(*message_id),
        _ => None,
    });
    assert_eq!(deleted, hello_id as u64);
    let bot = format!("@{}", world.bot_username());
    let err = alice.edit_message(&bot, hello_id as u64, "changed").expect_err("no longer hers to edit");
    assert!(err.to_string().contains("no text you sent"), "{err}");
    refused(&world, "deleteMessage", json!({"chat_id": chat, "message_id": hello_id}), 400, "message to delete not found");

    // Everything the bot sent reached alice's device; let the outbox drain before the end.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while world.gateway.health()["bots"][0]["outbox_depth"] != 0 {
        assert!(std::time::Instant::now() < deadline, "outbox did not drain: {}", world.gateway.health());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Updates of `kind` queued beyond `offset`, polled until `n` are there (bounded).
fn updates_of(world: &World, offset: i64, kind: &str, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = world.gateway.call("getUpdates", json!({"offset": offset, "timeout": 1}));
        let got: Vec<Value> = body["result"].as_array().expect("array").iter().filter(|u| u.get(kind).is_some()).cloned().collect();
        if got.len() >= n {
            return got;
        }
        assert!(std::time::Instant::now() < deadline, "{n} {kind} updates did not arrive: {body}");
    }
}

use bot_gateway::client::{Button, Incoming, ReactionType};

#[test]
fn a_person_sees_buttons_edits_deletions_forwards_actions_reactions_and_answers() {
    let world = World::start("ui_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    let (chat, hello) = with_chat(&world, &alice);
    let hello_id = hello["message_id"].as_i64().expect("id");
    let after_hello = world.gateway.poll_until(0, 1)[0]["update_id"].as_i64().expect("id") + 1;

    let kb = json!({"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}, {"text": "No", "callback_data": "no"}]]});
    let menu = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Sure?", "reply_markup": kb, "reply_parameters": {"message_id": hello_id}}));
    let menu_id = menu["message_id"].as_u64().expect("id");
    let got = wait_for(&alice, "the menu", |e| match e {
        Incoming::Message(m) if m.message_id == menu_id => Some(m.clone()),
        _ => None,
    });
    assert_eq!(got.text, "Sure?");
    assert_eq!(got.reply_to_message_id, Some(hello_id as u64));
    assert_eq!(got.keyboard, vec![vec![Button { text: "Yes".into(), callback_data: "yes".into(), ..Default::default() }, Button { text: "No".into(), callback_data: "no".into(), ..Default::default() }]]);

    // The press becomes a callback_query with the message and the data.
    let pressed = alice.press(&bot, menu_id, "no").expect("press");
    let q = &updates_of(&world, after_hello, "callback_query", 1)[0]["callback_query"];
    assert_eq!(q["data"], "no");
    assert_eq!(q["from"]["id"].as_u64(), Some(chat));
    assert_eq!(q["message"]["message_id"].as_u64(), Some(menu_id));
    assert_eq!(q["message"]["text"], "Sure?");
    assert_eq!(q["message"]["reply_markup"], kb);
    assert_eq!(q["chat_instance"], chat.to_string());
    let qid = q["id"].as_str().expect("id").to_string();
    assert!(qid.ends_with(&pressed.press_id), "{qid}");
    assert_eq!(ok(&world, "answerCallbackQuery", json!({"callback_query_id": qid, "text": "Noted", "show_alert": true})), json!(true));
    assert_eq!(ok(&world, "answerCallbackQuery", json!({"callback_query_id": qid, "text": "again"})), json!(true), "a known callback closes twice");
    let answer = wait_for(&alice, "the callback answer", |e| match e {
        Incoming::CallbackAnswer { press_id, text, show_alert, .. } if *press_id == pressed.press_id => Some((text.clone(), *show_alert)),
        _ => None,
    });
    assert_eq!(answer, ("Noted".to_string(), true));

    // The edit shows in the user's client, with the new keyboard; then the deletion.
    ok(&world, "editMessageText", json!({"chat_id": chat, "message_id": menu_id, "text": "Thanks", "reply_markup": {"inline_keyboard": [[{"text": "Undo", "callback_data": "undo"}]]}}));
    let (text, keyboard, edit_date) = wait_for(&alice, "the edit", |e| match e {
        Incoming::Edited { message_id, text, keyboard, edit_date, .. } if *message_id == menu_id => Some((text.clone(), keyboard.clone(), *edit_date)),
        _ => None,
    });
    assert_eq!((text.as_str(), keyboard[0][0].callback_data.as_str()), ("Thanks", "undo"));
    assert!(edit_date > 0);
    // The edited keyboard is signed for the same message: pressing it works.
    alice.press(&bot, menu_id, "undo").expect("press the edited button");
    let q = &updates_of(&world, after_hello, "callback_query", 2)[1]["callback_query"];
    assert_eq!((q["data"].as_str(), q["message"]["text"].as_str()), (Some("undo"), Some("Thanks")));
    let peer = alice.lookup(&bot).expect("lookup");
    let signed = alice.remembered(peer.user_id, menu_id).expect("read").expect("remembered").keyboard.context.clone();
    ok(&world, "deleteMessage", json!({"chat_id": chat, "message_id": menu_id}));
    wait_for(&alice, "the deletion", |e| matches!(e, Incoming::Deleted { message_id, .. } if *message_id == menu_id).then_some(()));
    assert!(alice.press(&bot, menu_id, "undo").is_err(), "a deleted message has no buttons to press");
    // A client that replays the deleted message's signed context gets no update, and the
    // message does not come back.
    let mut replay = bot_gateway::wire::e2e::CallbackPress::new();
    replay.press_id = "replay1".into();
    replay.message_id = menu_id;
    replay.callback_data = "undo".into();
    replay.context = signed;
    let mut content = bot_gateway::wire::e2e::Content::new();
    content.set_press(replay);
    alice.send_content(&peer, &content).expect("replay");
    let marker = alice.send_text(&bot, "after the replay").expect("marker");
    let updates = world.gateway.poll_until(after_hello, 3);
    assert!(updates.iter().any(|u| u["message"]["message_id"].as_u64() == Some(marker.message_id)), "{updates:?}");
    assert_eq!(updates.iter().filter(|u| u.get("callback_query").is_some()).count(), 2, "no third press: {updates:?}");
    refused(&world, "editMessageText", json!({"chat_id": chat, "message_id": menu_id, "text": "back?"}), 400, "message to edit not found");

    // A forward carries its origin; a chat action shows; the bot's reaction shows.
    let fwd = ok(&world, "forwardMessage", json!({"chat_id": chat, "from_chat_id": chat, "message_id": hello_id}));
    let origin = wait_for(&alice, "the forward", |e| match e {
        Incoming::Message(m) if m.message_id as i64 == fwd["message_id"].as_i64().unwrap_or(0) => m.forward_origin.clone(),
        _ => None,
    });
    assert_eq!((origin.sender_user_id, origin.sender_username.as_str()), (chat, "alice"));
    ok(&world, "sendChatAction", json!({"chat_id": chat, "action": "typing"}));
    wait_for(&alice, "typing", |e| matches!(e, Incoming::ChatAction { action, .. } if action == "typing").then_some(()));
    ok(&world, "setMessageReaction", json!({"chat_id": chat, "message_id": hello_id, "reaction": [{"type": "emoji", "emoji": "🔥"}]}));
    let reactions = wait_for(&alice, "the bot's reaction", |e| match e {
        Incoming::Reaction { message_id, reactions, .. } if *message_id as i64 == hello_id => Some(reactions.clone()),
        _ => None,
    });
    assert_eq!(reactions, vec![ReactionType::Emoji("🔥".into())]);

    // A user's reaction is an update only when message_reaction is asked for explicitly.
    alice.react(&bot, hello_id as u64, "👍").expect("react");
    let marker = alice.send_text(&bot, "after the first reaction").expect("send");
    let updates = world.gateway.poll_until(after_hello, 4);
    assert!(updates.iter().all(|u| u.get("message_reaction").is_none()), "not in the default set: {updates:?}");
    assert!(updates.iter().any(|u| u["message"]["message_id"].as_u64() == Some(marker.message_id)));
    let last = updates.last().expect("some")["update_id"].as_i64().expect("id") + 1;
    ok(&world, "getUpdates", json!({"offset": last, "timeout": 0, "allowed_updates": ["message", "message_reaction"]}));
    alice.react(&bot, hello_id as u64, "").expect("remove the reaction");
    let r = &updates_of(&world, last, "message_reaction", 1)[0]["message_reaction"];
    assert_eq!(r["message_id"], hello_id);
    assert_eq!(r["user"]["id"].as_u64(), Some(chat));
    assert_eq!(r["old_reaction"], json!([{"type": "emoji", "emoji": "👍"}]));
    assert_eq!(r["new_reaction"], json!([]));
}

#[test]
fn a_forged_press_never_becomes_an_update() {
    use bot_gateway::wire::e2e::{CallbackPress, Content};
    let world = World::start("forge_bot");
    let mallory = world.user("mallory");
    let bot = format!("@{}", world.bot_username());
    let (chat, _) = with_chat(&world, &mallory);
    let after = world.gateway.poll_until(0, 1)[0]["update_id"].as_i64().expect("id") + 1;
    let menu = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Pick", "reply_markup": {"inline_keyboard": [[{"text": "A", "callback_data": "a"}]]}}));
    let menu_id = menu["message_id"].as_u64().expect("id");
    wait_for(&mallory, "the menu", |e| match e {
        Incoming::Message(m) if m.message_id == menu_id => Some(()),
        _ => None,
    });
    let peer = mallory.lookup(&bot).expect("lookup");
    // The signed context as it arrived, through an honest press of another button data, of
    // another message id, and with its bytes changed.
    let honest = mallory.press(&bot, menu_id, "a").expect("honest press");
    let signed = {
        let q = &updates_of(&world, after, "callback_query", 1)[0]["callback_query"];
        assert!(q["id"].as_str().unwrap_or("").ends_with(&honest.press_id));
        let menu = mallory.remembered(peer.user_id, menu_id).expect("read").expect("remembered");
        menu.keyboard.context.clone().into_option().expect("signed context")
    };
    // The bot's edit takes button "a" away: its old signed context no longer counts.
    ok(&world, "editMessageReplyMarkup", json!({"chat_id": chat, "message_id": menu_id, "reply_markup": {"inline_keyboard": [[{"text": "B", "callback_data": "b"}]]}}));
    let mut forged = Vec::new();
    let mut removed_button = CallbackPress::new();
    removed_button.press_id = "f4".into();
    removed_button.message_id = menu_id;
    removed_button.callback_data = "a".into();
    removed_button.context = protobuf::MessageField::some(signed.clone());
    forged.push(removed_button);
    let mut other_data = CallbackPress::new();
    other_data.press_id = "f1".into();
    other_data.message_id = menu_id;
    other_data.callback_data = "admin".into();
    other_data.context = protobuf::MessageField::some(signed.clone());
    forged.push(other_data.clone());
    let mut other_message = other_data.clone();
    other_message.press_id = "f2".into();
    other_message.callback_data = "a".into();
    other_message.message_id = menu_id + 1;
    forged.push(other_message);
    let mut altered = other_data.clone();
    altered.press_id = "f3".into();
    altered.callback_data = "a".into();
    let ctx = altered.context.as_mut().expect("context");
    let last = ctx.context.len() - 1;
    ctx.context[last] ^= 0x01;
    forged.push(altered);
    for press in forged {
        let mut content = Content::new();
        content.set_press(press);
        mallory.send_content(&peer, &content).expect("send the forged press");
    }
    let marker = mallory.send_text(&bot, "end of forgeries").expect("marker");
    let updates = world.gateway.poll_until(after, 2);
    let marker_at = updates.iter().position(|u| u["message"]["message_id"].as_u64() == Some(marker.message_id));
    assert!(marker_at.is_some(), "{updates:?}");
    let presses: Vec<&Value> = updates.iter().filter(|u| u.get("callback_query").is_some()).collect();
    assert_eq!(presses.len(), 1, "only the honest press became an update: {updates:?}");
    assert!(world.gateway.proc.stderr_text().contains("callback press refused"), "the refusals are logged");
}

#[test]
fn a_press_on_runtime_a_message_is_handled_by_runtime_b() {
    let world = World::start("twin_ui_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    // Runtime B: the same bot, its own state_dir, so its own device.
    let config_b = world.dir.path().join("gateway-b.json");
    support::write_config(&config_b, &support::gateway_config(&world.platform.url, &world.dir.path().join("state-b"), &world.bot));
    let b = support::Gateway::start(&config_b);
    // Alice's hello goes to both devices; A sends the menu.
    let (chat, _) = with_chat(&world, &alice);
    let b_updates = b.poll_until(0, 1);
    assert_eq!(b_updates[0]["message"]["text"], "hello", "both runtimes receive the user's messages");
    let after_b = b_updates[0]["update_id"].as_i64().expect("id") + 1;
    let menu = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "Menu of A", "reply_markup": {"inline_keyboard": [[{"text": "Go", "callback_data": "go"}]]}}));
    let menu_id = menu["message_id"].as_u64().expect("id");
    wait_for(&alice, "A's menu", |e| matches!(e, Incoming::Message(m) if m.message_id == menu_id).then_some(()));

    // The press reaches B, which never saw the message: it builds it from the signed context.
    let pressed = alice.press(&bot, menu_id, "go").expect("press");
    let (status, body) = b.call("getUpdates", json!({"offset": after_b, "timeout": 20}));
    assert_eq!(status, 200, "{body}");
    let q = body["result"].as_array().expect("array").iter().find_map(|u| u.get("callback_query")).expect("B got the press").clone();
    assert_eq!((q["data"].as_str(), q["message"]["text"].as_str()), (Some("go"), Some("Menu of A")));
    assert_eq!(q["message"]["message_id"].as_u64(), Some(menu_id));
    assert_eq!(q["message"]["from"]["is_bot"], true);
    // B answers and edits A's message: the context taught B the message.
    let (status, body) = b.call("answerCallbackQuery", json!({"callback_query_id": q["id"], "text": "B here"}));
    assert_eq!(status, 200, "{body}");
    let (status, body) = b.call("editMessageText", json!({"chat_id": chat, "message_id": menu_id, "text": "Edited by B"}));
    assert_eq!(status, 200, "{body}");
    let answer = wait_for(&alice, "B's answer", |e| match e {
        Incoming::CallbackAnswer { press_id, text, .. } if *press_id == pressed.press_id => Some(text.clone()),
        _ => None,
    });
    assert_eq!(answer, "B here");
    let edited = wait_for(&alice, "B's edit", |e| match e {
        Incoming::Edited { message_id, text, .. } if *message_id == menu_id => Some(text.clone()),
        _ => None,
    });
    assert_eq!(edited, "Edited by B");
}

#[test]
fn callbacks_and_inline_sessions_survive_a_restart_without_duplicates() {
    let mut world = World::start("inline_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    let (chat, _) = with_chat(&world, &alice);
    let after = world.gateway.poll_until(0, 1)[0]["update_id"].as_i64().expect("id") + 1;
    let menu = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "m", "reply_markup": {"inline_keyboard": [[{"text": "x", "callback_data": "x"}]]}}));
    let menu_id = menu["message_id"].as_u64().expect("id");
    wait_for(&alice, "the menu", |e| matches!(e, Incoming::Message(m) if m.message_id == menu_id).then_some(()));
    let pressed = alice.press(&bot, menu_id, "x").expect("press");
    let session_id = alice.inline_query(&bot, "cats").expect("inline query");
    let before: Vec<Value> = updates_of(&world, after, "inline_query", 1);
    let q = &before[0]["inline_query"];
    assert_eq!((q["query"].as_str(), q["offset"].as_str()), (Some("cats"), Some("")));
    assert_eq!(q["id"], session_id.to_string());

    world.restart_gateway();

    // The same updates, once each; nothing imported twice.
    let (_, body) = world.gateway.call("getUpdates", json!({"offset": after, "timeout": 0}));
    let kinds: Vec<String> = body["result"].as_array().expect("array").iter()
        .map(|u| u.as_object().expect("object").keys().find(|k| *k != "update_id").expect("kind").clone())
        .collect();
    assert_eq!(kinds, ["callback_query", "inline_query"], "{body}");
    let cq = body["result"][0]["callback_query"]["id"].clone();
    assert_eq!(ok(&world, "answerCallbackQuery", json!({"callback_query_id": cq, "text": "after restart"})), json!(true));
    wait_for(&alice, "the answer", |e| matches!(e, Incoming::CallbackAnswer { press_id, .. } if *press_id == pressed.press_id).then_some(()));

    // Answer, answer again (replaces), choose, then answering is refused.
    let article = |id: &str, text: &str| json!({"type": "article", "id": id, "title": id, "input_message_content": {"message_text": text, "parse_mode": "HTML"}});
    ok(&world, "answerInlineQuery", json!({"inline_query_id": session_id.to_string(), "results": [article("a", "first")]}));
    wait_for(&alice, "the first results", |e| matches!(e, Incoming::InlineResults { session_id: s, .. } if *s == session_id).then_some(()));
    ok(&world, "answerInlineQuery", json!({"inline_query_id": session_id.to_string(), "results": [article("b", "<b>bold</b> choice"), article("c", "other")], "cache_time": 0, "is_personal": true}));
    let results = wait_for(&alice, "the second results", |e| match e {
        Incoming::InlineResults { session_id: s, results, .. } if *s == session_id => Some(results.clone()),
        _ => None,
    });
    assert_eq!(results.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["b", "c"], "a later answer replaces the list");
    let sent = alice.choose_inline(&bot, session_id, "b").expect("choose");
    let again = alice.choose_inline(&bot, session_id, "b").expect("choose again");
    assert_eq!(again, sent, "choosing the same result again sends nothing more");
    let last = body["result"].as_array().expect("array").last().expect("one")["update_id"].as_i64().expect("id") + 1;
    let got = world.gateway.poll_until(last, 2);
    let message = got.iter().find_map(|u| u.get("message")).expect("the chosen text arrives as a message");
    assert_eq!(message["text"], "bold choice");
    assert_eq!(message["entities"], json!([{"type": "bold", "offset": 0, "length": 4}]));
    assert_eq!(message["via_bot"]["username"], world.bot_username());
    let chosen = got.iter().find_map(|u| u.get("chosen_inline_result")).expect("chosen_inline_result");
    assert_eq!((chosen["result_id"].as_str(), chosen["query"].as_str()), (Some("b"), Some("cats")));
    assert_eq!(got.len(), 2, "one message and one chosen_inline_result: {got:?}");
    refused(&world, "answerInlineQuery", json!({"inline_query_id": session_id.to_string(), "results": [article("z", "late")]}), 400, "already chosen");
    // The platform refused it: given up, and listed for the operator (never its content).
    let listed: Value = ureq::get(&format!("{}/outbox/given-up", world.gateway.ext_base)).call().expect("given-up").into_json().expect("json");
    let given_up = listed["bots"][0]["given_up"].as_array().expect("list").clone();
    assert_eq!(given_up.len(), 1, "{listed}");
    assert_eq!((given_up[0]["kind"].as_str(), given_up[0]["chat_id"].as_u64()), (Some("inline results"), Some(alice.user_id())));
    assert_eq!(given_up[0]["handed_to_platform"], true);
    assert!(given_up[0]["reason"].as_str().expect("reason").contains("already chosen"), "{listed}");
    assert!(!listed.to_string().contains("late"), "no content in the record: {listed}");
}

#[test]
fn forwards_and_copies_go_from_one_private_chat_to_another() {
    let world = World::start("relay_bot");
    let alice = world.user("alice");
    let bob = world.user("bob");
    let bot = format!("@{}", world.bot_username());
    let from_alice = alice.send_text(&bot, "<not html> from alice").expect("alice");
    bob.send_text(&bot, "hi from bob").expect("bob");
    world.gateway.poll_until(0, 2);
    let (a, b) = (alice.user_id(), bob.user_id());
    let fwd = ok(&world, "forwardMessage", json!({"chat_id": b, "from_chat_id": a, "message_id": from_alice.message_id}));
    assert_eq!((fwd["chat"]["id"].as_u64(), fwd["forward_origin"]["sender_user"]["id"].as_u64()), (Some(b), Some(a)));
    let copy = ok(&world, "copyMessage", json!({"chat_id": b, "from_chat_id": a, "message_id": from_alice.message_id,
        "reply_markup": {"inline_keyboard": [[{"text": "Thanks", "callback_data": "thanks"}]]}}));
    let copy_id = copy["message_id"].as_u64().expect("id");
    let forwarded = wait_for(&bob, "the forward", |e| match e {
        Incoming::Message(m) if m.forward_origin.is_some() => Some(m.clone()),
        _ => None,
    });
    assert_eq!(forwarded.text, "<not html> from alice");
    let origin = forwarded.forward_origin.expect("origin");
    assert_eq!((origin.sender_user_id, origin.sender_username.as_str(), origin.date), (a, "alice", from_alice.date));
    let copied = wait_for(&bob, "the copy", |e| match e {
        Incoming::Message(m) if m.message_id == copy_id => Some(m.clone()),
        _ => None,
    });
    assert_eq!((copied.text.as_str(), copied.forward_origin.is_none()), ("<not html> from alice", true));
    assert_eq!(copied.keyboard[0][0].callback_data, "thanks", "the copy carries the caller's keyboard");
    // Bob can press the copy's button: its context was signed for bob's chat.
    bob.press(&bot, copy_id, "thanks").expect("press");
    let q = world.gateway.poll_until(0, 3).into_iter().find_map(|u| u.get("callback_query").cloned()).expect("press update");
    assert_eq!((q["from"]["id"].as_u64(), q["message"]["message_id"].as_u64()), (Some(b), Some(copy_id)));
    refused(&world, "forwardMessage", json!({"chat_id": 424_242, "from_chat_id": a, "message_id": from_alice.message_id}), 400, "chat not found");
}

/// The batch methods run the single ones in order and skip what cannot be found;
/// getUserProfilePhotos answers an empty list for a known user.
#[test]
fn batches_forward_copy_and_delete_in_order_and_skip_the_missing() {
    let world = World::start("batch_bot");
    let alice = world.user("alice");
    let bob = world.user("bob");
    let bot = format!("@{}", world.bot_username());
    let one = alice.send_text(&bot, "one").expect("one");
    let two = alice.send_text(&bot, "two").expect("two");
    bob.send_text(&bot, "hi from bob").expect("bob");
    world.gateway.poll_until(0, 3);
    let (a, b) = (alice.user_id(), bob.user_id());

    // 999 does not exist: skipped; the others arrive in order.
    let ids = json!([one.message_id, two.message_id, 999]);
    let fwd = ok(&world, "forwardMessages", json!({"chat_id": b, "from_chat_id": a, "message_ids": ids}));
    let fwd = fwd.as_array().expect("MessageId list");
    assert_eq!(fwd.len(), 2, "{fwd:?}");
    assert!(fwd.iter().all(|m| m["message_id"].as_u64().is_some() && m.as_object().is_some_and(|o| o.len() == 1)), "{fwd:?}");
    let copies = ok(&world, "copyMessages", json!({"chat_id": b, "from_chat_id": a, "message_ids": [one.message_id, two.message_id], "remove_caption": true}));
    assert_eq!(copies.as_array().map(Vec::len), Some(2), "{copies}");
    let mut texts = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while texts.len() < 4 {
        assert!(std::time::Instant::now() < deadline, "bob saw only {texts:?}");
        bob.receive_events_with(Duration::from_secs(5), 4 - texts.len(), |e| {
            if let Incoming::Message(m) = e {
                texts.push((m.text.clone(), m.forward_origin.is_some()));
            }
        })
        .expect("receive");
    }
    assert_eq!(
        texts,
        vec![("one".to_string(), true), ("two".to_string(), true), ("one".to_string(), false), ("two".to_string(), false)]
    );

    // deleteMessages removes the bot's own forwards; a batch of only missing ids says why.
    let forwarded: Vec<u64> = fwd.iter().map(|m| m["message_id"].as_u64().expect("id")).collect();
    assert_eq!(ok(&world, "deleteMessages", json!({"chat_id": b, "message_ids": forwarded})), json!(true));
    refused(&world, "deleteMessages", json!({"chat_id": b, "message_ids": [777, 778]}), 400, "message to delete not found");
    refused(&world, "forwardMessages", json!({"chat_id": b, "from_chat_id": a, "message_ids": [2, 1]}), 400, "strictly increasing");

    assert_eq!(ok(&world, "getUserProfilePhotos", json!({"user_id": a})), json!({"total_count": 0, "photos": []}));
    refused(&world, "getUserProfilePhotos", json!({"user_id": 424_242}), 400, "user not found");
}

/// Inline results with buttons, a cached photo and a results button: the person sees them,
/// chooses the article and presses its button (a callback_query with inline_message_id, the
/// answer shown), chooses the photo (the bot gets it via itself and it downloads the same),
/// and a forged inline keyboard is refused.
#[test]
fn inline_results_carry_buttons_cached_files_and_a_start_button() {
    let world = World::start("gallery_bot");
    let alice = world.user("alice");
    let bot = format!("@{}", world.bot_username());
    let dir = tempfile::tempdir().expect("dir");
    let photo = dir.path().join("cat.png");
    std::fs::write(&photo, b"a cat, in png").expect("write");
    alice.send_file(&bot, &photo, None, "").expect("send a photo");
    let first = world.gateway.poll_until(0, 1);
    let photo_id = first[0]["message"]["photo"][0]["file_id"].as_str().expect("file_id").to_string();
    let mut offset = first[0]["update_id"].as_i64().expect("id") + 1;

    let session_id = alice.inline_query(&bot, "pics").expect("inline query");
    let q = updates_of(&world, offset, "inline_query", 1);
    offset = q[0]["update_id"].as_i64().expect("id") + 1;
    let results = json!([
        {"type": "article", "id": "art", "title": "Press me", "input_message_content": {"message_text": "Inline with a button"},
         "reply_markup": {"inline_keyboard": [[{"text": "Press", "callback_data": "inline-press"}]]}},
        {"type": "photo", "id": "pic", "photo_file_id": photo_id, "caption": "<b>cached</b> photo", "parse_mode": "HTML"},
    ]);
    let answer = json!({"inline_query_id": session_id.to_string(), "results": results, "cache_time": 0, "next_offset": "10",
        "button": {"text": "Open the bot", "start_parameter": "from-inline"}});
    assert_eq!(ok(&world, "answerInlineQuery", answer), json!(true), "next_offset is accepted and ignored");
    let (shown, button) = wait_for(&alice, "the results", |e| match e {
        Incoming::InlineResults { session_id: s, results, button, .. } if *s == session_id => Some((results.clone(), button.clone())),
        _ => None,
    });
    let button = button.expect("the results button");
    assert_eq!((button.text.as_str(), button.start_parameter.as_str()), ("Open the bot", "from-inline"));
    assert_eq!(shown.len(), 2);
    assert_eq!((shown[0].kind.as_str(), shown[0].keyboard[0][0].callback_data.as_str()), ("article", "inline-press"));
    assert_eq!((shown[1].kind.as_str(), shown[1].text.as_str()), ("photo", "cached photo"));
    assert_eq!(shown[1].media.as_ref().map(|m| m.kind), Some(bot_gateway::client::MediaKind::Photo));

    // The article: the message carries the buttons; a press is a callback_query of the inline
    // message, and its answer reaches the person.
    let sent = alice.choose_inline(&bot, session_id, "art").expect("choose the article");
    let chosen = updates_of(&world, offset, "chosen_inline_result", 1);
    let inline_message_id = format!("{session_id}_art");
    assert_eq!(chosen[0]["chosen_inline_result"]["inline_message_id"], inline_message_id.as_str());
    let pressed = alice.press(&bot, sent.message_id, "inline-press").expect("press the inline message's button");
    let q = updates_of(&world, offset, "callback_query", 1);
    let q = &q[0]["callback_query"];
    assert_eq!((q["inline_message_id"].as_str(), q["data"].as_str(), q.get("message")), (Some(inline_message_id.as_str()), Some("inline-press"), None));
    assert_eq!(q["from"]["id"].as_u64(), Some(alice.user_id()));
    offset = updates_of(&world, offset, "callback_query", 1)[0]["update_id"].as_i64().expect("id") + 1;
    assert_eq!(ok(&world, "answerCallbackQuery", json!({"callback_query_id": q["id"], "text": "Pressed!"})), json!(true));
    let text = wait_for(&alice, "the answer", |e| match e {
        Incoming::CallbackAnswer { press_id, text, .. } if *press_id == pressed.press_id => Some(text.clone()),
        _ => None,
    });
    assert_eq!(text, "Pressed!");

    // The cached photo, from a new session: the bot gets it as a photo via itself.
    let session_id = alice.inline_query(&bot, "again").expect("inline query");
    updates_of(&world, offset, "inline_query", 1);
    let results = json!([{"type": "photo", "id": "pic", "photo_file_id": photo_id, "caption": "cached photo"}]);
    ok(&world, "answerInlineQuery", json!({"inline_query_id": session_id.to_string(), "results": results}));
    wait_for(&alice, "the second results", |e| matches!(e, Incoming::InlineResults { session_id: s, .. } if *s == session_id).then_some(()));
    alice.choose_inline(&bot, session_id, "pic").expect("choose the photo");
    let got = updates_of(&world, offset, "message", 1);
    let m = &got.iter().rev().find(|u| u["message"].get("photo").is_some()).expect("the photo")["message"];
    assert_eq!((m["photo"][0]["file_id"].as_str(), m["caption"].as_str()), (Some(photo_id.as_str()), Some("cached photo")));
    assert_eq!(m["via_bot"]["username"].as_str(), Some(world.bot_username().as_str()));
    offset = got.iter().filter_map(|u| u["update_id"].as_i64()).max().expect("ids") + 1;

    // An unknown file_id is refused, naming the result; a web app button too.
    let session_id = alice.inline_query(&bot, "bad").expect("inline query");
    updates_of(&world, offset, "inline_query", 1);
    let unknown = json!([{"type": "document", "id": "d", "document_file_id": "nope", "title": "T"}]);
    refused(&world, "answerInlineQuery", json!({"inline_query_id": session_id.to_string(), "results": unknown}), 400, "results[0]: wrong file_id");
    let web = json!({"inline_query_id": session_id.to_string(), "results": [], "button": {"text": "App", "web_app": {"url": "https://a.test"}}});
    refused(&world, "answerInlineQuery", web, 400, "web apps are not supported");
}

/// The reference's text rules, end to end (issue 44, part 5): the Bot API's own example
/// `___italic underline_\r__` (the `\r` ignored), an optional entity field sent as `null`, and
/// blanks at the ends of a text and a caption trimmed with the entities moved along. The
/// Message answered and what the user's client shows agree.
#[test]
fn texts_follow_the_references_rules_end_to_end() {
    let world = World::start("rules_bot");
    let alice = world.user("alice");
    let (chat, _) = with_chat(&world, &alice);
    let spans = |m: &Value| {
        let mut s: Vec<(String, u64, u64)> = m["entities"]
            .as_array()
            .map(|es| es.iter().map(|e| (e["type"].as_str().unwrap_or("").to_string(), e["offset"].as_u64().unwrap_or(99), e["length"].as_u64().unwrap_or(99))).collect())
            .unwrap_or_default();
        s.sort();
        s
    };
    let shown = |message_id: u64| {
        let m = wait_for(&alice, "the formatted text", |e| match e {
            Incoming::Message(m) if m.message_id == message_id => Some(m.clone()),
            _ => None,
        });
        let mut s: Vec<(String, u64, u64)> = m.entities.iter().map(|e| (e.kind.clone(), e.offset as u64, e.length as u64)).collect();
        s.sort();
        (m.text, s)
    };

    let sent = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "___italic underline_\r__", "parse_mode": "MarkdownV2"}));
    let both = vec![("italic".to_string(), 0, 16), ("underline".to_string(), 0, 16)];
    assert_eq!((sent["text"].as_str(), spans(&sent)), (Some("italic underline"), both.clone()));
    assert_eq!(shown(sent["message_id"].as_u64().expect("id")), ("italic underline".to_string(), both));

    let sent = ok(&world, "sendMessage", json!({
        "chat_id": chat, "text": " \n  hello world \t\n",
        "entities": [{"type": "bold", "offset": 4, "length": 5, "url": null, "language": null}, {"type": "italic", "offset": 15, "length": 2}]
    }));
    let bold = vec![("bold".to_string(), 0, 5)];
    assert_eq!((sent["text"].as_str(), spans(&sent)), (Some("hello world"), bold.clone()), "trimmed, and the entity of blanks dropped: {sent}");
    assert_eq!(shown(sent["message_id"].as_u64().expect("id")), ("hello world".to_string(), bold));

    // A null optional parameter is an absent one.
    let sent = ok(&world, "sendMessage", json!({"chat_id": chat, "text": "plain", "parse_mode": null, "reply_markup": null}));
    assert_eq!(sent["text"], "plain");
}
