//! What a step of the bot's threads touches, and nothing else: the store, the platform port,
//! the bot's name and identity, and where alerts, counters and a refused credential go. The
//! import, the follow-ups, the group steps, the outbox's send steps and most Bot API methods
//! take a [`Ctx`]; only the drivers (the threads' loops, the webhook and getUpdates) hold the
//! whole `BotShared`, which lends one out (`BotShared::ctx`). A unit test builds one from a
//! store and the fake platform alone ([`Parts`]).

use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};

use super::advice::refusal_advice;
use super::botapi::types::UserView;
use super::botapi::ApiError;
use super::metrics::BotMetrics;
use super::config::Delivery;
use super::port::PlatformPort;
use super::send_wait::Outbox;
use super::status::Status;
use super::store::Store;
use crate::clock::unix_now;
use crate::crypto::IdentityKeyPair;
use crate::e2e::OnIdentityChange;
use crate::wire::rpc;

/// Acts on the platform's refusal of the bot's credential, whichever step met it: the bot
/// (`BotShared::refused`) stops sending, wakes its threads and answers every call 401.
pub trait OnRefusal: Sync {
    fn refused(&self, refusal: rpc::Refusal);
}

/// One bot, as its steps see it. Cheap to build: every field is borrowed or copied.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// The bot's username, for logs (`bot @name: …`).
    pub name: &'a str,
    pub first_name: &'a str,
    /// The bot's user id on the platform (its `compat_user_id`).
    pub user_id: u64,
    /// Signs keyboard contexts, removals and prekeys.
    pub identity: &'a IdentityKeyPair,
    pub store: &'a Store,
    pub port: &'a dyn PlatformPort,
    /// What a user's changed account identity key does (`accept_identity_changes`).
    pub on_identity_change: OnIdentityChange,
    /// The period of the bot's self-updates in its groups (`group_self_update_days`).
    pub group_self_update: Duration,
    pub status: &'a Status,
    pub metrics: &'a BotMetrics,
    /// Disconnected once the bot is stopping: a retry waits on it instead of sleeping.
    pub stop: &'a Receiver<()>,
    /// Where a refused credential goes ([`Ctx::revoke`]).
    pub on_refusal: &'a dyn OnRefusal,
}

/// What a step that sends through the outbox touches (the sending Bot API methods): the
/// steps' [`Ctx`], the outbox's waiters, and the config's delivery settings
/// (`send_wait_seconds`, `media_from_urls`). Lent by `BotShared::sending`.
#[derive(Clone, Copy)]
pub struct Sending<'a> {
    pub cx: Ctx<'a>,
    pub outbox: &'a Outbox,
    pub delivery: &'a Delivery,
}

/// A sending step is a step with the outbox at hand: it reads the store and calls the
/// platform as any other.
impl<'a> std::ops::Deref for Sending<'a> {
    type Target = Ctx<'a>;

    fn deref(&self) -> &Ctx<'a> {
        &self.cx
    }
}

impl Ctx<'_> {
    /// The bot as a Bot API User.
    pub fn me(&self) -> UserView {
        UserView {
            id: self.user_id as i64,
            is_bot: true,
            first_name: self.first_name.to_string(),
            username: Some(self.name.to_string()),
        }
    }

    /// The bot is stopping: a retry gives up.
    pub fn is_stopping(&self) -> bool {
        matches!(self.stop.try_recv(), Err(TryRecvError::Disconnected))
    }

    /// The platform refuses the bot's credential (`BotShared::refused`): nothing more is sent.
    pub fn is_revoked(&self) -> bool {
        self.status.revoked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The platform refused the credential (`why` in its words): handed to the bot, which
    /// stops sending and answers 401 from now on.
    pub fn revoke(&self, why: &str) {
        self.on_refusal.refused(rpc::Refusal::of(why));
    }

    /// What a Bot API call gets once the platform refuses this runtime: 401, saying why when
    /// the device was removed (a revoked token keeps the plain "Unauthorized").
    pub fn refusal(&self) -> ApiError {
        if !self.status.device_removed.load(std::sync::atomic::Ordering::SeqCst) {
            return ApiError::unauthorized();
        }
        let refusal = self.status.refusal.lock().unwrap_or_else(|e| e.into_inner()).unwrap_or(rpc::Refusal::DeviceRemoved);
        ApiError::new(401, format!("Unauthorized: {}", refusal_advice(refusal, self.name, self.port.device_id())))
    }

    /// A group leaf nobody vouched for was refused (`e2e::leaf`): the platform, or a member,
    /// tried to add a device to a group. Logged as a security warning, counted
    /// (`botgw_security_alerts_total`) and shown in `/healthz`.
    pub fn security_alert(&self, what: &str) {
        log::warn!("bot @{}: SECURITY ALERT: {what}", self.name);
        BotMetrics::add(&self.metrics.security_alerts, 1);
        *self.status.security_alert.lock().unwrap_or_else(|e| e.into_inner()) = Some((unix_now(), what.to_string()));
    }
}

/// What a unit test owns to lend a [`Ctx`] without a whole bot: a store in a temporary
/// directory, the fake platform, a status and counters.
#[cfg(test)]
pub struct Parts {
    pub dir: tempfile::TempDir,
    pub identity: IdentityKeyPair,
    pub store: Store,
    pub fake: std::sync::Arc<super::port::fake::FakePlatform>,
    pub status: Status,
    pub metrics: BotMetrics,
    pub on_identity_change: OnIdentityChange,
    /// Held so that `stop` stays connected; dropping it is the test's stop.
    pub stop: (crossbeam_channel::Sender<()>, Receiver<()>),
    /// The refusals steps handed on.
    pub refusals: Refusals,
}

/// A unit test's [`OnRefusal`]: keeps what it was handed.
#[cfg(test)]
#[derive(Default)]
pub struct Refusals(pub std::sync::Mutex<Vec<rpc::Refusal>>);

#[cfg(test)]
impl OnRefusal for Refusals {
    fn refused(&self, refusal: rpc::Refusal) {
        self.0.lock().expect("refusals").push(refusal);
    }
}

#[cfg(test)]
impl Parts {
    /// `@b_bot`, user 1, device 1 of the fake platform.
    pub fn new() -> Parts {
        crate::crypto::init();
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(&dir.path().join("bot.db"), &[7u8; 32], &"cd".repeat(32), "b_bot").expect("store");
        Parts {
            dir,
            identity: IdentityKeyPair::generate(),
            store,
            fake: std::sync::Arc::new(super::port::fake::FakePlatform::new(1)),
            status: Status::default(),
            metrics: BotMetrics::default(),
            on_identity_change: OnIdentityChange::Refuse,
            stop: crossbeam_channel::bounded(0),
            refusals: Refusals::default(),
        }
    }

    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            name: "b_bot",
            first_name: "B",
            user_id: 1,
            identity: &self.identity,
            store: &self.store,
            port: &*self.fake,
            on_identity_change: self.on_identity_change,
            group_self_update: super::config::Delivery::default().group_self_update,
            status: &self.status,
            metrics: &self.metrics,
            stop: &self.stop.1,
            on_refusal: &self.refusals,
        }
    }
}
