//! Chat information and membership: `getChat`, `getChatMember`, `getChatMemberCount`,
//! `getChatAdministrators`, `leaveChat`, and a user's `getUserProfilePhotos`. Groups answer from the platform's roles (a
//! GetGroup call: the platform is the authority on who holds which role); a private chat
//! answers from what the gateway knows of it.

use serde_json::Value;

use super::target::{chat_id, known_chat, member_group};
use super::profile::platform_error;
use super::store_error;
use crate::gateway::botapi::members::{self, MemberStatus, MemberView};
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::ctx::Ctx;
use crate::gateway::store::groups::{self, GroupChat};
use crate::gateway::updates;
use crate::wire::platform::{Group, GroupRequest};

/// The group `chat_id` names and the platform's view of its members: all of them, or (`only`)
/// those of these users who have a role, so that a question about one member of a channel of
/// 10,000 does not carry every profile.
fn group_with_members(bot: &Ctx, params: &Params, only: Option<Vec<u64>>) -> Result<(GroupChat, Group), ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req = GroupRequest {
        group_id: group.group_id.clone(),
        only_members: only.is_some(),
        member_ids: only.unwrap_or_default(),
        ..Default::default()
    };
    let info = bot.port.get_group(&req).map_err(|e| platform_error(bot, "GetGroup", e))?;
    Ok((group, info))
}

/// Every member with a role, as Bot API ChatMembers.
fn member_views(info: &Group) -> Vec<MemberView> {
    info.members.iter().map(updates::member_view).collect()
}

/// `getChat`: a ChatFullInfo. For a group, its current title comes from the platform.
pub(super) fn get_chat(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let id = chat_id(params, "chat_id")?;
    if !groups::is_group_chat_id(id) {
        let chat = known_chat(bot, id)?;
        return Ok(members::chat_full_info_json(&updates::private_chat_view(&chat)));
    }
    let (mut group, info) = group_with_members(bot, params, Some(Vec::new()))?;
    group.title = info.title.clone();
    Ok(members::chat_full_info_json(&updates::group_chat_view(&group)))
}

/// `getUserProfilePhotos`: the platform keeps no profile photos, so a user this gateway knows
/// (a private chat's user, or a group member it has seen) has none: `{"total_count": 0,
/// "photos": []}`, which every SDK parses. An unknown user is 400 "user not found", as in the
/// Bot API.
pub(super) fn get_user_profile_photos(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let user_id = params.required_i64("user_id")?;
    let not_found = || ApiError::bad_request(format!("user not found: user {user_id} is unknown to this gateway"));
    if user_id <= 0 || groups::is_group_chat_id(user_id) {
        return Err(not_found());
    }
    let member = bot.store.read(move |c| groups::user(c, user_id as u64)).map_err(store_error)?;
    if member.is_none() && known_chat(bot, user_id).is_err() {
        return Err(not_found());
    }
    Ok(serde_json::json!({ "total_count": 0, "photos": [] }))
}

/// `getChatMember`: the user's ChatMember; a user with no role is `left`.
pub(super) fn get_chat_member(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let user_id = params.required_i64("user_id")?;
    let (_, info) = group_with_members(bot, params, Some(vec![user_id.max(0) as u64]))?;
    let views = member_views(&info);
    let view = match views.into_iter().find(|v| v.user.id == user_id) {
        Some(v) => v,
        None => {
            return Err(ApiError::bad_request(format!("member not found: user {user_id} has never been in this chat")))
        }
    };
    Ok(members::chat_member_json(&view))
}

/// `getChatMemberCount`: members in the chat now (owner, administrators, members, restricted).
pub(super) fn get_chat_member_count(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let (_, info) = group_with_members(bot, params, None)?;
    let views = member_views(&info);
    Ok(Value::from(views.iter().filter(|v| v.status.is_in_chat()).count()))
}

/// `getChatAdministrators`: the owner and the administrators; bots among them only with
/// `return_bots` (as the Bot API's new parameter asks).
pub(super) fn get_chat_administrators(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let return_bots = params.flag("return_bots")?;
    let (_, info) = group_with_members(bot, params, None)?;
    let views = member_views(&info);
    let admins: Vec<Value> = views
        .iter()
        .filter(|v| matches!(v.status, MemberStatus::Owner | MemberStatus::Administrator(_)))
        .filter(|v| return_bots || !v.user.is_bot)
        .map(members::chat_member_json)
        .collect();
    Ok(Value::Array(admins))
}

