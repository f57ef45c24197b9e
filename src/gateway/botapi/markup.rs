//! `reply_markup`: what the gateway can deliver, and a 400 naming what it cannot.
//!
//! A new message may carry one of the Bot API's four markups, each travelling end to end in
//! the message's content: an inline keyboard of callback and URL buttons, a reply keyboard
//! (its text, contact and location buttons), `remove_keyboard`, or `force_reply`. An edit
//! carries an inline keyboard only. Button kinds the gateway cannot deliver are refused by
//! name, never sent without their buttons (the bot would not notice).

use serde_json::{Map, Value};

use super::text::checked_link;
use super::{ApiError, Params};
use crate::wire::e2e::reply_button::{PollKind, Request};
use crate::wire::e2e::{
    Content, ForceReply, InlineButton, InlineKeyboard, KeyboardRow, RemoveKeyboard, ReplyButton, ReplyKeyboard,
    ReplyKeyboardRow,
};

/// Longest `callback_data`, in bytes (Bot API).
pub const CALLBACK_DATA_MAX: usize = 64;
/// Most buttons in one inline keyboard (Bot API).
pub const BUTTONS_MAX: usize = 100;
/// Most buttons in one reply keyboard (the reference server's limit).
pub const REPLY_BUTTONS_MAX: usize = 300;
/// Longest `input_field_placeholder`, in characters (Bot API: 1-64).
pub const PLACEHOLDER_MAX: usize = 64;

/// Inline keyboard button fields of the Bot API other than `callback_data` and `url`, each a
/// kind of button this gateway does not deliver, with the feature it needs (`None`: not yet).
const OTHER_BUTTON_KINDS: &[(&str, Option<&str>)] = &[
    ("login_url", Some("Telegram Login sign-ins")),
    ("web_app", Some("web apps")),
    ("switch_inline_query", None),
    ("switch_inline_query_current_chat", None),
    ("switch_inline_query_chosen_chat", None),
    ("copy_text", None),
    ("callback_game", Some("games")),
    ("pay", Some("payments")),
];

/// Reply keyboard button fields that ask the client for something it cannot give.
const OTHER_REQUESTS: &[(&str, Option<&str>)] =
    &[("request_users", None), ("request_user", None), ("request_chat", None), ("web_app", Some("web apps"))];

/// "<at>: <kind> buttons are not supported by this gateway (<feature> are not)" or "… yet",
/// then which buttons are.
fn other_button(at: &str, (kind, feature): (&str, Option<&str>), supported: &str) -> ApiError {
    let why = match feature {
        Some(feature) => format!(" ({feature} are not supported)"),
        None => " yet".to_string(),
    };
    ApiError::bad_request(format!("{at}: {kind} buttons are not supported by this gateway{why}; {supported} are"))
}

/// What `reply_markup` puts on a new message; at most one part is set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplyMarkup {
    pub inline: Option<InlineKeyboard>,
    pub reply: Option<ReplyKeyboard>,
    pub remove: Option<RemoveKeyboard>,
    pub force_reply: Option<ForceReply>,
}

impl ReplyMarkup {
    /// Puts the markup on a message's content.
    pub fn apply(self, content: &mut Content) {
        content.keyboard = self.inline.into();
        content.reply_keyboard = self.reply.into();
        content.remove_keyboard = self.remove.into();
        content.force_reply = self.force_reply.into();
    }
}

/// The `reply_markup` of a new message (absent or empty: nothing).
pub fn reply_markup(params: &Params) -> Result<ReplyMarkup, ApiError> {
    let Some(markup) = params.optional_object("reply_markup")? else {
        return Ok(ReplyMarkup::default());
    };
    if markup.contains_key("inline_keyboard") {
        return Ok(ReplyMarkup { inline: inline_rows(&markup)?, ..Default::default() });
    }
    if markup.contains_key("keyboard") {
        return Ok(ReplyMarkup { reply: reply_keyboard(&markup)?, ..Default::default() });
    }
    if flag(&markup, "remove_keyboard")? {
        let selective = flag(&markup, "selective")?;
        return Ok(ReplyMarkup { remove: Some(RemoveKeyboard { selective, ..Default::default() }), ..Default::default() });
    }
    if flag(&markup, "force_reply")? {
        let force = ForceReply {
            input_field_placeholder: placeholder(&markup)?,
            selective: flag(&markup, "selective")?,
            ..Default::default()
        };
        return Ok(ReplyMarkup { force_reply: Some(force), ..Default::default() });
    }
    Ok(ReplyMarkup::default())
}

