//! Group and channel administration: `banChatMember`, `unbanChatMember`,
//! `restrictChatMember`, `promoteChatMember`, `setChatTitle`, deletions in groups, and the
//! rights check of a channel post. The platform enforces every right (a refused action
//! changes nothing); its refusal becomes 400 "not enough rights to …" here. The bot's own
//! commits follow from the platform's deliveries (`gateway::groups::commit_removals`).

use serde_json::Value;

use super::messages::SEND_WAIT;
use super::submit;
use super::target::{chat_id, member_group};
use super::profile::platform_error;
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::runtime::unix_now;
use crate::gateway::ctx::{Ctx, Sending};
use crate::gateway::store::groups::{self, GroupChat};
use crate::wire::e2e::{Content, Delete};
use crate::wire::platform::{
    AdminRights, DeleteGroupMessageRequest, PromoteGroupMemberRequest, RemoveGroupMemberRequest,
    RestrictGroupMemberRequest, SetGroupTitleRequest, UnbanGroupMemberRequest,
};
use crate::wire::rpc;

/// A platform refusal of an administrative call, as the Bot API words it: a missing right is
/// "not enough rights to <action>", any other refusal says what the platform said.
pub(super) fn admin_error(bot: &Ctx, call: &str, action: &str, e: grpcio::Error) -> ApiError {
    use grpcio::RpcStatusCode as Code;
    match (rpc::code(&e), &e) {
        (Some(Code::PERMISSION_DENIED), grpcio::Error::RpcFailure(s)) => {
            ApiError::bad_request(format!("not enough rights to {action}: {}", s.message()))
        }
        (
            Some(Code::FAILED_PRECONDITION | Code::NOT_FOUND | Code::ALREADY_EXISTS | Code::INVALID_ARGUMENT),
            grpcio::Error::RpcFailure(s),
        ) => ApiError::bad_request(s.message()),
        _ => platform_error(bot, call, e),
    }
}

/// The group or channel of `chat_id` and the user `user_id` names.
fn group_and_user(bot: &Ctx, params: &Params) -> Result<(GroupChat, u64), ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let user_id = params.required_i64("user_id")?;
    if user_id <= 0 {
        return Err(ApiError::bad_request(format!("user_id must be a user's positive id, got {user_id}")));
    }
    Ok((group, user_id as u64))
}

/// `until_date` as the Bot API reads it: absent, or less than 30 seconds or more than 366 days
/// from now, means forever (0).
fn until_date(params: &Params) -> Result<i64, ApiError> {
    let Some(until) = params.optional_i64("until_date")? else { return Ok(0) };
    let now = unix_now();
    Ok(if until < now + 30 || until > now + 366 * 24 * 3600 { 0 } else { until })
}

/// `banChatMember`: the user is removed (BANNED) and cannot come back until unbanned or until
/// `until_date`; the bot then commits the removal of their leaves. `revoke_messages` is
/// accepted and ignored (members keep what they already decrypted).
pub(super) fn ban_chat_member(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let (group, user_id) = group_and_user(bot, params)?;
    params.optional_bool("revoke_messages")?;
    let req =
        RemoveGroupMemberRequest { group_id: group.group_id, user_id, until_date: until_date(params)?, ..Default::default() };
    let p = &bot.port;
    p.remove_group_member(&req).map_err(|e| admin_error(bot, "RemoveGroupMember", "ban a member", e))?;
    // Noted now, not only when the notice comes back through the inbox: the bot's next post
    // commits the removal of everyone it banned before it, in one commit (decision 0130). The
    // notice notes it too, so a note lost here costs nothing.
    let (gid, now) = (req.group_id, unix_now());
    if let Err(e) = bot.store.write_relaxed(move |c| groups::note_departed(c, &gid, user_id, now)) {
        log::warn!("bot @{}: noting banned user {user_id} for removal: {e} (the ban's notice notes it)", bot.name);
    }
    Ok(Value::Bool(true))
}

/// `unbanChatMember`: a banned user may join again; a member who is not banned is removed
/// (as in the Bot API) unless `only_if_banned`.
pub(super) fn unban_chat_member(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let (group, user_id) = group_and_user(bot, params)?;
    let only_if_banned = params.flag("only_if_banned")?;
    let req = UnbanGroupMemberRequest { group_id: group.group_id, user_id, only_if_banned, ..Default::default() };
    let p = &bot.port;
    p.unban_group_member(&req).map_err(|e| admin_error(bot, "UnbanGroupMember", "unban a member", e))?;
    Ok(Value::Bool(true))
}

/// `restrictChatMember`: `permissions.can_send_messages` false restricts the member (the
/// platform refuses their messages) until `until_date`; true lifts the restriction. The other
/// ChatPermissions concern media, polls and the like, which groups here do not carry.
pub(super) fn restrict_chat_member(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let (group, user_id) = group_and_user(bot, params)?;
    let permissions = params.optional_nested("permissions")?.ok_or_else(|| ApiError::bad_request("permissions is required"))?;
    params.optional_bool("use_independent_chat_permissions")?;
    let can_send_messages = permissions.flag("can_send_messages")?;
    let req = RestrictGroupMemberRequest {
        group_id: group.group_id,
        user_id,
        can_send_messages,
        until_date: until_date(params)?,
        ..Default::default()
    };
    let p = &bot.port;
    p.restrict_group_member(&req).map_err(|e| admin_error(bot, "RestrictGroupMember", "restrict a member", e))?;
    Ok(Value::Bool(true))
}

