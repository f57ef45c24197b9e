//! Events into Bot API Update objects: what kinds exist, which ones the bot asked for, and how
//! a stored event becomes the JSON an SDK parses.
//!
//! This is the room between the store, which keeps each update as an opaque payload under its
//! kind and never looks inside, and the Bot API methods that serve updates. The inbox uses it
//! when an update is created (the filter applies then, and the reply snapshot is taken then);
//! getUpdates and the webhook use it when one is served; sendMessage for its result. Every
//! kind (`callback_query`, `edited_message`, `message_reaction`, `chat_member`, ...) is built
//! here.

use rusqlite::Connection;
use serde_json::Value;

use super::botapi::text::entities::command_entities;
use super::botapi::types::{
    self, ButtonView, ChatView, ForwardOriginView, MediaKind, MediaView, MessageView, ReactionView, SharedView, UserView,
    UPDATE_KINDS,
};
use super::botapi::members::{self, AdminRights, MemberStatus, MemberView};
use super::store::{chats, files, groups, inline, polls, queue, Result as StoreResult, StoreError};
use crate::wire::Invalid;
use crate::wire::platform::{join_request, GroupMember, GroupRole, InviteLink, JoinRequest, MembershipChange, Profile};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::reaction_type::Kind as ReactionKind;
use crate::wire::e2e::{CallbackPress, Content, Edit, InlineQuery, KeyboardContext, Location, Media, Poll, PollVote, Reaction};
use crate::wire::places;
use crate::wire::polls as wire_polls;

/// Longest `press_id` accepted from a user's client (it becomes part of a callback query id).
const PRESS_ID_MAX: usize = 64;

/// Every update type of the Bot API as of this release, for the documentation and the tests;
/// only [`UPDATE_KINDS`] are ever produced.
pub const BOT_API_KINDS: &[&str] = &[
    "message", "edited_message", "channel_post", "edited_channel_post", "business_connection",
    "business_message", "edited_business_message", "deleted_business_messages", "message_reaction",
    "message_reaction_count", "inline_query", "chosen_inline_result", "callback_query", "shipping_query",
    "pre_checkout_query", "purchased_paid_media", "poll", "poll_answer", "my_chat_member", "chat_member",
    "chat_join_request", "chat_boost", "removed_chat_boost",
];

/// Most names an `allowed_updates` list may hold, and the longest name.
const MAX_ALLOWED_NAMES: usize = 100;
const MAX_KIND_NAME: usize = 64;

/// Checks an `allowed_updates` list. Any name is accepted, as the reference server does:
/// SDKs send their whole list of update types (python-telegram-bot 22.8's `Update.ALL_TYPES`
/// has `managed_bot` and `guest_message`, newer than this gateway), and a refusal would stop
/// such a bot at its first poll. Only the kinds this gateway produces are ever delivered. A
/// list only refuses what no SDK sends: more than 100 names, or an empty or overlong one.
pub fn validate_kinds(list: &[String]) -> Result<(), Invalid> {
    if list.len() > MAX_ALLOWED_NAMES {
        return Err(Invalid::new(format!("allowed_updates may name at most {MAX_ALLOWED_NAMES} update types, got {}", list.len())));
    }
    match list.iter().find(|k| k.is_empty() || k.len() > MAX_KIND_NAME) {
        Some(k) => Err(Invalid::new(format!("allowed_updates names must be 1 to {MAX_KIND_NAME} bytes, got {} bytes", k.len()))),
        None => Ok(()),
    }
}

/// The default set: everything except `message_reaction`, which must be asked for. The
/// administrative kinds (`chat_member`, `chat_join_request`) are in it, as SPEC "Filtering"
/// says (the reference Bot API leaves `chat_member` out; docs/decisions.md).
pub fn default_kinds() -> Vec<String> {
    UPDATE_KINDS.iter().filter(|k| **k != "message_reaction").map(|k| k.to_string()).collect()
}

/// The kinds in force: the stored filter, or the default set when none (or `[]`) was given.
pub fn effective_kinds(stored: Option<&[String]>) -> Vec<String> {
    match stored {
        Some(k) if !k.is_empty() => k.to_vec(),
        _ => default_kinds(),
    }
}

/// Whether a new update of `kind` goes into the queue under the stored filter. The filter is
/// applied here, when an update is created, and nowhere else: whatever is queued is served
/// until acknowledged.
pub fn admits(conn: &Connection, kind: &str) -> StoreResult<bool> {
    let kinds = effective_kinds(queue::stored_allowed_updates(conn)?.as_deref());
    Ok(kinds.iter().any(|k| k == kind))
}

/// Up to `limit` queued updates from `offset` on, as Update objects.
pub fn fetch(conn: &Connection, offset: Option<i64>, limit: u32) -> StoreResult<Vec<Value>> {
    Ok(queue::fetch(conn, offset, limit)?.into_iter().map(|u| types::update_json(u.update_id, &u.kind, u.payload)).collect())
}

/// Up to `limit` queued updates from `offset` on (the webhook's next run), each with its id.
pub fn run_from(conn: &Connection, offset: i64, limit: u32) -> StoreResult<Vec<(i64, Value)>> {
    Ok(queue::fetch(conn, Some(offset), limit)?
        .into_iter()
        .map(|u| (u.update_id, types::update_json(u.update_id, &u.kind, u.payload)))
        .collect())
}

