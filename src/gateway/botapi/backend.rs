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
    /// `deleteWebhook`: back to polling; the queue is kept in order, or cleared with
    /// `drop_pending_updates` atomically with the mode change.
    fn delete_webhook(&self, drop_pending_updates: bool) -> Result<(), ApiError>;
    /// `setWebhook` with an already validated request (an empty `url` deletes the webhook).
    fn set_webhook(&self, _req: SetWebhook) -> Result<(), ApiError> {
        Err(ApiError::not_found("method setWebhook not found"))
    }
    /// `getWebhookInfo` result (a WebhookInfo object).
    fn get_webhook_info(&self) -> Result<Value, ApiError> {
        Err(ApiError::not_found("method getWebhookInfo not found"))
    }
    /// True once the platform has revoked this bot's credential: every call then answers 401.
    fn is_revoked(&self) -> bool;
    /// `Err` (409) while a webhook is set: getUpdates is refused before its parameters are even
    /// read, whatever they are (SPEC: in webhook mode getUpdates with any input is 409).
    fn check_polling(&self) -> Result<(), ApiError> {
        Ok(())
    }
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

/// A validated `setWebhook` call.
#[derive(Clone, PartialEq, Eq)]
pub struct SetWebhook {
    /// `https://…`, or `http://` to localhost or a loopback address; empty = delete the webhook.
    pub url: String,
    /// 1-256 characters of `A-Z a-z 0-9 _ -`, sent in `X-Compat-Bot-Api-Secret-Token`.
    pub secret_token: Option<String>,
    /// `Some` when given (stored durably like getUpdates' filter; `[]` means the default set).
    pub allowed_updates: Option<Vec<String>>,
    /// 1..=100 as asked; delivery uses one connection whatever the value.
    pub max_connections: u32,
    pub drop_pending_updates: bool,
}

impl std::fmt::Debug for SetWebhook {
    // The secret token and the URL path (telegraf puts a token-derived secret there) stay out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetWebhook")
            .field("url_set", &!self.url.is_empty())
            .field("secret_token", &self.secret_token.as_ref().map(|_| "<set>"))
            .field("allowed_updates", &self.allowed_updates)
            .field("max_connections", &self.max_connections)
            .field("drop_pending_updates", &self.drop_pending_updates)
            .finish()
    }
}
