//! The callers of the sending methods waiting for the outbox's answer: each registers a
//! wait for its outbox row, and `out/<n>` finishes it with the platform's message id or why
//! the message was given up.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};

use crate::gateway::botapi::ApiError;
use crate::gateway::wake::Wake;

/// What the platform assigned to a sent message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub message_id: i64,
    pub date: i64,
}

/// Why the outbox gave a message up: it left the outbox unsent, and never will be. The threads
/// say it in the platform's words; the HTTP side (`api::methods::submit`) answers it as the
/// Bot API does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    /// The platform refused this message for good (an unknown chat, a rejected message, a
    /// refused message id, a group the bot is not in): 400 with why.
    Refused(String),
    /// The platform could not take it in every try (the recipient's devices or the group kept
    /// changing): 502 with why.
    GaveUp(String),
    /// The platform refuses the bot's credential: nothing is sent any more (401).
    CredentialRefused,
}

impl SendFailure {
    /// What the outbox records as the reason (`/outbox/given-up`).
    pub fn reason(&self) -> &str {
        match self {
            SendFailure::Refused(why) | SendFailure::GaveUp(why) => why,
            SendFailure::CredentialRefused => "the platform refused the bot's credential",
        }
    }
}

type SendOutcome = Result<Sent, SendFailure>;

/// The outbox's shared state: its wake-up, and the callers waiting for the platform's answer
/// to their message, by outbox row id (`outbox::submit` registers, the outbox thread finishes).
pub struct Outbox {
    pub wake: Wake,
    waiters: Mutex<Waiters>,
}

#[derive(Default)]
struct Waiters {
    by_row: HashMap<i64, Sender<SendOutcome>>,
    /// The gateway is stopping: every wait has ended and no new one starts.
    released: bool,
}

/// A caller's wait for its message (outbox row `id`).
pub struct Waiting {
    id: i64,
    rx: Receiver<SendOutcome>,
}

/// How a [`Waiting::wait`] ended.
#[derive(Debug)]
pub enum Waited {
    /// The outbox thread's answer: the platform's message id, or why it was not sent.
    Answer(SendOutcome),
    /// No answer yet; the message is still in the outbox.
    TimedOut,
    /// The gateway is stopping ([`Outbox::release`]): no answer will come to this wait.
    Released,
}

impl Waiting {
    /// The outbox row waited for.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The answer, or what ended the wait first.
    pub fn wait(&self, timeout: Duration) -> Waited {
        match self.rx.recv_timeout(timeout) {
            Ok(answer) => Waited::Answer(answer),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Waited::TimedOut,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Waited::Released,
        }
    }
}

impl Outbox {
    pub(crate) fn new() -> Outbox {
        Outbox { wake: Wake::new(), waiters: Mutex::new(Waiters::default()) }
    }

    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `record` (which stores the message and returns its row id) under the waiters' lock
    /// and registers a wait for that row, so a fast answer cannot be missed. Once the gateway
    /// is stopping nothing is recorded: 503, not sent.
    pub fn register(&self, record: impl FnOnce() -> Result<i64, ApiError>) -> Result<Waiting, ApiError> {
        let mut waiters = self.waiters();
        if waiters.released {
            return Err(ApiError::new(503, "Service Unavailable: the gateway is stopping; the message was not sent"));
        }
        let id = record()?;
        let (tx, rx) = bounded(1);
        waiters.by_row.insert(id, tx);
        Ok(Waiting { id, rx })
    }

    /// The answer for row `id`, to its caller if it still waits. False when nobody waits any
    /// more (the caller left, or was answered before).
    pub fn finish(&self, id: i64, result: SendOutcome) -> bool {
        match self.waiters().by_row.remove(&id) {
            Some(tx) => tx.send(result).is_ok(),
            None => false,
        }
    }

    /// Drops the wait for row `id`: its caller withdrew the message or left.
    pub fn forget(&self, id: i64) {
        self.waiters().by_row.remove(&id);
    }

    /// Answers every waiting caller with `failure` (the credential was refused).
    pub fn fail_all(&self, failure: SendFailure) {
        for (_, tx) in self.waiters().by_row.drain() {
            let _ = tx.send(Err(failure.clone()));
        }
    }

    /// Ends every wait ([`Waited::Released`]) and refuses new ones: the gateway is stopping, and
    /// its HTTP workers must finish their requests.
    pub fn release(&self) {
        let mut waiters = self.waiters();
        waiters.released = true;
        waiters.by_row.clear();
    }
}
