//! One bot's runtime: its state store, its platform connection and status, and the Bot API
//! methods (the `BotApi` trait the HTTP layer calls). The inbox, outbox and webhook threads
//! share the same `BotShared`.
//!
//! Delivery mode (SPEC "Delivery mode of one bot runtime"): polling unless a webhook URL is
//! stored (store::webhook). Every mode change is one writer job, together with what goes with
//! it (dropping the queue, replacing `allowed_updates`), and then wakes the webhook thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{json, Value};

use super::botapi::backend::{BotApi, GetUpdates, SendMessage, SetWebhook};
use crate::wire::token;
use super::botapi::types::{self, MessageView, UserView};
use super::botapi::ApiError;
use super::config::BotConfig;
use super::outbox::OutboxHandle;
use super::store::webhook::{self as webhook_store, WebhookConfig};
use super::store::{chats, outbox, queue, Result as StoreResult, Store, StoreError};
use super::updates;
use super::webhook::WebhookHandle;
use crate::crypto;
use crate::wire::e2e::{Content, Text};
use crate::wire::Platform;

/// How long `sendMessage` waits for the platform to acknowledge before answering 504. The
/// message stays in the durable outbox and is still sent after that.
pub const SEND_WAIT: Duration = Duration::from_secs(25);

/// State shared by the HTTP workers and the bot's threads.
pub struct BotShared {
    pub compat_user_id: u64,
    pub username: String,
    pub first_name: String,
    token: String,
    pub store: Store,
    pub platform: Platform,
    pub status: Status,
    pub outbox: OutboxHandle,
    pub webhook: WebhookHandle,
}

/// What `/healthz` reports, kept true by the threads that know.
#[derive(Default)]
pub struct Status {
    pub connected: AtomicBool,
    pub revoked: AtomicBool,
    pub last_error: Mutex<Option<String>>,
}

impl Status {
    pub fn set_error(&self, e: impl Into<String>) {
        *self.last_error.lock().expect("status lock") = Some(e.into());
    }
}

impl BotShared {
    pub fn new(bot: &BotConfig, store: Store, platform: Platform) -> BotShared {
        BotShared {
            compat_user_id: bot.compat_user_id,
            username: bot.username.clone(),
            first_name: bot.first_name.clone(),
            token: bot.token.clone(),
            store,
            platform,
            status: Status::default(),
            outbox: OutboxHandle::new(),
            webhook: WebhookHandle::new(),
        }
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

    /// Marks the credential revoked: every API call answers 401 and nothing more is sent.
    pub fn revoke(&self, why: &str) {
        if !self.status.revoked.swap(true, Ordering::SeqCst) {
            log::error!("bot @{}: the platform revoked the credential: {why}", self.username);
        }
        self.status.set_error(format!("credential revoked: {why}"));
        self.status.connected.store(false, Ordering::SeqCst);
        self.outbox.wake();
        self.webhook.wake();
        // Not a commit, but a waiting long poll must look again and answer 401 now.
        self.store.notifier().committed();
    }

    pub fn is_revoked(&self) -> bool {
        self.status.revoked.load(Ordering::SeqCst)
    }

    /// Health of this bot for `/healthz`.
    pub fn health(&self) -> Value {
        let (queue_depth, outbox_depth, webhook) = self
            .store
            .read(|c| Ok((queue::depth(c)?, outbox::depth(c)?, webhook_store::is_set(c)?)))
            .unwrap_or((-1, -1, false));
        let mut h = json!({
            "username": self.username,
            "compat_user_id": self.compat_user_id,
            "connected": self.status.connected.load(Ordering::SeqCst),
            "revoked": self.is_revoked(),
            "mode": if webhook { "webhook" } else { "polling" },
            "queue_depth": queue_depth,
            "outbox_depth": outbox_depth,
        });
        if let Some(e) = self.status.last_error.lock().expect("status lock").clone() {
            h["last_error"] = Value::String(e);
        }
        h
    }

    /// Builds the Bot API message for a private-chat history entry.
    pub fn message_view(&self, chat: &chats::PrivateChat, entry: &chats::HistoryEntry) -> Result<MessageView, ApiError> {
        let me = self.me();
        self.store.read(|c| updates::history_view(c, &me, chat, entry, true)).map_err(store_error)
    }
}

pub use crate::clock::unix_now;

/// The Bot API of one bot: a cheap handle the HTTP layer holds per request.
pub struct BotRuntime {
    pub shared: Arc<BotShared>,
}

fn store_error(e: StoreError) -> ApiError {
    log::error!("state store: {e}");
    ApiError::internal(e)
}

const WEBHOOK_ACTIVE: &str =
    "can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first";

fn webhook_conflict() -> ApiError {
    ApiError::conflict(WEBHOOK_ACTIVE)
}

/// Refuses a polling write (acknowledgement, filter change) once a webhook is set.
fn polling_only(c: &Connection) -> StoreResult<()> {
    if webhook_store::is_set(c)? {
        return Err(StoreError::Refused(WEBHOOK_ACTIVE.to_string()));
    }
    Ok(())
}

/// A refused polling write is the 409 of webhook mode; anything else is a store failure.
fn mode_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Refused(m) if m == WEBHOOK_ACTIVE => webhook_conflict(),
        other => store_error(other),
    }
}

