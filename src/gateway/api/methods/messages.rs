//! Sending messages: `sendMessage`, `forwardMessage`, `copyMessage` and `sendChatAction`, and
//! the rules every sending method shares (the chat, the text and its formatting, the reply
//! target). Each content goes through the durable outbox, which seals and sends it.

use protobuf::MessageField;
use serde_json::{json, Value};

use super::store_error;
use super::target::{chat_id, target_chat, Target};
use crate::gateway::botapi::text::entities::{check_entity_count, entities_from_json, utf16_len, validate_entities};
use crate::gateway::botapi::text::{self, ParseMode};
use crate::gateway::botapi::{markup, types, ApiError, Params};
use super::submit;
use crate::gateway::ctx::{Ctx, Sending};
use crate::gateway::send_wait::{Sent};
use crate::gateway::store::{chats, groups};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::{ChatAction, Content, Entity, ForwardOrigin, Location, Text};

/// Longest message text, in UTF-16 code units.
pub const MAX_TEXT_UTF16: usize = 4096;

/// How a sending method waits for its message (`submit::submit`): `send_wait_seconds`, then,
/// if the message is already with the platform, for its answer for as long as the client is
/// connected. Never an error for a message that may still be sent.
pub const SEND_WAIT: submit::Wait = submit::Wait { client_gone: crate::http::client_gone };

/// The chat actions of the Bot API; the user's client shows each for about 5 seconds.
pub const CHAT_ACTIONS: &[&str] = &[
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
];

#[derive(Debug, Clone, PartialEq)]
pub struct SendMessage {
    pub chat_id: i64,
    pub text: String,
    /// Already validated: within the text, in UTF-16 code units.
    pub entities: Vec<Entity>,
    pub reply_to_message_id: Option<i64>,
    pub allow_sending_without_reply: bool,
    pub markup: markup::ReplyMarkup,
}

/// sendMessage parameters. `link_preview_options`, `disable_notification`, `protect_content`
/// and `message_thread_id` are accepted and ignored.
pub fn send_message_request(params: &Params) -> Result<SendMessage, ApiError> {
    let chat_id = chat_id(params, "chat_id")?;
    let markup = markup::reply_markup(params)?;
    let (text, entities) = formatted_text(params)?;
    let (reply_to_message_id, allow_sending_without_reply) = reply_request(params, chat_id)?;
    Ok(SendMessage { chat_id, text, entities, reply_to_message_id, allow_sending_without_reply, markup })
}

/// Which formatted text a method reads: a message's `text` or a media `caption`.
pub(super) struct TextField {
    text: &'static str,
    entities: &'static str,
    /// Longest text, in UTF-16 code units.
    max_utf16: usize,
    too_long: &'static str,
}

pub(super) const MESSAGE_TEXT: TextField =
    TextField { text: "text", entities: "entities", max_utf16: MAX_TEXT_UTF16, too_long: "message is too long" };
/// Longest media caption, in UTF-16 code units (Bot API: 0-1024 characters).
pub const MAX_CAPTION_UTF16: usize = 1024;
pub(super) const CAPTION: TextField = TextField {
    text: "caption",
    entities: "caption_entities",
    max_utf16: MAX_CAPTION_UTF16,
    too_long: "message caption is too long",
};

/// `text` with `parse_mode` or `entities` (never both): the final text and its checked
/// entities, boundaries in UTF-16 units.
pub(super) fn formatted_text(params: &Params) -> Result<(String, Vec<Entity>), ApiError> {
    formatted(params, &MESSAGE_TEXT)?.ok_or_else(|| ApiError::bad_request("message text is empty"))
}

