//! Webhook delivery of one bot: the thread `webhook:<bot>` posts the head of the durable queue
//! (shared with `getUpdates`) to the configured URL, one update at a time and in queue order,
//! and hands answers to `whr/<n>` (`api::replies`), which executes the Bot API
//! calls that receivers put in them.
//!
//! One attempt: read the webhook configuration, the filter and the head update (one read) →
//! re-verify the bot's credential with the platform (`VerifyCredential`; a revoked or disabled
//! bot sends nothing more, and its queue is kept) → `POST` the Update as `application/json`,
//! with the secret in `X-Compat-Bot-Api-Secret-Token` (or the headers `webhook_secret_token_headers`
//! names) and nowhere else → a 2xx answer acknowledges the head
//! in a writer job; anything else (non-2xx, timeout, network error) leaves it at the head,
//! records `last_error_date`/`last_error_message` durably and retries after a bounded
//! exponential delay (1 s doubling up to 60 s, docs/decisions.md).
//!
//! Waiting never polls: with no webhook the thread waits on its control channel (woken by
//! `setWebhook`, `deleteWebhook` and revocation); with an empty queue also on the store's commit
//! signal; during a backoff on the control channel with a timeout, so a new configuration
//! interrupts the wait.

use std::io::{self, Read};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{bounded, select, Receiver, RecvTimeoutError, Sender};
use serde_json::Value;

use super::metrics::BotMetrics;
use super::runtime::{unix_now, BotShared};
use super::store::webhook::{self as config, LastError, WebhookConfig};
use super::store::{queue, Result as StoreResult};
use super::updates;
use crate::backoff::Backoff;
use crate::wire::rpc::is_unauthenticated;
use crate::wire::platform::VerifyCredentialRequest;

/// The header carrying `secret_token` (SPEC "Webhook delivery" 2), the default of
/// `webhook_secret_token_headers`.
pub const SECRET_HEADER: &str = super::config::SPEC_SECRET_HEADER;
/// First retry delay after a failed attempt; it doubles up to [`BACKOFF_MAX`].
pub const BACKOFF_START: Duration = Duration::from_secs(1);
pub const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// Overrides [`BACKOFF_START`] in milliseconds; meant for tests, which must not wait long.
pub const BACKOFF_START_ENV: &str = "BOT_GATEWAY_WEBHOOK_RETRY_START_MS";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Webhook replies waiting for `whr/<n>`; when full, delivery waits.
const REPLY_QUEUE: usize = 64;

/// A receiver's 2xx answer that may carry a Bot API call, for `whr/<n>`
/// (`api::replies`), which decodes and runs it as the HTTP listener would.
pub struct Answer {
    pub update_id: i64,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// Largest answer read for a reply: a method call with an upload, like a request.
pub const MAX_ANSWER_BYTES: usize = 52 * 1024 * 1024;

/// The bounded queue from `webhook:<bot>` to the reply runner; when full, delivery waits.
pub fn answers() -> (Sender<Answer>, Receiver<Answer>) {
    bounded(REPLY_QUEUE)
}

/// `wh/<n>`, ready to start: delivers the queue in webhook mode and hands 2xx answers with a
/// body to `replies`. Ends when the bot stops (`BotShared::stop` wakes it); every step is a
/// committed transaction, so stopping anywhere is safe.
pub fn worker(shared: Arc<BotShared>, replies: Sender<Answer>) -> io::Result<impl FnOnce() + Send + 'static> {
    let commits = shared.store.notifier().subscribe();
    let agent = agent().map_err(|e| io::Error::other(format!("webhook HTTP client: {e}")))?;
    let start = backoff_start();
    Ok(move || run(shared, agent, commits, replies, start))
}

/// One HTTP agent per bot: one connection (kept alive), no redirects (a 3xx is not a 2xx),
/// native TLS with the system's trust store.
fn agent() -> Result<ureq::Agent, native_tls::Error> {
    Ok(ureq::AgentBuilder::new()
        .tls_connector(Arc::new(native_tls::TlsConnector::new()?))
        .timeout_connect(CONNECT_TIMEOUT)
        .timeout_read(READ_TIMEOUT)
        .timeout_write(WRITE_TIMEOUT)
        .redirects(0)
        .max_idle_connections_per_host(1)
        .user_agent(concat!("bot-gateway/", env!("CARGO_PKG_VERSION")))
        .build())
}

