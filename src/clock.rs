//! The one wall clock of all three programs: whole seconds since the Unix epoch, as the Bot
//! API's `date` fields and the platform's timestamps count them.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch; 0 if the system clock is set before 1970.
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// How far ahead of this clock a recorded time may lie and still count as made now: two
/// machines' clocks, or one clock stepped by NTP, differ by this much without anything wrong.
pub const FUTURE_TOLERANCE_SECS: i64 = 300;

/// Whether something made at `made_at` is due at `now`, on a period of `period` seconds (a
/// rotation, a renewal, an expiry, a self-update): the period has passed, or `made_at` lies
/// ahead of `now` beyond [`FUTURE_TOLERANCE_SECS`]. That is a time written while the clock was
/// ahead and since set back; waiting for the clock to catch up would leave a key unrotated
/// for as long as the clock was wrong, so every schedule counts it as due now.
pub fn is_due(made_at: i64, now: i64, period: i64) -> bool {
    made_at > now.saturating_add(FUTURE_TOLERANCE_SECS) || now.saturating_sub(made_at) >= period
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_time_from_a_clock_that_was_ahead_is_due_and_a_recent_one_is_not() {
        let (now, day) = (1_800_000_000, 86_400);
        assert!(!super::is_due(now - day + 1, now, day));
        assert!(super::is_due(now - day, now, day));
        // Made a year ahead, then the clock went back: due now, not in a year.
        assert!(super::is_due(now + 365 * day, now, day));
        // A few seconds ahead (another machine's clock, an NTP step) is only recent.
        assert!(!super::is_due(now + 60, now, day));
    }

    #[test]
    fn counts_seconds_since_1970() {
        // 2020-01-01 and 2100-01-01: any sane clock is in between.
        assert!((1_577_836_800..4_102_444_800).contains(&super::unix_now()));
    }
}
