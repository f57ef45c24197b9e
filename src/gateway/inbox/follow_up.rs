//! What a committed batch left to do, run by `in/<n>` after the batch is acknowledged: the
//! import returns `FollowUp` values (`e2e::follow_up`) and `run` acts on them from one match.
//! Network calls come here, never inside the import's write job. The timed ones (joiners the
//! platform may still announce, departed users someone else may still remove, gaps a late
//! message may still fill) become due times, and `checks` runs when the first one passes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::backoff::Backoff;

use crate::e2e::follow_up::FollowUp;
use crate::gateway::groups;
use crate::gateway::ctx::Ctx;
use crate::gateway::withheld;

use super::upkeep::{replenish_prekeys, PREKEY_CHECK_EVERY};

/// How soon a join or a self-update that failed for a passing reason (the platform
/// unreachable, another member's commit first) is tried again: 5 s, doubling to 5 minutes
/// while it keeps failing (`crate::backoff`).
const RETRY_FIRST: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(300);

/// The bot's own removals (`banChatMember`, `unbanChatMember` of a member) are committed once
/// no other came for REMOVALS_QUIET, and at most REMOVALS_WAIT after the first: a run of bans
/// is one commit, whose cost grows with the group, not one per import batch (decision 0130).
/// Nobody reads in the meantime what the removed users must not: the platform refuses
/// application messages while removals are pending, and the bot's own posts commit them first
/// (`groups::departed`).
const REMOVALS_QUIET: Duration = Duration::from_millis(200);
const REMOVALS_WAIT: Duration = Duration::from_secs(1);

/// What `in/<n>` owes beyond one batch: the due times of the timed checks, and the sessions
/// started since the one-time prekeys were last counted.
pub(super) struct Owed {
    /// Unix seconds. One entry per distinct second (a burst of notes shares it); each entry
    /// goes once passed, so it holds what the last `GRACE_SECS` noted at most.
    due: BTreeSet<i64>,
    sessions_started: u32,
    /// The delay before a failed join or self-update is tried again.
    retry: Backoff,
    /// The bot's own removals not committed yet, if any.
    removals: Option<OwedRemovals>,
}

/// Removals owed: (group, user), committed at `at`, REMOVALS_QUIET after the last noted and
/// no later than REMOVALS_WAIT after `first`.
struct OwedRemovals {
    users: Vec<(Vec<u8>, u64)>,
    first: Instant,
    at: Instant,
}

impl Default for Owed {
    fn default() -> Owed {
        Owed {
            due: BTreeSet::new(),
            sessions_started: 0,
            retry: Backoff::new(RETRY_FIRST, RETRY_MAX),
            removals: None,
        }
    }
}

impl Owed {
    /// The earliest time a check is due at.
    pub(super) fn next_due(&self) -> Option<i64> {
        self.due.first().copied()
    }

    fn check_at(&mut self, at: i64) {
        self.due.insert(at);
    }

    /// When the owed removals are to be committed.
    fn removals_due(&self) -> Option<Instant> {
        self.removals.as_ref().map(|r| r.at)
    }

    /// Whether a timed check or the owed removals are due now.
    pub(super) fn is_due(&self) -> bool {
        self.next_due().is_some_and(|t| t <= crate::clock::unix_now()) || self.removals_due().is_some_and(|t| t <= Instant::now())
    }

    /// How long until a timed check or the owed removals are due, `longest` at most.
    pub(super) fn wait(&self, longest: Duration) -> Duration {
        let check = self.next_due().map_or(longest, |t| {
            Duration::from_secs(u64::try_from(t.saturating_sub(crate::clock::unix_now())).unwrap_or(0))
        });
        let removals = self.removals_due().map_or(longest, |t| t.saturating_duration_since(Instant::now()));
        longest.min(check).min(removals)
    }

    /// Removals noted at `now`: their commit waits for a quiet spell, as long as the first
    /// allows.
    fn owe_removals(&mut self, removals: Vec<(Vec<u8>, u64)>, now: Instant) {
        if removals.is_empty() {
            return;
        }
        let owed = self.removals.get_or_insert_with(|| OwedRemovals { users: Vec::new(), first: now, at: now });
        owed.users.extend(removals);
        owed.at = (now + REMOVALS_QUIET).min(owed.first + REMOVALS_WAIT);
    }

    /// The owed removals, when their commit is due at `now`.
    fn take_removals(&mut self, now: Instant) -> Option<Vec<(Vec<u8>, u64)>> {
        match self.removals_due() {
            Some(at) if at <= now => self.removals.take().map(|r| r.users),
            _ => None,
        }
    }

    /// A join or self-update failed for a passing reason: checked again after the retry delay,
    /// which grows while they keep failing; `done`: they went through, and the delay starts
    /// over.
    fn retry_unless(&mut self, done: bool, now: i64) {
        if done {
            self.retry.reset();
        } else {
            let delay = i64::try_from(self.retry.next_delay().as_secs()).unwrap_or(i64::MAX);
            self.check_at(now.saturating_add(delay));
        }
    }

    /// Whether a check is due at `now`, forgetting the due times passed.
    fn take_due(&mut self, now: i64) -> bool {
        let passed = self.due.first().is_some_and(|t| *t <= now);
        if passed {
            self.due = self.due.split_off(&now.saturating_add(1));
        }
        passed
    }
}