/// `promoteChatMember`: the rights this platform knows; none demotes to a member. Rights of the
/// Bot API the platform has no use for (video chats, stories, pinning, topics) are accepted and
/// ignored.
pub(super) fn promote_chat_member(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let (group, user_id) = group_and_user(bot, params)?;
    let rights = AdminRights {
        can_change_info: params.flag("can_change_info")?,
        can_delete_messages: params.flag("can_delete_messages")?,
        can_invite_users: params.flag("can_invite_users")?,
        can_restrict_members: params.flag("can_restrict_members")?,
        can_promote_members: params.flag("can_promote_members")?,
        can_post_messages: params.flag("can_post_messages")?,
        can_manage_chat: params.flag("can_manage_chat")?,
        ..Default::default()
    };
    let req = PromoteGroupMemberRequest { group_id: group.group_id, user_id, rights: Some(rights).into(), ..Default::default() };
    let p = &bot.port;
    p.promote_group_member(&req).map_err(|e| admin_error(bot, "PromoteGroupMember", "promote a member", e))?;
    Ok(Value::Bool(true))
}

/// `setChatTitle`: 1-128 characters; the owner or an administrator with can_change_info.
pub(super) fn set_chat_title(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let title = params.required_str("title")?;
    let req = SetGroupTitleRequest { group_id: group.group_id, title, ..Default::default() };
    let p = &bot.port;
    p.set_group_title(&req).map_err(|e| admin_error(bot, "SetGroupTitle", "change the title", e))?;
    Ok(Value::Bool(true))
}

/// `deleteMessage` in a group or channel: the bot's own message, or anyone's when the bot is
/// an administrator with can_delete_messages. The platform checks the right and tells every
/// member who deleted it; then the bot's own MLS `Delete` goes to the group, and only that
/// deletes the message from the members' histories (`e2e::deletions`). Sent through the
/// outbox, which also forgets it here.
pub(super) fn delete_group_message(bot: &Sending, group: &GroupChat, message_id: i64) -> Result<Value, ApiError> {
    if message_id <= 0 {
        return Err(ApiError::bad_request(format!("message_id must be positive, got {message_id}")));
    }
    let req = DeleteGroupMessageRequest { group_id: group.group_id.clone(), message_id: message_id as u64, ..Default::default() };
    let p = &bot.port;
    p.delete_group_message(&req)
        .map_err(|e| admin_error(bot, "DeleteGroupMessage", "delete this message", e))?;
    let mut content = Content::new();
    content.set_delete(Delete { message_id: message_id as u64, ..Default::default() });
    submit::submit(bot, group.chat_id, content, SEND_WAIT)?;
    Ok(Value::Bool(true))
}


#[cfg(test)]
mod tests {
    //! Administration against the in-memory platform: what reaches the platform, and how its
    //! refusals read.

    use grpcio::RpcStatusCode;
    use serde_json::json;

    use super::super::testing::{bad, bot_in_group, p, GROUP_ID};
    use super::*;
    use crate::gateway::port::refusal;
    use crate::wire::platform::MembershipResponse;

