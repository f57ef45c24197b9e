//! Messaging: sends (idempotent per sender device and client message id), acks and pruning of
//! the idempotency records; the inboxes they fill are in `inbox.rs`.

use std::collections::BTreeSet;

use rusqlite::{params, Connection, OptionalExtension};

use super::{
    AccountStatus, DeviceAddr, Outgoing, Reserved, SendBatch, SendOutcome, Store, CIPHERTEXT_MAX,
    CLIENT_MESSAGE_ID_MAX,
};
use super::group_log;
use super::inbox::{append_inbox, InboxRow};
use super::reservations::{self, Found, Target};
use crate::platform::error::{db_error, Result};

impl Store {
    /// Stores a batch of messages in one transaction. Each message is idempotent by
    /// (sender device, client message id): a repeat answers the first result and stores nothing.
    pub fn send_messages(&self, sender: DeviceAddr, messages: &[Outgoing], now: i64) -> Result<SendBatch> {
        self.write_tx("a send", |tx| {
            let mut batch = SendBatch::default();
            for m in messages {
                let outcome = send_one(tx, sender, m, now, &mut batch.delivered_to)?;
                batch.outcomes.push(outcome);
            }
            Ok(batch)
        })
    }

    /// Takes the next per-dialog id for each (client message id, recipient) before the message
    /// exists, so that its content can name it. Idempotent per sender device and client
    /// message id: a repeat, or a message already sent under that id, answers the same id.
    /// A wanted id is (client message id, recipient, group id): a private message when the
    /// group id is empty, else a group message (recipient 0).
    pub fn reserve_message_ids(&self, sender: DeviceAddr, wanted: &[(String, u64, Vec<u8>)], now: i64) -> Result<Vec<Reserved>> {
        self.write_tx("a reservation", |tx| {
            wanted
                .iter()
                .map(|(cmid, recipient, group_id)| {
                    if group_id.is_empty() {
                        reserve_one(tx, sender, cmid, *recipient, now)
                    } else if cmid.is_empty() || cmid.len() > CLIENT_MESSAGE_ID_MAX {
                        Ok(Reserved::Refused(format!("client_message_id must be 1 to {CLIENT_MESSAGE_ID_MAX} bytes")))
                    } else {
                        super::groups::reserve_group_message_id(tx, sender, cmid, group_id, now)
                    }
                })
                .collect()
        })
    }

    /// Deletes acknowledged entries of a device's inbox, and moves its cursors past the group
    /// rows acknowledged (`group_log`); returns how many existed.
    pub fn ack(&self, addr: DeviceAddr, seqs: &[u64]) -> Result<usize> {
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(db_error("starting an ack"))?;
        let mut deleted = 0;
        let mut groups = BTreeSet::new();
        {
            let mut stmt = tx
                .prepare_cached("DELETE FROM inbox WHERE seq = ?1 AND account_id = ?2 AND device_id = ?3")
                .map_err(db_error("acknowledging"))?;
            for seq in seqs {
                let Ok(seq) = i64::try_from(*seq) else { continue };
                match stmt.execute(params![seq, addr.user_id, addr.device_id]).map_err(db_error("acknowledging"))? {
                    0 => {
                        // Not a row of its own: a row of one of its groups, read by a cursor.
                        if let Some(group_id) = group_log::acknowledge(&tx, addr, seq)? {
                            groups.insert(group_id);
                            deleted += 1;
                        }
                    }
                    n => deleted += n,
                }
            }
        }
        for group_id in groups {
            group_log::release(&tx, &group_id)?;
        }
        tx.commit().map_err(db_error("committing an ack"))?;
        Ok(deleted)
    }

    /// Forgets idempotency records and reservations older than `before` (unix seconds); returns
    /// how many.
    pub fn prune_sent_records(&self, before: i64) -> Result<usize> {
        let conn = self.lock();
        let mut pruned = 0;
        for table in ["sent_messages", "reserved_messages", "sent_group_messages", "reserved_group_messages"] {
            pruned += conn
                .execute(&format!("DELETE FROM {table} WHERE date < ?1"), params![before])
                .map_err(db_error("pruning sent-message records"))?;
        }
        Ok(pruned)
    }
}

