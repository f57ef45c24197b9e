//! Groups from a user device: creating one, adding and removing members, leaving, sending. The MLS operations are `e2e::group`'s; this module
//! drives them against the platform's delivery service (docs/groups.md).
//!
//! Every own commit is two-step: `e2e::group` leaves it pending, the platform answers, and then
//! it is merged (OK) or discarded (STALE_EPOCH: the device catches up with what it missed and
//! derives the commit again, at most `MAX_GROUP_ATTEMPTS` times). An application message the
//! platform refuses as stale is encrypted again in the new epoch, never resent as it was.
//!
//! Catching up reads the device's inbox: whatever else arrives meanwhile is processed as usual
//! and kept (`Profile::pending`) for the next `receive_*` call, so nothing is lost to it.
//!
//! The device's groups are remembered in `client_groups` (id, title, type, last `group_seq`
//! seen; `group_delivery.rs`) so that commands can name a group by title or by a prefix of its
//! id. What the inbox needs of groups is in `group_delivery.rs`, below the inbox; this module
//! is above it (catching up reads the inbox).

use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::error::{ClientError, E2eContext, Result, rpc};
use super::group_delivery::{
    forget_group, known_groups, remember_group, sender_of, set_self_updated, short, KnownGroup,
};
use super::history;
use super::message::{Entity, GroupId, GroupRole, SentMessage, Sender};
use super::profile::Profile;
use super::send::new_client_message_id;
use crate::crypto;
use crate::e2e::group::{self as mls_group, CommitOut};
use crate::e2e::E2eError;
use crate::wire::e2e::{Content, Text};
use crate::wire::platform::{
    send_group_message_response::Status, AddGroupMemberRequest, ClaimKeyPackagesRequest,
    CreateGroupRequest, Group, GroupRequest, GroupType, ListGroupsRequest,
    RemoveGroupMemberRequest, SendGroupMessageResponse,
};

/// Rounds of "stale epoch: catch up, derive again" (or "removals pending: remove, send
/// again") before an operation gives up.
pub const MAX_GROUP_ATTEMPTS: usize = 5;
/// How long catching up with a group waits for the inbox to bring the platform's epoch.
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(15);

/// One member of a group with its role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMemberInfo {
    pub user: Sender,
    pub role: GroupRole,
}

/// A group as the platform shows it to a member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDetails {
    pub id: GroupId,
    pub title: String,
    pub kind: GroupType,
    pub epoch: u64,
    /// Every user with a role, LEFT and BANNED included.
    pub members: Vec<GroupMemberInfo>,
}

impl GroupDetails {
    /// The role of `user_id`, if it has one.
    pub fn role_of(&self, user_id: u64) -> Option<GroupRole> {
        self.members
            .iter()
            .find(|m| m.user.user_id == user_id)
            .map(|m| m.role)
    }
}

/// What the platform assigned to a sent group message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentGroupMessage {
    pub group: GroupId,
    /// Per group, from 1.
    pub message_id: u64,
    pub date: i64,
    /// The group's order of everything it accepted.
    pub group_seq: u64,
}

/// What adding a user did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Added {
    pub user: Sender,
    /// The devices our commit added (their Welcome is on its way); 0 for a bot, which joins by
    /// itself, or a user with no device holding a key package.
    pub devices: usize,
}

impl Profile {
    /// Creates a group with this user as its owner and only member.
    pub fn create_group(&self, title: &str) -> Result<GroupId> {
        self.create_group_of(title, GroupType::GROUP)
    }

    /// Creates a channel: a group whose members are subscribers; this user owns it and posts.
    pub fn create_channel(&self, title: &str) -> Result<GroupId> {
        self.create_group_of(title, GroupType::CHANNEL)
    }