/// Queues a `message` update for a received private message, if the filter admits it. A
/// message the user sent by choosing one of this bot's inline results also makes a
/// `chosen_inline_result` (once per session).
pub fn enqueue_message(
    c: &Connection,
    me: &UserView,
    chat: &chats::PrivateChat,
    entry: &chats::HistoryEntry,
) -> StoreResult<()> {
    if admits(c, "message")? {
        let message = types::message_json(&history_view(c, me, ChatRef::Private(chat), entry, true)?);
        queue::enqueue(c, "message", &message)?;
    }
    let content = &entry.content;
    if let Some(choice) = content.inline_choice.as_ref().filter(|_| content.via_bot_user_id == me.id as u64) {
        // The session must be one this runtime imported from this user: a choice cannot be
        // made up for a query the bot never saw.
        let Some(session) = inline::get(c, choice.session_id)?.filter(|s| s.user_id == chat.user_id) else {
            return Ok(());
        };
        if inline::mark_chosen(c, choice.session_id)? && admits(c, "chosen_inline_result")? {
            let inline_message_id = inline_message_id(content);
            let chosen = types::chosen_inline_result_json(&choice.result_id, &chat_user(chat), &session.query, inline_message_id.as_deref());
            queue::enqueue(c, "chosen_inline_result", &chosen)?;
        }
    }
    Ok(())
}

/// Longest inline query, in characters (Bot API: up to 256).
const INLINE_QUERY_MAX_CHARS: usize = 256;

/// Queues an `inline_query` for a session not imported before (the inline cursor).
pub fn enqueue_inline_query(c: &Connection, chat: &chats::PrivateChat, q: &InlineQuery, now: i64) -> StoreResult<()> {
    if q.session_id == 0 || q.query.chars().count() > INLINE_QUERY_MAX_CHARS {
        return Err(StoreError::Refused(format!(
            "an inline query needs a session and at most {INLINE_QUERY_MAX_CHARS} characters"
        )));
    }
    if !inline::import(c, q.session_id, chat.user_id, &q.query, now)? || !admits(c, "inline_query")? {
        return Ok(());
    }
    let query = types::inline_query_json(&q.session_id.to_string(), &chat_user(chat), &q.query);
    queue::enqueue(c, "inline_query", &query)?;
    Ok(())
}

/// The Bot API message of a private-chat history entry; the reply snapshot is nested one
/// level only (`nest`).
pub fn history_view(
    c: &Connection,
    me: &UserView,
    chat: ChatRef<'_>,
    entry: &chats::HistoryEntry,
    nest: bool,
) -> StoreResult<MessageView> {
    // A channel's posts are the channel's: `sender_chat`, no `from` (as in the Bot API).
    let (from, sender_chat) = match chat {
        ChatRef::Group(g) if g.is_channel() => (None, Some(chat.view())),
        _ if entry.from_bot => (Some(me.clone()), None),
        ChatRef::Private(p) => (Some(chat_user(p)), None),
        ChatRef::Group(_) => (Some(group_user(c, entry.sender_id as u64)?), None),
    };
    let (text, entities) = match &entry.content.body {
        Some(Body::Text(t)) => {
            // PTB and telegraf route commands by a bot_command entity (SDK-COMPAT §8.9).
            let entities = if t.entities.is_empty() && !entry.from_bot {
                command_entities(&t.text)
            } else {
                t.entities.clone()
            };
            (Some(t.text.clone()), entities)
        }
        _ => (None, Vec::new()),
    };
    let (media, caption, caption_entities) = match &entry.content.body {
        Some(Body::Media(m)) => {
            let record = files::by_ref(c, &m.file_ref)?.ok_or_else(|| {
                StoreError::Corrupt(format!("no file_id issued for the file of message {}/{}", entry.chat_id, entry.message_id))
            })?;
            let caption = m.caption.as_ref().filter(|t| !t.text.is_empty());
            (
                Some(media_view(m, &record)),
                caption.map(|t| t.text.clone()),
                caption.map(|t| t.entities.clone()).unwrap_or_default(),
            )
        }
        _ => (None, None, Vec::new()),
    };
    let reply_to_message = match (nest, entry.content.reply_to_message_id) {
        (true, id) if id != 0 => chats::lookup(c, entry.chat_id, id as i64)?
            .map(|r| history_view(c, me, chat, &r, false))
            .transpose()?
            .map(Box::new),
        _ => None,
    };
    Ok(MessageView {
        message_id: entry.message_id,
        date: entry.date,
        chat: chat.view(),
        from,
        sender_chat,
        text,
        entities,
        reply_to_message,
        edit_date: (entry.edit_date != 0).then_some(entry.edit_date),
        forward_origin: forward_origin_view(&entry.content),
        reply_markup: keyboard_view(&entry.content),
        via_bot: (entry.content.via_bot_user_id != 0 && entry.content.via_bot_user_id == me.id as u64).then(|| me.clone()),
        media,
        media_group_id: (!entry.content.media_group_id.is_empty()).then(|| entry.content.media_group_id.clone()),
        caption,
        caption_entities,
        shared: shared_view(c, entry, crate::clock::unix_now())?,
    })
}

/// A poll's Bot API id: its chat and message, which name it for good.
pub fn poll_id(chat_id: i64, message_id: i64) -> String {
    format!("{chat_id}_{message_id}")
}

