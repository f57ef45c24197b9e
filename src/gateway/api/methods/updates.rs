//! Getting updates: `getUpdates` (long polling) and the webhook methods `setWebhook`,
//! `deleteWebhook`, `getWebhookInfo`. Polling and the webhook serve one durable queue
//! (`store::queue`); the mode is "webhook" exactly while a URL is stored, and every mode change
//! is one writer job together with what goes with it (new `allowed_updates`, clearing the
//! queue), then wakes the webhook thread.

use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{json, Value};

use super::store_error;
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::runtime::BotShared;
use crate::gateway::store::webhook::{self as webhook_store, WebhookConfig};
use crate::gateway::store::{queue, Result as StoreResult, StoreError};
use crate::gateway::updates;

/// Longest long poll (SPEC "Limits").
pub const MAX_POLL_TIMEOUT_SECS: i64 = 50;
/// getUpdates `limit` range; the default is the maximum.
pub const MAX_UPDATES_LIMIT: i64 = 100;
/// Longest `secret_token`.
pub const MAX_SECRET_TOKEN_LEN: usize = 256;
/// Largest `max_connections` accepted (one is used).
pub const MAX_WEBHOOK_CONNECTIONS: i64 = 100;

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

/// getUpdates parameters.
///
/// - `offset`: absent or 0 is "no offset" (PTB and telegraf start with 0, SDK-COMPAT §4);
///   a negative one `-n` serves the last `n` updates and forgets the ones before (the Bot
///   API's rule, which libraries use to skip what piled up while the bot was down).
/// - `limit`: default 100; outside 1..=100 is a 400 (telegraf's `limit:1` stays valid).
/// - `timeout`: default 0; negative is a 400; above 50 is clamped to 50 rather than refused,
///   so a client asking for a longer poll still works and PTB's read timeout (`timeout` + 5 s)
///   is never exceeded.
/// - `allowed_updates`: `Some` only when given (the runtime stores it; `[]` = default set).
pub fn get_updates_request(params: &Params) -> Result<GetUpdates, ApiError> {
    let offset = params.optional_i64("offset")?.filter(|&o| o != 0);
    let limit = params.optional_i64("limit")?.unwrap_or(MAX_UPDATES_LIMIT);
    if !(1..=MAX_UPDATES_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!("limit must be between 1 and {MAX_UPDATES_LIMIT}, got {limit}")));
    }
    let timeout = params.optional_i64("timeout")?.unwrap_or(0);
    if timeout < 0 {
        return Err(ApiError::bad_request(format!("timeout must not be negative, got {timeout}")));
    }
    let timeout = timeout.min(MAX_POLL_TIMEOUT_SECS);
    Ok(GetUpdates {
        offset,
        limit: limit as u32,
        timeout: Duration::from_secs(timeout as u64),
        allowed_updates: params.optional_string_list("allowed_updates")?,
    })
}

/// `getUpdates`: acknowledges below `offset`, stores a new filter, then long-polls up to
/// `timeout` for updates in queue order. A newer poll supersedes an older one (SDK-COMPAT §4:
/// the older is answered 409).
pub(super) fn get_updates(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let req = get_updates_request(params)?;
    // In webhook mode nothing is touched: no acknowledgement, no filter change, and a waiting
    // poll is not disturbed. (Checked again here: a webhook may have been set since the
    // preflight.)
    super::check_polling(bot)?;
    let mut req = req;
    if let Some(offset) = req.offset.filter(|&o| o < 0) {
        // Forgets all but the last -offset updates, in one job (checked against a webhook set
        // meanwhile, as an acknowledgement is), then serves from the first one kept.
        let keep = u32::try_from(offset.unsigned_abs()).unwrap_or(u32::MAX);
        let (dropped, first_kept) = bot
            .store
            .write(move |c| {
                polling_only(c)?;
                queue::keep_last(c, keep)
            })
            .map_err(mode_error)?;
        crate::gateway::metrics::BotMetrics::add(&bot.metrics.updates_delivered, dropped as u64);
        req.offset = first_kept;
    }
    if let Some(list) = &req.allowed_updates {
        updates::validate_kinds(list).map_err(ApiError::bad_request)?;
    }
    let notifier = bot.store.notifier().clone();
    let ticket = notifier.begin_poll();
    // A new filter applies to updates created from now on (updates::admits).
    if let Some(list) = req.allowed_updates {
        let stored = bot.store.read(queue::stored_allowed_updates).map_err(store_error)?;
        if stored.as_ref() != Some(&list) {
            bot.store
                .write(move |c| {
                    polling_only(c)?;
                    queue::store_allowed_updates(c, &list)
                })
                .map_err(mode_error)?;
        }
    }
    if let Some(offset) = req.offset {
        if bot.store.read(|c| queue::has_below(c, offset)).map_err(store_error)? {
            // The mode is checked again inside the job: a setWebhook that committed since the
            // check above wins, and this poll acknowledges nothing. Relaxed: an acknowledgement
            // lost to a power failure only serves those updates again (at least once).
            let acknowledged = bot
                .store
                .write_relaxed(move |c| {
                    polling_only(c)?;
                    queue::ack_below(c, offset)
                })
                .map_err(mode_error)?;
            crate::gateway::metrics::BotMetrics::add(&bot.metrics.updates_delivered, acknowledged as u64);
        }
    }
    let deadline = Instant::now() + req.timeout;
    loop {
        let seen = notifier.commits();
        let (webhook, found) = bot
            .store
            .read(|c| Ok((webhook_store::is_set(c)?, updates::fetch(c, req.offset, req.limit)?)))
            .map_err(store_error)?;
        if webhook {
            // setWebhook while this poll waited.
            return Err(webhook_conflict());
        }
        if !found.is_empty() || Instant::now() >= deadline || notifier.is_stopping() {
            return Ok(Value::Array(found));
        }
        if !notifier.wait(ticket, seen, deadline) {
            return Err(ApiError::conflict(
                "terminated by other getUpdates request; make sure that only one bot instance is running",
            ));
        }
        if bot.is_revoked() {
            return Err(bot.refusal());
        }
    }
}

