//! Groups kept loaded between calls. Loading a group decodes its whole ratchet tree and its
//! secrets: megabytes for a channel of thousands, most of what a member's message cost the
//! bot (decision 0134). So `group` keeps the group each call used, and the next call takes that
//! copy only when the database says nothing wrote the group since (`crypto::mls_versions`: a
//! fresh random version on every write, by triggers). A rollback, a restored backup, another
//! process, or any write through another copy shows as another version, and the group is
//! loaded again: the stored state stays the truth. A stale copy is never used: it would write
//! old ratchet secrets back (nonce reuse).
//!
//! A copy is taken out while a call uses it, so two threads never share one; it goes back
//! only when the call succeeded and the group is still active. A call that takes a group its
//! own thread already holds fails (`InUse`): it would load a second copy, and the first would
//! be kept over that one's writes. Bounded: at most
//! [`KEPT_BYTES`] of stored state for the whole process, the least recently used going first;
//! a gateway releases a bot's groups when it closes the bot's store ([`release`]). Not when
//! the store goes idle: a channel's posts minutes apart would load the group each time.
//! Databases in memory keep nothing (they have no name to tell them apart). Loading, changing
//! or dropping a large group frees megabytes in small pieces: it asks for a heap trim
//! (`memory::release_soon`, decision 0136).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Mutex;

use openmls::prelude::*;
use rusqlite::Connection;

use super::Result;
use crate::crypto::mls::MlsProvider;
use crate::crypto::mls_versions::{self, GroupVersion};

/// Stored bytes of the groups kept, at most: four channels of 10,000 (about 3–4 MB each).
pub const KEPT_BYTES: u64 = 16 << 20;

/// Stored state from which a group's load or change frees enough small pieces of heap to
/// hand back (`memory::release_soon`): about a channel of 4,000.
const LARGE_BYTES: u64 = 1 << 20;

/// The kept groups of every database of this process, by (database file, group id).
static KEPT: Mutex<Option<Kept>> = Mutex::new(None);

#[derive(Default)]
struct Kept {
    groups: HashMap<(String, Vec<u8>), Entry>,
    bytes: u64,
    /// Counts uses, for the least recently used.
    clock: u64,
}

struct Entry {
    at: GroupVersion,
    used: u64,
    group: MlsGroup,
}

thread_local! {
    /// The groups this thread's calls hold, by connection (its address) and group id.
    static IN_USE: RefCell<Vec<(usize, Vec<u8>)>> = const { RefCell::new(Vec::new()) };
}

/// A group held by a call on this thread, until the call ends (dropped with its `Held`).
struct InUse((usize, Vec<u8>));

impl InUse {
    fn mark(conn: &Connection, group_id: &[u8]) -> Result<InUse> {
        let key = (conn as *const Connection as usize, group_id.to_vec());
        IN_USE.with(|held| {
            let mut held = held.borrow_mut();
            if held.contains(&key) {
                return Err(super::E2eError::Mls(format!(
                    "group {}: taken again inside a call on it (a second copy would be kept over)",
                    super::rejoin::hex_start(group_id)
                )));
            }
            held.push(key.clone());
            Ok(InUse(key))
        })
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        IN_USE.with(|held| held.borrow_mut().retain(|k| *k != self.0));
    }
}

/// What the database said of a group when a call took it.
pub(super) struct Held {
    /// The database file, when the group may be kept.
    db: Option<String>,
    /// The version the copy is of.
    at: Option<GroupVersion>,
    /// The connection's changes before the call: a call that wrote nothing keeps the version.
    changes: u64,
    /// Set by `take`: the group is this call's until `Held` is dropped.
    _in_use: Option<InUse>,
}

impl Held {
    /// For a group a call makes (created, joined): nothing read yet, so `put` reads its
    /// version.
    pub(super) fn new(conn: &Connection) -> Held {
        Held { db: conn.path().filter(|p| !p.is_empty()).map(str::to_owned), at: None, changes: conn.total_changes(), _in_use: None }
    }
}

fn kept() -> std::sync::MutexGuard<'static, Option<Kept>> {
    KEPT.lock().unwrap_or_else(|e| e.into_inner())
}

