//! The store writer thread: the only holder of a writable connection to a bot database.
//!
//! Jobs arrive over a bounded channel. The thread takes whatever is waiting (up to
//! `MAX_BATCH`), runs each job in its own savepoint inside ONE transaction, commits once (one
//! fsync for the whole group), and only then answers each job. A failing job rolls back its
//! own savepoint and nothing else.
//!
//! A batch commits with the database's `synchronous = FULL` (the WAL synced to disk before the
//! commit returns) unless every job in it is relaxed ([`Writer::write_relaxed`]): then it
//! commits with `NORMAL`, without waiting for the disk, and the next synced commit carries it
//! there (the WAL is written in order). A process crash loses neither; a power failure may
//! lose a relaxed tail.
//!
//! A batch in which a job deleted secrets (past MLS epochs) is followed by a WAL checkpoint
//! (`e2e::wal`): no old page images of them stay in the `-wal` file.
//!
//! The thread runs only while there are jobs (`crate::demand`): a write puts its job in the
//! queue and starts the thread if none runs; a writer that has had no job for [`IDLE_TRIM`]
//! closes its connection, runs its `on_idle` (the store lets its readers go there) and ends;
//! the next one opens the connection again (`Reopen`, about a millisecond). A thousand idle
//! bots have no writer thread and no writable connection.

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

/// What a writer does when its store goes idle, after it closed its connection.
pub type OnIdle = Box<dyn Fn() + Send + Sync>;
/// Opens the writable connection again, for a writer that closed it when idle.
pub type Reopen = Box<dyn Fn() -> Result<Connection> + Send + Sync>;

/// A job runs against the transaction and returns whether it succeeded plus the reply to
/// deliver once the outcome of the commit is known.
type Reply = Box<dyn FnOnce(Result<()>) + Send>;
type Run = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;
struct Job {
    run: Run,
    /// Committed with the disk synced (every job but a relaxed one).
    synced: bool,
}

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
        // Open and never written since (no thread took it): closed the same way.
        if let Some(conn) = self.work.conn.lock().unwrap_or_else(|e| e.into_inner()).take() {
            close(conn);
        }
    }
}

/// What the writer thread works with: the one writable connection, here while it is open and
/// no thread runs, and how to open it again.
struct WriterWork {
    conn: Mutex<Option<Connection>>,
    reopen: Reopen,
    jobs: Receiver<Job>,
    notifier: Arc<Notifier>,
    idle_after: Duration,
    on_idle: OnIdle,
    /// A job panicked in the writer thread: no thread starts again, and every write, queued
    /// or new, fails with `Closed` instead of waiting for a commit that will not come.
    broken: AtomicBool,
    /// Why the last commit (or reopening the connection) failed; cleared by the next commit
    /// that succeeds. `/healthz` shows such a bot as degraded: it cannot store.
    failing: Mutex<Option<String>>,
}

impl WriterWork {
    /// Drops the queued jobs: their callers' reply channels close (`Closed`).
    fn drop_queued(&self) {
        while self.jobs.try_recv().is_ok() {}
    }
}

