//! One bot's runtime: its state store, its platform connection and status, and the Bot API
//! methods (the `BotApi` trait the HTTP layer calls). The inbox and outbox threads share the
//! same `BotShared`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{json, Value};

use super::botapi::backend::{BotApi, GetUpdates, SendMessage};
use super::botapi::types::{self, ChatView, MessageView, UserView};
use super::botapi::ApiError;
use super::config::BotConfig;
use super::outbox::OutboxHandle;
use super::store::{chats, outbox, queue, Result as StoreResult, Store};
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

    /// True if `token` is exactly this bot's configured token (constant-time).
    pub fn token_matches(&self, token: &str) -> bool {
        crypto::constant_time_eq(token.as_bytes(), self.token.as_bytes())
    }

    /// Marks the credential revoked: every API call answers 401 and nothing more is sent.
    pub fn revoke(&self, why: &str) {
        if !self.status.revoked.swap(true, Ordering::SeqCst) {
            log::error!("bot @{}: the platform revoked the credential: {why}", self.username);
        }
        self.status.set_error(format!("credential revoked: {why}"));
        self.status.connected.store(false, Ordering::SeqCst);
        self.outbox.wake();
    }

    pub fn is_revoked(&self) -> bool {
        self.status.revoked.load(Ordering::SeqCst)
    }

    /// Health of this bot for `/healthz`.
    pub fn health(&self) -> Value {
        let (queue_depth, outbox_depth) = self
            .store
            .read(|c| Ok((queue::depth(c)?, outbox::depth(c)?)))
            .unwrap_or((-1, -1));
        let mut h = json!({
            "username": self.username,
            "compat_user_id": self.compat_user_id,
            "connected": self.status.connected.load(Ordering::SeqCst),
            "revoked": self.is_revoked(),
            "mode": "polling",
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
        self.store.read(|c| history_view(c, &me, chat, entry, true)).map_err(store_error)
    }
}

/// The Bot API message of a private-chat history entry; the reply snapshot is nested one
/// level only (`nest`).
pub fn history_view(
    c: &Connection,
    me: &UserView,
    chat: &chats::PrivateChat,
    entry: &chats::HistoryEntry,
    nest: bool,
) -> StoreResult<MessageView> {
    let from = if entry.from_bot {
        me.clone()
    } else {
        UserView {
            id: chat.user_id as i64,
            is_bot: false,
            first_name: chat.first_name.clone(),
            username: non_empty(&chat.username),
        }
    };
    let (text, entities) = match &entry.content.body {
        Some(crate::wire::e2e::content::Body::Text(t)) => {
            // PTB and telegraf route commands by a bot_command entity (SDK-COMPAT §8.9).
            let entities = if t.entities.is_empty() && !entry.from_bot {
                types::command_entities(&t.text)
            } else {
                t.entities.clone()
            };
            (Some(t.text.clone()), entities)
        }
        _ => (None, Vec::new()),
    };
    let reply_to_message = match (nest, entry.content.reply_to_message_id) {
        (true, id) if id != 0 => chats::lookup(c, entry.chat_id, id as i64)?
            .map(|r| history_view(c, me, chat, &r, false))
            .transpose()?
            .map(Box::new),
        _ => None,
    };
    Ok(MessageView {
        message_id: entry.message_id,
        date: entry.date,
        chat: private_chat_view(chat),
        from: Some(from),
        text,
        entities,
        reply_to_message,
    })
}

pub fn private_chat_view(chat: &chats::PrivateChat) -> ChatView {
    ChatView::Private {
        id: chat.user_id as i64,
        first_name: chat.first_name.clone(),
        username: non_empty(&chat.username),
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The Bot API of one bot: a cheap handle the HTTP layer holds per request.
pub struct BotRuntime {
    pub shared: Arc<BotShared>,
}

fn store_error(e: super::store::StoreError) -> ApiError {
    log::error!("state store: {e}");
    ApiError::internal(e)
}

impl BotApi for BotRuntime {
    fn get_me(&self) -> Value {
        types::user_json(&self.shared.me())
    }

    fn get_updates(&self, req: GetUpdates) -> Result<Vec<Value>, ApiError> {
        let s = &self.shared;
        let notifier = s.store.notifier().clone();
        // A newer poll supersedes an older one (SDK-COMPAT §4: answer the older with 409).
        let ticket = notifier.begin_poll();
        if let Some(offset) = req.offset {
            if offset < 0 {
                return Err(ApiError::bad_request("offset must not be negative"));
            }
        }
        let kinds = match req.allowed_updates {
            Some(list) => {
                for k in &list {
                    if !queue::BOT_API_KINDS.contains(&k.as_str()) {
                        return Err(ApiError::bad_request(format!("unknown update type {k:?} in allowed_updates")));
                    }
                }
                let stored = s.store.read(|c| queue::stored_allowed_updates(c)).map_err(store_error)?;
                if stored.as_ref() != Some(&list) {
                    let l = list.clone();
                    s.store.write(move |c| queue::store_allowed_updates(c, &l)).map_err(store_error)?;
                }
                queue::effective_kinds(Some(&list))
            }
            None => {
                let stored = s.store.read(|c| queue::stored_allowed_updates(c)).map_err(store_error)?;
                queue::effective_kinds(stored.as_deref())
            }
        };
        if let Some(offset) = req.offset {
            if s.store.read(|c| queue::has_below(c, offset)).map_err(store_error)? {
                s.store.write(move |c| queue::ack_below(c, offset)).map_err(store_error)?;
            }
        }
        let deadline = Instant::now() + req.timeout;
        loop {
            let seen = notifier.commits();
            let updates = s.store.read(|c| queue::fetch(c, req.offset, req.limit, &kinds)).map_err(store_error)?;
            if !updates.is_empty() || Instant::now() >= deadline {
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
        // Polling is the only mode until webhooks exist; dropping still works.
        if drop_pending_updates {
            self.shared.store.write(|c| queue::clear(c)).map_err(store_error)?;
        }
        Ok(())
    }

    fn is_revoked(&self) -> bool {
        self.shared.is_revoked()
    }
}
