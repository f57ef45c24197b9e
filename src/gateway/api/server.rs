//! The Bot API's routes on the HTTP server (`crate::http`): authentication by the token in
//! the path, body decoding and the response envelope.
//!
//! Compat listener (8081): `/bot<token>/<method>` (GET or POST), `/file/bot<token>/<path>`,
//! `/healthz`, `/readyz`. Extensions listener (8082): `/healthz`, `/readyz`, `/metrics` and `/outbox/given-up`. Everything else is a 404 in
//! the JSON error envelope, and so is every refusal of the HTTP layer itself (400, 408, 413,
//! 414, 431, 501, 503, 505): SDKs parse the envelope whatever the status.
//!
//! Threads and bounds are the HTTP server's: `<name>-acc` accepts, `<name>-<i>` serve one
//! connection each. A getUpdates long poll holds its worker for up to 50 s, so the compat
//! listener needs more workers than there are bots polling at once ([`compat_limits`]).
//!
//! Logging: a request is logged at debug level as method, path with the token secret redacted
//! (`/bot123:<redacted>/getMe`) and without the query string (it may carry message text), status
//! and duration. A request refused for its token is logged at info, the same way (at most one
//! line a second, with a count of those left out). Bodies and secrets are never logged.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::http::percent::percent_decode_path;
use super::request;
use super::response::{self, HttpResponse};
use super::token::redact_path;
use super::{Backend, BotApi};
use crate::gateway::botapi::ApiError;
use crate::http::{self, HostRule, HttpError, Limits};

/// Workers of the extensions listener (health checks only so far).
pub const EXTENSIONS_WORKERS: usize = 4;

/// `GET /readyz`: 200 only when the gateway can deliver (healthy, and every bot connected to
/// the platform), else 503 naming the bots that are not; for load balancers and orchestrators.
/// `/healthz` keeps its meaning (alive: 503 only when a restart is due).
fn readiness(health: &serde_json::Value) -> HttpResponse {
    let waiting: Vec<serde_json::Value> = health["bots"]
        .as_array()
        .map(|bots| bots.iter().filter(|b| b["connected"] != true).map(|b| b["username"].clone()).collect())
        .unwrap_or_default();
    let ready = health["ok"] == true && waiting.is_empty();
    let body = serde_json::json!({"ready": ready, "status": health["status"], "bots_not_connected": waiting});
    response::json_response(if ready { 200 } else { 503 }, &body)
}

/// Media types a browser shows without running anything: images (not SVG, which may hold
/// script), audio, video, PDF and plain text. Any other is served as
/// `application/octet-stream`.
fn inert_type(declared: &str) -> &str {
    let essence = declared.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let inert = match essence.split_once('/') {
        Some(("image", sub)) => !sub.contains("svg"),
        Some(("audio" | "video", _)) => true,
        _ => matches!(essence.as_str(), "application/pdf" | "text/plain"),
    };
    if inert && declared.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        declared
    } else {
        "application/octet-stream"
    }
}

/// A file download as a browser cannot run it: an inert type or octet-stream, no sniffing, an
/// attachment with a safe name, and a sandbox should it be shown anyway. The token is in the
/// download URL, so a page served on this origin could read it.
fn download_response(d: super::backend::Download) -> HttpResponse {
    HttpResponse::streamed(200, inert_type(&d.content_type), d.len, d.write)
        .with_header("X-Content-Type-Options", "nosniff")
        .with_header("Content-Disposition", &format!("attachment; filename=\"{}\"", d.file_name))
        .with_header("Content-Security-Policy", "sandbox")
}

/// Limits of the compat listener for `bots` configured bots: a long poll per bot may hold a
/// worker for 50 s, and each SDK keeps a few connections alive besides.
/// `hosts`: which `Host` values it answers (`HostRule::for_listener`).
pub fn compat_limits(bots: usize, hosts: HostRule) -> Limits {
    Limits { workers: 32 + 4 * bots, hosts, ..Limits::default() }
}

/// Limits of the extensions listener.
pub fn extensions_limits(hosts: HostRule) -> Limits {
    Limits { workers: EXTENSIONS_WORKERS, max_body_bytes: 64 * 1024, hosts, ..Limits::default() }
}

