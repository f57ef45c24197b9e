//! Group administration on the platform: promotions, restrictions, bans lifted, deletions,
//! invite links and join requests (proto/platform.proto, "Groups" and "Invite links and join
//! requests"; docs/groups.md, "Administration"). Every action is checked against the caller's
//! role in one write transaction, so a refused action changes nothing; every role change is a
//! MEMBERSHIP delivery in the group's order (`change_role`).

use std::collections::BTreeSet;

use protobuf::{Enum as _, Message as _};
use rusqlite::{params, Connection, OptionalExtension};

use super::{
    admin_with, change_role, change_role_by_link, deliver, group_for, told_about, invalid, may_be_in, member,
    not_found, profile, require_right, seated, Delivery, DeliveryKind, MemberRow, Role, Told, CAN_DELETE, CAN_INVITE,
    CAN_PROMOTE, CAN_RESTRICT,
};
use crate::platform::error::{db_error, PlatformError, Result};
use crate::platform::store::{DeviceAddr, Store};
use crate::wire::platform::{self as pb, join_by_link_response::Status as JoinStatus, join_request::Outcome};

/// Step 7 of `platform.db`: restrictions and bans with an end, how an INVITED user came in,
/// invite links, join requests, and who sent which group message (for deletions).
pub(in crate::platform::store) const SCHEMA_ADMIN: &str = "
ALTER TABLE group_members ADD COLUMN until_date INTEGER NOT NULL DEFAULT 0;
ALTER TABLE group_members ADD COLUMN via_link TEXT;                      -- INVITED by this link
ALTER TABLE group_members ADD COLUMN via_request INTEGER NOT NULL DEFAULT 0;
CREATE TABLE invite_links (
    link                  TEXT PRIMARY KEY,      -- e2e://join/<token>
    group_id              BLOB NOT NULL,
    creator_id            INTEGER NOT NULL,
    name                  TEXT NOT NULL DEFAULT '',
    expire_date           INTEGER NOT NULL DEFAULT 0,
    member_limit          INTEGER NOT NULL DEFAULT 0,
    creates_join_request  INTEGER NOT NULL DEFAULT 0,
    is_primary            INTEGER NOT NULL DEFAULT 0,
    is_revoked            INTEGER NOT NULL DEFAULT 0,
    joined                INTEGER NOT NULL DEFAULT 0,  -- users admitted by it
    created_at            INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX invite_links_by_group ON invite_links (group_id);
CREATE TABLE join_requests (
    group_id  BLOB NOT NULL,
    user_id   INTEGER NOT NULL,
    link      TEXT NOT NULL,
    date      INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id)
) WITHOUT ROWID;
CREATE TABLE group_messages (
    group_id    BLOB NOT NULL,
    message_id  INTEGER NOT NULL,
    sender_id   INTEGER NOT NULL,
    date        INTEGER NOT NULL,
    PRIMARY KEY (group_id, message_id)
) WITHOUT ROWID;
";

/// Step 8 of `platform.db`: who made an INVITED user so (the adder, the approving
/// administrator, the user themself by link), for the change of their join. NULL on rows of
/// earlier versions: such a join names the joiner.
pub(in crate::platform::store) const SCHEMA_INVITED_BY: &str = "
ALTER TABLE group_members ADD COLUMN invited_by INTEGER;
";

/// What an invite link looks like before its token.
pub const LINK_PREFIX: &str = "e2e://join/";
/// Longest link name (as the Bot API's `name`).
const LINK_NAME_MAX: usize = 32;
/// Largest `member_limit` (as the Bot API's).
const MEMBER_LIMIT_MAX: u32 = 99_999;

