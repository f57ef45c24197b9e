//! `sendPoll`: a regular poll or a quiz, anonymous or not, with one or several answers and an
//! optional open period, to a private chat. Votes arrive from the user's client (`PollVote`)
//! and become `poll_answer` and `poll` updates (`updates::poll_vote_updates`); `stopPoll` is in
//! `editing.rs`, with the other changes to a sent message.

use protobuf::MessageField;
use serde_json::Value;

use super::messages::{reply_request, reply_target, send_new};
use super::target::{chat_id, known_chat};
use crate::gateway::botapi::{markup, params, ApiError, Params};
use crate::gateway::runtime::unix_now;
use crate::gateway::ctx::Sending;
use crate::gateway::store::groups;
use crate::wire::e2e::poll::Type as PollType;
use crate::wire::e2e::{Content, Poll, PollOption};
use crate::wire::polls;

pub(super) fn send_poll(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let chat_id = chat_id(params, "chat_id")?;
    if groups::is_group_chat_id(chat_id) {
        return Err(ApiError::bad_request("polls in groups and channels are not supported by this gateway yet"));
    }
    let poll = poll_request(params, unix_now())?;
    let keyboard = markup::inline_keyboard(params)?;
    let (reply_to, allow_without) = reply_request(params, chat_id)?;
    let chat = known_chat(bot, chat_id)?;
    let mut content = Content::new();
    content.set_poll(poll);
    content.reply_to_message_id = reply_target(bot, chat_id, reply_to, allow_without)?;
    content.keyboard = MessageField::from_option(keyboard);
    send_new(bot, &chat, content)
}

/// `sendPoll`'s poll at `now`: `question`, `options` (InputPollOption objects or plain
/// strings), `type`, `is_anonymous` (default true, as in the Bot API),
/// `allows_multiple_answers`, `allows_revoting` (default: true for a regular poll, false for a
/// quiz), `correct_option_ids` (or the older `correct_option_id`; a quiz's, required),
/// `explanation`, `open_period` or `close_date` (5 to 600 seconds ahead), `is_closed`.
/// `shuffle_options`, `hide_results_until_closes` (the user sees counts only once it closes
/// anyway), `members_only` (channels only) and `country_codes` are accepted and have no
/// effect; what this gateway cannot carry (formatted texts, media, a description, options
/// added later) is refused rather than dropped, before this runs (`refusals`).
pub(super) fn poll_request(params: &Params, now: i64) -> Result<Poll, ApiError> {
    let kind = match params.optional_str("type")?.as_deref() {
        None | Some("") | Some("regular") => PollType::REGULAR,
        Some("quiz") => PollType::QUIZ,
        Some(other) => return Err(ApiError::bad_request(format!("type must be \"regular\" or \"quiz\", got {other:?}"))),
    };
    let correct_option_ids = correct_option_ids(params)?;
    if kind == PollType::QUIZ && correct_option_ids.is_empty() {
        return Err(ApiError::bad_request("correct_option_ids is required for a quiz"));
    }
    let poll = Poll {
        question: params.required_str("question")?,
        options: options(params)?,
        type_: kind.into(),
        is_anonymous: params.optional_bool("is_anonymous")?.unwrap_or(true),
        allows_multiple_answers: params.flag("allows_multiple_answers")?,
        allows_revoting: params.optional_bool("allows_revoting")?.unwrap_or(kind == PollType::REGULAR),
        correct_option_ids,
        explanation: params.optional_str("explanation")?.unwrap_or_default(),
        close_date: close_date(params, now)?,
        is_closed: params.flag("is_closed")?,
        ..Default::default()
    };
    polls::check_poll(&poll).map_err(ApiError::bad_request)?;
    Ok(poll)
}

/// `correct_option_ids` (a JSON array of indexes, or its text) or the older single
/// `correct_option_id`; empty when neither is given.
fn correct_option_ids(params: &Params) -> Result<Vec<u32>, ApiError> {
    let bad = || ApiError::bad_request("correct_option_ids must be a JSON array of option indexes (0, 1, ...)");
    if let Some(list) = params.optional_array("correct_option_ids").map_err(|_| bad())? {
        return list.iter().map(|v| params::as_i64(v).and_then(|i| u32::try_from(i).ok()).ok_or_else(bad)).collect();
    }
    match params.optional_i64("correct_option_id")? {
        Some(id) => Ok(vec![u32::try_from(id).map_err(|_| bad())?]),
        None => Ok(Vec::new()),
    }
}