    fn create_group_of(&self, title: &str, kind: GroupType) -> Result<GroupId> {
        let title = title.trim();
        if title.is_empty() || title.chars().count() > 128 {
            return Err(ClientError::Invalid(
                "a group or channel title is 1 to 128 characters".to_string(),
            ));
        }
        let id = GroupId(mls_group::new_group_id());
        let info = self.write(|c| {
            mls_group::create(c, &id.0).context(|| format!("creating group {}", short(&id)))
        })?;
        let mut req = CreateGroupRequest::new();
        req.group_id = id.0.to_vec();
        req.title = title.to_string();
        req.type_ = kind.into();
        req.group_info = info;
        match self.platform.client.create_group(&req, self.platform.opt()) {
            Ok(group) => {
                let now = crate::clock::unix_now();
                self.write(|c| {
                    remember_group(c, &id, &group.title, kind, 0)?;
                    set_self_updated(c, &id, now)?;
                    // The creator owns a channel: it alone posts, until it promotes someone.
                    if kind == GroupType::CHANNEL {
                        crate::e2e::posters::set_posters(c, &id.0, &[self.user_id()]).context(|| format!("channel {}", short(&id)))?;
                    }
                    Ok(())
                })?;
                log::info!("@{} created group {}", self.username(), short(&id));
                Ok(id)
            }
            Err(status) => {
                self.write(|c| {
                    mls_group::forget(c, &id.0)
                        .context(|| format!("forgetting group {}", short(&id)))
                })?;
                Err(ClientError::Rpc {
                    call: "CreateGroup",
                    status,
                })
            }
        }
    }

    /// Admits `username` to the group. A user's devices are then added by our commit from
    /// their key packages (they join from the Welcome); a bot joins by itself (an external
    /// commit of its gateway), so for a bot this stops after the platform admitted it.
    pub fn add_to_group(&self, group: &GroupId, username: &str) -> Result<Added> {
        let peer = self.lookup(username)?;
        let name = peer.username.clone();
        let mut req = AddGroupMemberRequest::new();
        req.group_id = group.0.to_vec();
        req.user_id = peer.user_id;
        self.platform
            .client
            .add_group_member(&req, self.platform.opt())
            .map_err(rpc("AddGroupMember"))?;
        let user = sender_of(&peer);
        if peer.is_bot {
            log::info!(
                "bot @{name} admitted to group {}; it joins by itself",
                short(group)
            );
            return Ok(Added { user, devices: 0 });
        }
        let mut claim = ClaimKeyPackagesRequest::new();
        claim.user_id = peer.user_id;
        let claimed = self
            .platform
            .client
            .claim_key_packages(&claim, self.platform.opt())
            .map_err(rpc("ClaimKeyPackages"))?;
        if !claimed.devices_without.is_empty() {
            log::warn!(
                "devices {:?} of @{name} have no key package: they cannot be added now",
                claimed.devices_without
            );
        }
        let packages: Vec<mls_group::Claimed> = claimed
            .key_packages
            .into_iter()
            .map(|k| mls_group::Claimed { user_id: peer.user_id, device_id: k.device_id, key_package: k.key_package })
            .collect();
        if packages.is_empty() {
            return Err(ClientError::Invalid(format!(
                "@{name} is invited to group {}, but none of their devices has a key package to add it with",
                short(group)
            )));
        }
        let devices = packages.len();
        self.add_to_group_by_key_packages(group, &packages)?;
        Ok(Added { user, devices })
    }

    /// Commits the addition of the devices of `key_packages` (as ClaimKeyPackages hands them
    /// out, of users the platform admitted); they join from the Welcome. A key package whose
    /// leaf this device does not trust, or that names another device, fails it: nothing is sent.
    pub fn add_to_group_by_key_packages(
        &self,
        group: &GroupId,
        key_packages: &[mls_group::Claimed],
    ) -> Result<()> {
        self.self_update_if_due(group, false);
        self.commit_own(group, "adding members", |c| {
            mls_group::add(c, &group.0, key_packages).map(Some)
        })?;
        Ok(())
    }

