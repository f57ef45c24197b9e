//! `in/<n>`: batches of envelopes decrypted and committed in one writer job each, then
//! acknowledged (`AckWindow`); what the import returns it left to do (`FollowUp`) runs after
//! that (`follow_up`).

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{select, Receiver};
use rusqlite::Connection;

use crate::backoff::Backoff;
use crate::demand::Work;
use crate::e2e::follow_up::FollowUp;
use crate::e2e::{self, inbound};
use crate::gateway::botapi::types::UserView;
use crate::gateway::groups;
use crate::gateway::metrics::BotMetrics;
use crate::gateway::runtime::BotShared;
use crate::gateway::ctx::Ctx;
use crate::gateway::sender_check;
use crate::gateway::store::{queue, Result as StoreResult, StoreError};
use crate::wire::in_flight::Window;
use crate::wire::platform::{AckRequest, InboxEnvelope};

use super::follow_up::{self, Owed};
use super::upkeep::{hourly_upkeep, SignedPrekeyUpkeep};
use super::{BATCH, RECONNECT_MAX, RECONNECT_START};

/// Acknowledgements sent and not yet answered, at most (`wire::in_flight::Window`).
const ACKS_IN_FLIGHT: usize = 4;

/// `in/<n>` as work on demand (`crate::demand`): started by `ins/<n>` after it queues an
/// envelope, by the upkeep ticker when the hourly upkeep is due, and at the bot's start; ends
/// after `idle` without an envelope. What must outlive one run (the signed prekey's upkeep,
/// what the imports left owed) is kept here.
pub struct Importer {
    /// Weak: `BotShared` holds the thread's start (through `ins/<n>`'s demand), and must
    /// still be dropped.
    shared: Weak<BotShared>,
    rx: Receiver<InboxEnvelope>,
    state: Mutex<ImportState>,
    idle: Duration,
}

struct ImportState {
    upkeep: SignedPrekeyUpkeep,
    owed: Owed,
    /// The start-of-runtime steps ran (key packages, interrupted joins, self-updates due).
    started: bool,
}

impl Importer {
    pub fn new(shared: &Arc<BotShared>, rx: Receiver<InboxEnvelope>, upkeep: SignedPrekeyUpkeep, idle: Duration) -> Importer {
        let state = ImportState { upkeep, owed: Owed::default(), started: false };
        Importer { shared: Arc::downgrade(shared), rx, state: Mutex::new(state), idle }
    }

    /// Whether the hourly upkeep or a timed check is due while no `in/<n>` runs (one that
    /// runs does them itself).
    pub fn upkeep_due(&self) -> bool {
        self.state.try_lock().map(|s| Instant::now() >= s.upkeep.next_check || s.owed.is_due()).unwrap_or(false)
    }
}

impl Work for Importer {
    fn run(&self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        import_loop(&shared, &self.rx, &mut state, self.idle);
    }

    fn pending(&self) -> bool {
        // A stopping bot's run returns at once: it must not be run again and again.
        !self.rx.is_empty() && self.shared.upgrade().is_some_and(|s| !s.is_stopping())
    }

    fn failed(&self, name: &str) {
        if let Some(shared) = self.shared.upgrade() {
            shared.thread_failed(name);
        }
    }
}