/// `options`: a JSON array (or its text) of InputPollOption (`{"text": ...}`) or of strings,
/// as SDKs older and newer send them.
fn options(params: &Params) -> Result<Vec<PollOption>, ApiError> {
    let list = params.optional_array("options")?.ok_or_else(|| ApiError::bad_request("options is required"))?;
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            let text = match v {
                Value::Object(o) => o.get("text").and_then(params::as_text),
                other => params::as_text(other),
            };
            text.map(|text| PollOption { text, ..Default::default() })
                .ok_or_else(|| ApiError::bad_request(format!("options[{i}] must be an InputPollOption with text, or a string")))
        })
        .collect()
}

/// `open_period` (seconds from now) or `close_date` (unix time), 5 to 600 seconds ahead; 0
/// when neither is given.
fn close_date(params: &Params, now: i64) -> Result<i64, ApiError> {
    let range = polls::MIN_OPEN_PERIOD..=polls::MAX_OPEN_PERIOD;
    match (params.optional_i64("open_period")?, params.optional_i64("close_date")?) {
        (Some(_), Some(_)) => Err(ApiError::bad_request("open_period and close_date can't be used together")),
        (Some(p), None) if range.contains(&p) => Ok(now + p),
        (None, Some(d)) if range.contains(&(d - now)) => Ok(d),
        (Some(_), None) => Err(ApiError::bad_request("open_period must be between 5 and 600 seconds")),
        (None, Some(_)) => Err(ApiError::bad_request("close_date must be 5 to 600 seconds in the future")),
        (None, None) => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, form, p};
    use super::*;

    #[test]
    fn polls_read_from_json_and_forms() {
        let poll = poll_request(&p(json!({"question": "Lunch?", "options": [{"text": "Pizza"}, {"text": "Soup"}]})), 100).expect("json");
        assert_eq!((poll.question.as_str(), poll.options.len(), poll.is_anonymous), ("Lunch?", 2, true));
        assert_eq!((poll.type_.enum_value(), poll.close_date), (Ok(PollType::REGULAR), 0));
        let poll = poll_request(
            &form(&[
                ("question", "2+2?"),
                ("options", r#"["3", "4", "5"]"#),
                ("type", "quiz"),
                ("correct_option_ids", "[1]"),
                ("is_anonymous", "false"),
                ("open_period", "60"),
                ("explanation", "basic"),
            ]),
            100,
        )
        .expect("form quiz");
        assert_eq!((poll.options[1].text.as_str(), poll.correct_option_ids.clone(), poll.is_anonymous), ("4", vec![1], false));
        assert_eq!((poll.close_date, poll.allows_revoting), (160, false), "a quiz answer is final by default");
        let legacy = poll_request(&p(json!({"question": "Q", "options": ["a", "b"], "type": "quiz", "correct_option_id": 0})), 100)
            .expect("the older single correct_option_id");
        assert_eq!(legacy.correct_option_ids, vec![0]);
        let multi = poll_request(&p(json!({"question": "Q", "options": ["a", "b"], "allows_multiple_answers": true, "close_date": 200})), 100)
            .expect("multiple");
        assert!(multi.allows_multiple_answers && multi.close_date == 200 && multi.allows_revoting);
        let fixed = poll_request(&p(json!({"question": "Q", "options": ["a", "b"], "allows_revoting": false, "shuffle_options": true})), 100)
            .expect("accepted flags");
        assert!(!fixed.allows_revoting);
    }

    #[test]
    fn poll_refusals_say_what_is_wrong() {
        let with = |v: Value| bad(poll_request(&p(v), 100));
        assert_eq!(with(json!({"options": ["a", "b"]})), "Bad Request: question is required");
        assert_eq!(with(json!({"question": "Q"})), "Bad Request: options is required");
        assert!(with(json!({"question": "Q", "options": ["a"]})).contains("2 to 12 options"));
        assert!(with(json!({"question": "Q", "options": ["a", {"x": 1}]})).contains("options[1]"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "type": "quiz"})).contains("correct_option_ids is required"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "type": "quiz", "correct_option_ids": [2]})).contains("correct_option_ids"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "type": "quiz", "correct_option_ids": ["x"]})).contains("correct_option_ids"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "type": "vote"})).contains("type must be"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "open_period": 601})).contains("open_period"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "close_date": 101})).contains("close_date"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "open_period": 60, "close_date": 200})).contains("together"));
        assert!(with(json!({"question": "Q", "options": ["a", "b"], "explanation": "why"})).contains("quizzes only"));
    }
}