const WEBHOOK_ACTIVE: &str =
    "can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first";

pub(super) fn webhook_conflict() -> ApiError {
    ApiError::conflict(WEBHOOK_ACTIVE)
}

/// Refuses a polling write (acknowledgement, filter change) once a webhook is set.
fn polling_only(c: &Connection) -> StoreResult<()> {
    if webhook_store::is_set(c)? {
        return Err(StoreError::WebhookActive);
    }
    Ok(())
}

/// A refused polling write is the 409 of webhook mode; anything else is a store failure.
fn mode_error(e: StoreError) -> ApiError {
    match e {
        StoreError::WebhookActive => webhook_conflict(),
        other => store_error(other),
    }
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

/// setWebhook parameters.
///
/// - `url`: required; empty deletes the webhook (as in the Bot API). Otherwise [`check_webhook_url`].
/// - `certificate` (a file or a value) and a non-empty `ip_address`: 400 "not supported"
///   (`refusals`; checked here too, for the webhook path that calls this directly).
/// - `max_connections`: 1..=100 (PTB always sends 40), default 1.
/// - `secret_token`: 1-256 characters of `A-Z a-z 0-9 _ -`.
/// - `allowed_updates`: `Some` only when given; the runtime checks the names and stores it.
/// - `drop_pending_updates`: boolean.
pub fn set_webhook_request(params: &Params) -> Result<SetWebhook, ApiError> {
    super::refusals::check_params("setWebhook", params)?;
    let url = params
        .optional_str("url")?
        .ok_or_else(|| ApiError::bad_request("url is required (an empty url or deleteWebhook removes the webhook)"))?;
    // Only an empty url removes the webhook; blanks around a URL are trimmed, but a url of
    // blanks alone is a mistake, not a request to delete.
    if !url.is_empty() && url.trim().is_empty() {
        return Err(ApiError::bad_request("url is blank (send an empty url, or call deleteWebhook, to remove the webhook)"));
    }
    let url = url.trim().to_string();
    if !url.is_empty() {
        check_webhook_url(&url)?;
    }
    let max_connections = params.optional_i64("max_connections")?.unwrap_or(1);
    if !(1..=MAX_WEBHOOK_CONNECTIONS).contains(&max_connections) {
        return Err(ApiError::bad_request(format!(
            "max_connections must be between 1 and {MAX_WEBHOOK_CONNECTIONS}, got {max_connections}"
        )));
    }
    let secret_token = params.optional_str("secret_token")?;
    if let Some(secret) = &secret_token {
        let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if secret.is_empty() || secret.len() > MAX_SECRET_TOKEN_LEN || !secret.chars().all(allowed) {
            // Never echo the secret itself.
            return Err(ApiError::bad_request(format!(
                "secret_token must be 1-{MAX_SECRET_TOKEN_LEN} characters of A-Z, a-z, 0-9, _ and -"
            )));
        }
    }
    Ok(SetWebhook {
        url,
        secret_token,
        allowed_updates: params.optional_string_list("allowed_updates")?,
        max_connections: max_connections as u32,
        drop_pending_updates: params.flag("drop_pending_updates")?,
    })
}

/// The webhook URL rule (SPEC "Webhook delivery" 3): `https://` with a host, or plain `http://`
/// to `localhost` or a loopback address (127.0.0.0/8, ::1). Anything else is a 400 saying why.
pub fn check_webhook_url(raw: &str) -> Result<(), ApiError> {
    let bad = |why: String| ApiError::bad_request(format!("bad webhook: {why}"));
    let url = url::Url::parse(raw).map_err(|e| bad(format!("the url is not a valid absolute URL ({e})")))?;
    let host = url.host().ok_or_else(|| bad("the url has no host".to_string()))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" => {
            let loopback = match host {
                url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
                url::Host::Ipv4(ip) => ip.is_loopback(),
                url::Host::Ipv6(ip) => ip.is_loopback(),
            };
            if loopback {
                Ok(())
            } else {
                Err(bad(format!(
                    "an HTTPS URL must be provided for webhook; plain http is accepted only for localhost and \
                     loopback addresses (127.0.0.0/8, ::1), not for {host}"
                )))
            }
        }
        other => Err(bad(format!(
            "unsupported URL scheme {other:?}; an HTTPS URL must be provided for webhook (plain http only for localhost)"
        ))),
    }
}