/// The group for one call: the kept copy when its version is the stored one, else loaded.
/// The version is read before loading: should another connection commit in between, the copy
/// is newer than its version says, and is loaded again next time rather than trusted.
pub(super) fn take(conn: &Connection, provider: &MlsProvider<&Connection>, group_id: &[u8]) -> Result<(Option<MlsGroup>, Held)> {
    let mut held = Held { _in_use: Some(InUse::mark(conn, group_id)?), ..Held::new(conn) };
    if held.db.is_some() {
        held.at = mls_versions::read(conn, group_id)?;
    }
    let at = held.at;
    let key = held.db.clone().map(|db| (db, group_id.to_vec()));
    let entry = key.as_ref().and_then(|key| {
        let mut guard = kept();
        let kept = guard.as_mut()?;
        let entry = kept.groups.remove(key)?;
        kept.bytes -= entry.at.stored_bytes;
        Some(entry)
    });
    // A copy of another version is dropped (outside the lock: megabytes to free): it is not
    // the stored state.
    let kept_copy = entry.filter(|e| Some(e.at) == at).map(|e| e.group);
    let group = match kept_copy {
        Some(group) => Some(group),
        None => {
            if let Some(at) = at {
                freed_much(at);
            }
            MlsGroup::load(provider.storage(), &GroupId::from_slice(group_id))
                .map_err(|e| super::E2eError::Mls(format!("loading a group: {e:?}")))?
        }
    };
    Ok((group, held))
}

/// Keeps `group` after a call that succeeded with it, at the version the database has now.
pub(super) fn put(conn: &Connection, group_id: &[u8], held: Held, group: MlsGroup) -> Result<()> {
    let Some(db) = held.db else { return Ok(()) };
    if !group.is_active() {
        return Ok(());
    }
    // A call that wrote nothing keeps the version read before. One that wrote reads the
    // version its writes set, which only a transaction guarantees: written without one, each
    // write committed alone, and another process may have written since.
    let at = match (conn.total_changes() == held.changes, conn.is_autocommit()) {
        (true, _) => held.at,
        (false, false) => mls_versions::read(conn, group_id)?,
        (false, true) => None,
    };
    // Deleted, or never versioned: nothing to check a copy against.
    let Some(at) = at else { return Ok(()) };
    if Some(at) != held.at {
        freed_much(at);
    }
    // What leaves is freed after the lock is let go.
    let mut gone = Vec::new();
    let mut guard = kept();
    let kept = guard.get_or_insert_with(Kept::default);
    kept.clock += 1;
    let entry = Entry { at, used: kept.clock, group };
    kept.bytes += at.stored_bytes;
    if let Some(old) = kept.groups.insert((db, group_id.to_vec()), entry) {
        kept.bytes -= old.at.stored_bytes;
        gone.push(old);
    }
    while kept.bytes > KEPT_BYTES {
        let Some(oldest) = kept.groups.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) else { break };
        let entry = kept.groups.remove(&oldest).expect("the oldest entry");
        kept.bytes -= entry.at.stored_bytes;
        freed_much(entry.at);
        gone.push(entry);
    }
    drop(guard);
    drop(gone);
    Ok(())
}

/// A large group's tree was decoded or changed: its old pieces go back to the kernel soon.
fn freed_much(at: GroupVersion) {
    if at.stored_bytes >= LARGE_BYTES {
        crate::memory::release_soon();
    }
}

/// Drops every group kept of the database at `db` (as its connection names it): its bot
/// stopped or went away.
pub fn release(db: &str) {
    let mut gone = Vec::new();
    let mut guard = kept();
    let Some(kept) = guard.as_mut() else { return };
    let keys: Vec<_> = kept.groups.keys().filter(|(d, _)| d == db).cloned().collect();
    for key in keys {
        if let Some(entry) = kept.groups.remove(&key) {
            kept.bytes -= entry.at.stored_bytes;
            freed_much(entry.at);
            gone.push(entry);
        }
    }
    drop(guard);
}

/// The version a copy of the group is kept at, if one is.
#[cfg(test)]
pub(super) fn kept_at(conn: &Connection, group_id: &[u8]) -> Option<i64> {
    let key = (conn.path()?.to_owned(), group_id.to_vec());
    kept().as_ref()?.groups.get(&key).map(|e| e.at.version)
}
