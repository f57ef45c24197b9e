//! The output contract: every JSON line `e2e-chat` prints, in one place. serde_json escapes
//! C0 controls; `display::json_for_terminal` adds DEL, C1 and bidi controls.

use super::*;
use crate::client::places::{LocationInfo, Shared};

/// The line of a message the platform took (`send`, `choose`, `send-file`).
pub(super) fn sent_line(sent: &crate::client::message::SentMessage) -> String {
    ordered(&[("chat_id", json!(sent.chat_id)), ("message_id", json!(sent.message_id)), ("date", json!(sent.date))])
}

/// The line of an edit the platform took (`edit`).
pub(super) fn edited_line(edited: &crate::client::edit::EditedMessage) -> String {
    ordered(&[("chat_id", json!(edited.chat_id)), ("message_id", json!(edited.message_id)), ("edit_date", json!(edited.edit_date))])
}

/// The `commands` output: the bot line, then a line per command.
pub(super) fn menu_lines(menu: &BotMenu) -> Vec<String> {
    let mut lines = vec![ordered(&[
        ("bot", json!(menu.bot)),
        ("description", json!(menu.description)),
        ("short_description", json!(menu.short_description)),
    ])];
    lines.extend(
        menu.commands
            .iter()
            .map(|c| ordered(&[("command", json!(c.command)), ("description", json!(c.description))])),
    );
    lines
}

/// The `group members` lines: one per user with a role.
pub(super) fn member_lines(g: &GroupDetails) -> Vec<String> {
    g.members
        .iter()
        .map(|m| {
            ordered(&[
                ("user_id", json!(m.user.user_id)),
                ("username", json!(m.user.username)),
                ("display_name", json!(m.user.display_name)),
                ("is_bot", json!(m.user.is_bot)),
                ("role", json!(role_name(m.role))),
            ])
        })
        .collect()
}

/// The `listen` line of one message. serde_json escapes C0 controls; `json_for_terminal` adds
/// DEL, C1 and bidi controls, so the line is as safe on a terminal as in a pipe.
pub(super) fn message_json(m: &ReceivedMessage) -> String {
    display::json_for_terminal(&message_json_raw(m))
}

pub(super) fn message_json_raw(m: &ReceivedMessage) -> String {
    let mut fields = vec![("chat_id", json!(m.chat_id).to_string())];
    fields.extend(message_fields(m));
    ordered_raw(&fields)
}

/// A message's fields after its chat: ids, sender, text or file, reply, keyboard, forward, via.
pub(super) fn message_fields(m: &ReceivedMessage) -> Vec<(&'static str, String)> {
    let from = sender_json(&m.sender);
    let mut fields = vec![
        ("message_id", json!(m.message_id).to_string()),
        ("date", json!(m.date).to_string()),
        ("from", from),
    ];
    match &m.media {
        // As the Bot API shows a file message: the file and a caption, no text.
        Some(media) => {
            fields.push(("media", media_json(media)));
            fields.push(("caption", json!(media.caption).to_string()));
            if !media.media_group_id.is_empty() {
                fields.push(("media_group_id", json!(media.media_group_id).to_string()));
            }
            if !media.caption_entities.is_empty() {
                fields.push(("caption_entities", Value::Array(media.caption_entities.iter().map(entity_json).collect()).to_string()));
            }
        }
        // As the Bot API shows them: the item under its own name, no text.
        None if m.shared.is_some() => fields.push(shared_field(m.shared.as_ref().expect("is some"))),
        None => {
            fields.push(("text", json!(m.text).to_string()));
            if !m.entities.is_empty() {
                fields.push(("entities", Value::Array(m.entities.iter().map(entity_json).collect()).to_string()));
            }
        }
    }
    if let Some(r) = m.reply_to_message_id {
        fields.push(("reply_to_message_id", json!(r).to_string()));
    }
    if !m.keyboard.is_empty() {
        fields.push(("keyboard", keyboard_json(&m.keyboard)));
    }
    match &m.reply_markup {
        Some(ReplyMarkup::Keyboard(k)) => fields.push(("reply_keyboard", reply_keyboard_json(k))),
        Some(ReplyMarkup::Remove) => fields.push(("remove_keyboard", "true".to_string())),
        Some(ReplyMarkup::ForceReply { placeholder }) => {
            fields.push(("force_reply", ordered(&[("placeholder", json!(placeholder))])))
        }
        None => {}
    }
    if let Some(o) = &m.forward_origin {
        let origin = match &o.channel {
            Some((title, message_id)) => ordered(&[
                ("channel_title", json!(title)),
                ("channel_message_id", json!(message_id)),
                ("date", json!(o.date)),
            ]),
            None => ordered(&[
                ("sender_user_id", json!(o.sender_user_id)),
                ("sender_username", json!(o.sender_username)),
                ("sender_first_name", json!(o.sender_first_name)),
                ("sender_is_bot", json!(o.sender_is_bot)),
                ("date", json!(o.date)),
            ]),
        };
        fields.push(("forward_origin", origin));
    }
    if let Some(bot) = m.via_bot_user_id {
        fields.push(("via_bot_user_id", json!(bot).to_string()));
    }
    fields
}

