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
//! | `wh/<n>` | webhook delivery (`webhook::Deliverer`; on demand: started by a commit while a webhook is set, by `setWebhook`/`deleteWebhook`/revocation, and at start when a webhook is set) |
//! | `whr/<n>` | runs webhook replies (`api::replies::ReplyRunner`; on demand: started by `wh/<n>` after it hands an answer on) |
//!
//! Every thread but `ins/<n>` and `upkeep` runs on demand (`crate::demand`): each ends after
//! 10 s without work and starts again when work is queued for it, so an idle bot has one
//! thread, `ins/<n>`, whether it polls or has a webhook; a bot that polls never has `wh/<n>`.
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
use super::api::replies::ReplyRunner;
use super::webhook::{self, Deliverer, Replies};
use super::outbox;
use crate::demand::{Demand, Work};

/// How long the on-demand threads wait for work before they end (the writer's is
/// `store::writer::IDLE_TRIM`, the same).
const IDLE: Duration = Duration::from_secs(10);
/// How often the `upkeep` thread looks for bots whose hourly upkeep is due.
const UPKEEP_TICK: Duration = Duration::from_secs(60);
/// How often it makes up for a heap trim skipped in a burst (`memory::release_skipped`).
const TRIM_TICK: Duration = Duration::from_secs(2);

/// The short thread name of `role` for the bot at `index`.
pub fn thread_name(role: &str, index: usize) -> String {
    format!("{role}/{index}")
}

/// The running threads of one bot.
pub struct BotThreads {
    shared: Arc<BotShared>,
    running: Mutex<Running>,
    ended_rx: Receiver<String>,
    /// `in/<n>` (also started by `upkeep`).
    importer: Arc<Importer>,
    import_demand: Arc<Demand>,
    /// `out/<n>`, `wh/<n>`, `whr/<n>`: closed at stop.
    other_demands: [Arc<Demand>; 3],
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

/// The threads that run all the time (`ins/<n>`; tests add others).
struct Running {
    index: usize,
    handles: Vec<(String, JoinHandle<()>)>,
    /// Each thread says here that it ended (also by panicking; the on-demand ones only when
    /// stopped or panicked); unbounded: one message per thread, five at most.
    ended_tx: Sender<String>,
}

impl BotThreads {
    /// Starts the bot at `index` (1-based, its place in the config): `ins/<n>`, and the
    /// on-demand threads that have work at once (`in/<n>` and `out/<n>` for the start-of-run
    /// steps and a leftover outbox, `wh/<n>` if a webhook is set).
    pub fn start(shared: &Arc<BotShared>, index: usize, upkeep: SignedPrekeyUpkeep) -> io::Result<BotThreads> {
        let (ended_tx, ended_rx) = unbounded();
        let on_demand = |role: &str, work: Arc<dyn Work>| Demand::new(thread_name(role, index), work, Some(ended_tx.clone()));
        let (envelopes_tx, envelopes_rx) = inbox::channel();
        let importer = Arc::new(Importer::new(shared, envelopes_rx, upkeep, IDLE));
        let import_demand = on_demand("in", importer.clone());
        let outbox_demand = on_demand("out", Arc::new(OutboxWork { shared: Arc::downgrade(shared) }));
        let (answers_tx, answers_rx) = webhook::answers();
        let reply_demand = on_demand("whr", Arc::new(ReplyRunner::new(shared, answers_rx, IDLE)));
        let replies = Replies::new(answers_tx, reply_demand.clone());
        let webhook_demand = on_demand("wh", Arc::new(Deliverer::new(shared, replies, IDLE)));
        let running = Mutex::new(Running { index, handles: Vec::new(), ended_tx: ended_tx.clone() });
        let t = BotThreads {
            shared: shared.clone(),
            running,
            ended_rx,
            importer,
            import_demand: import_demand.clone(),
            other_demands: [outbox_demand.clone(), webhook_demand.clone(), reply_demand],
        };
        let stream_starts = import_demand.clone();
        t.spawn("ins", move |s| inbox::stream_loop(s, envelopes_tx, stream_starts))?;
        // Both start now: the start-of-runtime steps, and messages left in the outbox.
        import_demand.start()?;
        shared.outbox.wake.starts(outbox_demand.clone());
        outbox_demand.start()?;
        // Webhook delivery starts with each wake-up, and with each commit while a webhook is
        // set (the commit may have queued an update); the hook holds the bot weakly, since the
        // bot's store keeps it.
        shared.webhook.starts(webhook_demand.clone());
        let (weak, starts) = (Arc::downgrade(shared), webhook_demand.clone());
        shared.store.notifier().on_commit(Box::new(move || {
            if weak.upgrade().is_some_and(|s| s.webhook_on()) {
                if let Err(e) = starts.start() {
                    log::error!("cannot start a webhook thread: {e}");
                }
            }
        }));
        // A webhook left set by the last run (or a store that cannot say): its queue may wait.
        if shared.refresh_webhook_on() {
            webhook_demand.start()?;
        }
        Ok(t)
    }

