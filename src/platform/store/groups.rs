//! Groups: the MLS delivery service's state (docs/groups.md, "The delivery service").
//!
//! Per group: the `groups` row (id, title, type, epoch, the current GroupInfo, the per-group
//! message id and order counters), the members and their roles (`group_members`), the devices
//! that have a leaf now (`group_devices`: a row is a joined leaf), and openmls' `PublicGroup`
//! (its own `openmls_*` tables, written through `crypto::mls::MlsProvider` on the writing
//! connection, so it commits or rolls back with the rest). Besides: key packages per device,
//! and the OK results of SendGroupMessage per (sender device, client message id).
//!
//! Every accepted message and every role change takes the group's next `group_seq` and is
//! appended to the device inboxes (`inbox::append_inbox`) in the same transaction. The
//! store's single writer (one connection behind a mutex, IMMEDIATE transactions) is the commit
//! lock: the epoch is read and advanced inside the transaction.
//!
//! Results that go on the wire unchanged (`Group`, `MembershipChange`) are built here as wire
//! messages; the service only decodes requests and maps outcomes.

use std::collections::{BTreeMap, BTreeSet};

use openmls::messages::group_info::VerifiableGroupInfo;
use openmls::prelude::*;
use protobuf::{Enum as _, Message as _};
use rusqlite::{params, Connection, OptionalExtension};

use super::inbox::{append_inbox, GroupColumns, InboxRow};
use super::{DeviceAddr, Store, CIPHERTEXT_MAX, CLIENT_MESSAGE_ID_MAX};
use crate::crypto::mls::{self, MlsProvider};
use crate::e2e::group::short_id;
use crate::platform::error::{db_error, PlatformError, Result};
use crate::wire::platform::{self as pb, group_delivery::Kind as DeliveryKind, GroupRole as Role};

/// Key packages kept per device (the newest); older ones are dropped on upload.
pub const KEY_PACKAGES_PER_DEVICE_MAX: usize = 100;

/// Step 6 of `platform.db`.
pub(super) const SCHEMA_GROUPS: &str = "
CREATE TABLE groups (
    group_id         BLOB PRIMARY KEY,            -- 32 bytes, chosen by the creator
    title            TEXT NOT NULL,
    type             INTEGER NOT NULL,            -- GroupType
    epoch            INTEGER NOT NULL,
    group_info       BLOB NOT NULL,               -- MLS GroupInfo of `epoch`, ratchet tree included
    creator_id       INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    last_message_id  INTEGER NOT NULL DEFAULT 0,  -- application messages, per group
    last_seq         INTEGER NOT NULL DEFAULT 0   -- the group's total order
) WITHOUT ROWID;
CREATE TABLE group_members (
    group_id  BLOB NOT NULL,
    user_id   INTEGER NOT NULL,
    role      INTEGER NOT NULL,                   -- GroupRole
    rights    INTEGER NOT NULL DEFAULT 0,         -- AdminRights as bits, in field order
    since     INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id)
) WITHOUT ROWID;
CREATE INDEX group_members_by_user ON group_members (user_id);
-- A row per device that has a leaf in the group now.
CREATE TABLE group_devices (
    group_id   BLOB NOT NULL,
    user_id    INTEGER NOT NULL,
    device_id  INTEGER NOT NULL,
    since      INTEGER NOT NULL,
    PRIMARY KEY (group_id, user_id, device_id)
) WITHOUT ROWID;
CREATE TABLE key_packages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id   INTEGER NOT NULL,
    device_id    INTEGER NOT NULL,
    key_package  BLOB NOT NULL,                   -- MLSMessage(KeyPackage)
    created_at   INTEGER NOT NULL
);
CREATE INDEX key_packages_by_device ON key_packages (account_id, device_id, id);
-- SendGroupMessage results that were OK, for repeats; pruned with sent_messages.
CREATE TABLE sent_group_messages (
    sender_id          INTEGER NOT NULL,
    sender_device      INTEGER NOT NULL,
    client_message_id  TEXT NOT NULL,
    group_id           BLOB NOT NULL,
    epoch              INTEGER NOT NULL,
    group_seq          INTEGER NOT NULL,
    message_id         INTEGER NOT NULL,
    date               INTEGER NOT NULL,
    PRIMARY KEY (sender_id, sender_device, client_message_id)
) WITHOUT ROWID;
CREATE INDEX sent_group_by_date ON sent_group_messages (date);
-- Group message ids taken before a message is encrypted (a keyboard's signed context names
-- its id); the SendGroupMessage under that client message id gets this id and date. Pruned
-- with sent_messages.
CREATE TABLE reserved_group_messages (
    sender_id          INTEGER NOT NULL,
    sender_device      INTEGER NOT NULL,
    client_message_id  TEXT NOT NULL,
    group_id           BLOB NOT NULL,
    message_id         INTEGER NOT NULL,
    date               INTEGER NOT NULL,
    PRIMARY KEY (sender_id, sender_device, client_message_id)
) WITHOUT ROWID;
CREATE INDEX reserved_group_by_date ON reserved_group_messages (date);
ALTER TABLE inbox ADD COLUMN group_id BLOB;
ALTER TABLE inbox ADD COLUMN group_kind INTEGER;
ALTER TABLE inbox ADD COLUMN group_seq INTEGER;
ALTER TABLE inbox ADD COLUMN group_epoch INTEGER;
ALTER TABLE inbox ADD COLUMN group_change BLOB;
";

// ── Types ──

/// A group to create, its GroupInfo decoded (`parse_group_info`).
pub struct NewGroup {
    pub group_id: Vec<u8>,
    pub title: String,
    pub group_type: pb::GroupType,
    pub group_info: Vec<u8>,
    pub parsed_info: VerifiableGroupInfo,
}

/// One SendGroupMessage, decoded and checked for shape by the service.
pub struct GroupMessage {
    pub group_id: Vec<u8>,
    pub client_message_id: String,
    /// The MLS message as sent (what members receive).
    pub bytes: Vec<u8>,
    pub message: ProtocolMessage,
    /// Commits: the new epoch's GroupInfo, as sent and decoded.
    pub group_info: Option<(Vec<u8>, VerifiableGroupInfo)>,
    /// Commits that add devices: the Welcome (checked to be one).
    pub welcome: Vec<u8>,
}