/// The inline keyboard of an edit's or an inline result's `reply_markup`, if any (`Ok(None)`
/// also for an empty one). A reply keyboard cannot be edited into a message (Bot API);
/// `remove_keyboard` and `force_reply` have nothing to act on there and are ignored.
pub fn inline_keyboard(params: &Params) -> Result<Option<InlineKeyboard>, ApiError> {
    let Some(markup) = params.optional_object("reply_markup")? else {
        return Ok(None);
    };
    if markup.get("keyboard").is_some_and(|k| !k.is_null()) {
        return Err(ApiError::bad_request(
            "reply_markup here must be an inline keyboard: a reply keyboard can only come with a new message",
        ));
    }
    inline_rows(&markup)
}

fn inline_rows(markup: &Map<String, Value>) -> Result<Option<InlineKeyboard>, ApiError> {
    let rows = match markup.get("inline_keyboard") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(rows)) => rows,
        Some(_) => return Err(ApiError::bad_request("reply_markup.inline_keyboard must be an array of button rows")),
    };
    let mut keyboard = InlineKeyboard::new();
    let mut count = 0;
    for (r, row) in rows.iter().enumerate() {
        let Some(buttons) = row.as_array() else {
            return Err(ApiError::bad_request(format!("reply_markup.inline_keyboard[{r}] must be an array of buttons")));
        };
        let mut out = KeyboardRow::new();
        for (b, button) in buttons.iter().enumerate() {
            out.buttons.push(inline_button(button, &format!("reply_markup.inline_keyboard[{r}][{b}]"))?);
            count += 1;
        }
        if !out.buttons.is_empty() {
            keyboard.rows.push(out);
        }
    }
    if count > BUTTONS_MAX {
        return Err(ApiError::bad_request(format!("an inline keyboard has at most {BUTTONS_MAX} buttons, got {count}")));
    }
    Ok((!keyboard.rows.is_empty()).then_some(keyboard))
}

/// A callback button or a URL button.
fn inline_button(button: &Value, at: &str) -> Result<InlineButton, ApiError> {
    let Some(o) = button.as_object() else {
        return Err(ApiError::bad_request(format!("{at} must be an InlineKeyboardButton object")));
    };
    let text = button_text(o, at)?;
    if let Some(other) = OTHER_BUTTON_KINDS.iter().find(|(k, _)| o.get(*k).is_some_and(|v| !v.is_null())) {
        return Err(other_button(at, *other, "callback_data and url buttons"));
    }
    let present = |k: &str| o.get(k).is_some_and(|v| !v.is_null());
    match (present("callback_data"), present("url")) {
        (true, true) => Err(ApiError::bad_request(format!("{at} must have exactly one of callback_data and url"))),
        (false, false) => Err(ApiError::bad_request(format!(
            "{at} has neither callback_data nor url: only callback and URL buttons are supported"
        ))),
        (false, true) => {
            let Some(Value::String(raw)) = o.get("url") else {
                return Err(ApiError::bad_request(format!("{at}.url must be a string")));
            };
            let url = checked_link(raw)
                .ok_or_else(|| ApiError::bad_request(format!("{at}.url is not an http(s) or tg: link: {raw:?}")))?;
            Ok(InlineButton { text, url, ..Default::default() })
        }
        (true, false) => {
            let Some(Value::String(data)) = o.get("callback_data") else {
                return Err(ApiError::bad_request(format!("{at}.callback_data must be a string")));
            };
            if data.is_empty() || data.len() > CALLBACK_DATA_MAX {
                return Err(ApiError::bad_request(format!(
                    "{at}.callback_data must be 1 to {CALLBACK_DATA_MAX} bytes, got {}",
                    data.len()
                )));
            }
            Ok(InlineButton { text, callback_data: data.clone(), ..Default::default() })
        }
    }
}

