//! What `/healthz` reports about one bot, kept true by the threads that know: connection,
//! refusal, the last error and security alert, failed threads, the platform's clock.

use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use crate::wire::rpc;

/// What `/healthz` reports, kept true by the threads that know.
#[derive(Default)]
pub struct Status {
    pub connected: AtomicBool,
    /// The platform refuses this runtime's credential (token revoked, bot disabled, or its
    /// device removed): nothing more is sent or received.
    pub revoked: AtomicBool,
    /// The refusal is because the bot's owner removed this runtime's device (`/removedevice`).
    pub device_removed: AtomicBool,
    /// Why the platform refused the credential, once it did.
    pub refusal: Mutex<Option<rpc::Refusal>>,
    pub last_error: Mutex<Option<String>>,
    /// The last security alert (a group leaf nobody vouched for, refused) and its date.
    pub security_alert: Mutex<Option<(i64, String)>>,
    /// Threads of this bot that panicked (their short names): the bot is unhealthy.
    pub failed_threads: Mutex<Vec<String>>,
    /// The platform's clock minus ours, in seconds, as its last `UploadPrekeys` answer said
    /// (`None` before the first, or from a platform that does not say).
    pub clock_offset: Mutex<Option<i64>>,
}

/// A clock further than this from the platform's is warned about and shown in `/healthz`: the
/// platform refuses credentials signed more than 5 minutes off, and schedules drift with it.
pub const CLOCK_OFFSET_WARN_SECS: i64 = 60;

impl Status {
    pub fn set_error(&self, e: impl Into<String>) {
        *self.last_error.lock().expect("status lock") = Some(e.into());
    }

    /// Notes the platform's time `server_time` (0: not said) against ours `now`; a clock
    /// further off than [`CLOCK_OFFSET_WARN_SECS`] is logged when first seen so.
    pub fn note_platform_time(&self, username: &str, server_time: i64, now: i64) {
        if server_time == 0 {
            return;
        }
        let offset = server_time.saturating_sub(now);
        let before = self.clock_offset.lock().unwrap_or_else(|e| e.into_inner()).replace(offset);
        let far = |o: i64| o.abs() > CLOCK_OFFSET_WARN_SECS;
        if far(offset) && !before.is_some_and(far) {
            log::warn!(
                "bot @{username}: this machine's clock is {}s {} the platform's; set it right (NTP): the platform \
                 refuses credentials more than 300s off, and key rotations are dated by this clock",
                offset.abs(),
                if offset < 0 { "ahead of" } else { "behind" }
            );
        }
    }
}
