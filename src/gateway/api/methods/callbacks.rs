//! Button presses: `answerCallbackQuery`. The press itself arrives as a `callback_query`
//! update (`gateway::updates::enqueue_callback_query`), after its signed context was checked.

use serde_json::Value;

use super::messages::SEND_WAIT;
use super::store_error;
use crate::gateway::botapi::text::entities::utf16_len;
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::outbox;
use crate::gateway::runtime::{unix_now, BotShared};
use crate::gateway::store::chats;
use crate::wire::e2e::{CallbackAnswer, Content};

/// Longest notification text, in characters (Bot API: 0-200).
pub const ANSWER_TEXT_MAX: usize = 200;

/// `answerCallbackQuery`: `text` (and `show_alert`) reach the user as a notification. A known
/// press is answered once: answering it again is accepted and sends nothing; an unknown id is 400.
pub(super) fn answer_callback_query(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let id = params.required_str("callback_query_id")?;
    let text = params.optional_str("text")?.unwrap_or_default();
    if text.chars().count() > ANSWER_TEXT_MAX || utf16_len(&text) > 2 * ANSWER_TEXT_MAX {
        return Err(ApiError::bad_request(format!("callback answer text is longer than {ANSWER_TEXT_MAX} characters")));
    }
    let show_alert = params.flag("show_alert")?;
    if params.optional_str("url")?.is_some_and(|u| !u.is_empty()) {
        return Err(ApiError::bad_request("url in answerCallbackQuery is not supported by this gateway (no games)"));
    }
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
    content.set_callback_answer(CallbackAnswer { press_id: callback.press_id, text, show_alert, ..Default::default() });
    outbox::submit(bot, callback.chat_id, content, SEND_WAIT)?;
    Ok(Value::Bool(true))
}
