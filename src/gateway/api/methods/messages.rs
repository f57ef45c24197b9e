//! Sending messages: `sendMessage` (later `editMessageText`, `deleteMessage`,
//! `forwardMessage`, `copyMessage`, `sendChatAction`). Text, formatting and reply rules are
//! checked here; the message goes through the durable outbox, which seals and sends it.

use std::time::Duration;

use serde_json::Value;

use super::store_error;
use crate::gateway::botapi::text::entities::{check_entity_count, entities_from_json, utf16_len, validate_entities};
use crate::gateway::botapi::text::{self, ParseMode};
use crate::gateway::botapi::{types, ApiError, Params};
use crate::gateway::outbox;
use crate::gateway::runtime::BotShared;
use crate::gateway::store::chats;
use crate::wire::e2e::{Content, Entity, Text};

/// Longest message text, in UTF-16 code units.
pub const MAX_TEXT_UTF16: usize = 4096;

/// How long `sendMessage` waits for the platform to acknowledge before answering 504. The
/// message stays in the durable outbox and is still sent after that.
pub const SEND_WAIT: Duration = Duration::from_secs(25);

#[derive(Debug, Clone, PartialEq)]
pub struct SendMessage {
    pub chat_id: i64,
    pub text: String,
    /// Already validated: within the text, in UTF-16 code units.
    pub entities: Vec<Entity>,
    pub reply_to_message_id: Option<i64>,
    pub allow_sending_without_reply: bool,
}

/// sendMessage parameters. `reply_markup` is checked (see `check_reply_markup`);
/// `link_preview_options`, `disable_notification`,
/// `protect_content` and `message_thread_id` are accepted and ignored for now.
pub fn send_message_request(params: &Params) -> Result<SendMessage, ApiError> {
    let chat_id = chat_id(params)?;
    check_reply_markup(params)?;
    let raw_text = params.optional_str("text")?.unwrap_or_default();
    // The Bot API refuses text that is empty after trimming; the text is sent untrimmed so
    // entity offsets keep their meaning.
    if raw_text.trim().is_empty() {
        return Err(ApiError::bad_request("message text is empty"));
    }
    let parse_mode = params.optional_str("parse_mode")?.filter(|m| !m.trim().is_empty());
    let entities_given = params.contains("entities");
    let (text, entities) = match parse_mode {
        Some(_) if entities_given => {
            return Err(ApiError::bad_request("parse_mode and entities can't be used together"));
        }
        Some(mode) => {
            let mode = ParseMode::from_name(&mode)
                .ok_or_else(|| ApiError::bad_request(format!("unsupported parse_mode {mode:?}")))?;
            text::parse(&raw_text, mode)?
        }
        None => {
            // The text is final: a long one is refused before any entity is read, and the
            // entities are counted against it before any is built.
            let units = checked_text_len(&raw_text)?;
            let entities = match params.get("entities") {
                None => Vec::new(),
                Some(Value::String(s)) => {
                    let v: Value = serde_json::from_str(s)
                        .map_err(|_| ApiError::bad_request("entities must be a JSON array of MessageEntity"))?;
                    entities_from_json(&v, units)?
                }
                Some(v) => entities_from_json(v, units)?,
            };
            (raw_text, entities)
        }
    };
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("message text is empty"));
    }
    // Markup is measured after parsing, as in the Bot API (raw text was measured above).
    let units = checked_text_len(&text)?;
    check_entity_count(entities.len(), units)?;
    validate_entities(&text, &entities)?;

    let mut reply_to_message_id = params.optional_i64("reply_to_message_id")?;
    let mut allow_sending_without_reply = params.flag("allow_sending_without_reply")?;
    if let Some(rp) = params.optional_nested("reply_parameters")? {
        reply_to_message_id = Some(rp.required_i64("message_id")?);
        allow_sending_without_reply |= rp.flag("allow_sending_without_reply")?;
        if let Some(other) = rp.get("chat_id") {
            if crate::gateway::botapi::params::as_i64(other) != Some(chat_id) {
                return Err(ApiError::bad_request("replies to messages in another chat are not supported"));
            }
        }
    }
    // The legacy `reply_to_message_id=0` means "not a reply".
    let reply_to_message_id = reply_to_message_id.filter(|&id| id != 0);
    Ok(SendMessage { chat_id, text, entities, reply_to_message_id, allow_sending_without_reply })
}

/// `reply_markup` must be a JSON object. Buttons are not delivered yet (inline keyboards come
/// with callback queries): a keyboard is refused with 400 rather than sent without its buttons,
/// which the bot would never notice. `remove_keyboard` and `force_reply` have nothing to remove
/// or force in an end-to-end dialog without keyboards, and are accepted.
fn check_reply_markup(params: &Params) -> Result<(), ApiError> {
    let Some(markup) = params.optional_object("reply_markup")? else {
        return Ok(());
    };
    for kind in ["inline_keyboard", "keyboard"] {
        let rows = match markup.get(kind) {
            None => continue,
            Some(Value::Array(rows)) => rows,
            Some(_) => return Err(ApiError::bad_request(format!("reply_markup.{kind} must be an array of button rows"))),
        };
        // An empty keyboard loses nothing; a button would be lost.
        if rows.iter().any(|row| row.as_array().is_none_or(|buttons| !buttons.is_empty())) {
            return Err(ApiError::bad_request(format!("reply_markup with {kind} buttons is not supported by this gateway yet")));
        }
    }
    Ok(())
}

