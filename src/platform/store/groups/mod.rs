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
//! stored in that transaction: one row for the group (`group_log`), or one per device. The
//! store's single writer (one connection behind a mutex, IMMEDIATE transactions) is the commit
//! lock: the epoch is read and advanced inside the transaction.
//!
//! Results that go on the wire unchanged (`Group`, `MembershipChange`) are built here as wire
//! messages; the service only decodes requests and maps outcomes.
//!
//! This file holds the rows, roles and rights and the group's order (deliveries and role
//! changes); the operations are in rooms: `key_packages.rs`, `members.rs` (create, add,
//! remove, title, leave), `send.rs` (application messages and reservations), `commit.rs`
//! (commits: leaves, epochs, removals) and `admin.rs` (promotions, restrictions, deletions,
//! invite links, join requests).

use std::collections::{BTreeMap, BTreeSet};

use openmls::messages::group_info::VerifiableGroupInfo;
use openmls::prelude::*;
use protobuf::{Enum as _, Message as _};
use rusqlite::{params, Connection, OptionalExtension};

use super::group_log;
use super::inbox::{append_group_delivery, GroupDelivery as Delivery};
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
    /// Leaves still in the tree that must go before anyone sends: of these users, who left or
    /// were removed, and of these devices, removed while their users stayed.
    RemovalsPending { users: Vec<u64>, devices: Vec<DeviceAddr> },
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