/// Which routes a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// The Bot API: `/bot<token>/<method>`, `/file/bot<token>/<path>`, `/healthz`.
    Compat,
    /// Extensions: `/healthz`, `/metrics`; a Bot API request here is told where the Bot API is.
    Extensions { bot_api: SocketAddr },
}

/// A running listener. [`Listener::shutdown`] (or dropping it) stops accepting, wakes idle
/// connections and joins every thread; a worker busy with a request finishes it first (a long
/// poll ends when its timeout passes or the runtime wakes it).
pub struct Listener {
    server: http::Server,
}

impl Listener {
    /// Binds `addr` (port 0 picks a free port; see [`Listener::local_addr`]). `name` names the
    /// threads and must be at most 11 bytes.
    pub fn start(
        name: &str,
        addr: &str,
        backend: Arc<dyn Backend>,
        kind: ListenerKind,
        limits: Limits,
    ) -> io::Result<Listener> {
        let routes = Arc::new(Routes { name: name.to_string(), backend, kind });
        let server = http::Server::start(name, addr, limits, routes)
            .map_err(|e| io::Error::new(e.kind(), format!("{name}: cannot listen on {addr}: {e}")))?;
        Ok(Listener { server })
    }

    /// Serves on a listener bound earlier: the gateway binds both addresses before it
    /// registers anything, so a port in use fails the start with no device left behind.
    pub fn on(
        name: &str,
        listener: std::net::TcpListener,
        backend: Arc<dyn Backend>,
        kind: ListenerKind,
        limits: Limits,
    ) -> io::Result<Listener> {
        let routes = Arc::new(Routes { name: name.to_string(), backend, kind });
        Ok(Listener { server: http::Server::from_listener(name, listener, limits, routes)? })
    }

    /// The bound address (the real port when started with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// Whether this listener is serving.
    pub fn health(&self) -> http::Health {
        self.server.health()
    }

    /// Stops the listener and joins its threads.
    pub fn shutdown(self) {
        self.server.shutdown();
    }
}

struct Routes {
    name: String,
    backend: Arc<dyn Backend>,
    kind: ListenerKind,
}

impl http::Handler for Routes {
    fn handle(&self, rq: &mut http::Request<'_>) -> HttpResponse {
        let started = Instant::now();
        let response = route(rq, &*self.backend, self.kind);
        log::debug!(
            "{}: {} {} -> {} ({} ms)",
            self.name,
            rq.method(),
            redact_path(rq.target()),
            response.status(),
            started.elapsed().as_millis()
        );
        response
    }

    fn error(&self, err: &HttpError) -> HttpResponse {
        log::debug!("{}: refused a request: {err}", self.name);
        response::error(&ApiError::new(err.status, err.description.clone()))
    }
}

/// The extensions listener's list of the sends the outboxes gave up.
pub const GIVEN_UP_PATH: &str = "/outbox/given-up";

/// A path that is no route of the Bot API listener: what the routes look like.
const NO_SUCH_PATH: &str = "no such endpoint; the Bot API is at /bot<TOKEN>/<METHOD> (e.g. /bot123:abc.../getMe), \
files at /file/bot<TOKEN>/<FILE_PATH>, health at /healthz, readiness at /readyz";