fn reply_keyboard(markup: &Map<String, Value>) -> Result<Option<ReplyKeyboard>, ApiError> {
    let Some(Value::Array(rows)) = markup.get("keyboard") else {
        return Err(ApiError::bad_request("reply_markup.keyboard must be an array of button rows"));
    };
    let mut keyboard = ReplyKeyboard::new();
    let mut count = 0;
    for (r, row) in rows.iter().enumerate() {
        let Some(buttons) = row.as_array() else {
            return Err(ApiError::bad_request(format!("reply_markup.keyboard[{r}] must be an array of buttons")));
        };
        let mut out = ReplyKeyboardRow::new();
        for (b, button) in buttons.iter().enumerate() {
            out.buttons.push(reply_button(button, &format!("reply_markup.keyboard[{r}][{b}]"))?);
            count += 1;
        }
        if !out.buttons.is_empty() {
            keyboard.rows.push(out);
        }
    }
    if count > REPLY_BUTTONS_MAX {
        return Err(ApiError::bad_request(format!("a reply keyboard has at most {REPLY_BUTTONS_MAX} buttons, got {count}")));
    }
    if keyboard.rows.is_empty() {
        return Ok(None);
    }
    keyboard.resize_keyboard = flag(markup, "resize_keyboard")?;
    keyboard.one_time_keyboard = flag(markup, "one_time_keyboard")?;
    keyboard.is_persistent = flag(markup, "is_persistent")?;
    keyboard.selective = flag(markup, "selective")?;
    keyboard.input_field_placeholder = placeholder(markup)?;
    Ok(Some(keyboard))
}

/// A KeyboardButton: its text (a bare string is a text button), and what it requests.
fn reply_button(button: &Value, at: &str) -> Result<ReplyButton, ApiError> {
    let o = match button {
        Value::String(text) if !text.trim().is_empty() => {
            return Ok(ReplyButton { text: text.clone(), ..Default::default() });
        }
        Value::Object(o) => o,
        _ => return Err(ApiError::bad_request(format!("{at} must be a KeyboardButton object or a non-empty string"))),
    };
    let text = button_text(o, at)?;
    if let Some(other) = OTHER_REQUESTS.iter().find(|(k, _)| o.get(*k).is_some_and(|v| !v.is_null() && v != &Value::Bool(false))) {
        return Err(other_button(at, *other, "text, request_contact, request_location and request_poll buttons"));
    }
    let poll = poll_request(o, at)?;
    let request = match (flag(o, "request_contact")?, flag(o, "request_location")?, poll.is_some()) {
        (false, false, false) => Request::TEXT,
        (true, false, false) => Request::CONTACT,
        (false, true, false) => Request::LOCATION,
        (false, false, true) => Request::POLL,
        _ => {
            return Err(ApiError::bad_request(format!(
                "{at} requests more than one of a contact, a location and a poll; a button requests one"
            )));
        }
    };
    Ok(ReplyButton { text, request: request.into(), poll_kind: poll.unwrap_or_default().into(), ..Default::default() })
}

/// A button's `request_poll` (a KeyboardButtonPollType): which polls the user may make, by
/// its `type` ("quiz", "regular", or none for either); `None` when the button asks for none.
fn poll_request(o: &Map<String, Value>, at: &str) -> Result<Option<PollKind>, ApiError> {
    let poll_type = match o.get("request_poll") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(p)) => p.get("type"),
        Some(_) => return Err(ApiError::bad_request(format!("{at}.request_poll must be a KeyboardButtonPollType object"))),
    };
    Ok(Some(match poll_type {
        None | Some(Value::Null) => PollKind::ANY_POLL,
        Some(Value::String(t)) if t == "quiz" => PollKind::QUIZ_POLL,
        Some(Value::String(t)) if t == "regular" => PollKind::REGULAR_POLL,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "{at}.request_poll.type must be \"quiz\" or \"regular\" (or absent: either), got {other}"
            )))
        }
    }))
}

fn button_text(o: &Map<String, Value>, at: &str) -> Result<String, ApiError> {
    match o.get("text") {
        Some(Value::String(t)) if !t.trim().is_empty() => Ok(t.clone()),
        _ => Err(ApiError::bad_request(format!("{at}.text must be a non-empty string"))),
    }
}

/// A boolean field of the markup (absent or null: false; SDKs send real booleans).
fn flag(o: &Map<String, Value>, name: &str) -> Result<bool, ApiError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_request(format!("reply_markup.{name} must be a boolean"))),
    }
}