/// `field` with `parse_mode` or its entities (never both); `None` when it is absent or empty.
pub(super) fn formatted(params: &Params, field: &TextField) -> Result<Option<(String, Vec<Entity>)>, ApiError> {
    let raw_text = params.optional_str(field.text)?.unwrap_or_default();
    // The Bot API refuses text that is empty after trimming (`fix_formatted` below trims it,
    // moving the entities with the text).
    if raw_text.trim().is_empty() {
        return Ok(None);
    }
    let parse_mode = params.optional_str("parse_mode")?.filter(|m| !m.trim().is_empty());
    let entities_given = params.contains(field.entities);
    let (text, entities) = match parse_mode {
        Some(_) if entities_given => {
            return Err(ApiError::bad_request(format!("parse_mode and {} can't be used together", field.entities)));
        }
        Some(mode) => {
            let mode = ParseMode::from_name(&mode)
                .ok_or_else(|| ApiError::bad_request(format!("unsupported parse_mode {mode:?}")))?;
            text::parse(&raw_text, mode)?
        }
        None => {
            // The text is final: a long one is refused before any entity is read, and the
            // entities are counted against it before any is built.
            let units = checked_text_len(&raw_text, field)?;
            let entities = match params.get(field.entities) {
                None => Vec::new(),
                Some(Value::String(s)) => {
                    let v = crate::gateway::botapi::params::parse_json_text(s).ok_or_else(|| {
                        ApiError::bad_request(format!("{} must be a JSON array of MessageEntity", field.entities))
                    })?;
                    entities_from_json(&v, units)?
                }
                Some(v) => entities_from_json(v, units)?,
            };
            (raw_text, entities)
        }
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    // Markup is measured after parsing, as in the Bot API (raw text was measured above).
    let units = checked_text_len(&text, field)?;
    check_entity_count(entities.len(), units)?;
    validate_entities(&text, &entities)?;
    // The reference's last pass: `\r` dropped, blanks at the ends trimmed, entities moved.
    let (text, entities) = text::fix_formatted(&text, entities);
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some((text, entities)))
}

/// The reply target: `reply_parameters` or the legacy `reply_to_message_id` with
/// `allow_sending_without_reply`.
pub(super) fn reply_request(params: &Params, chat_id: i64) -> Result<(Option<i64>, bool), ApiError> {
    let mut reply_to_message_id = params.optional_i64("reply_to_message_id")?;
    let mut allow_sending_without_reply = params.flag("allow_sending_without_reply")?;
    if let Some(rp) = params.optional_nested("reply_parameters")? {
        reply_to_message_id = Some(rp.required_i64("message_id")?);
        allow_sending_without_reply |= rp.flag("allow_sending_without_reply")?;
        if let Some(other) = rp.get("chat_id") {
            if crate::gateway::botapi::params::as_i64(other) != Some(chat_id) {
                return Err(ApiError::bad_request("replies to messages in another chat are not supported"));
            }
        }
    }
    // The legacy `reply_to_message_id=0` means "not a reply".
    Ok((reply_to_message_id.filter(|&id| id != 0), allow_sending_without_reply))
}

/// The length of a text in UTF-16 units; 400 (e.g. "message is too long") above the field's
/// limit.
fn checked_text_len(text: &str, field: &TextField) -> Result<usize, ApiError> {
    let units = utf16_len(text);
    if units > field.max_utf16 {
        return Err(ApiError::bad_request(field.too_long));
    }
    Ok(units)
}

/// A message of the durable history, or `None`.
pub(super) fn remembered(bot: &Ctx, chat_id: i64, message_id: i64) -> Result<Option<chats::HistoryEntry>, ApiError> {
    bot.store.read(|c| chats::lookup(c, chat_id, message_id)).map_err(store_error)
}

/// The reply target as the content names it: 0 when none, or when it is unknown and
/// `allow_sending_without_reply` lets the reply go.
pub(super) fn reply_target(bot: &Ctx, chat_id: i64, reply_to: Option<i64>, allow_without: bool) -> Result<u64, ApiError> {
    let Some(mid) = reply_to else { return Ok(0) };
    match remembered(bot, chat_id, mid)? {
        Some(_) => Ok(mid as u64),
        None if allow_without => Ok(0),
        None => Err(ApiError::bad_request("message to be replied not found")),
    }
}

/// Sends a new message and answers it as the Bot API Message the bot sent.
pub(super) fn send_new(bot: &Sending, chat: &chats::PrivateChat, content: Content) -> Result<Value, ApiError> {
    send_new_to(bot, &Target::Private(chat.clone()), content)
}

/// Sends a new message to a private chat or a group, and answers it as the Bot API Message.
pub(super) fn send_new_to(bot: &Sending, target: &Target, content: Content) -> Result<Value, ApiError> {
    let chat_id = target.chat_id();
    let sent = submit_to(bot, target, content.clone())?;
    Ok(types::message_json(&super::message_view(bot, target.as_ref(), &sent_entry(bot, chat_id, &sent, content))?))
}

