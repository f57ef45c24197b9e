//! The durable webhook configuration of one bot (URL and secret token) and the last delivery
//! error, kept in the `meta` table so that they survive restarts. No URL stored = polling mode.
//!
//! The secret token lies only in the encrypted database; `Debug` never prints it.

use std::fmt;

use rusqlite::Connection;

use super::schema::{meta_delete, meta_get, meta_set};
use super::Result;

const URL_KEY: &str = "webhook_url";
const SECRET_KEY: &str = "webhook_secret_token";
const ERROR_DATE_KEY: &str = "webhook_last_error_date";
const ERROR_MESSAGE_KEY: &str = "webhook_last_error_message";

/// Where and how the gateway delivers updates in webhook mode.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    pub url: String,
    /// Sent in `X-Compat-Bot-Api-Secret-Token` when set.
    pub secret_token: Option<String>,
}

impl fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a secret path (telegraf derives one from the token): host only.
        let host = url::Url::parse(&self.url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default();
        f.debug_struct("WebhookConfig")
            .field("host", &host)
            .field("secret_token", &self.secret_token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// The most recent failed delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    /// Unix seconds.
    pub date: i64,
    pub message: String,
}

/// The webhook in force, or `None` in polling mode.
pub fn config(conn: &Connection) -> Result<Option<WebhookConfig>> {
    let Some(url) = meta_get(conn, URL_KEY)? else {
        return Ok(None);
    };
    Ok(Some(WebhookConfig { url, secret_token: meta_get(conn, SECRET_KEY)? }))
}

/// True while a webhook is set.
pub fn is_set(conn: &Connection) -> Result<bool> {
    Ok(meta_get(conn, URL_KEY)?.is_some())
}

/// Switches to webhook mode with `cfg` (replacing any earlier one). The last error belongs to
/// the previous configuration and is cleared.
pub fn set(conn: &Connection, cfg: &WebhookConfig) -> Result<()> {
    meta_set(conn, URL_KEY, &cfg.url)?;
    match &cfg.secret_token {
        Some(s) => meta_set(conn, SECRET_KEY, s)?,
        None => meta_delete(conn, SECRET_KEY)?,
    }
    clear_error(conn)
}

/// Switches back to polling mode.
pub fn delete(conn: &Connection) -> Result<()> {
    meta_delete(conn, URL_KEY)?;
    meta_delete(conn, SECRET_KEY)?;
    clear_error(conn)
}

pub fn last_error(conn: &Connection) -> Result<Option<LastError>> {
    let date = meta_get(conn, ERROR_DATE_KEY)?.and_then(|d| d.parse().ok());
    let message = meta_get(conn, ERROR_MESSAGE_KEY)?;
    Ok(match (date, message) {
        (Some(date), Some(message)) => Some(LastError { date, message }),
        _ => None,
    })
}

pub fn record_error(conn: &Connection, error: &LastError) -> Result<()> {
    meta_set(conn, ERROR_DATE_KEY, &error.date.to_string())?;
    meta_set(conn, ERROR_MESSAGE_KEY, &error.message)?;
    Ok(())
}

fn clear_error(conn: &Connection) -> Result<()> {
    meta_delete(conn, ERROR_DATE_KEY)?;
    meta_delete(conn, ERROR_MESSAGE_KEY)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("memory db");
        super::super::schema::migrate(&c).expect("migrate");
        c
    }

    #[test]
    fn set_delete_and_last_error() {
        let c = db();
        assert_eq!(config(&c).expect("config"), None);
        assert!(!is_set(&c).expect("is_set"));
        let cfg = WebhookConfig { url: "https://example.com/hook".into(), secret_token: Some("s3cr3t".into()) };
        set(&c, &cfg).expect("set");
        assert_eq!(config(&c).expect("config"), Some(cfg.clone()));
        let err = LastError { date: 1_700_000_000, message: "Connection refused".into() };
        record_error(&c, &err).expect("record");
        assert_eq!(last_error(&c).expect("last"), Some(err));
        // A new configuration without a secret drops the old secret and the old error.
        let plain = WebhookConfig { url: "http://localhost:8443/".into(), secret_token: None };
        set(&c, &plain).expect("set again");
        assert_eq!(config(&c).expect("config"), Some(plain));
        assert_eq!(last_error(&c).expect("last"), None);
        delete(&c).expect("delete");
        assert_eq!(config(&c).expect("config"), None);
        assert_eq!(meta_get(&c, SECRET_KEY).expect("secret"), None);
    }

    #[test]
    fn debug_hides_the_secret_and_the_path() {
        let cfg = WebhookConfig {
            url: "https://bot.example.com/telegraf/abcdef".into(),
            secret_token: Some("s3cr3t".into()),
        };
        let s = format!("{cfg:?}");
        assert!(s.contains("bot.example.com"), "{s}");
        assert!(!s.contains("s3cr3t") && !s.contains("abcdef"), "{s}");
    }
}
