//! Hand-over: the entries a batch takes are marked handed to the platform before anything
//! about them is sent; from then on their callers wait for the platform's answer instead of
//! withdrawing them.

use crate::gateway::runtime::unix_now;
use crate::gateway::store::{outbox, Store};
use super::SendError;

/// Marks the entries not handed yet as handed to the platform (one writer job, none when all
/// are): from here their callers wait for the platform's answer, since the reservation that
/// comes next is already a call about them. Entries withdrawn meanwhile are left out.
pub(super) fn hand_over(store: &Store, entries: Vec<outbox::OutboxEntry>) -> Result<Vec<outbox::OutboxEntry>, SendError> {
    if entries.iter().all(|e| e.handed) {
        return Ok(entries);
    }
    let now = unix_now();
    // Relaxed: a hand-over lost to a power failure is made again after the restart (the
    // reservation it precedes answers the same ids again); the seal's synced commit carries it.
    Ok(store.write_relaxed(move |c| {
        let mut kept = Vec::with_capacity(entries.len());
        for mut entry in entries {
            if entry.handed || outbox::mark_handed(c, entry.id, now)? {
                entry.handed = true;
                kept.push(entry);
            }
        }
        Ok(kept)
    })?)
}
