//! Invite links and join requests: `createChatInviteLink`, `editChatInviteLink`,
//! `revokeChatInviteLink`, `exportChatInviteLink`, `approveChatJoinRequest` and
//! `declineChatJoinRequest`. The platform keeps the links and checks their rules and the
//! bot's can_invite_users right; an approved user joins by their own external commit.

use serde_json::Value;

use super::admin::admin_error;
use super::target::{chat_id, member_group};
use crate::gateway::botapi::{members, ApiError, Params};
use crate::gateway::ctx::Ctx;
use crate::gateway::updates;
use crate::wire::platform::{
    CreateInviteLinkRequest, EditInviteLinkRequest, GroupRequest, InviteLink, InviteLinkRequest, InviteLinkSettings,
    JoinRequestDecision,
};

/// The link's settings as `createChatInviteLink` and `editChatInviteLink` take them (the
/// platform checks their ranges and that member_limit and creates_join_request exclude each
/// other).
fn link_settings(params: &Params) -> Result<InviteLinkSettings, ApiError> {
    let member_limit = match params.optional_i64("member_limit")? {
        None => 0,
        Some(n) if (1..=99_999).contains(&n) => n as u32,
        Some(n) => return Err(ApiError::bad_request(format!("member_limit must be 1-99999, got {n}"))),
    };
    Ok(InviteLinkSettings {
        name: params.optional_str("name")?.unwrap_or_default(),
        expire_date: params.optional_i64("expire_date")?.unwrap_or(0),
        member_limit,
        creates_join_request: params.flag("creates_join_request")?,
        ..Default::default()
    })
}

fn link_json(link: &InviteLink) -> Value {
    members::invite_link_json(&updates::invite_link_view(link))
}

/// `createChatInviteLink`: a new additional link (ChatInviteLink).
pub(super) fn create_chat_invite_link(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req =
        CreateInviteLinkRequest { group_id: group.group_id, settings: Some(link_settings(params)?).into(), ..Default::default() };
    let p = &bot.port;
    let link = p.create_invite_link(&req).map_err(|e| admin_error(bot, "CreateInviteLink", "create an invite link", e))?;
    Ok(link_json(&link))
}

/// `editChatInviteLink`: replaces the settings of a link that is not revoked.
pub(super) fn edit_chat_invite_link(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let link = params.required_str("invite_link")?;
    let req =
        EditInviteLinkRequest { group_id: group.group_id, link, settings: Some(link_settings(params)?).into(), ..Default::default() };
    let p = &bot.port;
    let link = p.edit_invite_link(&req).map_err(|e| admin_error(bot, "EditInviteLink", "edit an invite link", e))?;
    Ok(link_json(&link))
}

/// `revokeChatInviteLink`: nobody joins by the link after this; answers the revoked link.
pub(super) fn revoke_chat_invite_link(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req = InviteLinkRequest { group_id: group.group_id, link: params.required_str("invite_link")?, ..Default::default() };
    let p = &bot.port;
    let link = p.revoke_invite_link(&req).map_err(|e| admin_error(bot, "RevokeInviteLink", "revoke an invite link", e))?;
    Ok(link_json(&link))
}

/// `exportChatInviteLink`: a new primary link (the previous primary one is revoked), as a
/// string.
pub(super) fn export_chat_invite_link(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req = GroupRequest { group_id: group.group_id, ..Default::default() };
    let p = &bot.port;
    let link = p.export_invite_link(&req).map_err(|e| admin_error(bot, "ExportInviteLink", "export an invite link", e))?;
    Ok(Value::String(link.link))
}

fn decision(bot: &Ctx, params: &Params) -> Result<JoinRequestDecision, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let user_id = params.required_i64("user_id")?;
    if user_id <= 0 {
        return Err(ApiError::bad_request(format!("user_id must be a user's positive id, got {user_id}")));
    }
    Ok(JoinRequestDecision { group_id: group.group_id, user_id: user_id as u64, ..Default::default() })
}

/// `approveChatJoinRequest`: the user may join; their client joins by external commit.
pub(super) fn approve_chat_join_request(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let req = decision(bot, params)?;
    let p = &bot.port;
    p.approve_join_request(&req)
        .map_err(|e| admin_error(bot, "ApproveJoinRequest", "approve a join request", e))?;
    Ok(Value::Bool(true))
}