impl Work for WriterWork {
    fn run(&self) {
        let mut slot = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let conn = match slot.take().map_or_else(&self.reopen, Ok) {
            Ok(conn) => conn,
            Err(e) => {
                // Its callers see `Closed`; the next write tries again.
                log::error!("state database: cannot open it again for writing: {e}");
                *self.failing.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("cannot open the database for writing: {e}"));
                self.drop_queued();
                return;
            }
        };
        loop {
            match self.jobs.recv_timeout(self.idle_after) {
                Ok(first) => {
                    commit_batch(&conn, first, &self.jobs, &self.notifier, &self.broken, &self.failing);
                }
                Err(RecvTimeoutError::Timeout) => {
                    close(conn);
                    (self.on_idle)();
                    return;
                }
                // Every Writer (Sender) is dropped: the store is closing.
                Err(RecvTimeoutError::Disconnected) => return close(conn),
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
    /// the first job. Each time no job came for `idle_after` ([`IDLE_TRIM`] in a store) it
    /// closes the connection, runs `on_idle` and ends; the next run opens it with `reopen`.
    pub fn start(
        conn: Connection,
        reopen: Reopen,
        thread_name: &str,
        notifier: Arc<Notifier>,
        idle_after: Duration,
        on_idle: OnIdle,
    ) -> std::io::Result<Writer> {
        let (tx, rx) = bounded::<Job>(QUEUE_CAPACITY);
        let work = Arc::new(WriterWork {
            conn: Mutex::new(Some(conn)),
            reopen,
            jobs: rx,
            notifier,
            idle_after,
            on_idle,
            broken: AtomicBool::new(false),
            failing: Mutex::new(None),
        });
        Ok(Writer { jobs: Some(tx), work: work.clone(), demand: Demand::new(thread_name, work, None) })
    }

    /// Why the last commit failed, while no later one succeeded (a full disk, an I/O error).
    pub fn failing(&self) -> Option<String> {
        self.work.failing.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.submit(true, f)
    }

    /// [`Writer::write`] for a write whose loss in a power failure costs nothing (what the
    /// next synced write or a restart makes good): its commit does not wait for the disk,
    /// unless a synced job shares it.
    pub fn write_relaxed<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.submit(false, f)
    }

    fn submit<T, F>(&self, synced: bool, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply_tx, reply_rx) = bounded::<Result<T>>(1);
        let run: Run = Box::new(move |conn: &Connection| {
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
        let job = Job { run, synced };
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

/// Closes the writable connection with the log copied into the database file and cut back to
/// nothing (`wal_checkpoint(TRUNCATE)`): an idle or stopped bot's `.db` alone is its state, so
/// a copy of the `.db` without its `-wal` (the usual backup mistake) loses nothing. Pooled
/// readers keep the connection count above one, so closing alone would not checkpoint.
fn close(conn: Connection) {
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        log::warn!("state database: checkpointing before closing failed (the -wal keeps the rest): {e}");
    }
    drop(conn);
}

/// Runs `first` and whatever else is queued (up to `MAX_BATCH`), each in its savepoint inside
/// one transaction, commits once, then answers each job. `Err`: why the commit failed.
/// Runs `first` and the jobs queued behind it in one transaction, and answers each. Whether
/// the commit failed is recorded in `failing` before any caller is answered, so a caller that
/// saw its write fail finds the store failing (`/healthz`).
fn commit_batch(conn: &Connection, first: Job, jobs: &Receiver<Job>, notifier: &Notifier, broken: &AtomicBool, failing: &Mutex<Option<String>>) {
    let mut batch = vec![first];
    while batch.len() < MAX_BATCH {
        match jobs.try_recv() {
            Ok(j) => batch.push(j),
            Err(_) => break,
        }
    }
    let mut replies: Vec<Reply> = Vec::with_capacity(batch.len());
    let relaxed = batch.iter().all(|j| !j.synced);
    let commit = (|| -> rusqlite::Result<()> {
        if relaxed {
            conn.execute_batch("PRAGMA synchronous = NORMAL")?;
        }
        conn.execute_batch("BEGIN IMMEDIATE")?;
        for job in batch.drain(..) {
            conn.execute_batch("SAVEPOINT job")?;
            let (ok, reply) = (job.run)(conn);
            replies.push(reply);
            if !ok {
                conn.execute_batch("ROLLBACK TO job")?;
            }
            conn.execute_batch("RELEASE job")?;
        }
        conn.execute_batch("COMMIT")
    })();
    if relaxed {
        if let Err(e) = conn.execute_batch("PRAGMA synchronous = FULL") {
            // Every later commit would skip the sync: fail them rather than lose what they say.
            log::error!("state database: cannot restore synchronous = FULL: {e}");
            broken.store(true, Ordering::SeqCst);
        }
    }
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
    *failing.lock().unwrap_or_else(|e| e.into_inner()) = commit.as_ref().err().map(|e| e.to_string());
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

    fn no_reopen() -> Reopen {
        Box::new(|| Err(StoreError::Closed))
    }

    #[test]
    fn failed_job_rolls_back_alone_and_others_commit() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("w.db");
        let conn = Connection::open(&path).expect("open");
        conn.execute_batch("CREATE TABLE t (v INTEGER UNIQUE)").expect("schema");
        let w = Writer::start(conn, no_reopen(), "test", Arc::new(Notifier::default()), IDLE_TRIM, Box::new(|| {})).expect("writer");
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

    /// A commit that fails marks the store as failing (`/healthz`: degraded) until one succeeds.
    #[test]
    fn a_failed_commit_marks_the_store_failing_until_the_next_one_succeeds() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let conn = Connection::open(tmp.path().join("w.db")).expect("open");
        conn.execute_batch("CREATE TABLE t (v INTEGER)").expect("schema");
        let w = Writer::start(conn, no_reopen(), "test", Arc::new(Notifier::default()), IDLE_TRIM, Box::new(|| {})).expect("writer");
        assert_eq!(w.failing(), None);
        // A job that ends the batch's transaction itself: the batch's COMMIT then fails, as
        // one does on a full disk.
        let e = w.write(|c| Ok(c.execute_batch("INSERT INTO t VALUES (1); COMMIT")?)).expect_err("the commit failed");
        assert!(matches!(e, StoreError::CommitFailed(_)), "{e}");
        assert!(w.failing().is_some_and(|why| !why.is_empty()), "{:?}", w.failing());
        w.write(|c| Ok(c.execute("INSERT INTO t VALUES (2)", [])?)).expect("the next commit");
        assert_eq!(w.failing(), None, "cleared by a commit that succeeded");
    }

    #[test]
    fn a_relaxed_job_commits_without_syncing_and_the_next_one_syncs_again() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let conn = Connection::open(tmp.path().join("w.db")).expect("open");
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; CREATE TABLE t (v INTEGER)").expect("schema");
        let w = Writer::start(conn, no_reopen(), "test", Arc::new(Notifier::default()), IDLE_TRIM, Box::new(|| {})).expect("writer");
        let sync_mode = |c: &Connection| -> Result<i64> { Ok(c.query_row("PRAGMA synchronous", [], |r| r.get(0))?) };
        // 1 is NORMAL (no sync at commit in WAL mode), 2 is FULL.
        assert_eq!(w.write_relaxed(move |c| {
            c.execute("INSERT INTO t VALUES (1)", [])?;
            sync_mode(c)
        }).expect("relaxed"), 1);
        assert_eq!(w.write(sync_mode).expect("synced"), 2, "back to FULL after the relaxed commit");
        let n: i64 = w.write(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)).expect("count");
        assert_eq!(n, 1, "the relaxed job committed");
    }

