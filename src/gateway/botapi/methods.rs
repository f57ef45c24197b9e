//! Bot API methods: the name → handler table, and the parameter rules of each method. A
//! handler reads [`Params`] through the typed getters, validates, and calls the bot's
//! [`BotApi`]; the result becomes the `result` of the success envelope. Method names are
//! case-insensitive (as in the reference Bot API).

use std::time::Duration;

use serde_json::Value;

use super::backend::SetWebhook;
use super::params::Params;
use super::text::entities::{check_entity_count, entities_from_json, utf16_len, validate_entities};
use super::text::{self, ParseMode};
use super::{ApiError, BotApi, GetUpdates, SendMessage};

/// Longest message text, in UTF-16 code units.
pub const MAX_TEXT_UTF16: usize = 4096;
/// Longest long poll (SPEC "Limits").
pub const MAX_POLL_TIMEOUT_SECS: i64 = 50;
/// getUpdates `limit` range; the default is the maximum.
pub const MAX_UPDATES_LIMIT: i64 = 100;

/// The methods this boundary serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    GetMe,
    GetUpdates,
    SendMessage,
    DeleteWebhook,
    SetWebhook,
    GetWebhookInfo,
}

impl Method {
    pub const ALL: &'static [Method] = &[
        Method::GetMe,
        Method::GetUpdates,
        Method::SendMessage,
        Method::DeleteWebhook,
        Method::SetWebhook,
        Method::GetWebhookInfo,
    ];

    /// The canonical name, e.g. `sendMessage`.
    pub fn name(self) -> &'static str {
        match self {
            Method::GetMe => "getMe",
            Method::GetUpdates => "getUpdates",
            Method::SendMessage => "sendMessage",
            Method::DeleteWebhook => "deleteWebhook",
            Method::SetWebhook => "setWebhook",
            Method::GetWebhookInfo => "getWebhookInfo",
        }
    }

    /// Looks a method up by name, ignoring ASCII case.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.iter().copied().find(|m| m.name().eq_ignore_ascii_case(name))
    }
}

/// What every call checks before its body is read: the credential (401 once revoked), the
/// method name (404 when unknown), and for getUpdates the delivery mode (409 with a webhook).
pub fn preflight(bot: &dyn BotApi, name: &str) -> Result<Method, ApiError> {
    if bot.is_revoked() {
        return Err(ApiError::unauthorized());
    }
    let method = Method::from_name(name).ok_or_else(|| ApiError::not_found(format!("method {name} not found")))?;
    if method == Method::GetUpdates {
        bot.check_polling()?;
    }
    Ok(method)
}

/// Runs `method` with `params`; the value is the envelope's `result`.
pub fn call(bot: &dyn BotApi, method: Method, params: &Params) -> Result<Value, ApiError> {
    match method {
        Method::GetMe => Ok(bot.get_me()),
        Method::GetUpdates => Ok(Value::Array(bot.get_updates(get_updates_request(params)?)?)),
        Method::SendMessage => bot.send_message(send_message_request(params)?),
        Method::DeleteWebhook => {
            bot.delete_webhook(params.flag("drop_pending_updates")?)?;
            Ok(Value::Bool(true))
        }
        Method::SetWebhook => {
            bot.set_webhook(set_webhook_request(params)?)?;
            Ok(Value::Bool(true))
        }
        Method::GetWebhookInfo => bot.get_webhook_info(),
    }
}