/// Routes one request to its response.
fn route(rq: &mut http::Request<'_>, backend: &dyn Backend, kind: ListenerKind) -> HttpResponse {
    let target = rq.target().to_string();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target.as_str(), None),
    };
    let verb = rq.method().to_string();
    let is_get = verb == "GET" || verb == "HEAD";

    if path == "/healthz" {
        if !is_get {
            return response::error(&method_not_allowed("GET"));
        }
        let health = backend.health();
        // A supervisor reads the status: 503 while a bot or the Bot API is not healthy.
        let status = if health["ok"] == true { 200 } else { 503 };
        return response::json_response(status, &health);
    }
    if path == "/readyz" {
        if !is_get {
            return response::error(&method_not_allowed("GET"));
        }
        return readiness(&backend.health());
    }
    if let ListenerKind::Extensions { bot_api } = kind {
        if path == "/metrics" {
            if !is_get {
                return response::error(&method_not_allowed("GET"));
            }
            return HttpResponse::with_body(200, crate::gateway::metrics::CONTENT_TYPE, backend.metrics().into_bytes());
        }
        if path == GIVEN_UP_PATH {
            if !is_get {
                return response::error(&method_not_allowed("GET"));
            }
            return response::json_response(200, &backend.given_up());
        }
        if path.starts_with("/bot") || path.starts_with("/file/bot") {
            return response::error(&ApiError::not_found(format!(
                "this is the extensions listener (/healthz, /readyz, /metrics, /outbox/given-up); the Bot API is served on http://{bot_api}"
            )));
        }
        return response::error(&ApiError::not_found(
            "no such endpoint; the extensions listener serves /healthz, /readyz, /metrics and /outbox/given-up",
        ));
    }
    if let Some(rest) = path.strip_prefix("/file/bot") {
        let (token, file_path) = split_token(rest);
        if !is_get {
            return response::error(&method_not_allowed("GET"));
        }
        let bot = match authenticate(backend, token) {
            Ok(bot) => bot,
            Err(e) => return refused(rq, &e),
        };
        // SDKs send names with spaces and non-ASCII characters percent-encoded (SDK-COMPAT §8.8).
        let Some(file_path) = percent_decode_path(file_path) else {
            return response::error(&ApiError::not_found("file not found")).served();
        };
        let answer = match bot.download(&file_path) {
            Ok(d) => download_response(d),
            Err(e) => response::error(&e),
        };
        return answer.served();
    }
    let Some(rest) = path.strip_prefix("/bot") else {
        return response::error(&ApiError::not_found(NO_SUCH_PATH));
    };
    if verb != "GET" && verb != "POST" {
        return response::error(&method_not_allowed("GET or POST"));
    }
    let (token, tail) = split_token(rest);
    let bot = match authenticate(backend, token) {
        Ok(bot) => bot,
        Err(e) => return refused(rq, &e),
    };
    // PTB with a base URL ending in "/" sends `/bot<token>//getMe` (SDK-COMPAT §1).
    let method_name = match percent_decode_path(tail.trim_matches('/')) {
        Some(m) if !m.is_empty() => m,
        _ => {
            return response::error(&ApiError::not_found("method name is missing: the path is /bot<TOKEN>/<METHOD>, e.g. /bot<TOKEN>/getMe"))
                .served()
        }
    };
    let started = Instant::now();
    let response = call_method(rq, &*bot, &method_name, query);
    let counted = crate::gateway::api::methods::find(&method_name).map_or("other", |m| m.name);
    bot.answered(counted, response.status(), started.elapsed());
    response.served()
}

/// Runs a Bot API method of an authenticated bot: preflight, body, call.
fn call_method(rq: &mut http::Request<'_>, bot: &dyn BotApi, method_name: &str, query: Option<&str>) -> HttpResponse {
    let method = match bot.preflight(method_name) {
        Ok(m) => m,
        Err(e) => return response::error(&e),
    };
    let content_type = rq.header("Content-Type").map(str::to_string);
    let content_length = rq.body_length().map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let params = match request::decode_streamed(query, content_type.as_deref(), content_length, rq.body(), bot.file_intake()) {
        Ok(p) => p,
        // The HTTP layer knows best why a body could not be read (cut off, stalled, too large).
        Err(e) => {
            let e = rq.body_error().map_or(e, |b| ApiError::new(b.status, b.description.clone()));
            return response::error(&e);
        }
    };
    match bot.call(method, &params) {
        Ok(result) => response::success(result),
        Err(e) => response::error(&e),
    }
}

/// Splits `<token>/<rest>` after the `/bot` prefix.
fn split_token(rest: &str) -> (&str, &str) {
    match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    }
}