/// `in/<n>`: decrypts and commits batches of envelopes, then acknowledges them and runs what
/// they left to do; keeps the signed prekey up. Returns when the bot stops, the stream thread
/// is gone, or no envelope came for `idle` (and no upkeep or check is due).
fn import_loop(shared: &BotShared, rx: &Receiver<InboxEnvelope>, state: &mut ImportState, idle: Duration) {
    if !state.started {
        state.started = true;
        // Key packages for members who add the bot by Welcome; joins and checks interrupted
        // by a stop or a failure are taken up again.
        groups::keep_key_packages(&shared.ctx());
        follow_up::checks(&shared.ctx(), &mut state.owed, crate::clock::unix_now());
    }
    // Acknowledgements sent and not read yet: `in/<n>` imports the next batch while the
    // platform deletes what the last one acknowledged (behind other senders' calls, one can
    // take a platform tens of milliseconds).
    let mut acks = Window::new(ACKS_IN_FLIGHT, format!("bot @{}: an inbox ack (harmless: unacknowledged envelopes come again and are skipped by the cursor)", shared.username));
    loop {
        let wait = state.owed.wait(idle.min(state.upkeep.next_check.saturating_duration_since(Instant::now())));
        let first = select! {
            recv(rx) -> r => match r {
                Ok(envelope) => envelope,
                Err(_) => return,
            },
            recv(shared.stop_signal()) -> _ => return,
            default(wait) => {
                if Instant::now() < state.upkeep.next_check && !state.owed.is_due() {
                    return; // idle
                }
                upkeep(shared, state);
                continue;
            }
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(e) => batch.push(e),
                Err(_) => break,
            }
        }
        let seqs: Vec<u64> = batch.iter().map(|e| e.seq).collect();
        if !settle_group_commits(&shared.ctx(), &batch) {
            return; // stopping
        }
        let Some(follow_ups) = import_reported(&shared.ctx(), batch) else {
            return; // the store is closing: the process is stopping
        };
        acks.push(shared.platform.start_ack(&AckRequest { seqs, ..Default::default() }));
        follow_up::run(&shared.ctx(), follow_ups, &mut state.owed);
        // A busy inbox never times out above.
        follow_up::run_due(&shared.ctx(), &mut state.owed, crate::clock::unix_now());
        if Instant::now() >= state.upkeep.next_check {
            upkeep(shared, state);
        }
    }
}

/// The hourly upkeep when it is due, then the timed checks (hourly, or when one is due) and
/// the owed removals when due.
fn upkeep(shared: &BotShared, state: &mut ImportState) {
    let now = crate::clock::unix_now();
    if Instant::now() >= state.upkeep.next_check {
        state.upkeep.check(&shared.ctx());
        hourly_upkeep(&shared.ctx());
        follow_up::checks(&shared.ctx(), &mut state.owed, now);
    }
    follow_up::run_due(&shared.ctx(), &mut state.owed, now);
}

/// Settles our unanswered group commits before a batch with messages of those groups is
/// imported: importing first would fail on the epoch the commit started and drop those
/// messages. False when stopping.
fn settle_group_commits(cx: &Ctx, batch: &[InboxEnvelope]) -> bool {
    retry_until_stopped(cx, "before importing the group's messages", || groups::settle_pending(cx, batch)).is_some()
}

/// Checks the devices that start a private session in the batch (`sender_check`): importing
/// first would drop their first messages. None when stopping.
fn check_senders(cx: &Ctx, batch: &[InboxEnvelope]) -> Option<sender_check::Refused> {
    retry_until_stopped(cx, "before importing first messages", || sender_check::check_senders(cx, batch))
}

/// Runs `attempt` until it succeeds, waiting with backoff while the platform cannot be
/// reached; each failure is logged with what waits on it. None when stopping.
fn retry_until_stopped<T, E: std::fmt::Display>(cx: &Ctx, waiting: &str, mut attempt: impl FnMut() -> Result<T, E>) -> Option<T> {
    let mut backoff = Backoff::new(RECONNECT_START, RECONNECT_MAX);
    loop {
        match attempt() {
            Ok(done) => return Some(done),
            Err(e) => {
                let delay = backoff.next_delay();
                log::warn!("bot @{}: {e}; retrying in {delay:?} {waiting}", cx.name);
                if cx.stop.recv_timeout(delay).is_ok() || cx.is_stopping() {
                    return None;
                }
            }
        }
    }
}

