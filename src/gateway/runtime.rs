//! One bot's shared state: its store, its platform connection and status, and the wake-up
//! handles of its threads. The HTTP workers (through the Bot API methods, `api::methods`)
//! and the inbox, outbox and webhook threads share the same `BotShared`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::botapi::types::UserView;
use super::config::{BotConfig, Delivery};
use super::store::webhook as webhook_store;
use super::store::Store;
use crate::crypto;
use crate::wire::token;
use super::port::PlatformPort;
use crate::wire::rpc;
use super::advice::refusal_advice;
use super::send_wait::Outbox;
pub use super::wake::Wake;
pub use super::status::{Status, CLOCK_OFFSET_WARN_SECS};
use super::ctx::{Ctx, OnRefusal, Sending};

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

/// The bot's stop signal: a channel nobody ever sends on, closed by [`BotShared::stop`], so
/// every thread waiting on it (alone or in a `select!`) wakes at once.
struct Stop {
    tx: Mutex<Option<Sender<()>>>,
    rx: Receiver<()>,
}

impl OnRefusal for BotShared {
    fn refused(&self, refusal: rpc::Refusal) {
        BotShared::refused(self, refusal);
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

    /// What the bot's steps touch, lent to them (`ctx`).
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            name: &self.username,
            first_name: &self.first_name,
            user_id: self.compat_user_id,
            identity: &self.identity,
            store: &self.store,
            port: &*self.platform,
            on_identity_change: self.on_identity_change,
            group_self_update: self.delivery.group_self_update,
            status: &self.status,
            metrics: &self.metrics,
            stop: &self.stop.rx,
            on_refusal: self,
        }
    }

    /// What a sending Bot API method touches: the steps, the outbox's waiters, and the
    /// config's delivery settings (`send_wait_seconds`, `media_from_urls`).
    pub fn sending(&self) -> Sending<'_> {
        Sending { cx: self.ctx(), outbox: &self.outbox, delivery: &self.delivery }
    }

    /// See [`Ctx::security_alert`].
    pub fn security_alert(&self, what: &str) {
        self.ctx().security_alert(what);
    }

    /// A thread of this bot panicked: logged, and `/healthz` reports the bot unhealthy.
    pub fn thread_failed(&self, thread: &str) {
        log::error!("bot @{}: thread {thread} panicked; the bot is unhealthy (see /healthz)", self.username);
        self.status.failed_threads.lock().unwrap_or_else(|e| e.into_inner()).push(thread.to_string());
        self.status.set_error(format!("thread {thread} failed"));
    }

    /// The bot as a Bot API User.
    pub fn me(&self) -> UserView {
        self.ctx().me()
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
        self.ctx().is_revoked()
    }

    /// This runtime's device number on the platform (0 before registration).
    pub fn device_id(&self) -> u32 {
        self.platform.device_id()
    }

    pub fn is_device_removed(&self) -> bool {
        self.status.device_removed.load(Ordering::SeqCst)
    }

}

pub use crate::clock::unix_now;

/// The unit tests' bot, where the tests of many modules look for it.
#[cfg(test)]
pub use super::testing::{test_bot, test_bot_on_fake};