/// The 401 of a request whose token is not a configured bot's current one, logged at info
/// with the path redacted (an operator sees a bot running with a stale token), at most once a
/// second so a flood of wrong tokens cannot flood the log.
fn refused(rq: &http::Request<'_>, e: &ApiError) -> HttpResponse {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST_LOGGED: AtomicU64 = AtomicU64::new(0);
    static LEFT_OUT: AtomicU64 = AtomicU64::new(0);
    let now = crate::clock::unix_now().max(0) as u64;
    if LAST_LOGGED.swap(now, Ordering::Relaxed) != now {
        let left_out = LEFT_OUT.swap(0, Ordering::Relaxed);
        let more = if left_out > 0 { format!(" ({left_out} more refused since the last such line)") } else { String::new() };
        log::info!(
            "refused {} {}: the token is not a configured bot's current token (401){more}",
            rq.method(),
            redact_path(rq.target())
        );
    } else {
        LEFT_OUT.fetch_add(1, Ordering::Relaxed);
    }
    response::error(e)
}

/// 401 unless `raw` is a well-formed token of a configured bot.
fn authenticate(backend: &dyn Backend, raw: &str) -> Result<Arc<dyn BotApi>, ApiError> {
    let token = percent_decode_path(raw).ok_or_else(ApiError::unauthorized)?;
    if crate::wire::token::parse(&token).is_none() {
        return Err(ApiError::unauthorized());
    }
    backend.bot(&token).ok_or_else(ApiError::unauthorized)
}

