//! Group messages: SendGroupMessage orders, checks and fans out one MLS message (an
//! application message here; a commit through `commit.rs`), idempotent per (sender device,
//! client message id); and the group message ids reserved before a message is encrypted.

use std::collections::HashMap;

use super::commit::accept_commit;
use super::*;
use crate::platform::store::group_log::Listening;
use crate::platform::store::reservations::{self, Found, Target};
use crate::platform::store::Reserved;

impl Store {
    /// Orders, checks and fans out one group message (see the module comment and
    /// docs/groups.md). Returns the outcome and the devices whose inbox received entries.
    /// `listening`: who may be woken (the inbox hub), so that waking a group's readers costs
    /// the smaller of the group and the listeners.
    pub fn send_group_message(
        &self,
        caller: DeviceAddr,
        m: GroupMessage,
        now: i64,
        listening: &dyn Listening,
    ) -> Result<(GroupSendOutcome, BTreeSet<DeviceAddr>)> {
        self.write_tx("a group message", |tx| {
            let mut delivered = BTreeSet::new();
            let mut reads = GroupReads::new(listening);
            let outcome = send_in(tx, caller, &m, now, &mut delivered, &mut reads)?;
            Ok((outcome, delivered))
        })
    }

    /// Several application messages of one device, in order, in one transaction: each checked,
    /// ordered and fanned out as [`Store::send_group_message`] does. A commit is refused here
    /// (its GroupInfo and Welcome travel with it alone).
    pub fn send_group_messages(
        &self,
        caller: DeviceAddr,
        messages: &[GroupMessage],
        now: i64,
        listening: &dyn Listening,
    ) -> Result<(Vec<GroupSendOutcome>, BTreeSet<DeviceAddr>)> {
        self.write_tx("group messages", |tx| {
            let mut delivered = BTreeSet::new();
            let mut reads = GroupReads::new(listening);
            let outcomes = messages
                .iter()
                .map(|m| match m.message.content_type() {
                    ContentType::Application => send_in(tx, caller, m, now, &mut delivered, &mut reads),
                    _ => Ok(GroupSendOutcome::Rejected("only application messages travel in a batch: send a commit alone".into())),
                })
                .collect::<Result<_>>()?;
            Ok((outcomes, delivered))
        })
    }
}

/// What the checks of an application message read about its group and its sender, read once
/// per group in a transaction. Within one transaction of application messages of one device
/// (`send_group_messages`: a commit is refused there) none of it changes, so the reads of the
/// first message stand for the rest: reading every member's seat again for each of 50 messages
/// to 20 members was most of a batch's statements.
struct GroupReads<'a> {
    groups: HashMap<Vec<u8>, GroupRead>,
    /// Who may be woken (`group_log::Listening`).
    listening: &'a dyn Listening,
}

struct GroupRead {
    group: Option<GroupRow>,
    me: Option<MemberRow>,
    /// Read by the first application message.
    fanout: Option<Fanout>,
}

/// What holds an application message of the group back, and whether its readers were woken.
struct Fanout {
    /// The readers listening were woken by an earlier message of this transaction.
    woken: std::cell::Cell<bool>,
    /// Users with a leaf whose seat is gone (left, banned or never recorded).
    pending: BTreeSet<u64>,
    /// Removed devices of users still seated that keep a leaf (and its epoch secrets).
    removed: Vec<DeviceAddr>,
}

