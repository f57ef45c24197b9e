//! One bot's shared state: its store, its platform connection and status, and the wake-up
//! handles of its threads. The HTTP workers (through the Bot API methods, `api::methods`)
//! and the inbox, outbox and webhook threads share the same `BotShared`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, Sender};
use serde_json::{json, Value};

use super::botapi::types::{MessageView, UserView};
use super::botapi::ApiError;
use super::config::{BotConfig, Delivery};
use super::store::webhook as webhook_store;
use super::store::{chats, outbox, queue, Store, StoreError};
use super::updates;
use crate::crypto;
use crate::wire::token;
use super::port::PlatformPort;
use crate::wire::rpc;

/// State shared by the HTTP workers and the bot's threads.
pub struct BotShared {
    pub compat_user_id: u64,
    pub username: String,
    pub first_name: String,
    token: String,
    /// The bot identity: signs inline keyboard contexts; its public key (the Bot ID) checks
    /// presses.
    pub identity: crate::crypto::IdentityKeyPair,
    pub store: Store,
    /// Every call to the platform (`port`): gRPC in production, an in-memory fake in tests.
    pub platform: Arc<dyn PlatformPort>,
    /// The config's delivery settings (send wait, webhook secret headers), the same for every
    /// bot.
    pub delivery: Delivery,
    /// What a user's changed account identity key does (`accept_identity_changes`).
    pub on_identity_change: crate::e2e::OnIdentityChange,
    pub status: Status,
    /// Counters for `/metrics`, kept where the events happen.
    pub metrics: super::metrics::BotMetrics,
    /// The outbox thread's wake-up and the HTTP workers waiting for their messages.
    pub outbox: Outbox,
    /// Wakes the webhook thread, starting it when none runs (setWebhook, deleteWebhook,
    /// revocation, stop).
    pub webhook: Wake,
    /// Whether a webhook is set, as the store last said ([`BotShared::refresh_webhook_on`]):
    /// while it is, a commit starts `wh/<n>` when it does not run (`threads`).
    webhook_on: AtomicBool,
    /// Serialises the refreshes of `webhook_on`, so the last one reads the last change.
    webhook_on_refresh: Mutex<()>,
    stop: Stop,
    /// Ends the platform's Inbox stream that `ins/<n>` is blocked on, at stop.
    stream_cancel: Mutex<Option<futures::channel::oneshot::Sender<()>>>,
}

/// A wake-up for a thread that re-reads everything when it wakes: one pending wake-up is
/// enough, so waking never blocks.
pub struct Wake {
    tx: Sender<()>,
    rx: Receiver<()>,
    /// The on-demand thread a wake-up starts, if the woken thread is one (`out/<n>`).
    starts: OnceLock<Arc<crate::demand::Demand>>,
}

impl Wake {
    fn new() -> Wake {
        let (tx, rx) = bounded(1);
        Wake { tx, rx, starts: OnceLock::new() }
    }

    pub fn wake(&self) {
        if let Err(e) = self.try_wake() {
            log::error!("cannot start a thread: {e}");
        }
    }

    /// [`Wake::wake`], saying when the thread to start could not be started.
    pub fn try_wake(&self) -> std::io::Result<()> {
        let _ = self.tx.try_send(());
        match self.starts.get() {
            Some(demand) => demand.start(),
            None => Ok(()),
        }
    }

    /// From now on a wake-up also starts `demand`'s thread when none runs.
    pub fn starts(&self, demand: Arc<crate::demand::Demand>) {
        let _ = self.starts.set(demand);
    }

