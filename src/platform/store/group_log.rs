//! A group's deliveries to the whole group: each is one inbox row, not one per device. The row
//! belongs to no device (`account_id` 0) and names its group; every device with a leaf reads it
//! through its cursor in that group (`group_cursors`), and acknowledges it by moving the cursor.
//! A post into a channel of 10,000 writes one row where it wrote 10,000 (decision 0133).
//!
//! A cursor is a window of the inbox's seqs: from the seq when the device's leaf joined
//! (exclusive) to the seq of the commit that removed it (inclusive; open while it has a leaf).
//! The inbox's seqs are one order for private rows and group rows, so a device reads both
//! merged, in the order they were sent, and the client sees the same envelopes, seqs and Acks
//! as before. Deliveries to some devices only (a Welcome, a notice, a join request) keep a row
//! per device (`inbox::append_group_delivery`).
//!
//! Acknowledgement is cumulative per cursor: a client acknowledges an envelope only once it has
//! stored it and everything its stream gave before it, so acknowledging seq S of a group means
//! every delivery of that group up to S. The group's rows below every cursor are released.

use std::collections::BTreeSet;

use rusqlite::{params, Connection, OptionalExtension};

use super::inbox::{store_delivery, GroupDelivery};
use super::DeviceAddr;
use crate::platform::error::{db_error, Result};

/// Step 17 of `platform.db`: the cursors, opened for every active device that has a leaf now,
/// at the inbox's last seq (what it has not read yet stays in its own rows). A removed device
/// reads nothing more, so it gets none: it would hold the group's rows forever.
pub(super) const SCHEMA_GROUP_CURSORS: &str = "
CREATE TABLE group_cursors (
    id             INTEGER PRIMARY KEY,
    group_id       BLOB NOT NULL,
    user_id        INTEGER NOT NULL,
    device_id      INTEGER NOT NULL,
    from_seq       INTEGER NOT NULL,  -- the inbox seq when the leaf joined: it reads what comes after
    until_seq      INTEGER,           -- the seq of the commit that removed the leaf; NULL while it has one
    acked_through  INTEGER NOT NULL   -- every delivery of the group up to here is acknowledged
);
CREATE INDEX group_cursors_by_device ON group_cursors (user_id, device_id, group_id);
CREATE INDEX group_cursors_by_ack ON group_cursors (group_id, acked_through);
CREATE INDEX group_cursors_open ON group_cursors (group_id, user_id, device_id) WHERE until_seq IS NULL;
CREATE INDEX devices_inactive ON devices (account_id, device_id) WHERE active = 0;
CREATE INDEX inbox_group_rows ON inbox (group_id, seq) WHERE account_id = 0;
INSERT INTO group_cursors (group_id, user_id, device_id, from_seq, acked_through)
    SELECT g.group_id, g.user_id, g.device_id, s.seq, s.seq
    FROM group_devices g JOIN devices d ON d.account_id = g.user_id AND d.device_id = g.device_id AND d.active = 1,
         (SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'inbox'), 0) AS seq) s;
";

/// The devices listening now (the inbox hub's streams and in-process readers), as far as a
/// row for a whole group needs them: waking its readers costs the smaller of the group and of
/// the listeners (`readers_to_wake`), not the group's size.
pub trait Listening {
    /// How many devices listen (at most; one may be counted twice).
    fn count(&self) -> usize;
    /// The devices listening.
    fn devices(&self) -> Vec<DeviceAddr>;
}

/// Every reader listens: the store's tests see every reader told.
#[cfg(test)]
pub struct EveryReader;

#[cfg(test)]
impl Listening for EveryReader {
    fn count(&self) -> usize {
        usize::MAX
    }

    fn devices(&self) -> Vec<DeviceAddr> {
        Vec::new()
    }
}