/// [`preflight`] then [`call`].
pub fn dispatch(bot: &dyn BotApi, name: &str, params: &Params) -> Result<Value, ApiError> {
    let method = preflight(bot, name)?;
    call(bot, method, params)
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

/// getUpdates parameters.
///
/// - `offset`: absent or 0 is "no offset" (PTB and telegraf start with 0, SDK-COMPAT §4);
///   other values, negative included, are passed on for the runtime to judge.
/// - `limit`: default 100; outside 1..=100 is a 400 (telegraf's `limit:1` stays valid).
/// - `timeout`: default 0; negative is a 400; above 50 is clamped to 50 rather than refused,
///   so a client asking for a longer poll still works and PTB's read timeout (`timeout` + 5 s)
///   is never exceeded.
/// - `allowed_updates`: `Some` only when given (the runtime stores it; `[]` = default set).
pub fn get_updates_request(params: &Params) -> Result<GetUpdates, ApiError> {
    let offset = params.optional_i64("offset")?.filter(|&o| o != 0);
    let limit = params.optional_i64("limit")?.unwrap_or(MAX_UPDATES_LIMIT);
    if !(1..=MAX_UPDATES_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!("limit must be between 1 and {MAX_UPDATES_LIMIT}, got {limit}")));
    }
    let timeout = params.optional_i64("timeout")?.unwrap_or(0);
    if timeout < 0 {
        return Err(ApiError::bad_request(format!("timeout must not be negative, got {timeout}")));
    }
    let timeout = timeout.min(MAX_POLL_TIMEOUT_SECS);
    Ok(GetUpdates {
        offset,
        limit: limit as u32,
        timeout: Duration::from_secs(timeout as u64),
        allowed_updates: params.optional_string_list("allowed_updates")?,
    })
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
            if super::params::as_i64(other) != Some(chat_id) {
                return Err(ApiError::bad_request("replies to messages in another chat are not supported"));
            }
        }
    }
    // The legacy `reply_to_message_id=0` means "not a reply".
    let reply_to_message_id = reply_to_message_id.filter(|&id| id != 0);
    Ok(SendMessage { chat_id, text, entities, reply_to_message_id, allow_sending_without_reply })
}

/// Longest `secret_token` of the Bot API.
pub const MAX_SECRET_TOKEN_LEN: usize = 256;
/// `max_connections` range of the Bot API; delivery uses one connection whatever the value.
pub const MAX_WEBHOOK_CONNECTIONS: i64 = 100;

/// setWebhook parameters.
///
/// - `url`: required; empty deletes the webhook (as in the Bot API). Otherwise [`check_webhook_url`].
/// - `certificate` (a file or a value) and a non-empty `ip_address`: 400 "not supported".
/// - `max_connections`: 1..=100 (PTB always sends 40), default 1.
/// - `secret_token`: 1-256 characters of `A-Z a-z 0-9 _ -`.
/// - `allowed_updates`: `Some` only when given; the runtime checks the names and stores it.
/// - `drop_pending_updates`: boolean.
pub fn set_webhook_request(params: &Params) -> Result<SetWebhook, ApiError> {
    if params.contains("certificate") || params.file("certificate").is_some() {
        return Err(ApiError::bad_request(
            "certificate is not supported: the gateway delivers to https URLs with a publicly trusted certificate, \
             or to plain http on localhost",
        ));
    }
    if params.optional_str("ip_address")?.is_some_and(|ip| !ip.trim().is_empty()) {
        return Err(ApiError::bad_request("ip_address is not supported: the webhook URL is resolved normally"));
    }
    let url = params
        .optional_str("url")?
        .ok_or_else(|| ApiError::bad_request("url is required (an empty url or deleteWebhook removes the webhook)"))?;
    // Only an empty url removes the webhook; blanks around a URL are trimmed, but a url of
    // blanks alone is a mistake, not a request to delete.
    if !url.is_empty() && url.trim().is_empty() {
        return Err(ApiError::bad_request("url is blank (send an empty url, or call deleteWebhook, to remove the webhook)"));
    }
    let url = url.trim().to_string();
    if !url.is_empty() {
        check_webhook_url(&url)?;
    }
    let max_connections = params.optional_i64("max_connections")?.unwrap_or(1);
    if !(1..=MAX_WEBHOOK_CONNECTIONS).contains(&max_connections) {
        return Err(ApiError::bad_request(format!(
            "max_connections must be between 1 and {MAX_WEBHOOK_CONNECTIONS}, got {max_connections}"
        )));
    }
    let secret_token = params.optional_str("secret_token")?;
    if let Some(secret) = &secret_token {
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if secret.is_empty() || secret.len() > MAX_SECRET_TOKEN_LEN || !secret.chars().all(allowed) {
            // Never echo the secret itself.
            return Err(ApiError::bad_request(format!(
                "secret_token must be 1-{MAX_SECRET_TOKEN_LEN} characters of A-Z, a-z, 0-9, _ and -"
            )));
        }
    }
    Ok(SetWebhook {
        url,
        secret_token,
        allowed_updates: params.optional_string_list("allowed_updates")?,
        max_connections: max_connections as u32,
        drop_pending_updates: params.flag("drop_pending_updates")?,
    })
}

