//! Every thread of one bot: started, named, watched, stopped and joined here.
//!
//! Names fit the 15 bytes Linux keeps, and stay unambiguous with several bots: a short role and
//! the bot's place in the config (1-based), e.g. `out/2`. The gateway logs at start which
//! number is which bot.
//!
//! | name | role |
//! |---|---|
//! | `wr/<n>` | the store's writer (started by `Store::open`, joined when the store closes) |
//! | `ins/<n>` | holds the platform's Inbox stream (`inbox::stream_loop`) |
//! | `in/<n>` | decrypts, commits, acknowledges (`inbox::import_loop`) |
//! | `out/<n>` | seals and sends the outbox (`outbox::run`) |
//! | `wh/<n>` | webhook delivery (`webhook::worker`), from the first time a webhook is set |
//! | `whv/<n>` | during a webhook run, checks the credential one attempt ahead (scoped, in `webhook.rs`) |
//! | `whr/<n>` | runs webhook replies (`api::replies::run_loop`), started with `wh/<n>` |
//!
//! `wh/<n>` and `whr/<n>` start with the bot when its webhook is set, else at its first
//! `setWebhook` (`BotShared::start_webhook`), and then run until the bot stops: a bot that
//! polls never has them, which is most of a thousand bots' threads saved.
//!
//! A thread that panics is logged and recorded in the bot's status, so `/healthz` reports the
//! bot unhealthy (503) instead of leaving it silently half-alive.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, Weak};
use std::thread::{self, JoinHandle};
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};

use super::inbox::{self, SignedPrekeyUpkeep};
use super::runtime::BotShared;
use super::{api, outbox, webhook};

/// The short thread name of `role` for the bot at `index`.
pub fn thread_name(role: &str, index: usize) -> String {
    format!("{role}/{index}")
}

/// The running threads of one bot.
pub struct BotThreads {
    shared: Arc<BotShared>,
    running: Arc<Mutex<Running>>,
    ended_rx: Receiver<String>,
}

/// The threads started so far (the webhook's may join later, from an HTTP worker).
struct Running {
    index: usize,
    handles: Vec<(String, JoinHandle<()>)>,
    /// Each thread says here that it ended (also by panicking); unbounded: one message per
    /// thread, six at most.
    ended_tx: Sender<String>,
    webhook_started: bool,
}

impl BotThreads {
    /// Starts every thread of the bot at `index` (1-based, its place in the config); the
    /// webhook's only if a webhook is set.
    pub fn start(shared: &Arc<BotShared>, index: usize, upkeep: SignedPrekeyUpkeep) -> io::Result<BotThreads> {
        let (ended_tx, ended_rx) = unbounded();
        let running = Arc::new(Mutex::new(Running { index, handles: Vec::new(), ended_tx, webhook_started: false }));
        let t = BotThreads { shared: shared.clone(), running, ended_rx };
        let (envelopes_tx, envelopes_rx) = inbox::channel();
        t.spawn("ins", move |s| inbox::stream_loop(s, envelopes_tx))?;
        t.spawn("in", move |s| inbox::import_loop(s, envelopes_rx, upkeep))?;
        t.spawn("out", outbox::run)?;
        // The starter holds the bot weakly: BotShared keeps it, and must still be dropped.
        let (weak, running) = (Arc::downgrade(shared), Arc::downgrade(&t.running));
        shared.install_webhook_starter(Box::new(move || start_webhook(&weak, &running)));
        // A webhook left set by the last run (or a store that cannot say) starts them now.
        if shared.store.read(super::store::webhook::is_set).unwrap_or(true) {
            start_webhook(&Arc::downgrade(shared), &Arc::downgrade(&t.running))?;
        }
        Ok(t)
    }

    fn spawn(&self, role: &str, body: impl FnOnce(Arc<BotShared>) + Send + 'static) -> io::Result<()> {
        spawn(&self.shared, &mut self.running.lock().expect("running threads lock"), role, body)
    }