/// The length of a message text in UTF-16 units; 400 "message is too long" above
/// [`MAX_TEXT_UTF16`].
fn checked_text_len(text: &str) -> Result<usize, ApiError> {
    let units = utf16_len(text);
    if units > MAX_TEXT_UTF16 {
        return Err(ApiError::bad_request("message is too long"));
    }
    Ok(units)
}

/// `chat_id`: an integer (or its decimal text). A `@username` is not resolvable by the gateway,
/// so it is answered like an unknown chat.
fn chat_id(params: &Params) -> Result<i64, ApiError> {
    match params.get("chat_id") {
        Some(Value::String(s)) if s.starts_with('@') => Err(ApiError::bad_request("chat not found")),
        _ => params.required_i64("chat_id"),
    }
}

/// `sendMessage` to a private chat that has produced an update; a reply must name a message
/// in the history unless `allow_sending_without_reply`. Waits for the platform's message id.
pub(super) fn send_message(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let req = send_message_request(params)?;
    if req.chat_id <= 0 {
        return Err(ApiError::bad_request("unknown private chat"));
    }
    let chat_id = req.chat_id;
    let chat = bot
        .store
        .read(|c| chats::private_chat(c, chat_id as u64))
        .map_err(store_error)?
        .ok_or_else(|| ApiError::bad_request("unknown private chat"))?;
    let mut reply_to = 0u64;
    if let Some(mid) = req.reply_to_message_id {
        let known = bot.store.read(|c| chats::lookup(c, chat_id, mid)).map_err(store_error)?;
        match known {
            Some(_) => reply_to = mid as u64,
            None if req.allow_sending_without_reply => {}
            None => return Err(ApiError::bad_request("message to be replied not found")),
        }
    }
    let mut content = Content::new();
    let mut text = Text::new();
    text.text = req.text;
    text.entities = req.entities;
    content.set_text(text);
    content.reply_to_message_id = reply_to;
    let sent = outbox::submit(bot, chat_id, content.clone(), SEND_WAIT)?;
    let entry = chats::HistoryEntry {
        chat_id,
        message_id: sent.message_id,
        from_bot: true,
        sender_id: bot.compat_user_id as i64,
        date: sent.date,
        content,
    };
    Ok(types::message_json(&bot.message_view(&chat, &entry)?))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, form, p};
    use super::*;
    use crate::gateway::botapi::text::entities::{entity, MAX_ENTITIES};

    #[test]
    fn send_message_basic_form() {
        let r = send_message_request(&form(&[
            ("chat_id", "42"),
            ("text", "hello"),
            ("entities", r#"[{"length": 5, "offset": 0, "type": "bold"}]"#),
            ("disable_notification", "true"),
            ("reply_parameters", r#"{"message_id": 5}"#),
            ("reply_markup", r#"{"inline_keyboard": []}"#),
        ]))
        .expect("PTB shape");
        assert_eq!(r.chat_id, 42);
        assert_eq!(r.text, "hello");
        assert_eq!(r.entities, vec![entity("bold", 0, 5)]);
        assert_eq!(r.reply_to_message_id, Some(5));
        assert!(!r.allow_sending_without_reply);
    }

    #[test]
    fn reply_markup_is_checked_and_buttons_are_refused_not_dropped() {
        let with = |m: &str| send_message_request(&form(&[("chat_id", "1"), ("text", "t"), ("reply_markup", m)]));
        assert!(bad(with("not json")).contains("reply_markup must be a JSON object"));
        let e = bad(with(r#"{"inline_keyboard": [[{"text": "b", "callback_data": "cb1"}]]}"#));
        assert!(e.contains("inline_keyboard buttons is not supported"), "{e}");
        assert!(bad(with(r#"{"keyboard": [[{"text": "b"}]]}"#)).contains("keyboard buttons is not supported"));
        assert!(bad(with(r#"{"inline_keyboard": 5}"#)).contains("must be an array"));
        with(r#"{"inline_keyboard": [[]]}"#).expect("no buttons, nothing lost");
        with(r#"{"remove_keyboard": true}"#).expect("nothing to remove");
    }

    #[test]
    fn send_message_text_rules() {
        assert_eq!(bad(send_message_request(&p(json!({"chat_id": 1})))), "Bad Request: message text is empty");
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": 1, "text": " \n "})))),
            "Bad Request: message text is empty"
        );
        let long = "a".repeat(4096);
        send_message_request(&p(json!({"chat_id": 1, "text": long}))).expect("4096 units fit");
        // 2049 emoji = 4098 UTF-16 units although only 2049 chars.
        let emoji = "😀".repeat(2049);
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": 1, "text": emoji})))),
            "Bad Request: message is too long"
        );
        // Form text that looks like JSON stays the raw text.
        let r = send_message_request(&form(&[("chat_id", "1"), ("text", "[1, 2]")])).expect("raw");
        assert_eq!(r.text, "[1, 2]");
        let r = send_message_request(&p(json!({"chat_id": 1, "text": 42}))).expect("scalar text");
        assert_eq!(r.text, "42");
    }

    #[test]
    fn send_message_chat_id_rules() {
        assert_eq!(bad(send_message_request(&p(json!({"text": "x"})))), "Bad Request: chat_id is required");
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": "@chan", "text": "x"})))),
            "Bad Request: chat not found"
        );
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": "abc", "text": "x"})))),
            "Bad Request: chat_id must be an integer"
        );
        assert_eq!(send_message_request(&p(json!({"chat_id": "-100", "text": "x"}))).expect("string id").chat_id, -100);
    }

    #[test]
    fn send_message_entities_and_parse_mode() {
        let e = bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "hi", "parse_mode": "HTML", "entities": [{"type": "bold", "offset": 0, "length": 2}]
        }))));
        assert_eq!(e, "Bad Request: parse_mode and entities can't be used together");
        let e = bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "hi", "entities": [{"type": "bold", "offset": 1, "length": 2}]
        }))));
        assert!(e.contains("can't parse entities"), "{e}");
        assert!(bad(send_message_request(&p(json!({"chat_id": 1, "text": "hi", "parse_mode": "Fancy"}))))
            .contains("unsupported parse_mode"));
        // An empty parse_mode is the same as none.
        let r = send_message_request(&p(json!({"chat_id": 1, "text": "hi", "parse_mode": ""}))).expect("empty mode");
        assert!(r.entities.is_empty());
    }

    #[test]
    fn send_message_bounds_entities_before_reading_them() {
        let entity = json!({"type": "bold", "offset": 0, "length": 1});
        // The probe's call: 100,000 entities, as a JSON array and as form text.
        let many = Value::Array(vec![entity.clone(); 100_000]);
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": "x".repeat(4096), "entities": many}))));
        assert_eq!(e, "Bad Request: too many entities: 100000 given, at most 1000 are accepted per message");
        let e = bad(send_message_request(&form(&[("chat_id", "1"), ("text", "hi"), ("entities", &many.to_string())])));
        assert!(e.starts_with("Bad Request: too many entities: 100000 given"), "{e}");
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": "hi", "entities": many.to_string()}))));
        assert!(e.starts_with("Bad Request: too many entities: 100000 given"), "{e}");
        // A raw text that is too long is refused before its entities are read.
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": "x".repeat(4097), "entities": [1]}))));
        assert_eq!(e, "Bad Request: message is too long");
        // Markup is bounded by the same rule, after parsing.
        let html = "<b>a</b>".repeat(MAX_ENTITIES + 1);
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": html, "parse_mode": "HTML"}))));
        assert!(e.starts_with("Bad Request: too many entities: 1001 given"), "{e}");
        let html = "<b>a</b>".repeat(MAX_ENTITIES);
        send_message_request(&p(json!({"chat_id": 1, "text": html, "parse_mode": "HTML"}))).expect("at the cap");
    }

    #[test]
    fn send_message_refuses_unsafe_raw_links() {
        let e = bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "hi there",
            "entities": [
                {"type": "bold", "offset": 0, "length": 2},
                {"type": "text_link", "offset": 3, "length": 5, "url": "javascript:alert(document.cookie)"}
            ]
        }))));
        assert!(e.starts_with("Bad Request: can't parse entities: entity 1 (text_link) has an unsupported URL"), "{e}");
        let r = send_message_request(&p(json!({
            "chat_id": 1, "text": "hi", "entities": [{"type": "text_link", "offset": 0, "length": 2, "url": "example.com"}]
        })))
        .expect("http link");
        assert_eq!(r.entities[0].url, "http://example.com/");
    }

    #[test]
    fn send_message_reply_forms() {
        let r = send_message_request(&p(
            json!({"chat_id": 1, "text": "x", "reply_to_message_id": 7, "allow_sending_without_reply": true}),
        ))
        .expect("legacy");
        assert_eq!((r.reply_to_message_id, r.allow_sending_without_reply), (Some(7), true));
        let r = send_message_request(&p(json!({
            "chat_id": 1, "text": "x", "reply_parameters": {"message_id": 8, "allow_sending_without_reply": true}
        })))
        .expect("reply_parameters");
        assert_eq!((r.reply_to_message_id, r.allow_sending_without_reply), (Some(8), true));
        let r = send_message_request(&p(json!({"chat_id": 1, "text": "x", "reply_to_message_id": 0}))).expect("zero");
        assert_eq!(r.reply_to_message_id, None);
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": 1, "text": "x", "reply_parameters": {}})))),
            "Bad Request: reply_parameters.message_id is required"
        );
        assert!(bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "x", "reply_parameters": {"message_id": 8, "chat_id": 2}
        }))))
        .contains("another chat"));
    }
}
