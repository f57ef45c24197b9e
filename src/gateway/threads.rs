//! Every thread of one bot: started, named, watched, stopped and joined here.
//!
//! Names fit the 15 bytes Linux keeps, and stay unambiguous with several bots: a short role and
//! the bot's place in the config (1-based), e.g. `out/2`. The gateway logs at start which
//! number is which bot.
//!
//! | name | role |
//! |---|---|
//! | `wr/<n>` | the store's writer (on demand: started by a write, `store::writer`; joined when the store closes) |
//! | `ins/<n>` | holds the platform's Inbox stream (`inbox::stream_loop`) |
//! | `in/<n>` | decrypts, commits, acknowledges (`inbox::Importer`; on demand: started by `ins/<n>` after it queues an envelope, or by `upkeep`) |
//! | `out/<n>` | seals and sends the outbox (`outbox::run`; on demand: started by the outbox's wake-up) |
//! | `upkeep` | one for the gateway: starts an idle bot's `in/<n>` when its hourly upkeep is due |
//! | `wh/<n>` | webhook delivery (`webhook::worker`), from the first time a webhook is set |
//! | `whr/<n>` | runs webhook replies (`api::replies::run_loop`), started with `wh/<n>` |
//!
//! `wr/<n>`, `in/<n>` and `out/<n>` run on demand (`crate::demand`): each ends after 10 s
//! without work and starts again when work is queued for it, so an idle bot has one thread,
//! `ins/<n>`.
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

use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender};

use super::inbox::{self, Importer, SignedPrekeyUpkeep};
use super::runtime::BotShared;
use super::{api, outbox, webhook};
use crate::demand::{Demand, Work};

/// How long `in/<n>` and `out/<n>` wait for work before their thread ends (the writer's is
/// `store::writer::IDLE_TRIM`, the same).
const IDLE: Duration = Duration::from_secs(10);
/// How often the `upkeep` thread looks for bots whose hourly upkeep is due.
const UPKEEP_TICK: Duration = Duration::from_secs(60);

/// The short thread name of `role` for the bot at `index`.
pub fn thread_name(role: &str, index: usize) -> String {
    format!("{role}/{index}")
}

/// The running threads of one bot.
pub struct BotThreads {
    shared: Arc<BotShared>,
    running: Arc<Mutex<Running>>,
    ended_rx: Receiver<String>,
    /// `in/<n>` and `out/<n>`, which run on demand.
    importer: Arc<Importer>,
    import_demand: Arc<Demand>,
    outbox_demand: Arc<Demand>,
}

/// `out/<n>` as work on demand: started by the outbox's wake-up (a message to send, the
/// stop) and at the bot's start; ends after [`IDLE`] with nothing to send.
struct OutboxWork {
    /// Weak: the bot's outbox wake-up holds this work's demand, and the bot must still drop.
    shared: Weak<BotShared>,
}

impl Work for OutboxWork {
    fn run(&self) {
        if let Some(shared) = self.shared.upgrade() {
            outbox::run(&shared, IDLE);
        }
    }

    fn pending(&self) -> bool {
        // A stopping bot's run returns at once: it must not be run again and again.
        self.shared.upgrade().is_some_and(|s| !s.is_stopping() && !s.outbox.wake.receiver().is_empty())
    }

    fn failed(&self, name: &str) {
        if let Some(shared) = self.shared.upgrade() {
            shared.thread_failed(name);
        }
    }
}

/// The threads started so far (the webhook's may join later, from an HTTP worker).
struct Running {
    index: usize,
    handles: Vec<(String, JoinHandle<()>)>,
    /// Each thread says here that it ended (also by panicking; the on-demand ones only when
    /// stopped or panicked); unbounded: one message per thread, five at most.
    ended_tx: Sender<String>,
    webhook_started: bool,
}