/// Holds a seat: may read, and (as the type allows) write (`wire::roles`).
fn seated(role: Role) -> bool {
    crate::wire::roles::is_seated(role)
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

/// What an administrative action answers: the group after it, and the devices told.
type Told = (pb::Group, BTreeSet<DeviceAddr>);

impl Store {
    /// The preamble and the answer every administrative action shares, in one write
    /// transaction: the group and the caller's seat in it (NotFound unless seated), refused
    /// unless the caller is the owner or an administrator holding `right` (its bit and its Bot
    /// API name); then `act` makes the action's role changes, and the answer is the group as it
    /// is after them and the devices told. `action` names it in the refusal ("removing a
    /// member needs …") and in a failure of the transaction.
    fn admin_action(
        &self,
        action: &'static str,
        caller: DeviceAddr,
        group_id: &[u8],
        right: (u32, &'static str),
        target: Option<u64>,
        act: impl FnOnce(&Connection, &GroupRow, &MemberRow, &mut BTreeSet<DeviceAddr>) -> Result<()>,
    ) -> Result<Told> {
        self.write_tx(action, |tx| {
            let (group, me) = group_for(tx, group_id, caller.user_id, seated)?;
            require_right(&me, right.0, right.1, action)?;
            let mut delivered = BTreeSet::new();
            act(tx, &group, &me, &mut delivered)?;
            Ok((told_about(tx, group_id, caller.user_id, target)?, delivered))
        })
    }
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

/// An InvalidArgument saying `why` (a sentence, or an MLS decoding error).
fn invalid(why: impl std::fmt::Display) -> PlatformError {
    PlatformError::InvalidArgument(why.to_string())
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

pub(super) const REMOVED_DEVICES_WITH_LEAVES: &str = "SELECT g.user_id, g.device_id FROM devices d INDEXED BY devices_inactive
     CROSS JOIN group_devices g ON g.group_id = ?1 AND g.user_id = d.account_id AND g.device_id = d.device_id
     WHERE d.active = 0";

/// Devices with a leaf in the group that were removed (inactive): their leaves must go. Read
/// from the platform's removed devices (`devices_inactive`, a few: an owner's /removedevice or
/// /rekey), each a lookup among the group's leaves, not from the group's N leaves.
fn removed_devices_with_leaves(tx: &Connection, group_id: &[u8]) -> Result<BTreeSet<DeviceAddr>> {
    let mut stmt = tx
        .prepare_cached(REMOVED_DEVICES_WITH_LEAVES)
        .map_err(db_error("reading removed group devices"))?;
    let rows = stmt
        .query_map(params![group_id], |r| Ok(DeviceAddr { user_id: r.get(0)?, device_id: r.get(1)? }))
        .map_err(db_error("reading removed group devices"))?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_error("reading removed group devices"))
}

/// Step 16 of `platform.db`: nothing small about a group costs what its size does.
/// - The GroupInfo (with the ratchet tree: 2.7 MB at 10,000 members) moves to its own table.
///   In `groups` it came before the counters, so taking a group seq or a message id (every
///   message, notice and commit) read and rewrote the whole chain of its overflow pages.
/// - A channel's staff (`channel_staff_devices`, run for every change of a member and every
///   user a commit adds) are found through two indexes, not by reading the channel's
///   subscribers: its owner and administrators by role, and the platform's bots.
pub(super) const SCHEMA_GROUP_INFOS: &str = "
CREATE TABLE group_infos (
    group_id    BLOB PRIMARY KEY,
    group_info  BLOB NOT NULL                     -- MLS GroupInfo of the group's epoch, ratchet tree included
);
INSERT INTO group_infos (group_id, group_info) SELECT group_id, group_info FROM groups;
ALTER TABLE groups DROP COLUMN group_info;
CREATE INDEX group_members_by_role ON group_members (group_id, role);
CREATE INDEX accounts_bots ON accounts (id) WHERE is_bot;
";

/// The joined devices of a channel's owner, administrators and bots. The join order is fixed
/// (CROSS JOIN) and the indexes named: the owner and administrators are a range of
/// `group_members_by_role`, the bots a walk of the platform's bots (`accounts_bots`), each a
/// lookup in `group_devices`. Left to itself, the planner starts from the group's devices,
/// which is a read per subscriber.
pub(super) const CHANNEL_STAFF_DEVICES: &str = "SELECT g.user_id, g.device_id
     FROM group_members m INDEXED BY group_members_by_role
     CROSS JOIN group_devices g ON g.group_id = m.group_id AND g.user_id = m.user_id
     CROSS JOIN devices d ON d.account_id = g.user_id AND d.device_id = g.device_id AND d.active = 1
     WHERE m.group_id = ?1 AND m.role IN (?2, ?3)
     UNION
     SELECT g.user_id, g.device_id
     FROM accounts a INDEXED BY accounts_bots
     CROSS JOIN group_devices g ON g.group_id = ?1 AND g.user_id = a.id
     CROSS JOIN devices d ON d.account_id = g.user_id AND d.device_id = g.device_id AND d.active = 1
     WHERE a.is_bot";

/// Who hears of a channel's membership changes besides the user concerned: the joined devices
/// of its owner, of its administrators and of its bots. Subscribers do not see one another come
/// and go (as in the Bot API's channels), so a change costs a delivery per administrator, not
/// one per subscriber: a channel of 10,000 is not 10,000 notices per join. Bots hear every
/// change, as administrators do: a bot's `chat_member` updates and its check that every
/// joiner is announced (`gateway/groups/joiners.rs`) rest on them.
fn channel_staff_devices(tx: &Connection, group_id: &[u8]) -> Result<BTreeSet<DeviceAddr>> {
    let mut stmt = tx
        .prepare_cached(CHANNEL_STAFF_DEVICES)
        .map_err(db_error("reading a channel's staff devices"))?;
    let rows = stmt
        .query_map(params![group_id, Role::OWNER.value(), Role::ADMINISTRATOR.value()], |r| {
            Ok(DeviceAddr { user_id: r.get(0)?, device_id: r.get(1)? })
        })
        .map_err(db_error("reading a channel's staff devices"))?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_error("reading a channel's staff devices"))
}

/// The active devices with a leaf in the group (a device its owner removed gets nothing more;
/// any member may commit the removal of its leaf).
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

/// Whether `device` has a leaf in the group and is active: one row read, not the group's.
fn has_leaf(tx: &Connection, group_id: &[u8], device: DeviceAddr) -> Result<bool> {
    tx.prepare_cached(
        "SELECT 1 FROM group_devices g
         JOIN devices d ON d.account_id = g.user_id AND d.device_id = g.device_id AND d.active = 1
         WHERE g.group_id = ?1 AND g.user_id = ?2 AND g.device_id = ?3",
    )
    .and_then(|mut s| s.exists(params![group_id, device.user_id, device.device_id]))
    .map_err(db_error("reading a group device"))
}

pub(super) const USERS_OWED_REMOVAL: &str = "SELECT DISTINCT m.user_id FROM group_members m INDEXED BY group_members_by_role
     CROSS JOIN group_devices g ON g.group_id = m.group_id AND g.user_id = m.user_id
     CROSS JOIN devices d ON d.account_id = g.user_id AND d.device_id = g.device_id AND d.active = 1
     WHERE m.group_id = ?1 AND m.role IN (?2, ?3)";

/// The users whose active devices still have leaves in the group although they left or were
/// banned: removals the members owe. Read from the departed members (by role), not from the
/// group's leaves: a message into a channel of 10,000 does not read 10,000 rows to find none. A
/// leaf is only ever accepted for a seated or invited member (`commit::check_commit`), and no
/// member row is deleted, so every leaf has a member row.
fn users_owed_removal(tx: &Connection, group_id: &[u8]) -> Result<BTreeSet<u64>> {
    let mut stmt = tx
        .prepare_cached(USERS_OWED_REMOVAL)
        .map_err(db_error("reading removals owed"))?;
    let rows = stmt
        .query_map(params![group_id, Role::LEFT.value(), Role::BANNED.value()], |r| r.get(0))
        .map_err(db_error("reading removals owed"))?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_error("reading removals owed"))
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
        .and_then(|mut s| s.query_row(params![user_id], |r| profile_at(r, 0, user_id)).optional())
        .map_err(db_error("reading a profile"))?
        .ok_or_else(|| PlatformError::NotFound(format!("no user with id {user_id}")))
}

/// A profile from the columns `username, display_name, is_bot, identity_key` of `accounts`,
/// the first at `at`.
fn profile_at(r: &rusqlite::Row<'_>, at: usize, user_id: u64) -> rusqlite::Result<pb::Profile> {
    Ok(pb::Profile {
        user_id,
        username: r.get(at)?,
        display_name: r.get(at + 1)?,
        is_bot: r.get(at + 2)?,
        identity_key: r.get(at + 3)?,
        ..Default::default()
    })
}

fn member_pb(tx: &Connection, user_id: u64, m: &MemberRow) -> Result<pb::GroupMember> {
    Ok(member_with(profile(tx, user_id)?, m))
}

fn member_with(user: pb::Profile, m: &MemberRow) -> pb::GroupMember {
    pb::GroupMember {
        user: Some(user).into(),
        role: m.role.into(),
        rights: if m.role == Role::ADMINISTRATOR { Some(rights_pb(m.rights)).into() } else { None.into() },
        since: m.since,
        until_date: m.until,
        ..Default::default()
    }
}

fn group_pb(tx: &Connection, group_id: &[u8]) -> Result<pb::Group> {
    group_pb_of(tx, group_id, None)
}

/// The answer to a membership action (`MembershipResponse`): the group as `group_pb` gives it,
/// but its member list only the caller and the user the action concerned. An invitation into a
/// channel of 10,000 does not answer with 10,000 profiles (GetGroup lists them all).
fn told_about(tx: &Connection, group_id: &[u8], caller: u64, target: Option<u64>) -> Result<pb::Group> {
    let mut users = vec![caller];
    users.extend(target.filter(|t| *t != caller));
    group_pb_of(tx, group_id, Some(&users))
}

/// A group with its members: all of them, or only `only` (a few users: a point query each).
pub(super) fn group_pb_of(tx: &Connection, group_id: &[u8], only: Option<&[u64]>) -> Result<pb::Group> {
    let g = group_row(tx, group_id)?.ok_or_else(|| not_found(group_id))?;
    // The members with their profiles in one query: a group of thousands is not a query each.
    let sql = |filter: &str| {
        format!(
            "SELECT m.user_id, m.role, m.rights, m.since, m.until_date, a.id, a.username, a.display_name, a.is_bot, a.identity_key
             FROM group_members m LEFT JOIN accounts a ON a.id = m.user_id
             WHERE m.group_id = ?1 {filter} ORDER BY m.since, m.user_id"
        )
    };
    let mut rows = Vec::new();
    match only {
        None => rows = member_rows(&mut tx.prepare_cached(&sql("")).map_err(db_error("reading group members"))?, &[&group_id])?,
        Some(users) => {
            let mut stmt = tx.prepare_cached(&sql("AND m.user_id = ?2")).map_err(db_error("reading group members"))?;
            for user in users {
                rows.extend(member_rows(&mut stmt, &[&group_id, user])?);
            }
            // In the order of the whole list.
            rows.sort_by_key(|(user_id, m, _)| (m.since, *user_id));
        }
    }
    let members = rows
        .into_iter()
        .map(|(user_id, m, user)| {
            let user = user.ok_or_else(|| PlatformError::NotFound(format!("no user with id {user_id}")))?;
            Ok(member_with(user, &m))
        })
        .collect::<Result<_>>()?;
    Ok(pb::Group {
        group_id: group_id.to_vec(),
        title: g.title,
        type_: g.group_type.into(),
        epoch: g.epoch,
        members,
        ..Default::default()
    })
}

/// The member rows `stmt` (of `group_pb_of`) yields for `bound`.
fn member_rows(stmt: &mut rusqlite::CachedStatement<'_>, bound: &[&dyn rusqlite::ToSql]) -> Result<Vec<(u64, MemberRow, Option<pb::Profile>)>> {
    stmt.query_map(bound, |r| {
        let user_id: u64 = r.get(0)?;
        let row = MemberRow {
            role: Role::from_i32(r.get(1)?).unwrap_or_default(),
            rights: r.get(2)?,
            since: r.get(3)?,
            until: r.get(4)?,
        };
        let account: Option<u64> = r.get(5)?;
        let user = account.map(|_| profile_at(r, 6, user_id)).transpose()?;
        Ok((user_id, row, user))
    })
    .and_then(|rows| rows.collect())
    .map_err(db_error("reading group members"))
}

// ── Writing the group's order ──

fn next_seq(tx: &Connection, group_id: &[u8]) -> Result<u64> {
    tx.prepare_cached("UPDATE groups SET last_seq = last_seq + 1 WHERE group_id = ?1 RETURNING last_seq")
        .and_then(|mut s| s.query_row(params![group_id], |r| r.get(0)))
        .map_err(db_error("taking a group seq"))
}

/// Takes the next group seq and appends `d` to each device's inbox (stored once for all of
/// them); returns the seq.
fn deliver(
    tx: &Connection,
    d: &Delivery<'_>,
    to: impl IntoIterator<Item = DeviceAddr>,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<u64> {
    let group_seq = next_seq(tx, d.group_id)?;
    let to: Vec<DeviceAddr> = to.into_iter().collect();
    append_group_delivery(tx, d, group_seq, &to)?;
    delivered.extend(to);
    Ok(group_seq)
}

/// Takes the next group seq and appends `d` once for the whole group: every device with a leaf
/// but its sender reads it through its cursor (`group_log`). `joined` are those devices (and
/// the sender), to be woken; returns the seq.
fn deliver_to_group(
    tx: &Connection,
    d: &Delivery<'_>,
    joined: &BTreeSet<DeviceAddr>,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<u64> {
    let group_seq = next_seq(tx, d.group_id)?;
    group_log::append(tx, d, group_seq)?;
    delivered.extend(joined.iter().copied().filter(|a| *a != d.sender));
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
    // A join or a departure in a group takes a place in its history, as the Bot API's service
    // message (new_chat_members, left_chat_member) does; other changes, and a channel's, none.
    let is_group = group_row(tx, group_id)?.is_some_and(|g| g.group_type != pb::GroupType::CHANNEL);
    let mut to = match is_group {
        true => joined_devices(tx, group_id)?,
        false => channel_staff_devices(tx, group_id)?,
    };
    to.extend(active_devices(tx, user_id)?);
    let message_id = if is_group && seated(old.role) != seated(new.role) {
        let id = next_group_message_id(tx, group_id)?;
        admin::record_message(tx, group_id, id, cause, now)?;
        id
    } else {
        0
    };
    let d = Delivery {
        group_id,
        kind: DeliveryKind::MEMBERSHIP,
        epoch,
        sender: actor,
        message_id,
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

pub(super) fn next_group_message_id(tx: &Connection, group_id: &[u8]) -> Result<u64> {
    tx.prepare_cached("UPDATE groups SET last_message_id = last_message_id + 1 WHERE group_id = ?1 RETURNING last_message_id")
        .and_then(|mut s| s.query_row(params![group_id], |r| r.get(0)))
        .map_err(db_error("assigning a group message id"))
}

mod admin;
mod commit;
mod key_packages;
mod members;
mod send;
pub use admin::{LinkSettings, LINK_PREFIX};
pub(super) use admin::{SCHEMA_ADMIN, SCHEMA_INVITED_BY};
pub(super) use key_packages::SCHEMA_DROP_UNPROVEN;
pub(super) use key_packages::SCHEMA_KEY_PACKAGE_EXPIRY;
pub(in crate::platform::store) use send::reserve_group_message_id;
#[cfg(test)]
mod tests;
