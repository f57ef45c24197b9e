//! The store writer thread: the only holder of a writable connection to a bot database.
//!
//! Jobs arrive over a bounded channel. The thread takes whatever is waiting (up to
//! `MAX_BATCH`), runs each job in its own savepoint inside ONE transaction, commits once (one
//! fsync for the whole group), and only then answers each job. A failing job rolls back its
//! own savepoint and nothing else.
//!
//! A batch in which a job deleted secrets (past MLS epochs) is followed by a WAL checkpoint
//! (`e2e::wal`): no old page images of them stay in the `-wal` file.
//!
//! The thread runs only while there are jobs (`crate::demand`): a write puts its job in the
//! queue and starts the thread if none runs; a writer that has had no job for [`IDLE_TRIM`]
//! runs its `on_idle` (the store drops its caches there) and ends, leaving the connection in
//! the store for the next one. A thousand idle bots have no writer thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use rusqlite::Connection;

use super::{Notifier, Result, StoreError};
use crate::demand::{Demand, Work};

/// Jobs queued before callers block; callers wait for their commit anyway, so this only
/// bounds how many threads can have a job in flight. (Allocated whole for every bot.)
const QUEUE_CAPACITY: usize = 256;
/// Jobs committed together at most.
const MAX_BATCH: usize = 256;
/// How long without a job makes a store idle.
pub const IDLE_TRIM: Duration = Duration::from_secs(10);

/// What a writer does when its store goes idle, with its connection, before its thread ends.
pub type OnIdle = Box<dyn Fn(&Connection) + Send + Sync>;

/// A job runs against the transaction and returns whether it succeeded plus the reply to
/// deliver once the outcome of the commit is known.
type Reply = Box<dyn FnOnce(Result<()>) + Send>;
type Job = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;

/// The writer's handle: jobs go in through `jobs`; dropping the writer closes the queue, lets
/// a running thread finish the batch it holds, and joins it.
pub struct Writer {
    jobs: Option<Sender<Job>>,
    work: Arc<WriterWork>,
    demand: Arc<Demand>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.jobs.take();
        // (Never join from the writer thread itself, should a job hold the last handle.)
        if let Some(t) = self.demand.close().filter(|t| t.thread().id() != thread::current().id()) {
            if t.join().is_err() {
                log::error!("the store writer thread panicked");
            }
        }
    }
}

/// What the writer thread works with: the one writable connection, kept here between runs.
struct WriterWork {
    conn: Mutex<Connection>,
    jobs: Receiver<Job>,
    notifier: Arc<Notifier>,
    idle_after: Duration,
    on_idle: OnIdle,
    /// A job panicked in the writer thread: no thread starts again, and every write, queued
    /// or new, fails with `Closed` instead of waiting for a commit that will not come.
    broken: AtomicBool,
}

impl WriterWork {
    /// Drops the queued jobs: their callers' reply channels close (`Closed`).
    fn drop_queued(&self) {
        while self.jobs.try_recv().is_ok() {}
    }
}

impl Work for WriterWork {
    fn run(&self) {
        let conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match self.jobs.recv_timeout(self.idle_after) {
                Ok(first) => commit_batch(&conn, first, &self.jobs, &self.notifier),
                Err(RecvTimeoutError::Timeout) => {
                    (self.on_idle)(&conn);
                    return;
                }
                // Every Writer (Sender) is dropped: the store is closing.
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn pending(&self) -> bool {
        !self.jobs.is_empty()
    }

    fn failed(&self, name: &str) {
        log::error!("the store writer thread {name} panicked; the bot's writes fail from now on");
        self.broken.store(true, Ordering::SeqCst);
        self.drop_queued();
    }
}

impl Writer {
    /// The writer of `conn`; its thread, named `thread_name` (15 bytes at most), starts with
    /// the first job. `on_idle` runs each time no job came for `idle_after` ([`IDLE_TRIM`] in
    /// a store), then the thread ends.
    pub fn start(
        conn: Connection,
        thread_name: &str,
        notifier: Arc<Notifier>,
        idle_after: Duration,
        on_idle: OnIdle,
    ) -> std::io::Result<Writer> {
        let (tx, rx) = bounded::<Job>(QUEUE_CAPACITY);
        let work = Arc::new(WriterWork { conn: Mutex::new(conn), jobs: rx, notifier, idle_after, on_idle, broken: AtomicBool::new(false) });
        Ok(Writer { jobs: Some(tx), work: work.clone(), demand: Demand::new(thread_name, work, None) })
    }

    pub fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply_tx, reply_rx) = bounded::<Result<T>>(1);
        let job: Job = Box::new(move |conn: &Connection| {
            let outcome = f(conn);
            let ok = outcome.is_ok();
            let reply: Reply = Box::new(move |commit: Result<()>| {
                let _ = reply_tx.send(match commit {
                    Ok(()) => outcome,
                    Err(e) => Err(e),
                });
            });
            (ok, reply)
        });
        if self.work.broken.load(Ordering::SeqCst) {
            return Err(StoreError::Closed);
        }
        self.jobs.as_ref().ok_or(StoreError::Closed)?.send(job).map_err(|_| StoreError::Closed)?;
        if self.work.broken.load(Ordering::SeqCst) {
            // Broken while this was queued: dropped, the wait below ends at once.
            self.work.drop_queued();
        }
        // The job is queued first, so a thread that is ending sees it and goes on.
        if let Err(e) = self.demand.start() {
            // The job stays queued for the next write's thread; this caller cannot wait for it.
            return Err(StoreError::CommitFailed(format!("cannot start the writer thread: {e}")));
        }
        reply_rx.recv().map_err(|_| StoreError::Closed)?
    }
}