    /// Removes `username` from the group (BANNED on the platform, for good), then commits the
    /// removal of their leaves. Returns whether our commit removed any (false: they had none,
    /// or another member's commit removed them first).
    pub fn remove_from_group(&self, group: &GroupId, username: &str) -> Result<bool> {
        self.ban(group, username, 0)
    }

    /// [`Profile::remove_from_group`] until `until` (unix seconds; 0 = for good).
    pub fn ban(&self, group: &GroupId, username: &str, until: i64) -> Result<bool> {
        let peer = self.lookup(username)?;
        let mut req = RemoveGroupMemberRequest::new();
        req.group_id = group.0.to_vec();
        req.user_id = peer.user_id;
        req.until_date = until;
        self.platform
            .client
            .remove_group_member(&req, self.platform.opt())
            .map_err(rpc("RemoveGroupMember"))?;
        self.commit_removals(group, &[peer.user_id])
    }

    /// Leaves the group (LEFT on the platform; a member removes our leaves with its next
    /// commit) and forgets it on this device.
    pub fn leave_group(&self, group: &GroupId) -> Result<()> {
        let mut req = GroupRequest::new();
        req.group_id = group.0.to_vec();
        self.platform
            .client
            .leave_group(&req, self.platform.opt())
            .map_err(rpc("LeaveGroup"))?;
        self.write(|c| forget_group(c, group))
    }

    /// Changes the group's title (the owner, or an administrator with can_change_info).
    pub fn set_group_title(&self, group: &GroupId, title: &str) -> Result<()> {
        let mut req = crate::wire::platform::SetGroupTitleRequest::new();
        req.group_id = group.0.to_vec();
        req.title = title.to_string();
        self.platform.client.set_group_title(&req, self.platform.opt()).map_err(rpc("SetGroupTitle"))?;
        Ok(())
    }

    /// Sends a text to the group, optionally as a reply to a group message id.
    pub fn send_group_text(
        &self,
        group: &GroupId,
        text: &str,
        reply_to: Option<u64>,
    ) -> Result<SentGroupMessage> {
        self.send_group_message(group, text, &[], reply_to)
    }

    /// Sends a text with formatting entities to the group: the plaintext is an `e2e.Content`
    /// exactly as for private messages.
    pub fn send_group_message(
        &self,
        group: &GroupId,
        text: &str,
        entities: &[Entity],
        reply_to: Option<u64>,
    ) -> Result<SentGroupMessage> {
        let mut t = Text::new();
        t.text = text.to_string();
        t.entities = entities.iter().map(Entity::to_wire).collect();
        let mut content = Content::new();
        content.set_text(t);
        content.reply_to_message_id = reply_to.unwrap_or(0);
        self.send_group_content(group, &content)
    }

    /// Encrypts `content` in the group's current epoch and sends it; a stale epoch is caught up
    /// with and the content encrypted again, pending removals are committed first.
    pub fn send_group_content(
        &self,
        group: &GroupId,
        content: &Content,
    ) -> Result<SentGroupMessage> {
        // One id for every attempt: only an OK answer is remembered by the platform, so a
        // repeat after a lost answer returns the first message instead of sending a second.
        self.send_group_content_as(group, content, &new_client_message_id())
    }