fn backoff_start() -> Duration {
    match std::env::var(BACKOFF_START_ENV).ok().and_then(|v| v.parse::<u64>().ok()) {
        Some(ms) => Duration::from_millis(ms).clamp(Duration::from_millis(10), BACKOFF_MAX),
        None => BACKOFF_START,
    }
}

/// The webhook in force and, if any, the head update (its id and the Update object).
type Head = Option<(WebhookConfig, Option<(i64, Value)>)>;

/// What one look at the queue led to.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    NoWebhook,
    Empty,
    Delivered,
    Failed,
    Revoked,
}

fn run(shared: Arc<BotShared>, agent: ureq::Agent, commits: Receiver<()>, replies: Sender<Answer>, start: Duration) {
    let control = shared.webhook.receiver().clone();
    let mut backoff = Backoff::new(start, BACKOFF_MAX);
    loop {
        if shared.is_stopping() {
            return;
        }
        if shared.is_revoked() {
            // Nothing more is sent; the queue stays for a restart with a valid credential.
            if control.recv().is_err() {
                return;
            }
            continue;
        }
        // Signals of commits we are about to read anyway (see Notifier::subscribe).
        while commits.try_recv().is_ok() {}
        match attempt(&shared, &agent, &replies) {
            Outcome::Delivered => backoff.reset(),
            Outcome::Revoked => {}
            Outcome::NoWebhook => {
                backoff.reset();
                if control.recv().is_err() {
                    return;
                }
            }
            Outcome::Empty => {
                backoff.reset();
                select! {
                    recv(commits) -> r => if r.is_err() { return },
                    recv(control) -> r => if r.is_err() { return },
                }
            }
            Outcome::Failed => {
                match control.recv_timeout(backoff.next_delay()) {
                    // setWebhook/deleteWebhook: try the new configuration at once.
                    Ok(()) => backoff.reset(),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        }
    }
}

/// One delivery attempt of the head update, if there is a webhook and an update.
fn attempt(shared: &BotShared, agent: &ureq::Agent, replies: &Sender<Answer>) -> Outcome {
    let name = &shared.username;
    let head = shared.store.read(|c| -> StoreResult<Head> {
        let Some(cfg) = config::config(c)? else {
            return Ok(None);
        };
        Ok(Some((cfg, updates::head(c)?)))
    });
    let (cfg, (update_id, update)) = match head {
        Ok(None) => return Outcome::NoWebhook,
        Ok(Some((_, None))) => return Outcome::Empty,
        Ok(Some((cfg, Some(head)))) => (cfg, head),
        Err(e) => {
            log::error!("bot @{name}: webhook: cannot read the queue: {e}");
            shared.status.set_error(format!("webhook: {e}"));
            return Outcome::Failed;
        }
    };

    // SPEC "Bot credential": re-verified before every attempt.
    let p = &shared.platform;
    if let Err(e) = p.verify_credential(&VerifyCredentialRequest::new()) {
        if is_unauthenticated(&e) {
            shared.revoke(&e.to_string());
            return Outcome::Revoked;
        }
        log::warn!("bot @{name}: webhook: cannot verify the credential with the platform, not delivering: {e}");
        shared.status.set_error(format!("webhook: cannot verify the credential with the platform: {e}"));
        return Outcome::Failed;
    }
    if shared.is_revoked() {
        return Outcome::Revoked;
    }

    let mut rq = agent.post(&cfg.url).set("Content-Type", "application/json");
    if let Some(secret) = &cfg.secret_token {
        // The spec's header by default; `webhook_secret_token_headers` may name others (the
        // stock SDK handlers check X-Telegram-Bot-Api-Secret-Token), each with the same secret.
        for name in &shared.delivery.webhook_secret_headers {
            rq = rq.set(name, secret);
        }
    }
    let body = update.to_string();
    BotMetrics::add(&shared.metrics.webhook_attempts, 1);
    match rq.send_bytes(body.as_bytes()) {
        Ok(resp) if (200..300).contains(&resp.status()) => {
            let reply = read_reply(resp, update_id, name);
            match shared.store.write(move |c| queue::ack_through(c, update_id)) {
                Ok(n) => BotMetrics::add(&shared.metrics.updates_delivered, n as u64),
                Err(e) => {
                    // Delivered but not acknowledged: it is delivered again (receivers are
                    // idempotent by update_id, SPEC "Webhook delivery" 5).
                    log::error!("bot @{name}: webhook: cannot acknowledge update {update_id}: {e}");
                    return Outcome::Failed;
                }
            }
            log::debug!("bot @{name}: webhook delivered update {update_id}");
            if let Some(reply) = reply {
                // Blocks only while REPLY_QUEUE replies are waiting.
                if replies.send(reply).is_err() {
                    log::error!("bot @{name}: webhook reply thread is gone");
                }
            }
            Outcome::Delivered
        }
        Ok(resp) => failed(
            shared,
            cfg,
            update_id,
            format!("Wrong response from the webhook: {} {}", resp.status(), resp.status_text()),
        ),
        Err(e) => failed(shared, cfg, update_id, describe(&e)),
    }
}

/// Records a failed attempt durably and logs it. The error belongs to the configuration that
/// was tried: if `setWebhook` or `deleteWebhook` replaced it while the request was in flight
/// (it may take up to READ_TIMEOUT), the new configuration does not inherit the old error.
fn failed(shared: &BotShared, tried: WebhookConfig, update_id: i64, message: String) -> Outcome {
    BotMetrics::add(&shared.metrics.webhook_failures, 1);
    log::warn!("bot @{}: webhook delivery of update {update_id} failed: {message}", shared.username);
    let error = LastError { date: unix_now(), message };
    let recorded = shared.store.write(move |c| {
        if config::config(c)?.as_ref() != Some(&tried) {
            return Ok(false);
        }
        config::record_error(c, &error)?;
        Ok(true)
    });
    match recorded {
        Ok(true) => {}
        Ok(false) => log::info!("bot @{}: webhook: the configuration changed during that attempt", shared.username),
        Err(e) => log::error!("bot @{}: webhook: cannot record the delivery error: {e}", shared.username),
    }
    Outcome::Failed
}

/// The message of `last_error_message` for a failed request. Built from the error kinds, not
/// from ureq's text, which contains the URL (it may hold a secret path).
fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Status(code, resp) => format!("Wrong response from the webhook: {code} {}", resp.status_text()),
        ureq::Error::Transport(t) => {
            let mut io_kind = None;
            let mut tls = None;
            let mut source = std::error::Error::source(t);
            while let Some(s) = source {
                if let Some(ioe) = s.downcast_ref::<io::Error>() {
                    io_kind = Some(ioe.kind());
                    break;
                }
                if let Some(e) = s.downcast_ref::<native_tls::Error>() {
                    // The TLS library's text names the problem (certificate, protocol), not the URL.
                    tls = Some(e.to_string());
                }
                source = s.source();
            }
            if let (Some(tls), None) = (&tls, io_kind) {
                return format!("SSL error: {tls}");
            }
            use ureq::ErrorKind as K;
            match (t.kind(), io_kind) {
                (_, Some(io::ErrorKind::ConnectionRefused)) => "Connection refused".to_string(),
                (_, Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)) => "Timeout".to_string(),
                (_, Some(io::ErrorKind::ConnectionReset)) => "Connection reset by peer".to_string(),
                (_, Some(io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionAborted)) => {
                    "Connection closed by the webhook before the response".to_string()
                }
                (K::Dns, _) => "Failed to resolve host".to_string(),
                (K::ConnectionFailed, None) => "Connection failed (TLS handshake or certificate error)".to_string(),
                (K::ConnectionFailed, Some(k)) => format!("Connection failed: {k}"),
                (K::BadStatus | K::BadHeader, _) => "Invalid HTTP response from the webhook".to_string(),
                (K::InvalidUrl | K::UnknownScheme, _) => "Invalid webhook URL".to_string(),
                (kind, Some(k)) => format!("{kind}: {k}"),
                (kind, None) => kind.to_string(),
            }
        }
    }
}