/// The readers of a group to wake after a row for the whole group, but `sender`: those with
/// an open cursor (an active device with a leaf) that may be listening. The group's readers
/// are read up to one more than there are listeners; a group larger than that is checked
/// listener by listener instead. Each way is a search of an index, no row of `devices` read.
pub(super) fn readers_to_wake(tx: &Connection, group_id: &[u8], sender: DeviceAddr, listening: &dyn Listening) -> Result<Vec<DeviceAddr>> {
    let listeners = listening.count();
    let limit = i64::try_from(listeners.saturating_add(1)).unwrap_or(i64::MAX);
    let mut stmt = tx
        .prepare_cached(
            "SELECT user_id, device_id FROM group_cursors INDEXED BY group_cursors_open
             WHERE group_id = ?1 AND until_seq IS NULL LIMIT ?2",
        )
        .map_err(db_error("reading a group's cursors"))?;
    let readers = stmt
        .query_map(params![group_id, limit], |r| Ok(DeviceAddr { user_id: r.get(0)?, device_id: r.get(1)? }))
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(db_error("reading a group's cursors"))?;
    let readers = match readers.len() <= listeners {
        true => readers,
        false => {
            let mut listening_readers = Vec::new();
            for device in listening.devices() {
                if is_reader(tx, group_id, device)? {
                    listening_readers.push(device);
                }
            }
            listening_readers
        }
    };
    Ok(readers.into_iter().filter(|d| *d != sender).collect())
}

/// True when `device` reads the group's rows now (an open cursor).
pub(super) fn is_reader(tx: &Connection, group_id: &[u8], device: DeviceAddr) -> Result<bool> {
    tx.prepare_cached(
        "SELECT 1 FROM group_cursors INDEXED BY group_cursors_open
         WHERE group_id = ?1 AND user_id = ?2 AND device_id = ?3 AND until_seq IS NULL",
    )
    .and_then(|mut s| s.exists(params![group_id, device.user_id, device.device_id]))
    .map_err(db_error("reading a group's cursors"))
}

/// The inbox's last seq: the one the row just appended took.
fn last_seq(tx: &Connection) -> Result<i64> {
    tx.prepare_cached("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'inbox'), 0)")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(db_error("reading the inbox's last seq"))
}

