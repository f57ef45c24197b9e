//! Bot API JSON objects built from plain domain views (User, Chat, Message, Update,
//! MessageEntity), and the text/entity rules shared by every method.
//!
//! Every builder emits exactly the shape PTB 22.8, aiogram 3.29.1 and telegraf 4.16.3 accept
//! (SDK-COMPAT §6): required fields always present, integers as JSON numbers, booleans as JSON
//! booleans, absent optional fields omitted (never `null`). This module owns no state and knows
//! nothing about storage; the runtime fills the views.

use serde_json::{json, Map, Value};

use super::format::checked_link;
use super::ApiError;
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

/// MessageEntity types a bot may send and the gateway can carry in `e2e.Entity`.
/// `text_mention` (needs `user`) and `custom_emoji` (needs `custom_emoji_id`) are not carried
/// by the e2e message yet, so they are refused rather than silently degraded.
pub const ENTITY_TYPES: &[&str] = &[
    "mention",
    "hashtag",
    "cashtag",
    "bot_command",
    "url",
    "email",
    "phone_number",
    "bold",
    "italic",
    "underline",
    "strikethrough",
    "spoiler",
    "blockquote",
    "expandable_blockquote",
    "code",
    "pre",
    "text_link",
];

/// Entity types of the Bot API that the e2e `Entity` cannot carry yet.
const UNCARRIED_ENTITY_TYPES: &[&str] = &["text_mention", "custom_emoji", "date_time"];

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

/// Most entities one message may carry, whatever its length. Telegram renders at most 100 and
/// silently ignores the rest; the gateway carries ten times that and refuses more, so the work
/// and memory of one call stay bounded (docs/decisions.md).
pub const MAX_ENTITIES: usize = 1000;

/// Refuses more entities than a text of `text_utf16` units can carry: [`MAX_ENTITIES`], and for
/// a short text one entity of each type per unit (every entity covers at least one unit, and a
/// unit inside two entities of one type is redundant: same-type entities may neither overlap nor
/// nest). Called as soon as the count is known, before any per-entity work.
pub fn check_entity_count(count: usize, text_utf16: usize) -> Result<(), ApiError> {
    if count > MAX_ENTITIES {
        return Err(ApiError::bad_request(format!(
            "too many entities: {count} given, at most {MAX_ENTITIES} are accepted per message"
        )));
    }
    let per_text = text_utf16.saturating_mul(ENTITY_TYPES.len());
    if count > per_text {
        return Err(ApiError::bad_request(format!(
            "too many entities: {count} given for a text of {text_utf16} UTF-16 code units, which can carry at most \
             {per_text} (one entity of each of the {} types per unit)",
            ENTITY_TYPES.len()
        )));
    }
    Ok(())
}

/// Reads a MessageEntity array (as given in `entities` / `caption_entities`) for a text of
/// `text_utf16` units: the count first ([`check_entity_count`]), then the JSON shape of each.
/// A `text_link` URL must pass the gateway's one link rule (`format::checked_link`, also applied
/// to markup) and is kept normalised; `url` is kept only on `text_link` and `language` only on
/// `pre`, so nothing else reaches the recipient. Call [`validate_entities`] against the text
/// afterwards. Unknown keys are ignored.
pub fn entities_from_json(value: &Value, text_utf16: usize) -> Result<Vec<Entity>, ApiError> {
    let items = value.as_array().ok_or_else(|| ApiError::bad_request("entities must be an array of MessageEntity"))?;
    check_entity_count(items.len(), text_utf16)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let obj = item.as_object().ok_or_else(|| entity_error(i, "is not an object"))?;
        let kind =
            obj.get("type").and_then(Value::as_str).ok_or_else(|| entity_error(i, "has no string field \"type\""))?;
        let offset =
            entity_u32(obj, "offset").ok_or_else(|| entity_error(i, "has no valid non-negative integer \"offset\""))?;
        let length =
            entity_u32(obj, "length").ok_or_else(|| entity_error(i, "has no valid non-negative integer \"length\""))?;
        let mut e = Entity::new();
        e.type_ = kind.to_string();
        e.offset = offset;
        e.length = length;
        if let Some(url) = obj.get("url") {
            let url = url.as_str().ok_or_else(|| entity_error(i, "has a non-string \"url\""))?;
            // A blank url is left to `validate_entities` ("has no url").
            if kind == "text_link" && !url.trim().is_empty() {
                e.url = checked_link(url).ok_or_else(|| {
                    entity_error(
                        i,
                        "(text_link) has an unsupported URL: only http(s) links with a host and tg:, ton: and \
                         tonsite: links are accepted",
                    )
                })?;
            }
        }
        if let Some(lang) = obj.get("language") {
            let lang = lang.as_str().ok_or_else(|| entity_error(i, "has a non-string \"language\""))?;
            if kind == "pre" {
                e.language = lang.to_string();
            }
        }
        out.push(e);
    }
    Ok(out)
}

