//! The store writer thread: the only holder of a writable connection to a bot database.
//!
//! Jobs arrive over a bounded channel. The thread takes whatever is waiting (up to
//! `MAX_BATCH`), runs each job in its own savepoint inside ONE transaction, commits once (one
//! fsync for the whole group), and only then answers each job. A failing job rolls back its
//! own savepoint and nothing else.
//!
//! A batch in which a job deleted secrets (past MLS epochs) is followed by a WAL checkpoint
//! (`e2e::wal`): no old page images of them stay in the `-wal` file.

use std::thread;

use crossbeam_channel::{bounded, Receiver, Sender};
use rusqlite::Connection;

use super::{Notifier, Result, StoreError};
use std::sync::Arc;

/// Jobs queued before callers block; callers wait for their commit anyway, so this only
/// bounds how many threads can have a job in flight.
const QUEUE_CAPACITY: usize = 1024;
/// Jobs committed together at most.
const MAX_BATCH: usize = 256;

/// A job runs against the transaction and returns whether it succeeded plus the reply to
/// deliver once the outcome of the commit is known.
type Reply = Box<dyn FnOnce(Result<()>) + Send>;
type Job = Box<dyn FnOnce(&Connection) -> (bool, Reply) + Send>;

/// The writer thread's handle: jobs go in through `jobs`; dropping the writer closes the
/// queue, lets the thread finish the batch it holds, and joins it.
pub struct Writer {
    jobs: Option<Sender<Job>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.jobs.take();
        // (Never join from the writer thread itself, should a job hold the last handle.)
        if let Some(t) = self.thread.take().filter(|t| t.thread().id() != thread::current().id()) {
            if t.join().is_err() {
                log::error!("the store writer thread panicked");
            }
        }
    }
}

impl Writer {
    /// Starts the writer thread, named `thread_name` (15 bytes at most).
    pub fn start(conn: Connection, thread_name: &str, notifier: Arc<Notifier>) -> std::io::Result<Writer> {
        let (tx, rx) = bounded::<Job>(QUEUE_CAPACITY);
        let thread = thread::Builder::new().name(thread_name.to_string()).spawn(move || run(conn, rx, notifier))?;
        Ok(Writer { jobs: Some(tx), thread: Some(thread) })
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
        self.jobs.as_ref().ok_or(StoreError::Closed)?.send(job).map_err(|_| StoreError::Closed)?;
        reply_rx.recv().map_err(|_| StoreError::Closed)?
    }
}

fn run(conn: Connection, jobs: Receiver<Job>, notifier: Arc<Notifier>) {
    // Ends when every Writer (Sender) is dropped.
    while let Ok(first) = jobs.recv() {
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
                let (ok, reply) = job(&conn);
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
                crate::e2e::wal::checkpoint_if_secrets_deleted(&conn);
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
        // Jobs of a batch that failed before they ran are answered by dropping them: their
        // reply channel closes and the caller sees `Closed`.
    }
    log::debug!("store writer stopped");
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
        let w = Writer::start(conn, "test", Arc::new(Notifier::default())).expect("writer");
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
}
