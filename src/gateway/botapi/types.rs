//! Bot API JSON objects built from plain domain views (User, Chat, Message, Update,
//! MessageEntity). The entity rules (reading, counting and checking entities, UTF-16 lengths)
//! are in `text::entities`.
//!
//! Every builder emits exactly the shape PTB 22.8, aiogram 3.29.1 and telegraf 4.16.3 accept
//! (SDK-COMPAT §6): required fields always present, integers as JSON numbers, booleans as JSON
//! booleans, absent optional fields omitted (never `null`). This module owns no state and knows
//! nothing about storage; the runtime fills the views.

use serde_json::{json, Map, Value};

use crate::wire::e2e::poll::Type as PollType;
use crate::wire::e2e::{Contact, Dice, Entity, Location, Poll, Venue};

/// Update payload keys the gateway may emit (SPEC "Update").
pub const UPDATE_KINDS: &[&str] = &[
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
    "callback_query",
    "inline_query",
    "chosen_inline_result",
    "message_reaction",
    "my_chat_member",
    "chat_member",
    "chat_join_request",
    "poll",
    "poll_answer",
];

// ── Views ──

/// A Bot API User.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserView {
    pub id: i64,
    pub is_bot: bool,
    pub first_name: String,
    /// `getMe` must carry it (SDK-COMPAT §0.9).
    pub username: Option<String>,
}

/// A Bot API Chat. Only the fields the gateway knows; `type` follows from the variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatView {
    Private { id: i64, first_name: String, username: Option<String> },
    Group { id: i64, title: String },
    Supergroup { id: i64, title: String, username: Option<String> },
    Channel { id: i64, title: String, username: Option<String> },
}

impl ChatView {
    pub fn id(&self) -> i64 {
        match self {
            ChatView::Private { id, .. }
            | ChatView::Group { id, .. }
            | ChatView::Supergroup { id, .. }
            | ChatView::Channel { id, .. } => *id,
        }
    }

    /// The Bot API `Chat.type` value.
    pub fn kind(&self) -> &'static str {
        match self {
            ChatView::Private { .. } => "private",
            ChatView::Group { .. } => "group",
            ChatView::Supergroup { .. } => "supergroup",
            ChatView::Channel { .. } => "channel",
        }
    }
}

/// A Bot API Message (text messages for now).
#[derive(Debug, Clone, PartialEq)]
pub struct MessageView {
    pub message_id: i64,
    /// Unix seconds; must not be 0 (0 marks an inaccessible message in PTB and aiogram).
    pub date: i64,
    pub chat: ChatView,
    /// Absent on channel posts, which carry `sender_chat` (the channel) instead.
    pub from: Option<UserView>,
    pub sender_chat: Option<ChatView>,
    pub text: Option<String>,
    /// Entities of `text`, offsets in UTF-16 code units; emitted only with `text`.
    pub entities: Vec<Entity>,
    /// Serialised one level deep only (SPEC "Reply snapshots nest one level only").
    pub reply_to_message: Option<Box<MessageView>>,
    /// When the bot last edited the message; `None` when never.
    pub edit_date: Option<i64>,
    /// Set on a forwarded message: who wrote the original, and when.
    pub forward_origin: Option<ForwardOriginView>,
    /// The inline keyboard: rows of callback buttons.
    pub reply_markup: Vec<Vec<ButtonView>>,
    /// The bot whose inline result the user sent.
    pub via_bot: Option<UserView>,
    /// The file of a media message (photo, document, audio, video, voice, animation, video
    /// note, sticker).
    pub media: Option<MediaView>,
    /// The album the message belongs to (sendMediaGroup, or a user's album).
    pub media_group_id: Option<String>,
    /// The media's caption and its entities (UTF-16 offsets); emitted only with `media`.
    pub caption: Option<String>,
    pub caption_entities: Vec<Entity>,
    /// A location, venue, contact or dice the message carries (checked when it arrived).
    pub shared: Option<SharedView>,
}

/// What a location, venue, contact or dice message shows. A location's live fields are set
/// only while it is live (the view's builder clears them once it stopped or ran out), as the
/// Bot API shows `live_period` "for active live locations only".
#[derive(Debug, Clone, PartialEq)]
pub enum SharedView {
    Location(Location),
    Venue(Venue),
    Contact(Contact),
    Dice(Dice),
    /// A poll under its Bot API id, with the counts and `is_closed` as they are now.
    Poll { id: String, poll: Poll },
}

