//! Threads that run only while they have work. A gateway of a thousand bots cannot keep every
//! bot's writer, inbox and outbox thread waiting: most bots are idle most of the time.
//!
//! A [`Demand`] starts its thread (always named the same) when work is put where the thread
//! reads it and `start` is called; the thread's [`Work::run`] returns once it has waited in
//! vain for a while, and the thread ends unless [`Work::pending`] says work came meanwhile.
//! Both decisions are taken under one lock, and callers put the work in BEFORE they call
//! `start`: so work is never left with no thread to take it, and at most one thread runs.
//!
//! A thread whose `run` panics is reported (`Work::failed`) and never started again: the owner
//! shows that as unhealthy, as for any other thread.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};

use crossbeam_channel::Sender;

/// What a [`Demand`]'s thread does.
pub trait Work: Send + Sync + 'static {
    /// Works until there is nothing to do for a while (or the owner stops it), then returns.
    fn run(&self);
    /// Whether work is waiting (checked under the demand's lock after `run` returned).
    fn pending(&self) -> bool;
    /// `run` panicked in the thread `name`.
    fn failed(&self, _name: &str) {}
}

/// One on-demand thread: its name, whether it runs, its handle.
pub struct Demand {
    name: String,
    work: Arc<dyn Work>,
    /// Told the thread's name when it ends for good (closed or panicked), for a join with a
    /// deadline.
    ended: Option<Sender<String>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// A thread runs (or panicked: then none starts again).
    running: bool,
    /// No thread starts any more.
    closed: bool,
    handle: Option<JoinHandle<()>>,
}

impl Demand {
    pub fn new(name: impl Into<String>, work: Arc<dyn Work>, ended: Option<Sender<String>>) -> Arc<Demand> {
        Arc::new(Demand { name: name.into(), work, ended, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the thread unless it runs or the demand is closed. Call after putting the work
    /// where the thread reads it.
    pub fn start(self: &Arc<Self>) -> io::Result<()> {
        let mut state = self.lock();
        if state.running || state.closed {
            return Ok(());
        }
        // The last one decided to end under this lock; it only returns now.
        if let Some(ended) = state.handle.take() {
            let _ = ended.join();
        }
        let me = Arc::clone(self);
        state.handle = Some(thread::Builder::new().name(self.name.clone()).spawn(move || me.body())?);
        state.running = true;
        Ok(())
    }

    fn body(&self) {
        loop {
            if catch_unwind(AssertUnwindSafe(|| self.work.run())).is_err() {
                // `running` stays set: a panicked thread is not started again.
                self.work.failed(&self.name);
                self.say_ended();
                return;
            }
            let mut state = self.lock();
            if state.closed || !self.work.pending() {
                state.running = false;
                let closed = state.closed;
                drop(state);
                if closed {
                    self.say_ended();
                }
                // What `run` held is freed by now: an idle bot keeps none of it.
                crate::memory::release_freed();
                return;
            }
        }
    }

    fn say_ended(&self) {
        if let Some(ended) = &self.ended {
            let _ = ended.send(self.name.clone());
        }
    }

    /// Whether the thread runs now.
    pub fn running(&self) -> bool {
        self.lock().running
    }

    /// No thread starts any more. Returns the handle of the one that runs, if any: it ends
    /// once its `run` returns (the owner has told it to stop) and then says so on `ended`.
    pub fn close(&self) -> Option<JoinHandle<()>> {
        let mut state = self.lock();
        state.closed = true;
        let handle = state.handle.take();
        if state.running {
            handle
        } else {
            // Ended already (or about to return): joined here.
            if let Some(h) = handle {
                drop(state);
                let _ = h.join();
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// Counts the jobs it takes; idle after 30 ms without one.
    struct Counter {
        jobs: Receiver<u32>,
        done: AtomicUsize,
        starts: AtomicUsize,
    }

    impl Work for Counter {
        fn run(&self) {
            self.starts.fetch_add(1, Ordering::SeqCst);
            loop {
                match self.jobs.recv_timeout(Duration::from_millis(30)) {
                    Ok(n) if n == u32::MAX => panic!("a job that panics (expected by the test)"),
                    Ok(_) => {
                        self.done.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        }
        fn pending(&self) -> bool {
            !self.jobs.is_empty()
        }
    }

    fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn every_job_is_taken_by_at_most_one_thread_that_ends_when_idle_and_comes_back() {
        let (tx, rx) = bounded(8);
        let work = Arc::new(Counter { jobs: rx, done: AtomicUsize::new(0), starts: AtomicUsize::new(0) });
        let demand = Demand::new("demand-test", work.clone(), None);
        // Many senders, each putting its job in and then starting the thread.
        let senders: Vec<_> = (0..4)
            .map(|_| {
                let (tx, demand) = (tx.clone(), demand.clone());
                thread::spawn(move || {
                    for i in 0..200 {
                        tx.send(i).expect("send");
                        demand.start().expect("start");
                        if i % 50 == 0 {
                            // Long enough, now and then, for the thread to end between jobs.
                            thread::sleep(Duration::from_millis(60));
                        }
                    }
                })
            })
            .collect();
        for s in senders {
            s.join().expect("sender");
        }
        until("every job taken", || work.done.load(Ordering::SeqCst) == 800);
        until("the thread ended when idle", || !demand.running());
        assert!(work.starts.load(Ordering::SeqCst) > 1, "it ended and was started again");
        tx.send(1).expect("send");
        demand.start().expect("start");
        until("started again for one more job", || work.done.load(Ordering::SeqCst) == 801);
        until("ended again", || !demand.running());
        assert!(demand.close().is_none(), "nothing runs to be joined");
        tx.send(2).expect("send");
        demand.start().expect("start after close does nothing");
        thread::sleep(Duration::from_millis(100));
        assert_eq!(work.done.load(Ordering::SeqCst), 801, "closed: no thread takes it");
    }

    #[test]
    fn a_panicked_thread_is_reported_on_ended_and_not_started_again() {
        let (tx, rx) = bounded(8);
        let (ended_tx, ended_rx) = unbounded();
        let work = Arc::new(Counter { jobs: rx, done: AtomicUsize::new(0), starts: AtomicUsize::new(0) });
        let demand = Demand::new("demand-panic", work.clone(), Some(ended_tx));
        tx.send(u32::MAX).expect("send");
        demand.start().expect("start");
        assert_eq!(ended_rx.recv_timeout(Duration::from_secs(10)).expect("ended"), "demand-panic");
        tx.send(1).expect("send");
        demand.start().expect("start");
        thread::sleep(Duration::from_millis(100));
        assert_eq!(work.starts.load(Ordering::SeqCst), 1, "not started again");
        assert_eq!(work.done.load(Ordering::SeqCst), 0);
    }
}