/// A poll message's poll as it is at `now`: the counts of the votes recorded, closed when
/// stopped or past its close date.
pub fn poll_now(c: &Connection, entry: &chats::HistoryEntry, poll: &Poll, now: i64) -> StoreResult<Poll> {
    let (per_option, voters) = polls::counts(c, entry.chat_id, entry.message_id, poll.options.len())?;
    let mut now_poll = poll.clone();
    for (option, n) in now_poll.options.iter_mut().zip(per_option) {
        option.voter_count = n;
    }
    now_poll.total_voter_count = voters;
    now_poll.is_closed = !wire_polls::is_open(poll, now);
    Ok(now_poll)
}

/// The location, venue, contact, dice or poll of a message, as the Bot API shows it at `now`:
/// a live location that stopped or ran out shows as a plain point, a poll with its counts.
fn shared_view(c: &Connection, entry: &chats::HistoryEntry, now: i64) -> StoreResult<Option<SharedView>> {
    let date = entry.date;
    let Some(body) = entry.content.body.as_ref() else { return Ok(None) };
    Ok(Some(match body {
        Body::Poll(p) => {
            let mut poll = poll_now(c, entry, p, now)?;
            // The reference shows a quiz's answer in a group only once it is closed, unless
            // the bot sent it; in a private chat with the bot always.
            if !entry.from_bot && entry.chat_id < 0 && !poll.is_closed {
                poll.correct_option_ids.clear();
            }
            SharedView::Poll { id: poll_id(entry.chat_id, entry.message_id), poll }
        }
        Body::Location(l) if places::is_live(l, date, now) => SharedView::Location(Location { live_stopped: false, ..l.clone() }),
        Body::Location(l) => SharedView::Location(Location {
            latitude: l.latitude,
            longitude: l.longitude,
            horizontal_accuracy: l.horizontal_accuracy,
            ..Default::default()
        }),
        Body::Venue(v) => SharedView::Venue(v.clone()),
        Body::Contact(c) => SharedView::Contact(c.clone()),
        Body::Dice(d) => SharedView::Dice(d.clone()),
        _ => return Ok(None),
    }))
}

/// A user's vote in one of the bot's polls: checked against the poll (`wire::polls`; a broken
/// one is refused), recorded, and told to the bot as `poll_answer` (not for an anonymous poll)
/// and `poll` (the new counts), each when the filter admits it.
pub fn enqueue_poll_vote(c: &Connection, chat: &chats::PrivateChat, vote: &PollVote, now: i64) -> StoreResult<()> {
    let (chat_id, message_id) = (chat.user_id as i64, vote.message_id as i64);
    let entry = chats::lookup(c, chat_id, message_id)?
        .filter(|e| e.from_bot)
        .ok_or_else(|| StoreError::Refused(format!("a vote in message {message_id}, which is no poll of this bot")))?;
    let Some(Body::Poll(poll)) = &entry.content.body else {
        return Err(StoreError::Refused(format!("a vote in message {message_id}, which is no poll")));
    };
    let before = polls::vote_of(c, chat_id, message_id, chat.user_id)?;
    wire_polls::check_vote(poll, vote, before.is_some(), now).map_err(|why| StoreError::Refused(format!("vote refused: {why}")))?;
    if before.is_none() && vote.option_ids.is_empty() {
        return Ok(());
    }
    polls::set_vote(c, chat_id, message_id, chat.user_id, &vote.option_ids)?;
    let id = poll_id(chat_id, message_id);
    if !poll.is_anonymous && admits(c, "poll_answer")? {
        queue::enqueue(c, "poll_answer", &types::poll_answer_json(&id, &chat_user(chat), &vote.option_ids))?;
    }
    if admits(c, "poll")? {
        queue::enqueue(c, "poll", &types::poll_json(&id, &poll_now(c, &entry, poll, now)?))?;
    }
    Ok(())
}

/// A message's file as the Bot API shows it, under the file_id this gateway issued.
fn media_view(m: &Media, record: &files::FileRecord) -> MediaView {
    MediaView {
        kind: MediaKind::of(m),
        file_id: record.file_id.clone(),
        file_unique_id: record.file_unique_id.clone(),
        file_size: m.size,
        width: m.width,
        height: m.height,
        duration: m.duration,
        mime_type: non_empty(&m.mime_type),
        file_name: non_empty(&m.file_name),
        performer: non_empty(&m.performer),
        title: non_empty(&m.title),
        emoji: non_empty(&m.emoji),
    }
}

/// The buttons of a message content.
pub fn keyboard_view(content: &Content) -> Vec<Vec<ButtonView>> {
    content
        .keyboard
        .rows
        .iter()
        .map(|row| {
            row.buttons
                .iter()
                .map(|b| ButtonView { text: b.text.clone(), callback_data: b.callback_data.clone(), url: b.url.clone() })
                .collect()
        })
        .filter(|row: &Vec<ButtonView>| !row.is_empty())
        .collect()
}

/// A forward's origin: a channel's post when the content names a channel, else its author.
fn forward_origin_view(content: &Content) -> Option<ForwardOriginView> {
    let o = content.forward_origin.as_ref()?;
    if o.channel_chat_id != 0 {
        return Some(ForwardOriginView::Channel {
            chat: ChatView::Channel { id: o.channel_chat_id, title: o.channel_title.clone(), username: None },
            message_id: o.channel_message_id as i64,
            date: o.date,
        });
    }
    Some(ForwardOriginView::User {
        sender_user: UserView {
            id: o.sender_user_id as i64,
            is_bot: o.sender_is_bot,
            first_name: o.sender_first_name.clone(),
            username: non_empty(&o.sender_username),
        },
        date: o.date,
    })
}