impl BotThreads {
    /// Starts every thread of the bot at `index` (1-based, its place in the config); the
    /// webhook's only if a webhook is set.
    pub fn start(shared: &Arc<BotShared>, index: usize, upkeep: SignedPrekeyUpkeep) -> io::Result<BotThreads> {
        let (ended_tx, ended_rx) = unbounded();
        let (envelopes_tx, envelopes_rx) = inbox::channel();
        let importer = Arc::new(Importer::new(shared, envelopes_rx, upkeep, IDLE));
        let import_demand = Demand::new(thread_name("in", index), importer.clone(), Some(ended_tx.clone()));
        let outbox_work = Arc::new(OutboxWork { shared: Arc::downgrade(shared) });
        let outbox_demand = Demand::new(thread_name("out", index), outbox_work, Some(ended_tx.clone()));
        let running = Arc::new(Mutex::new(Running { index, handles: Vec::new(), ended_tx, webhook_started: false }));
        let t = BotThreads {
            shared: shared.clone(),
            running,
            ended_rx,
            importer,
            import_demand: import_demand.clone(),
            outbox_demand: outbox_demand.clone(),
        };
        let stream_starts = import_demand.clone();
        t.spawn("ins", move |s| inbox::stream_loop(s, envelopes_tx, stream_starts))?;
        // Both start now: the start-of-runtime steps, and messages left in the outbox.
        import_demand.start()?;
        shared.outbox.wake.starts(outbox_demand.clone());
        outbox_demand.start()?;
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
        let mut handles = std::mem::take(&mut self.running.lock().expect("running threads lock").handles);
        // The on-demand ones that run now say they ended once they see the stop.
        for demand in [&self.import_demand, &self.outbox_demand] {
            if let Some(handle) = demand.close() {
                handles.push((handle.thread().name().unwrap_or_default().to_string(), handle));
            }
        }
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

/// `upkeep`: the gateway's one thread that starts a bot's `in/<n>` when its hourly upkeep (the
/// signed prekey, key packages, group self-updates, old skipped keys) is due and no envelope
/// has started it: an idle bot has no `in/<n>` to wait for the hour.
pub struct UpkeepTicker {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl UpkeepTicker {
    pub fn start(bots: &[BotThreads]) -> io::Result<UpkeepTicker> {
        let due: Vec<(Arc<Importer>, Arc<Demand>)> =
            bots.iter().map(|b| (b.importer.clone(), b.import_demand.clone())).collect();
        let (stop, stopped) = bounded::<()>(0);
        let handle = thread::Builder::new().name("upkeep".into()).spawn(move || loop {
            match stopped.recv_timeout(UPKEEP_TICK) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            for (importer, demand) in &due {
                if !demand.running() && importer.upkeep_due() {
                    if let Err(e) = demand.start() {
                        log::error!("cannot start an inbox thread for its upkeep: {e}");
                    }
                }
            }
        })?;
        Ok(UpkeepTicker { stop: Some(stop), handle: Some(handle) })
    }

    /// Ends the thread and joins it.
    pub fn stop(mut self) {
        self.stop.take();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_fifteen_bytes() {
        for role in ["wr", "ins", "in", "out", "wh", "whr"] {
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
        let (_, envelopes) = inbox::channel();
        let importer = Arc::new(Importer::new(&shared, envelopes, SignedPrekeyUpkeep::at_start(&shared), IDLE));
        let import_demand = Demand::new("in/3", importer.clone(), None);
        let outbox_demand = Demand::new("out/3", Arc::new(OutboxWork { shared: Arc::downgrade(&shared) }), None);
        let t = BotThreads {
            shared: shared.clone(),
            running: Arc::new(Mutex::new(running)),
            ended_rx,
            importer,
            import_demand,
            outbox_demand,
        };
        t.spawn("boom", |_| panic!("a thread panic (expected by the test)")).expect("spawn");
        t.spawn("wait", |s| {
            let _ = s.stop_signal().recv();
        })
        .expect("spawn");
        let ended = t.ended_rx.recv_timeout(Duration::from_secs(10)).expect("the panicking thread ended");
        assert_eq!(ended, "boom/3");
        let health = shared.health();
        assert_eq!(health["failed_threads"], serde_json::json!(["boom/3"]), "{health}");
        // The outbox thread waits for work; stop wakes it and joins it well before the deadline.
        t.stop(Instant::now() + Duration::from_secs(10));
        assert!(shared.is_stopping());
    }
}