    /// `send_group_content` under a given client message id (a queued message's).
    pub(super) fn send_group_content_as(
        &self,
        group: &GroupId,
        content: &Content,
        client_message_id: &str,
    ) -> Result<SentGroupMessage> {
        self.ensure_joined(group)?;
        let mut content = content.clone();
        if !matches!(content.body, Some(crate::wire::e2e::content::Body::ChatAction(_))) {
            let reservation = crate::wire::platform::MessageIdReservation {
                client_message_id: client_message_id.to_string(),
                group_id: group.0.to_vec(),
                ..Default::default()
            };
            let (message_id, date) = self.reserve_message_id(reservation, &format!("group {}", short(group)))?;
            crate::e2e::vouch::vouch(&mut content, message_id, date);
        }
        for attempt in 1..=MAX_GROUP_ATTEMPTS {
            self.settle_commit(group)?;
            let (message, _) = self.write(|c| {
                // Numbered in the first attempt's transaction, kept by the others (`e2e::sequence`).
                let conversation = crate::e2e::sequence::Conversation::Group(&group.0);
                crate::e2e::sequence::number(c, conversation, &mut content)
                    .and_then(|()| mls_group::encrypt_content(c, &group.0, &content))
                    .context(|| format!("encrypting for group {}", short(group)))
            })?;
            let resp =
                self.send_to_group(group, client_message_id, message, Vec::new(), Vec::new(), crate::e2e::file::refs_in(&content))?;
            match resp.status.enum_value() {
                Ok(Status::OK) => {
                    let sent = SentMessage { chat_id: 0, message_id: resp.message_id, date: resp.date };
                    self.remember_sent(history::group_peer(&group.0), &content, &sent);
                    return Ok(SentGroupMessage {
                        group: *group,
                        message_id: resp.message_id,
                        date: resp.date,
                        group_seq: resp.group_seq,
                    });
                }
                Ok(Status::STALE_EPOCH) => {
                    log::info!(
                        "group {}: epoch moved to {} (attempt {attempt}); catching up",
                        short(group),
                        resp.epoch
                    );
                    self.catch_up(group, resp.epoch)?;
                }
                Ok(Status::REMOVALS_PENDING) => {
                    let devices: Vec<mls_group::Device> =
                        resp.pending_device_removals.iter().map(|d| (d.user_id, d.device_id)).collect();
                    log::info!(
                        "group {}: removing the leaves of users {:?} and devices {devices:?} first (attempt {attempt})",
                        short(group),
                        resp.pending_removals
                    );
                    self.commit_own(group, "removing members", |c| {
                        mls_group::remove_leaves(c, &group.0, &resp.pending_removals, &devices)
                    })?;
                }
                Ok(Status::REJECTED) | Err(_) => return Err(refused(group, &resp)),
            }
        }
        Err(ClientError::Invalid(format!(
            "sending to group {}: the group kept changing after {MAX_GROUP_ATTEMPTS} attempts",
            short(group)
        )))
    }

    /// Commits the removal of every leaf of `users`; false when none had one (any more).
    pub fn commit_removals(&self, group: &GroupId, users: &[u64]) -> Result<bool> {
        self.commit_own(group, "removing members", |c| {
            mls_group::remove_users(c, &group.0, users)
        })
    }

    /// The group as the platform shows it, with every member's role.
    pub fn group_members(&self, group: &GroupId) -> Result<GroupDetails> {
        let mut req = GroupRequest::new();
        req.group_id = group.0.to_vec();
        let g = self
            .platform
            .client
            .get_group(&req, self.platform.opt())
            .map_err(rpc("GetGroup"))?;
        details(&g)
    }

    /// The groups the platform lists for this user (any role but LEFT and BANNED).
    pub fn list_groups(&self) -> Result<Vec<GroupDetails>> {
        let resp = self
            .platform
            .client
            .list_groups(&ListGroupsRequest::new(), self.platform.opt())
            .map_err(rpc("ListGroups"))?;
        resp.groups.iter().map(details).collect()
    }

    /// The groups this device remembers, by title.
    pub fn known_groups(&self) -> Result<Vec<KnownGroup>> {
        known_groups(&self.conn)
    }

    /// The MLS epoch of the group on this device; `None` when the device is not in it.
    pub fn group_epoch(&self, group: &GroupId) -> Result<Option<u64>> {
        mls_group::epoch(&self.conn, &group.0).context(|| format!("group {}", short(group)))
    }

    /// The devices with a leaf in the group, as this device sees its tree.
    pub fn group_devices(&self, group: &GroupId) -> Result<Vec<(u64, u32)>> {
        mls_group::members(&self.conn, &group.0).context(|| format!("group {}", short(group)))
    }

