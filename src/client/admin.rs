//! Administering groups and channels from a user device: rights, restrictions, bans, invite
//! links, join requests and deletions (the platform checks every right; docs/groups.md,
//! "Administration"), and joining by an invite link with an external MLS commit.

use super::error::{rpc, ClientError, E2eContext, Result};
use super::group::MAX_GROUP_ATTEMPTS;
use super::group_delivery::{forget_group, remember_group, set_self_updated, short};
use super::message::GroupId;
use super::profile::Profile;
use super::send::new_client_message_id;
use crate::e2e::group as mls_group;
use crate::wire::platform::{
    join_by_link_response::Status as JoinStatus, send_group_message_response::Status, AdminRights,
    CreateInviteLinkRequest, DeleteGroupMessageRequest, GroupRequest, GroupType, InviteLink, InviteLinkRequest,
    InviteLinkSettings,
    JoinByLinkRequest, JoinRequestDecision, PromoteGroupMemberRequest, RestrictGroupMemberRequest,
    UnbanGroupMemberRequest,
};

/// The rights `group promote` names, with the AdminRights field each sets.
pub const RIGHT_NAMES: &[&str] = &["post", "delete", "restrict", "invite", "promote", "change_info", "manage"];

/// Reads a comma-separated list of [`RIGHT_NAMES`] (or `none`) into AdminRights.
pub fn parse_rights(list: &str) -> Result<AdminRights> {
    let mut r = AdminRights::new();
    if list.trim() == "none" {
        return Ok(r);
    }
    for name in list.split(',').map(str::trim) {
        let right = match name {
            "post" => &mut r.can_post_messages,
            "delete" => &mut r.can_delete_messages,
            "restrict" => &mut r.can_restrict_members,
            "invite" => &mut r.can_invite_users,
            "promote" => &mut r.can_promote_members,
            "change_info" => &mut r.can_change_info,
            "manage" => &mut r.can_manage_chat,
            other => {
                return Err(ClientError::Invalid(format!(
                    "unknown right {other:?}: the rights are {} (comma-separated), or none",
                    RIGHT_NAMES.join(", ")
                )))
            }
        };
        *right = true;
    }
    Ok(r)
}

/// A link's settings for `group link`.
pub type LinkOptions = InviteLinkSettings;

/// What following an invite link did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined {
    /// In the group now (our external commit was accepted).
    Member { group: GroupId, title: String },
    /// A join request waits for an administrator.
    Requested { group: GroupId, title: String },
}

impl Profile {
    /// Sets `username`'s administrator rights (none: a member again).
    pub fn promote(&self, group: &GroupId, username: &str, rights: AdminRights) -> Result<()> {
        let user_id = self.lookup(username)?.user_id;
        let req = PromoteGroupMemberRequest { group_id: group.0.to_vec(), user_id, rights: Some(rights).into(), ..Default::default() };
        self.platform.client.promote_group_member(&req, self.platform.opt()).map_err(rpc("PromoteGroupMember"))?;
        Ok(())
    }

    /// Restricts `username` (the platform refuses their messages) until `until` (0: for good),
    /// or lifts it (`can_send_messages`).
    pub fn restrict(&self, group: &GroupId, username: &str, can_send_messages: bool, until: i64) -> Result<()> {
        let user_id = self.lookup(username)?.user_id;
        let req = RestrictGroupMemberRequest { group_id: group.0.to_vec(), user_id, can_send_messages, until_date: until, ..Default::default() };
        self.platform.client.restrict_group_member(&req, self.platform.opt()).map_err(rpc("RestrictGroupMember"))?;
        Ok(())
    }

    /// Lets a banned user join again.
    pub fn unban(&self, group: &GroupId, username: &str) -> Result<()> {
        let user_id = self.lookup(username)?.user_id;
        let req = UnbanGroupMemberRequest { group_id: group.0.to_vec(), user_id, only_if_banned: true, ..Default::default() };
        self.platform.client.unban_group_member(&req, self.platform.opt()).map_err(rpc("UnbanGroupMember"))?;
        Ok(())
    }

    /// Deletes a message of the group for everyone (ours, or anyone's with the delete right).
    /// The platform checks the right and tells the members who deleted it; then our own MLS
    /// `Delete` follows, which is what deletes it from their histories (`e2e::deletions`).
    pub fn delete_group_message(&self, group: &GroupId, message_id: u64) -> Result<()> {
        let req = DeleteGroupMessageRequest { group_id: group.0.to_vec(), message_id, ..Default::default() };
        self.platform.client.delete_group_message(&req, self.platform.opt()).map_err(rpc("DeleteGroupMessage"))?;
        let mut content = crate::wire::e2e::Content::new();
        content.set_delete(crate::wire::e2e::Delete { message_id, ..Default::default() });
        self.send_group_content(group, &content)?;
        let peer = super::history::group_peer(&group.0);
        super::history::forget(&self.conn, peer, message_id)?;
        super::history::forget_sent(&self.conn, peer, message_id)
    }

    /// A new invite link of the group.
    pub fn create_invite_link(&self, group: &GroupId, o: &LinkOptions) -> Result<InviteLink> {
        let req = CreateInviteLinkRequest { group_id: group.0.to_vec(), settings: Some(o.clone()).into(), ..Default::default() };
        self.platform.client.create_invite_link(&req, self.platform.opt()).map_err(rpc("CreateInviteLink"))
    }

