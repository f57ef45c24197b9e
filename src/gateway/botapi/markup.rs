//! `reply_markup`: what the gateway can deliver, and a 400 naming what it cannot. Inline
//! keyboards of callback buttons travel end to end; every other button kind, and reply
//! keyboards, are refused (never sent without their buttons, which the bot would not notice).
//! `remove_keyboard` and `force_reply` have nothing to remove or force in a dialog without
//! reply keyboards, and are accepted.

use serde_json::Value;

use super::{ApiError, Params};
use crate::wire::e2e::{InlineButton, InlineKeyboard, KeyboardRow};

/// Longest `callback_data`, in bytes (Bot API).
pub const CALLBACK_DATA_MAX: usize = 64;
/// Most buttons in one inline keyboard (Bot API).
pub const BUTTONS_MAX: usize = 100;

/// Inline keyboard button fields of the Bot API other than `callback_data`: each names a kind
/// of button this gateway does not deliver yet.
const OTHER_BUTTON_KINDS: &[&str] = &[
    "url",
    "login_url",
    "web_app",
    "switch_inline_query",
    "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat",
    "copy_text",
    "callback_game",
    "pay",
];

/// The inline keyboard of `reply_markup`, if any (`Ok(None)` also for an empty keyboard,
/// `remove_keyboard` and `force_reply`).
pub fn inline_keyboard(params: &Params) -> Result<Option<InlineKeyboard>, ApiError> {
    let Some(markup) = params.optional_object("reply_markup")? else {
        return Ok(None);
    };
    if let Some(rows) = markup.get("keyboard") {
        if rows.as_array().is_none_or(|rows| rows.iter().any(|r| r.as_array().is_none_or(|b| !b.is_empty()))) {
            return Err(ApiError::bad_request(
                "reply keyboards (reply_markup.keyboard) are not supported by this gateway yet; use an inline keyboard",
            ));
        }
    }
    let rows = match markup.get("inline_keyboard") {
        None => return Ok(None),
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
            out.buttons.push(callback_button(button, &format!("reply_markup.inline_keyboard[{r}][{b}]"))?);
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

fn callback_button(button: &Value, at: &str) -> Result<InlineButton, ApiError> {
    let Some(o) = button.as_object() else {
        return Err(ApiError::bad_request(format!("{at} must be an InlineKeyboardButton object")));
    };
    let text = match o.get("text") {
        Some(Value::String(t)) if !t.trim().is_empty() => t.clone(),
        _ => return Err(ApiError::bad_request(format!("{at}.text must be a non-empty string"))),
    };
    if let Some(kind) = OTHER_BUTTON_KINDS.iter().find(|k| o.get(**k).is_some_and(|v| !v.is_null())) {
        return Err(ApiError::bad_request(format!(
            "{at}: {kind} buttons are not supported by this gateway yet; only callback_data buttons are"
        )));
    }
    let data = match o.get("callback_data") {
        Some(Value::String(d)) => d.clone(),
        Some(_) => return Err(ApiError::bad_request(format!("{at}.callback_data must be a string"))),
        None => return Err(ApiError::bad_request(format!("{at} has no callback_data: only callback buttons are supported"))),
    };
    if data.is_empty() || data.len() > CALLBACK_DATA_MAX {
        return Err(ApiError::bad_request(format!(
            "{at}.callback_data must be 1 to {CALLBACK_DATA_MAX} bytes, got {}",
            data.len()
        )));
    }
    Ok(InlineButton { text, callback_data: data, ..Default::default() })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn markup(v: Value) -> Result<Option<InlineKeyboard>, ApiError> {
        let mut p = Params::new();
        p.insert_json("reply_markup", v);
        inline_keyboard(&p)
    }

    fn bad(v: Value) -> String {
        let e = markup(v).expect_err("refused");
        assert_eq!(e.status, 400);
        e.description
    }

    #[test]
    fn callback_buttons_are_read_with_their_rows() {
        let k = markup(json!({"inline_keyboard": [[{"text": "A", "callback_data": "a", "hide": false}], [], [
            {"text": "B", "callback_data": "b"}, {"text": "C", "callback_data": "c"}]]}))
        .expect("ok")
        .expect("keyboard");
        let rows: Vec<Vec<&str>> = k.rows.iter().map(|r| r.buttons.iter().map(|b| b.callback_data.as_str()).collect()).collect();
        assert_eq!(rows, vec![vec!["a"], vec!["b", "c"]], "empty rows are dropped, telegraf's hide is ignored");
        assert_eq!(markup(json!({"inline_keyboard": []})).expect("ok"), None);
        assert_eq!(markup(json!({"remove_keyboard": true})).expect("ok"), None);
        assert_eq!(markup(json!({"force_reply": true})).expect("ok"), None);
        assert_eq!(inline_keyboard(&Params::new()).expect("ok"), None);
    }

    #[test]
    fn other_buttons_and_bad_data_are_refused_by_name() {
        let d = bad(json!({"inline_keyboard": [[{"text": "Site", "url": "https://example.org"}]]}));
        assert!(d.contains("url buttons are not supported") && d.contains("[0][0]"), "{d}");
        let d = bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": "a"}, {"text": "q", "switch_inline_query": ""}]]}));
        assert!(d.contains("switch_inline_query buttons") && d.contains("[0][1]"), "{d}");
        assert!(bad(json!({"inline_keyboard": [[{"text": "x"}]]})).contains("no callback_data"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": ""}]]})).contains("1 to 64 bytes"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": "é".repeat(33)}]]})).contains("got 66"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "", "callback_data": "a"}]]})).contains("text must be"));
        assert!(bad(json!({"inline_keyboard": [[{"text": "x", "callback_data": 5}]]})).contains("must be a string"));
        assert!(bad(json!({"inline_keyboard": {"a": 1}})).contains("array of button rows"));
        assert!(bad(json!({"keyboard": [[{"text": "Yes"}]]})).contains("reply keyboards"));
        let many: Vec<Value> = (0..101).map(|i| json!([{"text": "b", "callback_data": i.to_string()}])).collect();
        assert!(bad(json!({"inline_keyboard": many})).contains("at most 100 buttons"));
    }
}