/// `{"id":HEX,"title":T}`.
pub(super) fn group_json(g: &GroupRef) -> String {
    ordered(&[("id", json!(g.id.hex())), ("title", json!(g.title))])
}

/// `[{"user_id","device_id"}]`.
pub(super) fn devices_json(devices: &[(u64, u32)]) -> String {
    let all: Vec<String> = devices.iter().map(|(u, d)| ordered(&[("user_id", json!(u)), ("device_id", json!(d))])).collect();
    format!("[{}]", all.join(","))
}

/// The `listen` line of anything that arrives: a message as `message_json` (no "event"
/// field, the shape scripts already parse), everything else with an "event" field first.
pub(super) fn incoming_json(e: &Incoming) -> String {
    let event = |name: &str| ("event", json!(name).to_string());
    let num = |v: u64| json!(v).to_string();
    let fields = match e {
        Incoming::Message(m) => return message_json(m),
        Incoming::GroupMessage { group, message } => {
            let name = if group.channel { "channel_post" } else { "group_message" };
            let mut fields = vec![event(name), ("group", group_json(group))];
            fields.extend(message_fields(message));
            fields
        }
        Incoming::GroupJoined { group } => vec![event("group_joined"), ("group", group_json(group))],
        Incoming::GroupCommit { group, added, removed, removed_me, epoch } => vec![
            event("group_commit"),
            ("group", group_json(group)),
            ("epoch", num(*epoch)),
            ("added", devices_json(added)),
            ("removed", devices_json(removed)),
            ("removed_me", json!(removed_me).to_string()),
        ],
        Incoming::GroupMembership { group, user, old, new, actor, invite_link } => {
            let mut fields = vec![
                event("group_membership"),
                ("group", group_json(group)),
                ("user", sender_json(user)),
                ("old_role", json!(role_name(*old)).to_string()),
                ("new_role", json!(role_name(*new)).to_string()),
                ("actor", sender_json(actor)),
            ];
            if !invite_link.is_empty() {
                fields.push(("invite_link", json!(invite_link).to_string()));
            }
            fields
        }
        Incoming::JoinRequest { group, user, invite_link } => vec![
            event("join_request"),
            ("group", group_json(group)),
            ("user", sender_json(user)),
            ("invite_link", json!(invite_link).to_string()),
        ],
        Incoming::JoinDeclined { group, by } => {
            vec![event("join_request_declined"), ("group", group_json(group)), ("by", sender_json(by))]
        }
        Incoming::GroupDeleted { group, message_id, actor } => vec![
            event("group_message_deleted"),
            ("group", group_json(group)),
            ("message_id", num(*message_id)),
            ("actor", sender_json(actor)),
        ],
        Incoming::GroupTitle { group, actor } => {
            vec![event("group_title"), ("group", group_json(group)), ("actor", sender_json(actor))]
        }
        Incoming::GroupEdited { group, message_id, from, edit_date, text, entities, keyboard, shared } => {
            let mut fields = vec![event("group_edited"), ("group", group_json(group)), ("message_id", num(*message_id)), ("from", sender_json(from))];
            fields.extend(edited_fields(*edit_date, text, entities, keyboard, shared.as_ref()));
            fields
        }
        Incoming::Edited { chat_id, message_id, edit_date, text, entities, keyboard, shared } => {
            let mut fields = vec![event("edited"), ("chat_id", num(*chat_id)), ("message_id", num(*message_id))];
            fields.extend(edited_fields(*edit_date, text, entities, keyboard, shared.as_ref()));
            fields
        }
        Incoming::Deleted { chat_id, message_id } => {
            vec![event("deleted"), ("chat_id", num(*chat_id)), ("message_id", num(*message_id))]
        }
        Incoming::Reaction { chat_id, message_id, from, reactions } => vec![
            event("reaction"),
            ("chat_id", num(*chat_id)),
            ("message_id", num(*message_id)),
            ("from", sender_json(from)),
            ("reactions", Value::Array(reactions.iter().map(reaction_json).collect()).to_string()),
        ],
        Incoming::ChatAction { chat_id, from, action } => vec![
            event("chat_action"),
            ("chat_id", num(*chat_id)),
            ("from", sender_json(from)),
            ("action", json!(action).to_string()),
        ],
        // The same event, scoped to its group like every group event.
        Incoming::GroupChatAction { group, from, action } => vec![
            event("chat_action"),
            ("group", group_json(group)),
            ("from", sender_json(from)),
            ("action", json!(action).to_string()),
        ],
        Incoming::CallbackAnswer { chat_id, press_id, text, show_alert, url } => {
            let mut fields = vec![
                event("callback_answer"),
                ("chat_id", num(*chat_id)),
                ("press_id", json!(press_id).to_string()),
                ("text", json!(text).to_string()),
                ("show_alert", json!(show_alert).to_string()),
            ];
            if !url.is_empty() {
                fields.push(("url", json!(url).to_string()));
            }
            fields
        }
        Incoming::InlineResults { chat_id, session_id, results, button } => {
            let mut fields = vec![event("inline_results"), ("chat_id", num(*chat_id)), ("session_id", num(*session_id))];
            if let Some(b) = button {
                fields.push(("button", json!({"text": b.text, "start_parameter": b.start_parameter}).to_string()));
            }
            fields.push((
                "results",
                Value::Array(
                    results
                        .iter()
                        .map(|r| {
                            let mut v = json!({"id": r.id, "type": r.kind, "title": r.title, "description": r.description, "text": r.text});
                            if !r.entities.is_empty() {
                                v["entities"] = Value::Array(r.entities.iter().map(entity_json).collect());
                            }
                            if let Some(m) = &r.media {
                                v["media"] = serde_json::from_str(&media_json(m)).unwrap_or(Value::Null);
                            }
                            if !r.keyboard.is_empty() {
                                v["keyboard"] = serde_json::from_str(&keyboard_json(&r.keyboard)).unwrap_or(Value::Null);
                            }
                            v
                        })
                        .collect(),
                )
                .to_string(),
            ));
            fields
        }
    };
    ordered_raw(&fields)
}

