//! The chat a method names (`chat_id`): a private chat that produced an update, or a group or
//! channel the bot is a member of; and what may go there (a channel's post right, no media in
//! channels). Every family of methods finds its chat here.

use serde_json::Value;

use super::profile::platform_error;
use super::store_error;
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::keyboard;
use crate::gateway::ctx::Ctx;
use crate::gateway::store::groups::{self, GroupChat};
use crate::gateway::store::chats;
use crate::gateway::updates::ChatRef;
use crate::wire::platform::GroupRequest;

/// A chat id parameter: an integer (or its decimal text). A `@username` is not resolvable by
/// the gateway, so it is answered like an unknown chat.
pub(super) fn chat_id(params: &Params, name: &str) -> Result<i64, ApiError> {
    match params.get(name) {
        Some(Value::String(s)) if s.starts_with('@') => Err(ApiError::bad_request(CHAT_NOT_FOUND)),
        _ => params.required_i64(name),
    }
}

/// The reference server's words for a chat it cannot address; bots and SDKs match on them.
pub(super) const CHAT_NOT_FOUND: &str = "chat not found";
/// A private chat that produced no update (or another bot's state): the reference server's
/// words, which bots match on, with the SPEC's (its error table: `unknown private chat`).
pub(super) const UNKNOWN_PRIVATE_CHAT: &str = "chat not found (unknown private chat)";

/// A private chat that has produced an update: the only chats this profile can address.
pub(super) fn known_chat(bot: &Ctx, chat_id: i64) -> Result<chats::PrivateChat, ApiError> {
    if chat_id <= 0 {
        return Err(ApiError::bad_request(CHAT_NOT_FOUND));
    }
    bot.store
        .read(|c| chats::private_chat(c, chat_id as u64))
        .map_err(store_error)?
        .ok_or_else(|| ApiError::bad_request(UNKNOWN_PRIVATE_CHAT))
}


/// A chat the bot can send to: a private chat that produced an update, or a group it is in.
pub(super) enum Target {
    Private(chats::PrivateChat),
    Group(groups::GroupChat),
}

impl Target {
    pub(super) fn chat_id(&self) -> i64 {
        match self {
            Target::Private(p) => p.user_id as i64,
            Target::Group(g) => g.chat_id,
        }
    }

    pub(super) fn as_ref(&self) -> ChatRef<'_> {
        match self {
            Target::Private(p) => ChatRef::Private(p),
            Target::Group(g) => ChatRef::Group(g),
        }
    }

    /// What a keyboard's signed context names as its chat.
    pub(super) fn keyboard_chat(&self) -> keyboard::KeyboardChat<'_> {
        match self {
            Target::Private(p) => keyboard::KeyboardChat::Private(p.user_id),
            Target::Group(g) => keyboard::KeyboardChat::Group(&g.group_id),
        }
    }
}

/// The chat `chat_id` names: a negative id is a group the bot is in (400 naming the chat
/// otherwise), a positive one a known private chat.
pub(super) fn target_chat(bot: &Ctx, chat_id: i64) -> Result<Target, ApiError> {
    if !groups::is_group_chat_id(chat_id) {
        return known_chat(bot, chat_id).map(Target::Private);
    }
    Ok(Target::Group(member_group(bot, chat_id)?))
}

/// A group or channel the bot is a member of, by its chat id.
pub(super) fn member_group(bot: &Ctx, chat_id: i64) -> Result<groups::GroupChat, ApiError> {
    match bot.store.read(move |c| groups::by_chat_id(c, chat_id)).map_err(store_error)? {
        Some(g) if g.status == groups::Membership::Member => Ok(g),
        Some(g) => Err(ApiError::bad_request(format!("chat not found: the bot is not a member of {} {chat_id} any more", g.kind))),
        None => Err(ApiError::bad_request(format!("chat not found: {chat_id} is not a chat of this bot"))),
    }
}

/// A post to a channel needs the owner's role or an administrator's can_post_messages (the
/// platform refuses it too, but only once the outbox sends it: this answers the call now).
pub(super) fn require_post_right(bot: &Ctx, channel: &GroupChat) -> Result<(), ApiError> {
    // The bot's own row only: a channel of 10,000 does not send every profile per post.
    let req =
        GroupRequest { group_id: channel.group_id.clone(), only_members: true, member_ids: vec![bot.user_id], ..Default::default() };
    let p = &bot.port;
    let info = p.get_group(&req).map_err(|e| platform_error(bot, "GetGroup", e))?;
    let me = info.members.iter().find(|m| m.user.user_id == bot.user_id);
    let may_post = me.is_some_and(crate::wire::roles::may_post_in_channel);
    if may_post {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "not enough rights to post in channel {:?}: the bot needs to be an administrator with can_post_messages",
        channel.title
    )))
}

/// Media publications in channels are refused (spec item 12): the send methods,
/// `sendMediaGroup`, `forwardMessage` and `copyMessage` answer alike.
pub(super) fn channel_media_refused() -> ApiError {
    ApiError::bad_request("media publications in channels are not supported by this gateway")
}
