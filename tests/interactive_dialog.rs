//! End to end: the interactive private-dialog methods through the real binaries — keyboards,
//! edits, deletions, forwards, copies, chat actions, reactions, callbacks and inline answers —
//! and every rejection the Bot API side must give before anything is sent.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::World;

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
    refused(&world, "deleteMessage", json!({"chat_id": chat, "message_id": hello_id}), 400, "can't be deleted");
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
    refused(&world, "sendChatAction", json!({"chat_id": 777, "action": "typing"}), 400, "unknown private chat");

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
    refused(&world, "setMessageReaction", json!({"chat_id": chat, "message_id": hello_id, "reaction": [{"type": "emoji", "emoji": "👍"}], "is_big": true}), 400, "is_big");
    refused(&world, "setMessageReaction", json!({"chat_id": -5, "message_id": 1, "reaction": []}), 400, "private chats only");

    // Buttons the gateway cannot deliver are refused, never dropped.
    refused(&world, "sendMessage", json!({"chat_id": chat, "text": "x", "reply_markup": {"inline_keyboard": [[{"text": "Site", "url": "https://example.org"}]]}}), 400, "url buttons are not supported");
    refused(&world, "sendMessage", json!({"chat_id": chat, "text": "x", "reply_markup": {"keyboard": [[{"text": "Yes"}]]}}), 400, "reply keyboards");
    refused(&world, "sendMessage", json!({"chat_id": chat, "text": "x", "reply_markup": {"inline_keyboard": [[{"text": "b", "callback_data": "x".repeat(65)}]]}}), 400, "1 to 64 bytes");

    // Unknown callbacks and inline sessions; methods not served yet are 400, not 404.
    refused(&world, "answerCallbackQuery", json!({"callback_query_id": "42_nope"}), 400, "query ID is invalid");
    refused(&world, "answerInlineQuery", json!({"inline_query_id": "77", "results": []}), 400, "query ID is invalid");
    refused(&world, "sendPoll", json!({"chat_id": chat}), 400, "not supported by this gateway yet");
    refused(&world, "sendCarrierPigeon", json!({}), 404, "not found");

    // Everything the bot sent reached alice's device; let the outbox drain before the end.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while world.gateway.health()["bots"][0]["outbox_depth"] != 0 {
        assert!(std::time::Instant::now() < deadline, "outbox did not drain: {}", world.gateway.health());
        std::thread::sleep(Duration::from_millis(100));
    }
}