/// What an edit line says of the message now: its date, text, entities, keyboard (always
/// present: an empty one says the buttons are gone) and, for a live location that moved or
/// stopped, where it is now.
pub(super) fn edited_fields(
    edit_date: i64,
    text: &str,
    entities: &[Entity],
    keyboard: &Keyboard,
    shared: Option<&crate::client::places::Shared>,
) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("edit_date", json!(edit_date).to_string()),
        ("text", json!(text).to_string()),
        ("entities", Value::Array(entities.iter().map(entity_json).collect()).to_string()),
        ("keyboard", keyboard_json(keyboard)),
    ];
    fields.extend(shared.map(shared_field));
    fields
}

/// `{"kind","file_name","mime_type","size"}`, then width, height and duration where known.
pub(super) fn media_json(m: &MediaInfo) -> String {
    let mut fields = vec![
        ("kind", json!(m.kind.name())),
        ("file_name", json!(m.file_name)),
        ("mime_type", json!(m.mime_type)),
        ("size", json!(m.size)),
    ];
    for (name, v) in [("width", m.width), ("height", m.height), ("duration", m.duration)] {
        if v != 0 {
            fields.push((name, json!(v)));
        }
    }
    ordered(&fields)
}

pub(super) fn sender_json(s: &Sender) -> String {
    ordered(&[
        ("user_id", json!(s.user_id)),
        ("username", json!(s.username)),
        ("display_name", json!(s.display_name)),
        ("is_bot", json!(s.is_bot)),
    ])
}

/// Rows of `{"text", "callback_data"}` objects (a link button: `{"text", "url"}`).
pub(super) fn keyboard_json(k: &Keyboard) -> String {
    rows_json(k, |b| match b.url.is_empty() {
        true => ordered(&[("text", json!(b.text)), ("callback_data", json!(b.callback_data))]),
        false => ordered(&[("text", json!(b.text)), ("url", json!(b.url))]),
    })
}

/// `{"rows":[[{"text","request"}]],"one_time","placeholder"}`; request is text, contact or
/// location.
pub(super) fn reply_keyboard_json(k: &ReplyKeyboard) -> String {
    let rows = rows_json(&k.rows, |b| ordered(&[("text", json!(b.text)), ("request", json!(b.request.name()))]));
    ordered_raw(&[
        ("rows", rows),
        ("one_time", json!(k.one_time).to_string()),
        ("placeholder", json!(k.placeholder).to_string()),
    ])
}