/// Which Bot API object a file is shown as (its `name` is the Message field).
pub use crate::e2e::file::MediaKind;

/// A file as a Bot API PhotoSize, Document, Audio, Video or Voice. Dimensions and durations
/// the sender did not give are 0, since the SDKs require them (SDK-TYPES).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaView {
    pub kind: MediaKind,
    pub file_id: String,
    pub file_unique_id: String,
    pub file_size: u64,
    pub width: u32,
    pub height: u32,
    pub duration: u32,
    pub mime_type: Option<String>,
    pub file_name: Option<String>,
    pub performer: Option<String>,
    pub title: Option<String>,
    /// A sticker's emoji.
    pub emoji: Option<String>,
}

/// An inline button: a callback button (`callback_data`) or a link (`url`); the other is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ButtonView {
    pub text: String,
    pub callback_data: String,
    pub url: String,
}

/// Where a forwarded message comes from (a Bot API MessageOrigin), with the original's date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardOriginView {
    /// MessageOriginUser: written by a user (or bot), in a private chat or a group.
    User { sender_user: UserView, date: i64 },
    /// MessageOriginChannel: a channel's post, `message_id` in that channel.
    Channel { chat: ChatView, message_id: i64, date: i64 },
}

/// MessageOrigin JSON with the fields every SDK requires for its `type` (SDK-TYPES).
pub fn forward_origin_json(origin: &ForwardOriginView) -> Value {
    match origin {
        ForwardOriginView::User { sender_user, date } => {
            json!({"type": "user", "date": date, "sender_user": user_json(sender_user)})
        }
        ForwardOriginView::Channel { chat, message_id, date } => {
            json!({"type": "channel", "date": date, "chat": chat_json(chat), "message_id": message_id})
        }
    }
}

/// A Bot API ReactionType.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactionView {
    Emoji(String),
    CustomEmoji(String),
    Paid,
}

// ── JSON builders ──

/// User JSON: `id`, `is_bot`, `first_name`, and `username` when known.
pub fn user_json(user: &UserView) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(user.id));
    o.insert("is_bot".into(), json!(user.is_bot));
    o.insert("first_name".into(), json!(user.first_name));
    insert_opt_str(&mut o, "username", user.username.as_deref());
    Value::Object(o)
}

/// Chat JSON: `id`, `type`, plus the variant's names.
pub fn chat_json(chat: &ChatView) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(chat.id()));
    o.insert("type".into(), json!(chat.kind()));
    match chat {
        ChatView::Private { first_name, username, .. } => {
            o.insert("first_name".into(), json!(first_name));
            insert_opt_str(&mut o, "username", username.as_deref());
        }
        ChatView::Group { title, .. } => {
            o.insert("title".into(), json!(title));
        }
        ChatView::Supergroup { title, username, .. } | ChatView::Channel { title, username, .. } => {
            o.insert("title".into(), json!(title));
            insert_opt_str(&mut o, "username", username.as_deref());
        }
    }
    Value::Object(o)
}

/// Message JSON. `reply_to_message` is nested one level: the nested message never carries its
/// own `reply_to_message`.
pub fn message_json(msg: &MessageView) -> Value {
    message_json_at(msg, true)
}