/// Imports a batch (`import_batch`) after checking the devices that start a session in it
/// (`check_senders`), and reports what it came to: updates counted, dropped envelopes counted
/// and shown in `/healthz`, security alerts raised, identity changes counted. Returns what the
/// batch left to do after its commit; `None` when stopping.
pub(crate) fn import_reported(cx: &Ctx, batch: Vec<InboxEnvelope>) -> Option<Vec<FollowUp>> {
    let refused = check_senders(cx, &batch)?;
    let BatchImport::Committed { outcomes, queued, follow_ups } = import_batch(cx, batch, refused) else {
        return None;
    };
    BotMetrics::add(&cx.metrics.updates_received, queued);
    for outcome in &outcomes {
        match outcome {
            Imported::Stored => {}
            Imported::Dropped(why) => {
                BotMetrics::add(&cx.metrics.decrypt_failures, 1);
                cx.status.set_error(format!("inbox: {why}"));
            }
            Imported::Alert(what) => cx.security_alert(what),
            Imported::Replayed(why) => {
                log::warn!("bot @{}: {why}", cx.name);
                BotMetrics::add(&cx.metrics.replayed_commits, 1);
            }
            Imported::IdentityChanged(why) => {
                log::warn!("bot @{}: {why}", cx.name);
                BotMetrics::add(&cx.metrics.identity_changes, 1);
                cx.status.set_error(format!("inbox: {why}"));
            }
        }
    }
    Some(follow_ups)
}

/// What importing one envelope did.
#[derive(Debug)]
enum Imported {
    /// Stored, or a repeat skipped: acknowledged.
    Stored,
    /// The envelope failed on its own (undecryptable, malformed, refused): rolled back alone,
    /// then acknowledged and dropped with a warning. Why, for `/healthz`.
    Dropped(String),
    /// It brought a group leaf nobody vouched for (`e2e::leaf`), or started a session from a
    /// device whose certificate does not verify (`sender_check`): rolled back alone (nothing
    /// of it merged), acknowledged, and raised as a security alert. What, for the alert.
    Alert(String),
    /// It started a session from a device of a user whose identity key is no longer the
    /// pinned one: acknowledged and kept out of the queue. Why, for the log and `/healthz`.
    IdentityChanged(String),
    /// A group commit for an epoch already passed (the platform replayed it): acknowledged,
    /// dropped and counted; the group is not rejoined. Why, for the log.
    Replayed(String),
}

/// What importing a batch came to.
enum BatchImport {
    /// Committed: each envelope's outcome, in order, how many updates the batch queued (for
    /// `/metrics`), and what the stored envelopes left to do.
    Committed { outcomes: Vec<Imported>, queued: u64, follow_ups: Vec<FollowUp> },
    /// The store is closing (the process is stopping): nothing was committed.
    Stopping,
}

/// Imports a batch in one writer job. When the storage itself fails (disk full, I/O error),
/// nothing was committed and nothing may be acknowledged: the same batch is tried again with a
/// growing delay, and meanwhile the bounded channel holds the stream back.
fn import_batch(cx: &Ctx, batch: Vec<InboxEnvelope>, refused: sender_check::Refused) -> BatchImport {
    let refused = Arc::new(refused);
    let mut backoff = Backoff::new(RECONNECT_START, RECONNECT_MAX);
    loop {
        if cx.is_stopping() {
            return BatchImport::Stopping;
        }
        let (envelopes, name, me) = (batch.clone(), cx.name.to_string(), cx.me());
        let identity_key = cx.identity.public_key();
        let refused = Arc::clone(&refused);
        let result = cx.store.write(move |c| {
            // The writer runs one job at a time, so the depth moves only by this batch here.
            let before = queue::depth(c)?;
            let mut follow_ups = Vec::new();
            let outcomes = import_all(c, &envelopes, &me, &identity_key, &name, &refused, &mut follow_ups)?;
            let queued = queue::depth(c)?.saturating_sub(before).max(0) as u64;
            Ok(BatchImport::Committed { outcomes, queued, follow_ups })
        });
        match result {
            Ok(committed) => return committed,
            Err(StoreError::Closed) => return BatchImport::Stopping,
            Err(e) => {
                let delay = backoff.next_delay();
                log::error!("bot @{}: cannot store an inbox batch ({e}); retrying in {delay:?}", cx.name);
                cx.status.set_error(format!("inbox: {e}"));
                let _ = cx.stop.recv_timeout(delay);
            }
        }
    }
}

