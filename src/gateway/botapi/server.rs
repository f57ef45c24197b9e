//! The HTTP listeners (tiny_http): routing, authentication by the token in the path, body
//! decoding and the response envelope, on a pool of named worker threads.
//!
//! Compat listener (8081): `/bot<token>/<method>` (GET or POST), `/file/bot<token>/<path>`,
//! `/healthz`. Extensions listener (8082): `/healthz` only for now. Everything else is a 404 in
//! the JSON error envelope.
//!
//! Threads: each listener has `workers` threads named `<name>-<i>` that share one tiny_http
//! server and block in `recv()`. A getUpdates long poll holds its worker for up to 50 s, so the
//! compat listener needs more workers than there are bots polling at once
//! ([`DEFAULT_COMPAT_WORKERS`]). tiny_http reads requests on its own connection threads and keeps
//! HTTP/1.1 connections alive between requests.
//!
//! Logging: a request is logged at debug level as method, path with the token secret redacted
//! (`/bot123:<redacted>/getMe`) and without the query string (it may carry message text), status
//! and duration. Bodies and secrets are never logged.

use std::io;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Instant;

use super::methods;
use super::request::{self, percent_decode_path};
use super::response::{self, header, HttpResponse};
use super::token::{parse_token, redact_path};
use super::{ApiError, Backend, BotApi};

/// Workers of the compat listener: enough for several concurrent 50 s long polls plus ordinary
/// calls from the same bots.
pub const DEFAULT_COMPAT_WORKERS: usize = 16;
/// Workers of the extensions listener (health checks only so far).
pub const DEFAULT_EXTENSIONS_WORKERS: usize = 4;

/// Which routes a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// The Bot API: `/bot<token>/<method>`, `/file/bot<token>/<path>`, `/healthz`.
    Compat,
    /// Extensions: `/healthz`.
    Extensions,
}

/// A running listener. [`Listener::shutdown`] (or dropping it) stops accepting, wakes every
/// idle worker and joins them; a worker busy with a request finishes it first (a long poll ends
/// when its timeout passes or the runtime wakes it).
pub struct Listener {
    name: String,
    local_addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    stopping: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

impl Listener {
    /// Binds `addr` (port 0 picks a free port; see [`Listener::local_addr`]) and starts
    /// `workers` threads named `<name>-0`, `<name>-1`, ... (at least one).
    pub fn start(
        name: &str,
        addr: &str,
        backend: Arc<dyn Backend>,
        kind: ListenerKind,
        workers: usize,
    ) -> io::Result<Listener> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| io::Error::other(format!("{name}: cannot listen on {addr}: {e}")))?;
        let local_addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| io::Error::other(format!("{name}: {addr} is not an IP address")))?;
        let mut listener = Listener {
            name: name.to_string(),
            local_addr,
            server: Arc::new(server),
            stopping: Arc::new(AtomicBool::new(false)),
            workers: Vec::new(),
        };
        for i in 0..workers.max(1) {
            let server = Arc::clone(&listener.server);
            let stopping = Arc::clone(&listener.stopping);
            let backend = Arc::clone(&backend);
            let label = name.to_string();
            let spawned = thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || worker_loop(&label, &server, &stopping, &*backend, kind));
            match spawned {
                Ok(handle) => listener.workers.push(handle),
                // Dropping `listener` stops the workers already started.
                Err(e) => return Err(io::Error::new(e.kind(), format!("{name}: cannot start worker {i}: {e}"))),
            }
        }
        log::info!("{name}: listening on http://{local_addr} with {} workers", listener.workers.len());
        Ok(listener)
    }

    /// The bound address (the real port when started with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops the listener and joins its workers.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.workers.is_empty() {
            return;
        }
        self.stopping.store(true, Ordering::SeqCst);
        // Each unblock() wakes exactly one thread blocked in recv().
        for _ in 0..self.workers.len() {
            self.server.unblock();
        }
        for handle in self.workers.drain(..) {
            if handle.join().is_err() {
                log::error!("{}: a worker thread panicked", self.name);
            }
        }
        log::info!("{}: stopped", self.name);
        // The tiny_http accept thread ends when the last Arc<Server> (ours) is dropped.
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