/// The answer to one SendGroupMessage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupSendOutcome {
    /// Accepted (now or before: a repeat answers the first result). `epoch` is the group's
    /// epoch after it (a commit's new epoch); `message_id` is 0 for commits.
    Ok {
        epoch: u64,
        group_seq: u64,
        message_id: u64,
        date: i64,
    },
    /// The message was made for another epoch than the group's (`epoch`).
    Stale {
        epoch: u64,
    },
    Rejected(String),
    /// These users left or were removed and their leaves are still in the tree.
    RemovalsPending(Vec<u64>),
}

/// Claimed key packages: (device id, key package) each, and the devices that had none.
pub type Claimed = (Vec<(u32, Vec<u8>)>, Vec<u32>);

/// The parts of a `groups` row the rules need.
#[derive(Debug, Clone)]
struct GroupRow {
    title: String,
    group_type: pb::GroupType,
    epoch: u64,
}

/// One user's role in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct MemberRow {
    role: Role,
    rights: u32,
    since: i64,
    /// RESTRICTED and BANNED: when it ends (0 = never).
    until: i64,
}

impl MemberRow {
    fn new(role: Role, now: i64) -> MemberRow {
        MemberRow { role, since: now, ..MemberRow::default() }
    }

    /// The role as it acts at `now`: an ended restriction is MEMBER, an ended ban LEFT.
    fn effective(&self, now: i64) -> Role {
        let ended = self.until != 0 && now >= self.until;
        match self.role {
            Role::RESTRICTED if ended => Role::MEMBER,
            Role::BANNED if ended => Role::LEFT,
            role => role,
        }
    }
}

fn rights_pb(bits: u32) -> pb::AdminRights {
    let f = |i: usize| bits & (1 << i) != 0;
    pb::AdminRights {
        can_change_info: f(0),
        can_delete_messages: f(1),
        can_invite_users: f(2),
        can_restrict_members: f(3),
        can_promote_members: f(4),
        can_post_messages: f(5),
        can_manage_chat: f(6),
        ..Default::default()
    }
}

/// Bit of `AdminRights.can_change_info`, `can_invite_users`, `can_restrict_members`,
/// `can_post_messages`.
const CAN_CHANGE_INFO: u32 = 1;
const CAN_DELETE: u32 = 1 << 1;
const CAN_INVITE: u32 = 1 << 2;
const CAN_RESTRICT: u32 = 1 << 3;
const CAN_PROMOTE: u32 = 1 << 4;
const CAN_POST: u32 = 1 << 5;

/// Holds a seat: may read, and (as the type allows) write.
fn seated(role: Role) -> bool {
    matches!(role, Role::OWNER | Role::ADMINISTRATOR | Role::MEMBER | Role::RESTRICTED)
}

fn admin_with(m: &MemberRow, right: u32) -> bool {
    m.role == Role::OWNER || (m.role == Role::ADMINISTRATOR && m.rights & right == right)
}

/// PermissionDenied saying which right `action` needs, unless `m` holds it.
fn require_right(m: &MemberRow, right: u32, right_name: &str, action: &str) -> Result<()> {
    if admin_with(m, right) {
        return Ok(());
    }
    Err(PlatformError::PermissionDenied(format!("{action} needs the owner or an administrator with {right_name}")))
}

fn not_found(group_id: &[u8]) -> PlatformError {
    PlatformError::NotFound(format!("group {} not found, or you are not in it", short_id(group_id)))
}

fn mls_storage_error<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> PlatformError {
    move |e| {
        log::error!("platform storage: {what}: {e:?}");
        PlatformError::Internal(format!("storage error while {what}"))
    }
}

fn invalid(msg: impl Into<String>) -> PlatformError {
    PlatformError::InvalidArgument(msg.into())
}

fn sized<'a>(bytes: &'a [u8], what: &str) -> Result<&'a [u8]> {
    if bytes.is_empty() || bytes.len() > CIPHERTEXT_MAX {
        return Err(invalid(format!("{what} must be 1 to {CIPHERTEXT_MAX} bytes, got {}", bytes.len())));
    }
    Ok(bytes)
}

/// Decodes an MLSMessage holding a GroupInfo (InvalidArgument otherwise).
pub fn parse_group_info(bytes: &[u8]) -> Result<VerifiableGroupInfo> {
    match mls::parse_message(sized(bytes, "group_info")?).map_err(invalid)?.extract() {
        MlsMessageBodyIn::GroupInfo(info) => Ok(info),
        _ => Err(invalid("group_info is an MLS message but not a GroupInfo")),
    }
}

impl GroupMessage {
    /// Decodes a SendGroupMessage: lengths, the message a Public/PrivateMessage of this
    /// group, group_info a GroupInfo and welcome a Welcome when present (InvalidArgument
    /// otherwise).
    pub fn decode(
        group_id: Vec<u8>,
        client_message_id: String,
        bytes: Vec<u8>,
        group_info: Vec<u8>,
        welcome: Vec<u8>,
    ) -> Result<GroupMessage> {
        let cmid_len = client_message_id.len();
        if cmid_len == 0 || cmid_len > CLIENT_MESSAGE_ID_MAX {
            return Err(invalid(format!(
                "client_message_id must be 1 to {CLIENT_MESSAGE_ID_MAX} bytes, got {cmid_len}"
            )));
        }
        let message = mls::parse_message(sized(&bytes, "message")?)
            .map_err(invalid)?
            .try_into_protocol_message()
            .map_err(|_| invalid("message must be an MLS PublicMessage or PrivateMessage"))?;
        if message.group_id().as_slice() != group_id.as_slice() {
            return Err(invalid(format!("message is for another group than {}", short_id(&group_id))));
        }
        let group_info = match group_info.is_empty() {
            true => None,
            false => {
                let parsed = parse_group_info(&group_info)?;
                Some((group_info, parsed))
            }
        };
        if !welcome.is_empty()
            && !matches!(
                mls::parse_message(sized(&welcome, "welcome")?).map_err(invalid)?.extract(),
                MlsMessageBodyIn::Welcome(_)
            )
        {
            return Err(invalid("welcome is an MLS message but not a Welcome"));
        }
        Ok(GroupMessage { group_id, client_message_id, bytes, message, group_info, welcome })
    }
}

