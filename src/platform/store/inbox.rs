//! The per-device inbox: how private and group traffic is appended to it, and the ordered read
//! the Inbox stream serves. Sends (`messages.rs`) and group deliveries (`groups.rs`) both
//! append here or through `group_log.rs`, nowhere else.
//!
//! A private message has a ciphertext per device, kept in that device's inbox row. A group
//! delivery is the same for every device it goes to: it is stored once (`group_deliveries`:
//! sender, ids, ciphertext, group columns). A delivery to the whole group is one row that the
//! group's devices read through their cursors (`group_log.rs`); one to some devices (a
//! Welcome, a notice) is a row per device that only names it. A delivery counts the rows that name
//! it; a trigger releases it as they are deleted (acknowledged, a device removed, an account
//! reset), whatever deleted them. Group rows written before step 12 carry their columns
//! themselves and read as before.

use std::sync::LazyLock;

use protobuf::Enum as _;
use rusqlite::{params, Connection};

use super::{DeviceAddr, GroupEntry, InboxEntry};
use crate::wire::platform::group_delivery::Kind as DeliveryKind;
use crate::platform::error::{db_error, Result};

/// The branch of `read_inbox` that reads a device's group rows through its cursors (`group_log`): `?1, ?2` the device,
/// `?3` the seq read after, `?4` the limit. Its columns are the inbox's that the read uses.
const READ_GROUP_ROWS: &str = "SELECT b.seq, b.sender_id, b.sender_device, b.message_id, b.date, b.ciphertext,
            b.client_message_id, b.group_id, b.group_kind, b.group_seq, b.group_epoch, b.group_change, b.delivery_id
     FROM group_cursors c
     CROSS JOIN inbox b INDEXED BY inbox_group_rows
             ON b.account_id = 0 AND b.group_id = c.group_id
            AND b.seq > MAX(?3, c.acked_through) AND b.seq <= COALESCE(c.until_seq, 9223372036854775807)
     CROSS JOIN group_deliveries d ON d.id = b.delivery_id
     WHERE c.user_id = ?1 AND c.device_id = ?2 AND NOT (d.sender_id = ?1 AND d.sender_device = ?2)
     ORDER BY b.seq LIMIT ?4";

/// The read of `read_inbox`: a device's own rows and its group rows (`group_log`) merged by seq,
/// each branch limited first so that a long backlog of either is not read whole.
pub(super) static READ_INBOX: LazyLock<String> = LazyLock::new(|| {
    format!(
        // A row naming a delivery takes every column but its seq from it.
        "SELECT i.seq, COALESCE(d.sender_id, i.sender_id), COALESCE(d.sender_device, i.sender_device),
                a.username, a.display_name, a.is_bot,
                COALESCE(d.message_id, i.message_id), COALESCE(d.date, i.date),
                COALESCE(d.ciphertext, i.ciphertext), COALESCE(d.client_message_id, i.client_message_id),
                COALESCE(d.group_id, i.group_id), COALESCE(d.group_kind, i.group_kind),
                COALESCE(d.group_seq, i.group_seq), COALESCE(d.group_epoch, i.group_epoch),
                CASE WHEN d.id IS NULL THEN i.group_change ELSE d.group_change END, g.title, g.type
         FROM (SELECT * FROM (SELECT seq, sender_id, sender_device, message_id, date, ciphertext, client_message_id,
                                     group_id, group_kind, group_seq, group_epoch, group_change, delivery_id
                              FROM inbox WHERE account_id = ?1 AND device_id = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4)
               UNION ALL
               SELECT * FROM ({group_rows})) i
              LEFT JOIN group_deliveries d ON d.id = i.delivery_id
              LEFT JOIN accounts a ON a.id = COALESCE(d.sender_id, i.sender_id)
              LEFT JOIN groups g ON g.group_id = COALESCE(d.group_id, i.group_id)
         ORDER BY i.seq LIMIT ?4",
        group_rows = READ_GROUP_ROWS
    )
});

