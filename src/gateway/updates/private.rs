//! What an event in a private chat makes, inside the inbox's writer job: a message, a
//! callback query (a press of a button), an inline query, a poll answer, a reaction, an edit.
//! Each builder reads the store and returns the rows to write and the updates to queue
//! ([`Made`]); `updates::store` writes them.

use rusqlite::Connection;

use crate::gateway::botapi::types::{
    self, UserView,
};
use crate::gateway::store::{chats, inline, polls, Result as StoreResult, StoreError};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::{CallbackPress, Content, Edit, InlineQuery, KeyboardContext, PollVote, Reaction};
use crate::wire::polls as wire_polls;

use super::{Made, NewUpdate, Row};
use super::views::{ChatRef, chat_user, history_view, inline_message_id, poll_id, poll_now, poll_with_vote, private_chat_view, reaction_views};

/// Longest `press_id` accepted from a user's client (it becomes part of a callback query id).
pub(super) const PRESS_ID_MAX: usize = 64;

/// A received private message: it enters the history, and makes the `message` update. A
/// message the user sent by choosing one of this bot's inline results also makes a
/// `chosen_inline_result` (once per session).
pub fn message_updates(
    c: &Connection,
    me: &UserView,
    chat: &chats::PrivateChat,
    entry: chats::HistoryEntry,
) -> StoreResult<Made> {
    let message = types::message_json(&history_view(c, me, ChatRef::Private(chat), &entry, true)?);
    let chosen = chosen_inline_result(c, me, chat, &entry.content)?;
    let mut made = Made { rows: vec![Row::History(entry)], updates: vec![NewUpdate::new("message", message)] };
    if let Some((session_id, chosen)) = chosen {
        made.rows.push(Row::InlineChosen { session_id });
        made.updates.push(NewUpdate::new("chosen_inline_result", chosen));
    }
    Ok(made)
}

/// The `chosen_inline_result` of a message the user sent by choosing one of this bot's inline
/// results, with its session: the first choice of a session this runtime imported from this
/// user (a choice cannot be made up for a query the bot never saw).
fn chosen_inline_result(
    c: &Connection,
    me: &UserView,
    chat: &chats::PrivateChat,
    content: &Content,
) -> StoreResult<Option<(u64, serde_json::Value)>> {
    let Some(choice) = content.inline_choice.as_ref().filter(|_| content.via_bot_user_id == me.id as u64) else { return Ok(None) };
    let session = inline::get(c, choice.session_id)?.filter(|s| s.user_id == chat.user_id && !s.chosen);
    Ok(session.map(|session| {
        let inline_message_id = inline_message_id(content);
        let chosen = types::chosen_inline_result_json(&choice.result_id, &chat_user(chat), &session.query, inline_message_id.as_deref());
        (choice.session_id, chosen)
    }))
}

/// Longest inline query, in characters (Bot API: up to 256).
pub(super) const INLINE_QUERY_MAX_CHARS: usize = 256;

/// An `inline_query` for a session not imported before (the inline cursor), which is
/// remembered.
pub fn inline_query_updates(c: &Connection, chat: &chats::PrivateChat, q: &InlineQuery, now: i64) -> StoreResult<Made> {
    if q.session_id == 0 || q.query.chars().count() > INLINE_QUERY_MAX_CHARS {
        return Err(StoreError::Refused(format!(
            "an inline query needs a session and at most {INLINE_QUERY_MAX_CHARS} characters"
        )));
    }
    if !inline::is_new(c, q.session_id)? {
        return Ok(Made::nothing());
    }
    let query = types::inline_query_json(&q.session_id.to_string(), &chat_user(chat), &q.query);
    let mut made = Made::update("inline_query", query);
    made.rows.push(Row::InlineSession { session_id: q.session_id, user_id: chat.user_id, query: q.query.clone(), date: now });
    Ok(made)
}

/// A user's vote in one of the bot's polls: checked against the poll (`wire::polls`; a broken
/// one is refused), recorded, and told to the bot as `poll_answer` (not for an anonymous poll)
/// and `poll` (the counts with this vote).
pub fn poll_vote_updates(c: &Connection, chat: &chats::PrivateChat, vote: &PollVote, now: i64) -> StoreResult<Made> {
    let mut made = Made::nothing();
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
        return Ok(Made::nothing());
    }
    let id = poll_id(chat_id, message_id);
    if !poll.is_anonymous {
        made.updates.push(NewUpdate::new("poll_answer", types::poll_answer_json(&id, &chat_user(chat), &vote.option_ids)));
    }
    let counted = poll_now(c, &entry, poll, now)?;
    made.updates.push(NewUpdate::new("poll", types::poll_json(&id, &poll_with_vote(counted, before.as_deref(), &vote.option_ids))));
    made.rows.push(Row::Vote { chat_id, message_id, user_id: chat.user_id, option_ids: vote.option_ids.clone() });
    Ok(made)
}

