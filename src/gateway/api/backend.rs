//! What the HTTP routes need from the gateway: the bot a token belongs to, and for that bot,
//! which method a name means and running it. The seam keeps the routes testable on their own;
//! the gateway's bots implement it with the method table (`methods`).

use std::sync::Arc;

use serde_json::Value;

use crate::http::BodyWriter;

use super::methods::Method;
use super::multipart::FileIntake;
use crate::gateway::botapi::{ApiError, Params};

/// The whole gateway as seen from the listeners.
pub trait Backend: Send + Sync {
    /// The bot this token belongs to; `None` (answered 401) for any token that is not exactly a
    /// configured bot's current token. Compares the secret in constant time.
    fn bot(&self, token: &str) -> Option<Arc<dyn BotApi>>;
    /// Body of `GET /healthz` on both listeners.
    fn health(&self) -> Value;
    /// Body of `GET /metrics` on the extensions listener (Prometheus text format 0.0.4).
    fn metrics(&self) -> String {
        String::new()
    }
    /// Body of `GET /outbox/given-up` on the extensions listener: the sends each bot's outbox
    /// gave up, newest first.
    fn given_up(&self) -> Value {
        serde_json::json!({"bots": []})
    }
}

/// One bot as seen from the listeners.
pub trait BotApi: Send + Sync {
    /// What every call checks before its body is read: the credential (401 once revoked), the
    /// method name (404 when unknown), and for getUpdates the delivery mode (409 with a webhook).
    fn preflight(&self, name: &str) -> Result<&'static Method, ApiError>;
    /// Runs `method` with `params`; the value is the envelope's `result`.
    fn call(&self, method: &'static Method, params: &Params) -> Result<Value, ApiError>;
    /// A request of this bot was answered (`method`: a canonical name from the method table,
    /// or `other`), for `/metrics`.
    fn answered(&self, method: &'static str, status: u16, took: std::time::Duration) {
        let _ = (method, status, took);
    }
    /// What takes an uploaded file part while the request is read (encrypts it and streams
    /// it to the platform); `None` keeps parts in memory.
    fn file_intake(&self) -> Option<&dyn FileIntake> {
        None
    }
    /// `GET /file/bot<token>/<file_path>` (`file_path` percent-decoded): the file, already
    /// fetched and verified, ready to be decrypted into the response.
    fn download(&self, file_path: &str) -> Result<Download, ApiError> {
        let _ = file_path;
        Err(ApiError::not_found("file downloads are not available"))
    }
}

/// A verified file to serve: its plaintext is produced only while the response is written.
pub struct Download {
    /// As the uploader declared it (served only when inert: `server::inert_type`).
    pub content_type: String,
    /// Letters, digits, `.`, `-` and `_` only: safe in `Content-Disposition`.
    pub file_name: String,
    /// Plaintext bytes.
    pub len: u64,
    pub write: BodyWriter,
}