    /// The group `spec` names: its 64 hex digits, a prefix of at least 8 hex digits of one
    /// group, or the exact title of one — among the groups this device knows, then those the
    /// platform lists.
    pub fn find_group(&self, spec: &str) -> Result<GroupId> {
        if let Some(id) = crypto::hex_decode_32(spec) {
            return Ok(GroupId(id));
        }
        let local: Vec<(GroupId, String)> = self
            .known_groups()?
            .into_iter()
            .map(|g| (g.id, g.title))
            .collect();
        if let Some(found) = pick_group(&local, spec)? {
            return Ok(found);
        }
        let listed: Vec<(GroupId, String)> = self
            .list_groups()?
            .into_iter()
            .map(|g| (g.id, g.title))
            .collect();
        pick_group(&listed, spec)?.ok_or_else(|| {
            ClientError::Invalid(format!(
                "no group {:?} is known: give its id (64 hex digits, or a unique prefix of 8 or more) or its exact title",
                spec
            ))
        })
    }

    /// Before sending: a group the platform admitted us to but whose Welcome this device has
    /// not processed yet is joined from the inbox first.
    fn ensure_joined(&self, group: &GroupId) -> Result<()> {
        if self.group_epoch(group)?.is_some() {
            self.self_update_if_due(group, false);
            return Ok(());
        }
        self.catch_up(group, 0).map_err(|_| {
            ClientError::Invalid(format!(
                "this device is not in group {} (no Welcome for it arrived; were you added?)",
                short(group)
            ))
        })
    }

    /// Sends a commit `derive` makes, merging it when the platform accepts it; on a stale
    /// epoch discards it, catches up and derives again. `derive` returning `None` means there
    /// is nothing (left) to commit: false. A lost answer keeps the commit, sent again before
    /// anything else happens in the group (`group_commit`).
    pub(super) fn commit_own(
        &self,
        group: &GroupId,
        what: &str,
        derive: impl Fn(&Connection) -> std::result::Result<Option<CommitOut>, E2eError>,
    ) -> Result<bool> {
        for attempt in 1..=MAX_GROUP_ATTEMPTS {
            self.settle_commit(group)?;
            let Some(commit) = self.make_commit(group, what, &derive)? else {
                return Ok(false);
            };
            let resp = self.send_recorded(group, &commit)?;
            match resp.status.enum_value() {
                Ok(Status::OK) => return Ok(true),
                Ok(Status::STALE_EPOCH) => {
                    log::info!("group {}: our commit was stale (attempt {attempt}); catching up to epoch {}", short(group), resp.epoch);
                    self.catch_up(group, resp.epoch)?;
                }
                _ => return Err(refused(group, &resp)),
            }
        }
        Err(ClientError::Invalid(format!(
            "{what} in group {}: the group kept changing after {MAX_GROUP_ATTEMPTS} attempts",
            short(group)
        )))
    }

    /// Processes the inbox until this device is in the group at `epoch` or later (or
    /// `CATCH_UP_WAIT` passed: an error). What arrives meanwhile is kept for the next
    /// `receive_*` call.
    pub(super) fn catch_up(&self, group: &GroupId, epoch: u64) -> Result<()> {
        let reached =
            |p: &Profile| -> Result<bool> { Ok(p.group_epoch(group)?.is_some_and(|e| e >= epoch)) };
        if reached(self)? {
            return Ok(());
        }
        let mut arrived = Vec::new();
        let closed =
            self.receive_until_done(Instant::now() + CATCH_UP_WAIT, &reached, &mut |e| {
                arrived.push(e.clone())
            })?;
        self.pending.borrow_mut().extend(arrived);
        if reached(self)? {
            return Ok(());
        }
        let now = self.group_epoch(group)?;
        let why = closed
            .map(|why| format!(" (the inbox stream closed: {why})"))
            .unwrap_or_default();
        Err(ClientError::Invalid(match now {
            Some(now) => format!(
                "group {} is at epoch {epoch} on the platform but still at {now} here after {} s{why}",
                short(group),
                CATCH_UP_WAIT.as_secs()
            ),
            None => format!("this device is not (or no longer) in group {}{why}", short(group)),
        }))
    }
}