fn worker_loop(
    name: &str,
    server: &tiny_http::Server,
    stopping: &AtomicBool,
    backend: &dyn Backend,
    kind: ListenerKind,
) {
    loop {
        match server.recv() {
            Ok(rq) => handle(name, rq, backend, kind),
            Err(_) if stopping.load(Ordering::SeqCst) => return,
            // tiny_http reports an accept failure once and stops accepting; keep serving what is
            // queued and wait for shutdown rather than spinning.
            Err(e) => log::error!("{name}: accepting connections failed: {e}"),
        }
    }
}

fn handle(name: &str, mut rq: tiny_http::Request, backend: &dyn Backend, kind: ListenerKind) {
    let started = Instant::now();
    let method = rq.method().clone();
    let logged_path = redact_path(rq.url());
    let response = match catch_unwind(AssertUnwindSafe(|| route(&mut rq, backend, kind))) {
        Ok(r) => r,
        Err(_) => {
            log::error!("{name}: handler panicked on {method} {logged_path}");
            response::error(&ApiError::internal("the request handler failed"))
                .with_header(header("Connection", "close"))
        }
    };
    let status = response.status_code().0;
    if let Err(e) = rq.respond(response) {
        log::debug!("{name}: {method} {logged_path}: client went away before the response: {e}");
    }
    log::debug!("{name}: {method} {logged_path} -> {status} ({} ms)", started.elapsed().as_millis());
}

/// Routes one request to its response.
fn route(rq: &mut tiny_http::Request, backend: &dyn Backend, kind: ListenerKind) -> HttpResponse {
    let url = rq.url().to_string();
    let (path, query) = match url.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (url.as_str(), None),
    };
    let verb = rq.method().clone();
    let is_get = matches!(verb, tiny_http::Method::Get | tiny_http::Method::Head);
    let has_body = rq.body_length().map_or_else(|| has_header(rq, "Transfer-Encoding"), |n| n > 0);
    // Any answer that leaves a body unread asks the client to close the connection, so unread
    // bytes are never taken for the next request.
    let unread = |r: HttpResponse| if has_body { r.with_header(header("Connection", "close")) } else { r };

    if path == "/healthz" {
        if !is_get {
            return unread(response::error(&method_not_allowed("GET")));
        }
        return unread(response::json_response(200, &backend.health()));
    }
    if kind == ListenerKind::Extensions {
        return unread(response::error(&ApiError::not_found("no such endpoint")));
    }
    if let Some(rest) = path.strip_prefix("/file/bot") {
        let (token, _file_path) = split_token(rest);
        if !is_get {
            return unread(response::error(&method_not_allowed("GET")));
        }
        return unread(match authenticate(backend, token) {
            Ok(_) => response::error(&ApiError::not_found("file downloads are not available yet")),
            Err(e) => response::error(&e),
        });
    }
    let Some(rest) = path.strip_prefix("/bot") else {
        return unread(response::error(&ApiError::not_found("no such endpoint")));
    };
    if !matches!(verb, tiny_http::Method::Get | tiny_http::Method::Post) {
        return unread(response::error(&method_not_allowed("GET or POST")));
    }
    let (token, tail) = split_token(rest);
    let bot = match authenticate(backend, token) {
        Ok(bot) => bot,
        Err(e) => return unread(response::error(&e)),
    };
    // PTB with a base URL ending in "/" sends `/bot<token>//getMe` (SDK-COMPAT §1).
    let method_name = match percent_decode_path(tail.trim_matches('/')) {
        Some(m) if !m.is_empty() => m,
        _ => return unread(response::error(&ApiError::not_found("method name is missing"))),
    };
    let method = match methods::preflight(&*bot, &method_name) {
        Ok(m) => m,
        Err(e) => return unread(response::error(&e)),
    };
    let content_type = header_value(rq, "Content-Type");
    let content_length = rq.body_length();
    let params = match request::decode(query, content_type.as_deref(), content_length, rq.as_reader()) {
        Ok(p) => p,
        Err(e) => return unread(response::error(&e)),
    };
    match methods::call(&*bot, method, &params) {
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

/// 401 unless `raw` is a well-formed token of a configured bot.
fn authenticate(backend: &dyn Backend, raw: &str) -> Result<Arc<dyn BotApi>, ApiError> {
    let token = percent_decode_path(raw).ok_or_else(ApiError::unauthorized)?;
    if parse_token(&token).is_none() {
        return Err(ApiError::unauthorized());
    }
    backend.bot(&token).ok_or_else(ApiError::unauthorized)
}

fn method_not_allowed(allowed: &str) -> ApiError {
    ApiError::new(405, format!("Method Not Allowed: use {allowed}"))
}

fn header_value(rq: &tiny_http::Request, name: &'static str) -> Option<String> {
    rq.headers().iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str().to_string())
}

