//! Bot API JSON objects built from plain domain views (User, Chat, Message, Update,
//! MessageEntity). The entity rules (reading, counting and checking entities, UTF-16 lengths)
//! are in `text::entities`.
//!
//! Every builder emits exactly the shape PTB 22.8, aiogram 3.29.1 and telegraf 4.16.3 accept
//! (SDK-COMPAT §6): required fields always present, integers as JSON numbers, booleans as JSON
//! booleans, absent optional fields omitted (never `null`). This module owns no state and knows
//! nothing about storage; the runtime fills the views.

use serde_json::{json, Map, Value};

use crate::wire::e2e::Entity;

/// Update payload keys the gateway may emit (SPEC "Update").
pub const UPDATE_KINDS: &[&str] = &[
    "message",
    "channel_post",
    "callback_query",
    "inline_query",
    "chosen_inline_result",
    "message_reaction",
    "my_chat_member",
    "chat_member",
    "chat_join_request",
];

// ── Views ──

/// A Bot API User.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserView {
    pub id: i64,
    pub is_bot: bool,
    pub first_name: String,
    /// `getMe` must carry it (SDK-COMPAT §0.9).
    pub username: Option<String>,
}

/// A Bot API Chat. Only the fields the gateway knows; `type` follows from the variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatView {
    Private { id: i64, first_name: String, username: Option<String> },
    Group { id: i64, title: String },
    Supergroup { id: i64, title: String, username: Option<String> },
    Channel { id: i64, title: String, username: Option<String> },
}

impl ChatView {
    pub fn id(&self) -> i64 {
        match self {
            ChatView::Private { id, .. }
            | ChatView::Group { id, .. }
            | ChatView::Supergroup { id, .. }
            | ChatView::Channel { id, .. } => *id,
        }
    }

    /// The Bot API `Chat.type` value.
    pub fn kind(&self) -> &'static str {
        match self {
            ChatView::Private { .. } => "private",
            ChatView::Group { .. } => "group",
            ChatView::Supergroup { .. } => "supergroup",
            ChatView::Channel { .. } => "channel",
        }
    }
}

/// A Bot API Message (text messages for now).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageView {
    pub message_id: i64,
    /// Unix seconds; must not be 0 (0 marks an inaccessible message in PTB and aiogram).
    pub date: i64,
    pub chat: ChatView,
    pub from: Option<UserView>,
    pub text: Option<String>,
    /// Entities of `text`, offsets in UTF-16 code units; emitted only with `text`.
    pub entities: Vec<Entity>,
    /// Serialised one level deep only (SPEC "Reply snapshots nest one level only").
    pub reply_to_message: Option<Box<MessageView>>,
}

// ── JSON builders ──

/// User JSON: `id`, `is_bot`, `first_name`, and `username` when known.
pub fn user_json(user: &UserView) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(user.id));
    o.insert("is_bot".into(), json!(user.is_bot));
    o.insert("first_name".into(), json!(user.first_name));
    insert_opt_str(&mut o, "username", user.username.as_deref());
    Value::Object(o)
}

/// Chat JSON: `id`, `type`, plus the variant's names.
pub fn chat_json(chat: &ChatView) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(chat.id()));
    o.insert("type".into(), json!(chat.kind()));
    match chat {
        ChatView::Private { first_name, username, .. } => {
            o.insert("first_name".into(), json!(first_name));
            insert_opt_str(&mut o, "username", username.as_deref());
        }
        ChatView::Group { title, .. } => {
            o.insert("title".into(), json!(title));
        }
        ChatView::Supergroup { title, username, .. } | ChatView::Channel { title, username, .. } => {
            o.insert("title".into(), json!(title));
            insert_opt_str(&mut o, "username", username.as_deref());
        }
    }
    Value::Object(o)
}

/// Message JSON. `reply_to_message` is nested one level: the nested message never carries its
/// own `reply_to_message`.
pub fn message_json(msg: &MessageView) -> Value {
    message_json_at(msg, true)
}

fn message_json_at(msg: &MessageView, nest: bool) -> Value {
    let mut o = Map::new();
    o.insert("message_id".into(), json!(msg.message_id));
    if let Some(from) = &msg.from {
        o.insert("from".into(), user_json(from));
    }
    o.insert("date".into(), json!(msg.date));
    o.insert("chat".into(), chat_json(&msg.chat));
    if nest {
        if let Some(reply) = &msg.reply_to_message {
            o.insert("reply_to_message".into(), message_json_at(reply, false));
        }
    }
    if let Some(text) = &msg.text {
        o.insert("text".into(), json!(text));
        if !msg.entities.is_empty() {
            o.insert("entities".into(), entities_to_json(&msg.entities));
        }
    }
    Value::Object(o)
}