/// The user of a private chat as a Bot API User.
fn chat_user(chat: &chats::PrivateChat) -> UserView {
    UserView {
        id: chat.user_id as i64,
        is_bot: false,
        first_name: chat.first_name.clone(),
        username: non_empty(&chat.username),
    }
}

/// Queues a `callback_query` for a press whose context `keyboard::check_press` accepted. The
/// pressed message is the one in the history (as last edited) or, on a runtime that never saw
/// it, the signed context's, which then enters this runtime's history so that it can edit it.
/// The press is remembered for answerCallbackQuery; a press seen before makes no second update.
pub fn enqueue_callback_query(
    c: &Connection,
    me: &UserView,
    chat: &chats::PrivateChat,
    in_chat: ChatRef<'_>,
    press: &CallbackPress,
    context: KeyboardContext,
    now: i64,
) -> StoreResult<()> {
    check_press_id(press)?;
    // The message is in `in_chat` (the private chat, or a group); the press and its answer
    // are between the presser and the bot.
    let chat_id = in_chat.view().id();
    let message_id = context.message_id as i64;
    if chats::was_deleted(c, chat_id, message_id)? {
        return Err(StoreError::Refused(format!("callback press refused: message {message_id} was deleted")));
    }
    let entry = match chats::lookup(c, chat_id, message_id)? {
        // The signed context is the keyboard as first sent; an edit may have taken the button
        // away since, and the message as it is now decides.
        Some(entry) if !crate::gateway::keyboard::has_button(&entry.content, &press.callback_data) => {
            return Err(StoreError::Refused(format!(
                "callback press refused: message {message_id} no longer has a button with the pressed data (an edit removed it)"
            )));
        }
        Some(entry) => entry,
        None => {
            let entry = chats::HistoryEntry {
                chat_id,
                message_id,
                from_bot: true,
                sender_id: me.id,
                date: context.date,
                content: context.message.unwrap_or_default(),
                edit_date: 0,
            };
            if let Some(Body::Media(media)) = &entry.content.body {
                // Sent by another runtime of the bot: this one issues its own file_id.
                files::issue(c, media, now)?;
            }
            chats::record(c, &entry)?;
            entry
        }
    };
    let Some(id) = remember_press(c, chat, press, now)? else { return Ok(()) };
    let message = history_view(c, me, in_chat, &entry, true)?;
    let query = types::callback_query_json(&id, &chat_user(chat), &message, &chat_id.to_string(), &press.callback_data);
    queue::enqueue(c, "callback_query", &query)?;
    Ok(())
}

/// A press id is what the pressing client chose: 1 to `PRESS_ID_MAX` letters and digits.
fn check_press_id(press: &CallbackPress) -> StoreResult<()> {
    let press_id = press.press_id.as_str();
    if press_id.is_empty() || press_id.len() > PRESS_ID_MAX || !press_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(StoreError::Refused(format!("press id must be 1 to {PRESS_ID_MAX} letters and digits")));
    }
    Ok(())
}

/// Remembers a press for answerCallbackQuery under its callback id `<presser>_<press id>`;
/// the id when it is new and the filter admits `callback_query` (`None`: no update to queue).
fn remember_press(c: &Connection, chat: &chats::PrivateChat, press: &CallbackPress, now: i64) -> StoreResult<Option<String>> {
    let presser = chat.user_id as i64;
    let id = format!("{presser}_{}", press.press_id);
    let fresh = chats::remember_callback(
        c,
        &chats::Callback { id: id.clone(), chat_id: presser, press_id: press.press_id.clone(), answered: false },
        now,
    )?;
    Ok((fresh && admits(c, "callback_query")?).then_some(id))
}

/// The inline message id the buttons of a chosen result were signed for, if it had buttons.
fn inline_message_id(content: &Content) -> Option<String> {
    let signed = content.keyboard.context.as_ref()?;
    let context = <KeyboardContext as protobuf::Message>::parse_from_bytes(&signed.context).ok()?;
    (!context.inline_message_id.is_empty()).then_some(context.inline_message_id)
}

/// Queues a `callback_query` for a press of a button under an inline message (its context
/// checked by `keyboard::check_press`): `inline_message_id` instead of the message, which the
/// bot did not send. The press is remembered for answerCallbackQuery as any other.
pub fn enqueue_inline_callback_query(
    c: &Connection,
    chat: &chats::PrivateChat,
    press: &CallbackPress,
    context: &KeyboardContext,
    now: i64,
) -> StoreResult<()> {
    check_press_id(press)?;
    let Some(id) = remember_press(c, chat, press, now)? else { return Ok(()) };
    let query = types::inline_callback_query_json(&id, &chat_user(chat), &context.inline_message_id, &chat.user_id.to_string(), &press.callback_data);
    queue::enqueue(c, "callback_query", &query)?;
    Ok(())
}

