//! Message ids reserved before a message exists (`ReserveMessageIds`), so that its content can
//! vouch for its id and date: one scheme for a private message (an id of the dialog with its
//! recipient, `reserved_messages`) and a group message (an id of the group,
//! `reserved_group_messages`). A reservation belongs to a sender device and a client message
//! id: a repeat answers the same id, and the send takes it.

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use super::DeviceAddr;
use crate::platform::error::{db_error, Result};

/// What a message id is reserved for.
#[derive(Clone, Copy, Debug)]
pub(super) enum Target<'a> {
    /// A private message to this recipient.
    Recipient(u64),
    /// A message to this group.
    Group(&'a [u8]),
}

/// What a sender device holds under a client message id.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    None,
    /// Reserved for this target: the id and date its content vouches for.
    Id { message_id: u64, date: i64 },
    /// Reserved for another recipient or group: why it is refused.
    Elsewhere(String),
}

impl Target<'_> {
    /// Its table, the column naming the target, and the target's value there.
    fn columns(self) -> (&'static str, &'static str, Value) {
        match self {
            Target::Recipient(recipient) => ("reserved_messages", "recipient_id", Value::Integer(recipient as i64)),
            Target::Group(group_id) => ("reserved_group_messages", "group_id", Value::Blob(group_id.to_vec())),
        }
    }

    fn what(self) -> &'static str {
        match self {
            Target::Recipient(_) => "recipient",
            Target::Group(_) => "group",
        }
    }
}

/// The reservation `sender` made under `cmid`, as it stands for `target`.
pub(super) fn find(tx: &Connection, sender: DeviceAddr, cmid: &str, target: Target<'_>) -> Result<Found> {
    let (table, column, key) = target.columns();
    let same: Option<(bool, u64, i64)> = tx
        .prepare_cached(&format!(
            "SELECT {column} = ?4, message_id, date FROM {table}
             WHERE sender_id = ?1 AND sender_device = ?2 AND client_message_id = ?3"
        ))
        .and_then(|mut s| {
            s.query_row(params![sender.user_id, sender.device_id, cmid, key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()
        })
        .map_err(db_error("looking up a reservation"))?;
    Ok(match same {
        None => Found::None,
        Some((true, message_id, date)) => Found::Id { message_id, date },
        Some((false, ..)) => Found::Elsewhere(format!("client_message_id {cmid} was reserved for another {}", target.what())),
    })
}

/// Records that `sender` reserved `message_id` under `cmid` for `target` at `now`.
pub(super) fn record(tx: &Connection, sender: DeviceAddr, cmid: &str, target: Target<'_>, message_id: u64, now: i64) -> Result<()> {
    let (table, column, key) = target.columns();
    tx.prepare_cached(&format!(
        "INSERT INTO {table} (sender_id, sender_device, client_message_id, {column}, message_id, date)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
    ))
    .and_then(|mut s| s.execute(params![sender.user_id, sender.device_id, cmid, key, message_id, now]))
    .map_err(db_error("recording a reservation"))?;
    Ok(())
}
