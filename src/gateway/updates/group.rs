//! The updates of groups and channels, queued inside the inbox's writer job: a member's
//! message or post, a membership change (`my_chat_member`, `chat_member`, and the service
//! message of a join or a departure), a join request, a new title.

use rusqlite::Connection;

use crate::gateway::botapi::types::{
    self, UserView,
};
use crate::gateway::botapi::members::{self};
use crate::gateway::store::{chats, groups, Result as StoreResult};
use crate::wire::platform::{join_request, GroupMember, JoinRequest, MembershipChange, Profile};
use crate::wire::e2e::Content;

use super::NewUpdate;
use super::views::{ChatRef, group_chat_view, group_user_of, history_view, invite_link_view, member_view, user_view};

/// The `message` update for a text or file a member sent to a group, or a
/// `channel_post` for a post in a channel.
pub fn group_message_updates(
    c: &Connection,
    me: &UserView,
    group: &groups::GroupChat,
    entry: &chats::HistoryEntry,
) -> StoreResult<Vec<NewUpdate>> {
    let mut made = Vec::new();
    let kind = if group.is_channel() { "channel_post" } else { "message" };
    let message = types::message_json(&history_view(c, me, ChatRef::Group(group), entry, true)?);
    made.push(NewUpdate::new(kind, message));
    Ok(made)
}

/// A platform profile as a Bot API User, remembered for the messages they send later.
pub(super) fn remember_profile(c: &Connection, p: &Profile) -> StoreResult<UserView> {
    let user = group_user_of(p);
    groups::remember_user(c, &user)?;
    Ok(user_view(&user))
}

/// The update of one role change: `my_chat_member` when it is this bot's,
/// `chat_member` for anyone else. A change the Bot API cannot see (left → invited) makes none.
pub fn member_change_updates(
    c: &Connection,
    me: &UserView,
    group: &groups::GroupChat,
    change: &MembershipChange,
    date: i64,
) -> StoreResult<Vec<NewUpdate>> {
    let mut made = Vec::new();
    let (old, new) = (change.old.get_or_default(), change.new.get_or_default());
    remember_profile(c, new.user.get_or_default())?;
    let (old_view, new_view) = (member_view(old), member_view(new));
    if old_view.status == new_view.status {
        return Ok(made);
    }
    let kind = if new.user.user_id == me.id as u64 { "my_chat_member" } else { "chat_member" };
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
    made.push(NewUpdate::new(kind, payload));
    Ok(made)
}

/// The `chat_join_request` for a pending request (the platform tells the owner and the
/// administrators who may invite; outcomes are not updates).
pub fn join_request_updates(c: &Connection, group: &groups::GroupChat, r: &JoinRequest) -> StoreResult<Vec<NewUpdate>> {
    let mut made = Vec::new();
    if r.outcome.enum_value_or_default() != join_request::Outcome::PENDING {
        return Ok(made);
    }
    let user = remember_profile(c, r.user.get_or_default())?;
    let link = r.invite_link.as_ref().map(|l| members::invite_link_json(&invite_link_view(l)));
    made.push(NewUpdate::new("chat_join_request", members::chat_join_request_json(&group_chat_view(group), &user, r.date, link)));
    Ok(made)
}

/// The service `message` of a group's title change (`new_chat_title`, the group as it
/// is now, the member who changed it as `from`).
pub fn new_chat_title_updates(
    c: &Connection,
    group: &groups::GroupChat,
    actor: &Profile,
    message_id: u64,
    date: i64,
) -> StoreResult<Vec<NewUpdate>> {
    let mut made = Vec::new();
    record_service_message(c, group, actor.user_id, message_id, date)?;
    let from = remember_profile(c, actor)?;
    let message = serde_json::json!({
        "message_id": message_id,
        "date": date,
        "chat": types::chat_json(&group_chat_view(group)),
        "from": types::user_json(&from),
        "new_chat_title": group.title,
    });
    made.push(NewUpdate::new("message", message));
    Ok(made)
}

/// The service `message` of a join or a departure in a group (the platform gives
/// those a message id): `new_chat_members` with the user who joined (the bot too, when it is
/// the one), or `left_chat_member`, and the member who did it as `from`, as the Bot API does
/// besides the `chat_member` / `my_chat_member` update. Nothing for a channel, for a change
/// that is neither, or for the bot's own departure (it is out of the group by then).
pub fn member_service_message_updates(
    c: &Connection,
    me: &UserView,
    group: &groups::GroupChat,
    change: &MembershipChange,
    message_id: u64,
    date: i64,
) -> StoreResult<Vec<NewUpdate>> {
    let mut made = Vec::new();
    if message_id == 0 || group.is_channel() {
        return Ok(made);
    }
    let seated = |m: &GroupMember| crate::wire::roles::is_seated(m.role.enum_value_or_default());
    let (old, new) = (change.old.get_or_default(), change.new.get_or_default());
    let is_service = match (seated(old), seated(new)) {
        (false, true) => true,
        (true, false) => new.user.user_id != me.id as u64,
        _ => false,
    };
    if !is_service {
        return Ok(made);
    }
    record_service_message(c, group, change.actor.user_id, message_id, date)?;
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
    made.push(NewUpdate::new("message", message));
    Ok(made)
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
