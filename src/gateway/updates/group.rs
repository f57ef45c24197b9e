//! The updates of groups and channels, queued inside the inbox's writer job: a member's
//! message or post, a membership change (`my_chat_member`, `chat_member`, and the service
//! message of a join or a departure), a join request, a new title.

use rusqlite::Connection;

use crate::gateway::botapi::types::{
    self, UserView,
};
use crate::gateway::botapi::members::{self};
use crate::gateway::store::{chats, groups, queue, Result as StoreResult};
use crate::wire::platform::{join_request, GroupMember, JoinRequest, MembershipChange, Profile};
use crate::wire::e2e::Content;

use super::filter::admits;
use super::views::{ChatRef, group_chat_view, group_user_of, history_view, invite_link_view, member_view, user_view};

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
pub(super) fn remember_profile(c: &Connection, p: &Profile) -> StoreResult<UserView> {
    let user = group_user_of(p);
    groups::remember_user(c, &user)?;
    Ok(user_view(&user))
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
pub(super) fn record_service_message(c: &Connection, group: &groups::GroupChat, actor: u64, message_id: u64, date: i64) -> StoreResult<()> {
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
