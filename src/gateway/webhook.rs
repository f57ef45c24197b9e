//! Webhook delivery of one bot: the thread `wh/<n>` posts the durable queue (shared with
//! `getUpdates`) to the configured URL, one update at a time and in queue order, and hands
//! answers to `whr/<n>` (`api::replies`), which executes the Bot API calls that receivers put
//! in them.
//!
//! A run: read the webhook configuration and up to 64 queued updates (one read); then for each,
//! in order, one attempt: re-verify the bot's credential with the platform
//! (`VerifyCredential`; a revoked or disabled bot sends nothing more, and its queue is kept) →
//! `POST` the Update as `application/json`, with the secret in `X-Compat-Bot-Api-Secret-Token`
//! (or the headers `webhook_secret_token_headers` names) and nowhere else → a 2xx answer
//! counts as delivered. Delivered updates are acknowledged in one writer job per 32 and at the
//! end of the run, and only then are their answers handed on; anything else (non-2xx, timeout,
//! network error) ends the run: what was delivered is acknowledged, the failed update stays at
//! the head, `last_error_date`/`last_error_message` are recorded durably and the run is tried
//! again after a bounded exponential delay (1 s doubling up to 60 s, docs/decisions.md). The
//! credential checks of the next attempts are in flight while the current one is posted, at
//! most [`CHECKS_AHEAD`] at once.
//!
//! Both threads run on demand ([`Deliverer`], `api::replies::ReplyRunner`): an idle bot has
//! neither. Waiting never polls: with no webhook the thread waits on its control channel (woken
//! by `setWebhook`, `deleteWebhook` and revocation), with an empty queue also on the store's
//! commit signal, and ends when neither comes for its idle time; during a backoff it waits on
//! the control channel with a timeout, so a new configuration interrupts the wait.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_channel::{bounded, select, Receiver, RecvTimeoutError, Sender};
use serde_json::Value;

use super::metrics::BotMetrics;
use super::port::PendingCheck;
use super::runtime::{unix_now, BotShared};
use super::store::webhook::{self as config, LastError, WebhookConfig};
use super::store::{queue, Result as StoreResult};
use super::updates;
use crate::backoff::Backoff;
use crate::demand::{Demand, Work};
use crate::wire::rpc::is_unauthenticated;

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

/// The bounded queue from `wh/<n>` to the reply runner; when full, delivery waits.
pub fn answers() -> (Sender<Answer>, Receiver<Answer>) {
    bounded(REPLY_QUEUE)
}

/// Where `wh/<n>` hands the answers on: the queue `whr/<n>` reads, and that thread's demand,
/// started after each answer is queued (so an answer never waits with no thread to run it).
pub struct Replies {
    tx: Sender<Answer>,
    runner: Option<Arc<Demand>>,
}

impl Replies {
    pub fn new(tx: Sender<Answer>, runner: Arc<Demand>) -> Replies {
        Replies { tx, runner: Some(runner) }
    }

    /// Only queues: the test reads the queue itself.
    #[cfg(test)]
    fn queue_only(tx: Sender<Answer>) -> Replies {
        Replies { tx, runner: None }
    }

    /// Queues an answer (blocks only while [`REPLY_QUEUE`] wait) and starts the runner.
    fn hand(&self, answer: Answer) -> io::Result<()> {
        self.tx.send(answer).map_err(|_| io::Error::other("the webhook reply queue is closed"))?;
        match &self.runner {
            Some(runner) => runner.start(),
            None => Ok(()),
        }
    }
}

/// `wh/<n>` as work on demand (`crate::demand`): delivers the queue in webhook mode and hands
/// 2xx answers with a body on ([`Replies`]). Started by `setWebhook` and the other wake-ups
/// (`BotShared::webhook`), by a commit while a webhook is set, and at the bot's start when one
/// is; ends after `idle` with no webhook or nothing to deliver, as soon as the bot's
/// credential is refused (nothing more is sent), or when the bot stops. Every
/// step is a committed transaction, so stopping anywhere is safe.
pub struct Deliverer {
    /// Weak: the bot's wake-up and commit hook hold this work's demand, and the bot must
    /// still drop.
    shared: Weak<BotShared>,
    commits: Receiver<()>,
    replies: Replies,
    backoff_start: Duration,
    idle: Duration,
}