/// The webhook URL rule (SPEC "Webhook delivery" 3): `https://` with a host, or plain `http://`
/// to `localhost` or a loopback address (127.0.0.0/8, ::1). Anything else is a 400 saying why.
pub fn check_webhook_url(raw: &str) -> Result<(), ApiError> {
    let bad = |why: String| ApiError::bad_request(format!("bad webhook: {why}"));
    let url = url::Url::parse(raw).map_err(|e| bad(format!("the url is not a valid absolute URL ({e})")))?;
    let host = url.host().ok_or_else(|| bad("the url has no host".to_string()))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let loopback = match host {
                url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
                url::Host::Ipv4(ip) => ip.is_loopback(),
                url::Host::Ipv6(ip) => ip.is_loopback(),
            };
            if loopback {
                Ok(())
            } else {
                Err(bad(format!(
                    "an HTTPS URL must be provided for webhook; plain http is accepted only for localhost and \
                     loopback addresses (127.0.0.0/8, ::1), not for {host}"
                )))
            }
        }
        other => Err(bad(format!(
            "unsupported URL scheme {other:?}; an HTTPS URL must be provided for webhook (plain http only for localhost)"
        ))),
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::gateway::botapi::text::entities::{entity, MAX_ENTITIES};

    /// Records the last typed request; answers with canned values.
    #[derive(Default)]
    struct Fake {
        revoked: bool,
        last_updates: Mutex<Option<GetUpdates>>,
        last_send: Mutex<Option<SendMessage>>,
        dropped: Mutex<Option<bool>>,
        webhook: Mutex<Option<SetWebhook>>,
    }

    impl BotApi for Fake {
        fn get_me(&self) -> Value {
            json!({"id": 1, "is_bot": true, "first_name": "B", "username": "b_bot"})
        }
        fn get_updates(&self, req: GetUpdates) -> Result<Vec<Value>, ApiError> {
            *self.last_updates.lock().expect("lock") = Some(req);
            Ok(vec![json!({"update_id": 1, "message": {}})])
        }
        fn send_message(&self, req: SendMessage) -> Result<Value, ApiError> {
            let text = req.text.clone();
            *self.last_send.lock().expect("lock") = Some(req);
            Ok(json!({"message_id": 9, "text": text}))
        }
        fn delete_webhook(&self, drop: bool) -> Result<(), ApiError> {
            *self.dropped.lock().expect("lock") = Some(drop);
            Ok(())
        }
        fn set_webhook(&self, req: SetWebhook) -> Result<(), ApiError> {
            *self.webhook.lock().expect("lock") = Some(req);
            Ok(())
        }
        fn get_webhook_info(&self) -> Result<Value, ApiError> {
            let url = self.webhook.lock().expect("lock").as_ref().map(|w| w.url.clone()).unwrap_or_default();
            Ok(json!({"url": url, "has_custom_certificate": false, "pending_update_count": 0}))
        }
        fn is_revoked(&self) -> bool {
            self.revoked
        }
    }

    fn p(v: Value) -> Params {
        let mut p = Params::new();
        for (k, v) in v.as_object().expect("object").clone() {
            p.insert_json(&k, v);
        }
        p
    }

    fn form(pairs: &[(&str, &str)]) -> Params {
        let mut p = Params::new();
        for (k, v) in pairs {
            p.insert_text(k, v.to_string());
        }
        p
    }

    fn bad(r: Result<impl std::fmt::Debug, ApiError>) -> String {
        let e = r.expect_err("expected an error");
        assert_eq!(e.status, 400, "{e}");
        e.description
    }

    #[test]
    fn names_are_case_insensitive_and_unknown_is_404() {
        let bot = Fake::default();
        assert_eq!(dispatch(&bot, "GETME", &Params::new()).expect("getMe")["username"], "b_bot");
        assert_eq!(preflight(&bot, "sendmessage").expect("known"), Method::SendMessage);
        let e = dispatch(&bot, "sendPigeon", &Params::new()).expect_err("unknown");
        assert_eq!((e.status, e.description.as_str()), (404, "Not Found: method sendPigeon not found"));
    }

    #[test]
    fn revoked_bot_answers_401_first() {
        let bot = Fake { revoked: true, ..Fake::default() };
        for name in ["getMe", "nope"] {
            let e = dispatch(&bot, name, &Params::new()).expect_err("revoked");
            assert_eq!((e.status, e.description.as_str()), (401, "Unauthorized"));
        }
    }

    #[test]
    fn get_updates_defaults_and_offset_zero() {
        let r = get_updates_request(&Params::new()).expect("defaults");
        assert_eq!(r, GetUpdates { offset: None, limit: 100, timeout: Duration::ZERO, allowed_updates: None });
        let r = get_updates_request(&form(&[("offset", "0"), ("timeout", "10")])).expect("PTB first poll");
        assert_eq!((r.offset, r.timeout), (None, Duration::from_secs(10)));
        let r = get_updates_request(&p(json!({"offset": 17, "limit": 1, "allowed_updates": []}))).expect("telegraf");
        assert_eq!((r.offset, r.limit, r.allowed_updates), (Some(17), 1, Some(vec![])));
        let r = get_updates_request(&form(&[("allowed_updates", r#"["callback_query","message"]"#)])).expect("aiogram");
        assert_eq!(r.allowed_updates, Some(vec!["callback_query".to_string(), "message".to_string()]));
    }

    #[test]
    fn get_updates_limits() {
        assert_eq!(get_updates_request(&p(json!({"timeout": 120}))).expect("clamped").timeout, Duration::from_secs(50));
        assert!(bad(get_updates_request(&p(json!({"timeout": -1})))).contains("timeout must not be negative"));
        assert!(bad(get_updates_request(&p(json!({"limit": 0})))).contains("limit must be between 1 and 100"));
        assert!(bad(get_updates_request(&p(json!({"limit": 101})))).contains("limit must be between 1 and 100"));
        assert_eq!(bad(get_updates_request(&p(json!({"offset": "x"})))), "Bad Request: offset must be an integer");
        assert!(bad(get_updates_request(&p(json!({"allowed_updates": "message"})))).contains("allowed_updates"));
        let bot = Fake::default();
        let v = dispatch(&bot, "getUpdates", &p(json!({"timeout": 1}))).expect("call");
        assert!(v.is_array());
        assert_eq!(bot.last_updates.lock().expect("lock").as_ref().map(|r| r.timeout), Some(Duration::from_secs(1)));
    }

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

    #[test]
    fn delete_webhook_flag() {
        let bot = Fake::default();
        assert_eq!(dispatch(&bot, "deleteWebhook", &Params::new()).expect("empty"), json!(true));
        assert_eq!(*bot.dropped.lock().expect("lock"), Some(false));
        dispatch(&bot, "deletewebhook", &form(&[("drop_pending_updates", "true")])).expect("drop");
        assert_eq!(*bot.dropped.lock().expect("lock"), Some(true));
        let e = dispatch(&bot, "deleteWebhook", &form(&[("drop_pending_updates", "maybe")])).expect_err("bad bool");
        assert_eq!(e.description, "Bad Request: drop_pending_updates must be a boolean");
    }

    #[test]
    fn webhook_url_rules() {
        for ok in [
            "https://example.com/hook",
            "https://example.com:8443/a/b?x=1",
            "http://localhost:8080/hook",
            "http://LOCALHOST/",
            "http://127.0.0.1:9000/x",
            "http://127.0.0.2/",
            "http://127.255.255.254/",
            "http://[::1]:8443/",
        ] {
            check_webhook_url(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad_url, why) in [
            ("http://example.com/hook", "HTTPS URL must be provided"),
            ("http://128.0.0.1/", "HTTPS URL must be provided"),
            ("http://10.0.0.1/", "HTTPS URL must be provided"),
            ("http://[::2]/", "HTTPS URL must be provided"),
            ("http://localhost.example.com/", "HTTPS URL must be provided"),
            ("ftp://example.com/", "unsupported URL scheme"),
            ("ftp://127.0.0.1/", "unsupported URL scheme"),
            ("example.com/hook", "not a valid absolute URL"),
            ("https://", "not a valid absolute URL"),
        ] {
            let e = check_webhook_url(bad_url).expect_err(bad_url);
            assert_eq!(e.status, 400);
            assert!(e.description.starts_with("Bad Request: bad webhook: "), "{}", e.description);
            assert!(e.description.contains(why), "{bad_url}: {}", e.description);
        }
    }

    #[test]
    fn set_webhook_parameters() {
        // PTB's shape: form, max_connections=40, allowed_updates as JSON text.
        let r = set_webhook_request(&form(&[
            ("url", "http://127.0.0.1:8443/hook"),
            ("max_connections", "40"),
            ("allowed_updates", r#"["message","callback_query"]"#),
            ("secret_token", "Abc_123-xyz"),
            ("drop_pending_updates", "true"),
        ]))
        .expect("PTB");
        assert_eq!(r.url, "http://127.0.0.1:8443/hook");
        assert_eq!(r.max_connections, 40);
        assert_eq!(r.secret_token.as_deref(), Some("Abc_123-xyz"));
        assert_eq!(r.allowed_updates, Some(vec!["message".to_string(), "callback_query".to_string()]));
        assert!(r.drop_pending_updates);
        let r = set_webhook_request(&p(json!({"url": "https://example.com/"}))).expect("minimal");
        assert_eq!((r.max_connections, r.secret_token.clone(), r.allowed_updates.clone()), (1, None, None));
        assert!(!r.drop_pending_updates);
        let r = set_webhook_request(&p(json!({"url": ""}))).expect("empty url deletes");
        assert!(r.url.is_empty());
        for mc in [1, 100] {
            set_webhook_request(&p(json!({"url": "https://e.com/", "max_connections": mc}))).expect("in range");
        }
    }

    #[test]
    fn set_webhook_refusals() {
        let url = "https://example.com/hook";
        assert!(bad(set_webhook_request(&Params::new())).contains("url is required"));
        assert!(bad(set_webhook_request(&p(json!({"url": "   "})))).contains("url is blank"));
        let r = set_webhook_request(&p(json!({"url": " https://example.com/ "}))).expect("trimmed");
        assert_eq!(r.url, "https://example.com/");
        for mc in [0, 101, -1] {
            let e = bad(set_webhook_request(&p(json!({"url": url, "max_connections": mc}))));
            assert!(e.contains("max_connections must be between 1 and 100"), "{e}");
        }
        for secret in ["", "has space", "ünïcode", "semi;colon"] {
            let e = bad(set_webhook_request(&p(json!({"url": url, "secret_token": secret}))));
            assert!(e.contains("secret_token must be 1-256 characters"), "{e}");
            if !secret.is_empty() {
                assert!(!e.contains(secret), "the secret is echoed: {e}");
            }
        }
        let long = "a".repeat(257);
        assert!(bad(set_webhook_request(&p(json!({"url": url, "secret_token": long})))).contains("secret_token"));
        set_webhook_request(&p(json!({"url": url, "secret_token": "a".repeat(256)}))).expect("256 fits");
        let e = bad(set_webhook_request(&p(json!({"url": url, "ip_address": "1.2.3.4"}))));
        assert!(e.contains("ip_address is not supported"), "{e}");
        let e = bad(set_webhook_request(&p(json!({"url": url, "certificate": "x"}))));
        assert!(e.contains("certificate is not supported"), "{e}");
        let mut with_file = p(json!({"url": url}));
        with_file.insert_file(
            "certificate",
            crate::gateway::botapi::UploadedFile { filename: "c.pem".into(), content_type: None, bytes: b"x".to_vec() },
        );
        assert!(bad(set_webhook_request(&with_file)).contains("certificate is not supported"));
        assert!(bad(set_webhook_request(&p(json!({"url": "http://example.com/"})))).contains("bad webhook"));
        assert!(
            bad(set_webhook_request(&p(json!({"url": url, "allowed_updates": "message"})))).contains("allowed_updates")
        );
    }

    #[test]
    fn webhook_methods_dispatch() {
        let bot = Fake::default();
        let r = dispatch(&bot, "setwebhook", &p(json!({"url": "http://localhost/x", "max_connections": 40})));
        assert_eq!(r.expect("setWebhook"), json!(true));
        assert_eq!(bot.webhook.lock().expect("lock").as_ref().map(|w| w.max_connections), Some(40));
        assert_eq!(dispatch(&bot, "getWebhookInfo", &Params::new()).expect("info")["url"], "http://localhost/x");
    }
}