fn message_json_at(msg: &MessageView, nest: bool) -> Value {
    let mut o = Map::new();
    o.insert("message_id".into(), json!(msg.message_id));
    if let Some(from) = &msg.from {
        o.insert("from".into(), user_json(from));
    }
    if let Some(sender_chat) = &msg.sender_chat {
        o.insert("sender_chat".into(), chat_json(sender_chat));
    }
    o.insert("date".into(), json!(msg.date));
    o.insert("chat".into(), chat_json(&msg.chat));
    if nest {
        if let Some(reply) = &msg.reply_to_message {
            o.insert("reply_to_message".into(), message_json_at(reply, false));
        }
    }
    if let Some(origin) = &msg.forward_origin {
        o.insert("forward_origin".into(), forward_origin_json(origin));
    }
    if let Some(via) = &msg.via_bot {
        o.insert("via_bot".into(), user_json(via));
    }
    if let Some(edit_date) = msg.edit_date {
        o.insert("edit_date".into(), json!(edit_date));
    }
    if let Some(text) = &msg.text {
        o.insert("text".into(), json!(text));
        if !msg.entities.is_empty() {
            o.insert("entities".into(), entities_to_json(&msg.entities));
        }
    }
    if let Some(media) = &msg.media {
        o.insert(media.kind.name().into(), media_json(media));
        // As in the Bot API: "for backward compatibility, when [animation] is set, the
        // document field will also be set".
        if media.kind == MediaKind::Animation {
            o.insert("document".into(), media_json(&MediaView { kind: MediaKind::Document, ..media.clone() }));
        }
        if let Some(id) = &msg.media_group_id {
            o.insert("media_group_id".into(), json!(id));
        }
        if let Some(caption) = &msg.caption {
            o.insert("caption".into(), json!(caption));
            if !msg.caption_entities.is_empty() {
                o.insert("caption_entities".into(), entities_to_json(&msg.caption_entities));
            }
        }
    }
    match &msg.shared {
        Some(SharedView::Location(l)) => {
            o.insert("location".into(), location_json(l));
        }
        // A venue message has its point as `location` too, as in the Bot API.
        Some(SharedView::Venue(v)) => {
            o.insert("location".into(), location_json(v.location.get_or_default()));
            o.insert("venue".into(), venue_json(v));
        }
        Some(SharedView::Contact(c)) => {
            o.insert("contact".into(), contact_json(c));
        }
        Some(SharedView::Dice(d)) => {
            o.insert("dice".into(), json!({"emoji": d.emoji, "value": d.value}));
        }
        Some(SharedView::Poll { id, poll }) => {
            o.insert("poll".into(), poll_json(id, poll));
        }
        None => {}
    }
    if !msg.reply_markup.is_empty() {
        o.insert("reply_markup".into(), inline_keyboard_json(&msg.reply_markup));
    }
    Value::Object(o)
}

/// The value of a media message's `photo` (an array of one PhotoSize), `document`, `audio`,
/// `video`, `voice`, `animation`, `video_note` or `sticker` field, with every field the SDKs
/// require (a sticker is a static "regular" one; a video note's `length` is its diameter).
pub fn media_json(m: &MediaView) -> Value {
    use MediaKind::*;
    let mut o = Map::new();
    o.insert("file_id".into(), json!(m.file_id));
    o.insert("file_unique_id".into(), json!(m.file_unique_id));
    if matches!(m.kind, Photo | Video | Animation | Sticker) {
        o.insert("width".into(), json!(m.width));
        o.insert("height".into(), json!(m.height));
    }
    if m.kind == VideoNote {
        o.insert("length".into(), json!(m.width));
    }
    if matches!(m.kind, Audio | Video | Voice | Animation | VideoNote) {
        o.insert("duration".into(), json!(m.duration));
    }
    if m.kind == Audio {
        insert_opt_str(&mut o, "performer", m.performer.as_deref());
        insert_opt_str(&mut o, "title", m.title.as_deref());
    }
    if m.kind == Sticker {
        o.insert("type".into(), json!("regular"));
        o.insert("is_animated".into(), json!(false));
        o.insert("is_video".into(), json!(false));
        insert_opt_str(&mut o, "emoji", m.emoji.as_deref());
    }
    if matches!(m.kind, Document | Audio | Video | Animation) {
        insert_opt_str(&mut o, "file_name", m.file_name.as_deref());
    }
    if matches!(m.kind, Document | Audio | Video | Voice | Animation) {
        insert_opt_str(&mut o, "mime_type", m.mime_type.as_deref());
    }
    o.insert("file_size".into(), json!(m.file_size));
    match m.kind {
        Photo => Value::Array(vec![Value::Object(o)]),
        _ => Value::Object(o),
    }
}

/// Location JSON: `latitude`, `longitude` (required by every SDK), and the optional
/// `horizontal_accuracy`, `live_period`, `heading`, `proximity_alert_radius` when set.
pub fn location_json(l: &Location) -> Value {
    let mut o = Map::new();
    o.insert("latitude".into(), json!(l.latitude));
    o.insert("longitude".into(), json!(l.longitude));
    if l.horizontal_accuracy > 0.0 {
        o.insert("horizontal_accuracy".into(), json!(l.horizontal_accuracy));
    }
    for (key, v) in [("live_period", l.live_period), ("heading", l.heading), ("proximity_alert_radius", l.proximity_alert_radius)] {
        if v != 0 {
            o.insert(key.into(), json!(v));
        }
    }
    Value::Object(o)
}

