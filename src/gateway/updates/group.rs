//! What an event in a group or channel makes, inside the inbox's writer job: a member's
//! message or post, a membership change (`my_chat_member`, `chat_member`, and the service
//! message of a join or a departure), a join request, a new title. Each builder reads the
//! store and returns the rows to write and the updates to queue ([`Made`]).

use rusqlite::Connection;

use crate::gateway::botapi::types::{
    self, UserView,
};
use crate::gateway::botapi::members::{self};
use crate::gateway::store::{chats, groups, Result as StoreResult};
use crate::wire::platform::{join_request, GroupMember, JoinRequest, MembershipChange, Profile};
use crate::wire::e2e::Content;

use super::{Made, Row};
use super::views::{ChatRef, group_chat_view, group_user_of, history_view, invite_link_view, member_view, user_view};

/// A text or file a member sent to a group: it enters the history, and makes the `message`
/// update (a `channel_post` for a post in a channel).
pub fn group_message_updates(
    c: &Connection,
    me: &UserView,
    group: &groups::GroupChat,
    entry: chats::HistoryEntry,
) -> StoreResult<Made> {
    let kind = if group.is_channel() { "channel_post" } else { "message" };
    let message = types::message_json(&history_view(c, me, ChatRef::Group(group), &entry, true)?);
    let mut made = Made::update(kind, message);
    made.rows.push(Row::History(entry));
    Ok(made)
}

/// A platform profile as a Bot API User, and the row that remembers it for the messages they
/// send later.
fn profile(p: &Profile) -> (UserView, Row) {
    let user = group_user_of(p);
    (user_view(&user), Row::User(user))
}

/// The update of one role change: `my_chat_member` when it is this bot's,
/// `chat_member` for anyone else. A change the Bot API cannot see (left → invited) makes none.
pub fn member_change_updates(
    me: &UserView,
    group: &groups::GroupChat,
    change: &MembershipChange,
    date: i64,
) -> Made {
    let (old, new) = (change.old.get_or_default(), change.new.get_or_default());
    let (_, user_row) = profile(new.user.get_or_default());
    let (old_view, new_view) = (member_view(old), member_view(new));
    if old_view.status == new_view.status {
        return Made { rows: vec![user_row], updates: Vec::new() };
    }
    let kind = if new.user.user_id == me.id as u64 { "my_chat_member" } else { "chat_member" };
    let (from, actor_row) = profile(change.actor.get_or_default());
    let payload = members::chat_member_updated_json(&members::MemberChange {
        chat: &group_chat_view(group),
        from: &from,
        date,
        old: &old_view,
        new: &new_view,
        invite_link: change.invite_link.as_ref().map(|l| members::invite_link_json(&invite_link_view(l))),
        via_join_request: change.via_join_request,
    });
    let mut made = Made::update(kind, payload);
    made.rows = vec![user_row, actor_row];
    made
}

/// The `chat_join_request` for a pending request (the platform tells the owner and the
/// administrators who may invite; outcomes are not updates).
pub fn join_request_updates(group: &groups::GroupChat, r: &JoinRequest) -> Made {
    if r.outcome.enum_value_or_default() != join_request::Outcome::PENDING {
        return Made::nothing();
    }
    let (user, row) = profile(r.user.get_or_default());
    let link = r.invite_link.as_ref().map(|l| members::invite_link_json(&invite_link_view(l)));
    let mut made = Made::update("chat_join_request", members::chat_join_request_json(&group_chat_view(group), &user, r.date, link));
    made.rows.push(row);
    made
}

/// The service `message` of a group's title change (`new_chat_title`, the group as it
/// is now, the member who changed it as `from`).
pub fn new_chat_title_updates(group: &groups::GroupChat, actor: &Profile, message_id: u64, date: i64) -> Made {
    let (from, actor_row) = profile(actor);
    let message = serde_json::json!({
        "message_id": message_id,
        "date": date,
        "chat": types::chat_json(&group_chat_view(group)),
        "from": types::user_json(&from),
        "new_chat_title": group.title,
    });
    let mut made = Made::update("message", message);
    made.rows.extend(service_message(group, actor.user_id, message_id, date));
    made.rows.push(actor_row);
    made
}

/// The service `message` of a join or a departure in a group (the platform gives
/// those a message id): `new_chat_members` with the user who joined (the bot too, when it is
/// the one), or `left_chat_member`, and the member who did it as `from`, as the Bot API does
/// besides the `chat_member` / `my_chat_member` update. Nothing for a channel, for a change
/// that is neither, or for the bot's own departure (it is out of the group by then).
pub fn member_service_message_updates(
    me: &UserView,
    group: &groups::GroupChat,
    change: &MembershipChange,
    message_id: u64,
    date: i64,
) -> Made {
    if message_id == 0 || group.is_channel() {
        return Made::nothing();
    }
    let seated = |m: &GroupMember| crate::wire::roles::is_seated(m.role.enum_value_or_default());
    let (old, new) = (change.old.get_or_default(), change.new.get_or_default());
    let is_service = match (seated(old), seated(new)) {
        (false, true) => true,
        (true, false) => new.user.user_id != me.id as u64,
        _ => false,
    };
    if !is_service {
        return Made::nothing();
    }
    let (user, user_row) = profile(new.user.get_or_default());
    let (from, actor_row) = profile(change.actor.get_or_default());
    let (user, from) = (types::user_json(&user), types::user_json(&from));
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
    let mut made = Made::update("message", message);
    made.rows.extend(service_message(group, change.actor.user_id, message_id, date));
    made.rows.extend([user_row, actor_row]);
    made
}

/// A service message kept in the history as a message with no content, so that a bot may
/// reply to it (welcome bots reply to the join) while forwarding, copying or editing it is
/// refused as for any service message. None without a message id.
fn service_message(group: &groups::GroupChat, actor: u64, message_id: u64, date: i64) -> Option<Row> {
    if message_id == 0 {
        return None;
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
    Some(Row::History(entry))
}