/// Imports the envelopes of a batch, in order. First all of them in one savepoint: almost
/// every batch goes through, and a savepoint per envelope was a tenth of a group message's
/// import (`sqlite3PagerSavepoint`). If one fails, that attempt is rolled back whole and the
/// batch imported again envelope by envelope (`import_one`), so a failing envelope is rolled
/// back alone, exactly as before. A failure of the storage fails the batch (`Err`). What the
/// stored envelopes leave to do is added to `follow` (a rolled-back envelope's is taken out).
fn import_all(
    c: &Connection,
    envelopes: &[InboxEnvelope],
    me: &UserView,
    identity_key: &[u8; 32],
    bot_name: &str,
    refused: &sender_check::Refused,
    follow: &mut Vec<FollowUp>,
) -> StoreResult<Vec<Imported>> {
    c.prepare_cached("SAVEPOINT batch")?.execute([])?;
    let mut failed = None;
    for env in envelopes {
        if let Err(e) = import_inner(c, env, me, identity_key, follow) {
            failed = Some(e);
            break;
        }
    }
    match failed {
        None => {
            c.prepare_cached("RELEASE batch")?.execute([])?;
            return Ok(envelopes.iter().map(|_| Imported::Stored).collect());
        }
        // The writer rolls the whole job back.
        Some(e) if is_storage_failure(&e) => return Err(e),
        Some(_) => {
            follow.clear();
            c.prepare_cached("ROLLBACK TO batch")?.execute([])?;
            c.prepare_cached("RELEASE batch")?.execute([])?;
        }
    }
    envelopes.iter().map(|env| import_one(c, env, me, identity_key, bot_name, refused, follow)).collect()
}

/// Imports one envelope inside its own savepoint. A failure of the envelope (undecryptable,
/// malformed, refused) rolls back only this envelope, which is then acknowledged and dropped
/// with a warning (`Imported::Dropped`); a failure of the storage fails the whole batch (`Err`).
fn import_one(
    c: &Connection,
    env: &InboxEnvelope,
    me: &UserView,
    identity_key: &[u8; 32],
    bot_name: &str,
    refused: &sender_check::Refused,
    follow: &mut Vec<FollowUp>,
) -> StoreResult<Imported> {
    // Cached statements: parsing these two on every envelope was a tenth of an import.
    c.prepare_cached("SAVEPOINT envelope")?.execute([])?;
    let owed_before = follow.len();
    let r = import_inner(c, env, me, identity_key, follow);
    if r.is_err() {
        // What this envelope wrote is undone (a group kept meanwhile is of a version gone).
        follow.truncate(owed_before);
        c.prepare_cached("ROLLBACK TO envelope")?.execute([])?;
    }
    c.prepare_cached("RELEASE envelope")?.execute([])?;
    match r {
        Ok(()) => Ok(Imported::Stored),
        Err(e) if is_storage_failure(&e) => Err(e),
        Err(StoreError::E2e(e @ (e2e::E2eError::UntrustedLeaf { .. } | e2e::E2eError::Unvouched { .. }))) => Ok(Imported::Alert(format!(
            "{e} (message {} from user {} device {}); nothing of it was kept",
            env.message_id, env.sender_user_id, env.sender_device_id
        ))),
        Err(StoreError::E2e(e @ e2e::E2eError::ReplayedCommit { .. })) => {
            Ok(Imported::Replayed(format!("{e} (message {} from user {} device {})", env.message_id, env.sender_user_id, env.sender_device_id)))
        }
        Err(StoreError::E2e(e2e::E2eError::UnverifiedDevice { user_id, device_id })) => {
            let (id, why) = (env.message_id, refused.get(&(user_id, device_id)));
            Ok(match why {
                Some(why @ e2e::Refusal::BadCertificate) => Imported::Alert(format!(
                    "user {user_id} device {device_id} started a session, but {why}; message {id} dropped"
                )),
                Some(why @ e2e::Refusal::IdentityChanged) => Imported::IdentityChanged(format!(
                    "message {id} from user {user_id} device {device_id} kept out of the queue: {why} \
                     (set accept_identity_changes for this bot to accept it)"
                )),
                _ => {
                    let msg = format!("dropped message {id} from user {user_id} device {device_id}: its certificate could not be checked");
                    log::warn!("bot @{bot_name}: {msg}");
                    Imported::Dropped(msg)
                }
            })
        }
        Err(e) => {
            let msg = format!(
                "dropped message {} from user {} device {}: {e}",
                env.message_id, env.sender_user_id, env.sender_device_id
            );
            log::warn!("bot @{bot_name}: {msg}");
            Ok(Imported::Dropped(msg))
        }
    }
}