    /// What the woken thread waits on.
    pub fn receiver(&self) -> &Receiver<()> {
        &self.rx
    }
}

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
    fn new() -> Outbox {
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

/// The bot's stop signal: a channel nobody ever sends on, closed by [`BotShared::stop`], so
/// every thread waiting on it (alone or in a `select!`) wakes at once.
struct Stop {
    tx: Mutex<Option<Sender<()>>>,
    rx: Receiver<()>,
}

/// What `/healthz` reports, kept true by the threads that know.
#[derive(Default)]
pub struct Status {
    pub connected: AtomicBool,
    /// The platform refuses this runtime's credential (token revoked, bot disabled, or its
    /// device removed): nothing more is sent or received.
    pub revoked: AtomicBool,
    /// The refusal is because the bot's owner removed this runtime's device (`/removedevice`).
    pub device_removed: AtomicBool,
    /// Why the platform refused the credential, once it did.
    pub refusal: Mutex<Option<rpc::Refusal>>,
    pub last_error: Mutex<Option<String>>,
    /// The last security alert (a group leaf nobody vouched for, refused) and its date.
    pub security_alert: Mutex<Option<(i64, String)>>,
    /// Threads of this bot that panicked (their short names): the bot is unhealthy.
    pub failed_threads: Mutex<Vec<String>>,
    /// The platform's clock minus ours, in seconds, as its last `UploadPrekeys` answer said
    /// (`None` before the first, or from a platform that does not say).
    pub clock_offset: Mutex<Option<i64>>,
}

/// A clock further than this from the platform's is warned about and shown in `/healthz`: the
/// platform refuses credentials signed more than 5 minutes off, and schedules drift with it.
pub const CLOCK_OFFSET_WARN_SECS: i64 = 60;

impl Status {
    pub fn set_error(&self, e: impl Into<String>) {
        *self.last_error.lock().expect("status lock") = Some(e.into());
    }

    /// Notes the platform's time `server_time` (0: not said) against ours `now`; a clock
    /// further off than [`CLOCK_OFFSET_WARN_SECS`] is logged when first seen so.
    pub fn note_platform_time(&self, username: &str, server_time: i64, now: i64) {
        if server_time == 0 {
            return;
        }
        let offset = server_time.saturating_sub(now);
        let before = self.clock_offset.lock().unwrap_or_else(|e| e.into_inner()).replace(offset);
        let far = |o: i64| o.abs() > CLOCK_OFFSET_WARN_SECS;
        if far(offset) && !before.is_some_and(far) {
            log::warn!(
                "bot @{username}: this machine's clock is {}s {} the platform's; set it right (NTP): the platform \
                 refuses credentials more than 300s off, and key rotations are dated by this clock",
                offset.abs(),
                if offset < 0 { "ahead of" } else { "behind" }
            );
        }
    }
}

impl BotShared {
    pub fn new(bot: &BotConfig, store: Store, platform: Arc<dyn PlatformPort>) -> BotShared {
        BotShared {
            compat_user_id: bot.compat_user_id,
            username: bot.username.clone(),
            first_name: bot.first_name.clone(),
            token: bot.token.clone(),
            identity: bot.identity(),
            store,
            platform,
            delivery: Delivery::default(),
            on_identity_change: if bot.accept_identity_changes {
                crate::e2e::OnIdentityChange::Accept
            } else {
                crate::e2e::OnIdentityChange::Refuse
            },
            status: Status::default(),
            metrics: Default::default(),
            outbox: Outbox::new(),
            webhook: Wake::new(),
            webhook_on: AtomicBool::new(false),
            webhook_on_refresh: Mutex::new(()),
            stop: {
                let (tx, rx) = bounded(0);
                Stop { tx: Mutex::new(Some(tx)), rx }
            },
            stream_cancel: Mutex::new(None),
        }
    }

    /// The config's delivery settings instead of the defaults.
    pub fn with_delivery(mut self, delivery: Delivery) -> BotShared {
        self.delivery = delivery;
        self
    }

    /// Whether a webhook is set (as of the last [`BotShared::refresh_webhook_on`]).
    pub fn webhook_on(&self) -> bool {
        self.webhook_on.load(Ordering::SeqCst)
    }

    /// Reads from the store whether a webhook is set; call after every change of the webhook
    /// configuration (and at start). Serialised, so of two changes racing the last refresh
    /// reads the state both left. A store that cannot say counts as set: a thread started
    /// for nothing ends when idle, a webhook never served would lose its deliveries.
    pub fn refresh_webhook_on(&self) -> bool {
        let _serial = self.webhook_on_refresh.lock().unwrap_or_else(|e| e.into_inner());
        let on = self.store.read(webhook_store::is_set).unwrap_or(true);
        self.webhook_on.store(on, Ordering::SeqCst);
        on
    }

    /// Ends what HTTP workers wait for, first of all at shutdown, so the listeners can join
    /// them: long polls, and the callers waiting for the outbox ([`Outbox::release`]).
    pub fn end_requests(&self) {
        self.store.notifier().stop();
        self.outbox.release();
    }

    /// Tells every thread of this bot to stop: closes the stop channel and wakes the waits that
    /// do not watch it (the outbox's and the webhook's wake-ups, long polls, callers waiting for
    /// the outbox).
    pub fn stop(&self) {
        self.outbox.release();
        self.stop.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        // Dropping the sender resolves the stream thread's receiver.
        self.stream_cancel.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.outbox.wake.wake();
        self.webhook.wake();
        self.store.notifier().stop();
    }

    /// What `ins/<n>` waits on beside its stream: it resolves when the bot stops (at once if
    /// it has already), so a stream blocked on the network never delays shutdown.
    pub fn stream_cancel(&self) -> futures::channel::oneshot::Receiver<()> {
        let (tx, rx) = futures::channel::oneshot::channel();
        *self.stream_cancel.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        if self.is_stopping() {
            self.stream_cancel.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        rx
    }

    pub fn is_stopping(&self) -> bool {
        self.stop.tx.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// Disconnected once the bot is stopping: wait on it (with a timeout, or in a `select!`)
    /// instead of sleeping, so that stopping is never held up.
    pub fn stop_signal(&self) -> &Receiver<()> {
        &self.stop.rx
    }

    /// A group leaf nobody vouched for was refused (`e2e::leaf`): the platform, or a member,
    /// tried to add a device to a group. Logged as a security warning, counted
    /// (`botgw_security_alerts_total`) and shown in `/healthz`.
    pub fn security_alert(&self, what: &str) {
        log::warn!("bot @{}: SECURITY ALERT: {what}", self.username);
        super::metrics::BotMetrics::add(&self.metrics.security_alerts, 1);
        *self.status.security_alert.lock().unwrap_or_else(|e| e.into_inner()) = Some((unix_now(), what.to_string()));
    }

    /// A thread of this bot panicked: logged, and `/healthz` reports the bot unhealthy.
    pub fn thread_failed(&self, thread: &str) {
        log::error!("bot @{}: thread {thread} panicked; the bot is unhealthy (see /healthz)", self.username);
        self.status.failed_threads.lock().unwrap_or_else(|e| e.into_inner()).push(thread.to_string());
        self.status.set_error(format!("thread {thread} failed"));
    }

    /// The bot as a Bot API User.
    pub fn me(&self) -> UserView {
        UserView {
            id: self.compat_user_id as i64,
            is_bot: true,
            first_name: self.first_name.clone(),
            username: Some(self.username.clone()),
        }
    }

    /// True if `token` is this bot's configured token (constant-time on the secret). Compared
    /// as the platform compares it: the numeric id, and the secret's bytes, so the hex case of
    /// the config and of the SDK need not agree.
    pub fn token_matches(&self, token: &str) -> bool {
        let secret = |t: &str| token::parse(t).filter(|p| p.numeric_id == self.compat_user_id).map(|p| p.secret);
        match (secret(token), secret(&self.token)) {
            (Some(given), Some(ours)) => crypto::constant_time_eq(&given, &ours),
            _ => false,
        }
    }

    /// The platform refused the credential, as its message `why` says (`rpc::Refusal::of`):
    /// see [`BotShared::refused`].
    pub fn revoke(&self, why: &str) {
        self.refused(rpc::Refusal::of(why));
    }

    /// The one step for every refusal of the credential (a replaced token, a disabled bot, this
    /// runtime's device removed by `/removedevice`), whichever thread met it: said once in the
    /// log with its advice, then every API call answers 401 (with the advice when the device was
    /// removed), nothing more is sent, the Inbox stream is not retried, and `/healthz` is
    /// unhealthy with the reason.
    pub fn refused(&self, refusal: rpc::Refusal) {
        if matches!(refusal, rpc::Refusal::DeviceRemoved | rpc::Refusal::IdentityMoved) {
            self.status.device_removed.store(true, Ordering::SeqCst);
        }
        *self.status.refusal.lock().unwrap_or_else(|e| e.into_inner()) = Some(refusal);
        let advice = refusal_advice(refusal, &self.username, self.device_id());
        if !self.status.revoked.swap(true, Ordering::SeqCst) {
            log::error!("bot @{}: {advice}", self.username);
        }
        self.status.set_error(advice);
        self.status.connected.store(false, Ordering::SeqCst);
        self.outbox.wake.wake();
        self.webhook.wake();
        // Not a commit, but a waiting long poll must look again and answer 401 now.
        self.store.notifier().committed();
    }

    pub fn is_revoked(&self) -> bool {
        self.status.revoked.load(Ordering::SeqCst)
    }

    /// This runtime's device number on the platform (0 before registration).
    pub fn device_id(&self) -> u32 {
        self.platform.device_id()
    }

    pub fn is_device_removed(&self) -> bool {
        self.status.device_removed.load(Ordering::SeqCst)
    }

    fn device_removed_reason(&self) -> String {
        let refusal = self.status.refusal.lock().unwrap_or_else(|e| e.into_inner()).unwrap_or(rpc::Refusal::DeviceRemoved);
        refusal_advice(refusal, &self.username, self.device_id())
    }

    /// What a Bot API call gets once the platform refuses this runtime: 401, saying why when
    /// the device was removed (a revoked token keeps the plain "Unauthorized").
    pub fn refusal(&self) -> ApiError {
        if self.is_device_removed() {
            ApiError::new(401, format!("Unauthorized: {}", self.device_removed_reason()))
        } else {
            ApiError::unauthorized()
        }
    }

    /// The queue's and the outbox's depth and whether a webhook is set (-1, -1, false when
    /// the store cannot be read): what `/healthz` and `/metrics` report.
    pub fn depths(&self) -> (i64, i64, bool) {
        self.store
            .read(|c| Ok((queue::depth(c)?, outbox::depth(c)?, webhook_store::is_set(c)?)))
            .unwrap_or((-1, -1, false))
    }

    /// This bot's sample for `/metrics`.
    pub fn metrics_sample(&self) -> super::metrics::BotSample<'_> {
        let (queue_depth, outbox_depth, _) = self.depths();
        super::metrics::BotSample {
            bot: format!("@{}", self.username),
            metrics: &self.metrics,
            queue_depth,
            outbox_depth,
            connected: self.status.connected.load(Ordering::SeqCst),
            credential_refused: self.is_revoked(),
            failed_threads: self.status.failed_threads.lock().unwrap_or_else(|e| e.into_inner()).len(),
        }
    }

    /// The sends this bot's outbox gave up, newest first, for `/outbox/given-up` (shape in
    /// docs/operations.md): never their content.
    pub fn given_up(&self) -> Value {
        let listed = self.store.read(|c| outbox::given_up(c, outbox::GIVEN_UP_LIMIT as usize));
        let mut v = json!({ "username": self.username, "compat_user_id": self.compat_user_id });
        match listed {
            Ok(list) => {
                let sends: Vec<Value> = list
                    .into_iter()
                    .map(|g| {
                        let mut o = json!({
                            "chat_id": g.chat_id,
                            "kind": g.kind,
                            "client_message_id": g.client_message_id,
                            "submitted_at": g.submitted_at,
                            "given_up_at": g.given_up_at,
                            "handed_to_platform": g.handed,
                            "reason": g.reason,
                        });
                        if let Some(id) = g.message_id {
                            o["message_id"] = json!(id);
                        }
                        o
                    })
                    .collect();
                v["given_up"] = json!(sends);
            }
            Err(e) => v["error"] = json!(format!("cannot read the state store: {e}")),
        }
        v
    }

    /// Health of this bot for `/healthz` (shape in docs/operations.md).
    pub fn health(&self) -> Value {
        let (queue_depth, outbox_depth, webhook) = self.depths();
        let mut h = json!({
            "username": self.username,
            "compat_user_id": self.compat_user_id,
            // This runtime's device: the SPEC's bot_runtime_id (docs/decisions.md).
            "device_id": self.device_id(),
            "connected": self.status.connected.load(Ordering::SeqCst),
            "revoked": self.is_revoked(),
            "mode": if webhook { "webhook" } else { "polling" },
            "queue_depth": queue_depth,
            "outbox_depth": outbox_depth,
        });
        if let Some(e) = self.status.last_error.lock().expect("status lock").clone() {
            h["last_error"] = Value::String(e);
        }
        if let Some(why) = self.store.failing() {
            // It receives and sends nothing new until a commit succeeds again.
            h["storage_failing"] = Value::String(why);
        }
        if self.is_device_removed() {
            h["device_removed"] = json!(true);
        }
        if let Some(refusal) = *self.status.refusal.lock().unwrap_or_else(|e| e.into_inner()) {
            h["credential"] = json!(refusal.name());
            h["problem"] = json!(refusal_advice(refusal, &self.username, self.device_id()));
        }
        if let Some(offset) = *self.status.clock_offset.lock().unwrap_or_else(|e| e.into_inner()) {
            // The platform's clock minus ours; far off, it says so.
            h["clock_offset_seconds"] = json!(offset);
            if offset.abs() > CLOCK_OFFSET_WARN_SECS {
                h["clock_problem"] = json!(format!(
                    "this machine's clock is {}s {} the platform's: set it right (NTP)",
                    offset.abs(),
                    if offset < 0 { "ahead of" } else { "behind" }
                ));
            }
        }
        let failed = self.status.failed_threads.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if !failed.is_empty() {
            h["failed_threads"] = json!(failed);
        }
        if let Some((date, what)) = self.status.security_alert.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            let count = self.metrics.security_alerts.load(Ordering::Relaxed);
            h["security_alert"] = json!({"count": count, "last": what, "date": date});
        }
        h
    }

    /// Builds the Bot API message for a history entry of a private chat or a group.
    pub fn message_view(&self, chat: updates::ChatRef<'_>, entry: &chats::HistoryEntry) -> Result<MessageView, ApiError> {
        let me = self.me();
        self.store.read(|c| updates::history_view(c, &me, chat, entry, true)).map_err(store_error)
    }
}

/// What the platform's refusal of a bot's credential means and what to do, for the log,
/// `/healthz`, start-up errors and `check-config`.
pub fn refusal_advice(refusal: rpc::Refusal, username: &str, device_id: u32) -> String {
    match refusal {
        rpc::Refusal::TokenReplaced => format!(
            "the platform no longer accepts bot @{username}'s token: it was replaced (@BotManager /token @{username}) \
             or revoked. Put the current token (from /token @{username}) in bots[].token of the config and restart \
             the gateway; pending updates stay in state_dir"
        ),
        rpc::Refusal::BotDisabled => format!(
            "bot @{username} was disabled by its owner (@BotManager /disable @{username}): the platform refuses it for \
             good and a disabled bot cannot get a new token. Remove it from the config (or create a new bot with \
             /newbot) and restart the gateway"
        ),
        rpc::Refusal::DeviceRemoved => format!(
            "this runtime's device {device_id} was removed via @BotManager /removedevice; it receives nothing more. \
             Start it with a fresh state_dir to register a new device"
        ),
        rpc::Refusal::IdentityMoved => format!(
            "the bot has a new identity (its owner's @BotManager /rekey), and this runtime's device {device_id} \
             belonged to the old one. Restart the gateway with the config e2e-chat rekey wrote (the new \
             identity_recovery_secret_hex and bot_id_hex, the old secret as previous_identity_recovery_secret_hex): it \
             keeps its state and registers a device of the new identity"
        ),
    }
}

pub use crate::clock::unix_now;

fn store_error(e: StoreError) -> ApiError {
    log::error!("state store: {e}");
    ApiError::internal(e)
}

/// A real bot (`@b_bot`, device 1) over a temporary store, on an in-memory platform that
/// answers nothing (every call UNAVAILABLE), whose sending methods wait `send_wait`: the unit
/// tests' bot (api methods, outbox).
#[cfg(test)]
pub fn test_bot(send_wait: std::time::Duration) -> (tempfile::TempDir, Arc<BotShared>) {
    let (dir, bot, _) = test_bot_on_fake(send_wait);
    (dir, bot)
}

/// `test_bot`, and the fake platform it calls, for the test to script and inspect.
#[cfg(test)]
pub fn test_bot_on_fake(
    send_wait: std::time::Duration,
) -> (tempfile::TempDir, Arc<BotShared>, Arc<super::port::fake::FakePlatform>) {
    use crate::gateway::config::{BotConfig, Delivery};
    crate::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = format!("1:{}", "ab".repeat(32));
    let store = crate::gateway::store::Store::open(&dir.path().join("bot.db"), &[7u8; 32], &"cd".repeat(32), "b_bot").expect("store");
    let fake = Arc::new(super::port::fake::FakePlatform::new(1));
    let config = BotConfig {
        bot_id_hex: "cd".repeat(32),
        token,
        recovery_secret: zeroize::Zeroizing::new([7u8; 32]),
        previous_recovery_secret: None,
        compat_user_id: 1,
        username: "b_bot".into(),
        first_name: "B".into(),
        accept_identity_changes: false,
    };
    let delivery = Delivery { send_wait, ..Delivery::default() };
    let bot = Arc::new(BotShared::new(&config, store, fake.clone()).with_delivery(delivery));
    (dir, bot, fake)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_clock_far_from_the_platforms_is_shown_in_healthz_with_its_offset() {
        let (_dir, bot) = super::test_bot(std::time::Duration::from_millis(10));
        assert!(bot.health().get("clock_offset_seconds").is_none(), "unknown before the platform said its time");
        let now = crate::clock::unix_now();
        bot.status.note_platform_time(&bot.username, now + 2, now);
        let h = bot.health();
        assert_eq!(h["clock_offset_seconds"], 2);
        assert!(h.get("clock_problem").is_none(), "two seconds is no problem: {h}");
        // Our clock a year ahead of the platform's.
        bot.status.note_platform_time(&bot.username, now - 365 * 86_400, now);
        let h = bot.health();
        assert_eq!(h["clock_offset_seconds"], -365 * 86_400);
        assert!(h["clock_problem"].as_str().is_some_and(|p| p.contains("ahead of the platform")), "{h}");
        // A platform that does not say its time changes nothing.
        bot.status.note_platform_time(&bot.username, 0, now);
        assert_eq!(bot.health()["clock_offset_seconds"], -365 * 86_400);
    }
}