// ── Reading rows ──

fn group_row(tx: &Connection, group_id: &[u8]) -> Result<Option<GroupRow>> {
    tx.prepare_cached("SELECT title, type, epoch FROM groups WHERE group_id = ?1")
        .and_then(|mut s| {
            s.query_row(params![group_id], |r| {
                Ok(GroupRow {
                    title: r.get(0)?,
                    group_type: pb::GroupType::from_i32(r.get(1)?).unwrap_or_default(),
                    epoch: r.get(2)?,
                })
            })
            .optional()
        })
        .map_err(db_error("reading a group"))
}

fn member(tx: &Connection, group_id: &[u8], user_id: u64) -> Result<Option<MemberRow>> {
    tx.prepare_cached("SELECT role, rights, since, until_date FROM group_members WHERE group_id = ?1 AND user_id = ?2")
        .and_then(|mut s| {
            s.query_row(params![group_id, user_id], |r| {
                Ok(MemberRow {
                    role: Role::from_i32(r.get(0)?).unwrap_or_default(),
                    rights: r.get(1)?,
                    since: r.get(2)?,
                    until: r.get(3)?,
                })
            })
            .optional()
        })
        .map_err(db_error("reading a group member"))
}

/// The group and the caller's seat in it; NotFound unless `allowed(role)`.
fn group_for(
    tx: &Connection,
    group_id: &[u8],
    user_id: u64,
    allowed: fn(Role) -> bool,
) -> Result<(GroupRow, MemberRow)> {
    let group = group_row(tx, group_id)?.ok_or_else(|| not_found(group_id))?;
    match member(tx, group_id, user_id)? {
        Some(m) if allowed(m.role) => Ok((group, m)),
        _ => Err(not_found(group_id)),
    }
}

/// Writes a role; the invite link a user came by and who let them in are forgotten
/// (`change_role_by_link` and `admin::set_joined_by` record them for an INVITED user after
/// this).
fn set_member(tx: &Connection, group_id: &[u8], user_id: u64, m: &MemberRow) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO group_members (group_id, user_id, role, rights, since, until_date) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (group_id, user_id) DO UPDATE
         SET role = ?3, rights = ?4, since = ?5, until_date = ?6, via_link = NULL, via_request = 0, invited_by = NULL",
    )
    .and_then(|mut s| s.execute(params![group_id, user_id, m.role.value(), m.rights, m.since, m.until]))
    .map_err(db_error("writing a group member"))?;
    Ok(())
}

/// The active devices with a leaf (a device its owner removed gets nothing more; any member
/// may commit the removal of its leaf).
fn joined_devices(tx: &Connection, group_id: &[u8]) -> Result<BTreeSet<DeviceAddr>> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT g.user_id, g.device_id FROM group_devices g
             JOIN devices d ON d.account_id = g.user_id AND d.device_id = g.device_id AND d.active = 1
             WHERE g.group_id = ?1",
        )
        .map_err(db_error("reading group devices"))?;
    let rows = stmt
        .query_map(params![group_id], |r| Ok(DeviceAddr { user_id: r.get(0)?, device_id: r.get(1)? }))
        .map_err(db_error("reading group devices"))?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_error("reading group devices"))
}

fn active_devices(tx: &Connection, user_id: u64) -> Result<Vec<DeviceAddr>> {
    let mut stmt = tx
        .prepare_cached("SELECT device_id FROM devices WHERE account_id = ?1 AND active = 1 ORDER BY device_id")
        .map_err(db_error("reading devices"))?;
    let rows = stmt
        .query_map(params![user_id], |r| Ok(DeviceAddr { user_id, device_id: r.get(0)? }))
        .map_err(db_error("reading devices"))?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_error("reading devices"))
}

/// The registered key of an active device.
fn device_key(tx: &Connection, addr: DeviceAddr) -> Result<Option<Vec<u8>>> {
    tx.prepare_cached("SELECT device_key FROM devices WHERE account_id = ?1 AND device_id = ?2 AND active = 1")
        .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], |r| r.get(0)).optional())
        .map_err(db_error("reading a device key"))
}

fn profile(tx: &Connection, user_id: u64) -> Result<pb::Profile> {
    tx.prepare_cached("SELECT username, display_name, is_bot, identity_key FROM accounts WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row(params![user_id], |r| {
                Ok(pb::Profile {
                    user_id,
                    username: r.get(0)?,
                    display_name: r.get(1)?,
                    is_bot: r.get(2)?,
                    identity_key: r.get(3)?,
                    ..Default::default()
                })
            })
            .optional()
        })
        .map_err(db_error("reading a profile"))?
        .ok_or_else(|| PlatformError::NotFound(format!("no user with id {user_id}")))
}

fn member_pb(tx: &Connection, user_id: u64, m: &MemberRow) -> Result<pb::GroupMember> {
    Ok(pb::GroupMember {
        user: Some(profile(tx, user_id)?).into(),
        role: m.role.into(),
        rights: if m.role == Role::ADMINISTRATOR { Some(rights_pb(m.rights)).into() } else { None.into() },
        since: m.since,
        until_date: m.until,
        ..Default::default()
    })
}

fn group_pb(tx: &Connection, group_id: &[u8]) -> Result<pb::Group> {
    let g = group_row(tx, group_id)?.ok_or_else(|| not_found(group_id))?;
    let mut stmt = tx
        .prepare_cached(
            "SELECT user_id, role, rights, since, until_date FROM group_members WHERE group_id = ?1 ORDER BY since, user_id",
        )
        .map_err(db_error("reading group members"))?;
    let rows: Vec<(u64, MemberRow)> = stmt
        .query_map(params![group_id], |r| {
            Ok((
                r.get(0)?,
                MemberRow {
                    role: Role::from_i32(r.get(1)?).unwrap_or_default(),
                    rights: r.get(2)?,
                    since: r.get(3)?,
                    until: r.get(4)?,
                },
            ))
        })
        .and_then(|rows| rows.collect())
        .map_err(db_error("reading group members"))?;
    let members = rows.iter().map(|(user, m)| member_pb(tx, *user, m)).collect::<Result<_>>()?;
    Ok(pb::Group {
        group_id: group_id.to_vec(),
        title: g.title,
        type_: g.group_type.into(),
        epoch: g.epoch,
        members,
        ..Default::default()
    })
}

