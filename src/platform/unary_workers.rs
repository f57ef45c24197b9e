//! The threads every unary call runs on (`unary-<i>`), apart from gRPC's completion-queue
//! threads (`grpc-platform-<i>`).
//!
//! Why: a completion-queue thread also moves the data of every streaming call whose connection
//! it serves: each Inbox stream's envelopes and each file transfer's chunks go out through a
//! future polled on that thread. A unary handler run there holds all of those back for as long
//! as its transaction takes: a batch of 50 group messages fanned out to 20 members takes about
//! 8 ms, and while 19 senders kept it busy a bot's Inbox stream on the same queue got nothing
//! until they were done (docs/decisions.md, "Unary calls off the completion queues"). Here the
//! completion-queue threads only read requests and write answers.
//!
//! A job starts its call's answer itself and hands what reports the write's completion to a
//! future on the call's completion queue (`service::PlatformService::unary`); a worker never
//! waits for a completion queue, so a queue thread waiting for room here cannot deadlock with
//! a worker. The queue is bounded: when every slot is taken, the completion-queue thread that
//! received the call waits for one (backpressure on the clients, as a busy handler gave
//! before).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use std::thread::{Builder, JoinHandle};

use crossbeam_channel::{bounded, select, Receiver, Sender};

/// One call's work: check the caller, run the handler, start the answer.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// Calls received and not yet taken by a worker. Each holds its decoded request (a batch of
/// group messages can be a few MiB), so the queue is short: a worker takes the next within one
/// transaction's time.
const QUEUE: usize = 32;

pub struct UnaryWorkers {
    jobs: Sender<Job>,
    /// The queue's far end, kept to drop what is left at stop (a queued job holds the service,
    /// which holds these workers).
    queue: Receiver<Job>,
    /// Dropped by `stop`: the workers end, and a call still waiting for room gives up.
    stop: Mutex<Option<Sender<()>>>,
    stopped: Receiver<()>,
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl UnaryWorkers {
    /// Starts `count` workers named `unary-<i>`.
    pub fn start(count: usize) -> std::io::Result<UnaryWorkers> {
        let (jobs, queue) = bounded::<Job>(QUEUE);
        let (stop, stopped) = bounded::<()>(0);
        let handles = (0..count.max(1))
            .map(|i| {
                let (queue, stopped) = (queue.clone(), stopped.clone());
                Builder::new().name(format!("unary-{i}")).spawn(move || work(&queue, &stopped))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(UnaryWorkers { jobs, queue, stop: Mutex::new(Some(stop)), stopped, handles: Mutex::new(handles) })
    }

    /// Queues `job`, waiting for room while the queue is full. After `stop` the job is dropped
    /// (its call, already cancelled by the server's shutdown, is not answered).
    pub fn run(&self, job: Job) {
        select! {
            send(self.jobs, job) -> _ => {}
            recv(self.stopped) -> _ => {}
        }
    }

    /// Ends the workers (each finishes the job it runs) and joins them; jobs still queued are
    /// dropped. Called after the server cancelled every call.
    pub fn stop(&self) {
        drop(self.stop.lock().unwrap_or_else(|e| e.into_inner()).take());
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        for handle in handles {
            let name = handle.thread().name().unwrap_or("a unary worker").to_string();
            if handle.join().is_err() {
                log::error!("platform thread {name} panicked");
            }
        }
        while self.queue.try_recv().is_ok() {}
    }
}

/// One worker: runs jobs until stopped. A job that panics fails its own call only (its sink,
/// dropped unanswered, cancels the call, as for a job dropped unrun); the worker goes on.
fn work(queue: &Receiver<Job>, stopped: &Receiver<()>) {
    loop {
        select! {
            recv(queue) -> job => match job {
                Ok(job) => {
                    if catch_unwind(AssertUnwindSafe(job)).is_err() {
                        log::error!("a unary call's handler panicked");
                    }
                }
                Err(_) => return,
            },
            recv(stopped) -> _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn jobs_run_on_named_workers_and_a_panic_fails_only_its_own_job() {
        let workers = UnaryWorkers::start(2).expect("start");
        let (tx, rx) = bounded(4);
        let tx2 = tx.clone();
        workers.run(Box::new(|| panic!("a handler's bug")));
        workers.run(Box::new(move || tx.send(std::thread::current().name().map(str::to_string)).expect("send")));
        workers.run(Box::new(move || tx2.send(std::thread::current().name().map(str::to_string)).expect("send")));
        for _ in 0..2 {
            let name = rx.recv_timeout(Duration::from_secs(10)).expect("both jobs ran").expect("a named thread");
            assert!(name == "unary-0" || name == "unary-1", "{name}");
        }
        workers.stop();
    }

    #[test]
    fn a_full_queue_holds_the_caller_back_and_stop_releases_it_and_joins() {
        let workers = Arc::new(UnaryWorkers::start(1).expect("start"));
        let (release, held) = bounded::<()>(0);
        let (started, running) = bounded::<()>(1);
        // The one worker is busy until released; then QUEUE more calls fill the queue.
        workers.run(Box::new(move || {
            started.send(()).expect("started");
            let _ = held.recv_timeout(Duration::from_secs(10));
        }));
        running.recv_timeout(Duration::from_secs(10)).expect("the first job runs");
        for _ in 0..QUEUE {
            workers.run(Box::new(|| {}));
        }
        // One more waits for room.
        let (done_tx, done) = bounded::<()>(1);
        let w = Arc::clone(&workers);
        let caller = std::thread::spawn(move || {
            w.run(Box::new(|| {}));
            done_tx.send(()).expect("done");
        });
        assert!(done.recv_timeout(Duration::from_millis(200)).is_err(), "a full queue makes the caller wait");
        // Stopping gives the waiting caller up and joins the worker once its job ends.
        let stopper = {
            let w = Arc::clone(&workers);
            std::thread::spawn(move || w.stop())
        };
        done.recv_timeout(Duration::from_secs(10)).expect("the waiting caller is released by stop");
        release.send(()).expect("release the worker");
        stopper.join().expect("stop joins the worker");
        caller.join().expect("caller");
    }
}