fn method_not_allowed(allowed: &str) -> ApiError {
    ApiError::new(405, format!("Method Not Allowed: use {allowed}"))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::sync::Mutex;

    use serde_json::{json, Value};

    use super::*;
    use crate::gateway::api::methods::{self, GetUpdates, SendMessage};
    use crate::gateway::botapi::Params;

    const SECRET: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    fn token() -> String {
        format!("123456:{SECRET}")
    }

    #[derive(Default)]
    struct FakeBot {
        sent: Mutex<Vec<SendMessage>>,
        polls: Mutex<Vec<GetUpdates>>,
    }

    /// The methods the routes are tested with, parsed by the real parameter rules and
    /// recorded instead of run.
    impl BotApi for FakeBot {
        fn preflight(&self, name: &str) -> Result<&'static methods::Method, ApiError> {
            methods::find(name).ok_or_else(|| ApiError::not_found(format!("method {name} not found")))
        }
        fn call(&self, method: &'static methods::Method, params: &Params) -> Result<Value, ApiError> {
            match method.name {
                "getMe" => Ok(json!({"id": 123456, "is_bot": true, "first_name": "Test", "username": "test_bot"})),
                "getUpdates" => {
                    self.polls.lock().expect("lock").push(methods::get_updates_request(params)?);
                    Ok(json!([]))
                }
                "sendMessage" => {
                    let req = methods::send_message_request(params)?;
                    let v = json!({"message_id": 1, "date": 1, "chat": {"id": req.chat_id, "type": "private"}, "text": req.text});
                    self.sent.lock().expect("lock").push(req);
                    Ok(v)
                }
                "deleteWebhook" => Ok(json!(true)),
                other => Err(ApiError::not_found(format!("method {other} not found"))),
            }
        }
    }

    struct FakeBackend {
        bot: Arc<FakeBot>,
    }

    impl Backend for FakeBackend {
        fn bot(&self, t: &str) -> Option<Arc<dyn BotApi>> {
            (t == token()).then(|| Arc::clone(&self.bot) as Arc<dyn BotApi>)
        }
        fn health(&self) -> Value {
            json!({"ok": true, "bots": 1})
        }
    }

    struct Harness {
        listener: Option<Listener>,
        bot: Arc<FakeBot>,
        base: String,
        agent: ureq::Agent,
    }

    impl Harness {
        fn new(kind: ListenerKind) -> Harness {
            let bot = Arc::new(FakeBot::default());
            let backend = Arc::new(FakeBackend { bot: Arc::clone(&bot) });
            let listener = Listener::start("test-http", "127.0.0.1:0", backend, kind, Limits { workers: 2, ..Limits::default() }).expect("start");
            let base = format!("http://{}", listener.local_addr());
            Harness { listener: Some(listener), bot, base, agent: ureq::AgentBuilder::new().build() }
        }

        fn result(&self, r: Result<ureq::Response, ureq::Error>) -> (u16, String, Value) {
            let resp = match r {
                Ok(r) => r,
                Err(ureq::Error::Status(_, r)) => r,
                Err(e) => panic!("transport error: {e}"),
            };
            let status = resp.status();
            let ct = resp.header("Content-Type").unwrap_or("").to_string();
            let mut body = String::new();
            resp.into_reader().read_to_string(&mut body).expect("body");
            (status, ct, serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}")))
        }

        fn get(&self, path: &str) -> (u16, String, Value) {
            self.result(self.agent.get(&format!("{}{path}", self.base)).call())
        }

        fn post(&self, path: &str, content_type: Option<&str>, body: &[u8]) -> (u16, String, Value) {
            let mut rq = self.agent.post(&format!("{}{path}", self.base));
            if let Some(ct) = content_type {
                rq = rq.set("Content-Type", ct);
            }
            self.result(rq.send_bytes(body))
        }
    }

    impl Drop for Harness {
        fn drop(&mut self) {
            if let Some(l) = self.listener.take() {
                l.shutdown();
            }
        }
    }

    fn assert_error(got: (u16, String, Value), status: u16, description: &str) {
        let (s, ct, v) = got;
        assert_eq!(s, status, "{v}");
        assert_eq!(ct, "application/json");
        assert_eq!(v, json!({"ok": false, "error_code": status, "description": description}));
    }

    #[test]
    fn get_me_and_envelopes() {
        let h = Harness::new(ListenerKind::Compat);
        let (s, ct, v) = h.post(&format!("/bot{}/getMe", token()), None, b"");
        assert_eq!((s, ct.as_str()), (200, "application/json"));
        assert_eq!(v["ok"], true);
        assert_eq!(v["result"]["username"], "test_bot");
        // GET, a case-insensitive name and PTB's double slash all reach the method.
        assert_eq!(h.get(&format!("/bot{}/GETME", token())).0, 200);
        assert_eq!(h.get(&format!("/bot{}//getMe", token())).0, 200);
        // Percent-encoded ':' in the token.
        assert_eq!(h.get(&format!("/bot123456%3A{SECRET}/getMe")).0, 200);
    }

    #[test]
    fn errors_in_the_envelope() {
        let h = Harness::new(ListenerKind::Compat);
        assert_error(h.get(&format!("/bot{}/sendPigeon", token())), 404, "Not Found: method sendPigeon not found");
        assert_error(h.get(&format!("/bot{}/", token())), 404, "Not Found: method name is missing: the path is /bot<TOKEN>/<METHOD>, e.g. /bot<TOKEN>/getMe");
        assert_error(h.get("/bot123456:abc/getMe"), 401, "Unauthorized");
        assert_error(h.get(&format!("/bot{SECRET}/getMe")), 401, "Unauthorized");
        assert_error(h.get(&format!("/bot123456:{SECRET}0/getMe")), 401, "Unauthorized");
        let wrong = format!("/bot654321:{SECRET}/getMe");
        assert_error(h.get(&wrong), 401, "Unauthorized");
        assert_error(h.post(&wrong, Some("application/json"), b"{}"), 401, "Unauthorized");
        assert_error(h.get("/nowhere"), 404, &format!("Not Found: {NO_SUCH_PATH}"));
        assert!(NO_SUCH_PATH.contains("/bot<TOKEN>/<METHOD>"));
        assert_error(
            h.get(&format!("/file/bot{}/photos/a.jpg", token())),
            404,
            "Not Found: file downloads are not available",
        );
        assert_error(h.get("/file/bot1:x/photos/a.jpg"), 401, "Unauthorized");
        assert_error(
            h.post(&format!("/bot{}/sendMessage", token()), Some("application/json"), b"[1]"),
            400,
            "Bad Request: can't parse JSON body: expected a JSON object, got an array",
        );
        assert_error(
            h.post(&format!("/bot{}/sendMessage", token()), Some("application/json"), br#"{"text":"x"}"#),
            400,
            "Bad Request: chat_id is required",
        );
        // The same agent keeps working after errors (connections are reusable or closed cleanly).
        assert_eq!(h.get(&format!("/bot{}/getMe", token())).0, 200);
    }

    #[test]
    fn readyz_is_ready_only_when_healthy_and_every_bot_is_connected() {
        let health = |ok: bool, connected: [bool; 2]| {
            json!({"ok": ok, "status": "x", "bots": [
                {"username": "a_bot", "connected": connected[0]}, {"username": "b_bot", "connected": connected[1]}
            ]})
        };
        let status = |r: HttpResponse| (r.status(), serde_json::from_slice::<Value>(r.body_bytes()).expect("json"));
        assert_eq!(status(readiness(&health(true, [true, true]))).0, 200);
        let (code, body) = status(readiness(&health(true, [true, false])));
        assert_eq!((code, body["ready"].clone(), body["bots_not_connected"].clone()), (503, json!(false), json!(["b_bot"])));
        assert_eq!(status(readiness(&health(false, [true, true]))).0, 503, "unhealthy is never ready");
        let h = Harness::new(ListenerKind::Compat);
        assert_eq!(h.get("/readyz").0, 200, "the fake is healthy and names no bot waiting");
    }

    #[test]
    fn a_download_is_never_run_by_a_browser() {
        for (declared, served) in [
            ("image/jpeg", "image/jpeg"),
            ("video/mp4", "video/mp4"),
            ("application/pdf", "application/pdf"),
            ("text/plain; charset=utf-8", "text/plain; charset=utf-8"),
            ("text/html", "application/octet-stream"),
            ("image/svg+xml", "application/octet-stream"),
            ("application/javascript", "application/octet-stream"),
            ("application/xhtml+xml", "application/octet-stream"),
            ("", "application/octet-stream"),
        ] {
            assert_eq!(inert_type(declared), served, "{declared:?}");
        }
        let d = super::super::backend::Download {
            content_type: "text/html".into(),
            file_name: "page.html".into(),
            len: 0,
            write: Box::new(|_| Ok(())),
        };
        let r = download_response(d);
        assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
        assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
        assert_eq!(r.header("Content-Disposition"), Some("attachment; filename=\"page.html\""));
        assert_eq!(r.header("Content-Security-Policy"), Some("sandbox"));
    }

    #[test]
    fn healthz_on_both_listeners() {
        let h = Harness::new(ListenerKind::Compat);
        let (s, ct, v) = h.get("/healthz");
        assert_eq!((s, ct.as_str(), v), (200, "application/json", json!({"ok": true, "bots": 1})));
        let e = Harness::new(ListenerKind::Extensions { bot_api: "127.0.0.1:8081".parse().expect("addr") });
        assert_eq!(e.get("/healthz").0, 200);
        assert_error(
            e.get(&format!("/bot{}/getMe", token())),
            404,
            "Not Found: this is the extensions listener (/healthz, /readyz, /metrics, /outbox/given-up); the Bot API is served on http://127.0.0.1:8081",
        );
        assert_error(e.get("/nowhere"), 404, "Not Found: no such endpoint; the extensions listener serves /healthz, /readyz, /metrics and /outbox/given-up");
        let (s, ct, v) = e.get(GIVEN_UP_PATH);
        assert_eq!((s, ct.as_str(), v), (200, "application/json", json!({"bots": []})));
        assert_error(h.get(GIVEN_UP_PATH), 404, &format!("Not Found: {NO_SUCH_PATH}"));
    }

    #[test]
    fn query_string_and_body_shapes() {
        let h = Harness::new(ListenerKind::Compat);
        let (s, _, v) =
            h.get(&format!("/bot{}/getUpdates?offset=5&timeout=0&allowed_updates=%5B%22message%22%5D", token()));
        assert_eq!((s, v), (200, json!({"ok": true, "result": []})));
        let (s, _, _) = h.post(
            &format!("/bot{}/getUpdates", token()),
            Some("application/x-www-form-urlencoded"),
            b"timeout=0&offset=0",
        );
        assert_eq!(s, 200);
        let (s, _, _) = h.post(
            &format!("/bot{}/getUpdates", token()),
            Some("application/json"),
            br#"{"timeout":0,"offset":0,"allowed_updates":[]}"#,
        );
        assert_eq!(s, 200);
        // Empty POST without Content-Type (PTB's deleteWebhook).
        let (s, _, v) = h.post(&format!("/bot{}/deleteWebhook", token()), None, b"");
        assert_eq!((s, v), (200, json!({"ok": true, "result": true})));
        let polls = h.bot.polls.lock().expect("lock").clone();
        assert_eq!(polls.len(), 3);
        assert_eq!((polls[0].offset, polls[0].allowed_updates.clone()), (Some(5), Some(vec!["message".to_string()])));
        assert_eq!((polls[1].offset, polls[1].allowed_updates.clone()), (None, None));
        assert_eq!(polls[2].allowed_updates, Some(vec![]));

        let (s, _, v) = h.post(
            &format!("/bot{}/sendMessage", token()),
            Some("application/x-www-form-urlencoded"),
            b"chat_id=42&text=hello+there&reply_parameters=%7B%22message_id%22%3A+5%7D",
        );
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["result"]["text"], "hello there");
        let sent = h.bot.sent.lock().expect("lock").pop().expect("sent");
        assert_eq!((sent.chat_id, sent.reply_to_message_id), (42, Some(5)));
    }

    #[test]
    fn chunked_multipart_upload() {
        let h = Harness::new(ListenerKind::Compat);
        let boundary = "----telegrafBoundary";
        let mut body = Vec::new();
        for (name, value) in [("method", "sendMessage"), ("chat_id", "77"), ("text", "multi part")] {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            );
        }
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"photo.jpg\"\r\n\r\n")
                .as_bytes(),
        );
        body.extend(std::iter::repeat_n(0xAB, 200_000));
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        // `send` with a reader and no Content-Length uses Transfer-Encoding: chunked.
        let rq = h
            .agent
            .post(&format!("{}/bot{}/sendMessage", h.base, token()))
            .set("Content-Type", &format!("multipart/form-data; boundary={boundary}"));
        let (s, _, v) = h.result(rq.send(std::io::Cursor::new(body)));
        assert_eq!(s, 200, "{v}");
        let sent = h.bot.sent.lock().expect("lock").pop().expect("sent");
        assert_eq!((sent.chat_id, sent.text.as_str()), (77, "multi part"));
    }

    #[test]
    fn keep_alive_with_raw_sdk_shaped_requests() {
        use std::io::Write;
        use std::net::TcpStream;

        let h = Harness::new(ListenerKind::Compat);
        let mut s = TcpStream::connect(h.listener.as_ref().expect("listener").local_addr()).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).expect("timeout");
        let t = token();
        // PTB's getMe: empty body, Content-Length 0, no Content-Type.
        let ptb =
            format!("POST /bot{t}/getMe HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n");
        // aiogram's upload: multipart, chunked, text parts with their own Content-Type.
        let part = "--B\r\nContent-Disposition: form-data; name=\"chat_id\"\r\nContent-Type: text/plain; charset=\"utf-8\"\r\n\r\n5\r\n\
                    --B\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nchunked hi\r\n--B--\r\n";
        let (a, b) = part.split_at(40);
        let aio = format!(
            "POST /bot{t}/sendMessage HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\n\
             Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
            a.len(),
            b.len()
        );
        let last = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        s.write_all(format!("{ptb}{aio}{last}").as_bytes()).expect("write");
        let mut all = String::new();
        s.read_to_string(&mut all).expect("read until the server closes");
        assert_eq!(all.matches("HTTP/1.1 200").count(), 3, "{all}");
        assert!(all.contains("\"username\":\"test_bot\""), "{all}");
        assert!(all.contains("\"text\":\"chunked hi\""), "{all}");
        let sent = h.bot.sent.lock().expect("lock").pop().expect("sent");
        assert_eq!((sent.chat_id, sent.text.as_str()), (5, "chunked hi"));
    }

    #[test]
    fn shutdown_joins_workers() {
        let h = Harness::new(ListenerKind::Compat);
        assert_eq!(h.get("/healthz").0, 200);
        drop(h); // shutdown() must return; a hang fails the test run.
    }
}