// ── Writing the group's order ──

fn next_seq(tx: &Connection, group_id: &[u8]) -> Result<u64> {
    tx.prepare_cached("UPDATE groups SET last_seq = last_seq + 1 WHERE group_id = ?1 RETURNING last_seq")
        .and_then(|mut s| s.query_row(params![group_id], |r| r.get(0)))
        .map_err(db_error("taking a group seq"))
}

/// One delivery of the group's order to some devices.
struct Delivery<'a> {
    group_id: &'a [u8],
    kind: DeliveryKind,
    epoch: u64,
    sender: DeviceAddr,
    message_id: u64,
    date: i64,
    client_message_id: &'a str,
    ciphertext: &'a [u8],
    change: Option<&'a [u8]>,
}

/// Takes the next group seq and appends `d` to each device's inbox; returns the seq.
fn deliver(
    tx: &Connection,
    d: &Delivery<'_>,
    to: impl IntoIterator<Item = DeviceAddr>,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<u64> {
    let group_seq = next_seq(tx, d.group_id)?;
    for addr in to {
        let group =
            GroupColumns { group_id: d.group_id, kind: d.kind.value(), group_seq, epoch: d.epoch, change: d.change };
        append_inbox(
            tx,
            &InboxRow {
                to: addr,
                sender: d.sender,
                message_id: d.message_id,
                date: d.date,
                client_message_id: d.client_message_id,
                ciphertext: d.ciphertext,
                group: Some(group),
            },
        )?;
        delivered.insert(addr);
    }
    Ok(group_seq)
}

/// Records `user`'s new role and tells every joined device and every device of `user`
/// (a MEMBERSHIP delivery). A user without a role before counts as LEFT.
#[allow(clippy::too_many_arguments)]
fn change_role(
    tx: &Connection,
    group_id: &[u8],
    epoch: u64,
    actor: DeviceAddr,
    user_id: u64,
    new: MemberRow,
    now: i64,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<()> {
    change_role_by_link(tx, group_id, epoch, actor, user_id, new, now, None, None, delivered)
}

/// [`change_role`] of a join by invite link: the change names the link, and whether an
/// approved join request let the user in. `cause` is the user the change names as its actor
/// when that is not the acting device's user: a join (INVITED → MEMBER, made by the joiner's
/// commit) names who let the user in, as the Bot API's `from` does. Whoever makes a user
/// INVITED (the adder, the approving administrator, the user themself by link) is recorded
/// for that join.
#[allow(clippy::too_many_arguments)]
fn change_role_by_link(
    tx: &Connection,
    group_id: &[u8],
    epoch: u64,
    actor: DeviceAddr,
    user_id: u64,
    new: MemberRow,
    now: i64,
    joined_by: Option<(pb::InviteLink, bool)>,
    cause: Option<u64>,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<()> {
    let old = member(tx, group_id, user_id)?.unwrap_or(MemberRow::new(Role::LEFT, 0));
    set_member(tx, group_id, user_id, &new)?;
    let cause = cause.unwrap_or(actor.user_id);
    if new.role == Role::INVITED {
        admin::set_invited_by(tx, group_id, user_id, cause)?;
    }
    let (invite_link, via_join_request) = match joined_by {
        Some((link, request)) => (Some(link), request),
        None => (None, false),
    };
    let change = pb::MembershipChange {
        old: Some(member_pb(tx, user_id, &old)?).into(),
        new: Some(member_pb(tx, user_id, &new)?).into(),
        actor: Some(profile(tx, cause)?).into(),
        invite_link: invite_link.into(),
        via_join_request,
        ..Default::default()
    }
    .write_to_bytes()
    .map_err(|e| PlatformError::Internal(format!("encoding a membership change: {e}")))?;
    let mut to = joined_devices(tx, group_id)?;
    to.extend(active_devices(tx, user_id)?);
    let d = Delivery {
        group_id,
        kind: DeliveryKind::MEMBERSHIP,
        epoch,
        sender: actor,
        message_id: 0,
        date: now,
        client_message_id: "",
        ciphertext: &[],
        change: Some(&change),
    };
    deliver(tx, &d, to, delivered)?;
    Ok(())
}

/// The user's username, when they exist and (a bot) hold the capability the group's type
/// needs: `groups` or `channels` (FAILED_PRECONDITION otherwise).
fn may_be_in(tx: &Connection, user_id: u64, group_type: pb::GroupType) -> Result<String> {
    let account = tx
        .prepare_cached("SELECT username, is_bot, capabilities FROM accounts WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row(params![user_id], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?, r.get::<_, Option<String>>(2)?))
            })
            .optional()
        })
        .map_err(db_error("reading an account"))?;
    let Some((username, is_bot, capabilities)) = account else {
        return Err(PlatformError::NotFound(format!("no user with id {user_id}")));
    };
    if is_bot {
        let needed = match group_type {
            pb::GroupType::GROUP => "groups",
            pb::GroupType::CHANNEL => "channels",
        };
        let caps = capabilities.unwrap_or_default();
        if !caps.split(',').any(|c| c.trim() == needed) {
            return Err(PlatformError::FailedPrecondition(format!("bot @{username} does not have the {needed} capability")));
        }
    }
    Ok(username)
}

// ── The store's operations ──