impl BotApi for BotRuntime {
    fn get_me(&self) -> Value {
        types::user_json(&self.shared.me())
    }

    fn check_polling(&self) -> Result<(), ApiError> {
        if self.shared.store.read(webhook_store::is_set).map_err(store_error)? {
            return Err(webhook_conflict());
        }
        Ok(())
    }

    fn get_updates(&self, req: GetUpdates) -> Result<Vec<Value>, ApiError> {
        let s = &self.shared;
        // In webhook mode nothing is touched: no acknowledgement, no filter change, and a
        // waiting poll is not disturbed. (Checked again here: a webhook may have been set
        // since the preflight.)
        self.check_polling()?;
        if let Some(offset) = req.offset {
            if offset < 0 {
                return Err(ApiError::bad_request("offset must not be negative"));
            }
        }
        if let Some(list) = &req.allowed_updates {
            updates::validate_kinds(list).map_err(ApiError::bad_request)?;
        }
        let notifier = s.store.notifier().clone();
        // A newer poll supersedes an older one (SDK-COMPAT §4: answer the older with 409).
        let ticket = notifier.begin_poll();
        // A new filter applies to updates created from now on (updates::admits).
        if let Some(list) = req.allowed_updates {
            let stored = s.store.read(queue::stored_allowed_updates).map_err(store_error)?;
            if stored.as_ref() != Some(&list) {
                s.store
                    .write(move |c| {
                        polling_only(c)?;
                        queue::store_allowed_updates(c, &list)
                    })
                    .map_err(mode_error)?;
            }
        }
        if let Some(offset) = req.offset {
            if s.store.read(|c| queue::has_below(c, offset)).map_err(store_error)? {
                // The mode is checked again inside the job: a setWebhook that committed since
                // the check above wins, and this poll acknowledges nothing.
                s.store
                    .write(move |c| {
                        polling_only(c)?;
                        queue::ack_below(c, offset)
                    })
                    .map_err(mode_error)?;
            }
        }
        let deadline = Instant::now() + req.timeout;
        loop {
            let seen = notifier.commits();
            let (webhook, updates) = s
                .store
                .read(|c| Ok((webhook_store::is_set(c)?, updates::fetch(c, req.offset, req.limit)?)))
                .map_err(store_error)?;
            if webhook {
                // setWebhook while this poll waited.
                return Err(webhook_conflict());
            }
            if !updates.is_empty() || Instant::now() >= deadline || notifier.is_stopping() {
                return Ok(updates);
            }
            if !notifier.wait(ticket, seen, deadline) {
                return Err(ApiError::conflict(
                    "terminated by other getUpdates request; make sure that only one bot instance is running",
                ));
            }
            if self.shared.is_revoked() {
                return Err(ApiError::unauthorized());
            }
        }
    }