/// `declineChatJoinRequest`: the user is told their request was declined.
pub(super) fn decline_chat_join_request(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let req = decision(bot, params)?;
    let p = &bot.port;
    p.decline_join_request(&req)
        .map_err(|e| admin_error(bot, "DeclineJoinRequest", "decline a join request", e))?;
    Ok(Value::Bool(true))
}

#[cfg(test)]
mod tests {
    //! Invite links and join requests against the in-memory platform.

    use grpcio::RpcStatusCode;
    use serde_json::json;

    use super::super::testing::{bad, bot_in_group, p, GROUP_ID};
    use super::*;
    use crate::gateway::port::refusal;
    use crate::wire::platform::{MembershipResponse, Profile};

    #[test]
    fn a_new_link_carries_its_settings_and_answers_a_chat_invite_link() {
        let (_dir, bot, fake, group) = bot_in_group("group");
        fake.answer_always("create_invite_link", |req: CreateInviteLinkRequest| {
            let s = req.settings.unwrap_or_default();
            Ok(InviteLink {
                link: "https://platform.example/+abc".into(),
                creator: Some(Profile { user_id: 1, username: "b_bot".into(), display_name: "B".into(), is_bot: true, ..Default::default() })
                    .into(),
                name: s.name,
                member_limit: s.member_limit,
                group_id: req.group_id,
                ..Default::default()
            })
        });
        let link = create_chat_invite_link(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "name": "friends", "member_limit": 5})))
            .expect("created");
        assert_eq!(link["invite_link"], "https://platform.example/+abc");
        assert_eq!(link["name"], "friends");
        assert_eq!(link["member_limit"], 5);
        assert_eq!(link["creator"]["id"], 1);
        let req: CreateInviteLinkRequest = fake.calls_of("create_invite_link")[0].request();
        assert_eq!(req.group_id, GROUP_ID.to_vec());

        let e = bad(create_chat_invite_link(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "member_limit": 100_000}))));
        assert_eq!(e, "Bad Request: member_limit must be 1-99999, got 100000");
        assert_eq!(fake.calls_of("create_invite_link").len(), 1, "the bad one never reached the platform");
    }

    #[test]
    fn join_requests_are_decided_by_user_and_the_platforms_refusal_is_400() {
        let (_dir, bot, fake, group) = bot_in_group("group");
        fake.answer_once("approve_join_request", Ok(MembershipResponse::new()));
        approve_chat_join_request(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 9}))).expect("approved");
        let req: JoinRequestDecision = fake.calls_of("approve_join_request")[0].request();
        assert_eq!((req.group_id, req.user_id), (GROUP_ID.to_vec(), 9));

        fake.answer_once::<MembershipResponse>("decline_join_request", Err(refusal(RpcStatusCode::NOT_FOUND, "no pending request of user 9")));
        let e = bad(decline_chat_join_request(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 9}))));
        assert_eq!(e, "Bad Request: no pending request of user 9");
        let e = bad(approve_chat_join_request(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "user_id": 0}))));
        assert!(e.contains("positive id"), "{e}");
        assert_eq!(fake.calls().len(), 2);
    }

    #[test]
    fn an_exported_link_is_a_string_and_a_revoked_one_says_so() {
        let (_dir, bot, fake, group) = bot_in_group("channel");
        fake.answer_once("export_invite_link", Ok(InviteLink { link: "https://platform.example/+p".into(), is_primary: true, ..Default::default() }));
        let link = export_chat_invite_link(&bot.ctx(), &p(json!({"chat_id": group.chat_id}))).expect("exported");
        assert_eq!(link, Value::String("https://platform.example/+p".into()));
        fake.answer_once("revoke_invite_link", Ok(InviteLink { link: "https://platform.example/+p".into(), is_revoked: true, ..Default::default() }));
        let revoked = revoke_chat_invite_link(&bot.ctx(), &p(json!({"chat_id": group.chat_id, "invite_link": "https://platform.example/+p"})))
            .expect("revoked");
        assert_eq!(revoked["is_revoked"], true);
        let req: InviteLinkRequest = fake.calls_of("revoke_invite_link")[0].request();
        assert_eq!(req.link, "https://platform.example/+p");
    }
}