impl Store {
    /// Keeps a device's key packages (checked by the caller), dropping the oldest beyond
    /// `KEY_PACKAGES_PER_DEVICE_MAX`; returns how many it holds now.
    pub fn upload_key_packages(&self, addr: DeviceAddr, packages: &[Vec<u8>], now: i64) -> Result<u32> {
        self.write_tx("a key package upload", |tx| {
            for kp in packages {
                tx.prepare_cached(
                    "INSERT INTO key_packages (account_id, device_id, key_package, created_at) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute(params![addr.user_id, addr.device_id, kp, now]))
                .map_err(db_error("storing a key package"))?;
            }
            tx.prepare_cached(
                "DELETE FROM key_packages WHERE account_id = ?1 AND device_id = ?2 AND id NOT IN
                   (SELECT id FROM key_packages WHERE account_id = ?1 AND device_id = ?2 ORDER BY id DESC LIMIT ?3)",
            )
            .and_then(|mut s| s.execute(params![addr.user_id, addr.device_id, KEY_PACKAGES_PER_DEVICE_MAX]))
            .map_err(db_error("trimming key packages"))?;
            tx.prepare_cached("SELECT COUNT(*) FROM key_packages WHERE account_id = ?1 AND device_id = ?2")
                .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], |r| r.get(0)))
                .map_err(db_error("counting key packages"))
        })
    }

    /// Takes one key package (the newest) of each active device of `user_id` but `caller`;
    /// returns them and the devices that had none.
    pub fn claim_key_packages(&self, caller: DeviceAddr, user_id: u64) -> Result<Claimed> {
        self.write_tx("a key package claim", |tx| {
            profile(tx, user_id)?;
            let (mut taken, mut without) = (Vec::new(), Vec::new());
            for addr in active_devices(tx, user_id)? {
                if addr == caller {
                    continue;
                }
                let kp: Option<Vec<u8>> = tx
                    .prepare_cached(
                        "DELETE FROM key_packages WHERE id = (SELECT id FROM key_packages
                           WHERE account_id = ?1 AND device_id = ?2 ORDER BY id DESC LIMIT 1)
                         RETURNING key_package",
                    )
                    .and_then(|mut s| s.query_row(params![addr.user_id, addr.device_id], |r| r.get(0)).optional())
                    .map_err(db_error("claiming a key package"))?;
                match kp {
                    Some(kp) => taken.push((addr.device_id, kp)),
                    None => without.push(addr.device_id),
                }
            }
            Ok((taken, without))
        })
    }

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
                check_leaf(tx, &leaf.credential, &leaf.signature_key)?.map_err(PlatformError::InvalidArgument)?;
            if leaf_dev != caller {
                return Err(PlatformError::InvalidArgument(format!(
                    "the group's leaf is device {} of user {}, not the caller's device",
                    leaf_dev.device_id, leaf_dev.user_id
                )));
            }
            tx.prepare_cached(
                "INSERT INTO groups (group_id, title, type, epoch, group_info, creator_id, created_at)
                 VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![g.group_id, g.title, g.group_type.value(), g.group_info, caller.user_id, now])
            })
            .map_err(db_error("creating a group"))?;
            set_member(tx, &g.group_id, caller.user_id, &MemberRow::new(Role::OWNER, now))?;
            join_device(tx, &g.group_id, caller, now)?;
            group_pb(tx, &g.group_id)
        })
    }

    /// A group as a member sees it (NotFound for anyone else).
    pub fn get_group(&self, user_id: u64, group_id: &[u8]) -> Result<pb::Group> {
        self.write_tx("reading a group", |tx| {
            group_for(tx, group_id, user_id, seated)?;
            group_pb(tx, group_id)
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
            group_for(tx, group_id, user_id, |r| seated(r) || r == Role::INVITED)?;
            tx.prepare_cached("SELECT group_info, epoch FROM groups WHERE group_id = ?1")
                .and_then(|mut s| s.query_row(params![group_id], |r| Ok((r.get(0)?, r.get(1)?))))
                .map_err(db_error("reading a GroupInfo"))
        })
    }

    /// Admits `target` (INVITED). Returns the group and the devices told.
    pub fn add_group_member(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        target: u64,
        now: i64,
    ) -> Result<(pb::Group, BTreeSet<DeviceAddr>)> {
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
                Some(Role::INVITED) => return Ok((group_pb(tx, group_id)?, delivered)),
                Some(Role::BANNED) if !matches!(me.role, Role::OWNER | Role::ADMINISTRATOR) => {
                    return Err(PlatformError::PermissionDenied(format!(
                        "@{username} was removed from this group; only an administrator may add them again"
                    )))
                }
                _ => {}
            }
            let invited = MemberRow::new(Role::INVITED, now);
            change_role(tx, group_id, group.epoch, caller, target, invited, now, &mut delivered)?;
            Ok((group_pb(tx, group_id)?, delivered))
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
    ) -> Result<(pb::Group, BTreeSet<DeviceAddr>)> {
        self.write_tx("removing a group member", |tx| {
            let (group, me) = group_for(tx, group_id, caller.user_id, seated)?;
            require_right(&me, CAN_RESTRICT, "can_restrict_members", "removing a member")?;
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
            let mut delivered = BTreeSet::new();
            let banned = MemberRow { until, ..MemberRow::new(Role::BANNED, now) };
            change_role(tx, group_id, group.epoch, caller, target, banned, now, &mut delivered)?;
            Ok((group_pb(tx, group_id)?, delivered))
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
    ) -> Result<(pb::Group, BTreeSet<DeviceAddr>)> {
        self.write_tx("changing a group's title", |tx| {
            let (group, me) = group_for(tx, group_id, caller.user_id, seated)?;
            require_right(&me, CAN_CHANGE_INFO, "can_change_info", "changing the title")?;
            tx.execute("UPDATE groups SET title = ?2 WHERE group_id = ?1", params![group_id, title])
                .map_err(db_error("changing a group's title"))?;
            let change = pb::MembershipChange {
                actor: Some(profile(tx, caller.user_id)?).into(),
                title: title.to_string(),
                ..Default::default()
            }
            .write_to_bytes()
            .map_err(|e| PlatformError::Internal(format!("encoding a title change: {e}")))?;
            let mut delivered = BTreeSet::new();
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
            deliver(tx, &d, joined_devices(tx, group_id)?, &mut delivered)?;
            Ok((group_pb(tx, group_id)?, delivered))
        })
    }

    /// The caller leaves (LEFT); an owner only when nobody else is in the group.
    pub fn leave_group(
        &self,
        caller: DeviceAddr,
        group_id: &[u8],
        now: i64,
    ) -> Result<(pb::Group, BTreeSet<DeviceAddr>)> {
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
            Ok((group_pb(tx, group_id)?, delivered))
        })
    }

    /// Orders, checks and fans out one group message (see the module comment and
    /// docs/groups.md). Returns the outcome and the devices whose inbox received entries.
    pub fn send_group_message(
        &self,
        caller: DeviceAddr,
        m: GroupMessage,
        now: i64,
    ) -> Result<(GroupSendOutcome, BTreeSet<DeviceAddr>)> {
        self.write_tx("a group message", |tx| {
            let mut delivered = BTreeSet::new();
            if let Some(previous) = previous_send(tx, caller, &m)? {
                return Ok((previous, delivered));
            }
            let group = group_row(tx, &m.group_id)?.ok_or_else(|| not_found(&m.group_id))?;
            let Some(me) = member(tx, &m.group_id, caller.user_id)? else {
                return Err(not_found(&m.group_id));
            };
            if m.message.epoch().as_u64() != group.epoch {
                return Ok((GroupSendOutcome::Stale { epoch: group.epoch }, delivered));
            }
            let outcome = match m.message.content_type() {
                ContentType::Application => accept_application(tx, caller, &me, &group, &m, now, &mut delivered)?,
                ContentType::Commit => accept_commit(tx, caller, &me, &group, m.clone_parts(), now, &mut delivered)?,
                ContentType::Proposal => GroupSendOutcome::Rejected(
                    "standalone proposals are not accepted: send a commit with the proposals inline".into(),
                ),
            };
            if let GroupSendOutcome::Ok { epoch, group_seq, message_id, date } = &outcome {
                tx.prepare_cached(
                    "INSERT INTO sent_group_messages (sender_id, sender_device, client_message_id, group_id, epoch,
                                                      group_seq, message_id, date)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        caller.user_id,
                        caller.device_id,
                        m.client_message_id,
                        m.group_id,
                        epoch,
                        group_seq,
                        message_id,
                        date
                    ])
                })
                .map_err(db_error("recording a group message"))?;
            }
            Ok((outcome, delivered))
        })
    }
}