/// Puts a content into the durable outbox for `target` and waits for it; a channel needs the
/// post right first (checked now, so the call is answered before anything is queued).
fn submit_to(bot: &Sending, target: &Target, content: Content) -> Result<Sent, ApiError> {
    if let Target::Group(g) = target {
        if g.is_channel() {
            super::target::require_post_right(bot, g)?;
        }
    }
    submit::submit(bot, target.chat_id(), content, SEND_WAIT)
}

/// The history entry of a message the bot just sent.
fn sent_entry(bot: &Ctx, chat_id: i64, sent: &Sent, content: Content) -> chats::HistoryEntry {
    chats::HistoryEntry {
        chat_id,
        message_id: sent.message_id,
        from_bot: true,
        sender_id: bot.user_id as i64,
        date: sent.date,
        content,
        edit_date: 0,
    }
}

/// `sendMessage` to a private chat that has produced an update; a reply must name a message
/// in the history unless `allow_sending_without_reply`. Waits for the platform's message id.
pub(super) fn send_message(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let req = send_message_request(params)?;
    let chat = target_chat(bot, req.chat_id)?;
    let mut content = Content::new();
    content.set_text(Text { text: req.text, entities: req.entities, ..Default::default() });
    content.reply_to_message_id = reply_target(bot, req.chat_id, req.reply_to_message_id, req.allow_sending_without_reply)?;
    req.markup.apply(&mut content);
    send_new_to(bot, &chat, content)
}

/// The message `from_chat_id`/`message_id` of the history, for forwarding or copying: from a
/// private chat that produced an update, or a group or channel the bot is a member of.
fn source_message(bot: &Ctx, params: &Params) -> Result<(Target, chats::HistoryEntry), ApiError> {
    let from_chat_id = chat_id(params, "from_chat_id")?;
    let message_id = params.required_i64("message_id")?;
    let from_chat = target_chat(bot, from_chat_id).map_err(|_| {
        ApiError::bad_request(format!(
            "from_chat_id {from_chat_id} is neither a private chat of this bot that produced an update nor a group or channel it is a member of"
        ))
    })?;
    let mut entry = remembered(bot, from_chat_id, message_id)?
        .ok_or_else(|| ApiError::bad_request("message to forward not found in this gateway's history"))?;
    // A file travels again as the same reference and key: no re-upload.
    if !entry.content.is_message() {
        return Err(ApiError::bad_request("message can't be forwarded"));
    }
    // A poll's votes belong to the message they were cast in.
    if matches!(entry.content.body, Some(Body::Poll(_))) {
        return Err(ApiError::bad_request("polls can't be forwarded or copied by this gateway"));
    }
    // Only the original of a live location moves: a forward or copy is the point as it is.
    if let Some(Body::Location(l)) = &mut entry.content.body {
        *l = Location { latitude: l.latitude, longitude: l.longitude, horizontal_accuracy: l.horizontal_accuracy, ..Default::default() };
    }
    Ok((from_chat, entry))
}

/// The chat a forward or copy goes to; a file cannot go to a channel (the words of sendPhoto
/// to a channel).
fn destination(bot: &Ctx, params: &Params, entry: &chats::HistoryEntry) -> Result<Target, ApiError> {
    let target = target_chat(bot, chat_id(params, "chat_id")?)?;
    if let (Target::Group(g), Some(Body::Media(_))) = (&target, &entry.content.body) {
        if g.is_channel() {
            return Err(super::target::channel_media_refused());
        }
    }
    Ok(target)
}