/// Records a user's reaction and queues a `message_reaction` update (only when the filter
/// names it: it is not in the default set) with the previous reaction as `old_reaction`.
pub fn enqueue_reaction(c: &Connection, chat: &chats::PrivateChat, reaction: &Reaction, date: i64) -> StoreResult<()> {
    let (chat_id, message_id, user_id) = (chat.user_id as i64, reaction.message_id as i64, chat.user_id as i64);
    let old = chats::reaction(c, chat_id, message_id, user_id)?;
    chats::set_reaction(c, chat_id, message_id, user_id, reaction)?;
    if !admits(c, "message_reaction")? {
        return Ok(());
    }
    let update = types::message_reaction_json(
        &private_chat_view(chat),
        message_id,
        &chat_user(chat),
        date,
        &reaction_views(&old),
        &reaction_views(reaction),
    );
    queue::enqueue(c, "message_reaction", &update)?;
    Ok(())
}

pub fn reaction_views(r: &Reaction) -> Vec<ReactionView> {
    r.reactions
        .iter()
        .filter_map(|t| match &t.kind {
            Some(ReactionKind::Emoji(e)) => Some(ReactionView::Emoji(e.clone())),
            Some(ReactionKind::CustomEmojiId(id)) => Some(ReactionView::CustomEmoji(id.clone())),
            Some(ReactionKind::Paid(_)) => Some(ReactionView::Paid),
            None => None,
        })
        .collect()
}

/// The chat a history entry belongs to.
#[derive(Debug, Clone, Copy)]
pub enum ChatRef<'a> {
    Private(&'a chats::PrivateChat),
    Group(&'a groups::GroupChat),
}

impl ChatRef<'_> {
    pub fn view(&self) -> ChatView {
        match self {
            ChatRef::Private(p) => private_chat_view(p),
            ChatRef::Group(g) => group_chat_view(g),
        }
    }
}

/// A group or channel as a Bot API Chat.
pub fn group_chat_view(g: &groups::GroupChat) -> ChatView {
    if g.is_channel() {
        ChatView::Channel { id: g.chat_id, title: g.title.clone(), username: None }
    } else {
        ChatView::Group { id: g.chat_id, title: g.title.clone() }
    }
}

/// A group user as a Bot API User (a user never seen is named by their id).
fn group_user(c: &Connection, user_id: u64) -> StoreResult<UserView> {
    Ok(match groups::user(c, user_id)? {
        Some(u) => user_view(&u),
        None => UserView { id: user_id as i64, is_bot: false, first_name: format!("user {user_id}"), username: None },
    })
}

/// A group user as a Bot API User (the username stands in for an empty display name).
fn user_view(u: &groups::GroupUser) -> UserView {
    UserView {
        id: u.user_id as i64,
        is_bot: u.is_bot,
        first_name: if u.first_name.is_empty() { u.username.clone() } else { u.first_name.clone() },
        username: non_empty(&u.username),
    }
}

fn group_user_of(p: &Profile) -> groups::GroupUser {
    groups::GroupUser { user_id: p.user_id, username: p.username.clone(), first_name: p.display_name.clone(), is_bot: p.is_bot }
}

/// A user's edit of their own message in a private chat or a group (a channel's post by its
/// poster): the history takes the new text, keeping the stored reply and forward fields, and
/// `edited_message` (`edited_channel_post` in a channel) is queued with the whole message as
/// it is now. `edit_date` is the platform's date of the edit's envelope, not the sender's
/// clock. An edit naming a message this user did not send in this chat (not in the history,
/// the bot's or another member's, not a text) is refused: the inbox drops it with a warning.
pub fn enqueue_user_edit(
    c: &Connection,
    me: &UserView,
    chat: ChatRef<'_>,
    sender: u64,
    edit: &Edit,
    date: i64,
) -> StoreResult<()> {
    let (chat_id, message_id) = (chat.view().id(), edit.message_id as i64);
    let refuse = |why: &str| Err(StoreError::Refused(format!("edit of message {message_id} in chat {chat_id} refused: {why}")));
    let Some(entry) = chats::lookup(c, chat_id, message_id)? else {
        return refuse("not in the history (never received, deleted, or too old)");
    };
    if entry.from_bot || entry.sender_id != sender as i64 {
        return refuse(&format!("user {sender} did not send it"));
    }
    let new_text = match (&entry.content.body, edit.content.as_ref().and_then(|c| c.body.as_ref())) {
        (Some(Body::Text(_)), Some(Body::Text(t))) if !t.text.is_empty() => t.clone(),
        _ => return refuse("only a text message can be edited, and only to a text"),
    };
    if matches!(&entry.content.body, Some(Body::Text(old)) if *old == new_text) {
        log::debug!("edit of message {message_id} in chat {chat_id} changes nothing; no update");
        return Ok(());
    }
    let mut content = entry.content.clone();
    content.set_text(new_text);
    let edit_date = date.max(entry.date);
    chats::apply_edit(c, chat_id, message_id, &content, edit_date)?;
    let kind = match chat {
        ChatRef::Group(g) if g.is_channel() => "edited_channel_post",
        _ => "edited_message",
    };
    if admits(c, kind)? {
        let edited = chats::HistoryEntry { content, edit_date, ..entry };
        let message = types::message_json(&history_view(c, me, chat, &edited, true)?);
        queue::enqueue(c, kind, &message)?;
    }
    Ok(())
}

