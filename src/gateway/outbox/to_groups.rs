//! The group messages of a batch, one by one through MLS (`gateway::groups::send`), in order:
//! one that must wait holds back the rest of its group.



use crate::gateway::ctx::Sending;
use crate::gateway::runtime::unix_now;
use crate::gateway::send_wait::SendFailure;
use crate::gateway::groups::{self as group_send, GroupSend};
use crate::gateway::store::outbox;
use super::{gave_up, SendError};

/// A message to a group that keeps meeting a moving epoch is given up after this many tries.
pub(super) const MAX_GROUP_ATTEMPTS: i64 = 20;

/// Sends the group messages of a batch in order. One that must wait (the epoch moved on,
/// removals were due) stops the rest of its group's messages, so their order holds; the outbox
/// then backs off while the inbox catches up, unless the wait is over already (`Again`).
pub(super) fn send_to_groups(out: &Sending, entries: Vec<outbox::OutboxEntry>) -> Result<(), SendError> {
    let mut waiting: Vec<i64> = Vec::new();
    let mut later = None;
    for entry in entries {
        if waiting.contains(&entry.chat_id) {
            continue;
        }
        if entry.attempts >= MAX_GROUP_ATTEMPTS {
            let failure = SendFailure::GaveUp("the group kept changing under the message; it was not sent".into());
            let (e, reason) = (entry.clone(), failure.reason().to_string());
            if let Some(record) = out.store.write(move |c| outbox::give_up(c, &e, &reason, unix_now()))? {
                gave_up(out, entry.id, &record, failure);
            }
            continue;
        }
        match group_send::send(out, &entry) {
            Ok(GroupSend::Sent(sent)) => {
                out.outbox.finish(entry.id, Ok(sent));
            }
            Ok(GroupSend::GaveUp(record, failure)) => gave_up(out, entry.id, &record, failure),
            Ok(GroupSend::Withdrawn) => {}
            Ok(GroupSend::Later(why)) => {
                waiting.push(entry.chat_id);
                later = Some(why);
            }
            // The next batch, with no backoff: `send_pending` answers that it sent something.
            Ok(GroupSend::Again(why)) => {
                log::debug!("bot @{}: {why}; sending again", out.name);
                waiting.push(entry.chat_id);
            }
            // Unanswered (or the store failed): nothing more is handed to the platform now.
            Err(e) => return Err(SendError::Group(e)),
        }
    }
    match later {
        Some(why) => Err(SendError::Later(why)),
        None => Ok(()),
    }
}