/// Stores `d`, seq `group_seq` of its group, as one row that every cursor of the group but its
/// sender's reads.
pub(super) fn append(tx: &Connection, d: &GroupDelivery<'_>, group_seq: u64) -> Result<()> {
    let delivery = store_delivery(tx, d, group_seq, 1)?;
    tx.prepare_cached(
        "INSERT INTO inbox (account_id, device_id, sender_id, sender_device, message_id, date, client_message_id,
                            ciphertext, group_id, delivery_id)
         VALUES (0, 0, 0, 0, 0, 0, '', X'', ?1, ?2)",
    )
    .and_then(|mut s| s.execute(params![d.group_id, delivery]))
    .map_err(db_error("appending to a group's rows"))?;
    // The sender does not read its own row: a cursor with nothing else unread moves past it,
    // or the row would wait for the sender's next acknowledgement to be released.
    if let Some(cursor) = open_cursor_of(tx, d.group_id, d.sender)? {
        advance(tx, d.group_id, d.sender, cursor, cursor.acked_through)?;
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct Cursor {
    id: i64,
    acked_through: i64,
    until_seq: Option<i64>,
}

fn open_cursor_of(tx: &Connection, group_id: &[u8], addr: DeviceAddr) -> Result<Option<Cursor>> {
    tx.prepare_cached(
        "SELECT id, acked_through, until_seq FROM group_cursors
         WHERE user_id = ?1 AND device_id = ?2 AND group_id = ?3 AND until_seq IS NULL",
    )
    .and_then(|mut s| {
        s.query_row(params![addr.user_id, addr.device_id, group_id], |r| {
            Ok(Cursor { id: r.get(0)?, acked_through: r.get(1)?, until_seq: r.get(2)? })
        })
        .optional()
    })
    .map_err(db_error("reading a group cursor"))
}

/// Opens the device's cursor in the group at the inbox's last seq, unless it has one open (a
/// leaf that replaces its own keeps reading where it was).
pub(super) fn open(tx: &Connection, group_id: &[u8], addr: DeviceAddr) -> Result<()> {
    if open_cursor_of(tx, group_id, addr)?.is_some() {
        return Ok(());
    }
    let seq = last_seq(tx)?;
    tx.prepare_cached(
        "INSERT INTO group_cursors (group_id, user_id, device_id, from_seq, acked_through) VALUES (?1, ?2, ?3, ?4, ?4)",
    )
    .and_then(|mut s| s.execute(params![group_id, addr.user_id, addr.device_id, seq]))
    .map_err(db_error("opening a group cursor"))?;
    Ok(())
}

/// Closes the device's cursor in the group at the inbox's last seq: it still reads what came
/// up to here (the commit that removed its leaf), nothing after.
pub(super) fn close(tx: &Connection, group_id: &[u8], addr: DeviceAddr) -> Result<()> {
    let Some(cursor) = open_cursor_of(tx, group_id, addr)? else { return Ok(()) };
    let until = last_seq(tx)?;
    tx.prepare_cached("UPDATE group_cursors SET until_seq = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![cursor.id, until]))
        .map_err(db_error("closing a group cursor"))?;
    settle(tx, Cursor { until_seq: Some(until), ..cursor }, cursor.acked_through)?;
    release(tx, group_id)?;
    Ok(())
}

/// Closes every open cursor of a device that reads nothing more (deactivated).
pub(super) fn close_all(tx: &Connection, addr: DeviceAddr) -> Result<()> {
    for group_id in groups_of(tx, addr, true)? {
        close(tx, &group_id, addr)?;
    }
    Ok(())
}

/// Drops every cursor of a device removed for good, and releases what only it held.
pub(super) fn drop_all(tx: &Connection, addr: DeviceAddr) -> Result<()> {
    let groups = groups_of(tx, addr, false)?;
    tx.prepare_cached("DELETE FROM group_cursors WHERE user_id = ?1 AND device_id = ?2")
        .and_then(|mut s| s.execute(params![addr.user_id, addr.device_id]))
        .map_err(db_error("dropping a device's group cursors"))?;
    for group_id in groups {
        release(tx, &group_id)?;
    }
    Ok(())
}

fn groups_of(tx: &Connection, addr: DeviceAddr, open_only: bool) -> Result<BTreeSet<Vec<u8>>> {
    let mut stmt = tx
        .prepare_cached(
            "SELECT group_id FROM group_cursors WHERE user_id = ?1 AND device_id = ?2 AND (?3 = 0 OR until_seq IS NULL)",
        )
        .map_err(db_error("reading a device's group cursors"))?;
    let rows = stmt
        .query_map(params![addr.user_id, addr.device_id, open_only], |r| r.get(0))
        .map_err(db_error("reading a device's group cursors"))?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_error("reading a device's group cursors"))
}

/// Acknowledges the group row `seq` for `addr`: its cursor in that group moves to it (and past
/// the device's own rows right after). Returns the row's group, for the caller to `release`,
/// when `seq` is a group row in one of the device's cursors; `None` otherwise.
pub(super) fn acknowledge(tx: &Connection, addr: DeviceAddr, seq: i64) -> Result<Option<Vec<u8>>> {
    let found = tx
        .prepare_cached(
            "SELECT c.group_id, c.id, c.acked_through, c.until_seq
             FROM inbox b JOIN group_cursors c
               ON c.group_id = b.group_id AND c.user_id = ?2 AND c.device_id = ?3
              AND c.from_seq < b.seq AND b.seq <= COALESCE(c.until_seq, 9223372036854775807)
             WHERE b.seq = ?1 AND b.account_id = 0",
        )
        .and_then(|mut s| {
            s.query_row(params![seq, addr.user_id, addr.device_id], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, Cursor { id: r.get(1)?, acked_through: r.get(2)?, until_seq: r.get(3)? }))
            })
            .optional()
        })
        .map_err(db_error("acknowledging a group row"))?;
    let Some((group_id, cursor)) = found else { return Ok(None) };
    if seq > cursor.acked_through {
        advance(tx, &group_id, addr, cursor, seq)?;
    }
    Ok(Some(group_id))
}