    pub fn revoke_invite_link(&self, group: &GroupId, link: &str) -> Result<InviteLink> {
        let req = InviteLinkRequest { group_id: group.0.to_vec(), link: link.to_string(), ..Default::default() };
        self.platform.client.revoke_invite_link(&req, self.platform.opt()).map_err(rpc("RevokeInviteLink"))
    }

    /// A new primary link (the previous one is revoked).
    pub fn export_invite_link(&self, group: &GroupId) -> Result<InviteLink> {
        let req = GroupRequest { group_id: group.0.to_vec(), ..Default::default() };
        self.platform.client.export_invite_link(&req, self.platform.opt()).map_err(rpc("ExportInviteLink"))
    }

    /// Approves or declines `username`'s pending join request.
    pub fn decide_join_request(&self, group: &GroupId, username: &str, approve: bool) -> Result<()> {
        let user_id = self.lookup(username)?.user_id;
        let req = JoinRequestDecision { group_id: group.0.to_vec(), user_id, ..Default::default() };
        let p = &self.platform;
        if approve {
            p.client.approve_join_request(&req, p.opt()).map_err(rpc("ApproveJoinRequest"))?;
        } else {
            p.client.decline_join_request(&req, p.opt()).map_err(rpc("DeclineJoinRequest"))?;
        }
        Ok(())
    }

    /// Follows an invite link: joins at once by an external commit, or leaves a join request
    /// (this device joins by itself once it is approved: the inbox does it).
    pub fn join_by_link(&self, link: &str) -> Result<Joined> {
        let req = JoinByLinkRequest { link: link.trim().to_string(), ..Default::default() };
        let r = self.platform.client.join_by_link(&req, self.platform.opt()).map_err(rpc("JoinByLink"))?;
        let group = GroupId::from_slice(&r.group_id)
            .ok_or_else(|| ClientError::Invalid("the platform named a malformed group id".into()))?;
        let kind = r.type_.enum_value_or_default();
        self.write(|c| remember_group(c, &group, &r.title, kind, 0))?;
        match r.status.enum_value_or_default() {
            JoinStatus::REQUESTED => Ok(Joined::Requested { group, title: r.title }),
            JoinStatus::INVITED => {
                self.join_external(&group, &r.title, kind)?;
                Ok(Joined::Member { group, title: r.title })
            }
        }
    }

    /// Joins a group this user is INVITED to by an external commit from the platform's
    /// GroupInfo; a stale one is fetched again (a few times).
    pub(super) fn join_external(&self, group: &GroupId, title: &str, kind: GroupType) -> Result<()> {
        let context = || format!("joining group {}", short(group));
        for attempt in 1..=MAX_GROUP_ATTEMPTS {
            let req = GroupRequest { group_id: group.0.to_vec(), ..Default::default() };
            let info = self.platform.client.get_group_info(&req, self.platform.opt()).map_err(rpc("GetGroupInfo"))?.group_info;
            let out = self.write(|c| mls_group::join_external_to(c, &group.0, &info).context(context))?;
            let mut users: Vec<u64> = out.newcomers.iter().map(|d| d.0).collect();
            users.sort_unstable();
            users.dedup();
            let cmid = new_client_message_id();
            let answer = self.send_to_group(group, &cmid, out.message, out.group_info, out.welcome, Vec::new());
            match answer.as_ref().map(|r| r.status.enum_value()) {
                Ok(Ok(Status::OK)) => {
                    // The join made our leaf: nothing to update yet.
                    let now = crate::clock::unix_now();
                    self.write(|c| {
                        mls_group::join_accepted(c, &group.0).context(context)?;
                        remember_group(c, group, title, kind, 0)?;
                        set_self_updated(c, group, now)
                    })?;
                    if out.rejoined && !users.is_empty() {
                        log::warn!("group {}: rejoined; its tree holds users the verified one did not: {users:?}", short(group));
                    } else {
                        log::info!("@{} joined group {} by an external commit; members in its tree: {users:?}", self.username(), short(group));
                    }
                    self.learn_posters(group, kind);
                    return Ok(());
                }
                Ok(Ok(Status::STALE_EPOCH)) => {
                    self.write(|c| mls_group::forget(c, &group.0).context(context))?;
                    log::info!("group {}: the join was stale (attempt {attempt}); trying again", short(group));
                }
                _ => {
                    self.write(|c| forget_group(c, group))?;
                    return match answer {
                        Err(e) => Err(e),
                        Ok(r) => Err(ClientError::Rejected { to: format!("group {}", short(group)), reason: r.error }),
                    };
                }
            }
        }
        Err(ClientError::Invalid(format!("{}: the group kept changing after {MAX_GROUP_ATTEMPTS} attempts", context())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_are_a_comma_separated_list_or_none() {
        let r = parse_rights("post, delete,invite").expect("rights");
        assert!(r.can_post_messages && r.can_delete_messages && r.can_invite_users);
        assert!(!r.can_promote_members && !r.can_restrict_members);
        assert_eq!(parse_rights("none").expect("none"), AdminRights::new());
        let all = parse_rights(&RIGHT_NAMES.join(",")).expect("all");
        assert!(all.can_change_info && all.can_manage_chat && all.can_restrict_members && all.can_promote_members);
        let e = parse_rights("post,fly").expect_err("unknown");
        assert!(e.to_string().contains("unknown right \"fly\""), "{e}");
    }
}
