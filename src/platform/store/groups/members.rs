//! Membership: creating a group, reading it as a member, its GroupInfo, adding, removing
//! (a ban), the title, and leaving. Each change is a role change in the group's order.

use super::commit::{check_leaf, join_device};
use super::*;

impl Store {
    /// Creates a group whose only leaf is `caller`'s device (checked against its GroupInfo
    /// through openmls); the caller becomes OWNER.
    pub fn create_group(&self, caller: DeviceAddr, g: NewGroup, now: i64) -> Result<pb::Group> {
        self.write_tx("creating a group", |tx| {
            if group_row(tx, &g.group_id)?.is_some() {
                return Err(PlatformError::AlreadyExists(format!("group {} exists already", short_id(&g.group_id))));
            }
            let info = &g.parsed_info;
            if info.group_id().as_slice() != g.group_id.as_slice() {
                return Err(PlatformError::InvalidArgument("group_info is for another group id".into()));
            }
            if info.epoch().as_u64() != 0 {
                return Err(PlatformError::InvalidArgument(format!(
                    "group_info is of epoch {}; a new group starts at epoch 0",
                    info.epoch().as_u64()
                )));
            }
            if info.ciphersuite() != mls::CIPHERSUITE {
                return Err(PlatformError::InvalidArgument(format!(
                    "the group's ciphersuite is {:?}; the platform serves {:?}",
                    info.ciphersuite(),
                    mls::CIPHERSUITE
                )));
            }
            let tree = info
                .extensions()
                .ratchet_tree()
                .map(|e| e.ratchet_tree().clone())
                .ok_or_else(|| PlatformError::InvalidArgument("group_info carries no ratchet tree".into()))?;
            let provider = MlsProvider::new(&**tx);
            let (public, _) = PublicGroup::from_external(
                provider.crypto(),
                provider.storage(),
                tree,
                g.parsed_info,
                ProposalStore::new(),
            )
            .map_err(|e| PlatformError::InvalidArgument(format!("group_info does not verify: {e}")))?;
            let leaves: Vec<Member> = public.members().collect();
            let [leaf] = leaves.as_slice() else {
                return Err(PlatformError::InvalidArgument(format!(
                    "a new group has exactly one leaf, the creator's device; this one has {}",
                    leaves.len()
                )));
            };
            let leaf_dev =
                check_leaf(tx, &leaf.credential, &leaf.signature_key)?.map_err(|why| PlatformError::InvalidArgument(why.0))?;
            if leaf_dev != caller {
                return Err(PlatformError::InvalidArgument(format!(
                    "the group's leaf is device {} of user {}, not the caller's device",
                    leaf_dev.device_id, leaf_dev.user_id
                )));
            }
            tx.prepare_cached(
                "INSERT INTO groups (group_id, title, type, epoch, creator_id, created_at) VALUES (?1, ?2, ?3, 0, ?4, ?5)",
            )
            .and_then(|mut s| s.execute(params![g.group_id, g.title, g.group_type.value(), caller.user_id, now]))
            .map_err(db_error("creating a group"))?;
            tx.prepare_cached("INSERT INTO group_infos (group_id, group_info) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![g.group_id, g.group_info]))
                .map_err(db_error("creating a group"))?;
            set_member(tx, &g.group_id, caller.user_id, &MemberRow::new(Role::OWNER, now))?;
            join_device(tx, &g.group_id, caller, now)?;
            group_pb(tx, &g.group_id)
        })
    }

    /// A group as a member sees it (NotFound for anyone else).
    pub fn get_group(&self, user_id: u64, group_id: &[u8]) -> Result<pb::Group> {
        self.get_group_with(user_id, group_id, None)
    }

    /// [`Store::get_group`] listing only the members among `only` (GroupRequest.only_members).
    pub fn get_group_with(&self, user_id: u64, group_id: &[u8], only: Option<&[u64]>) -> Result<pb::Group> {
        self.write_tx("reading a group", |tx| {
            group_for(tx, group_id, user_id, seated)?;
            group_pb_of(tx, group_id, only)
        })
    }

    /// The groups where `user_id` has any role but LEFT and BANNED.
    pub fn list_groups(&self, user_id: u64) -> Result<Vec<pb::Group>> {
        self.write_tx("listing groups", |tx| {
            let ids: Vec<Vec<u8>> = tx
                .prepare_cached(
                    "SELECT group_id FROM group_members WHERE user_id = ?1 AND role NOT IN (?2, ?3) ORDER BY since",
                )
                .and_then(|mut s| {
                    s.query_map(params![user_id, Role::LEFT.value(), Role::BANNED.value()], |r| r.get(0))?.collect()
                })
                .map_err(db_error("listing groups"))?;
            ids.iter().map(|id| group_pb(tx, id)).collect()
        })
    }

    /// The current GroupInfo and epoch, for members and INVITED users.
    pub fn group_info(&self, user_id: u64, group_id: &[u8]) -> Result<(Vec<u8>, u64)> {
        self.write_tx("reading a GroupInfo", |tx| {
            let (group, _) = group_for(tx, group_id, user_id, |r| seated(r) || r == Role::INVITED)?;
            let info = tx
                .prepare_cached("SELECT group_info FROM group_infos WHERE group_id = ?1")
                .and_then(|mut s| s.query_row(params![group_id], |r| r.get(0)))
                .map_err(db_error("reading a GroupInfo"))?;
            Ok((info, group.epoch))
        })
    }

    /// Admits `target` (INVITED). Returns the group and the devices told.
    pub fn add_group_member(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        target: u64,
        now: i64,
    ) -> Result<Told> {
        self.write_tx("adding a group member", |tx| {
            let (group, me) = group_for(tx, group_id, caller.user_id, seated)?;
            let allowed = match group.group_type {
                pb::GroupType::GROUP => me.effective(now) != Role::RESTRICTED,
                pb::GroupType::CHANNEL => admin_with(&me, CAN_INVITE),
            };
            if !allowed {
                return Err(PlatformError::PermissionDenied(match group.group_type {
                    pb::GroupType::GROUP => "a restricted member may not add members".into(),
                    pb::GroupType::CHANNEL => {
                        "adding to a channel needs the owner or an administrator with can_invite_users".into()
                    }
                }));
            }
            let username = may_be_in(tx, target, group.group_type)?;
            let mut delivered = BTreeSet::new();
            match member(tx, group_id, target)?.map(|m| m.effective(now)) {
                Some(role) if seated(role) => {
                    return Err(PlatformError::AlreadyExists(format!("@{username} is already a member of this group")))
                }
                // A repeated invitation changes nothing.
                Some(Role::INVITED) => return Ok((told_about(tx, group_id, caller.user_id, Some(target))?, delivered)),
                Some(Role::BANNED) if !matches!(me.role, Role::OWNER | Role::ADMINISTRATOR) => {
                    return Err(PlatformError::PermissionDenied(format!(
                        "@{username} was removed from this group; only an administrator may add them again"
                    )))
                }
                _ => {}
            }
            let invited = MemberRow::new(Role::INVITED, now);
            change_role(tx, group_id, group.epoch, caller, target, invited, now, &mut delivered)?;
            Ok((told_about(tx, group_id, caller.user_id, Some(target))?, delivered))
        })
    }

    /// Removes `target` (BANNED); their leaves must follow by commit.
    pub fn remove_group_member(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        target: u64,
        until: i64,
        now: i64,
    ) -> Result<Told> {
        self.admin_action("removing a member", caller, group_id, (CAN_RESTRICT, "can_restrict_members"), Some(target), |tx, group, _, delivered| {
            if target == caller.user_id {
                return Err(PlatformError::InvalidArgument("to leave a group yourself, use LeaveGroup".into()));
            }
            let who = profile(tx, target)?.username;
            match member(tx, group_id, target)?.map(|m| m.role) {
                Some(Role::OWNER) => {
                    return Err(PlatformError::PermissionDenied(format!(
                        "@{who} owns this group and cannot be removed"
                    )))
                }
                Some(role) if seated(role) || role == Role::INVITED => {}
                _ => return Err(PlatformError::NotFound(format!("@{who} is not a member of this group"))),
            }
            let banned = MemberRow { until, ..MemberRow::new(Role::BANNED, now) };
            change_role(tx, group_id, group.epoch, caller, target, banned, now, delivered)
        })
    }

    /// Changes the title (checked by the caller): the owner or an administrator with
    /// can_change_info. Every joined device gets a TITLE delivery with a new message id.
    pub fn set_group_title(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        title: &str,
        now: i64,
    ) -> Result<Told> {
        self.admin_action("changing the title", caller, group_id, (CAN_CHANGE_INFO, "can_change_info"), None, |tx, group, _, delivered| {
            tx.execute("UPDATE groups SET title = ?2 WHERE group_id = ?1", params![group_id, title])
                .map_err(db_error("changing a group's title"))?;
            let change = pb::MembershipChange {
                actor: Some(profile(tx, caller.user_id)?).into(),
                title: title.to_string(),
                ..Default::default()
            }
            .write_to_bytes()
            .map_err(|e| PlatformError::Internal(format!("encoding a title change: {e}")))?;
            let message_id = next_group_message_id(tx, group_id)?;
            admin::record_message(tx, group_id, message_id, caller.user_id, now)?;
            let d = Delivery {
                group_id,
                kind: DeliveryKind::TITLE,
                epoch: group.epoch,
                sender: caller,
                message_id,
                date: now,
                client_message_id: "",
                ciphertext: &[],
                change: Some(&change),
            };
            deliver(tx, &d, joined_devices(tx, group_id)?, delivered)?;
            Ok(())
        })
    }

    /// The caller leaves (LEFT); an owner only when nobody else is in the group.
    pub fn leave_group(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        now: i64,
    ) -> Result<Told> {
        self.write_tx("leaving a group", |tx| {
            let (group, me) = group_for(tx, group_id, caller.user_id, |r| seated(r) || r == Role::INVITED)?;
            if me.role == Role::OWNER {
                let others: u64 = tx
                    .prepare_cached(
                        "SELECT COUNT(*) FROM group_members WHERE group_id = ?1 AND user_id != ?2 AND role NOT IN (?3, ?4)",
                    )
                    .and_then(|mut s| {
                        s.query_row(params![group_id, caller.user_id, Role::LEFT.value(), Role::BANNED.value()], |r| r.get(0))
                    })
                    .map_err(db_error("counting group members"))?;
                if others > 0 {
                    return Err(PlatformError::FailedPrecondition(format!(
                        "the owner cannot leave while {others} other members or invitees remain"
                    )));
                }
            }
            let mut delivered = BTreeSet::new();
            let left = MemberRow::new(Role::LEFT, now);
            change_role(tx, group_id, group.epoch, caller, caller.user_id, left, now, &mut delivered)?;
            Ok((told_about(tx, group_id, caller.user_id, None)?, delivered))
        })
    }
}