/// The `callback_query` for a press whose context `keyboard::check_press` accepted. The
/// pressed message is the one in the history (as last edited) or, on a runtime that never saw
/// it, the signed context's, which then enters this runtime's history so that it can edit it.
/// The press is remembered for answerCallbackQuery; a press seen before makes no second update.
pub fn callback_query_updates(
    c: &Connection,
    me: &UserView,
    chat: &chats::PrivateChat,
    in_chat: ChatRef<'_>,
    press: &CallbackPress,
    context: KeyboardContext,
    now: i64,
) -> StoreResult<Made> {
    let mut made = Made::nothing();
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
            // Sent by another runtime of the bot: it enters this one's history, so that this
            // one can edit it (its file has a file_id of this runtime: `issue_carried`).
            made.rows.push(Row::History(entry.clone()));
            entry
        }
    };
    let Some(callback) = new_press(c, chat, press)? else { return Ok(Made::nothing()) };
    let message = history_view(c, me, in_chat, &entry, true)?;
    let query = types::callback_query_json(&callback.id, &chat_user(chat), &message, &chat_id.to_string(), &press.callback_data);
    made.rows.push(Row::Press { callback, date: now });
    made.updates.push(NewUpdate::new("callback_query", query));
    Ok(made)
}

/// A press id is what the pressing client chose: 1 to `PRESS_ID_MAX` letters and digits.
pub(super) fn check_press_id(press: &CallbackPress) -> StoreResult<()> {
    let press_id = press.press_id.as_str();
    if press_id.is_empty() || press_id.len() > PRESS_ID_MAX || !press_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(StoreError::Refused(format!("press id must be 1 to {PRESS_ID_MAX} letters and digits")));
    }
    Ok(())
}

/// A press to remember for answerCallbackQuery under its callback id `<presser>_<press id>`;
/// `None` when it is known already (a repeat, which makes no update).
fn new_press(c: &Connection, chat: &chats::PrivateChat, press: &CallbackPress) -> StoreResult<Option<chats::Callback>> {
    let presser = chat.user_id as i64;
    let id = format!("{presser}_{}", press.press_id);
    if chats::is_press_known(c, &id)? {
        return Ok(None);
    }
    Ok(Some(chats::Callback { id, chat_id: presser, press_id: press.press_id.clone(), answered: false }))
}

/// The `callback_query` for a press of a button under an inline message (its context
/// checked by `keyboard::check_press`): `inline_message_id` instead of the message, which the
/// bot did not send. The press is remembered for answerCallbackQuery as any other.
pub fn inline_callback_query_updates(
    c: &Connection,
    chat: &chats::PrivateChat,
    press: &CallbackPress,
    context: &KeyboardContext,
    now: i64,
) -> StoreResult<Made> {
    check_press_id(press)?;
    let Some(callback) = new_press(c, chat, press)? else { return Ok(Made::nothing()) };
    let query = types::inline_callback_query_json(&callback.id, &chat_user(chat), &context.inline_message_id, &chat.user_id.to_string(), &press.callback_data);
    let mut made = Made::update("callback_query", query);
    made.rows.push(Row::Press { callback, date: now });
    Ok(made)
}

/// Records a user's reaction and queues a `message_reaction` update (only when the filter
/// names it: it is not in the default set) with the previous reaction as `old_reaction`.
pub fn reaction_updates(c: &Connection, chat: &chats::PrivateChat, reaction: &Reaction, date: i64) -> StoreResult<Made> {
    let (chat_id, message_id, user_id) = (chat.user_id as i64, reaction.message_id as i64, chat.user_id as i64);
    let old = chats::reaction(c, chat_id, message_id, user_id)?;
    let update = types::message_reaction_json(
        &private_chat_view(chat),
        message_id,
        &chat_user(chat),
        date,
        &reaction_views(&old),
        &reaction_views(reaction),
    );
    let mut made = Made::update("message_reaction", update);
    made.rows.push(Row::Reaction { chat_id, message_id, user_id, reaction: reaction.clone() });
    Ok(made)
}

/// A user's edit of their own message in a private chat or a group (a channel's post by its
/// poster): the history takes the new text, keeping the stored reply and forward fields, and
/// `edited_message` (`edited_channel_post` in a channel) is queued with the whole message as
/// it is now. `edit_date` is the platform's date of the edit's envelope, not the sender's
/// clock. An edit naming a message this user did not send in this chat (not in the history,
/// the bot's or another member's, not a text) is refused: the inbox drops it with a warning.
pub fn user_edit_updates(
    c: &Connection,
    me: &UserView,
    chat: ChatRef<'_>,
    sender: u64,
    edit: &Edit,
    date: i64,
) -> StoreResult<Made> {
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
        return Ok(Made::nothing());
    }
    let mut content = entry.content.clone();
    content.set_text(new_text);
    let edit_date = date.max(entry.date);
    let row = Row::Edit { chat_id, message_id, content: content.clone(), edit_date };
    let kind = match chat {
        ChatRef::Group(g) if g.is_channel() => "edited_channel_post",
        _ => "edited_message",
    };
    let edited = chats::HistoryEntry { content, edit_date, ..entry };
    let message = types::message_json(&history_view(c, me, chat, &edited, true)?);
    let mut made = Made::update(kind, message);
    made.rows.push(row);
    Ok(made)
}
