//! Inline mode: `answerInlineQuery`. The query arrives as an `inline_query` update
//! (`gateway::updates::enqueue_inline_query`); the answer travels end to end to the user's
//! devices, bound to the platform's session, which refuses it once the user chose a result or
//! after 5 minutes (then this method answers 400 saying which).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::messages::{formatted_text, SEND_WAIT};
use super::store_error;
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::outbox;
use crate::gateway::runtime::BotShared;
use crate::gateway::store::inline;
use crate::wire::e2e::{Content, InlineArticle, InlineResults, Text};

/// Most results in one answer (Bot API).
pub const RESULTS_MAX: usize = 50;
/// Longest result id, in bytes (Bot API).
pub const RESULT_ID_MAX: usize = 64;

/// The article results of an answer, checked.
pub fn results_request(params: &Params) -> Result<Vec<InlineArticle>, ApiError> {
    let Some(results) = params.optional_array("results")? else {
        return Err(ApiError::bad_request("results is required"));
    };
    if results.len() > RESULTS_MAX {
        return Err(ApiError::bad_request(format!("at most {RESULTS_MAX} results are allowed, got {}", results.len())));
    }
    let mut ids = BTreeSet::new();
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let article = article(r, i)?;
            if !ids.insert(article.id.clone()) {
                return Err(ApiError::bad_request(format!("results[{i}]: duplicate result id {:?}", article.id)));
            }
            Ok(article)
        })
        .collect()
}

fn article(r: &Value, i: usize) -> Result<InlineArticle, ApiError> {
    let at = format!("results[{i}]");
    let o = r.as_object().ok_or_else(|| ApiError::bad_request(format!("{at} must be an InlineQueryResult object")))?;
    let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
    if kind != "article" {
        return Err(ApiError::bad_request(format!(
            "{at}: inline results of type {kind:?} are not supported by this gateway yet; only \"article\" is"
        )));
    }
    let str_field = |name: &str| o.get(name).and_then(Value::as_str).map(str::to_string);
    let id = str_field("id").unwrap_or_default();
    if id.is_empty() || id.len() > RESULT_ID_MAX {
        return Err(ApiError::bad_request(format!("{at}.id must be 1 to {RESULT_ID_MAX} bytes")));
    }
    let title = str_field("title").filter(|t| !t.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("{at}.title must be a non-empty string")))?;
    if o.get("reply_markup").is_some_and(|m| m.get("inline_keyboard").and_then(Value::as_array).is_some_and(|k| !k.is_empty())) {
        return Err(ApiError::bad_request(format!(
            "{at}: buttons on inline results are not supported by this gateway (the user, not the bot, sends the chosen message)"
        )));
    }
    let content = o
        .get("input_message_content")
        .and_then(Value::as_object)
        .ok_or_else(|| ApiError::bad_request(format!("{at}.input_message_content must be an object")))?;
    if !content.contains_key("message_text") {
        return Err(ApiError::bad_request(format!(
            "{at}.input_message_content: only text content (message_text) is supported by this gateway"
        )));
    }
    let (text, entities) = formatted_text(&text_params(content)).map_err(|e| {
        ApiError::new(e.status, format!("{}: {at}.input_message_content", e.description))
    })?;
    Ok(InlineArticle {
        id,
        title,
        description: str_field("description").unwrap_or_default(),
        message: protobuf::MessageField::some(Text { text, entities, ..Default::default() }),
        ..Default::default()
    })
}

/// InputTextMessageContent as the parameters of a text: `message_text` is `text`.
fn text_params(content: &Map<String, Value>) -> Params {
    let mut p = Params::new();
    for (k, v) in content {
        let name = if k == "message_text" { "text" } else { k.as_str() };
        p.insert_json(name, v.clone());
    }
    p
}

/// `answerInlineQuery`: the results (a later answer replaces the list) reach the user who
/// opened the session.
pub(super) fn answer_inline_query(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let id = params.required_str("inline_query_id")?;
    let results = results_request(params)?;
    let cache_time = params.optional_i64("cache_time")?.unwrap_or(300).clamp(0, i32::MAX as i64) as i32;
    let is_personal = params.flag("is_personal")?;
    if params.optional_str("next_offset")?.is_some_and(|o| !o.is_empty()) {
        return Err(ApiError::bad_request("next_offset is not supported by this gateway (no pagination of inline results)"));
    }
    let unknown = || ApiError::bad_request("query is too old and response timeout expired or query ID is invalid");
    let session_id: u64 = id.trim().parse().map_err(|_| unknown())?;
    let session = bot.store.read(|c| inline::get(c, session_id)).map_err(store_error)?.ok_or_else(unknown)?;
    let mut content = Content::new();
    content.set_inline_results(InlineResults { session_id, results, cache_time, is_personal, ..Default::default() });
    outbox::submit(bot, session.user_id as i64, content, SEND_WAIT)?;
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, p};
    use super::*;

    fn art(id: &str) -> Value {
        json!({"type": "article", "id": id, "title": "T", "input_message_content": {"message_text": "<b>hi</b>", "parse_mode": "HTML"}})
    }

    #[test]
    fn articles_with_text_are_read_and_others_refused() {
        let r = results_request(&p(json!({"results": [art("a"), art("b")]}))).expect("ok");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].message.text, "hi");
        assert_eq!(r[0].message.entities[0].type_, "bold");
        assert!(bad(results_request(&p(json!({"results": [art("a"), art("a")]})))).contains("duplicate"));
        let photo = json!({"results": [{"type": "photo", "id": "p", "photo_url": "x", "thumbnail_url": "x"}]});
        assert!(bad(results_request(&p(photo))).contains("\"photo\" are not supported"));
        let no_text = json!({"results": [{"type": "article", "id": "a", "title": "T", "input_message_content": {"latitude": 1}}]});
        assert!(bad(results_request(&p(no_text))).contains("message_text"));
        assert!(bad(results_request(&p(json!({"results": [{"type": "article", "id": "", "title": "T"}]})))).contains("1 to 64"));
        let many: Vec<Value> = (0..51).map(|i| art(&i.to_string())).collect();
        assert!(bad(results_request(&p(json!({"results": many})))).contains("at most 50"));
        assert!(bad(results_request(&p(json!({})))).contains("results is required"));
        let both = json!({"results": [{"type": "article", "id": "a", "title": "T",
            "input_message_content": {"message_text": "x", "parse_mode": "HTML", "entities": []}}]});
        assert!(bad(results_request(&p(both))).contains("can't be used together"));
    }
}
