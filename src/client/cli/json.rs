//! The one-JSON-object-per-line output that scripts depend on (change it only together with
//! them): what `listen` prints of every arrival and the objects it is made of, and the lines
//! of a sent message, a group's members, a bot's menu and an invite link, for every command.

use serde_json::{json, Value};

use crate::client::bot_profile::BotMenu;
use crate::client::cli_common::{ordered, ordered_raw};
use crate::client::display;
use crate::client::group::GroupDetails;
use crate::client::message::{
    role_name, Entity, GroupId, GroupRef, Incoming, Keyboard, MediaInfo, ReactionType, ReceivedMessage, ReplyMarkup, SentMessage, Sender,
};
use crate::client::places::{LocationInfo, Shared};
use crate::client::reply_keyboard::{ButtonRequest, PollKind, ReplyKeyboard};
use crate::wire::platform::InviteLink;

/// `{"chat_id","message_id","date"}`: a message sent in a dialog.
pub(crate) fn sent_json(sent: &SentMessage) -> String {
    ordered(&sent_fields(sent))
}

/// The fields of `sent_json`, for a line that says more of what was sent.
pub(crate) fn sent_fields(sent: &SentMessage) -> Vec<(&'static str, Value)> {
    vec![("chat_id", json!(sent.chat_id)), ("message_id", json!(sent.message_id)), ("date", json!(sent.date))]
}

/// `{"group_id","message_id","date"}`: a message sent to a group or posted in a channel.
pub(super) fn group_sent_json(group: &GroupId, message_id: u64, date: i64) -> String {
    ordered(&[("group_id", json!(group.hex())), ("message_id", json!(message_id)), ("date", json!(date))])
}

