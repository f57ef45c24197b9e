//! Changing what the bot sent: `editMessageText`, `editMessageCaption`, `editMessageReplyMarkup`,
//! `editMessageLiveLocation`, `stopMessageLiveLocation`, `stopPoll` and `deleteMessage`. Only messages this
//! bot sent that are still in the runtime's durable history (`chats::HISTORY_LIMIT`) qualify; the user's client shows the edit (with `edit_date`) or
//! removes the message. The history takes the change when the platform acknowledges it.

use protobuf::MessageField;
use serde_json::Value;

use super::messages::{formatted, formatted_text, remembered, CAPTION, SEND_WAIT};
use super::target::{Target, chat_id, target_chat};
use crate::gateway::botapi::{markup, types, ApiError, Params};
use crate::gateway::keyboard;
use super::submit;
use crate::gateway::runtime::unix_now;
use crate::gateway::ctx::{Ctx, Sending};
use crate::gateway::store::chats;
use crate::wire::e2e::content::Body;
use crate::gateway::updates;
use crate::wire::e2e::{Content, Delete, Edit, InlineKeyboard, Location, Poll, Text};
use crate::wire::places;

/// What is done to the message, for the errors.
#[derive(Clone, Copy)]
enum Change {
    Edit,
    Delete,
}

impl Change {
    fn verb(self) -> &'static str {
        match self {
            Change::Edit => "edit",
            Change::Delete => "delete",
        }
    }
    fn participle(self) -> &'static str {
        match self {
            Change::Edit => "edited",
            Change::Delete => "deleted",
        }
    }
}

/// A message of this bot in the history that `change` can apply to (`can`).
fn own_message(
    bot: &Ctx,
    params: &Params,
    change: Change,
    can: fn(&Content) -> bool,
) -> Result<(Target, chats::HistoryEntry), ApiError> {
    message_of(bot, params, change, can, false)
}

/// `own_message`, and with `peers_too` in a private chat also a message of the chat's user
/// (a bot deletes a user's message there, as in the Bot API).
fn message_of(
    bot: &Ctx,
    params: &Params,
    change: Change,
    can: fn(&Content) -> bool,
    peers_too: bool,
) -> Result<(Target, chats::HistoryEntry), ApiError> {
    let (what, done) = (change.verb(), change.participle());
    if params.contains("inline_message_id") {
        return Err(ApiError::bad_request("inline messages (inline_message_id) are not supported by this gateway"));
    }
    let chat = target_chat(bot, chat_id(params, "chat_id")?)?;
    let message_id = params.required_i64("message_id")?;
    let entry = remembered(bot, chat.chat_id(), message_id)?.ok_or_else(|| {
        ApiError::bad_request(format!(
            "message to {what} not found: it is not in this runtime's history (too old, deleted, or never sent here)"
        ))
    })?;
    let the_users_own = matches!(&chat, Target::Private(p) if entry.sender_id == p.user_id as i64);
    if !entry.from_bot && !(peers_too && the_users_own) {
        return Err(ApiError::bad_request(format!("message can't be {done}: it was not sent by this bot")));
    }
    if !can(&entry.content) {
        return Err(ApiError::bad_request(format!("message can't be {done}")));
    }
    Ok((chat, entry))
}

/// Sends the new state of `entry` as an edit and answers the edited Message.
fn send_edit(bot: &Sending, chat: &Target, entry: chats::HistoryEntry, new: Content) -> Result<Value, ApiError> {
    let edited = submit_edit(bot, chat, entry, new)?;
    Ok(types::message_json(&super::message_view(bot, chat.as_ref(), &edited)?))
}