pub(super) fn rows_json<B>(rows: &[Vec<B>], button: impl Fn(&B) -> String) -> String {
    let rows: Vec<String> = rows.iter().map(|row| format!("[{}]", row.iter().map(&button).collect::<Vec<_>>().join(","))).collect();
    format!("[{}]", rows.join(","))
}

/// A reaction as the Bot API's ReactionType object.
pub(super) fn reaction_json(r: &ReactionType) -> Value {
    match r {
        ReactionType::Emoji(e) => json!({"type": "emoji", "emoji": e}),
        ReactionType::CustomEmoji(id) => json!({"type": "custom_emoji", "custom_emoji_id": id}),
        ReactionType::Paid => json!({"type": "paid"}),
    }
}

pub(super) fn entity_json(e: &Entity) -> Value {
    let mut v = json!({"type": e.kind, "offset": e.offset, "length": e.length});
    if let Some(url) = &e.url {
        v["url"] = json!(url);
    }
    if let Some(language) = &e.language {
        v["language"] = json!(language);
    }
    v
}

/// The `listen` field of a location, venue, contact or dice message, named as in the Bot API:
/// `location` {latitude, longitude, + horizontal_accuracy, live_period, heading,
/// proximity_alert_radius, live_stopped when set}, `venue` {location, title, address, + ids},
/// `contact` {phone_number, first_name, + last_name, user_id, vcard}, `dice` {emoji, value}.
pub(crate) fn shared_field(s: &Shared) -> (&'static str, String) {
    match s {
        Shared::Location(l) => ("location", location_json(l)),
        Shared::Venue(v) => {
            let mut fields = vec![
                ("location", location_json(&v.location)),
                ("title", json!(v.title).to_string()),
                ("address", json!(v.address).to_string()),
            ];
            push_set(&mut fields, "foursquare_id", &v.foursquare_id);
            push_set(&mut fields, "google_place_id", &v.google_place_id);
            ("venue", ordered_raw(&fields))
        }
        Shared::Contact(c) => {
            let mut fields =
                vec![("phone_number", json!(c.phone_number).to_string()), ("first_name", json!(c.first_name).to_string())];
            push_set(&mut fields, "last_name", &c.last_name);
            if c.user_id != 0 {
                fields.push(("user_id", json!(c.user_id).to_string()));
            }
            push_set(&mut fields, "vcard", &c.vcard);
            ("contact", ordered_raw(&fields))
        }
        Shared::Dice(d) => ("dice", ordered(&[("emoji", json!(d.emoji)), ("value", json!(d.value))])),
        Shared::Poll(p) => {
            let options: Vec<Value> = p.options.iter().map(|(text, n)| json!({"text": text, "voter_count": n})).collect();
            let mut fields = vec![
                ("question", json!(p.question).to_string()),
                ("options", Value::Array(options).to_string()),
                ("type", json!(if p.quiz { "quiz" } else { "regular" }).to_string()),
                ("is_anonymous", json!(p.is_anonymous).to_string()),
                ("allows_multiple_answers", json!(p.allows_multiple_answers).to_string()),
                ("is_closed", json!(p.is_closed).to_string()),
                ("total_voter_count", json!(p.total_voter_count).to_string()),
            ];
            fields.push(("allows_revoting", json!(p.allows_revoting).to_string()));
            if p.quiz {
                fields.push(("correct_option_ids", json!(p.correct_option_ids).to_string()));
            }
            push_set(&mut fields, "explanation", &p.explanation);
            if p.close_date != 0 {
                fields.push(("close_date", json!(p.close_date).to_string()));
            }
            ("poll", ordered_raw(&fields))
        }
    }
}

fn location_json(l: &LocationInfo) -> String {
    let mut fields: Vec<(&str, Value)> = vec![("latitude", json!(l.latitude)), ("longitude", json!(l.longitude))];
    if l.horizontal_accuracy > 0.0 {
        fields.push(("horizontal_accuracy", json!(l.horizontal_accuracy)));
    }
    for (name, v) in [("live_period", l.live_period), ("heading", l.heading), ("proximity_alert_radius", l.proximity_alert_radius)] {
        if v != 0 {
            fields.push((name, json!(v)));
        }
    }
    if l.live_stopped {
        fields.push(("live_stopped", json!(true)));
    }
    ordered(&fields)
}

fn push_set(fields: &mut Vec<(&'static str, String)>, name: &'static str, value: &str) {
    if !value.is_empty() {
        fields.push((name, json!(value).to_string()));
    }
}