/// Queues a `message` update for a text or file a member sent to a group, or a
/// `channel_post` for a post in a channel.
pub fn enqueue_group_message(
    c: &Connection,
    me: &UserView,
    group: &groups::GroupChat,
    entry: &chats::HistoryEntry,
) -> StoreResult<()> {
    let kind = if group.is_channel() { "channel_post" } else { "message" };
    if admits(c, kind)? {
        let message = types::message_json(&history_view(c, me, ChatRef::Group(group), entry, true)?);
        queue::enqueue(c, kind, &message)?;
    }
    Ok(())
}

/// A platform profile as a Bot API User, remembered for the messages they send later.
fn remember_profile(c: &Connection, p: &Profile) -> StoreResult<UserView> {
    let user = group_user_of(p);
    groups::remember_user(c, &user)?;
    Ok(user_view(&user))
}

/// A platform role as a Bot API member status. INVITED (admitted, not joined) is `left` to
/// the Bot API: such a user is not in the chat yet.
pub fn member_status(m: &GroupMember) -> MemberStatus {
    match m.role.enum_value_or_default() {
        GroupRole::OWNER => MemberStatus::Owner,
        GroupRole::ADMINISTRATOR => {
            let r = m.rights.get_or_default();
            MemberStatus::Administrator(AdminRights {
                can_change_info: r.can_change_info,
                can_delete_messages: r.can_delete_messages,
                can_invite_users: r.can_invite_users,
                can_restrict_members: r.can_restrict_members,
                can_promote_members: r.can_promote_members,
                can_post_messages: r.can_post_messages,
                can_manage_chat: r.can_manage_chat,
            })
        }
        GroupRole::MEMBER => MemberStatus::Member,
        GroupRole::RESTRICTED => MemberStatus::Restricted { until_date: m.until_date },
        GroupRole::LEFT | GroupRole::INVITED => MemberStatus::Left,
        GroupRole::BANNED => MemberStatus::Banned { until_date: m.until_date },
    }
}

/// A platform member as a Bot API ChatMember.
pub fn member_view(m: &GroupMember) -> MemberView {
    MemberView { user: user_view(&group_user_of(m.user.get_or_default())), status: member_status(m) }
}

/// Queues the update of one role change: `my_chat_member` when it is this bot's,
/// `chat_member` for anyone else. A change the Bot API cannot see (left → invited) makes none.
pub fn enqueue_member_change(
    c: &Connection,
    me: &UserView,
    group: &groups::GroupChat,
    change: &MembershipChange,
    date: i64,
) -> StoreResult<()> {
    let (old, new) = (change.old.get_or_default(), change.new.get_or_default());
    remember_profile(c, new.user.get_or_default())?;
    let (old_view, new_view) = (member_view(old), member_view(new));
    if old_view.status == new_view.status {
        return Ok(());
    }
    let kind = if new.user.user_id == me.id as u64 { "my_chat_member" } else { "chat_member" };
    if !admits(c, kind)? {
        return Ok(());
    }
    let from = remember_profile(c, change.actor.get_or_default())?;
    let payload = members::chat_member_updated_json(&members::MemberChange {
        chat: &group_chat_view(group),
        from: &from,
        date,
        old: &old_view,
        new: &new_view,
        invite_link: change.invite_link.as_ref().map(|l| members::invite_link_json(&invite_link_view(l))),
        via_join_request: change.via_join_request,
    });
    queue::enqueue(c, kind, &payload)?;
    Ok(())
}

/// A platform invite link as the Bot API's ChatInviteLink.
pub fn invite_link_view(l: &InviteLink) -> members::InviteLinkView {
    members::InviteLinkView {
        invite_link: l.link.clone(),
        creator: user_view(&group_user_of(l.creator.get_or_default())),
        creates_join_request: l.creates_join_request,
        is_primary: l.is_primary,
        is_revoked: l.is_revoked,
        name: l.name.clone(),
        expire_date: l.expire_date,
        member_limit: l.member_limit,
        pending_join_request_count: l.pending_join_request_count,
    }
}

/// Queues a `chat_join_request` for a pending request (the platform tells the owner and the
/// administrators who may invite; outcomes are not updates).
pub fn enqueue_join_request(c: &Connection, group: &groups::GroupChat, r: &JoinRequest) -> StoreResult<()> {
    if r.outcome.enum_value_or_default() != join_request::Outcome::PENDING || !admits(c, "chat_join_request")? {
        return Ok(());
    }
    let user = remember_profile(c, r.user.get_or_default())?;
    let link = r.invite_link.as_ref().map(|l| members::invite_link_json(&invite_link_view(l)));
    queue::enqueue(c, "chat_join_request", &members::chat_join_request_json(&group_chat_view(group), &user, r.date, link))?;
    Ok(())
}

/// Queues the service `message` of a group's title change (`new_chat_title`, the group as it
/// is now, the member who changed it as `from`).
pub fn enqueue_new_chat_title(
    c: &Connection,
    group: &groups::GroupChat,
    actor: &Profile,
    message_id: u64,
    date: i64,
) -> StoreResult<()> {
    record_service_message(c, group, actor.user_id, message_id, date)?;
    if !admits(c, "message")? {
        return Ok(());
    }
    let from = remember_profile(c, actor)?;
    let message = serde_json::json!({
        "message_id": message_id,
        "date": date,
        "chat": types::chat_json(&group_chat_view(group)),
        "from": types::user_json(&from),
        "new_chat_title": group.title,
    });
    queue::enqueue(c, "message", &message)?;
    Ok(())
}