/// `leaveChat`: the bot leaves the group at once (the platform stops delivering to it); the
/// next commit of any member removes its leaves, so it can read nothing sent after that.
pub(super) fn leave_chat(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req = GroupRequest { group_id: group.group_id.clone(), ..Default::default() };
    bot.port.leave_group(&req).map_err(|e| platform_error(bot, "LeaveGroup", e))?;
    // The platform's LEFT delivery forgets the epoch secrets; the status changes here at once
    // so that no send slips through meanwhile.
    let gid = group.group_id;
    bot.store
        .write(move |c| groups::set_status(c, &gid, groups::Membership::Gone, crate::clock::unix_now()))
        .map_err(store_error)?;
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    //! Chat information against the in-memory platform, which is the authority on roles.

    use serde_json::json;

    use super::super::testing::{bad, bot_in_group, p, GROUP_ID};
    use super::*;
    use crate::gateway::runtime::BotShared;
    use crate::wire::platform::{AdminRights, GroupMember, GroupRole, Profile};

    fn member(id: u64, is_bot: bool, role: GroupRole) -> GroupMember {
        GroupMember {
            user: Some(Profile { user_id: id, username: format!("u{id}"), display_name: format!("U{id}"), is_bot, ..Default::default() })
                .into(),
            role: role.into(),
            rights: Some(AdminRights { can_delete_messages: role == GroupRole::ADMINISTRATOR, ..Default::default() }).into(),
            ..Default::default()
        }
    }

    /// The platform's view of the group: an owner, an administrator bot, a member, one who left
    /// and one banned.
    fn roles() -> Group {
        Group {
            group_id: GROUP_ID.to_vec(),
            title: "Team, renamed".into(),
            members: vec![
                member(100, false, GroupRole::OWNER),
                member(1, true, GroupRole::ADMINISTRATOR),
                member(101, false, GroupRole::MEMBER),
                member(102, false, GroupRole::LEFT),
                member(103, false, GroupRole::BANNED),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn members_counts_and_administrators_come_from_the_platforms_roles() {
        let (_dir, bot, fake, group) = bot_in_group("group");
        fake.answer_always("get_group", |_: GroupRequest| Ok(roles()));
        let id = group.chat_id;
        assert_eq!(get_chat_member_count(&bot.ctx(), &p(json!({"chat_id": id}))).expect("count"), json!(3));
        let admins = get_chat_administrators(&bot.ctx(), &p(json!({"chat_id": id}))).expect("admins");
        assert_eq!(admins.as_array().map(Vec::len), Some(1), "the bot is left out without return_bots: {admins}");
        assert_eq!(admins[0]["status"], "creator");
        let admins = get_chat_administrators(&bot.ctx(), &p(json!({"chat_id": id, "return_bots": true}))).expect("admins");
        assert_eq!(admins.as_array().map(Vec::len), Some(2));
        let m = get_chat_member(&bot.ctx(), &p(json!({"chat_id": id, "user_id": 103}))).expect("banned member");
        assert_eq!(m["status"], "kicked");
        let e = bad(get_chat_member(&bot.ctx(), &p(json!({"chat_id": id, "user_id": 555}))));
        assert!(e.contains("member not found"), "{e}");
        let chat = get_chat(&bot.ctx(), &p(json!({"chat_id": id}))).expect("chat");
        assert_eq!(chat["title"], "Team, renamed", "the platform's current title");
    }

    #[test]
    fn leaving_stops_sending_at_once_and_an_unreachable_platform_leaves_nothing_changed() {
        let (_dir, bot, fake, group) = bot_in_group("group");
        let id = group.chat_id;
        let e = leave_chat(&bot.ctx(), &p(json!({"chat_id": id}))).expect_err("unanswered");
        assert_eq!(e.status, 502, "{e}");
        let status = |bot: &BotShared| bot.store.read(|c| groups::by_group_id(c, &GROUP_ID)).expect("read").expect("group").status;
        assert_eq!(status(&bot), groups::Membership::Member);
        fake.answer_once("leave_group", Ok(crate::wire::platform::MembershipResponse::new()));
        leave_chat(&bot.ctx(), &p(json!({"chat_id": id}))).expect("left");
        assert_eq!(status(&bot), groups::Membership::Gone);
        let e = bad(leave_chat(&bot.ctx(), &p(json!({"chat_id": id}))));
        assert!(e.contains("not a member"), "{e}");
        assert_eq!(fake.calls_of("leave_group").len(), 2, "the third never reached the platform");
    }
}
