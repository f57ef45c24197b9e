//! The process heap under glibc: a fixed mmap threshold (`return_large_buffers`, set by
//! `bot-gateway`'s `main`), and freed memory handed back to the kernel when an on-demand thread
//! ends (`release_freed`; a store's writer going idle is one), and once more after a burst of
//! those (`release_skipped`). Elsewhere (macOS, musl) they do nothing: those allocators keep their
//! own policy.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// glibc raises its mmap threshold each time a large buffer is freed, so later request
/// bodies and answers of up to 32 MiB come from per-thread arenas that keep their memory:
/// under `scripts/soak`'s hostile bodies the gateway's RSS crept from 28 to 80 MiB in 90 s
/// and kept growing. A fixed threshold hands every buffer over 128 KiB back when it is freed
/// (38 MiB after the same soak, falling once it ends). Call before any thread starts.
pub fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a tunable of the allocator; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
    }
}

/// Buffers larger than this are mappings of their own in `bot-gateway`: each is faulted in page
/// by page and unmapped when freed. A buffer a transfer allocates again and again (a file
/// chunk) stays under it (`e2e::file`) or is reused.
pub const MMAP_THRESHOLD: usize = 128 * 1024;

/// At most one `release_freed` does the work per this many milliseconds: a thousand bots going
/// idle together need one walk of the heap, not a thousand.
const RELEASE_EVERY_MS: u64 = 1_000;

/// Hands the whole free pages inside glibc's arenas back to the kernel (`malloc_trim`): what
/// an idle store released (its page cache) otherwise stays in the process's RSS, reused only by
/// later allocations. Cheap to call often; it runs at most once a second.
pub fn release_freed() {
    if TRIMS.due(now_ms()) {
        trim();
    }
}

/// Makes up for a skipped `release_freed`, and runs one `release_soon` asked for once the
/// asking has stopped. A thousand bots go idle together: the trims skipped in that second are
/// not needed, but what those stores and threads freed after the last one that ran stayed in
/// the arenas (1,000 idle webhook bots: 554 MiB, 432 after one more trim). Called on a tick
/// (the gateway's `upkeep` thread), so the last of a burst is trimmed too.
pub fn release_skipped() {
    let now = now_ms();
    // Both marks are taken, whichever is set.
    if TRIMS.take_skipped() | TRIMS.take_asked(now) {
        release_freed();
    }
}

/// Asks for a trim once this work has stopped: a large group's load or commit frees
/// megabytes in small pieces, which would otherwise stay in the arenas (decision 0136). The
/// first `release_skipped` tick after `RELEASE_EVERY_MS` without another ask runs it: a walk
/// of a big heap takes long (100 ms for 400 MB in small pieces) and holds each arena's lock,
/// so a busy channel asking with every message gets none until it is quiet, and while busy
/// its freed memory is reused by its next commit anyway.
pub fn release_soon() {
    TRIMS.ask(now_ms());
}

static TRIMS: Limiter = Limiter::new();

/// At most one trim per `RELEASE_EVERY_MS`, remembering that one was skipped until
/// `release_skipped` takes it (only it clears the mark, so no skip is lost to a trim that
/// ran at the same time).
struct Limiter {
    last_ms: AtomicU64,
    skipped: AtomicBool,
    /// When `release_soon` last asked (ms), 0 when nothing is asked.
    asked_ms: AtomicU64,
}

impl Limiter {
    const fn new() -> Limiter {
        Limiter { last_ms: AtomicU64::new(0), skipped: AtomicBool::new(false), asked_ms: AtomicU64::new(0) }
    }

    /// Whether a trim asked for at `now` (ms) runs; one that does not is remembered as skipped.
    fn due(&self, now: u64) -> bool {
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = now.saturating_sub(last) >= RELEASE_EVERY_MS
            && self.last_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok();
        if !due {
            self.skipped.store(true, Ordering::Relaxed);
        }
        due
    }

    /// Asks for a trim at `now` (ms), for `take_asked`.
    fn ask(&self, now: u64) {
        self.asked_ms.store(now.max(1), Ordering::Relaxed);
    }

    /// Whether a trim was asked for and no ask came for `RELEASE_EVERY_MS` until `now`,
    /// clearing the ask (an ask that comes meanwhile stays).
    fn take_asked(&self, now: u64) -> bool {
        let asked = self.asked_ms.load(Ordering::Relaxed);
        asked != 0
            && now.saturating_sub(asked) >= RELEASE_EVERY_MS
            && self.asked_ms.compare_exchange(asked, 0, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Whether a trim was skipped since the last call, clearing the mark.
    fn take_skipped(&self) -> bool {
        self.skipped.swap(false, Ordering::Relaxed)
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trim_a_second_and_a_skipped_one_is_remembered_until_one_runs() {
        let l = Limiter::new();
        assert!(l.due(10_000));
        assert!(!l.take_skipped(), "nothing skipped yet");
        assert!(!l.due(10_400), "within the second");
        assert!(!l.due(10_999));
        assert!(l.due(11_000), "a second after the last that ran");
        // The skips stay marked until taken, even after a trim that ran.
        assert!(l.take_skipped(), "remembered for release_skipped");
        assert!(!l.take_skipped(), "taken once");
    }

    #[test]
    fn a_trim_asked_for_runs_once_the_asking_has_stopped_for_a_second() {
        let l = Limiter::new();
        assert!(!l.take_asked(10_000), "nothing asked");
        l.ask(10_000);
        assert!(!l.take_asked(10_500), "asked half a second ago");
        l.ask(10_800);
        assert!(!l.take_asked(11_500), "asked again since");
        assert!(l.take_asked(11_800), "a second without an ask");
        assert!(!l.take_asked(13_000), "once");
        assert!(!l.take_skipped(), "an ask is not a skipped trim");
    }
}
