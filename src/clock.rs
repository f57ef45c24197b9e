//! The one wall clock of all three programs: whole seconds since the Unix epoch, as the Bot
//! API's `date` fields and the platform's timestamps count them.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch; 0 if the system clock is set before 1970.
pub fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_seconds_since_1970() {
        // 2020-01-01 and 2100-01-01: any sane clock is in between.
        assert!((1_577_836_800..4_102_444_800).contains(&super::unix_now()));
    }
}
