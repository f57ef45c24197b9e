//! What the page shows, held for the web server: the chat view (`tui::view::View`, the model
//! the terminal draws) with a version that every change bumps. A page long-polls for a
//! version newer than the one it has (`Page::newer`) and gets the view whole as JSON.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::super::super::tui::view::View;

/// The model and its waiters.
pub struct Page {
    state: Mutex<State>,
    changed: Condvar,
    /// This process's name for its versions: a page that polled another process (before a
    /// restart) gets the view at once rather than waiting for a version it will never see.
    instance: String,
}

struct State {
    view: View,
    version: u64,
    /// The server is stopping: no poll waits any longer.
    closing: bool,
}

impl Page {
    pub fn new(view: View) -> Page {
        let instance = crate::crypto::hex_encode(&crate::crypto::random_bytes::<8>());
        Page { state: Mutex::new(State { view, version: 1, closing: false }), changed: Condvar::new(), instance }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the view; nothing changes, so no poll is answered.
    pub fn read<T>(&self, look: impl FnOnce(&View) -> T) -> T {
        look(&self.lock().view)
    }

    /// Changes the view; every waiting poll is answered.
    pub fn update<T>(&self, change: impl FnOnce(&mut View) -> T) -> T {
        let mut state = self.lock();
        let out = change(&mut state.view);
        state.version += 1;
        self.changed.notify_all();
        out
    }

    /// The view as JSON once its version is newer than `after` (of `instance`), or when `wait`
    /// has passed, or at once when the server is stopping.
    pub fn newer(&self, instance: &str, after: u64, wait: Duration) -> Value {
        let deadline = Instant::now() + wait;
        let mut state = self.lock();
        while instance == self.instance && state.version <= after && !state.closing {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self.changed.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        json!({ "instance": self.instance, "version": state.version, "view": state.view.to_json() })
    }

    /// Ends every poll now and every later one at once (the server is stopping).
    pub fn close(&self) {
        self.lock().closing = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::tui::view::ChatKey;

    fn page() -> Page {
        Page::new(View::new("alice", ChatKey::User(7), "@bot", "bot @bot"))
    }

    #[test]
    fn a_poll_waits_for_a_newer_version_and_a_change_answers_it() {
        let page = std::sync::Arc::new(page());
        let first = page.newer("", 0, Duration::ZERO);
        let (instance, version) = (first["instance"].as_str().expect("instance").to_string(), first["version"].as_u64().expect("version"));
        assert_eq!(first["view"]["open"]["name"], "@bot");
        // Nothing changed: the poll times out with the same version.
        let same = page.newer(&instance, version, Duration::from_millis(20));
        assert_eq!(same["version"].as_u64(), Some(version));
        let waiter = {
            let page = page.clone();
            let instance = instance.clone();
            std::thread::spawn(move || page.newer(&instance, version, Duration::from_secs(30)))
        };
        std::thread::sleep(Duration::from_millis(20));
        page.update(|v| v.set_hint(Some("hello".into())));
        let got = waiter.join().expect("join");
        assert_eq!(got["version"].as_u64(), Some(version + 1));
        assert_eq!(got["view"]["hint"], "hello");
    }

    #[test]
    fn another_instance_and_a_closing_server_answer_at_once() {
        let page = page();
        let started = Instant::now();
        let other = page.newer("from-before-a-restart", 99, Duration::from_secs(30));
        assert_eq!(other["version"].as_u64(), Some(1));
        page.close();
        let own = other["instance"].as_str().expect("instance").to_string();
        page.newer(&own, 1, Duration::from_secs(30));
        assert!(started.elapsed() < Duration::from_secs(10), "neither poll waited");
    }
}
