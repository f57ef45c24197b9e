//! `setMessageReaction` (spec, Rules per method 6): private dialogs only, at most one ordinary
//! emoji; an empty list removes the bot's reaction. A user's reaction arrives as a
//! `message_reaction` update (`gateway::updates::reaction_updates`).

use serde_json::Value;

use super::messages::{remembered, SEND_WAIT};
use super::target::{chat_id, known_chat};
use super::store_error;
use crate::gateway::botapi::{ApiError, Params};
use super::submit;
use crate::gateway::ctx::Sending;
use crate::gateway::store::chats;
use crate::wire::e2e::{reaction_type::Kind, Content, Reaction, ReactionType};

/// Longest emoji accepted, in bytes (the longest standard reaction emoji is far shorter).
const EMOJI_MAX_BYTES: usize = 32;

/// The requested reaction: `None` removes it. Errors are shaped like the Bot API's.
pub fn reaction_request(params: &Params) -> Result<Option<String>, ApiError> {
    // The SPEC's rule (setMessageReaction: "is_big must not be true", and its error table):
    // this profile has no big reaction animation, so the request cannot be done as asked.
    if params.optional_bool("is_big")? == Some(true) {
        return Err(ApiError::bad_request(
            "REACTION_INVALID: is_big=true is not supported: this platform has no big reaction animation; send the \
             reaction without is_big",
        ));
    }
    let list = params.optional_array("reaction")?.unwrap_or_default();
    if list.len() > 1 {
        return Err(ApiError::bad_request(format!(
            "REACTIONS_TOO_MANY: a bot can set at most one reaction per message, got {}",
            list.len()
        )));
    }
    let Some(r) = list.first() else { return Ok(None) };
    let kind = r.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "emoji" => {}
        "custom_emoji" => {
            return Err(ApiError::bad_request("REACTION_INVALID: custom emoji reactions are not supported; use an ordinary emoji"));
        }
        "paid" => return Err(ApiError::bad_request("REACTION_INVALID: paid reactions are not supported")),
        _ => return Err(ApiError::bad_request(format!("REACTION_INVALID: unknown reaction type {kind:?}"))),
    }
    let emoji = r.get("emoji").and_then(Value::as_str).unwrap_or("");
    let plausible = !emoji.is_empty()
        && emoji.len() <= EMOJI_MAX_BYTES
        && emoji.chars().all(|c| !c.is_ascii() || c.is_ascii_digit() || c == '#' || c == '*');
    if !plausible {
        return Err(ApiError::bad_request(format!("REACTION_INVALID: {emoji:?} is not an emoji")));
    }
    Ok(Some(emoji.to_string()))
}

/// `setMessageReaction` on a message of the history of a private chat.
pub(super) fn set_message_reaction(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let chat_id = chat_id(params, "chat_id")?;
    if chat_id < 0 {
        return Err(ApiError::bad_request("reactions are supported in private chats only"));
    }
    let message_id = params.required_i64("message_id")?;
    let emoji = reaction_request(params)?;
    known_chat(bot, chat_id)?;
    if remembered(bot, chat_id, message_id)?.is_none() {
        return Err(ApiError::bad_request("message to react not found in this gateway's history"));
    }
    let mut reaction = Reaction { message_id: message_id as u64, ..Default::default() };
    if let Some(e) = emoji {
        reaction.reactions.push(ReactionType { kind: Some(Kind::Emoji(e)), ..Default::default() });
    }
    let mut content = Content::new();
    content.set_reaction(reaction.clone());
    submit::submit(bot, chat_id, content, SEND_WAIT)?;
    let me = bot.user_id as i64;
    bot.store.write(move |c| chats::set_reaction(c, chat_id, message_id, me, &reaction)).map_err(store_error)?;
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, p};
    use super::*;

    #[test]
    fn one_ordinary_emoji_or_none() {
        assert_eq!(reaction_request(&p(json!({"reaction": [{"type": "emoji", "emoji": "👍"}]}))).expect("ok"), Some("👍".into()));
        assert_eq!(reaction_request(&p(json!({"reaction": []}))).expect("removes"), None);
        assert_eq!(reaction_request(&p(json!({}))).expect("removes"), None);
        let two = json!({"reaction": [{"type": "emoji", "emoji": "👍"}, {"type": "emoji", "emoji": "🔥"}]});
        assert!(bad(reaction_request(&p(two))).starts_with("Bad Request: REACTIONS_TOO_MANY"));
        let custom = json!({"reaction": [{"type": "custom_emoji", "custom_emoji_id": "5"}]});
        assert!(bad(reaction_request(&p(custom))).contains("custom emoji reactions are not supported"));
        assert!(bad(reaction_request(&p(json!({"reaction": [{"type": "paid"}]})))).contains("paid reactions"));
        // is_big=true is refused, as the SPEC says (false or absent is the ordinary reaction).
        let big = json!({"reaction": [{"type": "emoji", "emoji": "👍"}], "is_big": true});
        let e = bad(reaction_request(&p(big)));
        assert!(e.starts_with("Bad Request: REACTION_INVALID: is_big=true is not supported"), "{e}");
        let small = json!({"reaction": [{"type": "emoji", "emoji": "👍"}], "is_big": false});
        assert_eq!(reaction_request(&p(small)).expect("is_big=false is the ordinary reaction"), Some("👍".into()));
        assert!(bad(reaction_request(&p(json!({"reaction": [{"type": "emoji", "emoji": "ok"}]})))).contains("not an emoji"));
        assert!(bad(reaction_request(&p(json!({"reaction": [{"type": "emoji"}]})))).contains("not an emoji"));
    }
}