/// Venue JSON: `location`, `title`, `address` (required), and the directory fields when set.
pub fn venue_json(v: &Venue) -> Value {
    let mut o = Map::new();
    o.insert("location".into(), location_json(v.location.get_or_default()));
    o.insert("title".into(), json!(v.title));
    o.insert("address".into(), json!(v.address));
    insert_opt_str(&mut o, "foursquare_id", Some(&v.foursquare_id));
    insert_opt_str(&mut o, "foursquare_type", Some(&v.foursquare_type));
    insert_opt_str(&mut o, "google_place_id", Some(&v.google_place_id));
    insert_opt_str(&mut o, "google_place_type", Some(&v.google_place_type));
    Value::Object(o)
}

/// Contact JSON: `phone_number` (required by every SDK; `""` for a platform user, who has
/// none: docs/decisions.md), `first_name`, and `last_name`, `user_id`, `vcard` when set.
pub fn contact_json(c: &Contact) -> Value {
    let mut o = Map::new();
    o.insert("phone_number".into(), json!(c.phone_number));
    o.insert("first_name".into(), json!(c.first_name));
    insert_opt_str(&mut o, "last_name", Some(&c.last_name));
    if c.user_id != 0 {
        o.insert("user_id".into(), json!(c.user_id));
    }
    insert_opt_str(&mut o, "vcard", Some(&c.vcard));
    Value::Object(o)
}

/// Poll JSON with every field PTB 22.8 and aiogram 3.29 require (Bot API 9.6/10.0: `id`,
/// `question`, `options` with `persistent_id` and `voter_count`, `total_voter_count`,
/// `is_closed`, `is_anonymous`, `type`, `allows_multiple_answers`, `allows_revoting`,
/// `members_only`), and `correct_option_ids`, `explanation`, `close_date` when they apply. An
/// option's persistent id is its index: options are never added or removed here.
pub fn poll_json(id: &str, p: &Poll) -> Value {
    let quiz = p.type_.enum_value() == Ok(PollType::QUIZ);
    let mut o = Map::new();
    o.insert("id".into(), json!(id));
    o.insert("question".into(), json!(p.question));
    o.insert(
        "options".into(),
        Value::Array(
            p.options
                .iter()
                .enumerate()
                .map(|(i, opt)| json!({"persistent_id": i.to_string(), "text": opt.text, "voter_count": opt.voter_count}))
                .collect(),
        ),
    );
    o.insert("total_voter_count".into(), json!(p.total_voter_count));
    o.insert("is_closed".into(), json!(p.is_closed));
    o.insert("is_anonymous".into(), json!(p.is_anonymous));
    o.insert("type".into(), json!(if quiz { "quiz" } else { "regular" }));
    o.insert("allows_multiple_answers".into(), json!(p.allows_multiple_answers));
    o.insert("allows_revoting".into(), json!(p.allows_revoting));
    o.insert("members_only".into(), json!(false));
    if quiz && !p.correct_option_ids.is_empty() {
        o.insert("correct_option_ids".into(), json!(p.correct_option_ids));
    }
    insert_opt_str(&mut o, "explanation", Some(&p.explanation));
    if p.close_date != 0 {
        o.insert("close_date".into(), json!(p.close_date));
    }
    Value::Object(o)
}

/// PollAnswer JSON: `poll_id`, `user`, `option_ids` and `option_persistent_ids` (both
/// empty: the vote was retracted).
pub fn poll_answer_json(poll_id: &str, user: &UserView, option_ids: &[u32]) -> Value {
    let persistent: Vec<String> = option_ids.iter().map(u32::to_string).collect();
    json!({"poll_id": poll_id, "user": user_json(user), "option_ids": option_ids, "option_persistent_ids": persistent})
}

/// File JSON (getFile): `file_id`, `file_unique_id`, `file_size`, and the relative
/// `file_path` the download URL takes.
pub fn file_json(file_id: &str, file_unique_id: &str, file_size: u64, file_path: &str) -> Value {
    json!({"file_id": file_id, "file_unique_id": file_unique_id, "file_size": file_size, "file_path": file_path})
}