impl<'a> GroupReads<'a> {
    fn new(listening: &'a dyn Listening) -> GroupReads<'a> {
        GroupReads { groups: HashMap::new(), listening }
    }

    /// The group's row and the sender's seat (`None` for either that does not exist).
    fn seat(&mut self, tx: &Connection, group_id: &[u8], user_id: u64) -> Result<(Option<GroupRow>, Option<MemberRow>)> {
        let read = self.read(tx, group_id, user_id)?;
        Ok((read.group.clone(), read.me))
    }

    /// Who an application message of the group goes to (after `seat`).
    fn fanout(&mut self, tx: &Connection, group_id: &[u8], user_id: u64) -> Result<&Fanout> {
        let read = self.read(tx, group_id, user_id)?;
        if read.fanout.is_none() {
            read.fanout = Some(Fanout::read(tx, group_id)?);
        }
        Ok(read.fanout.as_ref().expect("read above"))
    }

    fn read(&mut self, tx: &Connection, group_id: &[u8], user_id: u64) -> Result<&mut GroupRead> {
        if !self.groups.contains_key(group_id) {
            let read = GroupRead { group: group_row(tx, group_id)?, me: member(tx, group_id, user_id)?, fanout: None };
            self.groups.insert(group_id.to_vec(), read);
        }
        Ok(self.groups.get_mut(group_id).expect("inserted above"))
    }
}

impl Fanout {
    fn read(tx: &Connection, group_id: &[u8]) -> Result<Fanout> {
        let pending = users_owed_removal(tx, group_id)?;
        let removed = removed_devices_with_leaves(tx, group_id)?.into_iter().filter(|d| !pending.contains(&d.user_id)).collect();
        Ok(Fanout { woken: std::cell::Cell::new(false), pending, removed })
    }
}

/// One group message inside the caller's transaction: repeated, stale, or checked and fanned
/// out (`delivered` gains the devices whose inbox received it). `reads` holds what earlier
/// messages of the same transaction read (empty for a message alone).
fn send_in(
    tx: &Connection,
    caller: DeviceAddr,
    m: &GroupMessage,
    now: i64,
    delivered: &mut BTreeSet<DeviceAddr>,
    reads: &mut GroupReads<'_>,
) -> Result<GroupSendOutcome> {
    if let Some(previous) = previous_send(tx, caller, m)? {
        return Ok(previous);
    }
    let (group, me) = reads.seat(tx, &m.group_id, caller.user_id)?;
    let (Some(group), Some(me)) = (group, me) else {
        return Err(not_found(&m.group_id));
    };
    if m.message.epoch().as_u64() != group.epoch {
        return Ok(GroupSendOutcome::Stale { epoch: group.epoch });
    }
    let outcome = match m.message.content_type() {
        ContentType::Application => {
            let listening = reads.listening;
            let fanout = reads.fanout(tx, &m.group_id, caller.user_id)?;
            accept_application(tx, caller, &me, &group, fanout, listening, m, now, delivered)?
        }
        ContentType::Commit => accept_commit(tx, caller, &me, &group, m.clone_parts(), now, delivered)?,
        ContentType::Proposal => {
            GroupSendOutcome::Rejected("standalone proposals are not accepted: send a commit with the proposals inline".into())
        }
    };
    if let GroupSendOutcome::Ok { epoch, group_seq, message_id, date } = &outcome {
        tx.prepare_cached(
            "INSERT INTO sent_group_messages (sender_id, sender_device, client_message_id, group_id, epoch,
                                              group_seq, message_id, date)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut s| s.execute(params![caller.user_id, caller.device_id, m.client_message_id, m.group_id, epoch, group_seq, message_id, date]))
        .map_err(db_error("recording a group message"))?;
    }
    Ok(outcome)
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

/// Takes the next message id of a group for one client message id of a member that may send
/// there (idempotent: a repeat answers the same id). The caller checks the id's length.
pub(in crate::platform::store) fn reserve_group_message_id(
    tx: &Connection,
    caller: DeviceAddr,
    cmid: &str,
    group_id: &[u8],
    now: i64,
) -> Result<Reserved> {
    use Reserved;
    match reservations::find(tx, caller, cmid, Target::Group(group_id))? {
        Found::Id { message_id, date } => return Ok(Reserved::Id { message_id, date }),
        Found::Elsewhere(why) => return Ok(Reserved::Refused(why)),
        Found::None => {}
    }
    let Some(me) = member(tx, group_id, caller.user_id)? else {
        return Ok(Reserved::Refused("not a member of this group".into()));
    };
    if !seated(me.role) || !has_leaf(tx, group_id, caller)? {
        return Ok(Reserved::Refused("this device has no leaf in the group".into()));
    }
    let message_id = next_group_message_id(tx, group_id)?;
    reservations::record(tx, caller, cmid, Target::Group(group_id), message_id, now)?;
    Ok(Reserved::Id { message_id, date: now })
}

#[allow(clippy::too_many_arguments)]
fn accept_application(
    tx: &Connection,
    caller: DeviceAddr,
    me: &MemberRow,
    group: &GroupRow,
    fanout: &Fanout,
    listening: &dyn Listening,
    m: &GroupMessage,
    now: i64,
    delivered: &mut BTreeSet<DeviceAddr>,
) -> Result<GroupSendOutcome> {
    let Fanout { woken, pending, removed } = fanout;
    // An open cursor: an active device with a leaf (`group_log`).
    if !group_log::is_reader(tx, &m.group_id, caller)? || !seated(me.role) {
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
    // A removed device keeps its epoch secrets: no message goes out until its leaf is gone.
    if !pending.is_empty() || !removed.is_empty() {
        return Ok(GroupSendOutcome::RemovalsPending { users: pending.iter().copied().collect(), devices: removed.clone() });
    }
    // A reserved message keeps the id and date its content was signed with.
    let (message_id, now) = match reservations::find(tx, caller, &m.client_message_id, Target::Group(&m.group_id))? {
        Found::Id { message_id, date } => (message_id, date),
        Found::Elsewhere(why) => return Ok(GroupSendOutcome::Rejected(why)),
        Found::None => (next_group_message_id(tx, &m.group_id)?, now),
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
    let group_seq = next_seq(tx, &m.group_id)?;
    group_log::append(tx, &d, group_seq)?;
    // Every listening reader once per transaction: the rows after the first come with it.
    if !woken.replace(true) {
        delivered.extend(group_log::readers_to_wake(tx, &m.group_id, caller, listening)?);
    }
    admin::record_message(tx, &m.group_id, message_id, caller.user_id, now)?;
    Ok(GroupSendOutcome::Ok { epoch: group.epoch, group_seq, message_id, date: now })
}
