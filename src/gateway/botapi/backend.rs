//! What the HTTP boundary needs from the gateway runtime. The HTTP layer decodes and validates
//! requests into these typed calls; the runtime (src/gateway/runtime.rs) implements them. The
//! trait keeps the HTTP layer testable on its own.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::ApiError;
use crate::wire::e2e::Entity;

/// The whole gateway as seen from the listeners.
pub trait Backend: Send + Sync {
    /// The runtime of the bot this token belongs to; `None` (answered 401) for any token that is
    /// not exactly a configured bot's current token. Compares the secret in constant time.
    fn bot(&self, token: &str) -> Option<Arc<dyn BotApi>>;
    /// Body of `GET /healthz` on both listeners.
    fn health(&self) -> Value;
}

/// One bot runtime's Bot API methods, already typed and validated.
pub trait BotApi: Send + Sync {
    /// `getMe` result (a User object).
    fn get_me(&self) -> Value;
    /// `getUpdates`: long-polls up to `timeout`; returns Update objects in queue order.
    fn get_updates(&self, req: GetUpdates) -> Result<Vec<Value>, ApiError>;
    /// `sendMessage`: returns the sent Message object.
    fn send_message(&self, req: SendMessage) -> Result<Value, ApiError>;
    /// `deleteWebhook`.
    fn delete_webhook(&self, drop_pending_updates: bool) -> Result<(), ApiError>;
    /// True once the platform has revoked this bot's credential: every call then answers 401.
    fn is_revoked(&self) -> bool;
}

#[derive(Debug, Clone, PartialEq)]
pub struct GetUpdates {
    /// `None` for no offset (absent, or 0); otherwise acknowledges every update below it.
    pub offset: Option<i64>,
    /// 1..=100, default 100.
    pub limit: u32,
    /// 0..=50 s.
    pub timeout: Duration,
    /// `Some` when given explicitly (stored durably; `[]` means the default set).
    pub allowed_updates: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SendMessage {
    pub chat_id: i64,
    pub text: String,
    /// Already validated: within the text, in UTF-16 code units.
    pub entities: Vec<Entity>,
    pub reply_to_message_id: Option<i64>,
    pub allow_sending_without_reply: bool,
}