/// InlineKeyboardMarkup JSON: `{"inline_keyboard": [[{"text", "callback_data" or "url"}]]}`.
pub fn inline_keyboard_json(rows: &[Vec<ButtonView>]) -> Value {
    let button = |b: &ButtonView| match b.url.is_empty() {
        true => json!({"text": b.text, "callback_data": b.callback_data}),
        false => json!({"text": b.text, "url": b.url}),
    };
    let rows: Vec<Value> = rows.iter().map(|row| row.iter().map(button).collect()).collect();
    json!({ "inline_keyboard": rows })
}

/// CallbackQuery JSON: `id`, `from`, `message`, `chat_instance`, `data` (SDK-TYPES §1).
pub fn callback_query_json(id: &str, from: &UserView, message: &MessageView, chat_instance: &str, data: &str) -> Value {
    json!({
        "id": id,
        "from": user_json(from),
        "message": message_json(message),
        "chat_instance": chat_instance,
        "data": data,
    })
}

/// InlineQuery JSON: `id`, `from`, `query`, `offset` (always `""`: no pagination), and
/// `chat_type` "sender" (the private dialog with the bot itself).
pub fn inline_query_json(id: &str, from: &UserView, query: &str) -> Value {
    json!({"id": id, "from": user_json(from), "query": query, "offset": "", "chat_type": "sender"})
}

/// ChosenInlineResult JSON: `result_id`, `from`, `query`.
/// A press of a button under an inline message: `inline_message_id` instead of `message`.
pub fn inline_callback_query_json(id: &str, from: &UserView, inline_message_id: &str, chat_instance: &str, data: &str) -> Value {
    json!({
        "id": id,
        "from": user_json(from),
        "inline_message_id": inline_message_id,
        "chat_instance": chat_instance,
        "data": data,
    })
}

/// `inline_message_id` is set when the chosen result had buttons, as in the Bot API.
pub fn chosen_inline_result_json(result_id: &str, from: &UserView, query: &str, inline_message_id: Option<&str>) -> Value {
    let mut v = json!({"result_id": result_id, "from": user_json(from), "query": query});
    if let Some(id) = inline_message_id {
        v["inline_message_id"] = json!(id);
    }
    v
}

/// ReactionType JSON (`emoji`, `custom_emoji`, `paid`: the only types aiogram accepts).
pub fn reaction_json(r: &ReactionView) -> Value {
    match r {
        ReactionView::Emoji(e) => json!({"type": "emoji", "emoji": e}),
        ReactionView::CustomEmoji(id) => json!({"type": "custom_emoji", "custom_emoji_id": id}),
        ReactionView::Paid => json!({"type": "paid"}),
    }
}

/// MessageReactionUpdated JSON: `chat`, `message_id`, `user`, `date`, `old_reaction`,
/// `new_reaction` (SDK-TYPES §1).
pub fn message_reaction_json(
    chat: &ChatView,
    message_id: i64,
    user: &UserView,
    date: i64,
    old: &[ReactionView],
    new: &[ReactionView],
) -> Value {
    json!({
        "chat": chat_json(chat),
        "message_id": message_id,
        "user": user_json(user),
        "date": date,
        "old_reaction": old.iter().map(reaction_json).collect::<Vec<_>>(),
        "new_reaction": new.iter().map(reaction_json).collect::<Vec<_>>(),
    })
}

/// `{"update_id": N, "<kind>": payload}`: exactly one payload key (SDK-COMPAT §6 "Update").
pub fn update_json(update_id: i64, kind: &str, payload: Value) -> Value {
    debug_assert!(UPDATE_KINDS.contains(&kind), "unknown update kind {kind}");
    let mut o = Map::new();
    o.insert("update_id".into(), json!(update_id));
    o.insert(kind.to_string(), payload);
    Value::Object(o)
}

/// MessageEntity JSON array: `type`, `offset`, `length`, plus `url` for `text_link` and
/// `language` for `pre` when set.
pub fn entities_to_json(entities: &[Entity]) -> Value {
    Value::Array(
        entities
            .iter()
            .map(|e| {
                let mut o = Map::new();
                o.insert("type".into(), json!(e.type_));
                o.insert("offset".into(), json!(e.offset));
                o.insert("length".into(), json!(e.length));
                if e.type_ == "text_link" && !e.url.is_empty() {
                    o.insert("url".into(), json!(e.url));
                }
                if e.type_ == "pre" && !e.language.is_empty() {
                    o.insert("language".into(), json!(e.language));
                }
                Value::Object(o)
            })
            .collect(),
    )
}