    #[test]
    fn a_ban_reaches_the_platform_with_its_date_and_a_missing_right_reads_as_the_bot_api_says() {
        let (_dir, bot, fake, group) = bot_in_group("group");
        fake.answer_once("remove_group_member", Ok(MembershipResponse::new()));
        let soon = unix_now() + 3600;
        let ok = ban_chat_member(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 42, "until_date": soon})));
        assert_eq!(ok.expect("banned"), Value::Bool(true));
        let req: RemoveGroupMemberRequest = fake.calls_of("remove_group_member")[0].request();
        assert_eq!((req.group_id, req.user_id, req.until_date), (GROUP_ID.to_vec(), 42, soon));
        let departed = bot.store.read(|c| groups::departed(c, &GROUP_ID)).expect("read");
        assert_eq!(departed, [42], "noted for removal at once, so that the next post commits it");

        // Over 366 days is forever (0), as in the Bot API.
        fake.answer_once("remove_group_member", Ok(MembershipResponse::new()));
        ban_chat_member(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 42, "until_date": unix_now() + 400 * 86400})))
            .expect("banned");
        assert_eq!(fake.calls_of("remove_group_member")[1].request::<RemoveGroupMemberRequest>().until_date, 0);

        fake.answer_once::<MembershipResponse>(
            "remove_group_member",
            Err(refusal(RpcStatusCode::PERMISSION_DENIED, "can_restrict_members is missing")),
        );
        let e = bad(ban_chat_member(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 43}))));
        assert_eq!(e, "Bad Request: not enough rights to ban a member: can_restrict_members is missing");
        let departed = bot.store.read(|c| groups::departed(c, &GROUP_ID)).expect("read");
        assert_eq!(departed, [42], "a refused ban notes nobody");
    }

    #[test]
    fn bad_input_and_groups_the_bot_left_never_reach_the_platform() {
        let (_dir, bot, fake, group) = bot_in_group("group");
        let e = bad(ban_chat_member(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": -3}))));
        assert!(e.contains("user_id must be a user's positive id"), "{e}");
        let e = bad(restrict_chat_member(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 3}))));
        assert_eq!(e, "Bad Request: permissions is required");
        let e = bad(delete_group_message(&bot.sending(), &group, 0));
        assert!(e.contains("message_id must be positive"), "{e}");
        let gid = group.group_id.clone();
        bot.store
            .write(move |c| crate::gateway::store::groups::set_status(c, &gid, crate::gateway::store::groups::Membership::Gone, 2))
            .expect("left");
        let e = bad(set_chat_title(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "title": "New"}))));
        assert!(e.contains("chat not found: the bot is not a member of group"), "{e}");
        assert!(fake.calls().is_empty(), "nothing was asked of the platform: {:?}", fake.calls());
    }

    #[test]
    fn rights_and_restrictions_travel_as_the_platform_knows_them() {
        let (_dir, bot, fake, group) = bot_in_group("channel");
        fake.answer_always("promote_group_member", |_: PromoteGroupMemberRequest| Ok(MembershipResponse::new()));
        fake.answer_always("restrict_group_member", |_: RestrictGroupMemberRequest| Ok(MembershipResponse::new()));
        promote_chat_member(
            &bot.ctx(),
            &p(json!({"chat_id": group.chat_id, "user_id": 7, "can_post_messages": true, "can_manage_video_chats": true})),
        )
        .expect("promoted");
        let rights = fake.calls_of("promote_group_member")[0].request::<PromoteGroupMemberRequest>().rights.unwrap_or_default();
        assert!(rights.can_post_messages && !rights.can_delete_messages && !rights.can_promote_members);
        restrict_chat_member(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 7, "permissions": {"can_send_messages": false}})))
            .expect("restricted");
        let req: RestrictGroupMemberRequest = fake.calls_of("restrict_group_member")[0].request();
        assert_eq!((req.user_id, req.can_send_messages, req.until_date), (7, false, 0));
    }

    /// The platform checks the right first; then the bot's own `Delete` goes to the group
    /// through the outbox (here a stand-in that takes the one pending row), and only that
    /// deletes it for the members (`e2e::deletions`).
    #[test]
    fn a_deletion_the_platform_took_is_the_bots_own_delete_and_an_unreachable_platform_is_502() {
        use crate::gateway::store::{chats, outbox};
        let (_dir, bot, fake, group) = bot_in_group("group");
        let chat_id = group.chat_id;
        bot.store
            .write(move |c| {
                let entry = chats::HistoryEntry {
                    chat_id,
                    message_id: 12,
                    from_bot: true,
                    sender_id: 1,
                    date: 1,
                    content: Default::default(),
                    edit_date: 0,
                };
                chats::record(c, &entry)
            })
            .expect("history");
        let e = delete_group_message(&bot.sending(), &group, 12).expect_err("unanswered");
        assert_eq!(e.status, 502, "{e}");
        assert!(bot.store.read(move |c| chats::lookup(c, chat_id, 12)).expect("read").is_some(), "kept while unanswered");
        assert!(bot.store.read(|c| outbox::pending(c, 10)).expect("read").is_empty(), "no Delete without the platform's yes");
        fake.answer_once("delete_group_message", Ok(crate::wire::platform::DeleteGroupMessageResponse::new()));
        let out = {
            let bot = bot.clone();
            std::thread::spawn(move || {
                bot.outbox.wake.receiver().recv_timeout(std::time::Duration::from_secs(30)).expect("woken");
                let entry = bot.store.read(|c| outbox::pending(c, 1)).expect("pending").remove(0);
                let (row, sent) = (entry.id, crate::gateway::send_wait::Sent { message_id: 13, date: 1 });
                bot.store
                    .write(move |c| {
                        outbox::remove(c, row)?;
                        crate::gateway::history::record_in_history(c, 1, &entry, &sent)?;
                        Ok(entry)
                    })
                    .map(|entry| {
                        assert!(bot.outbox.finish(row, Ok(sent)));
                        entry
                    })
                    .expect("sent")
            })
        };
        delete_group_message(&bot.sending(), &group, 12).expect("deleted");
        let entry = out.join().expect("stand-in");
        assert_eq!(entry.chat_id, chat_id);
        assert!(matches!(&entry.content.body, Some(crate::wire::e2e::content::Body::Delete(d)) if d.message_id == 12), "{entry:?}");
        assert!(bot.store.read(move |c| chats::lookup(c, chat_id, 12)).expect("read").is_none(), "gone from the history");
    }
}