/// Who a forward names as the original's origin (the Bot API's MessageOrigin): a forwarded
/// forward keeps the first origin; a channel's post is the channel's (MessageOriginChannel),
/// whoever wrote it; otherwise its author: the bot (`bot` without a date), the private
/// chat's user, or the group member (`member`, when the gateway has seen them).
fn forward_origin(source: &Target, entry: &chats::HistoryEntry, bot: ForwardOrigin, member: Option<groups::GroupUser>) -> ForwardOrigin {
    if let Some(o) = entry.content.forward_origin.as_ref() {
        return o.clone();
    }
    let date = entry.date;
    match source {
        Target::Group(g) if g.is_channel() => ForwardOrigin {
            channel_chat_id: g.chat_id,
            channel_title: g.title.clone(),
            channel_message_id: entry.message_id as u64,
            date,
            ..Default::default()
        },
        _ if entry.from_bot => ForwardOrigin { date, ..bot },
        Target::Private(p) => ForwardOrigin {
            sender_user_id: p.user_id,
            sender_is_bot: false,
            sender_first_name: p.first_name.clone(),
            sender_username: p.username.clone(),
            date,
            ..Default::default()
        },
        Target::Group(_) => {
            let user_id = entry.sender_id as u64;
            let m = member.unwrap_or_else(|| groups::GroupUser {
                user_id,
                username: String::new(),
                first_name: format!("user {user_id}"),
                is_bot: false,
            });
            ForwardOrigin {
                sender_user_id: user_id,
                sender_is_bot: m.is_bot,
                sender_first_name: if m.first_name.is_empty() { m.username.clone() } else { m.first_name },
                sender_username: m.username,
                date,
                ..Default::default()
            }
        }
    }
}

/// `forwardMessage`: the message (text, file with its caption, location, venue, contact, dice) to a private chat, group or
/// channel of the bot (a channel needs the post right), with `forward_origin` naming where the
/// original comes from and when. Buttons and the reply are not forwarded.
pub(super) fn forward_message(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let (source, entry) = source_message(bot, params)?;
    let target = destination(bot, params, &entry)?;
    let member = match &source {
        Target::Group(g) if !g.is_channel() && !entry.from_bot => {
            let user_id = entry.sender_id as u64;
            bot.store.read(move |c| groups::user(c, user_id)).map_err(store_error)?
        }
        _ => None,
    };
    let me = ForwardOrigin {
        sender_user_id: bot.user_id,
        sender_is_bot: true,
        sender_first_name: bot.first_name.to_string(),
        sender_username: bot.name.to_string(),
        ..Default::default()
    };
    let mut content = Content::new();
    content.body = entry.content.body.clone();
    content.forward_origin = MessageField::some(forward_origin(&source, &entry, me, member));
    send_new_to(bot, &target, content)
}

/// `copyMessage`: the message (text, file with its caption, location, venue, contact, dice) without a forward mark, to a
/// private chat, group or channel of the bot, with the caller's own reply target and keyboard
/// (the original's buttons are not copied). A `caption` given replaces a file's caption (an
/// empty one removes it); without one the original's stays. Answers `{"message_id": N}`.
pub(super) fn copy_message(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let chat_id = chat_id(params, "chat_id")?;
    let markup = markup::reply_markup(params)?;
    let (reply_to, allow_without) = reply_request(params, chat_id)?;
    let caption = if params.contains(CAPTION.text) { Some(formatted(params, &CAPTION)?) } else { None };
    let (_, entry) = source_message(bot, params)?;
    let target = destination(bot, params, &entry)?;
    let mut content = Content::new();
    content.body = entry.content.body.clone();
    if let (Some(caption), Some(Body::Media(media))) = (caption, content.body.as_mut()) {
        media.caption = MessageField::from_option(caption.map(|(text, entities)| Text { text, entities, ..Default::default() }));
    }
    content.reply_to_message_id = reply_target(bot, chat_id, reply_to, allow_without)?;
    markup.apply(&mut content);
    let sent = submit_to(bot, &target, content)?;
    Ok(json!({ "message_id": sent.message_id }))
}