fn insert_opt_str(o: &mut Map<String, Value>, key: &str, value: Option<&str>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        o.insert(key.to_string(), json!(v));
    }
}

/// Path of the first `null` inside `v`, if any (tests use it to enforce SDK-COMPAT §0.7).
#[cfg(test)]
pub(crate) fn find_null(v: &Value, path: &str) -> Option<String> {
    match v {
        Value::Null => Some(path.to_string()),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| find_null(x, &format!("{path}[{i}]"))),
        Value::Object(o) => o.iter().find_map(|(k, x)| find_null(x, &format!("{path}.{k}"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::botapi::text::entities::command_entities;

    fn alice() -> UserView {
        UserView { id: 42, is_bot: false, first_name: "Alice".into(), username: None }
    }

    fn chat() -> ChatView {
        ChatView::Private { id: 42, first_name: "Alice".into(), username: Some("alice".into()) }
    }

    fn msg(id: i64, text: Option<&str>) -> MessageView {
        MessageView {
            message_id: id,
            date: 1_700_000_000,
            chat: chat(),
            from: Some(alice()),
            sender_chat: None,
            text: text.map(str::to_string),
            entities: Vec::new(),
            reply_to_message: None,
            edit_date: None,
            forward_origin: None,
            reply_markup: Vec::new(),
            via_bot: None,
            media: None,
            media_group_id: None,
            caption: None,
            caption_entities: Vec::new(),
            shared: None,
        }
    }

    #[test]
    fn shared_items_have_the_sdk_shapes() {
        let point = Location { latitude: 52.5, longitude: 13.25, ..Default::default() };
        let mut m = msg(5, None);
        m.shared = Some(SharedView::Location(point.clone()));
        let v = message_json(&m);
        assert_eq!(v["location"], json!({"latitude": 52.5, "longitude": 13.25}), "a static point has no live fields");
        assert!(v.get("text").is_none() && v.get("venue").is_none());

        let live = Location { horizontal_accuracy: 5.5, live_period: 600, heading: 90, proximity_alert_radius: 100, ..point.clone() };
        assert_eq!(
            location_json(&live),
            json!({"latitude": 52.5, "longitude": 13.25, "horizontal_accuracy": 5.5, "live_period": 600, "heading": 90, "proximity_alert_radius": 100})
        );

        let venue = Venue {
            location: protobuf::MessageField::some(point.clone()),
            title: "Cafe".into(),
            address: "Main St 1".into(),
            google_place_id: "g1".into(),
            ..Default::default()
        };
        m.shared = Some(SharedView::Venue(venue));
        let v = message_json(&m);
        assert_eq!(find_null(&v, "$"), None);
        assert_eq!(v["location"], v["venue"]["location"], "a venue message carries its point as location too");
        assert_eq!(
            v["venue"],
            json!({"location": {"latitude": 52.5, "longitude": 13.25}, "title": "Cafe", "address": "Main St 1", "google_place_id": "g1"})
        );

        m.shared = Some(SharedView::Contact(Contact { first_name: "Ann".into(), user_id: 42, ..Default::default() }));
        let v = message_json(&m);
        assert_eq!(v["contact"], json!({"phone_number": "", "first_name": "Ann", "user_id": 42}), "phone_number is always there");

        m.shared = Some(SharedView::Dice(Dice { emoji: "🎯".into(), value: 6, ..Default::default() }));
        assert_eq!(message_json(&m)["dice"], json!({"emoji": "🎯", "value": 6}));

        let option = |text: &str, n| crate::wire::e2e::PollOption { text: text.into(), voter_count: n, ..Default::default() };
        let quiz = Poll {
            question: "2+2?".into(),
            options: vec![option("3", 0), option("4", 2)],
            type_: PollType::QUIZ.into(),
            correct_option_ids: vec![1],
            total_voter_count: 2,
            ..Default::default()
        };
        m.shared = Some(SharedView::Poll { id: "42_5".into(), poll: quiz });
        let v = message_json(&m);
        assert_eq!(find_null(&v, "$"), None);
        assert_eq!(
            v["poll"],
            json!({
                "id": "42_5", "question": "2+2?",
                "options": [{"persistent_id": "0", "text": "3", "voter_count": 0}, {"persistent_id": "1", "text": "4", "voter_count": 2}],
                "total_voter_count": 2, "is_closed": false, "is_anonymous": false, "type": "quiz",
                "allows_multiple_answers": false, "allows_revoting": false, "members_only": false, "correct_option_ids": [1]
            })
        );
        assert_eq!(
            poll_answer_json("42_5", &alice(), &[1]),
            json!({"poll_id": "42_5", "user": {"id": 42, "is_bot": false, "first_name": "Alice"}, "option_ids": [1], "option_persistent_ids": ["1"]})
        );
    }

    #[test]
    fn media_json_has_every_required_field_per_kind() {
        let view = |kind| MediaView {
            kind,
            file_id: "F".into(),
            file_unique_id: "U".into(),
            file_size: 9,
            width: 0,
            height: 0,
            duration: 0,
            mime_type: Some("image/jpeg".into()),
            file_name: Some("a.jpg".into()),
            performer: None,
            title: Some("T".into()),
            emoji: Some("🙂".into()),
        };
        assert_eq!(
            media_json(&view(MediaKind::Photo)),
            json!([{"file_id": "F", "file_unique_id": "U", "width": 0, "height": 0, "file_size": 9}])
        );
        assert_eq!(
            media_json(&view(MediaKind::Document)),
            json!({"file_id": "F", "file_unique_id": "U", "file_name": "a.jpg", "mime_type": "image/jpeg", "file_size": 9})
        );
        let audio = media_json(&view(MediaKind::Audio));
        assert_eq!((audio["duration"].clone(), audio["title"].clone()), (json!(0), json!("T")));
        assert!(audio.get("performer").is_none(), "absent fields are omitted");
        let video = media_json(&view(MediaKind::Video));
        assert!(video["width"].is_number() && video["height"].is_number() && video["duration"].is_number());
        let voice = media_json(&view(MediaKind::Voice));
        assert!(voice["duration"].is_number() && voice.get("file_name").is_none());
        let animation = media_json(&view(MediaKind::Animation));
        assert_eq!(
            animation,
            json!({"file_id": "F", "file_unique_id": "U", "width": 0, "height": 0, "duration": 0, "file_name": "a.jpg",
                   "mime_type": "image/jpeg", "file_size": 9})
        );
        assert_eq!(
            media_json(&view(MediaKind::VideoNote)),
            json!({"file_id": "F", "file_unique_id": "U", "length": 0, "duration": 0, "file_size": 9})
        );
        assert_eq!(
            media_json(&view(MediaKind::Sticker)),
            json!({"file_id": "F", "file_unique_id": "U", "width": 0, "height": 0, "type": "regular", "is_animated": false,
                   "is_video": false, "emoji": "🙂", "file_size": 9})
        );
        let mut gif = msg(2, None);
        gif.media = Some(view(MediaKind::Animation));
        gif.media_group_id = Some("g1".into());
        let j = message_json(&gif);
        assert_eq!((j["animation"]["file_id"].clone(), j["document"]["file_id"].clone()), (json!("F"), json!("F")));
        assert!(j["document"].get("width").is_none(), "the document copy is a Document");
        assert_eq!(j["media_group_id"], "g1");
        let mut m = msg(1, None);
        m.media = Some(view(MediaKind::Voice));
        m.caption = Some("hi".into());
        let j = message_json(&m);
        assert_eq!((j["voice"]["file_id"].clone(), j["caption"].clone()), (json!("F"), json!("hi")));
        assert!(j.get("text").is_none() && j.get("caption_entities").is_none());
    }

    #[test]
    fn user_json_omits_absent_username() {
        let v = user_json(&alice());
        assert_eq!(v, json!({"id": 42, "is_bot": false, "first_name": "Alice"}));
        let bot = UserView { id: 7, is_bot: true, first_name: "B".into(), username: Some("b_bot".into()) };
        assert_eq!(user_json(&bot)["username"], "b_bot");
        assert_eq!(user_json(&bot)["is_bot"], true);
    }

    #[test]
    fn chat_json_per_kind() {
        assert_eq!(
            chat_json(&chat()),
            json!({"id": 42, "type": "private", "first_name": "Alice", "username": "alice"})
        );
        let g = ChatView::Group { id: -5, title: "G".into() };
        assert_eq!(chat_json(&g), json!({"id": -5, "type": "group", "title": "G"}));
        let c = ChatView::Channel { id: -9, title: "C".into(), username: None };
        assert_eq!(chat_json(&c), json!({"id": -9, "type": "channel", "title": "C"}));
    }

    #[test]
    fn message_json_is_valid_and_never_null() {
        let mut inner = msg(1, Some("first"));
        inner.reply_to_message = Some(Box::new(msg(0, Some("too deep"))));
        let mut m = msg(2, Some("/start hi"));
        m.entities = command_entities("/start hi");
        m.reply_to_message = Some(Box::new(inner));
        let v = message_json(&m);
        assert_eq!(find_null(&v, "$"), None);
        assert_eq!(v["message_id"], 2);
        assert_eq!(v["date"], 1_700_000_000);
        assert_eq!(v["chat"]["type"], "private");
        assert_eq!(v["entities"], json!([{"type": "bot_command", "offset": 0, "length": 6}]));
        assert_eq!(v["reply_to_message"]["message_id"], 1);
        assert!(v["reply_to_message"].get("reply_to_message").is_none(), "nested more than one level: {v}");

        let bare = message_json(&msg(3, None));
        assert_eq!(find_null(&bare, "$"), None);
        for key in ["text", "entities", "reply_to_message", "edit_date", "forward_origin", "reply_markup"] {
            assert!(bare.get(key).is_none(), "{key} present in {bare}");
        }
    }

    #[test]
    fn keyboards_origins_and_edits_have_the_sdk_shapes() {
        let mut m = msg(4, Some("menu"));
        m.edit_date = Some(1_700_000_100);
        m.reply_markup = vec![vec![
            ButtonView { text: "A".into(), callback_data: "a".into(), url: String::new() },
            ButtonView { text: "Site".into(), callback_data: String::new(), url: "https://example.org/".into() },
        ]];
        m.forward_origin = Some(ForwardOriginView::User { sender_user: alice(), date: 1_600_000_000 });
        let v = message_json(&m);
        assert_eq!(find_null(&v, "$"), None);
        assert_eq!(v["edit_date"], 1_700_000_100);
        assert_eq!(
            v["reply_markup"],
            json!({"inline_keyboard": [[{"text": "A", "callback_data": "a"}, {"text": "Site", "url": "https://example.org/"}]]})
        );
        assert_eq!(
            v["forward_origin"],
            json!({"type": "user", "date": 1_600_000_000, "sender_user": {"id": 42, "is_bot": false, "first_name": "Alice"}})
        );
        let channel = ChatView::Channel { id: -(1 << 51) - 5, title: "Cat news".into(), username: None };
        let post = forward_origin_json(&ForwardOriginView::Channel { chat: channel, message_id: 9, date: 1_600_000_001 });
        assert_eq!(
            post,
            json!({"type": "channel", "date": 1_600_000_001, "message_id": 9, "chat": {"id": -(1_i64 << 51) - 5, "type": "channel", "title": "Cat news"}})
        );
        let q = callback_query_json("42_ab", &alice(), &m, "42", "a");
        for key in ["id", "from", "message", "chat_instance", "data"] {
            assert!(q.get(key).is_some(), "{key} missing in {q}");
        }
        let r = message_reaction_json(&chat(), 4, &alice(), 5, &[], &[ReactionView::Emoji("👍".into())]);
        assert_eq!(r["old_reaction"], json!([]));
        assert_eq!(r["new_reaction"], json!([{"type": "emoji", "emoji": "👍"}]));
        assert_eq!(reaction_json(&ReactionView::Paid), json!({"type": "paid"}));
        assert_eq!(
            reaction_json(&ReactionView::CustomEmoji("5".into())),
            json!({"type": "custom_emoji", "custom_emoji_id": "5"})
        );
    }

    #[test]
    fn update_json_has_one_payload_key() {
        let u = update_json(10, "message", message_json(&msg(1, Some("x"))));
        let o = u.as_object().expect("object");
        assert_eq!(o.len(), 2);
        assert_eq!(u["update_id"], 10);
        assert!(u["message"].is_object());
    }
}