/// `setWebhook`: stores the URL (and a new filter, and drops the queue if asked) in one job. An
/// empty `url` removes the webhook, as in the Bot API.
pub(super) fn set_webhook(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let req = set_webhook_request(params)?;
    if req.url.is_empty() {
        return remove_webhook(bot, req.drop_pending_updates);
    }
    if let Some(list) = &req.allowed_updates {
        updates::validate_kinds(list).map_err(ApiError::bad_request)?;
    }
    let cfg = WebhookConfig { url: req.url, secret_token: req.secret_token };
    let (allowed, drop) = (req.allowed_updates, req.drop_pending_updates);
    bot.store
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
        bot.username,
        req.max_connections,
        if drop { ", pending updates dropped" } else { "" }
    );
    // Stored: a start failure here is retried by the next commit, setWebhook or restart.
    bot.refresh_webhook_on();
    bot.webhook.try_wake().map_err(|e| {
        log::error!("bot @{}: cannot start the webhook thread: {e}", bot.username);
        ApiError::internal(format!("the webhook is set, but its delivery thread cannot start: {e}"))
    })?;
    Ok(Value::Bool(true))
}

/// `deleteWebhook`: back to polling; the queue is kept in order, or cleared with
/// `drop_pending_updates` atomically with the mode change.
pub(super) fn delete_webhook(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    remove_webhook(bot, params.flag("drop_pending_updates")?)
}

fn remove_webhook(bot: &BotShared, drop_pending_updates: bool) -> Result<Value, ApiError> {
    // One job: the mode change and the drop commit together or not at all.
    bot.store
        .write(move |c| {
            webhook_store::delete(c)?;
            if drop_pending_updates {
                queue::clear(c)?;
            }
            Ok(())
        })
        .map_err(store_error)?;
    bot.refresh_webhook_on();
    bot.webhook.wake();
    Ok(Value::Bool(true))
}