    fn spawn(&self, role: &str, body: impl FnOnce(Arc<BotShared>) + Send + 'static) -> io::Result<()> {
        spawn(&self.shared, &mut self.running.lock().expect("running threads lock"), role, body)
    }

    /// Stops every thread and joins those that end before `deadline`; one still blocked then
    /// (a platform stream waiting on the network) is logged and left to the process exit.
    pub fn stop(self, deadline: Instant) {
        // Closed first, so the stop's wake-ups start no thread; the on-demand ones that run now
        // say they ended once they see the stop.
        let mut handles = Vec::new();
        for demand in std::iter::once(&self.import_demand).chain(&self.other_demands) {
            if let Some(handle) = demand.close() {
                handles.push((handle.thread().name().unwrap_or_default().to_string(), handle));
            }
        }
        self.shared.stop();
        handles.append(&mut self.running.lock().expect("running threads lock").handles);
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

/// `upkeep`: the gateway's one thread that starts a bot's `in/<n>` when its hourly upkeep (the
/// signed prekey, key packages, group self-updates, old skipped keys) is due and no envelope
/// has started it: an idle bot has no `in/<n>` to wait for the hour. Every two seconds it also
/// trims the heap if a trim was skipped (`memory::release_skipped`).
pub struct UpkeepTicker {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl UpkeepTicker {
    pub fn start(bots: &[BotThreads]) -> io::Result<UpkeepTicker> {
        let due: Vec<(Arc<Importer>, Arc<Demand>)> =
            bots.iter().map(|b| (b.importer.clone(), b.import_demand.clone())).collect();
        let (stop, stopped) = bounded::<()>(0);
        let mut upkept = Instant::now();
        let handle = thread::Builder::new().name("upkeep".into()).spawn(move || loop {
            match stopped.recv_timeout(TRIM_TICK) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            crate::memory::release_skipped();
            if upkept.elapsed() < UPKEEP_TICK {
                continue;
            }
            upkept = Instant::now();
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
        let running = Running { index: 3, handles: Vec::new(), ended_tx };
        let (_, envelopes) = inbox::channel();
        let importer = Arc::new(Importer::new(&shared, envelopes, SignedPrekeyUpkeep::at_start(&shared.ctx()), IDLE));
        let import_demand = Demand::new("in/3", importer.clone(), None);
        let outbox_demand = Demand::new("out/3", Arc::new(OutboxWork { shared: Arc::downgrade(&shared) }), None);
        let (answers_tx, answers_rx) = webhook::answers();
        let reply_demand = Demand::new("whr/3", Arc::new(ReplyRunner::new(&shared, answers_rx, IDLE)), None);
        let deliverer = Deliverer::new(&shared, Replies::new(answers_tx, reply_demand.clone()), IDLE);
        let webhook_demand = Demand::new("wh/3", Arc::new(deliverer), None);
        let t = BotThreads {
            shared: shared.clone(),
            running: Mutex::new(running),
            ended_rx,
            importer,
            import_demand,
            other_demands: [outbox_demand, webhook_demand, reply_demand],
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