/// `{"update_id": N, "<kind>": payload}`: exactly one payload key (SDK-COMPAT §6 "Update").
pub fn update_json(update_id: i64, kind: &str, payload: Value) -> Value {
    debug_assert!(UPDATE_KINDS.contains(&kind), "unknown update kind {kind}");
    let mut o = Map::new();
    o.insert("update_id".into(), json!(update_id));
    o.insert(kind.to_string(), payload);
    Value::Object(o)
}

/// MessageEntity JSON array: `type`, `offset`, `length`, plus `url` for `text_link` and
/// `language` for `pre` when set.
pub fn entities_to_json(entities: &[Entity]) -> Value {
    Value::Array(
        entities
            .iter()
            .map(|e| {
                let mut o = Map::new();
                o.insert("type".into(), json!(e.type_));
                o.insert("offset".into(), json!(e.offset));
                o.insert("length".into(), json!(e.length));
                if e.type_ == "text_link" && !e.url.is_empty() {
                    o.insert("url".into(), json!(e.url));
                }
                if e.type_ == "pre" && !e.language.is_empty() {
                    o.insert("language".into(), json!(e.language));
                }
                Value::Object(o)
            })
            .collect(),
    )
}

fn insert_opt_str(o: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        o.insert(key.to_string(), json!(v));
    }
}

/// Path of the first `null` inside `v`, if any (tests use it to enforce SDK-COMPAT §0.7).
#[cfg(test)]
pub(crate) fn find_null(v: &Value, path: &str) -> Option<String> {
    match v {
        Value::Null => Some(path.to_string()),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| find_null(x, &format!("{path}[{i}]"))),
        Value::Object(o) => o.iter().find_map(|(k, x)| find_null(x, &format!("{path}.{k}"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::botapi::text::entities::command_entities;

    fn alice() -> UserView {
        UserView { id: 42, is_bot: false, first_name: "Alice".into(), username: None }
    }

    fn chat() -> ChatView {
        ChatView::Private { id: 42, first_name: "Alice".into(), username: Some("alice".into()) }
    }

    fn msg(id: i64, text: Option<&str>) -> MessageView {
        MessageView {
            message_id: id,
            date: 1_700_000_000,
            chat: chat(),
            from: Some(alice()),
            text: text.map(str::to_string),
            entities: Vec::new(),
            reply_to_message: None,
        }
    }

    #[test]
    fn user_json_omits_absent_username() {
        let v = user_json(&alice());
        assert_eq!(v, json!({"id": 42, "is_bot": false, "first_name": "Alice"}));
        let bot = UserView { id: 7, is_bot: true, first_name: "B".into(), username: Some("b_bot".into()) };
        assert_eq!(user_json(&bot)["username"], "b_bot");
        assert_eq!(user_json(&bot)["is_bot"], true);
    }

    #[test]
    fn chat_json_per_kind() {
        assert_eq!(
            chat_json(&chat()),
            json!({"id": 42, "type": "private", "first_name": "Alice", "username": "alice"})
        );
        let g = ChatView::Group { id: -5, title: "G".into() };
        assert_eq!(chat_json(&g), json!({"id": -5, "type": "group", "title": "G"}));
        let c = ChatView::Channel { id: -9, title: "C".into(), username: None };
        assert_eq!(chat_json(&c), json!({"id": -9, "type": "channel", "title": "C"}));
    }

    #[test]
    fn message_json_is_valid_and_never_null() {
        let mut inner = msg(1, Some("first"));
        inner.reply_to_message = Some(Box::new(msg(0, Some("too deep"))));
        let mut m = msg(2, Some("/start hi"));
        m.entities = command_entities("/start hi");
        m.reply_to_message = Some(Box::new(inner));
        let v = message_json(&m);
        assert_eq!(find_null(&v, "$"), None);
        assert_eq!(v["message_id"], 2);
        assert_eq!(v["date"], 1_700_000_000);
        assert_eq!(v["chat"]["type"], "private");
        assert_eq!(v["entities"], json!([{"type": "bot_command", "offset": 0, "length": 6}]));
        assert_eq!(v["reply_to_message"]["message_id"], 1);
        assert!(v["reply_to_message"].get("reply_to_message").is_none(), "nested more than one level: {v}");

        let bare = message_json(&msg(3, None));
        assert_eq!(find_null(&bare, "$"), None);
        for key in ["text", "entities", "reply_to_message"] {
            assert!(bare.get(key).is_none(), "{key} present in {bare}");
        }
    }

    #[test]
    fn update_json_has_one_payload_key() {
        let u = update_json(10, "message", message_json(&msg(1, Some("x"))));
        let o = u.as_object().expect("object");
        assert_eq!(o.len(), 2);
        assert_eq!(u["update_id"], 10);
        assert!(u["message"].is_object());
    }
}