/// Queues the service `message` of a join or a departure in a group (the platform gives
/// those a message id): `new_chat_members` with the user who joined (the bot too, when it is
/// the one), or `left_chat_member`, and the member who did it as `from`, as the Bot API does
/// besides the `chat_member` / `my_chat_member` update. Nothing for a channel, for a change
/// that is neither, or for the bot's own departure (it is out of the group by then).
pub fn enqueue_member_service_message(
    c: &Connection,
    me: &UserView,
    group: &groups::GroupChat,
    change: &MembershipChange,
    message_id: u64,
    date: i64,
) -> StoreResult<()> {
    if message_id == 0 || group.is_channel() {
        return Ok(());
    }
    let seated = |m: &GroupMember| crate::wire::roles::is_seated(m.role.enum_value_or_default());
    let (old, new) = (change.old.get_or_default(), change.new.get_or_default());
    let is_service = match (seated(old), seated(new)) {
        (false, true) => true,
        (true, false) => new.user.user_id != me.id as u64,
        _ => false,
    };
    if !is_service {
        return Ok(());
    }
    record_service_message(c, group, change.actor.user_id, message_id, date)?;
    if !admits(c, "message")? {
        return Ok(());
    }
    let user = types::user_json(&remember_profile(c, new.user.get_or_default())?);
    let from = types::user_json(&remember_profile(c, change.actor.get_or_default())?);
    let mut message = serde_json::json!({
        "message_id": message_id,
        "date": date,
        "chat": types::chat_json(&group_chat_view(group)),
        "from": from,
    });
    match seated(new) {
        true => message["new_chat_members"] = serde_json::json!([user]),
        false => message["left_chat_member"] = user,
    }
    queue::enqueue(c, "message", &message)?;
    Ok(())
}

/// Keeps a service message in the history as a message with no content, so that a bot may
/// reply to it (welcome bots reply to the join) while forwarding, copying or editing it is
/// refused as for any service message.
fn record_service_message(c: &Connection, group: &groups::GroupChat, actor: u64, message_id: u64, date: i64) -> StoreResult<()> {
    if message_id == 0 {
        return Ok(());
    }
    let entry = chats::HistoryEntry {
        chat_id: group.chat_id,
        message_id: message_id as i64,
        from_bot: false,
        sender_id: actor as i64,
        date,
        content: Content::new(),
        edit_date: 0,
    };
    Ok(chats::record(c, &entry)?)
}

