//! Invite links and join requests: `createChatInviteLink`, `editChatInviteLink`,
//! `revokeChatInviteLink`, `exportChatInviteLink`, `approveChatJoinRequest` and
//! `declineChatJoinRequest`. The platform keeps the links and checks their rules and the
//! bot's can_invite_users right; an approved user joins by their own external commit.

use serde_json::Value;

use super::admin::admin_error;
use super::target::{chat_id, member_group};
use crate::gateway::botapi::{members, ApiError, Params};
use crate::gateway::runtime::BotShared;
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
pub(super) fn create_chat_invite_link(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req =
        CreateInviteLinkRequest { group_id: group.group_id, settings: Some(link_settings(params)?).into(), ..Default::default() };
    let p = &bot.platform;
    let link = p.create_invite_link(&req).map_err(|e| admin_error(bot, "CreateInviteLink", "create an invite link", e))?;
    Ok(link_json(&link))
}

/// `editChatInviteLink`: replaces the settings of a link that is not revoked.
pub(super) fn edit_chat_invite_link(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let link = params.required_str("invite_link")?;
    let req =
        EditInviteLinkRequest { group_id: group.group_id, link, settings: Some(link_settings(params)?).into(), ..Default::default() };
    let p = &bot.platform;
    let link = p.edit_invite_link(&req).map_err(|e| admin_error(bot, "EditInviteLink", "edit an invite link", e))?;
    Ok(link_json(&link))
}

/// `revokeChatInviteLink`: nobody joins by the link after this; answers the revoked link.
pub(super) fn revoke_chat_invite_link(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req = InviteLinkRequest { group_id: group.group_id, link: params.required_str("invite_link")?, ..Default::default() };
    let p = &bot.platform;
    let link = p.revoke_invite_link(&req).map_err(|e| admin_error(bot, "RevokeInviteLink", "revoke an invite link", e))?;
    Ok(link_json(&link))
}

/// `exportChatInviteLink`: a new primary link (the previous primary one is revoked), as a
/// string.
pub(super) fn export_chat_invite_link(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let req = GroupRequest { group_id: group.group_id, ..Default::default() };
    let p = &bot.platform;
    let link = p.export_invite_link(&req).map_err(|e| admin_error(bot, "ExportInviteLink", "export an invite link", e))?;
    Ok(Value::String(link.link))
}

fn decision(bot: &BotShared, params: &Params) -> Result<JoinRequestDecision, ApiError> {
    let group = member_group(bot, chat_id(params, "chat_id")?)?;
    let user_id = params.required_i64("user_id")?;
    if user_id <= 0 {
        return Err(ApiError::bad_request(format!("user_id must be a user's positive id, got {user_id}")));
    }
    Ok(JoinRequestDecision { group_id: group.group_id, user_id: user_id as u64, ..Default::default() })
}

/// `approveChatJoinRequest`: the user may join; their client joins by external commit.
pub(super) fn approve_chat_join_request(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let req = decision(bot, params)?;
    let p = &bot.platform;
    p.approve_join_request(&req)
        .map_err(|e| admin_error(bot, "ApproveJoinRequest", "approve a join request", e))?;
    Ok(Value::Bool(true))
}

/// `declineChatJoinRequest`: the user is told their request was declined.
pub(super) fn decline_chat_join_request(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let req = decision(bot, params)?;
    let p = &bot.platform;
    p.decline_join_request(&req)
        .map_err(|e| admin_error(bot, "DeclineJoinRequest", "decline a join request", e))?;
    Ok(Value::Bool(true))
}