fn entity_u32(obj: &Map<String, Value>, key: &str) -> Option<u32> {
    let v = obj.get(key)?;
    if let Some(n) = v.as_u64() {
        return u32::try_from(n).ok();
    }
    // telegraf/JS never sends 3.0, but accept an integral float like the param getters do.
    let f = v.as_f64()?;
    (f >= 0.0 && f.fract() == 0.0 && f <= u32::MAX as f64).then_some(f as u32)
}

fn entity_error(index: usize, what: &str) -> ApiError {
    ApiError::bad_request(format!("can't parse entities: entity {index} {what}"))
}

/// Checks entities against `text`: known type, `length > 0`, `offset + length` within the
/// text, both ends on code-point boundaries (never inside a surrogate pair), all in UTF-16 code
/// units; `text_link` needs a `url`. Returns 400 naming the first bad entity.
pub fn validate_entities(text: &str, entities: &[Entity]) -> Result<(), ApiError> {
    if entities.is_empty() {
        return Ok(());
    }
    let total = utf16_len(text) as u64;
    // UTF-16 positions that fall between the two halves of a surrogate pair.
    let mut inside_pairs = Vec::new();
    let mut pos = 0u64;
    for c in text.chars() {
        if c.len_utf16() == 2 {
            inside_pairs.push(pos + 1);
        }
        pos += c.len_utf16() as u64;
    }
    for (i, e) in entities.iter().enumerate() {
        let kind = e.type_.as_str();
        if UNCARRIED_ENTITY_TYPES.contains(&kind) {
            return Err(entity_error(i, &format!("has type {kind:?}, which is not supported yet")));
        }
        if !ENTITY_TYPES.contains(&kind) {
            return Err(entity_error(i, &format!("has unknown type {kind:?}")));
        }
        if e.length == 0 {
            return Err(entity_error(i, &format!("({kind}) has length 0")));
        }
        let start = e.offset as u64;
        let end = start + e.length as u64;
        if end > total {
            return Err(entity_error(
                i,
                &format!("({kind}) ends at {end}, beyond the text length {total} in UTF-16 code units"),
            ));
        }
        for edge in [start, end] {
            if inside_pairs.binary_search(&edge).is_ok() {
                return Err(entity_error(
                    i,
                    &format!("({kind}) has a boundary at {edge}, inside a surrogate pair (UTF-16 code units)"),
                ));
            }
        }
        if kind == "text_link" && e.url.trim().is_empty() {
            return Err(entity_error(i, "(text_link) has no \"url\""));
        }
    }
    Ok(())
}

/// Length of `s` in UTF-16 code units (the unit of entity offsets and text limits).
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The `bot_command` entity at offset 0 for a text such as `/start`, `/start@my_bot arg` or
/// `/help-me` (covers `/help`); empty when the text does not start with a command. PTB's
/// CommandHandler and telegraf's `bot.command` route on it (SDK-COMPAT §8.9).
pub fn command_entities(text: &str) -> Vec<Entity> {
    let Some(rest) = text.strip_prefix('/') else {
        return Vec::new();
    };
    let is_cmd = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let name_len = rest.bytes().take_while(|&b| is_cmd(b)).count();
    if name_len == 0 {
        return Vec::new();
    }
    let mut len = 1 + name_len;
    let after = &rest[name_len..];
    if let Some(user) = after.strip_prefix('@') {
        let user_len = user.bytes().take_while(|&b| is_cmd(b)).count();
        if user_len > 0 {
            len += 1 + user_len;
        }
    }
    let mut e = Entity::new();
    e.type_ = "bot_command".to_string();
    e.offset = 0;
    // ASCII only, so bytes equal UTF-16 code units.
    e.length = len as u32;
    vec![e]
}