/// Runs what a committed batch asks for: joins (then their joiners checked after a grace),
/// the aftermath of a Welcome, the prekey stock, and the due times of the timed checks and of
/// the commit of removals this bot owes.
pub(super) fn run(cx: &Ctx, follow_ups: Vec<FollowUp>, owed: &mut Owed) {
    let now = crate::clock::unix_now();
    let (mut join, mut joined, mut removals) = (false, false, Vec::new());
    for follow_up in follow_ups {
        match follow_up {
            // The store holds the groups to join (`Invited`): one pass joins them all.
            FollowUp::Join(_) | FollowUp::Rejoin(_) => join = true,
            FollowUp::Joined(_) => joined = true,
            FollowUp::RemoveLeaves { group, users } => removals.extend(users.into_iter().map(|u| (group.clone(), u))),
            FollowUp::JoinersNoted { due, .. } | FollowUp::DepartedNoted { due, .. } | FollowUp::GapNoted { due } => owed.check_at(due),
            FollowUp::SessionStarted => owed.sessions_started += 1,
        }
    }
    if join {
        let joined = groups::join_invited(cx);
        owed.retry_unless(joined, now);
        // A join may find users in the tree the platform never seated (`joiners::joined_tree`).
        owed.check_at(now + groups::JOINER_GRACE_SECS);
    }
    if joined {
        // A Welcome used a key package, and our leaf came from it: replaced at once.
        groups::keep_key_packages(cx);
        groups::know_channel_posters(cx);
        let updated = groups::self_update_due(cx, now);
        owed.retry_unless(updated, now);
    }
    owed.owe_removals(removals, Instant::now());
    if owed.sessions_started >= PREKEY_CHECK_EVERY {
        owed.sessions_started = 0;
        if let Err(e) = replenish_prekeys(cx) {
            log::warn!("bot @{}: one-time prekey top-up failed: {e}", cx.name);
        }
    }
}

/// Runs the timed checks when one is due at `now`, and commits the owed removals when due.
pub(super) fn run_due(cx: &Ctx, owed: &mut Owed, now: i64) {
    if let Some(removals) = owed.take_removals(Instant::now()) {
        groups::commit_removals(cx, removals);
    }
    if owed.take_due(now) {
        checks(cx, owed, now);
    }
}

/// The timed checks, each a read when it has nothing to do: joins and self-updates left for
/// later, joiners never announced, departed users nobody removed, messages withheld. Run when
/// one is due, at the bot's start, and hourly.
pub(super) fn checks(cx: &Ctx, owed: &mut Owed, now: i64) {
    // What was due by now is checked here: its times go.
    owed.take_due(now);
    let done = groups::join_invited(cx) && groups::self_update_due(cx, now);
    owed.retry_unless(done, now);
    groups::report_unannounced_joiners(cx, now);
    groups::remove_overdue_departed(cx, now);
    withheld::report_withheld(cx, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_pass_once_and_in_order() {
        let mut owed = Owed::default();
        assert_eq!(owed.next_due(), None);
        owed.check_at(160);
        owed.check_at(100);
        owed.check_at(100);
        assert_eq!(owed.next_due(), Some(100));
        assert!(!owed.take_due(99), "nothing due yet");
        assert!(owed.take_due(100));
        assert_eq!(owed.next_due(), Some(160), "the later one stays");
        assert!(!owed.take_due(120), "taken once");
        assert!(owed.take_due(200));
        assert_eq!(owed.next_due(), None);
    }

    /// A join that keeps failing is tried again later and later, and from the start after
    /// one went through.
    #[test]
    fn failed_joins_are_retried_with_a_growing_delay() {
        let mut owed = Owed::default();
        let mut delays = Vec::new();
        for _ in 0..8 {
            owed.retry_unless(false, 1000);
            delays.push(owed.next_due().expect("a retry is due") - 1000);
            owed.take_due(i64::MAX);
        }
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300]);
        owed.retry_unless(true, 1000);
        assert_eq!(owed.next_due(), None, "done: nothing owed");
        owed.retry_unless(false, 1000);
        assert_eq!(owed.next_due(), Some(1005), "after a success the delay starts over");
    }

    /// Removals noted close together are committed together once a quiet spell passes, and a
    /// steady stream of them no later than REMOVALS_WAIT after the first.
    #[test]
    fn removals_wait_for_a_quiet_spell_bounded_by_the_first() {
        let (mut owed, t0) = (Owed::default(), Instant::now());
        let ms = |n: u64| Duration::from_millis(n);
        owed.owe_removals(Vec::new(), t0);
        assert_eq!(owed.removals_due(), None, "nothing noted, nothing due");
        owed.owe_removals(vec![(b"g".to_vec(), 1)], t0);
        assert_eq!(owed.removals_due(), Some(t0 + REMOVALS_QUIET));
        owed.owe_removals(vec![(b"g".to_vec(), 2)], t0 + ms(150));
        assert_eq!(owed.removals_due(), Some(t0 + ms(150) + REMOVALS_QUIET), "a later one moves the commit");
        assert_eq!(owed.take_removals(t0 + ms(200)), None, "not quiet yet");
        // One every 150 ms: never quiet, so the first one's bound decides.
        for n in 2..20u64 {
            owed.owe_removals(vec![(b"g".to_vec(), n + 1)], t0 + ms(150 * n));
        }
        assert_eq!(owed.removals_due(), Some(t0 + REMOVALS_WAIT));
        let taken = owed.take_removals(t0 + REMOVALS_WAIT).expect("due");
        assert_eq!(taken.iter().map(|(_, u)| *u).collect::<Vec<_>>(), (1..=20).collect::<Vec<_>>(), "all of them, in order");
        assert_eq!((owed.removals_due(), owed.take_removals(t0 + ms(5000))), (None, None), "taken once");
        owed.owe_removals(vec![(b"g".to_vec(), 21)], t0 + ms(5000));
        assert_eq!(owed.removals_due(), Some(t0 + ms(5000) + REMOVALS_QUIET), "a new run starts its own bound");
    }
}