/// `getWebhookInfo`: `url` (empty in polling mode), `has_custom_certificate`,
/// `pending_update_count`; `max_connections` while a webhook is set; `allowed_updates` when a
/// filter is stored; the error fields after an error.
pub(super) fn get_webhook_info(bot: &BotShared, _params: &Params) -> Result<Value, ApiError> {
    let (cfg, pending, error, allowed) = bot
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, bot, form, p};
    use super::super::dispatch;
    use super::*;

    #[test]
    fn get_updates_defaults_and_offset_zero() {
        let r = get_updates_request(&Params::new()).expect("defaults");
        assert_eq!(r, GetUpdates { offset: None, limit: 100, timeout: Duration::ZERO, allowed_updates: None });
        let r = get_updates_request(&form(&[("offset", "0"), ("timeout", "10")])).expect("PTB first poll");
        assert_eq!((r.offset, r.timeout), (None, Duration::from_secs(10)));
        let r = get_updates_request(&p(json!({"offset": 17, "limit": 1, "allowed_updates": []}))).expect("telegraf");
        assert_eq!((r.offset, r.limit, r.allowed_updates), (Some(17), 1, Some(vec![])));
        let r = get_updates_request(&form(&[("allowed_updates", r#"["callback_query","message"]"#)])).expect("aiogram");
        assert_eq!(r.allowed_updates, Some(vec!["callback_query".to_string(), "message".to_string()]));
    }

    #[test]
    fn get_updates_limits() {
        assert_eq!(get_updates_request(&p(json!({"timeout": 120}))).expect("clamped").timeout, Duration::from_secs(50));
        assert!(bad(get_updates_request(&p(json!({"timeout": -1})))).contains("timeout must not be negative"));
        assert!(bad(get_updates_request(&p(json!({"limit": 0})))).contains("limit must be between 1 and 100"));
        assert!(bad(get_updates_request(&p(json!({"limit": 101})))).contains("limit must be between 1 and 100"));
        assert_eq!(bad(get_updates_request(&p(json!({"offset": "x"})))), "Bad Request: offset must be an integer");
        assert!(bad(get_updates_request(&p(json!({"allowed_updates": "message"})))).contains("allowed_updates"));
        let (_dir, bot) = bot();
        let started = Instant::now();
        let v = dispatch(&*bot, "getUpdates", &p(json!({"timeout": 1}))).expect("call");
        assert_eq!(v, json!([]));
        assert!(started.elapsed() >= Duration::from_secs(1), "an empty queue is long-polled for the timeout");
    }

    #[test]
    fn delete_webhook_flag() {
        let (_dir, bot) = bot();
        let bot = &*bot;
        let queued = || bot.store.read(queue::depth).expect("depth");
        bot.store.write(|c| queue::enqueue(c, "message", &json!({}))).expect("enqueue");
        assert_eq!(dispatch(bot, "deleteWebhook", &Params::new()).expect("empty"), json!(true));
        assert_eq!(queued(), 1, "kept without drop_pending_updates");
        dispatch(bot, "deletewebhook", &form(&[("drop_pending_updates", "true")])).expect("drop");
        assert_eq!(queued(), 0, "dropped");
        let e = dispatch(bot, "deleteWebhook", &form(&[("drop_pending_updates", "maybe")])).expect_err("bad bool");
        assert_eq!(e.description, "Bad Request: drop_pending_updates must be a boolean");
    }

    #[test]
    fn webhook_url_rules() {
        for ok in [
            "https://example.com/hook",
            "https://example.com:8443/a/b?x=1",
            "http://localhost:8080/hook",
            "http://LOCALHOST/",
            "http://127.0.0.1:9000/x",
            "http://127.0.0.2/",
            "http://127.255.255.254/",
            "http://[::1]:8443/",
        ] {
            check_webhook_url(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad_url, why) in [
            ("http://example.com/hook", "HTTPS URL must be provided"),
            ("http://128.0.0.1/", "HTTPS URL must be provided"),
            ("http://10.0.0.1/", "HTTPS URL must be provided"),
            ("http://[::2]/", "HTTPS URL must be provided"),
            ("http://localhost.example.com/", "HTTPS URL must be provided"),
            ("ftp://example.com/", "unsupported URL scheme"),
            ("ftp://127.0.0.1/", "unsupported URL scheme"),
            ("example.com/hook", "not a valid absolute URL"),
            ("https://", "not a valid absolute URL"),
        ] {
            let e = check_webhook_url(bad_url).expect_err(bad_url);
            assert_eq!(e.status, 400);
            assert!(e.description.starts_with("Bad Request: bad webhook: "), "{}", e.description);
            assert!(e.description.contains(why), "{bad_url}: {}", e.description);
        }
    }

    #[test]
    fn set_webhook_parameters() {
        // PTB's shape: form, max_connections=40, allowed_updates as JSON text.
        let r = set_webhook_request(&form(&[
            ("url", "http://127.0.0.1:8443/hook"),
            ("max_connections", "40"),
            ("allowed_updates", r#"["message","callback_query"]"#),
            ("secret_token", "Abc_123-xyz"),
            ("drop_pending_updates", "true"),
        ]))
        .expect("PTB");
        assert_eq!(r.url, "http://127.0.0.1:8443/hook");
        assert_eq!(r.max_connections, 40);
        assert_eq!(r.secret_token.as_deref(), Some("Abc_123-xyz"));
        assert_eq!(r.allowed_updates, Some(vec!["message".to_string(), "callback_query".to_string()]));
        assert!(r.drop_pending_updates);
        let r = set_webhook_request(&p(json!({"url": "https://example.com/"}))).expect("minimal");
        assert_eq!((r.max_connections, r.secret_token.clone(), r.allowed_updates.clone()), (1, None, None));
        assert!(!r.drop_pending_updates);
        let r = set_webhook_request(&p(json!({"url": ""}))).expect("empty url deletes");
        assert!(r.url.is_empty());
        for mc in [1, 100] {
            set_webhook_request(&p(json!({"url": "https://e.com/", "max_connections": mc}))).expect("in range");
        }
    }

    #[test]
    fn set_webhook_refusals() {
        let url = "https://example.com/hook";
        assert!(bad(set_webhook_request(&Params::new())).contains("url is required"));
        assert!(bad(set_webhook_request(&p(json!({"url": "   "})))).contains("url is blank"));
        let r = set_webhook_request(&p(json!({"url": " https://example.com/ "}))).expect("trimmed");
        assert_eq!(r.url, "https://example.com/");
        for mc in [0, 101, -1] {
            let e = bad(set_webhook_request(&p(json!({"url": url, "max_connections": mc}))));
            assert!(e.contains("max_connections must be between 1 and 100"), "{e}");
        }
        for secret in ["", "has space", "ünïcode", "semi;colon"] {
            let e = bad(set_webhook_request(&p(json!({"url": url, "secret_token": secret}))));
            assert!(e.contains("secret_token must be 1-256 characters"), "{e}");
            if !secret.is_empty() {
                assert!(!e.contains(secret), "the secret is echoed: {e}");
            }
        }
        let long = "a".repeat(257);
        assert!(bad(set_webhook_request(&p(json!({"url": url, "secret_token": long})))).contains("secret_token"));
        set_webhook_request(&p(json!({"url": url, "secret_token": "a".repeat(256)}))).expect("256 fits");
        let e = bad(set_webhook_request(&p(json!({"url": url, "ip_address": "1.2.3.4"}))));
        assert!(e.contains("ip_address is not supported"), "{e}");
        let e = bad(set_webhook_request(&p(json!({"url": url, "certificate": "x"}))));
        assert!(e.contains("certificate is not supported"), "{e}");
        let mut with_file = p(json!({"url": url}));
        with_file.insert_file(
            "certificate",
            crate::gateway::botapi::UploadedFile::in_memory("c.pem", None, b"x".to_vec()),
        );
        assert!(bad(set_webhook_request(&with_file)).contains("certificate is not supported"));
        assert!(bad(set_webhook_request(&p(json!({"url": "http://example.com/"})))).contains("bad webhook"));
        assert!(
            bad(set_webhook_request(&p(json!({"url": url, "allowed_updates": "message"})))).contains("allowed_updates")
        );
    }

    /// The Bot API's negative offset: with 10 queued, `offset=-3` serves the last three and
    /// forgets the seven before them, for good; a larger `-n` than the queue keeps it all.
    #[test]
    fn a_negative_offset_serves_the_last_updates_and_forgets_the_earlier() {
        let (_dir, bot) = bot();
        let bot = &*bot;
        let ids: Vec<i64> = (0..10)
            .map(|i| bot.store.write(move |c| queue::enqueue(c, "message", &json!({"message_id": i}))).expect("enqueue"))
            .collect();
        let got = dispatch(bot, "getUpdates", &p(json!({"offset": -3}))).expect("getUpdates");
        let served: Vec<i64> = got.as_array().expect("array").iter().map(|u| u["update_id"].as_i64().expect("id")).collect();
        assert_eq!(served, ids[7..].to_vec());
        assert_eq!(bot.store.read(queue::depth).expect("depth"), 3, "the first seven are forgotten");
        // They stay forgotten: a poll with no offset serves the same three.
        let again = dispatch(bot, "getUpdates", &Params::new()).expect("getUpdates");
        assert_eq!(again.as_array().expect("array").len(), 3);
        let all = dispatch(bot, "getUpdates", &p(json!({"offset": -100}))).expect("more than queued");
        assert_eq!(all.as_array().expect("array").len(), 3);
        assert_eq!(bot.store.read(queue::depth).expect("depth"), 3);
        // In webhook mode it is the 409 of every getUpdates, and nothing is dropped.
        dispatch(bot, "setWebhook", &p(json!({"url": "http://localhost/x"}))).expect("setWebhook");
        assert_eq!(dispatch(bot, "getUpdates", &p(json!({"offset": -1}))).expect_err("webhook").status, 409);
        assert_eq!(bot.store.read(queue::depth).expect("depth"), 3);
    }

    #[test]
    fn webhook_methods_dispatch() {
        let (_dir, bot) = bot();
        let bot = &*bot;
        let r = dispatch(bot, "setwebhook", &p(json!({"url": "http://localhost/x", "max_connections": 40})));
        assert_eq!(r.expect("setWebhook"), json!(true));
        let info = dispatch(bot, "getWebhookInfo", &Params::new()).expect("info");
        assert_eq!((&info["url"], &info["max_connections"]), (&json!("http://localhost/x"), &json!(1)));
        let e = dispatch(bot, "getUpdates", &Params::new()).expect_err("webhook mode");
        assert_eq!(e.status, 409);
    }
}