fn insert_opt_str(o: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        o.insert(key.to_string(), json!(v));
    }
}

#[cfg(test)]
pub(crate) fn entity(kind: &str, offset: u32, length: u32) -> Entity {
    let mut e = Entity::new();
    e.type_ = kind.to_string();
    e.offset = offset;
    e.length = length;
    e
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

    #[test]
    fn entities_round_trip_with_url_and_language() {
        let src = json!([
            {"type": "bold", "offset": 0, "length": 5},
            {"type": "text_link", "offset": 6, "length": 4, "url": "https://example.com"},
            {"type": "pre", "offset": 11, "length": 3, "language": "rust", "unknown_key": true},
            {"type": "code", "offset": 15, "length": 1, "url": "ignored"}
        ]);
        let parsed = entities_from_json(&src, 16).expect("parses");
        // The link is normalised as markup links are; url and language stay on their types only.
        assert_eq!(parsed[1].url, "https://example.com/");
        assert_eq!(parsed[2].language, "rust");
        assert_eq!(parsed[3].url, "");
        let back = entities_to_json(&parsed);
        assert_eq!(
            back,
            json!([
                {"type": "bold", "offset": 0, "length": 5},
                {"type": "text_link", "offset": 6, "length": 4, "url": "https://example.com/"},
                {"type": "pre", "offset": 11, "length": 3, "language": "rust"},
                {"type": "code", "offset": 15, "length": 1}
            ])
        );
    }

    #[test]
    fn entities_from_json_rejects_bad_shapes() {
        for bad in [
            json!({"type": "bold"}),
            json!([1]),
            json!([{"offset": 0, "length": 1}]),
            json!([{"type": "bold", "offset": -1, "length": 1}]),
            json!([{"type": "bold", "offset": 0, "length": "x"}]),
            json!([{"type": "bold", "offset": 0.5, "length": 1}]),
            json!([{"type": "text_link", "offset": 0, "length": 1, "url": 5}]),
        ] {
            let err = entities_from_json(&bad, 16).expect_err(&bad.to_string());
            assert_eq!(err.status, 400);
            assert!(err.description.starts_with("Bad Request: "), "{}", err.description);
        }
    }

    #[test]
    fn entity_count_is_refused_before_any_entity_is_read() {
        // 100,000 items that are not even entities: the count is refused first, so none is read.
        let many = Value::Array(vec![json!(1); 100_000]);
        let err = entities_from_json(&many, 4096).expect_err("too many");
        assert_eq!(err.status, 400);
        assert_eq!(
            err.description,
            "Bad Request: too many entities: 100000 given, at most 1000 are accepted per message"
        );
        let bold = |n: usize| Value::Array(vec![json!({"type": "bold", "offset": 0, "length": 1}); n]);
        assert_eq!(entities_from_json(&bold(MAX_ENTITIES), 4096).expect("at the cap").len(), MAX_ENTITIES);
        assert!(entities_from_json(&bold(MAX_ENTITIES + 1), 4096).is_err());
        // A short text carries at most one entity of each type per UTF-16 unit.
        let per_two_units = 2 * ENTITY_TYPES.len();
        entities_from_json(&bold(per_two_units), 2).expect("within the text's bound");
        let err = entities_from_json(&bold(per_two_units + 1), 2).expect_err("beyond the text's bound");
        assert!(err.description.contains("for a text of 2 UTF-16 code units"), "{}", err.description);
        assert!(check_entity_count(1, 0).is_err(), "an empty text carries no entity");
        check_entity_count(0, 0).expect("no entities");
    }

    #[test]
    fn raw_text_links_follow_the_markup_link_rule() {
        let raw = |url: &str| {
            entities_from_json(&json!([{"type": "text_link", "offset": 0, "length": 1, "url": url}]), 1)
                .map(|es| es[0].url.clone())
        };
        for unsafe_url in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            " javascript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox",
            "file:///etc/passwd",
            "mailto:a@b.c",
            "http://",
            "java\tscript:x",
        ] {
            let err = raw(unsafe_url).expect_err(unsafe_url);
            assert_eq!(err.status, 400);
            assert!(
                err.description.starts_with("Bad Request: can't parse entities: entity 0 (text_link) has an unsupported URL"),
                "{unsafe_url}: {}",
                err.description
            );
        }
        // One rule: a raw text_link is accepted exactly when the same link survives HTML, with
        // the same normalised URL.
        for url in ["javascript:alert(1)", "https://example.com", "example.com/a?b=1", "tg://resolve?domain=x", "ftp://x.y"] {
            let html = crate::gateway::botapi::format::parse(
                &format!("<a href=\"{url}\">x</a>"),
                crate::gateway::botapi::format::ParseMode::Html,
            )
            .expect("html parses");
            assert_eq!(raw(url).ok(), html.1.first().map(|e| e.url.clone()), "{url}");
        }
        assert_eq!(raw("example.com/a").expect("no scheme means http"), "http://example.com/a");
    }

    #[test]
    fn validate_counts_utf16_units() {
        // "😀" is one char, 4 UTF-8 bytes, 2 UTF-16 units; "é" is 1 unit.
        let text = "😀 héllo";
        assert_eq!(utf16_len(text), 8);
        validate_entities(text, &[entity("bold", 0, 2), entity("italic", 3, 5)]).expect("valid");
        let err = validate_entities(text, &[entity("italic", 3, 6)]).expect_err("past the end");
        assert!(err.description.contains("ends at 9"), "{}", err.description);
        let err = validate_entities(text, &[entity("bold", 0, 1)]).expect_err("splits the emoji");
        assert!(err.description.contains("surrogate"), "{}", err.description);
        let err = validate_entities(text, &[entity("bold", 1, 2)]).expect_err("starts inside the emoji");
        assert!(err.description.contains("surrogate"), "{}", err.description);
    }

    #[test]
    fn validate_rejects_bad_entities() {
        let text = "hello";
        let cases = [
            (entity("bold", 0, 0), "length 0"),
            (entity("blink", 0, 1), "unknown type"),
            (entity("text_mention", 0, 1), "not supported yet"),
            (entity("text_link", 0, 1), "url"),
            (entity("bold", u32::MAX, u32::MAX), "beyond"),
        ];
        for (e, want) in cases {
            let err = validate_entities(text, std::slice::from_ref(&e)).expect_err(want);
            assert_eq!(err.status, 400);
            assert!(err.description.contains(want), "{} lacks {want}", err.description);
        }
        let mut link = entity("text_link", 0, 5);
        link.url = "https://example.com".into();
        validate_entities(text, &[link]).expect("text_link with url");
    }

    #[test]
    fn command_entities_cover_the_command_only() {
        let len = |t: &str| command_entities(t).first().map(|e| (e.type_.clone(), e.offset, e.length));
        assert_eq!(len("/start"), Some(("bot_command".into(), 0, 6)));
        assert_eq!(len("/start payload"), Some(("bot_command".into(), 0, 6)));
        assert_eq!(len("/start@my_bot x"), Some(("bot_command".into(), 0, 13)));
        assert_eq!(len("/start@ x"), Some(("bot_command".into(), 0, 6)));
        assert_eq!(len("/help-me"), Some(("bot_command".into(), 0, 5)));
        assert_eq!(len("/"), None);
        assert_eq!(len("/ start"), None);
        assert_eq!(len("hello /start"), None);
        assert_eq!(len("/😀"), None);
        assert_eq!(len(""), None);
    }
}