    /// Stops every thread and joins those that end before `deadline`; one still blocked then
    /// (a platform stream waiting on the network) is logged and left to the process exit.
    pub fn stop(self, deadline: Instant) {
        // Stopping first: a webhook start after this sees it and starts nothing.
        self.shared.stop();
        let handles = std::mem::take(&mut self.running.lock().expect("running threads lock").handles);
        let mut ended = Vec::new();
        while ended.len() < handles.len() {
            match self.ended_rx.recv_deadline(deadline) {
                Ok(name) => ended.push(name),
                Err(_) => break,
            }
        }
        for (name, handle) in handles {
            if ended.contains(&name) {
                let _ = handle.join();
            } else {
                log::warn!("bot @{}: thread {name} did not stop in time; leaving it to the exit", self.shared.username);
            }
        }
    }
}

/// Starts `role/<n>` running `body`, watched: a panic marks the bot unhealthy.
fn spawn(
    shared: &Arc<BotShared>,
    running: &mut Running,
    role: &str,
    body: impl FnOnce(Arc<BotShared>) + Send + 'static,
) -> io::Result<()> {
    let name = thread_name(role, running.index);
    let (shared, ended, label) = (shared.clone(), running.ended_tx.clone(), name.clone());
    let handle = thread::Builder::new().name(name.clone()).spawn(move || {
        let watched = shared.clone();
        if catch_unwind(AssertUnwindSafe(|| body(shared))).is_err() {
            watched.thread_failed(&label);
        }
        let _ = ended.send(label);
    })?;
    running.handles.push((name, handle));
    Ok(())
}

/// Starts `wh/<n>` and `whr/<n>` unless they run already or the bot is stopping.
fn start_webhook(shared: &Weak<BotShared>, running: &Weak<Mutex<Running>>) -> io::Result<()> {
    let (Some(shared), Some(running)) = (shared.upgrade(), running.upgrade()) else {
        return Ok(());
    };
    let mut running = running.lock().expect("running threads lock");
    if running.webhook_started || shared.is_stopping() {
        return Ok(());
    }
    let (answers_tx, answers_rx) = webhook::answers();
    let deliver = webhook::worker(shared.clone(), answers_tx)?;
    spawn(&shared, &mut running, "whr", move |s| api::replies::run_loop(s, answers_rx))?;
    spawn(&shared, &mut running, "wh", move |_| deliver())?;
    running.webhook_started = true;
    log::info!("bot @{}: webhook delivery started (wh/{n}, whr/{n})", shared.username, n = running.index);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_fifteen_bytes() {
        for role in ["wr", "ins", "in", "out", "wh", "whv", "whr"] {
            assert!(thread_name(role, 9999).len() <= 15, "{role}");
        }
        assert_eq!(thread_name("out", 2), "out/2");
    }
}

#[cfg(test)]
mod panic_tests {
    use std::time::Duration;

    use super::*;
    use crate::gateway::api::methods::testing::bot;

    #[test]
    fn a_panicking_thread_marks_the_bot_unhealthy_and_stop_joins_the_rest() {
        let (_dir, shared) = bot();
        let (ended_tx, ended_rx) = unbounded();
        let running = Running { index: 3, handles: Vec::new(), ended_tx, webhook_started: false };
        let t = BotThreads { shared: shared.clone(), running: Arc::new(Mutex::new(running)), ended_rx };
        t.spawn("boom", |_| panic!("a thread panic (expected by the test)")).expect("spawn");
        t.spawn("out", outbox::run).expect("spawn");
        let ended = t.ended_rx.recv_timeout(Duration::from_secs(10)).expect("the panicking thread ended");
        assert_eq!(ended, "boom/3");
        let health = shared.health();
        assert_eq!(health["failed_threads"], serde_json::json!(["boom/3"]), "{health}");
        // The outbox thread waits for work; stop wakes it and joins it well before the deadline.
        t.stop(Instant::now() + Duration::from_secs(10));
        assert!(shared.is_stopping());
    }
}