/// Moves the cursor to `through`, and on past the device's own rows that follow (it never reads
/// them), up to the next row of another sender or the group's last row.
fn advance(tx: &Connection, group_id: &[u8], addr: DeviceAddr, cursor: Cursor, through: i64) -> Result<()> {
    let next_other: Option<i64> = tx
        .prepare_cached(
            "SELECT b.seq FROM inbox b INDEXED BY inbox_group_rows JOIN group_deliveries d ON d.id = b.delivery_id
             WHERE b.account_id = 0 AND b.group_id = ?1 AND b.seq > ?2 AND NOT (d.sender_id = ?3 AND d.sender_device = ?4)
             ORDER BY b.seq LIMIT 1",
        )
        .and_then(|mut s| s.query_row(params![group_id, through, addr.user_id, addr.device_id], |r| r.get(0)).optional())
        .map_err(db_error("reading a group's rows"))?;
    let to = match next_other {
        Some(seq) => seq - 1,
        None => tx
            .prepare_cached("SELECT MAX(seq) FROM inbox INDEXED BY inbox_group_rows WHERE account_id = 0 AND group_id = ?1")
            .and_then(|mut s| s.query_row(params![group_id], |r| r.get::<_, Option<i64>>(0)))
            .map_err(db_error("reading a group's rows"))?
            .map_or(through, |last| last.max(through)),
    };
    if to <= cursor.acked_through {
        return Ok(());
    }
    tx.prepare_cached("UPDATE group_cursors SET acked_through = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![cursor.id, to]))
        .map_err(db_error("moving a group cursor"))?;
    settle(tx, cursor, to)
}

/// A closed cursor acknowledged through its end is done: dropped. The caller releases what it
/// held (`release`): an Ack once for all the groups it moved.
fn settle(tx: &Connection, cursor: Cursor, acked_through: i64) -> Result<()> {
    if cursor.until_seq.is_some_and(|until| acked_through >= until) {
        tx.prepare_cached("DELETE FROM group_cursors WHERE id = ?1")
            .and_then(|mut s| s.execute(params![cursor.id]))
            .map_err(db_error("dropping a group cursor"))?;
    }
    Ok(())
}

/// Deletes the group's rows that every cursor of the group has passed (all of them when it has
/// none); the inbox's trigger releases their deliveries. Two index reads when nothing is due.
pub(super) fn release(tx: &Connection, group_id: &[u8]) -> Result<usize> {
    let horizon: Option<i64> = tx
        .prepare_cached("SELECT MIN(acked_through) FROM group_cursors INDEXED BY group_cursors_by_ack WHERE group_id = ?1")
        .and_then(|mut s| s.query_row(params![group_id], |r| r.get(0)))
        .map_err(db_error("reading a group's cursors"))?;
    tx.prepare_cached("DELETE FROM inbox WHERE account_id = 0 AND group_id = ?1 AND seq <= ?2")
        .and_then(|mut s| s.execute(params![group_id, horizon.unwrap_or(i64::MAX)]))
        .map_err(db_error("releasing a group's rows"))
}

#[cfg(test)]
mod tests {
    use crate::platform::store::tests::{query_plan, store};

    /// A device's read takes its own rows by `inbox_by_device` and each of its cursors' rows by
    /// `inbox_group_rows`: nothing is scanned, so it costs what it returns, not the group's
    /// size or the inbox's.
    #[test]
    fn the_inbox_read_searches_by_device_and_by_cursor() {
        let (_d, store) = store();
        let conn = store.lock();
        let plan = query_plan(&conn, &super::super::inbox::READ_INBOX, rusqlite::params![1, 1, 0, 64]);
        let has = |needle: &str| plan.iter().any(|step| step.starts_with("SEARCH") && step.contains(needle));
        assert!(has("inbox_by_device"), "own rows by device: {plan:#?}");
        assert!(has("group_cursors_by_device"), "the device's cursors: {plan:#?}");
        assert!(has("inbox_group_rows"), "each cursor's rows: {plan:#?}");
        assert!(!plan.iter().any(|step| step.starts_with("SCAN") && !step.contains("(subquery-")), "nothing scanned: {plan:#?}");
    }
}