fn refused(group: &GroupId, resp: &SendGroupMessageResponse) -> ClientError {
    let reason = if resp.error.is_empty() {
        format!("{:?}", resp.status)
    } else {
        resp.error.clone()
    };
    ClientError::Rejected {
        to: format!("group {}", short(group)),
        reason,
    }
}

fn details(g: &Group) -> Result<GroupDetails> {
    let id = GroupId::from_slice(&g.group_id).ok_or_else(|| {
        ClientError::Invalid(format!(
            "the platform named a group by {} bytes, not 32",
            g.group_id.len()
        ))
    })?;
    Ok(GroupDetails {
        id,
        title: g.title.clone(),
        kind: g.type_.enum_value_or_default(),
        epoch: g.epoch,
        members: g
            .members
            .iter()
            .map(|m| GroupMemberInfo {
                user: sender_of(m.user.get_or_default()),
                role: m.role.enum_value_or_default(),
            })
            .collect(),
    })
}

/// The one group of `groups` that `spec` names by id prefix (8+ hex digits) or exact title;
/// `None` when none does; an error when several do.
fn pick_group(groups: &[(GroupId, String)], spec: &str) -> Result<Option<GroupId>> {
    let lower = spec.to_ascii_lowercase();
    let is_prefix =
        spec.len() >= 8 && spec.len() <= 64 && spec.bytes().all(|b| b.is_ascii_hexdigit());
    let mut found: Vec<&(GroupId, String)> = if is_prefix {
        groups
            .iter()
            .filter(|(id, _)| id.hex().starts_with(&lower))
            .collect()
    } else {
        Vec::new()
    };
    if found.is_empty() {
        found = groups.iter().filter(|(_, title)| title == spec).collect();
    }
    found.dedup_by_key(|(id, _)| *id);
    match found[..] {
        [] => Ok(None),
        [(id, _)] => Ok(Some(*id)),
        _ => Err(ClientError::Invalid(format!(
            "{spec:?} names {} groups ({}): give more of the id",
            found.len(),
            found
                .iter()
                .map(|(id, _)| mls_group::short_id(&id.0))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid(first: u8) -> GroupId {
        let mut id = [0u8; 32];
        id[0] = first;
        id[31] = 7;
        GroupId(id)
    }

    #[test]
    fn a_group_is_named_by_id_prefix_or_exact_title() {
        let groups = vec![
            (gid(0xab), "Team".to_string()),
            (gid(0xac), "Family".to_string()),
            (gid(0xad), "Team".to_string()),
        ];
        assert_eq!(
            pick_group(&groups, "ab000000").expect("ok"),
            Some(gid(0xab))
        );
        assert_eq!(
            pick_group(&groups, "AC000000").expect("ok"),
            Some(gid(0xac)),
            "hex in either case"
        );
        assert_eq!(pick_group(&groups, "Family").expect("ok"), Some(gid(0xac)));
        assert_eq!(
            pick_group(&groups, "family").expect("ok"),
            None,
            "a title is exact"
        );
        assert_eq!(
            pick_group(&groups, "ab00").expect("ok"),
            None,
            "fewer than 8 hex digits is no prefix"
        );
        let err = pick_group(&groups, "Team").expect_err("two groups");
        assert!(
            err.to_string().contains("2 groups") && err.to_string().contains("ab00000000000000"),
            "{err}"
        );
        let err = pick_group(&groups, "a").expect("ok");
        assert_eq!(err, None);
        assert_eq!(pick_group(&[], "Team").expect("ok"), None);
    }
}
