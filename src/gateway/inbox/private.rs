//! Importing one private envelope inside the inbox's writer job: opened with its sender
//! device's session, the chat recorded, and its content turned into an update (a message, a
//! press of a button, a reaction, an inline query, a poll answer, an edit).

use rusqlite::Connection;

use crate::e2e::follow_up::FollowUp;
use crate::e2e::{self, inbound};
use crate::gateway::botapi::types::UserView;
use crate::gateway::keyboard;
use crate::gateway::runtime::unix_now;
use crate::gateway::store::{chats, files, groups as groups_store, Result as StoreResult, StoreError};
use crate::gateway::updates;
use crate::wire::e2e::content::Body;
use crate::wire::platform::InboxEnvelope;

/// Imports a private envelope that is no repeat, adding to `follow` what it leaves to do (a
/// session started, a gap in the sender's numbering).
pub(super) fn import(
    c: &Connection,
    env: &InboxEnvelope,
    me: &UserView,
    identity_key: &[u8; 32],
    follow: &mut Vec<FollowUp>,
) -> StoreResult<()> {
    let bot_id = me.id as u64;
    let e2e::Opened { content, arrival, started_session } = e2e::open_envelope_noting(c, env)?;
    inbound::accept(c, env.seq, env.sender_user_id, &env.client_message_id)?;
    if started_session {
        follow.push(FollowUp::SessionStarted);
    }
    if let e2e::sequence::Arrival::Gap(_) = arrival {
        follow.push(FollowUp::GapNoted { due: unix_now() + e2e::sequence::GRACE_SECS });
    }
    if env.sender_is_bot || env.sender_user_id == bot_id {
        // Bots do not receive messages from bots.
        return Ok(());
    }
    let chat = chats::PrivateChat {
        user_id: env.sender_user_id,
        username: env.sender_username.clone(),
        first_name: if env.sender_display_name.is_empty() {
            env.sender_username.clone()
        } else {
            env.sender_display_name.clone()
        },
    };
    chats::upsert_private_chat(c, &chat, unix_now())?;
    let made = match &content.body {
        _ if content.is_message() => {
            let content = crate::gateway::history::checked_user_message(content, env.sender_user_id)?;
            // The bot refers to the file by the file_id issued here (getFile, send by id).
            files::issue_carried(c, &content, unix_now())?;
            let entry = chats::HistoryEntry {
                chat_id: env.sender_user_id as i64,
                message_id: env.message_id as i64,
                from_bot: false,
                sender_id: env.sender_user_id as i64,
                date: env.date,
                content,
                edit_date: 0,
            };
            updates::message_updates(c, me, &chat, entry)
        }
        Some(Body::Press(press)) => {
            let context = keyboard::check_press(identity_key, bot_id, env.sender_user_id, press)
                .map_err(|refused| StoreError::Refused(refused.to_string()))?;
            // A message another runtime of the bot sent enters this one's history with the
            // press, under a file_id of this runtime.
            if let Some(message) = context.message.as_ref() {
                files::issue_carried(c, message, unix_now())?;
            }
            if !context.inline_message_id.is_empty() {
                return updates::store(c, updates::inline_callback_query_updates(c, &chat, press, &context, env.date)?);
            }
            if context.group_id.is_empty() {
                return updates::store(c, updates::callback_query_updates(c, me, &chat, updates::ChatRef::Private(&chat), press, context, env.date)?);
            }
            // A button of a group message: the bot must be in that group, and the presser too
            // (a leaf in its tree: who left, was removed or banned has none).
            let group = groups_store::by_group_id(c, &context.group_id)?
                .filter(|g| g.status == groups_store::Membership::Member)
                .ok_or_else(|| StoreError::Refused("callback press refused: a button of a group this bot is not in".into()))?;
            let presser = [env.sender_user_id];
            if crate::e2e::group::users_with_leaves(c, &group.group_id, &presser)?.is_none_or(|found| found.is_empty()) {
                return Err(StoreError::Refused(format!(
                    "callback press refused: user {} is not a member of group {:?}",
                    env.sender_user_id, group.title
                )));
            }
            updates::callback_query_updates(c, me, &chat, updates::ChatRef::Group(&group), press, context, env.date)
        }
        Some(Body::Reaction(reaction)) => updates::reaction_updates(c, &chat, reaction, env.date),
        Some(Body::InlineQuery(q)) => updates::inline_query_updates(c, &chat, q, env.date),
        Some(Body::PollVote(vote)) => updates::poll_vote_updates(c, &chat, vote, env.date),
        Some(Body::Edit(edit)) => {
            updates::user_edit_updates(c, me, updates::ChatRef::Private(&chat), env.sender_user_id, edit, env.date)
        }
        // What else a user may send (their own deletions, chat actions) has no update in this
        // profile.
        _ => {
            log::debug!("ignoring a {} from user {}", content.kind_name(), env.sender_user_id);
            Ok(updates::Made::nothing())
        }
    }?;
    updates::store(c, made)
}
