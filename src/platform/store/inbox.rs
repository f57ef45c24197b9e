//! The per-device inbox: the one insert path of private and group traffic, and the ordered
//! read the Inbox stream serves. Sends (`messages.rs`) and group deliveries (`groups.rs`) both
//! append here.

use rusqlite::{params, Connection};

use super::{DeviceAddr, GroupEntry, InboxEntry};
use crate::platform::error::{db_error, Result};

/// Up to `limit` entries of a device's inbox with `seq > after`, in order.
pub fn read_inbox(conn: &Connection, addr: DeviceAddr, after: u64, limit: usize) -> Result<Vec<InboxEntry>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT i.seq, i.sender_id, i.sender_device, a.username, a.display_name, a.is_bot,
                    i.message_id, i.date, i.ciphertext, i.client_message_id,
                    i.group_id, i.group_kind, i.group_seq, i.group_epoch, i.group_change, g.title, g.type
             FROM inbox i LEFT JOIN accounts a ON a.id = i.sender_id
                          LEFT JOIN groups g ON g.group_id = i.group_id
             WHERE i.account_id = ?1 AND i.device_id = ?2 AND i.seq > ?3
             ORDER BY i.seq LIMIT ?4",
        )
        .map_err(db_error("reading an inbox"))?;
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = stmt
        .query_map(params![addr.user_id, addr.device_id, after, limit], |r| {
            Ok(InboxEntry {
                seq: r.get(0)?,
                sender: DeviceAddr { user_id: r.get(1)?, device_id: r.get(2)? },
                sender_username: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                sender_display_name: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                sender_is_bot: r.get::<_, Option<bool>>(5)?.unwrap_or(false),
                message_id: r.get(6)?,
                date: r.get(7)?,
                ciphertext: r.get(8)?,
                client_message_id: r.get(9)?,
                group: match r.get::<_, Option<Vec<u8>>>(10)? {
                    None => None,
                    Some(group_id) => Some(GroupEntry {
                        group_id,
                        kind: r.get(11)?,
                        group_seq: r.get(12)?,
                        epoch: r.get(13)?,
                        change: r.get(14)?,
                        title: r.get::<_, Option<String>>(15)?.unwrap_or_default(),
                        group_type: r.get::<_, Option<i32>>(16)?.unwrap_or_default(),
                    }),
                },
            })
        })
        .map_err(db_error("reading an inbox"))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_error("reading an inbox"))
}

/// The group columns of an inbox row (`GroupDelivery` without what the `groups` row holds).
#[derive(Debug, Clone)]
pub(super) struct GroupColumns<'a> {
    pub group_id: &'a [u8],
    pub kind: i32,
    pub group_seq: u64,
    pub epoch: u64,
    /// MEMBERSHIP: the encoded `MembershipChange`.
    pub change: Option<&'a [u8]>,
}

/// One inbox entry to append: a private message's ciphertext for one device, or a group
/// delivery (`group` set).
pub(super) struct InboxRow<'a> {
    pub to: DeviceAddr,
    pub sender: DeviceAddr,
    pub message_id: u64,
    pub date: i64,
    pub client_message_id: &'a str,
    pub ciphertext: &'a [u8],
    pub group: Option<GroupColumns<'a>>,
}

/// Appends one entry to a device's inbox (the one insert path of private and group traffic).
pub(super) fn append_inbox(tx: &Connection, row: &InboxRow<'_>) -> Result<()> {
    let g = row.group.as_ref();
    tx.prepare_cached(
        "INSERT INTO inbox (account_id, device_id, sender_id, sender_device, message_id, date,
                            client_message_id, ciphertext, group_id, group_kind, group_seq, group_epoch, group_change)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )
    .and_then(|mut s| {
        s.execute(params![
            row.to.user_id,
            row.to.device_id,
            row.sender.user_id,
            row.sender.device_id,
            row.message_id,
            row.date,
            row.client_message_id,
            row.ciphertext,
            g.map(|g| g.group_id),
            g.map(|g| g.kind),
            g.map(|g| g.group_seq),
            g.map(|g| g.epoch),
            g.and_then(|g| g.change),
        ])
    })
    .map_err(db_error("appending to an inbox"))?;
    Ok(())
}