impl GroupMessage {
    /// The parts a commit consumes, leaving `self` usable for the idempotency record.
    fn clone_parts(&self) -> CommitParts<'_> {
        CommitParts {
            message: self.message.clone(),
            bytes: &self.bytes,
            group_info: self.group_info.as_ref(),
            welcome: &self.welcome,
            group_id: &self.group_id,
            client_message_id: &self.client_message_id,
        }
    }
}

struct CommitParts<'a> {
    group_id: &'a [u8],
    client_message_id: &'a str,
    message: ProtocolMessage,
    bytes: &'a [u8],
    group_info: Option<&'a (Vec<u8>, VerifiableGroupInfo)>,
    welcome: &'a [u8],
}

/// The first OK result of this (sender device, client message id), if any.
fn previous_send(tx: &Connection, caller: DeviceAddr, m: &GroupMessage) -> Result<Option<GroupSendOutcome>> {
    let row: Option<(Vec<u8>, u64, u64, u64, i64)> = tx
        .prepare_cached(
            "SELECT group_id, epoch, group_seq, message_id, date FROM sent_group_messages
             WHERE sender_id = ?1 AND sender_device = ?2 AND client_message_id = ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![caller.user_id, caller.device_id, m.client_message_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .optional()
        })
        .map_err(db_error("looking up a group message"))?;
    Ok(row.map(|(group_id, epoch, group_seq, message_id, date)| {
        if group_id != m.group_id {
            GroupSendOutcome::Rejected(format!(
                "client_message_id {} was used for a message to another group",
                m.client_message_id
            ))
        } else {
            GroupSendOutcome::Ok { epoch, group_seq, message_id, date }
        }
    }))
}

fn join_device(tx: &Connection, group_id: &[u8], addr: DeviceAddr, now: i64) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO group_devices (group_id, user_id, device_id, since) VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut s| s.execute(params![group_id, addr.user_id, addr.device_id, now]))
    .map_err(db_error("recording a group device"))?;
    Ok(())
}

fn drop_device(tx: &Connection, group_id: &[u8], addr: DeviceAddr) -> Result<()> {
    tx.prepare_cached("DELETE FROM group_devices WHERE group_id = ?1 AND user_id = ?2 AND device_id = ?3")
        .and_then(|mut s| s.execute(params![group_id, addr.user_id, addr.device_id]))
        .map_err(db_error("removing a group device"))?;
    Ok(())
}

/// Checks a leaf: its credential names a device (12-byte identity) whose registered, active
/// key is the leaf's signature key. `Ok(Err(why))` for a leaf the platform refuses.
fn check_leaf(
    tx: &Connection,
    credential: &Credential,
    signature_key: &[u8],
) -> Result<std::result::Result<DeviceAddr, String>> {
    let Some((user_id, device_id)) = mls::device_of(credential) else {
        return Ok(Err("a leaf's credential is not a basic credential naming a device (user id, device id)".into()));
    };
    let addr = DeviceAddr { user_id, device_id };
    Ok(match device_key(tx, addr)? {
        None => Err(format!("a leaf names device {device_id} of user {user_id}, which is not an active device")),
        Some(key) if key != signature_key => {
            Err(format!("the leaf of device {device_id} of user {user_id} does not carry that device's registered key"))
        }
        Some(_) => Ok(addr),
    })
}

fn next_group_message_id(tx: &Connection, group_id: &[u8]) -> Result<u64> {
    tx.prepare_cached("UPDATE groups SET last_message_id = last_message_id + 1 WHERE group_id = ?1 RETURNING last_message_id")
        .and_then(|mut s| s.query_row(params![group_id], |r| r.get(0)))
        .map_err(db_error("assigning a group message id"))
}