fn has_header(rq: &tiny_http::Request, name: &'static str) -> bool {
    rq.headers().iter().any(|h| h.field.equiv(name))
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::sync::Mutex;

    use serde_json::{json, Value};

    use super::*;
    use crate::gateway::botapi::{GetUpdates, SendMessage};

    const SECRET: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    fn token() -> String {
        format!("123456:{SECRET}")
    }

    #[derive(Default)]
    struct FakeBot {
        sent: Mutex<Vec<SendMessage>>,
        polls: Mutex<Vec<GetUpdates>>,
    }

    impl BotApi for FakeBot {
        fn get_me(&self) -> Value {
            json!({"id": 123456, "is_bot": true, "first_name": "Test", "username": "test_bot"})
        }
        fn get_updates(&self, req: GetUpdates) -> Result<Vec<Value>, ApiError> {
            self.polls.lock().expect("lock").push(req);
            Ok(vec![])
        }
        fn send_message(&self, req: SendMessage) -> Result<Value, ApiError> {
            let v =
                json!({"message_id": 1, "date": 1, "chat": {"id": req.chat_id, "type": "private"}, "text": req.text});
            self.sent.lock().expect("lock").push(req);
            Ok(v)
        }
        fn delete_webhook(&self, _drop: bool) -> Result<(), ApiError> {
            Ok(())
        }
        fn is_revoked(&self) -> bool {
            false
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
            let listener = Listener::start("test-http", "127.0.0.1:0", backend, kind, 2).expect("start");
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
        assert_error(h.get(&format!("/bot{}/", token())), 404, "Not Found: method name is missing");
        assert_error(h.get("/bot123456:abc/getMe"), 401, "Unauthorized");
        assert_error(h.get(&format!("/bot{SECRET}/getMe")), 401, "Unauthorized");
        assert_error(h.get(&format!("/bot123456:{SECRET}0/getMe")), 401, "Unauthorized");
        let wrong = format!("/bot654321:{SECRET}/getMe");
        assert_error(h.get(&wrong), 401, "Unauthorized");
        assert_error(h.post(&wrong, Some("application/json"), b"{}"), 401, "Unauthorized");
        assert_error(h.get("/nowhere"), 404, "Not Found: no such endpoint");
        assert_error(
            h.get(&format!("/file/bot{}/photos/a.jpg", token())),
            404,
            "Not Found: file downloads are not available yet",
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
    fn healthz_on_both_listeners() {
        let h = Harness::new(ListenerKind::Compat);
        let (s, ct, v) = h.get("/healthz");
        assert_eq!((s, ct.as_str(), v), (200, "application/json", json!({"ok": true, "bots": 1})));
        let e = Harness::new(ListenerKind::Extensions);
        assert_eq!(e.get("/healthz").0, 200);
        assert_error(e.get(&format!("/bot{}/getMe", token())), 404, "Not Found: no such endpoint");
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