/// The `group members` lines: one per user with a role.
pub(super) fn member_lines(g: &GroupDetails) -> Vec<String> {
    g.members
        .iter()
        .map(|m| {
            let mut fields = sender_fields(&m.user);
            fields.push(("role", json!(role_name(m.role))));
            ordered(&fields)
        })
        .collect()
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

/// The `listen` line of one message. serde_json escapes C0 controls; `json_for_terminal` adds
/// DEL, C1 and bidi controls, so the line is as safe on a terminal as in a pipe.
fn message_json(m: &ReceivedMessage) -> String {
    display::json_for_terminal(&message_json_raw(m))
}

fn message_json_raw(m: &ReceivedMessage) -> String {
    let mut fields = vec![("chat_id", json!(m.chat_id).to_string())];
    fields.extend(message_fields(m));
    ordered_raw(&fields)
}

/// A message's fields after its chat: ids, sender, text or file, reply, keyboard, forward, via.
fn message_fields(m: &ReceivedMessage) -> Vec<(&'static str, String)> {
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
fn group_json(g: &GroupRef) -> String {
    ordered(&[("id", json!(g.id.hex())), ("title", json!(g.title))])
}

/// `[{"user_id","device_id"}]`.
fn devices_json(devices: &[(u64, u32)]) -> String {
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
        Incoming::SecurityAlert { group, user_id, device_id, text } => vec![
            event("security_alert"),
            ("group", group.as_ref().map_or_else(|| "null".to_string(), group_json)),
            ("user_id", num(*user_id)),
            ("device_id", num(u64::from(*device_id))),
            ("text", json!(text).to_string()),
        ],
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
fn edited_fields(
    edit_date: i64,
    text: &str,
    entities: &[Entity],
    keyboard: &Keyboard,
    shared: Option<&Shared>,
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
fn media_json(m: &MediaInfo) -> String {
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

/// `{"user_id","username","display_name","is_bot"}`.
pub(super) fn sender_json(s: &Sender) -> String {
    ordered(&sender_fields(s))
}

/// A user's fields, as `sender_json` and the `group members` lines show them.
fn sender_fields(s: &Sender) -> Vec<(&'static str, Value)> {
    vec![
        ("user_id", json!(s.user_id)),
        ("username", json!(s.username)),
        ("display_name", json!(s.display_name)),
        ("is_bot", json!(s.is_bot)),
    ]
}

/// Rows of `{"text", "callback_data"}` objects (a link button: `{"text", "url"}`).
fn keyboard_json(k: &Keyboard) -> String {
    rows_json(k, |b| match b.url.is_empty() {
        true => ordered(&[("text", json!(b.text)), ("callback_data", json!(b.callback_data))]),
        false => ordered(&[("text", json!(b.text)), ("url", json!(b.url))]),
    })
}

/// `{"rows":[[{"text","request"}]],"one_time","placeholder"}`; request is text, contact,
/// location or poll (with "poll_type": "quiz" or "regular" when the button asks for one).
fn reply_keyboard_json(k: &ReplyKeyboard) -> String {
    let rows = rows_json(&k.rows, |b| {
        let mut fields = vec![("text", json!(b.text)), ("request", json!(b.request.name()))];
        match b.request {
            ButtonRequest::Poll(PollKind::Quiz) => fields.push(("poll_type", json!("quiz"))),
            ButtonRequest::Poll(PollKind::Regular) => fields.push(("poll_type", json!("regular"))),
            _ => {}
        }
        ordered(&fields)
    });
    ordered_raw(&[
        ("rows", rows),
        ("one_time", json!(k.one_time).to_string()),
        ("placeholder", json!(k.placeholder).to_string()),
    ])
}

fn rows_json<B>(rows: &[Vec<B>], button: impl Fn(&B) -> String) -> String {
    let rows: Vec<String> = rows.iter().map(|row| format!("[{}]", row.iter().map(&button).collect::<Vec<_>>().join(","))).collect();
    format!("[{}]", rows.join(","))
}

/// A reaction as the Bot API's ReactionType object.
fn reaction_json(r: &ReactionType) -> Value {
    match r {
        ReactionType::Emoji(e) => json!({"type": "emoji", "emoji": e}),
        ReactionType::CustomEmoji(id) => json!({"type": "custom_emoji", "custom_emoji_id": id}),
        ReactionType::Paid => json!({"type": "paid"}),
    }
}

fn entity_json(e: &Entity) -> Value {
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
fn shared_field(s: &Shared) -> (&'static str, String) {
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


/// An invite link of `group link`, `revoke-link` and `export-link`.
pub(super) fn invite_link_json(group: &str, l: &InviteLink) -> String {
    ordered(&[
        ("group_id", json!(group)),
        ("invite_link", json!(l.link)),
        ("name", json!(l.name)),
        ("expire_date", json!(l.expire_date)),
        ("member_limit", json!(l.member_limit)),
        ("creates_join_request", json!(l.creates_join_request)),
        ("is_primary", json!(l.is_primary)),
        ("is_revoked", json!(l.is_revoked)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::message::{Button, ForwardOrigin, GroupRole, MediaKind};
    use crate::client::places::{ContactCard, DiceInfo, VenueInfo};

    #[test]
    fn message_line_has_the_contract_fields_in_order() {
        let mut m = ReceivedMessage {
            chat_id: 5,
            sender: Sender { user_id: 5, username: "echo_bot".into(), display_name: "Echo \"Bot\"".into(), is_bot: true },
            date: 1_700_000_000,
            ..ReceivedMessage::sample("echo_bot", 12, "héllo\nworld")
        };
        let line = message_json(&m);
        assert_eq!(
            line,
            r#"{"chat_id":5,"message_id":12,"date":1700000000,"from":{"user_id":5,"username":"echo_bot","display_name":"Echo \"Bot\"","is_bot":true},"text":"héllo\nworld"}"#
        );
        m.entities.push(Entity { url: Some("https://a.test".into()), ..Entity::new("text_link", 0, 5) });
        m.reply_to_message_id = Some(11);
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!(v["entities"][0]["type"], "text_link");
        assert_eq!(v["entities"][0]["url"], "https://a.test");
        assert!(v["entities"][0].get("language").is_none());
        assert_eq!(v["reply_to_message_id"], 11);
        assert_eq!(v["from"]["is_bot"], true);
    }

    #[test]
    fn message_line_shows_keyboard_and_forward_origin() {
        let m = ReceivedMessage {
            chat_id: 5,
            sender: Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true },
            message_id: 3,
            date: 1,
            text: "t".into(),
            entities: vec![],
            reply_to_message_id: None,
            keyboard: vec![
                vec![Button { text: "Yes".into(), callback_data: "y".into(), ..Default::default() }, Button { text: "No".into(), callback_data: "n".into(), ..Default::default() }],
                vec![Button { text: "Later".into(), callback_data: "l".into(), ..Default::default() }],
            ],
            forward_origin: Some(ForwardOrigin {
                sender_user_id: 9,
                sender_username: "carol".into(),
                sender_first_name: "Carol".into(),
                sender_is_bot: false,
                date: 2,
                channel: None,
            }),
            via_bot_user_id: None,
            reply_markup: None,
            media: None,
            shared: None,
        };
        let line = incoming_json(&Incoming::Message(m));
        assert!(line.contains(r#""keyboard":[[{"text":"Yes","callback_data":"y"},{"text":"No","callback_data":"n"}],[{"text":"Later","callback_data":"l"}]]"#), "{line}");
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert!(v.get("event").is_none(), "messages keep the shape scripts parse");
        assert_eq!(v["forward_origin"], json!({"sender_user_id": 9, "sender_username": "carol", "sender_first_name": "Carol", "sender_is_bot": false, "date": 2}));

        // A channel's post forwarded: the channel, not a user.
        let mut m = ReceivedMessage::sample("b", 4, "t");
        m.forward_origin = Some(ForwardOrigin { date: 3, channel: Some(("Cat news".into(), 8)), ..Default::default() });
        let v: Value = serde_json::from_str(&incoming_json(&Incoming::Message(m))).expect("valid JSON");
        assert_eq!(v["forward_origin"], json!({"channel_title": "Cat news", "channel_message_id": 8, "date": 3}));
    }

    #[test]
    fn message_line_shows_link_buttons_and_the_reply_markup() {
        use crate::client::reply_keyboard::{ButtonRequest, ReplyButton};
        let mut m = ReceivedMessage::sample("b", 3, "t");
        m.keyboard = vec![vec![Button { text: "Docs".into(), url: "https://a.test/".into(), ..Default::default() }]];
        m.reply_markup = Some(ReplyMarkup::Keyboard(ReplyKeyboard {
            rows: vec![vec![
                ReplyButton { text: "Yes".into(), request: ButtonRequest::Text },
                ReplyButton { text: "Phone".into(), request: ButtonRequest::Contact },
            ]],
            one_time: true,
            resize: false,
            persistent: false,
            placeholder: "Pick".into(),
        }));
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!(v["keyboard"], json!([[{"text": "Docs", "url": "https://a.test/"}]]));
        assert_eq!(
            v["reply_keyboard"],
            json!({"rows": [[{"text": "Yes", "request": "text"}, {"text": "Phone", "request": "contact"}]], "one_time": true, "placeholder": "Pick"})
        );
        m.reply_markup = Some(ReplyMarkup::Remove);
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!((v["remove_keyboard"].as_bool(), v.get("reply_keyboard")), (Some(true), None));
        m.reply_markup = Some(ReplyMarkup::ForceReply { placeholder: "Name".into() });
        let v: Value = serde_json::from_str(&message_json(&m)).expect("valid JSON");
        assert_eq!(v["force_reply"], json!({"placeholder": "Name"}));
        let answer = Incoming::CallbackAnswer { chat_id: 5, press_id: "p".into(), text: String::new(), show_alert: false, url: "https://t.me/b?start=x".into() };
        let v: Value = serde_json::from_str(&incoming_json(&answer)).expect("valid JSON");
        assert_eq!(v["url"], "https://t.me/b?start=x");
    }

    #[test]
    fn other_events_carry_an_event_field() {
        let bot = Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true };
        let parse = |e: Incoming| -> Value { serde_json::from_str(&incoming_json(&e)).expect("valid JSON") };
        let v = parse(Incoming::Edited {
            chat_id: 5,
            message_id: 3,
            edit_date: 7,
            text: "new".into(),
            entities: vec![],
            keyboard: vec![],
            shared: None,
        });
        assert_eq!(v, json!({"event": "edited", "chat_id": 5, "message_id": 3, "edit_date": 7, "text": "new", "entities": [], "keyboard": []}));
        assert_eq!(parse(Incoming::Deleted { chat_id: 5, message_id: 3 }), json!({"event": "deleted", "chat_id": 5, "message_id": 3}));
        let v = parse(Incoming::Reaction {
            chat_id: 5,
            message_id: 3,
            from: bot.clone(),
            reactions: vec![ReactionType::Emoji("👍".into()), ReactionType::CustomEmoji("c1".into()), ReactionType::Paid],
        });
        assert_eq!(v["event"], "reaction");
        assert_eq!(v["from"]["username"], "b");
        assert_eq!(v["reactions"], json!([{"type": "emoji", "emoji": "👍"}, {"type": "custom_emoji", "custom_emoji_id": "c1"}, {"type": "paid"}]));
        let v = parse(Incoming::ChatAction { chat_id: 5, from: bot, action: "typing".into() });
        assert_eq!((v["event"].as_str(), v["action"].as_str(), v["from"]["is_bot"].as_bool()), (Some("chat_action"), Some("typing"), Some(true)));
        let line = incoming_json(&Incoming::CallbackAnswer { chat_id: 5, press_id: "ab".into(), text: "ok".into(), show_alert: false, url: String::new() });
        assert_eq!(line, r#"{"event":"callback_answer","chat_id":5,"press_id":"ab","text":"ok","show_alert":false}"#);
    }

    #[test]
    fn a_file_message_line_has_media_and_caption_instead_of_text() {
        let m = ReceivedMessage {
            chat_id: 5,
            sender: Sender { user_id: 5, username: "b".into(), display_name: "B".into(), is_bot: true },
            message_id: 4,
            date: 9,
            text: String::new(),
            entities: vec![],
            reply_to_message_id: None,
            keyboard: vec![],
            forward_origin: None,
            via_bot_user_id: None,
            reply_markup: None,
            media: Some(MediaInfo {
                kind: MediaKind::Photo,
                file_name: "report.png".into(),
                mime_type: "image/png".into(),
                size: 12_345,
                width: 640,
                height: 480,
                duration: 0,
                caption: "Q3 \u{1b}".into(),
                caption_entities: vec![Entity::new("bold", 0, 2)],
                media_group_id: String::new(),
            }),
            shared: None,
        };
        let line = incoming_json(&Incoming::Message(m.clone()));
        assert!(
            line.starts_with(r#"{"chat_id":5,"message_id":4,"date":9,"from":{"user_id":5,"username":"b","display_name":"B","is_bot":true},"media":{"kind":"photo","file_name":"report.png","mime_type":"image/png","size":12345,"width":640,"height":480},"caption":"Q3 \u001b""#),
            "{line}"
        );
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert!(v.get("text").is_none(), "a file message has a caption, not a text");
        assert!(v["media"].get("duration").is_none(), "unknown dimensions are left out");
        assert_eq!(v["caption_entities"], json!([{"type": "bold", "offset": 0, "length": 2}]));
        assert!(!line.contains("key") && !line.contains("file_ref"), "{line}");
    }

    #[test]
    fn a_security_alert_names_the_group_the_claimed_device_and_why() {
        use crate::client::message::{GroupId, GroupRef};
        let group = GroupRef { id: GroupId([0xab; 32]), title: "Team".into(), channel: false };
        let text = "group abababababababab: a leaf claiming device 1 of user 77 carries no proof of its account".to_string();
        let alert = Incoming::SecurityAlert { group: Some(group), user_id: 77, device_id: 1, text: text.clone() };
        let v: Value = serde_json::from_str(&incoming_json(&alert)).expect("valid JSON");
        assert_eq!(v["event"], "security_alert");
        assert_eq!((v["group"]["id"].as_str(), v["user_id"].as_u64(), v["device_id"].as_u64()), (Some("ab".repeat(32).as_str()), Some(77), Some(1)));
        assert_eq!(v["text"], text);
        let alone = Incoming::SecurityAlert { group: None, user_id: 0, device_id: 0, text: "x".into() };
        assert!(serde_json::from_str::<Value>(&incoming_json(&alone)).expect("JSON")["group"].is_null());
        assert!(crate::client::display::ChatEvent::Incoming { event: &alert, chat: "x", via: None }.render().starts_with("SECURITY ALERT: "));
    }

    #[test]
    fn group_events_carry_the_group_and_an_event_field() {
        use crate::client::message::{GroupId, GroupRef};
        let group = GroupRef { id: GroupId([0xab; 32]), title: "Team \u{1b}[2J".into(), channel: false };
        let alice = Sender { user_id: 7, username: "alice".into(), display_name: "Alice".into(), is_bot: false };
        let parse = |e: Incoming| -> Value { serde_json::from_str(&incoming_json(&e)).expect("valid JSON") };
        let message = ReceivedMessage {
            chat_id: 0,
            sender: alice.clone(),
            message_id: 3,
            date: 9,
            text: "hi".into(),
            entities: vec![],
            reply_to_message_id: Some(2),
            keyboard: vec![],
            forward_origin: None,
            via_bot_user_id: None,
            reply_markup: None,
            media: None,
            shared: None,
        };
        let line = incoming_json(&Incoming::GroupMessage { group: group.clone(), message: message.clone() });
        assert!(line.starts_with(&format!(r#"{{"event":"group_message","group":{{"id":"{}","title":"Team \u001b[2J"}},"message_id":3"#, "ab".repeat(32))), "{line}");
        let v: Value = serde_json::from_str(&line).expect("valid JSON");
        assert!(v.get("chat_id").is_none(), "a group is no dialog");
        assert_eq!((v["from"]["username"].as_str(), v["text"].as_str(), v["reply_to_message_id"].as_u64()), (Some("alice"), Some("hi"), Some(2)));
        let v = parse(Incoming::GroupMembership {
            group: group.clone(),
            user: alice.clone(),
            old: GroupRole::MEMBER,
            new: GroupRole::BANNED,
            actor: Sender { user_id: 1, username: "owner".into(), display_name: "O".into(), is_bot: false },
            invite_link: String::new(),
        });
        assert_eq!((v["event"].as_str(), v["old_role"].as_str(), v["new_role"].as_str()), (Some("group_membership"), Some("member"), Some("banned")));
        assert_eq!((v["user"]["user_id"].as_u64(), v["actor"]["username"].as_str()), (Some(7), Some("owner")));
        assert!(v.get("invite_link").is_none(), "only for joins by link");
        let v = parse(Incoming::JoinRequest { group: group.clone(), user: alice.clone(), invite_link: "e2e://join/x".into() });
        assert_eq!((v["event"].as_str(), v["invite_link"].as_str()), (Some("join_request"), Some("e2e://join/x")));
        let v = parse(Incoming::GroupDeleted { group: group.clone(), message_id: 4, actor: alice.clone() });
        assert_eq!((v["event"].as_str(), v["message_id"].as_u64()), (Some("group_message_deleted"), Some(4)));
        let post = Incoming::GroupMessage { group: GroupRef { channel: true, ..group.clone() }, message };
        assert_eq!(parse(post)["event"], "channel_post");
        let v = parse(Incoming::GroupCommit { group: group.clone(), added: vec![(7, 1)], removed: vec![], removed_me: false, epoch: 4 });
        assert_eq!(v["added"], json!([{"user_id": 7, "device_id": 1}]));
        assert_eq!((v["epoch"].as_u64(), v["removed_me"].as_bool()), (Some(4), Some(false)));
        let v = parse(Incoming::GroupChatAction { group: group.clone(), from: alice.clone(), action: "typing".into() });
        assert_eq!((v["event"].as_str(), v["action"].as_str(), v["from"]["user_id"].as_u64()), (Some("chat_action"), Some("typing"), Some(7)));
        assert_eq!(v["group"]["id"], "ab".repeat(32));
        assert!(v.get("chat_id").is_none(), "scoped to the group, not a dialog");
        assert_eq!(parse(Incoming::GroupJoined { group })["event"], "group_joined");
    }

    #[test]
    fn commands_lines_start_with_the_bot_then_one_per_command() {
        let menu = BotMenu {
            bot: "echo_bot".into(),
            commands: vec![crate::client::bot_profile::BotCommand { command: "start".into(), description: "Go \"now\"".into() }],
            description: "An echo".into(),
            short_description: String::new(),
        };
        assert_eq!(
            menu_lines(&menu),
            vec![
                r#"{"bot":"echo_bot","description":"An echo","short_description":""}"#.to_string(),
                r#"{"command":"start","description":"Go \"now\""}"#.to_string(),
            ]
        );
        assert!(super::super::run(&["commands".to_string()]).is_err(), "@BOT missing");
    }


    #[test]
    fn listen_fields_follow_the_bot_api_names() {
        let (name, v) = shared_field(&Shared::Location(LocationInfo { live_period: 60, ..LocationInfo::point(1.5, 2.0) }));
        assert_eq!((name, v.as_str()), ("location", r#"{"latitude":1.5,"longitude":2.0,"live_period":60}"#));
        let (name, v) = shared_field(&Shared::Venue(VenueInfo {
            location: LocationInfo::point(1.0, 2.0),
            title: "Cafe".into(),
            address: "Main St".into(),
            ..Default::default()
        }));
        assert_eq!(name, "venue");
        let v: Value = serde_json::from_str(&v).expect("json");
        assert_eq!(v, json!({"location": {"latitude": 1.0, "longitude": 2.0}, "title": "Cafe", "address": "Main St"}));
        let (name, v) = shared_field(&Shared::Contact(ContactCard { first_name: "Ann".into(), user_id: 3, ..Default::default() }));
        assert_eq!((name, v.as_str()), ("contact", r#"{"phone_number":"","first_name":"Ann","user_id":3}"#));
        let (name, v) = shared_field(&Shared::Dice(DiceInfo { emoji: "🎲".into(), value: 4 }));
        assert_eq!((name, v.as_str()), ("dice", r#"{"emoji":"🎲","value":4}"#));
    }
}
