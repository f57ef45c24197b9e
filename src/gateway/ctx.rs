//! What a step of the bot's threads touches, and nothing else: the store, the platform port,
//! the bot's name and identity, and where alerts and counters go. The import, the follow-ups,
//! the group steps and the outbox's send steps take a [`Ctx`]; only the drivers (the threads'
//! loops and the Bot API methods) hold the whole `BotShared`, which lends one out
//! (`BotShared::ctx`). A unit test builds one from a store and the fake platform alone
//! ([`Parts`]).

use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};

use super::botapi::types::UserView;
use super::metrics::BotMetrics;
use super::port::PlatformPort;
use super::status::Status;
use super::store::Store;
use crate::clock::unix_now;
use crate::crypto::IdentityKeyPair;
use crate::e2e::OnIdentityChange;

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
        }
    }
}