/// True when an import failed because of the database, not because of the envelope. A
/// constraint violation is the envelope's doing (its data broke a rule); anything else SQLite
/// reports (I/O error, full disk, busy, read-only) would fail for any envelope.
fn is_storage_failure(e: &StoreError) -> bool {
    let db = match e {
        StoreError::Db(db) | StoreError::E2e(e2e::E2eError::Db(db)) => db,
        // A failed commit stored nothing: retry the batch, as for any database failure.
        StoreError::Closed | StoreError::CommitFailed(_) => return true,
        _ => return false,
    };
    !matches!(db, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}

/// One envelope inside the batch's job: a repeat is skipped; a group delivery goes to
/// `groups::import`, a private one to `private::import`.
fn import_inner(
    c: &Connection,
    env: &InboxEnvelope,
    me: &UserView,
    identity_key: &[u8; 32],
    follow: &mut Vec<FollowUp>,
) -> StoreResult<()> {
    if inbound::is_repeat(c, env.seq, env.sender_user_id, &env.client_message_id)? {
        log::debug!("skipping repeated envelope seq {}", env.seq);
        return Ok(());
    }
    if env.group.is_some() {
        inbound::accept(c, env.seq, env.sender_user_id, &env.client_message_id)?;
        return crate::gateway::groups::import(c, env, me, follow);
    }
    super::private::import(c, env, me, identity_key, follow)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(code: std::os::raw::c_int) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    /// Which failures keep a batch unacknowledged (retried) and which drop one envelope.
    #[test]
    fn storage_failures_are_told_from_envelope_failures() {
        for code in [rusqlite::ffi::SQLITE_FULL, rusqlite::ffi::SQLITE_IOERR, rusqlite::ffi::SQLITE_READONLY] {
            assert!(is_storage_failure(&StoreError::Db(sqlite(code))), "code {code}");
            assert!(is_storage_failure(&StoreError::E2e(e2e::E2eError::Db(sqlite(code)))), "code {code}");
        }
        assert!(is_storage_failure(&StoreError::Closed));
        assert!(!is_storage_failure(&StoreError::Db(sqlite(rusqlite::ffi::SQLITE_CONSTRAINT))));
        assert!(!is_storage_failure(&StoreError::E2e(e2e::E2eError::BadContent)));
        assert!(!is_storage_failure(&StoreError::E2e(e2e::E2eError::NoSession { user_id: 1, device_id: 1 })));
        assert!(!is_storage_failure(&StoreError::Corrupt("malformed".into())));
        assert!(is_storage_failure(&StoreError::CommitFailed("disk I/O error".into())), "a failed commit stored nothing");
    }
}