/// `sendChatAction`: "… is typing" (or an upload action) in the user's client for about 5
/// seconds, in a private chat, a group (to every member, as an MLS application message) or a
/// channel (with the post right). No message enters the history.
pub(super) fn send_chat_action(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let chat_id = chat_id(params, "chat_id")?;
    let action = params.required_str("action")?;
    if !CHAT_ACTIONS.contains(&action.as_str()) {
        return Err(ApiError::bad_request(format!(
            "wrong parameter action in request: {action:?} is not a chat action ({})",
            CHAT_ACTIONS.join(", ")
        )));
    }
    let target = target_chat(bot, chat_id)?;
    let mut content = Content::new();
    content.set_chat_action(ChatAction { action, ..Default::default() });
    submit_to(bot, &target, content)?;
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, form, p};
    use super::*;
    use crate::gateway::botapi::text::entities::{entity, MAX_ENTITIES};

    fn entry(chat_id: i64, from_bot: bool, sender_id: i64) -> chats::HistoryEntry {
        chats::HistoryEntry { chat_id, message_id: 7, from_bot, sender_id, date: 1_600_000_000, content: Content::new(), edit_date: 0 }
    }

    fn group(kind: &str) -> Target {
        Target::Group(groups::GroupChat {
            group_id: vec![1; 32],
            chat_id: -(1 << 51) - 3,
            title: "Cat news".into(),
            kind: kind.into(),
            status: groups::Membership::Member,
        })
    }

    #[test]
    fn forward_origins_name_the_author_or_the_channel() {
        let bot = ForwardOrigin { sender_user_id: 99, sender_is_bot: true, sender_first_name: "Bot".into(), ..Default::default() };
        let alice = groups::GroupUser { user_id: 5, username: "alice".into(), first_name: String::new(), is_bot: false };

        // A member's group message: MessageOriginUser naming the member (username for an empty name).
        let o = forward_origin(&group("group"), &entry(-3, false, 5), bot.clone(), Some(alice));
        assert_eq!((o.sender_user_id, o.sender_first_name.as_str(), o.sender_username.as_str()), (5, "alice", "alice"));
        assert_eq!((o.date, o.channel_chat_id), (1_600_000_000, 0));
        // One never seen is still named, by id.
        let o = forward_origin(&group("group"), &entry(-3, false, 6), bot.clone(), None);
        assert_eq!((o.sender_user_id, o.sender_first_name.as_str()), (6, "user 6"));
        // The bot's own message in a group: the bot.
        let o = forward_origin(&group("group"), &entry(-3, true, 99), bot.clone(), None);
        assert_eq!((o.sender_user_id, o.sender_is_bot, o.date), (99, true, 1_600_000_000));

        // A channel's post is the channel's, whoever wrote it: MessageOriginChannel.
        for from_bot in [false, true] {
            let o = forward_origin(&group("channel"), &entry(-3, from_bot, 5), bot.clone(), None);
            assert_eq!((o.channel_chat_id, o.channel_title.as_str(), o.channel_message_id), (-(1 << 51) - 3, "Cat news", 7));
            assert_eq!((o.sender_user_id, o.date), (0, 1_600_000_000));
        }

        // A private chat's user; and a forwarded forward keeps the first origin.
        let carol = Target::Private(chats::PrivateChat { user_id: 8, username: "carol".into(), first_name: "Carol".into() });
        let o = forward_origin(&carol, &entry(8, false, 8), bot.clone(), None);
        assert_eq!((o.sender_user_id, o.sender_first_name.as_str(), o.sender_is_bot), (8, "Carol", false));
        let mut again = entry(8, true, 99);
        again.content.forward_origin = MessageField::some(ForwardOrigin { channel_chat_id: -9, date: 5, ..Default::default() });
        assert_eq!(forward_origin(&carol, &again, bot, None).channel_chat_id, -9);
    }

    #[test]
    fn send_message_basic_form() {
        let r = send_message_request(&form(&[
            ("chat_id", "42"),
            ("text", "hello"),
            ("entities", r#"[{"length": 5, "offset": 0, "type": "bold"}]"#),
            ("disable_notification", "true"),
            ("reply_parameters", r#"{"message_id": 5}"#),
            ("reply_markup", r#"{"inline_keyboard": []}"#),
        ]))
        .expect("PTB shape");
        assert_eq!(r.chat_id, 42);
        assert_eq!(r.text, "hello");
        assert_eq!(r.entities, vec![entity("bold", 0, 5)]);
        assert_eq!(r.reply_to_message_id, Some(5));
        assert!(!r.allow_sending_without_reply);
    }

    #[test]
    fn reply_markup_is_checked_and_callback_keyboards_are_read() {
        let with = |m: &str| send_message_request(&form(&[("chat_id", "1"), ("text", "t"), ("reply_markup", m)]));
        assert!(bad(with("not json")).contains("reply_markup must be a JSON object"));
        let k = with(r#"{"inline_keyboard": [[{"text": "b", "callback_data": "cb1"}]]}"#).expect("callback button");
        assert_eq!(k.markup.inline.expect("keyboard").rows[0].buttons[0].callback_data, "cb1");
        let k = with(r#"{"inline_keyboard": [[{"text": "b", "url": "https://x.org"}]]}"#).expect("url button");
        assert_eq!(k.markup.inline.expect("keyboard").rows[0].buttons[0].url, "https://x.org/");
        let k = with(r#"{"keyboard": [[{"text": "b"}]], "one_time_keyboard": true}"#).expect("reply keyboard");
        assert!(k.markup.reply.expect("reply keyboard").one_time_keyboard);
        assert!(bad(with(r#"{"inline_keyboard": 5}"#)).contains("must be an array"));
        assert_eq!(with(r#"{"inline_keyboard": [[]]}"#).expect("no buttons").markup, markup::ReplyMarkup::default());
        assert!(with(r#"{"remove_keyboard": true}"#).expect("removes the keyboard").markup.remove.is_some());
    }

    #[test]
    fn send_message_text_rules() {
        assert_eq!(bad(send_message_request(&p(json!({"chat_id": 1})))), "Bad Request: message text is empty");
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": 1, "text": " \n "})))),
            "Bad Request: message text is empty"
        );
        let long = "a".repeat(4096);
        send_message_request(&p(json!({"chat_id": 1, "text": long}))).expect("4096 units fit");
        // 2049 emoji = 4098 UTF-16 units although only 2049 chars.
        let emoji = "😀".repeat(2049);
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": 1, "text": emoji})))),
            "Bad Request: message is too long"
        );
        // Form text that looks like JSON stays the raw text.
        let r = send_message_request(&form(&[("chat_id", "1"), ("text", "[1, 2]")])).expect("raw");
        assert_eq!(r.text, "[1, 2]");
        let r = send_message_request(&p(json!({"chat_id": 1, "text": 42}))).expect("scalar text");
        assert_eq!(r.text, "42");
    }

    /// The reference's text rules: an optional field sent as `null` is absent, in JSON bodies
    /// and in JSON text of form fields; blanks at the ends are trimmed with the entities moved.
    #[test]
    fn nulls_are_absent_and_the_text_is_trimmed() {
        let body = json!({"chat_id": 5, "text": " hi ", "entities": [{"type": "bold", "offset": 1, "length": 2, "url": null, "language": null}]});
        let r = send_message_request(&p(body)).expect("a null url is no url");
        assert_eq!(r.text, "hi");
        assert_eq!((r.entities[0].offset, r.entities[0].length, r.entities[0].url.as_str()), (0, 2, ""));
        let entities = r#"[{"type":"text_link","offset":0,"length":2,"url":"https://x.test","language":null}]"#;
        let r = send_message_request(&form(&[("chat_id", "5"), ("text", "hi\r"), ("entities", entities)])).expect("form");
        assert_eq!((r.text.as_str(), r.entities[0].url.as_str()), ("hi", "https://x.test/"));
        let markup = json!({"chat_id": 5, "text": "x", "reply_markup": {"inline_keyboard": [[{"text": "a", "callback_data": "b", "url": null}]]}});
        assert!(send_message_request(&p(markup)).is_ok(), "a button's null url is no url");
        assert_eq!(bad(send_message_request(&p(json!({"chat_id": 5, "text": " \r\n "})))), "Bad Request: message text is empty");
    }

    #[test]
    fn send_message_chat_id_rules() {
        assert_eq!(bad(send_message_request(&p(json!({"text": "x"})))), "Bad Request: chat_id is required");
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": "@chan", "text": "x"})))),
            "Bad Request: chat not found"
        );
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": "abc", "text": "x"})))),
            "Bad Request: chat_id must be an integer"
        );
        assert_eq!(send_message_request(&p(json!({"chat_id": "-100", "text": "x"}))).expect("string id").chat_id, -100);
    }

    #[test]
    fn send_message_entities_and_parse_mode() {
        let e = bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "hi", "parse_mode": "HTML", "entities": [{"type": "bold", "offset": 0, "length": 2}]
        }))));
        assert_eq!(e, "Bad Request: parse_mode and entities can't be used together");
        let e = bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "hi", "entities": [{"type": "bold", "offset": 1, "length": 2}]
        }))));
        assert!(e.contains("can't parse entities"), "{e}");
        assert!(bad(send_message_request(&p(json!({"chat_id": 1, "text": "hi", "parse_mode": "Fancy"}))))
            .contains("unsupported parse_mode"));
        // An empty parse_mode is the same as none.
        let r = send_message_request(&p(json!({"chat_id": 1, "text": "hi", "parse_mode": ""}))).expect("empty mode");
        assert!(r.entities.is_empty());
    }

    #[test]
    fn send_message_bounds_entities_before_reading_them() {
        let entity = json!({"type": "bold", "offset": 0, "length": 1});
        // The probe's call: 100,000 entities, as a JSON array and as form text.
        let many = Value::Array(vec![entity.clone(); 100_000]);
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": "x".repeat(4096), "entities": many}))));
        assert_eq!(e, "Bad Request: too many entities: 100000 given, at most 1000 are accepted per message");
        let e = bad(send_message_request(&form(&[("chat_id", "1"), ("text", "hi"), ("entities", &many.to_string())])));
        assert!(e.starts_with("Bad Request: too many entities: 100000 given"), "{e}");
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": "hi", "entities": many.to_string()}))));
        assert!(e.starts_with("Bad Request: too many entities: 100000 given"), "{e}");
        // A raw text that is too long is refused before its entities are read.
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": "x".repeat(4097), "entities": [1]}))));
        assert_eq!(e, "Bad Request: message is too long");
        // Markup is bounded by the same rule, after parsing.
        let html = "<b>a</b>".repeat(MAX_ENTITIES + 1);
        let e = bad(send_message_request(&p(json!({"chat_id": 1, "text": html, "parse_mode": "HTML"}))));
        assert!(e.starts_with("Bad Request: too many entities: 1001 given"), "{e}");
        let html = "<b>a</b>".repeat(MAX_ENTITIES);
        send_message_request(&p(json!({"chat_id": 1, "text": html, "parse_mode": "HTML"}))).expect("at the cap");
    }

    #[test]
    fn send_message_refuses_unsafe_raw_links() {
        let e = bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "hi there",
            "entities": [
                {"type": "bold", "offset": 0, "length": 2},
                {"type": "text_link", "offset": 3, "length": 5, "url": "javascript:alert(document.cookie)"}
            ]
        }))));
        assert!(e.starts_with("Bad Request: can't parse entities: entity 1 (text_link) has an unsupported URL"), "{e}");
        let r = send_message_request(&p(json!({
            "chat_id": 1, "text": "hi", "entities": [{"type": "text_link", "offset": 0, "length": 2, "url": "example.com"}]
        })))
        .expect("http link");
        assert_eq!(r.entities[0].url, "http://example.com/");
    }

    #[test]
    fn send_message_reply_forms() {
        let r = send_message_request(&p(
            json!({"chat_id": 1, "text": "x", "reply_to_message_id": 7, "allow_sending_without_reply": true}),
        ))
        .expect("legacy");
        assert_eq!((r.reply_to_message_id, r.allow_sending_without_reply), (Some(7), true));
        let r = send_message_request(&p(json!({
            "chat_id": 1, "text": "x", "reply_parameters": {"message_id": 8, "allow_sending_without_reply": true}
        })))
        .expect("reply_parameters");
        assert_eq!((r.reply_to_message_id, r.allow_sending_without_reply), (Some(8), true));
        let r = send_message_request(&p(json!({"chat_id": 1, "text": "x", "reply_to_message_id": 0}))).expect("zero");
        assert_eq!(r.reply_to_message_id, None);
        assert_eq!(
            bad(send_message_request(&p(json!({"chat_id": 1, "text": "x", "reply_parameters": {}})))),
            "Bad Request: reply_parameters.message_id is required"
        );
        assert!(bad(send_message_request(&p(json!({
            "chat_id": 1, "text": "x", "reply_parameters": {"message_id": 8, "chat_id": 2}
        }))))
        .contains("another chat"));
    }
}