/// Reads a 2xx answer; `None` when it is empty or unreadable (nothing to run).
fn read_reply(resp: ureq::Response, update_id: i64, bot: &str) -> Option<Answer> {
    let content_type = resp.header("Content-Type").map(str::to_string);
    let mut body = Vec::new();
    if let Err(e) = resp.into_reader().take(MAX_ANSWER_BYTES as u64 + 1).read_to_end(&mut body) {
        log::debug!("bot @{bot}: webhook answer to update {update_id} unreadable: {e}");
        return None;
    }
    (!body.iter().all(u8::is_ascii_whitespace)).then_some(Answer { update_id, content_type, body })
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::*;

    /// Body, Content-Type and secret header of one received request.
    type Seen = (String, Option<String>, Option<String>);

    /// A local receiver that answers each request with the next scripted status; the handle
    /// returns what it saw once every scripted status was used.
    fn receiver(statuses: Vec<u16>) -> (String, thread::JoinHandle<Vec<Seen>>) {
        struct Scripted {
            statuses: std::sync::Mutex<std::collections::VecDeque<u16>>,
            seen: crossbeam_channel::Sender<Seen>,
        }
        impl crate::http::Handler for Scripted {
            fn handle(&self, rq: &mut crate::http::Request<'_>) -> crate::http::Response {
                let (ct, secret) = (rq.header("Content-Type").map(str::to_string), rq.header(SECRET_HEADER).map(str::to_string));
                let mut body = String::new();
                rq.body().read_to_string(&mut body).expect("body");
                let _ = self.seen.send((body, ct, secret));
                crate::http::Response::new(self.statuses.lock().expect("lock").pop_front().unwrap_or(500))
            }
        }
        let n = statuses.len();
        let (tx, rx) = crossbeam_channel::bounded(n);
        let handler = Scripted { statuses: std::sync::Mutex::new(statuses.into()), seen: tx };
        let limits = crate::http::Limits { workers: 1, ..Default::default() };
        let server = crate::http::Server::start("test-recv", "127.0.0.1:0", limits, Arc::new(handler)).expect("bind");
        let url = format!("http://{}/hook", server.local_addr());
        let handle = thread::Builder::new()
            .name("test-receiver".into())
            .spawn(move || {
                let seen = (0..n).map(|_| rx.recv_timeout(std::time::Duration::from_secs(30)).expect("request")).collect();
                server.shutdown();
                seen
            })
            .expect("spawn receiver");
        (url, handle)
    }

    #[test]
    fn error_messages_say_what_happened() {
        let agent = agent().expect("agent");
        let (url, handle) = receiver(vec![500, 404, 200]);
        let send = || agent.post(&url).set("Content-Type", "application/json").send_bytes(b"{}").map_err(Box::new);
        let e = send().expect_err("500");
        assert_eq!(describe(&e), "Wrong response from the webhook: 500 Internal Server Error");
        let e = send().expect_err("404");
        assert_eq!(describe(&e), "Wrong response from the webhook: 404 Not Found");
        assert_eq!(send().expect("200").status(), 200);
        let seen = handle.join().expect("receiver");
        assert_eq!(seen[0].1.as_deref(), Some("application/json"), "Content-Type exactly application/json");

        // A port nobody listens on.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = closed.local_addr().expect("addr").port();
        drop(closed);
        let e = agent.post(&format!("http://127.0.0.1:{port}/x")).send_bytes(b"{}").expect_err("refused");
        assert_eq!(describe(&e), "Connection refused");

        // A receiver that accepts and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let slow = ureq::AgentBuilder::new().timeout_read(Duration::from_millis(300)).build();
        let e = slow
            .post(&format!("http://{}/x", silent.local_addr().expect("addr")))
            .send_bytes(b"{}")
            .expect_err("timeout");
        assert_eq!(describe(&e), "Timeout");

        // https to a server that speaks plain HTTP: the TLS handshake fails.
        let plain = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = plain.local_addr().expect("addr");
        let server = thread::spawn(move || {
            use std::io::Write;
            let (mut conn, _) = plain.accept().expect("accept");
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        });
        let e = agent.post(&format!("https://{addr}/x")).send_bytes(b"{}").expect_err("not TLS");
        let msg = describe(&e);
        assert!(msg.starts_with("SSL error: "), "{msg}");
        assert!(!msg.contains(&addr.to_string()), "{msg}");
        server.join().expect("plain server");
    }

    #[test]
    fn backoff_start_from_env_is_clamped() {
        // Only this test touches the variable.
        std::env::set_var(BACKOFF_START_ENV, "250");
        assert_eq!(backoff_start(), Duration::from_millis(250));
        std::env::set_var(BACKOFF_START_ENV, "999999999");
        assert_eq!(backoff_start(), BACKOFF_MAX);
        std::env::remove_var(BACKOFF_START_ENV);
        assert_eq!(backoff_start(), BACKOFF_START);
    }
}