/// Sends the new state of `entry` as an edit (keyboard signed for the same message); returns
/// the message as edited.
fn submit_edit(bot: &Sending, chat: &Target, entry: chats::HistoryEntry, mut new: Content) -> Result<chats::HistoryEntry, ApiError> {
    new.keyboard.mut_or_insert_default().context = MessageField::none();
    if new.keyboard.rows.is_empty() {
        new.keyboard = MessageField::none();
    }
    let unchanged = |c: &Content| {
        let mut c = c.clone();
        if let Some(k) = c.keyboard.as_mut() {
            k.context = MessageField::none();
        }
        c
    };
    if unchanged(&entry.content) == new {
        return Err(ApiError::bad_request(
            "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        ));
    }
    keyboard::attach_context(
        &bot.identity,
        bot.user_id,
        chat.keyboard_chat(),
        entry.message_id as u64,
        entry.date,
        &mut new,
    );
    let edit_date = unix_now();
    let mut content = Content::new();
    content.set_edit(Edit { message_id: entry.message_id as u64, content: MessageField::some(new.clone()), edit_date, ..Default::default() });
    submit::submit(bot, chat.chat_id(), content, SEND_WAIT)?;
    Ok(chats::HistoryEntry { content: new, edit_date, ..entry })
}

/// `editMessageText`: new text (with `parse_mode` or `entities`) and, as in the Bot API, the
/// keyboard given in `reply_markup` (none given: the buttons go).
pub(super) fn edit_message_text(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let keyboard = markup::inline_keyboard(params)?;
    let (text, entities) = formatted_text(params)?;
    let (chat, entry) = own_message(bot, params, Change::Edit, is_text)?;
    let mut new = entry.content.clone();
    new.set_text(Text { text, entities, ..Default::default() });
    new.keyboard = MessageField::from_option(keyboard);
    send_edit(bot, &chat, entry, new)
}

/// `editMessageCaption`: a new caption (with `parse_mode` or `caption_entities`; none or empty:
/// the caption goes) of one of the bot's file messages, and, as editMessageText, the keyboard
/// given. The file itself stays the same.
pub(super) fn edit_message_caption(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let keyboard = markup::inline_keyboard(params)?;
    let caption = formatted(params, &CAPTION)?;
    let (chat, entry) = own_message(bot, params, Change::Edit, Content::has_media)?;
    let mut new = entry.content.clone();
    new.mut_media().caption = MessageField::from_option(caption.map(|(text, entities)| Text { text, entities, ..Default::default() }));
    new.keyboard = MessageField::from_option(keyboard);
    send_edit(bot, &chat, entry, new)
}

/// `editMessageMedia`: the file of one of the bot's file messages replaced by the InputMedia
/// `media` (photo, video, animation, document or audio; by `attach://<part>` or file_id), its
/// caption from the InputMedia, and the keyboard given. An album's item stays what its album
/// may hold (the Bot API's rule).
pub(super) fn edit_message_media(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    use super::media::{check_album_mix, input_media_kind, MediaRequest, ALBUM_KINDS};
    use crate::gateway::botapi::types::MediaKind;
    const KINDS: &[MediaKind] = &[MediaKind::Photo, MediaKind::Video, MediaKind::Animation, MediaKind::Document, MediaKind::Audio];
    let keyboard = markup::inline_keyboard(params)?;
    let item = params.optional_nested_with_files("media")?.ok_or_else(|| ApiError::bad_request("media is required"))?;
    let kind = input_media_kind(&item, "media", KINDS)?;
    let request = MediaRequest::read(bot, &item, kind, "media")?;
    let (chat, entry) = own_message(bot, params, Change::Edit, Content::has_media)?;
    if !entry.content.media_group_id.is_empty() {
        let was = MediaKind::of(entry.content.media());
        if !ALBUM_KINDS.contains(&kind) || check_album_mix(&[was, kind]).is_err() {
            return Err(ApiError::bad_request(format!(
                "message can't be edited: an album's {} can't become a {}",
                was.name(),
                kind.name()
            )));
        }
    }
    let mut new = entry.content.clone();
    new.set_media(request.into_media(bot)?);
    new.keyboard = MessageField::from_option(keyboard);
    send_edit(bot, &chat, entry, new)
}

/// `editMessageReplyMarkup`: new buttons, or none, on any message the bot sent (a text, a
/// file, a location, a poll, ...), as in the Bot API; signed for that message like any edit.
pub(super) fn edit_message_reply_markup(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let keyboard = markup::inline_keyboard(params)?;
    let (chat, entry) = own_message(bot, params, Change::Edit, Content::is_message)?;
    let mut new = entry.content.clone();
    new.keyboard = MessageField::some(keyboard.unwrap_or_else(InlineKeyboard::new));
    send_edit(bot, &chat, entry, new)
}

/// `deleteMessage`: the bot's own message, or in a private chat the user's; the user's client
/// removes it; the history forgets it. In a group
/// or channel the platform deletes it for every member (`admin::delete_group_message`).
pub(super) fn delete_message(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    if let Target::Group(group) = target_chat(bot, chat_id(params, "chat_id")?)? {
        return super::admin::delete_group_message(bot, &group, params.required_i64("message_id")?);
    }
    // In a private chat the user's messages too: the deletion travels end to end from this
    // device (so only the chat's peer can cause it), and the user's client removes the message.
    let (chat, entry) = message_of(bot, params, Change::Delete, Content::is_message, true)?;
    let mut content = Content::new();
    content.set_delete(Delete { message_id: entry.message_id as u64, ..Default::default() });
    submit::submit(bot, chat.chat_id(), content, SEND_WAIT)?;
    Ok(Value::Bool(true))
}

fn is_text(content: &Content) -> bool {
    matches!(content.body, Some(Body::Text(_)))
}

/// The bot's live location `params` names, with its current point; 400 when the message is
/// no location, or no longer live (stopped, or its live period ran out).
fn live_location(bot: &Ctx, params: &Params) -> Result<(Target, chats::HistoryEntry, Location), ApiError> {
    let (chat, entry) = own_message(bot, params, Change::Edit, |c| matches!(c.body, Some(Body::Location(_))))?;
    let Some(Body::Location(location)) = &entry.content.body else { unreachable!("checked by own_message") };
    if !places::is_live(location, entry.date, unix_now()) {
        return Err(ApiError::bad_request(
            "message can't be edited: the location is not live (it was sent without live_period, was stopped, or its live_period ran out)",
        ));
    }
    let location = location.clone();
    Ok((chat, entry, location))
}

/// `editMessageLiveLocation`: moves the bot's live location; the user's client shows the new
/// point (an `Edit` with the whole location). The keyboard is the one given in
/// `reply_markup` (none given: the buttons go), as for editMessageText.
pub(super) fn edit_message_live_location(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let keyboard = markup::inline_keyboard(params)?;
    let (chat, entry, now) = live_location(bot, params)?;
    let moved = super::places::moved_location(params, &now)?;
    let mut new = entry.content.clone();
    new.set_location(moved);
    new.keyboard = MessageField::from_option(keyboard);
    send_edit(bot, &chat, entry, new)
}

/// `stopMessageLiveLocation`: the live location stays where it is and stops being live; the
/// answer (and the user's client) shows it as a plain point.
pub(super) fn stop_message_live_location(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let keyboard = markup::inline_keyboard(params)?;
    let (chat, entry, now) = live_location(bot, params)?;
    let mut new = entry.content.clone();
    new.set_location(Location { live_stopped: true, ..now });
    new.keyboard = MessageField::from_option(keyboard);
    send_edit(bot, &chat, entry, new)
}

/// `stopPoll`: closes the bot's poll with its final counts; the user's client shows them (an
/// edit). Answers the stopped Poll, as the Bot API does.
pub(super) fn stop_poll(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let keyboard = markup::inline_keyboard(params)?;
    let (chat, entry) = own_message(bot, params, Change::Edit, |c| matches!(c.body, Some(Body::Poll(_))))?;
    let Some(Body::Poll(poll)) = &entry.content.body else { unreachable!("checked by own_message") };
    if poll.is_closed {
        return Err(ApiError::bad_request("poll has already been closed"));
    }
    let final_poll = bot
        .store
        .read(|c| updates::poll_now(c, &entry, poll, unix_now()))
        .map_err(|e| ApiError::internal(format!("reading the votes of poll {}/{}: {e}", entry.chat_id, entry.message_id)))?;
    let id = updates::poll_id(entry.chat_id, entry.message_id);
    let mut new = entry.content.clone();
    new.set_poll(Poll { is_closed: true, ..final_poll });
    new.keyboard = MessageField::from_option(keyboard);
    let stopped = submit_edit(bot, &chat, entry, new)?;
    let Some(Body::Poll(poll)) = &stopped.content.body else { unreachable!("a poll was sent") };
    Ok(types::poll_json(&id, poll))
}