fn send_one(
    tx: &Connection,
    sender: DeviceAddr,
    m: &Outgoing,
    now: i64,
    delivered_to: &mut BTreeSet<DeviceAddr>,
) -> Result<SendOutcome> {
    if m.client_message_id.is_empty() || m.client_message_id.len() > CLIENT_MESSAGE_ID_MAX {
        return Ok(SendOutcome::Rejected(format!(
            "client_message_id must be 1 to {CLIENT_MESSAGE_ID_MAX} bytes, got {}",
            m.client_message_id.len()
        )));
    }
    let previous: Option<(u64, i64)> = tx
        .prepare_cached(
            "SELECT message_id, date FROM sent_messages
             WHERE sender_id = ?1 AND sender_device = ?2 AND client_message_id = ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![sender.user_id, sender.device_id, m.client_message_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(db_error("looking up a sent message"))?;
    if let Some((message_id, date)) = previous {
        return Ok(SendOutcome::Ok { message_id, date, repeat: true });
    }
    if m.inline_session_id != 0 {
        if let Some(refused) = super::inline::refuses_answer(tx, m.inline_session_id, sender.user_id, m.recipient_id, now)? {
            return Ok(SendOutcome::Rejected(refused));
        }
    }
    let reserved = match reservations::find(tx, sender, &m.client_message_id, Target::Recipient(m.recipient_id))? {
        Found::Elsewhere(why) => return Ok(SendOutcome::Rejected(why)),
        Found::Id { message_id, date } => Some((message_id, date)),
        Found::None => None,
    };

    let recipient: Option<(bool, String)> = tx
        .prepare_cached("SELECT is_bot, status FROM accounts WHERE id = ?1")
        .and_then(|mut s| s.query_row(params![m.recipient_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db_error("looking up a recipient"))?;
    let Some((is_bot, status)) = recipient else {
        return Ok(SendOutcome::UnknownRecipient);
    };
    if is_bot && AccountStatus::parse(&status) == AccountStatus::Disabled {
        return Ok(SendOutcome::Rejected(format!("bot {} is disabled", m.recipient_id)));
    }

    let mut active: BTreeSet<u32> = BTreeSet::new();
    {
        let mut stmt = tx
            .prepare_cached("SELECT device_id FROM devices WHERE account_id = ?1 AND active = 1")
            .map_err(db_error("reading recipient devices"))?;
        let rows = stmt
            .query_map(params![m.recipient_id], |r| r.get::<_, u32>(0))
            .map_err(db_error("reading recipient devices"))?;
        for row in rows {
            active.insert(row.map_err(db_error("reading recipient devices"))?);
        }
    }
    // A message to one's own account goes to the other devices only.
    if m.recipient_id == sender.user_id {
        active.remove(&sender.device_id);
    }

    let mut given: BTreeSet<u32> = BTreeSet::new();
    for (device_id, ciphertext) in &m.ciphertexts {
        if !given.insert(*device_id) {
            return Ok(SendOutcome::Rejected(format!("two ciphertexts for device {device_id}")));
        }
        if ciphertext.is_empty() || ciphertext.len() > CIPHERTEXT_MAX {
            return Ok(SendOutcome::Rejected(format!(
                "ciphertext for device {device_id} is {} bytes; it must be 1 to {CIPHERTEXT_MAX}",
                ciphertext.len()
            )));
        }
    }
    let missing: Vec<u32> = active.difference(&given).copied().collect();
    let removed: Vec<u32> = given.difference(&active).copied().collect();
    if !missing.is_empty() || !removed.is_empty() {
        return Ok(SendOutcome::StaleDevices { missing, removed });
    }
    if active.is_empty() {
        return Ok(SendOutcome::Rejected(format!("user {} has no active devices", m.recipient_id)));
    }

    // A reserved message keeps the id and date its content was sealed with.
    let (message_id, now) = match reserved {
        Some((message_id, date)) => (message_id, date),
        None => (next_message_id(tx, sender.user_id, m.recipient_id)?, now),
    };
    for (device_id, ciphertext) in &m.ciphertexts {
        let to = DeviceAddr { user_id: m.recipient_id, device_id: *device_id };
        append_inbox(
            tx,
            &InboxRow { to, sender, message_id, date: now, client_message_id: &m.client_message_id, ciphertext },
        )?;
        delivered_to.insert(to);
    }
    tx.prepare_cached(
        "INSERT INTO sent_messages (sender_id, sender_device, client_message_id, message_id, date)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| s.execute(params![sender.user_id, sender.device_id, m.client_message_id, message_id, now]))
    .map_err(db_error("recording a sent message"))?;
    Ok(SendOutcome::Ok { message_id, date: now, repeat: false })
}

/// The next id of the dialog between two accounts.
fn next_message_id(tx: &Connection, a: u64, b: u64) -> Result<u64> {
    let (low, high) = if a <= b { (a, b) } else { (b, a) };
    tx.prepare_cached(
        "INSERT INTO dialogs (low, high, last_message_id) VALUES (?1, ?2, 1)
         ON CONFLICT (low, high) DO UPDATE SET last_message_id = last_message_id + 1
         RETURNING last_message_id",
    )
    .and_then(|mut s| s.query_row(params![low, high], |r| r.get(0)))
    .map_err(db_error("assigning a message id"))
}

fn reserve_one(tx: &Connection, sender: DeviceAddr, cmid: &str, recipient: u64, now: i64) -> Result<Reserved> {
    if cmid.is_empty() || cmid.len() > CLIENT_MESSAGE_ID_MAX {
        return Ok(Reserved::Refused(format!("client_message_id must be 1 to {CLIENT_MESSAGE_ID_MAX} bytes, got {}", cmid.len())));
    }
    let sent: Option<(u64, i64)> = tx
        .prepare_cached(
            "SELECT message_id, date FROM sent_messages WHERE sender_id = ?1 AND sender_device = ?2 AND client_message_id = ?3",
        )
        .and_then(|mut s| s.query_row(params![sender.user_id, sender.device_id, cmid], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(db_error("looking up a sent message"))?;
    if let Some((message_id, date)) = sent {
        return Ok(Reserved::Id { message_id, date });
    }
    match reservations::find(tx, sender, cmid, Target::Recipient(recipient))? {
        Found::Id { message_id, date } => return Ok(Reserved::Id { message_id, date }),
        Found::Elsewhere(why) => return Ok(Reserved::Refused(why)),
        Found::None => {}
    }
    let known: bool = tx
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM accounts WHERE id = ?1)")
        .and_then(|mut s| s.query_row(params![recipient], |r| r.get(0)))
        .map_err(db_error("looking up a recipient"))?;
    if !known {
        return Ok(Reserved::Refused(format!("no user with id {recipient}")));
    }
    let message_id = next_message_id(tx, sender.user_id, recipient)?;
    reservations::record(tx, sender, cmid, Target::Recipient(recipient), message_id, now)?;
    Ok(Reserved::Id { message_id, date: now })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::store::read_inbox;
    use crate::platform::store::tests::{device, msg, store, user};

    /// A reserved id is what the message gets when it is sent, whenever that is; reserving
    /// again answers the same id, and other messages take the ids after it.
    #[test]
    fn reserved_ids_are_kept_by_the_send_and_reservations_are_idempotent() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let bob = user(&store, "bob", 0);
        let carol = user(&store, "carol", 0);
        let r = store.reserve_message_ids(alice, &[("k1".into(), bob.user_id, vec![]), ("k2".into(), 999_999, vec![])], 40).expect("reserve");
        assert_eq!(r[0], Reserved::Id { message_id: 1, date: 40 });
        assert!(matches!(&r[1], Reserved::Refused(e) if e.contains("no user")), "{r:?}");
        let again = store.reserve_message_ids(alice, &[("k1".into(), bob.user_id, vec![])], 45).expect("again");
        assert_eq!(again, vec![Reserved::Id { message_id: 1, date: 40 }]);
        let other = store.reserve_message_ids(alice, &[("k1".into(), carol.user_id, vec![])], 45).expect("other recipient");
        assert!(matches!(&other[0], Reserved::Refused(e) if e.contains("another recipient")), "{other:?}");

        let batch = store.send_messages(alice, &[msg("m", bob.user_id, &[1]), msg("k1", bob.user_id, &[1])], 50).expect("send");
        assert_eq!(
            batch.outcomes,
            vec![
                SendOutcome::Ok { message_id: 2, date: 50, repeat: false },
                SendOutcome::Ok { message_id: 1, date: 40, repeat: false },
            ]
        );
        let after = store.reserve_message_ids(alice, &[("k1".into(), bob.user_id, vec![])], 60).expect("after the send");
        assert_eq!(after, vec![Reserved::Id { message_id: 1, date: 40 }]);
        let wrong = store.send_messages(alice, &[msg("k1", carol.user_id, &[1])], 70).expect("send");
        assert_eq!(wrong.outcomes, vec![SendOutcome::Ok { message_id: 1, date: 40, repeat: true }], "a repeat answers first");
        assert_eq!(store.prune_sent_records(100).expect("prune"), 3, "two records and the used reservation");
    }

    #[test]
    fn send_is_idempotent_and_ids_are_per_dialog() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let bob = user(&store, "bob", 0);
        let carol = user(&store, "carol", 0);
        let batch = store
            .send_messages(
                alice,
                &[msg("m1", bob.user_id, &[1]), msg("m2", bob.user_id, &[1]), msg("m1", bob.user_id, &[1])],
                50,
            )
            .expect("send");
        assert_eq!(
            batch.outcomes,
            vec![
                SendOutcome::Ok { message_id: 1, date: 50, repeat: false },
                SendOutcome::Ok { message_id: 2, date: 50, repeat: false },
                SendOutcome::Ok { message_id: 1, date: 50, repeat: true },
            ]
        );
        assert_eq!(batch.delivered_to.into_iter().collect::<Vec<_>>(), vec![bob]);
        // The other direction shares the dialog counter; another dialog starts at 1.
        let back = store.send_messages(bob, &[msg("r1", alice.user_id, &[1])], 60).expect("send");
        assert_eq!(back.outcomes[0], SendOutcome::Ok { message_id: 3, date: 60, repeat: false });
        let other = store.send_messages(alice, &[msg("m1-carol", carol.user_id, &[1])], 60).expect("send");
        assert_eq!(other.outcomes[0], SendOutcome::Ok { message_id: 1, date: 60, repeat: false });
        // A later repeat returns the first result and stores nothing new.
        let again = store.send_messages(alice, &[msg("m2", bob.user_id, &[1])], 99).expect("send");
        assert_eq!(again.outcomes[0], SendOutcome::Ok { message_id: 2, date: 50, repeat: true });
        assert!(again.delivered_to.is_empty());
        let reader = store.open_reader().expect("reader");
        let inbox = read_inbox(&reader, bob, 0, 100).expect("read");
        assert_eq!(inbox.len(), 2);
        assert!(inbox[0].seq < inbox[1].seq);
        assert_eq!(inbox[0].sender, alice);
        assert_eq!(inbox[0].sender_username, "alice");
        assert_eq!(inbox[0].client_message_id, "m1");
        assert_eq!(inbox[1].message_id, 2);
        assert_eq!(read_inbox(&reader, bob, inbox[0].seq, 100).expect("read").len(), 1);
    }

    #[test]
    fn stale_devices_store_nothing() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let (bot, _) = store.create_bot("two_dev_bot", "Two", "default", &[3; 32], None, 1).expect("create");
        let r = store.send_messages(alice, &[msg("x", bot, &[])], 1).expect("send");
        assert!(
            matches!(&r.outcomes[0], SendOutcome::Rejected(e) if e.contains("no active devices")),
            "{:?}",
            r.outcomes
        );
        store.register_bot_device(bot, &device(1, 0), 1).expect("device 1");
        store.register_bot_device(bot, &device(2, 0), 1).expect("device 2");
        let r = store.send_messages(alice, &[msg("x", bot, &[1, 3])], 1).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::StaleDevices { missing: vec![2], removed: vec![3] });
        assert!(r.delivered_to.is_empty());
        let reader = store.open_reader().expect("reader");
        assert!(read_inbox(&reader, DeviceAddr { user_id: bot, device_id: 1 }, 0, 10).expect("read").is_empty());
        // The same client message id, now complete, is accepted: a stale answer is not remembered.
        let r = store.send_messages(alice, &[msg("x", bot, &[1, 2])], 2).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::Ok { message_id: 1, date: 2, repeat: false });
        assert_eq!(r.delivered_to.len(), 2);
        store.deactivate_device(DeviceAddr { user_id: bot, device_id: 2 }).expect("deactivate");
        let r = store.send_messages(alice, &[msg("y", bot, &[1, 2])], 3).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::StaleDevices { missing: vec![], removed: vec![2] });
        let r = store.send_messages(alice, &[msg("z", 4242, &[1])], 3).expect("send");
        assert_eq!(r.outcomes[0], SendOutcome::UnknownRecipient);
        let r = store.send_messages(alice, &[msg("w", bot, &[1, 1])], 3).expect("send");
        assert!(matches!(&r.outcomes[0], SendOutcome::Rejected(_)));
        store.set_bot_status(bot, AccountStatus::Disabled).expect("disable");
        let r = store.send_messages(alice, &[msg("v", bot, &[1])], 3).expect("send");
        assert!(matches!(&r.outcomes[0], SendOutcome::Rejected(e) if e.contains("disabled")));
    }

    #[test]
    fn ack_deletes_only_own_entries() {
        let (_d, store) = store();
        let alice = user(&store, "alice", 0);
        let bob = user(&store, "bob", 0);
        store.send_messages(alice, &[msg("a", bob.user_id, &[1]), msg("b", bob.user_id, &[1])], 1).expect("send");
        let reader = store.open_reader().expect("reader");
        let inbox = read_inbox(&reader, bob, 0, 10).expect("read");
        assert_eq!(store.ack(alice, &[inbox[0].seq]).expect("ack"), 0, "alice cannot ack bob's inbox");
        assert_eq!(store.ack(bob, &[inbox[0].seq, u64::MAX]).expect("ack"), 1);
        let left = read_inbox(&reader, bob, 0, 10).expect("read");
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].client_message_id, "b");
    }
}
