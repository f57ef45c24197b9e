//! The batch forms of three methods: `forwardMessages`, `copyMessages` and `deleteMessages`.
//! Each runs its single method (`forwardMessage`, `copyMessage`, `deleteMessage`) once per
//! identifier, in order, so a batch follows exactly the single method's rules and path.
//!
//! As in the Bot API, a message that cannot be found, forwarded or deleted is skipped (a 400
//! of the single method). Any other failure (the platform unreachable, 429) stops the batch
//! and is the answer: what went before it was sent. When every message was skipped, the first
//! message's 400 is the answer, so a bot that names a wrong chat hears why.

use serde_json::{json, Value};

use super::{editing, messages};
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::ctx::Sending;

/// Most identifiers in one batch (Bot API).
pub const MAX_IDS: usize = 100;

pub(super) fn forward_messages(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let sent = each(bot, params, messages::forward_message)?;
    Ok(Value::Array(sent.iter().map(|m| json!({ "message_id": m["message_id"] })).collect()))
}

/// `copyMessages`: the messages without a forward mark; `remove_caption` copies files without
/// their captions.
pub(super) fn copy_messages(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let mut params = params.clone();
    if params.flag("remove_caption")? {
        params.insert_text("caption", String::new());
    }
    let sent = each(bot, &params, messages::copy_message)?;
    Ok(Value::Array(sent))
}

pub(super) fn delete_messages(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    each(bot, params, editing::delete_message)?;
    Ok(Value::Bool(true))
}

/// Runs `single` for each of `message_ids` (1 to 100, strictly increasing) with the other
/// parameters as given; the answers of those that were not skipped.
fn each(
    bot: &Sending,
    params: &Params,
    single: fn(&Sending, &Params) -> Result<Value, ApiError>,
) -> Result<Vec<Value>, ApiError> {
    let ids = message_ids(params)?;
    let mut one = params.clone();
    let mut done = Vec::with_capacity(ids.len());
    let mut first_skip = None;
    for id in ids {
        one.insert_json("message_id", json!(id));
        match single(bot, &one) {
            Ok(answer) => done.push(answer),
            Err(e) if e.status == 400 => {
                log::debug!("bot @{}: batch skips message {id}: {e}", bot.name);
                first_skip.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    match first_skip {
        Some(e) if done.is_empty() => Err(e),
        _ => Ok(done),
    }
}

/// `message_ids`: a JSON array (or its text) of 1 to 100 message identifiers in strictly
/// increasing order, as the Bot API requires.
fn message_ids(params: &Params) -> Result<Vec<i64>, ApiError> {
    let list = params.optional_array("message_ids")?.ok_or_else(|| ApiError::bad_request("message_ids is required"))?;
    if list.is_empty() || list.len() > MAX_IDS {
        return Err(ApiError::bad_request(format!("message_ids must list 1 to {MAX_IDS} messages, got {}", list.len())));
    }
    let ids = list
        .iter()
        .map(|v| v.as_i64().filter(|id| *id > 0))
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| ApiError::bad_request("message_ids must be positive integers"))?;
    if ids.windows(2).any(|w| w[0] >= w[1]) {
        return Err(ApiError::bad_request("message_ids must be in strictly increasing order"));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, bot, form, p};
    use super::*;

    #[test]
    fn message_ids_are_one_to_a_hundred_increasing() {
        assert_eq!(message_ids(&p(json!({"message_ids": [3, 5, 9]}))).expect("list"), vec![3, 5, 9]);
        assert_eq!(message_ids(&form(&[("message_ids", "[1,2]")])).expect("form text"), vec![1, 2]);
        assert!(bad(message_ids(&p(json!({})))).contains("message_ids is required"));
        assert!(bad(message_ids(&p(json!({"message_ids": []})))).contains("1 to 100"));
        let many: Vec<i64> = (1..=101).collect();
        assert!(bad(message_ids(&p(json!({"message_ids": many})))).contains("got 101"));
        assert!(bad(message_ids(&p(json!({"message_ids": [2, 2]})))).contains("strictly increasing"));
        assert!(bad(message_ids(&p(json!({"message_ids": [1, "x"]})))).contains("positive integers"));
        assert!(bad(message_ids(&p(json!({"message_ids": [0]})))).contains("positive integers"));
    }

    #[test]
    fn a_batch_where_every_message_is_skipped_answers_the_first_reason() {
        let (_dir, bot) = bot();
        let e = bad(delete_messages(&bot.sending(), &p(json!({"chat_id": 5, "message_ids": [1, 2]}))));
        assert!(e.contains("chat not found"), "{e}");
    }
}