/// Up to `limit` entries of a device's inbox with `seq > after`, in order: its own rows and
/// the rows of its groups it has a cursor for.
pub fn read_inbox(conn: &Connection, addr: DeviceAddr, after: u64, limit: usize) -> Result<Vec<InboxEntry>> {
    let mut stmt = conn.prepare_cached(&READ_INBOX).map_err(db_error("reading an inbox"))?;
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

/// Step 12 of `platform.db`: group deliveries stored once, named by the inbox rows of the
/// devices they go to (`delivery_id`), each counting the rows that still name it.
pub(super) const SCHEMA_GROUP_DELIVERIES: &str = "
CREATE TABLE group_deliveries (
    id                 INTEGER PRIMARY KEY,
    sender_id          INTEGER NOT NULL,
    sender_device      INTEGER NOT NULL,
    message_id         INTEGER NOT NULL,
    date               INTEGER NOT NULL,
    client_message_id  TEXT NOT NULL,
    ciphertext         BLOB NOT NULL,
    group_id           BLOB NOT NULL,
    group_kind         INTEGER NOT NULL,
    group_seq          INTEGER NOT NULL,
    group_epoch        INTEGER NOT NULL,
    group_change       BLOB,
    refs               INTEGER NOT NULL
);
ALTER TABLE inbox ADD COLUMN delivery_id INTEGER;
CREATE TRIGGER inbox_delivery_release AFTER DELETE ON inbox WHEN OLD.delivery_id IS NOT NULL BEGIN
    UPDATE group_deliveries SET refs = refs - 1 WHERE id = OLD.delivery_id;
    DELETE FROM group_deliveries WHERE id = OLD.delivery_id AND refs <= 0;
END;
";

/// One private message's ciphertext for one device.
pub(super) struct InboxRow<'a> {
    pub to: DeviceAddr,
    pub sender: DeviceAddr,
    pub message_id: u64,
    pub date: i64,
    pub client_message_id: &'a str,
    pub ciphertext: &'a [u8],
}

/// One delivery of a group's order, the same for every device it goes to (`GroupDelivery`
/// without its seq and what the `groups` row holds).
pub(super) struct GroupDelivery<'a> {
    pub group_id: &'a [u8],
    pub kind: DeliveryKind,
    pub epoch: u64,
    pub sender: DeviceAddr,
    pub message_id: u64,
    pub date: i64,
    pub client_message_id: &'a str,
    pub ciphertext: &'a [u8],
    /// MEMBERSHIP: the encoded `MembershipChange`.
    pub change: Option<&'a [u8]>,
}

/// Appends a private message to a device's inbox.
pub(super) fn append_inbox(tx: &Connection, row: &InboxRow<'_>) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO inbox (account_id, device_id, sender_id, sender_device, message_id, date, client_message_id, ciphertext)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
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
        ])
    })
    .map_err(db_error("appending to an inbox"))?;
    Ok(())
}

/// Stores `d`, seq `group_seq` of its group, once and appends it to the inbox of each device
/// in `to`.
pub(super) fn append_group_delivery(tx: &Connection, d: &GroupDelivery<'_>, group_seq: u64, to: &[DeviceAddr]) -> Result<()> {
    if to.is_empty() {
        return Ok(());
    }
    let delivery = store_delivery(tx, d, group_seq, to.len())?;
    // The row's own columns are the delivery's: zeros and empties here, NOT NULL since step 1.
    let mut append = tx
        .prepare_cached(
            "INSERT INTO inbox (account_id, device_id, sender_id, sender_device, message_id, date, client_message_id,
                                ciphertext, delivery_id)
             VALUES (?1, ?2, 0, 0, 0, 0, '', X'', ?3)",
        )
        .map_err(db_error("appending to an inbox"))?;
    for addr in to {
        append.execute(params![addr.user_id, addr.device_id, delivery]).map_err(db_error("appending to an inbox"))?;
    }
    Ok(())
}

/// Stores `d`, seq `group_seq` of its group, for `refs` rows that will name it; returns its id.
pub(super) fn store_delivery(tx: &Connection, d: &GroupDelivery<'_>, group_seq: u64, refs: usize) -> Result<i64> {
    tx.prepare_cached(
        "INSERT INTO group_deliveries (sender_id, sender_device, message_id, date, client_message_id, ciphertext,
                                       group_id, group_kind, group_seq, group_epoch, group_change, refs)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )
    .and_then(|mut s| {
        s.insert(params![
            d.sender.user_id,
            d.sender.device_id,
            d.message_id,
            d.date,
            d.client_message_id,
            d.ciphertext,
            d.group_id,
            d.kind.value(),
            group_seq,
            d.epoch,
            d.change,
            refs as i64,
        ])
    })
    .map_err(db_error("storing a group delivery"))
}