fn placeholder(o: &Map<String, Value>) -> Result<String, ApiError> {
    match o.get("input_field_placeholder") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(p)) if p.chars().count() <= PLACEHOLDER_MAX => Ok(p.clone()),
        Some(Value::String(_)) => Err(ApiError::bad_request(format!(
            "reply_markup.input_field_placeholder must be at most {PLACEHOLDER_MAX} characters"
        ))),
        Some(_) => Err(ApiError::bad_request("reply_markup.input_field_placeholder must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params(v: Value) -> Params {
        let mut p = Params::new();
        p.insert_json("reply_markup", v);
        p
    }

    fn markup(v: Value) -> Result<ReplyMarkup, ApiError> {
        reply_markup(&params(v))
    }

    fn bad(v: Value) -> String {
        let e = markup(v).expect_err("refused");
        assert_eq!(e.status, 400);
        e.description
    }

    fn inline(v: Value) -> Option<InlineKeyboard> {
        markup(v).expect("ok").inline
    }

    #[test]
    fn callback_and_url_buttons_are_read_with_their_rows() {
        let k = inline(json!({"inline_keyboard": [[{"text": "A", "callback_data": "a", "hide": false}], [], [
            {"text": "B", "callback_data": "b"}, {"text": "Site", "url": "example.org/x"}]]}))
        .expect("keyboard");
        let rows: Vec<Vec<(&str, &str)>> =
            k.rows.iter().map(|r| r.buttons.iter().map(|b| (b.callback_data.as_str(), b.url.as_str())).collect()).collect();
        assert_eq!(rows, vec![vec![("a", "")], vec![("b", ""), ("", "http://example.org/x")]], "empty rows dropped, links normalised");
        assert_eq!(inline(json!({"inline_keyboard": []})), None);
        assert_eq!(markup(json!({})).expect("ok"), ReplyMarkup::default());
        assert_eq!(reply_markup(&Params::new()).expect("ok"), ReplyMarkup::default());
        assert_eq!(inline_keyboard(&params(json!({"remove_keyboard": true}))).expect("ok"), None, "edits ignore it");
    }

    #[test]
    fn other_inline_buttons_and_bad_data_are_refused_by_name() {
        let d = bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": "a"}, {"text": "q", "switch_inline_query": ""}]]}));
        assert!(d.contains("switch_inline_query buttons") && d.contains("[0][1]"), "{d}");
        assert!(bad(json!({"inline_keyboard": [[{"text": "x"}]]})).contains("neither callback_data nor url"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "url": "https://a.org", "callback_data": "a"}]]})).contains("exactly one"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "url": "javascript:alert(1)"}]]})).contains("not an http(s) or tg: link"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "url": 5}]]})).contains("url must be a string"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": ""}]]})).contains("1 to 64 bytes"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": "é".repeat(33)}]]})).contains("got 66"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "", "callback_data": "a"}]]})).contains("text must be"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": 5}]]})).contains("must be a string"));
        assert!(bad(json!({"inline_keyboard": {"a": 1}})).contains("array of button rows"));
        let many: Vec<Value> = (0..101).map(|i| json!([{"text": "b", "callback_data": i.to_string()}])).collect();
        assert!(bad(json!({"inline_keyboard": many})).contains("at most 100 buttons"));
    }

    #[test]
    fn reply_keyboards_carry_their_buttons_and_options() {
        let m = markup(json!({"keyboard": [["Yes", {"text": "No"}], [], [{"text": "Call me", "request_contact": true},
            {"text": "Where", "request_location": true, "request_poll": null}]],
            "resize_keyboard": true, "one_time_keyboard": true, "is_persistent": false,
            "input_field_placeholder": "Pick one", "selective": true}))
        .expect("ok");
        let k = m.reply.expect("reply keyboard");
        assert!(m.inline.is_none() && m.remove.is_none() && m.force_reply.is_none());
        let rows: Vec<Vec<(&str, Request)>> =
            k.rows.iter().map(|r| r.buttons.iter().map(|b| (b.text.as_str(), b.request.enum_value_or_default())).collect()).collect();
        assert_eq!(
            rows,
            vec![vec![("Yes", Request::TEXT), ("No", Request::TEXT)], vec![("Call me", Request::CONTACT), ("Where", Request::LOCATION)]]
        );
        assert!(k.resize_keyboard && k.one_time_keyboard && !k.is_persistent && k.selective);
        assert_eq!(k.input_field_placeholder, "Pick one");
        assert_eq!(markup(json!({"keyboard": [[]]})).expect("ok"), ReplyMarkup::default(), "no buttons: no keyboard");
    }

    #[test]
    fn poll_buttons_carry_the_kind_of_poll_asked_for() {
        let m = markup(json!({"keyboard": [[{"text": "Any", "request_poll": {}}, {"text": "Quiz", "request_poll": {"type": "quiz"}},
            {"text": "Poll", "request_poll": {"type": "regular"}}, {"text": "Either", "request_poll": {"type": null}}]]}))
        .expect("ok");
        let kinds: Vec<(Request, PollKind)> = m.reply.expect("keyboard").rows[0]
            .buttons
            .iter()
            .map(|b| (b.request.enum_value_or_default(), b.poll_kind.enum_value_or_default()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Request::POLL, PollKind::ANY_POLL),
                (Request::POLL, PollKind::QUIZ_POLL),
                (Request::POLL, PollKind::REGULAR_POLL),
                (Request::POLL, PollKind::ANY_POLL)
            ]
        );
    }

    #[test]
    fn remove_and_force_reply_travel() {
        let m = markup(json!({"remove_keyboard": true, "selective": true})).expect("ok");
        assert_eq!(m.remove.map(|r| r.selective), Some(true));
        let m = markup(json!({"force_reply": true, "input_field_placeholder": "Your name"})).expect("ok");
        assert_eq!(m.force_reply.map(|f| f.input_field_placeholder), Some("Your name".to_string()));
        assert_eq!(markup(json!({"force_reply": false})).expect("ok"), ReplyMarkup::default());
    }

    #[test]
    fn bad_reply_keyboards_are_refused_by_name() {
        assert!(bad(json!({"keyboard": [[{"text": "Who", "request_users": {"request_id": 1}}]]})).contains("request_users buttons"));
        let e = bad(json!({"keyboard": [[{"text": "App", "web_app": {"url": "https://a.org"}}]]}));
        assert!(e.contains("web_app buttons are not supported by this gateway (web apps are not supported)"), "{e}");
        let e = bad(json!({"inline_keyboard": [[{"text": "Buy", "pay": true}]]}));
        assert!(e.contains("[0][0]: pay buttons are not supported by this gateway (payments are not supported)"), "{e}");
        let e = bad(json!({"inline_keyboard": [[{"text": "Play", "callback_game": {}}]]}));
        assert!(e.contains("(games are not supported)"), "{e}");
        let e = bad(json!({"inline_keyboard": [[{"text": "Copy", "copy_text": {"text": "x"}}]]}));
        assert!(e.contains("copy_text buttons are not supported by this gateway yet"), "{e}");
        assert!(bad(json!({"keyboard": [[{"text": "x", "request_contact": true, "request_location": true}]]})).contains("a button requests one"));
        assert!(bad(json!({"keyboard": [[{"text": "x", "request_location": true, "request_poll": {}}]]})).contains("a button requests one"));
        let e = bad(json!({"keyboard": [[{"text": "x", "request_poll": {"type": "survey"}}]]}));
        assert!(e.contains("[0][0].request_poll.type must be \"quiz\" or \"regular\""), "{e}");
        assert!(bad(json!({"keyboard": [[{"text": "x", "request_poll": true}]]})).contains("KeyboardButtonPollType object"));
        assert!(bad(json!({"keyboard": [[""]]})).contains("[0][0] must be"));
        assert!(bad(json!({"keyboard": [[{"text": " "}]]})).contains("text must be"));
        assert!(bad(json!({"keyboard": "Yes"})).contains("array of button rows"));
        assert!(bad(json!({"keyboard": [["a"]], "resize_keyboard": "yes"})).contains("resize_keyboard must be a boolean"));
        assert!(bad(json!({"keyboard": [["a"]], "input_field_placeholder": "x".repeat(65)})).contains("at most 64"));
        let many: Vec<Value> = (0..301).map(|i| json!([i.to_string()])).collect();
        assert!(bad(json!({"keyboard": many})).contains("at most 300 buttons"));
        let e = inline_keyboard(&params(json!({"keyboard": [["a"]]}))).expect_err("an edit takes no reply keyboard");
        assert!(e.description.contains("must be an inline keyboard"), "{}", e.description);
    }

    #[test]
    fn the_markup_lands_on_the_content() {
        let mut c = Content::new();
        markup(json!({"keyboard": [["a"]]})).expect("ok").apply(&mut c);
        assert!(c.reply_keyboard.is_some() && c.keyboard.is_none() && c.force_reply.is_none());
    }
}