impl Deliverer {
    pub fn new(shared: &Arc<BotShared>, replies: Replies, idle: Duration) -> Deliverer {
        let commits = shared.store.notifier().subscribe();
        Deliverer { shared: Arc::downgrade(shared), commits, replies, backoff_start: backoff_start(), idle }
    }
}

impl Work for Deliverer {
    fn run(&self) {
        if let Some(shared) = self.shared.upgrade() {
            run(&shared, self);
        }
    }

    fn pending(&self) -> bool {
        // A wake-up, or a commit while a webhook is set, came after the run's last look (a
        // revoked bot delivers nothing more: it has nothing to do).
        self.shared.upgrade().is_some_and(|s| {
            !s.is_stopping()
                && !s.is_revoked()
                && (!s.webhook.receiver().is_empty() || (s.webhook_on() && !self.commits.is_empty()))
        })
    }

    fn failed(&self, name: &str) {
        if let Some(shared) = self.shared.upgrade() {
            shared.thread_failed(name);
        }
    }
}

/// One HTTP agent per bot while `wh/<n>` runs: one connection (kept alive), no redirects (a
/// 3xx is not a 2xx), native TLS with the system's trust store.
fn agent(tls: Arc<native_tls::TlsConnector>) -> ureq::Agent {
    ureq::AgentBuilder::new()
        .tls_connector(tls)
        .timeout_connect(CONNECT_TIMEOUT)
        .timeout_read(READ_TIMEOUT)
        .timeout_write(WRITE_TIMEOUT)
        .redirects(0)
        .max_idle_connections_per_host(1)
        .user_agent(concat!("bot-gateway/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The TLS configuration every bot's agent shares. Building one parses the system's whole
/// trust store: about 1 MiB and most of a bot's start-up, which a gateway of a thousand bots
/// must not pay a thousand times. (An OpenSSL context is safe to share between threads.) Media
/// fetched by URL (`api::url_media`) use it too.
pub(crate) fn tls_connector() -> Result<Arc<native_tls::TlsConnector>, native_tls::Error> {
    static SHARED: Mutex<Option<Arc<native_tls::TlsConnector>>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(connector) = shared.as_ref() {
        return Ok(connector.clone());
    }
    let connector = Arc::new(native_tls::TlsConnector::new()?);
    *shared = Some(connector.clone());
    Ok(connector)
}

fn backoff_start() -> Duration {
    match std::env::var(BACKOFF_START_ENV).ok().and_then(|v| v.parse::<u64>().ok()) {
        Some(ms) => Duration::from_millis(ms).clamp(Duration::from_millis(10), BACKOFF_MAX),
        None => BACKOFF_START,
    }
}

/// Updates read for one run of deliveries, posted one at a time and in order without reading
/// the queue again.
const RUN: u32 = 64;
/// Delivered updates acknowledged in one write: at most this many, and a run's last ones when
/// it ends. A crash before that write delivers them again (at least once: receivers are
/// idempotent by update_id, SPEC "Webhook delivery" 5).
const ACK_EVERY: usize = 32;

/// The webhook in force and, if any, the next run of updates (each id and Update object).
type Run = Option<(WebhookConfig, Vec<(i64, Value)>)>;

/// What one look at the queue led to.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    NoWebhook,
    Empty,
    Delivered,
    Failed,
    Revoked,
}

fn run(shared: &BotShared, work: &Deliverer) {
    let (commits, idle) = (&work.commits, work.idle);
    let control = shared.webhook.receiver();
    // An agent per run: its kept-alive connection to the receiver closes when the thread
    // ends, so an idle bot holds no descriptor. The TLS context is built at the first run of
    // any bot (a gateway whose bots all poll never parses the trust store).
    let agent = match tls_connector() {
        Ok(tls) => agent(tls),
        Err(e) => {
            log::error!("bot @{}: webhook: cannot set up TLS: {e}", shared.username);
            shared.status.set_error(format!("webhook: cannot set up TLS: {e}"));
            // Taken: the next wake-up or commit tries again.
            while commits.try_recv().is_ok() {}
            while control.try_recv().is_ok() {}
            return;
        }
    };
    let mut backoff = Backoff::new(work.backoff_start, BACKOFF_MAX);
    loop {
        if shared.is_stopping() {
            return;
        }
        if shared.is_revoked() {
            // Nothing more is sent, for the rest of the process (`pending` says so too); the
            // queue stays for a restart with a valid credential.
            return;
        }
        // Signals of commits and of configuration changes we are about to read anyway (see
        // Notifier::subscribe). A change signalled before the run would otherwise end every
        // run at its first update, and the loop would spin without delivering: setWebhook
        // while a run was under way, or the wake that started this thread.
        while commits.try_recv().is_ok() {}
        while control.try_recv().is_ok() {}
        match deliver_run(shared, &agent, &work.replies, control) {
            Outcome::Delivered => backoff.reset(),
            Outcome::Revoked => {}
            Outcome::NoWebhook => {
                backoff.reset();
                if control.recv_timeout(idle).is_err() {
                    return;
                }
            }
            Outcome::Empty => {
                backoff.reset();
                select! {
                    recv(commits) -> r => if r.is_err() { return },
                    recv(control) -> r => if r.is_err() { return },
                    default(idle) => return,
                }
            }
            Outcome::Failed => {
                // Not idle: the thread stays for the retry.
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

/// Delivers the next run of queued updates, in order, one attempt each, and acknowledges what
/// was delivered (in writes of up to [`ACK_EVERY`]) before it returns. A run ends early at
/// the first failure, when the bot stops or is revoked, or when `setWebhook`/`deleteWebhook`
/// signals `control` (the next run reads the new configuration).
fn deliver_run(shared: &BotShared, agent: &ureq::Agent, replies: &Replies, control: &Receiver<()>) -> Outcome {
    let name = &shared.username;
    let run = shared.store.read(|c| -> StoreResult<Run> {
        let Some(cfg) = config::config(c)? else {
            return Ok(None);
        };
        Ok(Some((cfg, updates::run_from(c, 0, RUN)?)))
    });
    let (cfg, run) = match run {
        Ok(None) => return Outcome::NoWebhook,
        Ok(Some((_, run))) if run.is_empty() => return Outcome::Empty,
        Ok(Some(found)) => found,
        Err(e) => {
            log::error!("bot @{name}: webhook: cannot read the queue: {e}");
            shared.status.set_error(format!("webhook: {e}"));
            return Outcome::Failed;
        }
    };
    let mut acks = Acks { shared, replies, through: None, count: 0, answers: Vec::new() };
    let outcome = attempt_each(shared, agent, control, cfg, run, &mut acks);
    if !acks.flush() {
        return Outcome::Failed;
    }
    outcome
}

/// The attempts of a run, in order, each after its own credential check; delivered updates go
/// to `acks` (the caller writes what is left of them).
fn attempt_each(
    shared: &BotShared,
    agent: &ureq::Agent,
    control: &Receiver<()>,
    cfg: WebhookConfig,
    run: Vec<(i64, Value)>,
    acks: &mut Acks<'_>,
) -> Outcome {
    let name = &shared.username;
    let mut verifier = Verifier::new(shared, run.len());
    for (update_id, update) in run {
        if shared.is_stopping() || !control.is_empty() {
            break;
        }
        // SPEC "Bot credential": re-verified before every attempt (the checks of the next
        // attempts are in flight while this one is posted).
        if let Err(e) = verifier.next() {
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
        match post(shared, agent, &cfg, update_id, &update) {
            Ok(answer) => {
                if !acks.delivered(update_id, answer) {
                    return Outcome::Failed;
                }
            }
            Err(message) => {
                // What was delivered before it is acknowledged first.
                if !acks.flush() {
                    return Outcome::Failed;
                }
                return failed(shared, cfg, update_id, message);
            }
        }
    }
    Outcome::Delivered
}

/// One attempt: `POST` the update; a 2xx is delivered (with the answer for `whr/<n>`, if it
/// carries one), anything else is the error message to record.
fn post(shared: &BotShared, agent: &ureq::Agent, cfg: &WebhookConfig, update_id: i64, update: &Value) -> Result<Option<Answer>, String> {
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
            log::debug!("bot @{}: webhook delivered update {update_id}", shared.username);
            Ok(read_reply(resp, update_id, &shared.username))
        }
        Ok(resp) => Err(format!("Wrong response from the webhook: {} {}", resp.status(), resp.status_text())),
        Err(e) => Err(describe(&e)),
    }
}

/// Updates delivered but not yet acknowledged, and their answers: an answer goes to
/// `whr/<n>` only once its update is acknowledged, so a crash never runs a reply's method
/// twice (the update is delivered again instead, as before).
struct Acks<'a> {
    shared: &'a BotShared,
    replies: &'a Replies,
    through: Option<i64>,
    /// Delivered since the last write.
    count: usize,
    answers: Vec<Answer>,
}

impl Acks<'_> {
    /// Records a delivery; writes the acknowledgements once [`ACK_EVERY`] are waiting. False
    /// when that write failed.
    fn delivered(&mut self, update_id: i64, answer: Option<Answer>) -> bool {
        self.through = Some(update_id);
        self.count += 1;
        self.answers.extend(answer);
        self.count < ACK_EVERY || self.flush()
    }

    /// Acknowledges every delivered update in one write, then hands their answers on. False
    /// when the write failed: they are delivered again (receivers are idempotent by
    /// update_id, SPEC "Webhook delivery" 5) and their answers are dropped.
    fn flush(&mut self) -> bool {
        let Some(through) = self.through.take() else { return true };
        self.count = 0;
        let answers = std::mem::take(&mut self.answers);
        let name = &self.shared.username;
        // Relaxed: an acknowledgement lost to a power failure only delivers those updates
        // again, which at-least-once delivery allows (receivers are idempotent by update_id).
        match self.shared.store.write_relaxed(move |c| queue::ack_through(c, through)) {
            Ok(n) => BotMetrics::add(&self.shared.metrics.updates_delivered, n as u64),
            Err(e) => {
                log::error!("bot @{name}: webhook: cannot acknowledge the updates through {through}: {e}");
                return false;
            }
        }
        for answer in answers {
            if let Err(e) = self.replies.hand(answer) {
                log::error!("bot @{name}: webhook reply not run: {e}");
            }
        }
        true
    }
}

/// Credential checks in flight at most during a run: the check of an attempt is sent at most
/// [`CHECKS_AHEAD`] − 1 attempts before it starts, so the platform's round trip (longer than a
/// local POST) overlaps the posts before it instead of pacing the run. Each attempt still
/// waits for its own check's answer; a revocation the platform records stops delivery at most
/// `CHECKS_AHEAD` − 1 attempts later (checks already answered), a few milliseconds at full
/// speed.
const CHECKS_AHEAD: usize = 8;

/// The credential checks of a run, one per attempt, each answered before its attempt starts.
/// They are sent in bursts: when half of [`CHECKS_AHEAD`] or fewer are in flight, the window
/// is filled again at once, so the platform takes several calls per wake-up (checks sent one
/// by one as attempts start cost both processes a wake-up each: 4,100–5,800 deliveries/s
/// against 5,100–6,900 in bursts of four, docs/decisions.md).
struct Verifier<'a> {
    shared: &'a BotShared,
    /// Sent, in attempt order.
    in_flight: VecDeque<PendingCheck>,
    /// Attempts of the run whose check is not sent yet.
    unsent: usize,
}

impl<'a> Verifier<'a> {
    fn new(shared: &'a BotShared, attempts: usize) -> Verifier<'a> {
        Verifier { shared, in_flight: VecDeque::with_capacity(CHECKS_AHEAD), unsent: attempts }
    }

    /// The answer of the next attempt's check; first, when half the window or less is in
    /// flight, sends the checks of the attempts after it, up to [`CHECKS_AHEAD`].
    fn next(&mut self) -> grpcio::Result<()> {
        if self.in_flight.len() <= CHECKS_AHEAD / 2 {
            while self.in_flight.len() < CHECKS_AHEAD && self.unsent > 0 {
                self.in_flight.push_back(self.shared.platform.start_verify_credential());
                self.unsent -= 1;
            }
        }
        match self.in_flight.pop_front() {
            Some(check) => check().map(|_| ()),
            None => Err(grpcio::Error::RemoteStopped),
        }
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
        let agent = agent(tls_connector().expect("TLS"));
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
    fn delivered_updates_are_acknowledged_together_and_their_answers_follow_the_write() {
        let (_dir, bot) = crate::gateway::runtime::test_bot(crate::gateway::config::DEFAULT_SEND_WAIT);
        let total = ACK_EVERY + 8;
        bot.store
            .write(move |c| {
                for n in 0..total {
                    queue::enqueue(c, "message", &serde_json::json!({ "n": n }))?;
                }
                Ok(())
            })
            .expect("enqueue");
        let queued = || bot.store.read(queue::depth).expect("depth") as usize;
        let (tx, rx) = answers();
        let replies = Replies::queue_only(tx);
        let mut acks = Acks { shared: &bot, replies: &replies, through: None, count: 0, answers: Vec::new() };
        let answer = |id: i64| Some(Answer { update_id: id, content_type: None, body: b"{}".to_vec() });
        for id in 1..ACK_EVERY as i64 {
            assert!(acks.delivered(id, answer(id)));
        }
        assert_eq!(queued(), total, "no write for the first {} deliveries", ACK_EVERY - 1);
        assert!(rx.is_empty(), "no answer runs before its update is acknowledged");
        assert!(acks.delivered(ACK_EVERY as i64, answer(ACK_EVERY as i64)));
        assert_eq!(queued(), total - ACK_EVERY, "one write acknowledged {ACK_EVERY}");
        let handed: Vec<i64> = rx.try_iter().map(|a| a.update_id).collect();
        assert_eq!(handed, (1..=ACK_EVERY as i64).collect::<Vec<_>>(), "their answers, in order");
        assert!(acks.delivered(ACK_EVERY as i64 + 1, None));
        assert!(acks.flush());
        assert_eq!(queued(), total - ACK_EVERY - 1, "the run's end acknowledges the rest");
        assert!(acks.flush(), "nothing left: no write");
        assert_eq!(bot.metrics.updates_delivered.load(std::sync::atomic::Ordering::Relaxed), ACK_EVERY as u64 + 1);
    }

    #[test]
    fn each_attempt_waits_for_its_own_check_and_a_refused_one_stops_the_run_before_its_post() {
        use grpcio::RpcStatusCode;

        use crate::gateway::port::refusal;
        use crate::wire::platform::VerifyCredentialResponse;

        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let (url, handle) = receiver(vec![200; 3]);
        let stored = bot.store.write(move |c| {
            config::set(c, &WebhookConfig { url, secret_token: None })?;
            for n in 0..20 {
                queue::enqueue(c, "message", &serde_json::json!({ "n": n }))?;
            }
            Ok(())
        });
        stored.expect("webhook and queue");
        // The first three checks pass, every later one is refused: the bot was revoked.
        for _ in 0..3 {
            fake.answer_once("verify_credential", Ok(VerifyCredentialResponse::new()));
        }
        fake.answer_always("verify_credential", |_: crate::wire::platform::VerifyCredentialRequest| {
            Err::<VerifyCredentialResponse, _>(refusal(RpcStatusCode::UNAUTHENTICATED, "revoked"))
        });
        let agent = agent(tls_connector().expect("TLS"));
        let (tx, _rx) = answers();
        let (_control_tx, control) = bounded(1);
        let outcome = deliver_run(&bot, &agent, &Replies::queue_only(tx), &control);
        assert!(matches!(outcome, Outcome::Revoked), "the refused check ends the run as a revocation");
        assert_eq!(handle.join().expect("receiver").len(), 3, "only the attempts whose check passed were posted");
        assert_eq!(bot.store.read(queue::depth).expect("depth"), 17, "the three delivered are acknowledged, the rest kept");
        let sent = fake.calls_of("verify_credential").len();
        assert!(sent > 4 && sent <= 3 + CHECKS_AHEAD, "checks ran ahead of their attempts, at most {CHECKS_AHEAD} in flight: {sent}");
    }

    #[test]
    fn checks_go_out_in_bursts_and_never_more_than_the_window_ahead() {
        use crate::wire::platform::{VerifyCredentialRequest, VerifyCredentialResponse};

        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        fake.answer_always("verify_credential", |_: VerifyCredentialRequest| Ok(VerifyCredentialResponse::new()));
        let attempts = 18;
        let mut verifier = Verifier::new(&bot, attempts);
        let sent_by_attempt: Vec<usize> = (0..attempts)
            .map(|_| {
                verifier.next().expect("valid");
                fake.calls_of("verify_credential").len()
            })
            .collect();
        // The window (8) at once, then four more each time only four are left in flight.
        assert_eq!(sent_by_attempt, [8, 8, 8, 8, 12, 12, 12, 12, 16, 16, 16, 16, 18, 18, 18, 18, 18, 18]);
        for (i, sent) in sent_by_attempt.iter().enumerate() {
            assert!(*sent < i + 1 + CHECKS_AHEAD, "attempt {i}: at most {CHECKS_AHEAD} checks in flight");
        }
        assert!(verifier.next().is_err(), "no check beyond the run's attempts");
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