/// Remembers who sent a group message id (an application message or a service message).
pub(super) fn record_message(tx: &Connection, group_id: &[u8], message_id: u64, sender: u64, now: i64) -> Result<()> {
    tx.prepare_cached("INSERT OR IGNORE INTO group_messages (group_id, message_id, sender_id, date) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![group_id, message_id, sender, now]))
        .map_err(db_error("recording a group message"))?;
    Ok(())
}

/// The link (and whether by an approved request) an INVITED user came by, if any.
pub(super) fn joined_by(tx: &Connection, group_id: &[u8], user_id: u64) -> Result<Option<(pb::InviteLink, bool)>> {
    let via: Option<(Option<String>, bool)> = tx
        .prepare_cached("SELECT via_link, via_request FROM group_members WHERE group_id = ?1 AND user_id = ?2")
        .and_then(|mut s| s.query_row(params![group_id, user_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db_error("reading how a user was invited"))?;
    match via {
        Some((Some(link), request)) => Ok(link_pb(tx, &link)?.map(|l| (l, request))),
        _ => Ok(None),
    }
}

/// Who made an INVITED user so, if recorded.
pub(super) fn invited_by(tx: &Connection, group_id: &[u8], user_id: u64) -> Result<Option<u64>> {
    tx.prepare_cached("SELECT invited_by FROM group_members WHERE group_id = ?1 AND user_id = ?2")
        .and_then(|mut s| s.query_row(params![group_id, user_id], |r| r.get::<_, Option<u64>>(0)).optional())
        .map(Option::flatten)
        .map_err(db_error("reading who invited a user"))
}

pub(super) fn set_invited_by(tx: &Connection, group_id: &[u8], user_id: u64, by: u64) -> Result<()> {
    tx.prepare_cached("UPDATE group_members SET invited_by = ?3 WHERE group_id = ?1 AND user_id = ?2")
        .and_then(|mut s| s.execute(params![group_id, user_id, by]))
        .map_err(db_error("recording who invited a user"))?;
    Ok(())
}

fn set_joined_by(tx: &Connection, group_id: &[u8], user_id: u64, link: &str, request: bool) -> Result<()> {
    tx.execute(
        "UPDATE group_members SET via_link = ?3, via_request = ?4 WHERE group_id = ?1 AND user_id = ?2",
        params![group_id, user_id, link, request],
    )
    .map_err(db_error("recording how a user was invited"))?;
    Ok(())
}

/// The target of an administrative action: seated (at `now`), not the caller, not the owner.
fn seated_target(tx: &Connection, group_id: &[u8], caller: u64, target: u64, now: i64) -> Result<MemberRow> {
    if target == caller {
        return Err(invalid("this action is for other members, not for yourself"));
    }
    let who = profile(tx, target)?.username;
    match member(tx, group_id, target)? {
        Some(m) if m.role == Role::OWNER => Err(PlatformError::PermissionDenied(format!("@{who} owns this group"))),
        Some(m) if seated(m.effective(now)) => Ok(m),
        _ => Err(PlatformError::NotFound(format!("@{who} is not a member of this group"))),
    }
}

// ── Invite links ──

/// One `invite_links` row.
struct LinkRow {
    link: String,
    group_id: Vec<u8>,
    creator_id: u64,
    name: String,
    expire_date: i64,
    member_limit: u32,
    creates_join_request: bool,
    is_primary: bool,
    is_revoked: bool,
    joined: u32,
}

fn link_row(tx: &Connection, link: &str) -> Result<Option<LinkRow>> {
    tx.prepare_cached(
        "SELECT link, group_id, creator_id, name, expire_date, member_limit, creates_join_request, is_primary,
                is_revoked, joined FROM invite_links WHERE link = ?1",
    )
    .and_then(|mut s| {
        s.query_row(params![link], |r| {
            Ok(LinkRow {
                link: r.get(0)?,
                group_id: r.get(1)?,
                creator_id: r.get(2)?,
                name: r.get(3)?,
                expire_date: r.get(4)?,
                member_limit: r.get(5)?,
                creates_join_request: r.get(6)?,
                is_primary: r.get(7)?,
                is_revoked: r.get(8)?,
                joined: r.get(9)?,
            })
        })
        .optional()
    })
    .map_err(db_error("reading an invite link"))
}

fn link_pb(tx: &Connection, link: &str) -> Result<Option<pb::InviteLink>> {
    let Some(l) = link_row(tx, link)? else { return Ok(None) };
    let pending: u32 = tx
        .prepare_cached("SELECT COUNT(*) FROM join_requests WHERE link = ?1")
        .and_then(|mut s| s.query_row(params![link], |r| r.get(0)))
        .map_err(db_error("counting join requests"))?;
    Ok(Some(pb::InviteLink {
        link: l.link,
        creator: Some(profile(tx, l.creator_id)?).into(),
        creates_join_request: l.creates_join_request,
        is_primary: l.is_primary,
        is_revoked: l.is_revoked,
        name: l.name,
        expire_date: l.expire_date,
        member_limit: l.member_limit,
        pending_join_request_count: pending,
        group_id: l.group_id,
        ..Default::default()
    }))
}

/// A link's settings as created or edited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkSettings {
    pub name: String,
    pub expire_date: i64,
    pub member_limit: u32,
    pub creates_join_request: bool,
}

impl LinkSettings {
    fn check(&self, now: i64) -> Result<()> {
        if self.name.chars().count() > LINK_NAME_MAX {
            return Err(invalid(format!("the link name must be at most {LINK_NAME_MAX} characters")));
        }
        if self.expire_date != 0 && self.expire_date <= now {
            return Err(invalid(format!("expire_date {} is not in the future", self.expire_date)));
        }
        if self.member_limit > MEMBER_LIMIT_MAX {
            return Err(invalid(format!("member_limit must be 1-{MEMBER_LIMIT_MAX}, got {}", self.member_limit)));
        }
        if self.member_limit != 0 && self.creates_join_request {
            return Err(invalid("member_limit and creates_join_request exclude each other"));
        }
        Ok(())
    }
}

/// The caller may manage the group's links: the owner or an administrator with
/// can_invite_users.
fn link_admin(tx: &Connection, group_id: &[u8], caller: u64) -> Result<()> {
    let (_, me) = group_for(tx, group_id, caller, seated)?;
    require_right(&me, CAN_INVITE, "can_invite_users", "managing invite links")
}

fn new_link(tx: &Connection, group_id: &[u8], creator: u64, s: &LinkSettings, primary: bool, now: i64) -> Result<String> {
    let link = format!("{LINK_PREFIX}{}", crate::crypto::base64url_encode(&crate::crypto::random_bytes::<16>()));
    tx.prepare_cached(
        "INSERT INTO invite_links (link, group_id, creator_id, name, expire_date, member_limit, creates_join_request,
                                   is_primary, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )
    .and_then(|mut st| {
        st.execute(params![link, group_id, creator, s.name, s.expire_date, s.member_limit, s.creates_join_request, primary, now])
    })
    .map_err(db_error("creating an invite link"))?;
    Ok(link)
}

/// The link of this group named `link` (NOT_FOUND otherwise).
fn group_link(tx: &Connection, group_id: &[u8], link: &str) -> Result<LinkRow> {
    match link_row(tx, link)? {
        Some(l) if l.group_id == group_id => Ok(l),
        _ => Err(PlatformError::NotFound("no such invite link in this group".into())),
    }
}

/// Revokes the group's primary link, if it has one.
fn revoke_primary(tx: &Connection, group_id: &[u8]) -> Result<()> {
    tx.execute(
        "UPDATE invite_links SET is_revoked = 1, is_primary = 0 WHERE group_id = ?1 AND is_primary = 1",
        params![group_id],
    )
    .map_err(db_error("revoking the primary link"))?;
    Ok(())
}

fn answer_link(tx: &Connection, link: &str) -> Result<pb::InviteLink> {
    link_pb(tx, link)?.ok_or_else(|| PlatformError::Internal("an invite link vanished".into()))
}

impl Store {
    /// Sets `target`'s administrator rights (bits in AdminRights field order): any →
    /// ADMINISTRATOR, none → MEMBER.
    pub fn promote_group_member(&self, caller: DeviceAddr, group_id: &[u8], target: u64, rights: u32, now: i64) -> Result<Told> {
        self.admin_action("promoting a member", caller, group_id, (CAN_PROMOTE, "can_promote_members"), Some(target), |tx, group, me, delivered| {
            if me.role == Role::ADMINISTRATOR && rights & !me.rights != 0 {
                return Err(PlatformError::PermissionDenied("an administrator may grant only rights it holds itself".into()));
            }
            let old = seated_target(tx, group_id, caller.user_id, target, now)?;
            let new = match rights {
                0 => MemberRow::new(Role::MEMBER, now),
                r => MemberRow { rights: r, ..MemberRow::new(Role::ADMINISTRATOR, now) },
            };
            if (old.role, old.rights) != (new.role, new.rights) {
                change_role(tx, group_id, group.epoch, caller, target, new, now, delivered)?;
            }
            Ok(())
        })
    }

    /// Restricts `target` (RESTRICTED until `until`, 0 = forever), or lifts it.
    pub fn restrict_group_member(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        target: u64,
        can_send_messages: bool,
        until: i64,
        now: i64,
    ) -> Result<Told> {
        self.admin_action("restricting a member", caller, group_id, (CAN_RESTRICT, "can_restrict_members"), Some(target), |tx, group, _, delivered| {
            if group.group_type == pb::GroupType::CHANNEL {
                return Err(PlatformError::FailedPrecondition(
                    "a channel has no restrictions: its subscribers cannot post anyway".into(),
                ));
            }
            let old = seated_target(tx, group_id, caller.user_id, target, now)?;
            let new = match (can_send_messages, old.effective(now)) {
                (true, Role::RESTRICTED) => Some(MemberRow::new(Role::MEMBER, now)),
                (true, _) => None, // not restricted: nothing to lift
                (false, _) => Some(MemberRow { until, ..MemberRow::new(Role::RESTRICTED, now) }),
            };
            if let Some(new) = new {
                change_role(tx, group_id, group.epoch, caller, target, new, now, delivered)?;
            }
            Ok(())
        })
    }

    /// BANNED → LEFT; a member not banned is removed (LEFT) unless `only_if_banned`.
    pub fn unban_group_member(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        target: u64,
        only_if_banned: bool,
        now: i64,
    ) -> Result<Told> {
        self.admin_action("unbanning a member", caller, group_id, (CAN_RESTRICT, "can_restrict_members"), Some(target), |tx, group, _, delivered| {
            let role = member(tx, group_id, target)?.map(|m| m.effective(now));
            let removes = match role {
                Some(Role::BANNED) => true,
                Some(Role::INVITED) => !only_if_banned,
                Some(r) if seated(r) && !only_if_banned => {
                    seated_target(tx, group_id, caller.user_id, target, now)?;
                    true
                }
                _ => false,
            };
            if removes {
                change_role(tx, group_id, group.epoch, caller, target, MemberRow::new(Role::LEFT, now), now, delivered)?;
            }
            Ok(())
        })
    }

    /// Deletes one message of the group: its sender, or the owner / an administrator with
    /// can_delete_messages. Every joined device gets a DELETED delivery.
    pub fn delete_group_message(&self, caller: DeviceAddr, group_id: &[u8], message_id: u64, now: i64) -> Result<BTreeSet<DeviceAddr>> {
        self.write_tx("deleting a group message", |tx| {
            let (group, me) = group_for(tx, group_id, caller.user_id, seated)?;
            let sender: Option<u64> = tx
                .prepare_cached("SELECT sender_id FROM group_messages WHERE group_id = ?1 AND message_id = ?2")
                .and_then(|mut s| s.query_row(params![group_id, message_id], |r| r.get(0)).optional())
                .map_err(db_error("reading a group message"))?;
            let Some(sender) = sender else {
                return Err(PlatformError::NotFound(format!("message {message_id} not found in this group (deleted, or never sent)")));
            };
            if sender != caller.user_id {
                require_right(&me, CAN_DELETE, "can_delete_messages", "deleting another member's message")?;
            }
            tx.execute("DELETE FROM group_messages WHERE group_id = ?1 AND message_id = ?2", params![group_id, message_id])
                .map_err(db_error("deleting a group message"))?;
            let change = pb::MembershipChange { actor: Some(profile(tx, caller.user_id)?).into(), ..Default::default() }
                .write_to_bytes()
                .map_err(|e| PlatformError::Internal(format!("encoding a deletion: {e}")))?;
            let mut delivered = BTreeSet::new();
            let d = Delivery {
                group_id,
                kind: DeliveryKind::DELETED,
                epoch: group.epoch,
                sender: caller,
                message_id, // the message deleted (GroupDelivery.deleted_message_id)
                date: now,
                client_message_id: "",
                ciphertext: &[],
                change: Some(&change),
            };
            deliver(tx, &d, super::joined_devices(tx, group_id)?, &mut delivered)?;
            Ok(delivered)
        })
    }

    /// A new additional invite link.
    pub fn create_invite_link(&self, caller: DeviceAddr, group_id: &[u8], s: &LinkSettings, now: i64) -> Result<pb::InviteLink> {
        s.check(now)?;
        self.write_tx("creating an invite link", |tx| {
            link_admin(tx, group_id, caller.user_id)?;
            let link = new_link(tx, group_id, caller.user_id, s, false, now)?;
            answer_link(tx, &link)
        })
    }

    /// Replaces a link's settings (not of a revoked one).
    pub fn edit_invite_link(&self, caller: DeviceAddr, group_id: &[u8], link: &str, s: &LinkSettings, now: i64) -> Result<pb::InviteLink> {
        s.check(now)?;
        self.write_tx("editing an invite link", |tx| {
            link_admin(tx, group_id, caller.user_id)?;
            if group_link(tx, group_id, link)?.is_revoked {
                return Err(PlatformError::FailedPrecondition("the invite link was revoked; create a new one".into()));
            }
            tx.execute(
                "UPDATE invite_links SET name = ?2, expire_date = ?3, member_limit = ?4, creates_join_request = ?5 WHERE link = ?1",
                params![link, s.name, s.expire_date, s.member_limit, s.creates_join_request],
            )
            .map_err(db_error("editing an invite link"))?;
            answer_link(tx, link)
        })
    }

    /// Revokes a link; revoking the primary link makes a new primary one.
    pub fn revoke_invite_link(&self, caller: DeviceAddr, group_id: &[u8], link: &str, now: i64) -> Result<pb::InviteLink> {
        self.write_tx("revoking an invite link", |tx| {
            link_admin(tx, group_id, caller.user_id)?;
            let l = group_link(tx, group_id, link)?;
            tx.execute("UPDATE invite_links SET is_revoked = 1, is_primary = 0 WHERE link = ?1", params![link])
                .map_err(db_error("revoking an invite link"))?;
            if l.is_primary {
                new_link(tx, group_id, caller.user_id, &LinkSettings::default(), true, now)?;
            }
            let mut revoked = answer_link(tx, link)?;
            revoked.is_primary = l.is_primary; // as it was: the Bot API answers the link revoked
            Ok(revoked)
        })
    }

    /// A new primary link; the previous primary one is revoked.
    pub fn export_invite_link(&self, caller: DeviceAddr, group_id: &[u8], now: i64) -> Result<pb::InviteLink> {
        self.write_tx("exporting an invite link", |tx| {
            link_admin(tx, group_id, caller.user_id)?;
            revoke_primary(tx, group_id)?;
            let link = new_link(tx, group_id, caller.user_id, &LinkSettings::default(), true, now)?;
            answer_link(tx, &link)
        })
    }

    /// The caller follows a link: INVITED at once, or a pending join request. Returns the
    /// answer and the devices told.
    pub fn join_by_link(&self, caller: DeviceAddr, link: &str, now: i64) -> Result<(pb::JoinByLinkResponse, BTreeSet<DeviceAddr>)> {
        self.write_tx("joining by an invite link", |tx| {
            let l = link_row(tx, link)?.ok_or_else(|| PlatformError::NotFound("no such invite link".into()))?;
            let refuse = |why: &str| Err(PlatformError::FailedPrecondition(why.to_string()));
            if l.is_revoked {
                return refuse("the invite link was revoked");
            }
            if l.expire_date != 0 && now >= l.expire_date {
                return refuse("the invite link has expired");
            }
            if l.member_limit != 0 && l.joined >= l.member_limit {
                return refuse("the invite link reached its member limit");
            }
            let group = super::group_row(tx, &l.group_id)?.ok_or_else(|| not_found(&l.group_id))?;
            may_be_in(tx, caller.user_id, group.group_type)?;
            let mut delivered = BTreeSet::new();
            let mut answer = pb::JoinByLinkResponse {
                group_id: l.group_id.clone(),
                title: group.title.clone(),
                type_: group.group_type.into(),
                ..Default::default()
            };
            match member(tx, &l.group_id, caller.user_id)?.map(|m| m.effective(now)) {
                Some(Role::BANNED) => return refuse("you are banned from this group"),
                Some(r) if seated(r) => {
                    return Err(PlatformError::AlreadyExists("you are already a member of this group".into()))
                }
                Some(Role::INVITED) => return Ok((answer, delivered)), // join by commit now
                _ => {}
            }
            if l.creates_join_request {
                let asked = tx
                    .execute(
                        "INSERT OR IGNORE INTO join_requests (group_id, user_id, link, date) VALUES (?1, ?2, ?3, ?4)",
                        params![l.group_id, caller.user_id, l.link, now],
                    )
                    .map_err(db_error("recording a join request"))?;
                if asked == 1 {
                    tell_admins(tx, &l.group_id, group.epoch, caller, link, now, &mut delivered)?;
                }
                answer.status = JoinStatus::REQUESTED.into();
                return Ok((answer, delivered));
            }
            tx.execute("UPDATE invite_links SET joined = joined + 1 WHERE link = ?1", params![link])
                .map_err(db_error("counting a join"))?;
            let joined_by = link_pb(tx, link)?.map(|p| (p, false));
            change_role_by_link(
                tx,
                &l.group_id,
                group.epoch,
                caller,
                caller.user_id,
                MemberRow::new(Role::INVITED, now),
                now,
                joined_by,
                None,
                &mut delivered,
            )?;
            set_joined_by(tx, &l.group_id, caller.user_id, link, false)?;
            answer.status = JoinStatus::INVITED.into();
            Ok((answer, delivered))
        })
    }

    /// Approves (INVITED) or declines a pending join request.
    pub fn decide_join_request(&self, caller: DeviceAddr, group_id: &[u8], user_id: u64, approve: bool, now: i64) -> Result<Told> {
        self.write_tx("deciding a join request", |tx| {
            let (group, me) = group_for(tx, group_id, caller.user_id, seated)?;
            require_right(&me, CAN_INVITE, "can_invite_users", "deciding join requests")?;
            let request: Option<(String, i64)> = tx
                .prepare_cached("SELECT link, date FROM join_requests WHERE group_id = ?1 AND user_id = ?2")
                .and_then(|mut s| s.query_row(params![group_id, user_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
                .map_err(db_error("reading a join request"))?;
            let Some((link, date)) = request else {
                return Err(PlatformError::NotFound(format!("user {user_id} has no pending join request here")));
            };
            tx.execute("DELETE FROM join_requests WHERE group_id = ?1 AND user_id = ?2", params![group_id, user_id])
                .map_err(db_error("settling a join request"))?;
            let mut delivered = BTreeSet::new();
            if approve {
                let joined_by = link_pb(tx, &link)?.map(|p| (p, true));
                let invited = MemberRow::new(Role::INVITED, now);
                change_role_by_link(tx, group_id, group.epoch, caller, user_id, invited, now, joined_by, None, &mut delivered)?;
                set_joined_by(tx, group_id, user_id, &link, true)?;
            } else {
                let outcome = pb::JoinRequest {
                    user: Some(profile(tx, user_id)?).into(),
                    date,
                    invite_link: link_pb(tx, &link)?.into(),
                    outcome: Outcome::DECLINED.into(),
                    decided_by: Some(profile(tx, caller.user_id)?).into(),
                    ..Default::default()
                };
                let to = super::active_devices(tx, user_id)?;
                join_request_delivery(tx, group_id, group.epoch, caller, &outcome, now, to, &mut delivered)?;
            }
            Ok((told_about(tx, group_id, caller.user_id, Some(user_id))?, delivered))
        })
    }
}

/// A pending request, to every active device of the owner and of each administrator with
/// can_invite_users.
fn tell_admins(
    tx: &Connection,
    group_id: &[u8],
    epoch: u64,
    asker: DeviceAddr,
    link: &str,
    now: i64,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<()> {
    let admins: Vec<u64> = {
        let mut stmt = tx
            .prepare_cached("SELECT user_id, role, rights FROM group_members WHERE group_id = ?1 AND role IN (?2, ?3)")
            .map_err(db_error("reading administrators"))?;
        let rows = stmt
            .query_map(params![group_id, Role::OWNER.value(), Role::ADMINISTRATOR.value()], |r| {
                Ok((r.get::<_, u64>(0)?, MemberRow { role: Role::from_i32(r.get(1)?).unwrap_or_default(), rights: r.get(2)?, ..MemberRow::default() }))
            })
            .map_err(db_error("reading administrators"))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_error("reading administrators"))?
            .into_iter()
            .filter(|(_, m)| admin_with(m, CAN_INVITE))
            .map(|(user, _)| user)
            .collect()
    };
    let mut to = Vec::new();
    for user in admins {
        to.extend(super::active_devices(tx, user)?);
    }
    let request = pb::JoinRequest {
        user: Some(profile(tx, asker.user_id)?).into(),
        date: now,
        invite_link: link_pb(tx, link)?.into(),
        outcome: Outcome::PENDING.into(),
        ..Default::default()
    };
    join_request_delivery(tx, group_id, epoch, asker, &request, now, to, delivered)
}

#[allow(clippy::too_many_arguments)]
fn join_request_delivery(
    tx: &Connection,
    group_id: &[u8],
    epoch: u64,
    sender: DeviceAddr,
    request: &pb::JoinRequest,
    now: i64,
    to: Vec<DeviceAddr>,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<()> {
    let bytes = request.write_to_bytes().map_err(|e| PlatformError::Internal(format!("encoding a join request: {e}")))?;
    let d = Delivery {
        group_id,
        kind: DeliveryKind::JOIN_REQUEST,
        epoch,
        sender,
        message_id: 0,
        date: now,
        client_message_id: "",
        ciphertext: &[],
        change: Some(&bytes),
    };
    deliver(tx, &d, to, delivered)?;
    Ok(())
}
