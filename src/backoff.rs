//! The one retry delay of every loop that retries (the gateway's inbox, outbox and webhook,
//! the management bot, `e2e-chat`, the HTTP accept loop): it starts at `first`, doubles up to
//! `max`, and starts again at `first` after a success.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub const fn new(first: Duration, max: Duration) -> Backoff {
        Backoff { first, max, next: first }
    }

    /// The delay to wait after this failure; the following one is twice as long, up to `max`.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        delay
    }

    /// After a success: the next failure waits `first` again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_maximum_and_resets() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(500), ms(3000));
        let delays: Vec<_> = (0..5).map(|_| b.next_delay()).collect();
        assert_eq!(delays, [ms(500), ms(1000), ms(2000), ms(3000), ms(3000)]);
        b.reset();
        assert_eq!(b.next_delay(), ms(500));
    }
}