    fn send_message(&self, req: SendMessage) -> Result<Value, ApiError> {
        let s = &self.shared;
        if req.chat_id <= 0 {
            return Err(ApiError::bad_request("unknown private chat"));
        }
        let chat_id = req.chat_id;
        let chat = s
            .store
            .read(|c| chats::private_chat(c, chat_id as u64))
            .map_err(store_error)?
            .ok_or_else(|| ApiError::bad_request("unknown private chat"))?;
        let mut reply_to = 0u64;
        if let Some(mid) = req.reply_to_message_id {
            let known = s.store.read(|c| chats::lookup(c, chat_id, mid)).map_err(store_error)?;
            match known {
                Some(_) => reply_to = mid as u64,
                None if req.allow_sending_without_reply => {}
                None => return Err(ApiError::bad_request("message to be replied not found")),
            }
        }
        let mut content = Content::new();
        let mut text = Text::new();
        text.text = req.text;
        text.entities = req.entities;
        content.set_text(text);
        content.reply_to_message_id = reply_to;
        let sent = s.outbox.submit(s, chat_id, content.clone(), SEND_WAIT)?;
        let entry = chats::HistoryEntry {
            chat_id,
            message_id: sent.message_id,
            from_bot: true,
            sender_id: s.compat_user_id as i64,
            date: sent.date,
            content,
        };
        Ok(types::message_json(&s.message_view(&chat, &entry)?))
    }

    fn delete_webhook(&self, drop_pending_updates: bool) -> Result<(), ApiError> {
        let s = &self.shared;
        // One job: the mode change and the drop commit together or not at all.
        s.store
            .write(move |c| {
                webhook_store::delete(c)?;
                if drop_pending_updates {
                    queue::clear(c)?;
                }
                Ok(())
            })
            .map_err(store_error)?;
        s.webhook.wake();
        Ok(())
    }

    fn set_webhook(&self, req: SetWebhook) -> Result<(), ApiError> {
        if req.url.is_empty() {
            // As in the Bot API: an empty url removes the webhook.
            return self.delete_webhook(req.drop_pending_updates);
        }
        if let Some(list) = &req.allowed_updates {
            updates::validate_kinds(list).map_err(ApiError::bad_request)?;
        }
        let s = &self.shared;
        let cfg = WebhookConfig { url: req.url, secret_token: req.secret_token };
        let (allowed, drop) = (req.allowed_updates, req.drop_pending_updates);
        s.store
            .write(move |c| {
                webhook_store::set(c, &cfg)?;
                if let Some(list) = &allowed {
                    queue::store_allowed_updates(c, list)?;
                }
                if drop {
                    queue::clear(c)?;
                }
                Ok(())
            })
            .map_err(store_error)?;
        log::info!(
            "bot @{}: webhook set (max_connections {} asked, 1 used){}",
            s.username,
            req.max_connections,
            if drop { ", pending updates dropped" } else { "" }
        );
        s.webhook.wake();
        Ok(())
    }

    fn get_webhook_info(&self) -> Result<Value, ApiError> {
        let (cfg, pending, error, allowed) = self
            .shared
            .store
            .read(|c| {
                Ok((
                    webhook_store::config(c)?,
                    queue::depth(c)?,
                    webhook_store::last_error(c)?,
                    queue::stored_allowed_updates(c)?,
                ))
            })
            .map_err(store_error)?;
        let mut info = json!({
            "url": cfg.as_ref().map(|w| w.url.clone()).unwrap_or_default(),
            "has_custom_certificate": false,
            "pending_update_count": pending,
        });
        if let Some(e) = error {
            info["last_error_date"] = json!(e.date);
            info["last_error_message"] = json!(e.message);
        }
        if cfg.is_some() {
            // Delivery is sequential whatever was asked (SPEC "Limits").
            info["max_connections"] = json!(1);
        }
        if let Some(list) = allowed.filter(|l| !l.is_empty()) {
            info["allowed_updates"] = json!(list);
        }
        Ok(info)
    }

    fn is_revoked(&self) -> bool {
        self.shared.is_revoked()
    }
}