fn group_reservation(tx: &Connection, caller: DeviceAddr, cmid: &str) -> Result<Option<(Vec<u8>, u64, i64)>> {
    tx.prepare_cached(
        "SELECT group_id, message_id, date FROM reserved_group_messages
         WHERE sender_id = ?1 AND sender_device = ?2 AND client_message_id = ?3",
    )
    .and_then(|mut s| {
        s.query_row(params![caller.user_id, caller.device_id, cmid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()
    })
    .map_err(db_error("looking up a group reservation"))
}

/// Takes the next message id of a group for one client message id of a member that may send
/// there (idempotent: a repeat answers the same id). The caller checks the id's length.
pub(super) fn reserve_group_message_id(
    tx: &Connection,
    caller: DeviceAddr,
    cmid: &str,
    group_id: &[u8],
    now: i64,
) -> Result<super::Reserved> {
    use super::Reserved;
    if let Some((gid, message_id, date)) = group_reservation(tx, caller, cmid)? {
        return Ok(if gid == group_id {
            Reserved::Id { message_id, date }
        } else {
            Reserved::Refused(format!("client_message_id {cmid} was reserved for another group"))
        });
    }
    let Some(me) = member(tx, group_id, caller.user_id)? else {
        return Ok(Reserved::Refused("not a member of this group".into()));
    };
    if !seated(me.role) || !joined_devices(tx, group_id)?.contains(&caller) {
        return Ok(Reserved::Refused("this device has no leaf in the group".into()));
    }
    let message_id = next_group_message_id(tx, group_id)?;
    tx.prepare_cached(
        "INSERT INTO reserved_group_messages (sender_id, sender_device, client_message_id, group_id, message_id, date)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![caller.user_id, caller.device_id, cmid, group_id, message_id, now]))
    .map_err(db_error("recording a group reservation"))?;
    Ok(Reserved::Id { message_id, date: now })
}

fn accept_application(
    tx: &Connection,
    caller: DeviceAddr,
    me: &MemberRow,
    group: &GroupRow,
    m: &GroupMessage,
    now: i64,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<GroupSendOutcome> {
    let joined = joined_devices(tx, &m.group_id)?;
    if !joined.contains(&caller) || !seated(me.role) {
        return Ok(GroupSendOutcome::Rejected("this device has no leaf in the group: join it first".into()));
    }
    if !matches!(m.message, ProtocolMessage::PrivateMessage(_)) {
        return Ok(GroupSendOutcome::Rejected("application messages must be encrypted (PrivateMessage)".into()));
    }
    let allowed = match group.group_type {
        pb::GroupType::GROUP => me.effective(now) != Role::RESTRICTED,
        pb::GroupType::CHANNEL => admin_with(me, CAN_POST),
    };
    if !allowed {
        return Ok(GroupSendOutcome::Rejected(match group.group_type {
            pb::GroupType::GROUP => "restricted: this member may not send messages".into(),
            pb::GroupType::CHANNEL => {
                "only the owner or an administrator with can_post_messages posts in a channel".into()
            }
        }));
    }
    let mut pending = BTreeSet::new();
    for addr in &joined {
        if member(tx, &m.group_id, addr.user_id)?.is_none_or(|m| matches!(m.role, Role::LEFT | Role::BANNED)) {
            pending.insert(addr.user_id);
        }
    }
    if !pending.is_empty() {
        return Ok(GroupSendOutcome::RemovalsPending(pending.into_iter().collect()));
    }
    // A reserved message keeps the id and date its content was signed with.
    let (message_id, now) = match group_reservation(tx, caller, &m.client_message_id)? {
        Some((group_id, message_id, date)) if group_id == m.group_id => (message_id, date),
        Some(_) => {
            return Ok(GroupSendOutcome::Rejected(format!(
                "client_message_id {} was reserved for another group",
                m.client_message_id
            )))
        }
        None => (next_group_message_id(tx, &m.group_id)?, now),
    };
    let d = Delivery {
        group_id: &m.group_id,
        kind: DeliveryKind::MLS_MESSAGE,
        epoch: group.epoch,
        sender: caller,
        message_id,
        date: now,
        client_message_id: &m.client_message_id,
        ciphertext: &m.bytes,
        change: None,
    };
    let group_seq = deliver(tx, &d, joined.into_iter().filter(|a| *a != caller), delivered)?;
    admin::record_message(tx, &m.group_id, message_id, caller.user_id, now)?;
    Ok(GroupSendOutcome::Ok { epoch: group.epoch, group_seq, message_id, date: now })
}

/// What a checked commit does to the platform's membership.
#[derive(Default)]
struct CommitEffect {
    added: BTreeSet<DeviceAddr>,
    removed: BTreeSet<DeviceAddr>,
    /// The device that joined by this external commit.
    joiner: Option<DeviceAddr>,
}

fn accept_commit(
    tx: &Connection,
    caller: DeviceAddr,
    me: &MemberRow,
    group: &GroupRow,
    m: CommitParts<'_>,
    now: i64,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<GroupSendOutcome> {
    let reject = |why: String| Ok(GroupSendOutcome::Rejected(why));
    if !matches!(m.message, ProtocolMessage::PublicMessage(_)) {
        return reject("commits must be sent as PublicMessage, so that the platform can check them".into());
    }
    let Some((info_bytes, info)) = m.group_info else {
        return reject("a commit needs the group_info of the epoch it starts".into());
    };
    let provider = MlsProvider::new(tx);
    let gid = GroupId::from_slice(m.group_id);
    let mut public = PublicGroup::load(provider.storage(), &gid)
        .map_err(mls_storage_error("loading a group's public state"))?
        .ok_or_else(|| PlatformError::Internal(format!("group {} has no public MLS state", short_id(m.group_id))))?;
    let processed = match public.process_message(provider.crypto(), m.message) {
        Ok(p) => p,
        Err(e) => return reject(format!("the commit does not verify: {e}")),
    };
    let sender = processed.sender().clone();
    let ProcessedMessageContent::StagedCommitMessage(staged) = processed.into_content() else {
        return reject("a PublicMessage must be a commit".into());
    };
    let before: BTreeMap<LeafNodeIndex, Member> = public.members().map(|l| (l.index, l)).collect();
    let joined = joined_devices(tx, m.group_id)?;
    let effect = match check_commit(tx, caller, me, m.group_id, &sender, &staged, &before, &joined)? {
        Ok(effect) => effect,
        Err(why) => return reject(why),
    };
    if !effect.added.is_empty() && m.welcome.is_empty() {
        return reject("a commit that adds devices needs their welcome".into());
    }
    if info.group_context() != staged.group_context() {
        return reject("group_info is not the GroupInfo of the epoch this commit starts".into());
    }
    if info.extensions().ratchet_tree().is_none() {
        return reject("group_info carries no ratchet tree".into());
    }
    public.merge_commit(provider.storage(), *staged).map_err(mls_storage_error("merging a commit"))?;
    let epoch = public.group_context().epoch().as_u64();
    tx.prepare_cached("UPDATE groups SET epoch = ?2, group_info = ?3 WHERE group_id = ?1")
        .and_then(|mut s| s.execute(params![m.group_id, epoch, info_bytes]))
        .map_err(db_error("advancing a group's epoch"))?;

    // The commit, to every device that had a leaf (removed ones included) but the sender.
    let d = Delivery {
        group_id: m.group_id,
        kind: DeliveryKind::MLS_MESSAGE,
        epoch: group.epoch,
        sender: caller,
        message_id: 0,
        date: now,
        client_message_id: m.client_message_id,
        ciphertext: m.bytes,
        change: None,
    };
    let group_seq = deliver(tx, &d, joined.iter().copied().filter(|a| *a != caller), delivered)?;
    for addr in &effect.removed {
        drop_device(tx, m.group_id, *addr)?;
    }
    for addr in effect.added.iter().chain(&effect.joiner) {
        join_device(tx, m.group_id, *addr, now)?;
    }
    if !effect.added.is_empty() {
        let d = Delivery { kind: DeliveryKind::WELCOME, epoch, ciphertext: m.welcome, client_message_id: "", ..d };
        deliver(tx, &d, effect.added.iter().copied(), delivered)?;
    }
    // An invited user whose device joined is a member now.
    let users: BTreeSet<u64> = effect.added.iter().chain(&effect.joiner).map(|a| a.user_id).collect();
    for user in users {
        if member(tx, m.group_id, user)?.is_some_and(|r| r.role == Role::INVITED) {
            // The user's (first) device that joined sends the change; it names who let the
            // user in (the adder, the approving administrator; the user themself by link).
            let actor =
                effect.joiner.iter().chain(&effect.added).copied().find(|a| a.user_id == user).unwrap_or(caller);
            let joined_by = admin::joined_by(tx, m.group_id, user)?;
            let cause = admin::invited_by(tx, m.group_id, user)?;
            let joined = MemberRow::new(Role::MEMBER, now);
            change_role_by_link(tx, m.group_id, epoch, actor, user, joined, now, joined_by, cause, delivered)?;
        }
    }
    Ok(GroupSendOutcome::Ok { epoch, group_seq, message_id: 0, date: now })
}

/// Checks a staged commit against the platform's membership; `Ok(Err(why))` refuses it.
#[allow(clippy::too_many_arguments)]
fn check_commit(
    tx: &Connection,
    caller: DeviceAddr,
    me: &MemberRow,
    group_id: &[u8],
    sender: &Sender,
    staged: &StagedCommit,
    before: &BTreeMap<LeafNodeIndex, Member>,
    joined: &BTreeSet<DeviceAddr>,
) -> Result<std::result::Result<CommitEffect, String>> {
    let mut effect = CommitEffect::default();
    for p in staged.queued_proposals() {
        if !matches!(
            p.proposal(),
            Proposal::Add(_) | Proposal::Remove(_) | Proposal::Update(_) | Proposal::ExternalInit(_)
        ) {
            return Ok(Err(format!("a commit with a {:?} proposal is not accepted", p.proposal().proposal_type())));
        }
    }
    // Who commits: a joined device of a seated member, or an external joiner.
    let path_leaf = staged.update_path_leaf_node();
    match sender {
        Sender::Member(index) => {
            let leaf = before.get(index);
            if leaf.and_then(|l| mls::device_of(&l.credential)) != Some((caller.user_id, caller.device_id)) {
                return Ok(Err("the commit's sender leaf is not the calling device".into()));
            }
            if !seated(me.role) || !joined.contains(&caller) {
                return Ok(Err("only a member's device with a leaf may commit".into()));
            }
        }
        Sender::NewMemberCommit => {
            if !(seated(me.role) || me.role == Role::INVITED) {
                return Ok(Err("only a member or an invited user may join by external commit".into()));
            }
            effect.joiner = Some(caller);
        }
        _ => return Ok(Err("a commit must come from a member or an external joiner".into())),
    }
    if let Some(leaf) = path_leaf {
        match check_leaf(tx, leaf.credential(), leaf.signature_key().as_slice())? {
            Ok(addr) if addr == caller => {}
            Ok(_) => return Ok(Err("the commit's own leaf must name the calling device".into())),
            Err(why) => return Ok(Err(why)),
        }
    } else if effect.joiner.is_some() {
        return Ok(Err("an external commit needs an update path".into()));
    }
    for add in staged.add_proposals() {
        let leaf = add.add_proposal().key_package().leaf_node();
        let addr = match check_leaf(tx, leaf.credential(), leaf.signature_key().as_slice())? {
            Ok(addr) => addr,
            Err(why) => return Ok(Err(why)),
        };
        let role = member(tx, group_id, addr.user_id)?.map(|m| m.role);
        if !role.is_some_and(|r| seated(r) || r == Role::INVITED) {
            return Ok(Err(format!(
                "user {} is not invited to this group: AddGroupMember comes before the commit that adds their devices",
                addr.user_id
            )));
        }
        if joined.contains(&addr) || !effect.added.insert(addr) {
            return Ok(Err(format!("device {} of user {} has a leaf already", addr.device_id, addr.user_id)));
        }
    }
    for remove in staged.remove_proposals() {
        let index = remove.remove_proposal().removed();
        let Some(leaf) = before.get(&index) else {
            return Ok(Err(format!("the commit removes leaf {index:?}, which is empty")));
        };
        let Some((user_id, device_id)) = mls::device_of(&leaf.credential) else {
            return Ok(Err("the commit removes a leaf that names no device".into()));
        };
        let addr = DeviceAddr { user_id, device_id };
        let gone = member(tx, group_id, user_id)?.is_none_or(|m| matches!(m.role, Role::LEFT | Role::BANNED));
        let own_old_leaf = effect.joiner == Some(addr);
        let device_removed = device_key(tx, addr)?.is_none();
        if !(gone || own_old_leaf || device_removed) {
            return Ok(Err(format!(
                "user {user_id} is a member: RemoveGroupMember comes before the commit that removes their leaves"
            )));
        }
        effect.removed.insert(addr);
    }
    if let Some(joiner) = effect.joiner {
        // A rejoin replaces the device's old leaf: it stays joined.
        effect.removed.remove(&joiner);
    }
    Ok(Ok(effect))
}

mod admin;
pub use admin::{LinkSettings, LINK_PREFIX};
pub(super) use admin::{SCHEMA_ADMIN, SCHEMA_INVITED_BY};
#[cfg(test)]
mod tests;
