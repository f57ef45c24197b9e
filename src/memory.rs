//! The process heap under glibc: a fixed mmap threshold (`return_large_buffers`, set by
//! `bot-gateway`'s `main`), and freed memory handed back to the kernel when a bot's store goes
//! idle (`release_freed`). Elsewhere (macOS, musl) both do nothing: those allocators keep
//! their own policy.

use std::sync::atomic::{AtomicU64, Ordering};

/// glibc raises its mmap threshold each time a large buffer is freed, so later request
/// bodies and answers of up to 32 MiB come from per-thread arenas that keep their memory:
/// under `scripts/soak`'s hostile bodies the gateway's RSS crept from 28 to 80 MiB in 90 s
/// and kept growing. A fixed threshold hands every buffer over 128 KiB back when it is freed
/// (38 MiB after the same soak, falling once it ends). Call before any thread starts.
pub fn return_large_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes a tunable of the allocator; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// At most one `release_freed` does the work per this many milliseconds: a thousand bots going
/// idle together need one walk of the heap, not a thousand.
const RELEASE_EVERY_MS: u64 = 1_000;

/// Hands the whole free pages inside glibc's arenas back to the kernel (`malloc_trim`): what
/// an idle store released (its page cache) otherwise stays in the process's RSS, reused only by
/// later allocations. Cheap to call often; it runs at most once a second.
pub fn release_freed() {
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let last = LAST_MS.load(Ordering::Relaxed);
    if now.saturating_sub(last) < RELEASE_EVERY_MS || LAST_MS.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's own arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