/// Runs `first` and whatever else is queued (up to `MAX_BATCH`), each in its savepoint inside
/// one transaction, commits once, then answers each job.
fn commit_batch(conn: &Connection, first: Job, jobs: &Receiver<Job>, notifier: &Notifier) {
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        match jobs.try_recv() {
            Ok(j) => batch.push(j),
            Err(_) => break,
        }
    }
    let mut replies: Vec<Reply> = Vec::with_capacity(batch.len());
    let commit = (|| -> rusqlite::Result<()> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        for job in batch.drain(..) {
            conn.execute_batch("SAVEPOINT job")?;
            let (ok, reply) = job(conn);
            replies.push(reply);
            if !ok {
                conn.execute_batch("ROLLBACK TO job")?;
            }
            conn.execute_batch("RELEASE job")?;
        }
        conn.execute_batch("COMMIT")
    })();
    let outcome_for = |e: &rusqlite::Error| StoreError::CommitFailed(e.to_string());
    match &commit {
        Ok(()) => {
            notifier.committed();
            crate::e2e::wal::checkpoint_if_secrets_deleted(conn);
        }
        Err(e) => {
            log::error!("state database commit failed: {e}");
            let _ = conn.execute_batch("ROLLBACK");
        }
    }
    for reply in replies {
        reply(match &commit {
            Ok(()) => Ok(()),
            Err(e) => Err(outcome_for(e)),
        });
    }
    // Jobs of a batch that failed before they ran are answered by dropping them: their reply
    // channel closes and the caller sees `Closed`.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_job_rolls_back_alone_and_others_commit() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("w.db");
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch("CREATE TABLE t (v INTEGER UNIQUE)").expect("schema");
        let w = Writer::start(conn, "test", Arc::new(Notifier::default()), IDLE_TRIM, Box::new(|_| {})).expect("writer");
        w.write(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?)).expect("first");
        let dup = w.write(|c| {
            c.execute("INSERT INTO t VALUES (2)", [])?;
            Ok(c.execute("INSERT INTO t VALUES (1)", [])?)
        });
        assert!(dup.is_err(), "unique violation reported");
        let n: i64 = w
            .write(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?))
            .expect("count");
        assert_eq!(n, 1, "the failed job's first insert was rolled back with it");
    }

    #[test]
    fn an_idle_writer_runs_on_idle_and_ends_and_the_next_job_starts_it_again() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let conn = Connection::open_in_memory().expect("open");
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let on_idle: OnIdle = Box::new(move |c| {
            c.execute_batch("PRAGMA shrink_memory").expect("a usable connection");
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let w = Writer::start(conn, "test", Arc::new(Notifier::default()), Duration::from_millis(30), on_idle).expect("writer");
        thread::sleep(Duration::from_millis(100));
        assert!(!w.demand.running() && runs.load(Ordering::SeqCst) == 0, "no thread before the first job");
        w.write(|c| Ok(c.execute_batch("CREATE TABLE t (v INTEGER)")?)).expect("the first job starts the thread");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while runs.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "idle once");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while w.demand.running() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert!(!w.demand.running(), "the thread ended");
        thread::sleep(Duration::from_millis(150));
        assert_eq!(runs.load(Ordering::SeqCst), 1, "not again until a job came: no thread waits");
        let one: i64 = w.write(|c| Ok(c.query_row("SELECT 1", [], |r| r.get(0))?)).expect("a job after idling");
        assert_eq!(one, 1);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while runs.load(Ordering::SeqCst) == 1 && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2, "idle again after the job");
    }

    #[test]
    fn after_a_job_panics_in_the_writer_every_write_fails_instead_of_waiting() {
        let conn = Connection::open_in_memory().expect("open");
        let w = Writer::start(conn, "test", Arc::new(Notifier::default()), IDLE_TRIM, Box::new(|_| {})).expect("writer");
        w.write(|c| Ok(c.execute_batch("CREATE TABLE t (v INTEGER)")?)).expect("a first job");
        let panicked = w.write(|_| -> Result<()> { panic!("a job that panics (expected by the test)") });
        assert!(matches!(panicked, Err(StoreError::Closed)), "{panicked:?}");
        let after = w.write(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?));
        assert!(matches!(after, Err(StoreError::Closed)), "a later write fails at once: {after:?}");
    }
}