pub fn private_chat_view(chat: &chats::PrivateChat) -> ChatView {
    ChatView::Private { id: chat.user_id as i64, first_name: chat.first_name.clone(), username: non_empty(&chat.username) }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::store::memory_db;

    /// The filter applies when an update is created; changing it later neither hides nor drops
    /// what is already queued.
    #[test]
    fn the_filter_decides_what_is_queued_not_what_queued_updates_are_served() {
        let c = memory_db();
        assert!(admits(&c, "message").expect("default set"));
        assert!(!admits(&c, "message_reaction").expect("not in the default set"));
        queue::enqueue(&c, "message", &json!({ "n": 1 })).expect("enqueue");
        queue::store_allowed_updates(&c, &["callback_query".to_string()]).expect("store");
        assert!(!admits(&c, "message").expect("filtered from now on"));
        let run = run_from(&c, 0, 64).expect("run");
        assert_eq!(run, vec![(1, json!({"update_id": 1, "message": {"n": 1}}))], "the queued message is still served");
        queue::store_allowed_updates(&c, &[]).expect("store");
        assert!(admits(&c, "message").expect("[] is the default set"));
    }

    #[test]
    fn served_updates_are_update_objects_in_queue_order() {
        let c = memory_db();
        for i in 0..3 {
            queue::enqueue(&c, "message", &json!({ "n": i })).expect("enqueue");
        }
        let got = fetch(&c, Some(2), 100).expect("fetch");
        assert_eq!(got, vec![json!({"update_id": 2, "message": {"n": 1}}), json!({"update_id": 3, "message": {"n": 2}})]);
    }

    fn text_entry(chat_id: i64, message_id: i64, sender_id: i64, from_bot: bool, text: &str) -> chats::HistoryEntry {
        let mut content = crate::e2e::text_content(text);
        content.reply_to_message_id = 1;
        chats::HistoryEntry { chat_id, message_id, from_bot, sender_id, date: 1000, content, edit_date: 0 }
    }

    fn edit_of(message_id: u64, text: &str) -> Edit {
        Edit { message_id, content: protobuf::MessageField::some(crate::e2e::text_content(text)), ..Default::default() }
    }

    /// A user's edit of their own text becomes `edited_message` with the whole message (the
    /// stored reply kept) and the envelope's date as `edit_date`; the filter decides as for
    /// any kind; an edit of someone else's message, an unknown one or a non-text is refused.
    #[test]
    fn a_user_edits_only_their_own_text_and_the_bot_gets_edited_message() {
        let c = memory_db();
        let me = UserView { id: 9, is_bot: true, first_name: "Bot".into(), username: Some("bot".into()) };
        let chat = chats::PrivateChat { user_id: 42, username: "alice".into(), first_name: "Alice".into() };
        chats::upsert_private_chat(&c, &chat, 1000).expect("chat");
        chats::record(&c, &text_entry(42, 1, 42, false, "original")).expect("hers");
        chats::record(&c, &text_entry(42, 2, 9, true, "the bot's")).expect("the bot's");
        chats::record(&c, &text_entry(42, 3, 42, false, "second")).expect("hers too");
        let private = ChatRef::Private(&chat);

        enqueue_user_edit(&c, &me, private, 42, &edit_of(1, "fixed"), 1500).expect("her own message");
        let queued = queue::fetch(&c, None, 10).expect("fetch");
        assert_eq!(queued.len(), 1);
        assert_eq!(queued[0].kind, "edited_message");
        let m = &queued[0].payload;
        assert_eq!((m["message_id"].as_i64(), m["text"].as_str(), m["edit_date"].as_i64()), (Some(1), Some("fixed"), Some(1500)));
        assert_eq!((m["date"].as_i64(), m["from"]["id"].as_i64(), m["chat"]["id"].as_i64()), (Some(1000), Some(42), Some(42)));
        let stored = chats::lookup(&c, 42, 1).expect("lookup").expect("kept");
        assert_eq!((stored.content.text().text.as_str(), stored.content.reply_to_message_id, stored.edit_date), ("fixed", 1, 1500));

        for (id, text) in [(2, "mine now"), (77, "unknown")] {
            let refused = enqueue_user_edit(&c, &me, private, 42, &edit_of(id, text), 1600);
            assert!(matches!(refused, Err(StoreError::Refused(_))), "message {id}: {refused:?}");
        }
        assert!(matches!(enqueue_user_edit(&c, &me, private, 43, &edit_of(3, "not hers"), 1600), Err(StoreError::Refused(_))));
        let mut to_nothing = edit_of(3, "x");
        to_nothing.content = protobuf::MessageField::some(Content::new());
        assert!(matches!(enqueue_user_edit(&c, &me, private, 42, &to_nothing, 1600), Err(StoreError::Refused(_))));
        assert_eq!(chats::lookup(&c, 42, 2).expect("lookup").expect("kept").content.text().text, "the bot's");

        // Not asked for: the history still takes the edit, no update is queued.
        queue::store_allowed_updates(&c, &["message".to_string()]).expect("store");
        enqueue_user_edit(&c, &me, private, 42, &edit_of(3, "second, fixed"), 1700).expect("edit");
        assert_eq!(queue::fetch(&c, None, 10).expect("fetch").len(), 1, "nothing new queued");
        assert_eq!(chats::lookup(&c, 42, 3).expect("lookup").expect("kept").content.text().text, "second, fixed");
    }

    /// In a group a member's edit is `edited_message`; in a channel the poster's is
    /// `edited_channel_post`, without `from`.
    #[test]
    fn group_edits_are_edited_message_and_channel_edits_edited_channel_post() {
        let c = memory_db();
        let me = UserView { id: 9, is_bot: true, first_name: "Bot".into(), username: Some("bot".into()) };
        let group = groups::upsert(&c, &[1; 32], "G", "group", groups::Membership::Member, 1000).expect("group");
        let channel = groups::upsert(&c, &[2; 32], "C", "channel", groups::Membership::Member, 1000).expect("channel");
        chats::record(&c, &text_entry(group.chat_id, 5, 42, false, "hi all")).expect("group message");
        chats::record(&c, &text_entry(channel.chat_id, 6, 42, false, "news")).expect("post");
        let refused = enqueue_user_edit(&c, &me, ChatRef::Group(&group), 43, &edit_of(5, "not mine"), 1100);
        assert!(matches!(refused, Err(StoreError::Refused(_))), "another member's message");
        enqueue_user_edit(&c, &me, ChatRef::Group(&group), 42, &edit_of(5, "hi everyone"), 1100).expect("group edit");
        enqueue_user_edit(&c, &me, ChatRef::Group(&channel), 42, &edit_of(6, "news, corrected"), 1200).expect("post edit");
        let queued = queue::fetch(&c, None, 10).expect("fetch");
        let kinds: Vec<&str> = queued.iter().map(|u| u.kind.as_str()).collect();
        assert_eq!(kinds, ["edited_message", "edited_channel_post"]);
        assert_eq!((queued[0].payload["text"].as_str(), queued[0].payload["from"]["id"].as_i64()), (Some("hi everyone"), Some(42)));
        let post = &queued[1].payload;
        assert_eq!((post["text"].as_str(), post["edit_date"].as_i64()), (Some("news, corrected"), Some(1200)));
        assert!(post.get("from").is_none() && post["sender_chat"]["id"].as_i64() == Some(channel.chat_id));
    }

    #[test]
    fn allowed_updates_take_any_name_and_deliver_only_what_is_produced() {
        validate_kinds(&["message".into(), "edited_message".into(), "poll_answer".into()]).expect("Bot API names");
        validate_kinds(&[]).expect("empty list");
        // python-telegram-bot 22.8's Update.ALL_TYPES names types newer than this gateway.
        validate_kinds(&["message".into(), "managed_bot".into(), "guest_message".into()]).expect("newer names");
        assert!(validate_kinds(&["".into()]).is_err());
        assert!(validate_kinds(&["x".repeat(65)]).is_err());
        assert!(validate_kinds(&vec!["message".to_string(); 101]).is_err());
        assert!(default_kinds().iter().all(|k| BOT_API_KINDS.contains(&k.as_str())));
        let c = memory_db();
        queue::store_allowed_updates(&c, &["managed_bot".to_string(), "message".to_string()]).expect("store");
        assert!(admits(&c, "message").expect("admits") && !admits(&c, "callback_query").expect("admits"));
    }
}