    #[test]
    fn an_idle_writer_closes_its_connection_and_ends_and_the_next_job_opens_it_again() {
        use std::sync::atomic::AtomicUsize;
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("w.db");
        let conn = Connection::open(&path).expect("open");
        let (runs, reopens) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (counted, reopened) = (runs.clone(), reopens.clone());
        let on_idle: OnIdle = Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
        });
        let reopen: Reopen = Box::new(move || {
            reopened.fetch_add(1, Ordering::SeqCst);
            Ok(Connection::open(&path)?)
        });
        let w = Writer::start(conn, reopen, "test", Arc::new(Notifier::default()), Duration::from_millis(30), on_idle).expect("writer");
        thread::sleep(Duration::from_millis(100));
        assert!(!w.demand.running() && runs.load(Ordering::SeqCst) == 0, "no thread before the first job");
        w.write(|c| Ok(c.execute_batch("CREATE TABLE t (v INTEGER)")?)).expect("the first job starts the thread");
        let until = |what: &str, done: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !done() {
                assert!(std::time::Instant::now() < deadline, "{what}");
                thread::sleep(Duration::from_millis(5));
            }
        };
        until("idle once", &|| runs.load(Ordering::SeqCst) == 1);
        until("the thread ended", &|| !w.demand.running());
        assert!(w.work.conn.lock().expect("slot").is_none(), "the connection is closed");
        thread::sleep(Duration::from_millis(150));
        assert_eq!(runs.load(Ordering::SeqCst), 1, "not again until a job came: no thread waits");
        assert_eq!(reopens.load(Ordering::SeqCst), 0);
        w.write(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?)).expect("a job after idling");
        assert_eq!(reopens.load(Ordering::SeqCst), 1, "opened again for it");
        let n: i64 = w.write(|c| Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)).expect("count");
        assert_eq!(n, 1, "what was written before and after idling is there");
        until("idle again after the job", &|| runs.load(Ordering::SeqCst) == 2);
    }

    #[test]
    fn after_a_job_panics_in_the_writer_every_write_fails_instead_of_waiting() {
        let conn = Connection::open_in_memory().expect("open");
        let w = Writer::start(conn, no_reopen(), "test", Arc::new(Notifier::default()), IDLE_TRIM, Box::new(|| {})).expect("writer");
        w.write(|c| Ok(c.execute_batch("CREATE TABLE t (v INTEGER)")?)).expect("a first job");
        let panicked = w.write(|_| -> Result<()> { panic!("a job that panics (expected by the test)") });
        assert!(matches!(panicked, Err(StoreError::Closed)), "{panicked:?}");
        let after = w.write(|c| Ok(c.execute("INSERT INTO t VALUES (1)", [])?));
        assert!(matches!(after, Err(StoreError::Closed)), "a later write fails at once: {after:?}");
    }
}
