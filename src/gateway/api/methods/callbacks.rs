//! Button presses: `answerCallbackQuery`. The press itself arrives as a `callback_query`
//! update (`gateway::updates::callback_query_updates`), after its signed context was checked.

use serde_json::Value;

use super::messages::SEND_WAIT;
use super::store_error;
use crate::gateway::botapi::text::checked_link;
use crate::gateway::botapi::text::entities::utf16_len;
use crate::gateway::botapi::{ApiError, Params};
use super::submit;
use crate::gateway::runtime::unix_now;
use crate::gateway::ctx::Sending;
use crate::gateway::store::chats;
use crate::wire::e2e::{CallbackAnswer, Content};

/// Longest notification text, in characters (Bot API: 0-200).
pub const ANSWER_TEXT_MAX: usize = 200;

/// `answerCallbackQuery`: `text` (and `show_alert`) reach the user as a notification. A known
/// press is answered once: answering it again is accepted and sends nothing; an unknown id is 400.
pub(super) fn answer_callback_query(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let id = params.required_str("callback_query_id")?;
    let text = params.optional_str("text")?.unwrap_or_default();
    if text.chars().count() > ANSWER_TEXT_MAX || utf16_len(&text) > 2 * ANSWER_TEXT_MAX {
        return Err(ApiError::bad_request(format!("callback answer text is longer than {ANSWER_TEXT_MAX} characters")));
    }
    let show_alert = params.flag("show_alert")?;
    // A link the user's client offers to open (the Bot API uses it for deep links to the bot).
    let url = match params.optional_str("url")?.filter(|u| !u.is_empty()) {
        None => String::new(),
        Some(raw) => checked_link(&raw)
            .ok_or_else(|| ApiError::bad_request(format!("url must be an http(s) or tg: link, got {raw:?}")))?,
    };
    let first = {
        let id = id.clone();
        bot.store
            .write(move |c| match chats::callback(c, &id, unix_now())? {
                None => Ok(None),
                Some(cb) if cb.answered => Ok(Some(None)),
                Some(cb) => {
                    chats::mark_answered(c, &id)?;
                    Ok(Some(Some(cb)))
                }
            })
            .map_err(store_error)?
    };
    let callback = match first {
        None => return Err(ApiError::bad_request("query is too old and response timeout expired or query ID is invalid")),
        Some(None) => return Ok(Value::Bool(true)),
        Some(Some(cb)) => cb,
    };
    let mut content = Content::new();
    content.set_callback_answer(CallbackAnswer { press_id: callback.press_id, text, show_alert, url, ..Default::default() });
    if let Err(e) = submit::submit(bot, callback.chat_id, content, SEND_WAIT) {
        // An error means the answer was not sent: a retry must send it, not find it answered.
        // (No answer at all means it may have been: it stays answered.)
        if !e.is_unanswered() {
            bot.store.write(move |c| chats::mark_unanswered(c, &id)).map_err(store_error)?;
        }
        return Err(e);
    }
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testing::{bot_with_send_wait, p};
    use super::*;

    #[test]
    fn an_answer_that_was_not_sent_leaves_the_press_to_be_answered_again() {
        // No outbox thread runs, so the answer is withdrawn when the wait ends.
        let (_dir, bot) = bot_with_send_wait(Duration::from_millis(200));
        let press = chats::Callback { id: "5_p1".into(), chat_id: 5, press_id: "p1".into(), answered: false };
        bot.store.write(move |c| chats::remember_callback(c, &press, unix_now())).expect("remember");
        let e = answer_callback_query(&bot.sending(), &p(serde_json::json!({"callback_query_id": "5_p1", "text": "ok"}))).expect_err("withdrawn");
        assert_eq!(e.status, 429, "{e}");
        let press = bot.store.read(|c| chats::callback(c, "5_p1", unix_now())).expect("read").expect("kept");
        assert!(!press.answered, "the retry will send the answer");
    }
}
