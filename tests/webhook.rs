//! Webhook mode end to end: the real platform server and gateway, users driven through the
//! client library, and a local receiver (the gateway's HTTP server on 127.0.0.1:0) that records every request
//! and answers with scripted statuses. Covers retries and ordering, a receiver that is down, a
//! gateway restart during a retry, dropping the queue, the 409 of getUpdates, the URL rules,
//! webhook replies, the durable `allowed_updates`, and a revoked credential.
//!
//! The retry delay starts at 200 ms here (BOT_GATEWAY_WEBHOOK_RETRY_START_MS) instead of 1 s;
//! every wait below is bounded by tens of seconds, never by a tight timing.

mod support;

use std::collections::VecDeque;
use std::io::Read;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bot_gateway::http;

use serde_json::{json, Value};
use support::{Gateway, World};

const SECRET_HEADER: &str = "X-Compat-Bot-Api-Secret-Token";
const WAIT: Duration = Duration::from_secs(60);

/// One request the receiver got, and the status it answered.
#[derive(Debug, Clone)]
struct Recorded {
    method: String,
    body: Value,
    content_type: Option<String>,
    secret: Option<String>,
    telegram_secret: Option<String>,
    status: u16,
}

impl Recorded {
    fn text(&self) -> &str {
        self.body["message"]["text"].as_str().unwrap_or("")
    }
    fn update_id(&self) -> i64 {
        self.body["update_id"].as_i64().expect("update_id")
    }
}

#[derive(Default)]
struct ReceiverState {
    requests: Vec<Recorded>,
    /// Statuses for the next requests, then `default_status`.
    script: VecDeque<u16>,
    default_status: u16,
    /// JSON body of 2xx answers (a webhook reply), if any.
    reply: Option<Value>,
}

/// A local webhook receiver on the gateway's own HTTP server.
struct Receiver {
    url: String,
    state: Arc<(Mutex<ReceiverState>, Condvar)>,
    server: Option<http::Server>,
}

/// Records each request and answers with the next scripted status.
struct Recording(Arc<(Mutex<ReceiverState>, Condvar)>);

impl http::Handler for Recording {
    fn handle(&self, rq: &mut http::Request<'_>) -> http::Response {
        let header = |n: &str| rq.header(n).map(str::to_string);
        let (content_type, secret, telegram_secret) =
            (header("Content-Type"), header(SECRET_HEADER), header("X-Telegram-Bot-Api-Secret-Token"));
        let method = rq.method().to_string();
        let mut body = String::new();
        rq.body().read_to_string(&mut body).expect("read body");
        let (lock, cv) = &*self.0;
        let mut s = lock.lock().expect("receiver lock");
        let status = s.script.pop_front().unwrap_or(s.default_status);
        let reply = s.reply.clone().filter(|_| (200..300).contains(&status));
        s.requests.push(Recorded {
            method,
            body: serde_json::from_str(&body).unwrap_or(Value::String(body)),
            content_type,
            secret,
            telegram_secret,
            status,
        });
        cv.notify_all();
        match reply {
            Some(v) => http::Response::with_body(status, "application/json", v.to_string().into_bytes()),
            None => http::Response::new(status),
        }
    }
}

impl Receiver {
    fn start(script: &[u16], default_status: u16) -> Receiver {
        Receiver::start_on("127.0.0.1:0", script, default_status)
    }

    fn start_on(addr: &str, script: &[u16], default_status: u16) -> Receiver {
        let state = Arc::new((
            Mutex::new(ReceiverState {
                script: script.iter().copied().collect(),
                default_status,
                ..Default::default()
            }),
            Condvar::new(),
        ));
        let limits = http::Limits { workers: 2, ..http::Limits::default() };
        let server = http::Server::start("receiver", addr, limits, Arc::new(Recording(state.clone())))
            .expect("bind receiver");
        let url = format!("http://{}/hook", server.local_addr());
        Receiver { url, state, server: Some(server) }
    }

    fn requests(&self) -> Vec<Recorded> {
        self.state.0.lock().expect("receiver lock").requests.clone()
    }

    fn set_default(&self, status: u16) {
        self.state.0.lock().expect("receiver lock").default_status = status;
    }

    fn set_reply(&self, reply: Option<Value>) {
        self.state.0.lock().expect("receiver lock").reply = reply;
    }

    /// Waits (bounded) until `done` holds for the recorded requests; returns them.
    fn wait_until(&self, what: &str, done: impl Fn(&[Recorded]) -> bool) -> Vec<Recorded> {
        let deadline = Instant::now() + WAIT;
        let (lock, cv) = &*self.state;
        let mut s = lock.lock().expect("receiver lock");
        while !done(&s.requests) {
            let now = Instant::now();
            assert!(now < deadline, "receiver: {what} did not happen; got {:#?}", s.requests);
            s = cv.wait_timeout(s, deadline - now).expect("receiver lock").0;
        }
        s.requests.clone()
    }

    /// Waits until `n` requests were answered with a 2xx; returns those, in arrival order.
    fn wait_delivered(&self, n: usize) -> Vec<Recorded> {
        let ok = |r: &&Recorded| (200..300).contains(&r.status);
        self.wait_until(&format!("{n} deliveries"), |rs| rs.iter().filter(ok).count() >= n)
            .iter()
            .filter(ok)
            .cloned()
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

fn fast_retries() {
    // Inherited by the gateway processes this test binary starts.
    std::env::set_var("BOT_GATEWAY_WEBHOOK_RETRY_START_MS", "200");
}

fn start_world(bot: &str) -> World {
    fast_retries();
    World::start(bot)
}

fn ok(gw: &Gateway, method: &str, params: Value) -> Value {
    let (status, body) = gw.call(method, params);
    assert_eq!(status, 200, "{method}: {body}");
    assert_eq!(body["ok"], true, "{method}: {body}");
    body["result"].clone()
}

fn refused(gw: &Gateway, method: &str, params: Value) -> String {
    let (status, body) = gw.call(method, params.clone());
    assert_eq!(status, 400, "{method} {params} must be refused: {body}");
    assert_eq!(body["error_code"], 400);
    body["description"].as_str().expect("description").to_string()
}

fn webhook_info(gw: &Gateway) -> Value {
    ok(gw, "getWebhookInfo", json!({}))
}

/// Waits (bounded) until getWebhookInfo satisfies `done`.
fn wait_info(gw: &Gateway, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let info = webhook_info(gw);
        if done(&info) {
            return info;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: last getWebhookInfo {info}; gateway stderr:\n{}",
            gw.proc.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn bot_health(gw: &Gateway) -> Value {
    gw.health()["bots"][0].clone()
}

fn texts(rs: &[Recorded]) -> Vec<&str> {
    rs.iter().map(Recorded::text).collect()
}

#[test]
fn failures_are_retried_and_each_update_is_delivered_once_in_order() {
    let world = start_world("wh_retry_bot");
    let gw = &world.gateway;
    let receiver = Receiver::start(&[500, 500, 500], 200);
    let secret = "s3cret_Token-42";
    assert_eq!(ok(gw, "setWebhook", json!({"url": receiver.url, "secret_token": secret})), json!(true));
    assert_eq!(bot_health(gw)["mode"], "webhook");

    let alice = world.user("alice_r");
    let bot = format!("@{}", world.bot_username());
    for t in ["one", "two", "three"] {
        alice.send_text(&bot, t).expect("send");
    }
    let delivered = receiver.wait_delivered(3);
    assert_eq!(texts(&delivered), ["one", "two", "three"]);
    let all = receiver.requests();
    assert_eq!(all.len(), 6, "three failures, then each update exactly once: {all:#?}");
    for r in &all[..4] {
        assert_eq!(r.text(), "one", "later updates wait behind the failing head");
    }
    assert_eq!(all.iter().map(|r| r.status).collect::<Vec<_>>(), [500, 500, 500, 200, 200, 200]);
    let ids: Vec<i64> = delivered.iter().map(Recorded::update_id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    for r in &all {
        assert_eq!(r.method, "POST");
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        assert_eq!(r.secret.as_deref(), Some(secret));
        assert_eq!(r.telegram_secret, None);
        assert!(!r.body.to_string().contains(secret), "the secret is only in the header");
        let keys: Vec<&String> = r.body.as_object().expect("Update object").keys().collect();
        assert_eq!(keys.len(), 2, "update_id and one payload: {keys:?}");
    }
    assert_eq!(delivered[0].body["message"]["chat"]["id"].as_u64(), Some(alice.user_id()));

    let info = wait_info(gw, "queue drained", |i| i["pending_update_count"] == 0);
    assert_eq!(info["url"], receiver.url.as_str());
    assert_eq!(info["has_custom_certificate"], false);
    assert_eq!(info["max_connections"], 1);
    assert_eq!(info["last_error_message"], "Wrong response from the webhook: 500 Internal Server Error");
    assert!(info["last_error_date"].as_i64().unwrap_or(0) > 1_600_000_000, "{info}");
    assert!(info.get("allowed_updates").is_none(), "default filter is omitted: {info}");
}

/// A world whose gateway config also has the fields of `extra`.
fn start_world_configured(bot_username: &str, extra: Value) -> World {
    fast_retries();
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = support::PlatformServer::start(&dir.path().join("platform"));
    let bot = platform.create_bot(bot_username, "Test Bot");
    let mut config = support::gateway_config(&platform.url, &dir.path().join("state"), &bot);
    for (k, v) in extra.as_object().expect("fields") {
        config[k] = v.clone();
    }
    let config_path = dir.path().join("gateway.json");
    support::write_config(&config_path, &config);
    let gateway = Gateway::start(&config_path);
    World { dir, platform, bot, gateway }
}

#[test]
fn configured_extra_headers_carry_the_secret_for_stock_handlers() {
    let world = start_world_configured(
        "wh_headers_bot",
        json!({"webhook_secret_token_headers": [SECRET_HEADER, "X-Telegram-Bot-Api-Secret-Token"]}),
    );
    let gw = &world.gateway;
    let receiver = Receiver::start(&[], 200);
    let secret = "stock-handler_Secret-7";
    ok(gw, "setWebhook", json!({"url": receiver.url, "secret_token": secret}));
    let alice = world.user("alice_h");
    alice.send_text(&format!("@{}", world.bot_username()), "hello").expect("send");
    let delivered = receiver.wait_delivered(1);
    assert_eq!(texts(&delivered), ["hello"]);
    assert_eq!(delivered[0].secret.as_deref(), Some(secret), "the spec's header still carries it");
    assert_eq!(delivered[0].telegram_secret.as_deref(), Some(secret), "and the stock handlers' header too");
    assert!(!delivered[0].body.to_string().contains(secret), "the secret is only in headers");

    // Without a secret_token, no header carries anything.
    ok(gw, "setWebhook", json!({"url": receiver.url}));
    alice.send_text(&format!("@{}", world.bot_username()), "plain").expect("send");
    let delivered = receiver.wait_delivered(2);
    assert_eq!(texts(&delivered), ["hello", "plain"]);
    assert_eq!((delivered[1].secret.as_deref(), delivered[1].telegram_secret.as_deref()), (None, None));
}

#[test]
fn a_receiver_that_is_down_gets_the_queue_when_it_comes_back() {
    let world = start_world("wh_down_bot");
    let gw = &world.gateway;
    let port = support::free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    ok(gw, "setWebhook", json!({ "url": url }));
    let alice = world.user("alice_d");
    let bot = format!("@{}", world.bot_username());
    for t in ["a", "b", "c"] {
        alice.send_text(&bot, t).expect("send");
    }
    let info = wait_info(gw, "connection refused recorded", |i| {
        i["last_error_message"] == "Connection refused" && i["pending_update_count"] == 3
    });
    assert_eq!(info["url"], url.as_str());

    let receiver = Receiver::start_on(&format!("127.0.0.1:{port}"), &[], 200);
    let delivered = receiver.wait_delivered(3);
    assert_eq!(texts(&delivered), ["a", "b", "c"]);
    wait_info(gw, "queue drained", |i| i["pending_update_count"] == 0);
    // Nothing is delivered twice once acknowledged.
    alice.send_text(&bot, "d").expect("send");
    let delivered = receiver.wait_delivered(4);
    assert_eq!(texts(&delivered), ["a", "b", "c", "d"]);
    assert_eq!(receiver.requests().len(), 4);
}

#[test]
fn a_restart_during_a_retry_resumes_delivery_where_it_stopped() {
    let mut world = start_world("wh_restart_bot");
    let receiver = Receiver::start(&[], 503);
    let secret = "restart-secret";
    ok(&world.gateway, "setWebhook", json!({"url": receiver.url, "secret_token": secret}));
    let bob = world.user("bob_w");
    let bot = format!("@{}", world.bot_username());
    for t in ["x", "y"] {
        bob.send_text(&bot, t).expect("send");
    }
    receiver.wait_until("two failed attempts", |rs| rs.len() >= 2);
    wait_info(&world.gateway, "both queued", |i| i["pending_update_count"] == 2);

    world.gateway.proc.kill();
    receiver.set_default(200);
    let path = world.gateway.config_path.clone();
    world.gateway = Gateway::start(&path);

    let delivered = receiver.wait_delivered(2);
    assert_eq!(texts(&delivered), ["x", "y"], "resumed at the head, in order, each once");
    assert!(delivered.iter().all(|r| r.secret.as_deref() == Some(secret)), "the secret survived the restart");
    let info = wait_info(&world.gateway, "queue drained", |i| i["pending_update_count"] == 0);
    assert_eq!(info["url"], receiver.url.as_str(), "the configuration survived the restart");
    assert_eq!(
        info["last_error_message"], "Wrong response from the webhook: 503 Service Unavailable",
        "the last error survived the restart"
    );
    assert_eq!(bot_health(&world.gateway)["mode"], "webhook");
    let all = receiver.requests();
    assert!(all.iter().filter(|r| r.text() == "y").all(|r| r.status == 200), "y never went before x");
}

#[test]
fn delete_webhook_keeps_the_queue_in_order_or_drops_it() {
    let world = start_world("wh_drop_bot");
    let gw = &world.gateway;
    let receiver = Receiver::start(&[], 500);
    ok(gw, "setWebhook", json!({ "url": receiver.url }));
    let carol = world.user("carol_w");
    let bot = format!("@{}", world.bot_username());
    for t in ["first", "second"] {
        carol.send_text(&bot, t).expect("send");
    }
    wait_info(gw, "queued", |i| i["pending_update_count"] == 2);

    // Without drop_pending_updates: polling serves the same queue in the same order.
    assert_eq!(ok(gw, "deleteWebhook", json!({})), json!(true));
    assert_eq!(bot_health(gw)["mode"], "polling");
    let info = webhook_info(gw);
    assert_eq!((info["url"].clone(), info["pending_update_count"].clone()), (json!(""), json!(2)));
    assert!(info.get("last_error_message").is_none() && info.get("max_connections").is_none(), "{info}");
    let updates = ok(gw, "getUpdates", json!({"timeout": 0}));
    let got: Vec<&str> =
        updates.as_array().expect("array").iter().map(|u| u["message"]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(got, ["first", "second"]);

    // setWebhook keeps the queue; setWebhook with drop_pending_updates clears it.
    ok(gw, "setWebhook", json!({ "url": receiver.url }));
    assert_eq!(webhook_info(gw)["pending_update_count"], 2);
    ok(gw, "setWebhook", json!({ "url": receiver.url, "drop_pending_updates": true }));
    assert_eq!(webhook_info(gw)["pending_update_count"], 0);

    // deleteWebhook with drop_pending_updates clears the queue together with the mode change.
    carol.send_text(&bot, "third").expect("send");
    wait_info(gw, "queued again", |i| i["pending_update_count"] == 1);
    ok(gw, "deleteWebhook", json!({"drop_pending_updates": true}));
    let info = webhook_info(gw);
    assert_eq!((info["url"].clone(), info["pending_update_count"].clone()), (json!(""), json!(0)));
    assert_eq!(ok(gw, "getUpdates", json!({"timeout": 0})), json!([]));
    assert_eq!(bot_health(gw)["queue_depth"], 0);
    // deleteWebhook in polling mode is accepted.
    assert_eq!(ok(gw, "deleteWebhook", json!({"drop_pending_updates": false})), json!(true));
}

#[test]
fn get_updates_is_409_while_a_webhook_is_set_and_touches_nothing() {
    let world = start_world("wh_conflict_bot");
    let gw = &world.gateway;
    let receiver = Receiver::start(&[], 500);

    // A waiting long poll ends with 409 when a webhook is set.
    let url = format!("{}/bot{}/getUpdates", gw.base, gw.token);
    let poll = std::thread::spawn(move || support::call_url(&url, json!({"timeout": 30})));
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    ok(gw, "setWebhook", json!({ "url": receiver.url }));
    let (status, body) = poll.join().expect("poll");
    assert_eq!(status, 409, "{body}");
    assert!(started.elapsed() < Duration::from_secs(20), "the poll ended at once, not at its timeout");

    let dave = world.user("dave_w");
    let bot = format!("@{}", world.bot_username());
    for t in ["p", "q"] {
        dave.send_text(&bot, t).expect("send");
    }
    wait_info(gw, "queued", |i| i["pending_update_count"] == 2);
    let (status, body) =
        gw.call("getUpdates", json!({"offset": 1_000_000, "allowed_updates": ["callback_query"], "timeout": 0}));
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body,
        json!({"ok": false, "error_code": 409,
               "description": "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})
    );
    // Any input at all: the mode is decided before the parameters or the body are read.
    for bad in [json!({"limit": 0}), json!({"timeout": -1}), json!({"offset": "abc"}), json!({"allowed_updates": "message"})] {
        let (status, body) = gw.call("getUpdates", bad.clone());
        assert_eq!(status, 409, "{bad} in webhook mode: {body}");
    }
    let raw = ureq::post(&format!("{}/bot{}/getUpdates", gw.base, gw.token))
        .set("Content-Type", "text/plain")
        .send_string("not a Bot API body");
    assert!(matches!(raw, Err(ureq::Error::Status(409, _))), "an unreadable body in webhook mode is 409 too");
    let info = webhook_info(gw);
    assert_eq!(info["pending_update_count"], 2, "no acknowledgement by offset: {info}");
    assert!(info.get("allowed_updates").is_none(), "no filter change: {info}");

    ok(gw, "deleteWebhook", json!({}));
    let updates = ok(gw, "getUpdates", json!({"timeout": 0}));
    let got: Vec<&str> =
        updates.as_array().expect("array").iter().map(|u| u["message"]["text"].as_str().unwrap_or("")).collect();
    assert_eq!(got, ["p", "q"], "the queue and the filter are as they were");
}

#[test]
fn webhook_url_and_parameter_rules() {
    let world = start_world("wh_rules_bot");
    let gw = &world.gateway;
    for url in [
        "https://example.com/hook",
        "http://localhost:8443/hook",
        "http://127.0.0.2:9/hook",
        "http://[::1]:8443/hook",
        "http://127.0.0.1:9/hook",
    ] {
        assert_eq!(ok(gw, "setWebhook", json!({ "url": url })), json!(true), "{url}");
        assert_eq!(webhook_info(gw)["url"], url);
    }
    let current = "http://127.0.0.1:9/hook";
    for (params, why) in [
        (json!({"url": "http://example.com/hook"}), "HTTPS URL must be provided"),
        (json!({"url": "ftp://example.com/hook"}), "unsupported URL scheme"),
        (json!({"url": "not a url"}), "not a valid absolute URL"),
        (
            json!({"url": "https://example.com/", "certificate": "-----BEGIN CERTIFICATE-----"}),
            "certificate is not supported",
        ),
        (json!({"url": "https://example.com/", "ip_address": "1.2.3.4"}), "ip_address is not supported"),
        (json!({"url": "https://example.com/", "max_connections": 0}), "max_connections must be between 1 and 100"),
        (json!({"url": "https://example.com/", "max_connections": 101}), "max_connections must be between 1 and 100"),
        (json!({"url": "https://example.com/", "secret_token": "bad token!"}), "secret_token"),
        (json!({"url": "https://example.com/", "secret_token": "x".repeat(257)}), "secret_token"),
        (json!({"url": "https://example.com/", "allowed_updates": ["message", ""]}), "allowed_updates names must be 1 to 64 bytes"),
        (json!({}), "url is required"),
    ] {
        let d = refused(gw, "setWebhook", params.clone());
        assert!(d.starts_with("Bad Request: ") && d.contains(why), "{params}: {d}");
    }
    assert_eq!(webhook_info(gw)["url"], current, "a refused setWebhook changes nothing");

    // PTB's shape: a form body with max_connections=40, reported as 1.
    let resp = ureq::post(&format!("{}/bot{}/setWebhook", gw.base, gw.token))
        .send_form(&[
            ("url", "http://localhost:8443/ptb"),
            ("max_connections", "40"),
            ("allowed_updates", "[\"message\",\"edited_message\"]"),
        ])
        .expect("form setWebhook");
    assert_eq!(resp.status(), 200);
    let info = webhook_info(gw);
    assert_eq!(info["url"], "http://localhost:8443/ptb");
    assert_eq!(info["max_connections"], 1);
    assert_eq!(info["allowed_updates"], json!(["message", "edited_message"]));
    let secret = "A".repeat(256);
    ok(gw, "setWebhook", json!({"url": "http://localhost:8443/ptb", "secret_token": secret, "max_connections": 100}));

    // An empty url deletes the webhook.
    ok(gw, "setWebhook", json!({"url": ""}));
    let info = webhook_info(gw);
    assert_eq!(info["url"], "");
    assert_eq!(bot_health(gw)["mode"], "polling");
    assert_eq!(ok(gw, "getUpdates", json!({"timeout": 0})), json!([]));
}

#[test]
fn a_method_in_the_webhook_answer_is_executed() {
    let world = start_world("wh_reply_bot");
    let gw = &world.gateway;
    let erin = world.user("erin_w");
    let receiver = Receiver::start(&[], 200);
    // First an unknown method: logged, and delivery goes on.
    receiver.set_reply(Some(json!({"method": "sendPigeon", "chat_id": erin.user_id()})));
    ok(gw, "setWebhook", json!({ "url": receiver.url }));
    let bot = format!("@{}", world.bot_username());
    erin.send_text(&bot, "first").expect("send");
    receiver.wait_delivered(1);
    receiver.set_reply(Some(
        json!({"method": "sendMessage", "chat_id": erin.user_id(), "text": "answered via the webhook reply"}),
    ));
    erin.send_text(&bot, "second").expect("send");
    let delivered = receiver.wait_delivered(2);
    assert_eq!(texts(&delivered), ["first", "second"]);
    let got = erin.receive(Duration::from_secs(30), 1).expect("receive");
    assert_eq!(got.len(), 1, "the reply reached the user");
    assert_eq!(got[0].text, "answered via the webhook reply");
    assert!(got[0].sender.is_bot);
    // An invalid call in a reply (no text) is logged, and delivery still goes on.
    receiver.set_reply(Some(json!({"method": "sendMessage", "chat_id": erin.user_id()})));
    erin.send_text(&bot, "third").expect("send");
    assert_eq!(texts(&receiver.wait_delivered(3)), ["first", "second", "third"]);
    wait_info(gw, "queue drained", |i| i["pending_update_count"] == 0);
}

/// The webhook's threads run only while they have work (docs/operations.md, "Threads"): once
/// the queue is delivered and the replies run, `wh/1` and `whr/1` end after their idle wait
/// with the webhook still set, and the next update starts both again: it is delivered, in
/// order, and its reply runs.
#[cfg(target_os = "linux")]
#[test]
fn the_webhook_threads_end_when_idle_and_the_next_update_starts_them_again() {
    let world = start_world("wh_idle_bot");
    let gw = &world.gateway;
    let pid = gw.proc.child.id();
    let fay = world.user("fay_w");
    let receiver = Receiver::start(&[], 200);
    let reply = |text: &str| Some(json!({"method": "sendMessage", "chat_id": fay.user_id(), "text": text}));
    receiver.set_reply(reply("reply one"));
    ok(gw, "setWebhook", json!({ "url": receiver.url }));
    let bot = format!("@{}", world.bot_username());
    fay.send_text(&bot, "one").expect("send");
    receiver.wait_delivered(1);
    assert_eq!(fay.receive(Duration::from_secs(30), 1).expect("receive")[0].text, "reply one");
    let webhook_threads = || support::thread_names(pid).into_iter().filter(|n| n == "wh/1" || n == "whr/1").collect::<Vec<_>>();
    let deadline = Instant::now() + WAIT;
    while !webhook_threads().is_empty() {
        assert!(Instant::now() < deadline, "webhook threads still there when idle: {:?}", webhook_threads());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(webhook_info(gw)["url"], receiver.url.as_str(), "the webhook is still set");
    receiver.set_reply(reply("reply two"));
    fay.send_text(&bot, "two").expect("send");
    assert_eq!(texts(&receiver.wait_delivered(2)), ["one", "two"]);
    assert_eq!(fay.receive(Duration::from_secs(30), 1).expect("receive")[0].text, "reply two", "whr/1 came back too");
    wait_info(gw, "queue drained", |i| i["pending_update_count"] == 0);
}

/// Probes until the gateway has imported a message from `user_id` (sendMessage to a private
/// chat works only after that chat produced an update, even a filtered one).
fn wait_chat_known(gw: &Gateway, user_id: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, body) = gw.call("sendMessage", json!({"chat_id": user_id, "text": "probe"}));
        if status == 200 {
            return;
        }
        assert!(body["description"].as_str().unwrap_or("").contains("chat not found"), "{body}");
        assert!(Instant::now() < deadline, "the message was never imported");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn allowed_updates_persist_across_a_restart() {
    let mut world = start_world("wh_filter_bot");
    let receiver = Receiver::start(&[], 200);
    ok(&world.gateway, "setWebhook", json!({"url": receiver.url, "allowed_updates": ["callback_query"]}));
    assert_eq!(webhook_info(&world.gateway)["allowed_updates"], json!(["callback_query"]));
    world.restart_gateway();
    let gw = &world.gateway;
    let info = webhook_info(gw);
    assert_eq!(info["allowed_updates"], json!(["callback_query"]), "{info}");
    assert_eq!(info["url"], receiver.url.as_str());

    let frank = world.user("frank_w");
    let bot = format!("@{}", world.bot_username());
    frank.send_text(&bot, "filtered out").expect("send");
    wait_chat_known(gw, frank.user_id());
    assert_eq!(webhook_info(gw)["pending_update_count"], 0);
    assert!(receiver.requests().is_empty(), "a message is not in the stored filter");

    // Absent allowed_updates keeps the stored filter; [] restores the default set.
    ok(gw, "setWebhook", json!({"url": receiver.url}));
    assert_eq!(webhook_info(gw)["allowed_updates"], json!(["callback_query"]));
    ok(gw, "setWebhook", json!({"url": receiver.url, "allowed_updates": []}));
    assert!(webhook_info(gw).get("allowed_updates").is_none());
    frank.send_text(&bot, "allowed").expect("send");
    assert_eq!(texts(&receiver.wait_delivered(1)), ["allowed"]);

    // The filter getUpdates stores is the same durable value.
    ok(gw, "deleteWebhook", json!({}));
    ok(gw, "getUpdates", json!({"allowed_updates": ["message", "message_reaction"], "timeout": 0}));
    world.restart_gateway();
    assert_eq!(webhook_info(&world.gateway)["allowed_updates"], json!(["message", "message_reaction"]));
}

/// A new filter applies to updates created after it; what is already queued is still
/// delivered (the audit found queued messages stranded by a later `allowed_updates`).
#[test]
fn a_new_filter_does_not_strand_queued_updates() {
    let world = start_world("wh_strand_bot");
    let gw = &world.gateway;
    let heidi = world.user("heidi_w");
    let bot = format!("@{}", world.bot_username());
    for t in ["before 1", "before 2"] {
        heidi.send_text(&bot, t).expect("send");
    }
    wait_info(gw, "queued", |i| i["pending_update_count"] == 2);
    let receiver = Receiver::start(&[], 200);
    ok(gw, "setWebhook", json!({"url": receiver.url, "allowed_updates": ["callback_query"]}));
    assert_eq!(texts(&receiver.wait_delivered(2)), ["before 1", "before 2"]);
    wait_info(gw, "acknowledged", |i| i["pending_update_count"] == 0);
    heidi.send_text(&bot, "after").expect("send");
    // The bot's inbox is one ordered stream: once a later sender's chat is known, "after" was
    // imported too.
    let ivan = world.user("ivan_w");
    ivan.send_text(&bot, "later").expect("send");
    wait_chat_known(gw, ivan.user_id());
    assert_eq!(webhook_info(gw)["pending_update_count"], 0);
    assert_eq!(receiver.requests().len(), 2, "a message created under the new filter is not queued");
}

/// A receiver that takes the request and holds it until told to hang up without answering.
struct Hanging {
    url: String,
    hang_up: std::sync::mpsc::Sender<()>,
    got_request: std::sync::mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Hanging {
    fn start() -> Hanging {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/old", listener.local_addr().expect("addr"));
        let (hang_up, told) = std::sync::mpsc::channel();
        let (request, got_request) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().expect("the gateway connects");
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = request.send(());
            let _ = told.recv_timeout(WAIT); // then drop the connection: no answer at all
        });
        Hanging { url, hang_up, got_request, thread }
    }

    /// Waits (bounded) until the gateway's request is in flight here.
    fn wait_request(&self) {
        self.got_request.recv_timeout(WAIT).expect("the gateway posts to the hanging receiver");
    }

    fn hang_up(self) {
        let _ = self.hang_up.send(());
        self.thread.join().expect("hanging receiver");
    }
}

/// An attempt still in flight to the old URL when the configuration changes must not leave
/// its failure on the new configuration (or in polling mode); its update goes to the new URL.
#[test]
fn a_failure_of_the_replaced_url_is_not_reported_for_the_new_one() {
    let world = start_world("wh_replace_bot");
    let gw = &world.gateway;
    let old = Hanging::start();
    ok(gw, "setWebhook", json!({ "url": old.url }));
    let judy = world.user("judy_w");
    let bot = format!("@{}", world.bot_username());
    judy.send_text(&bot, "in flight").expect("send");
    old.wait_request();
    let new = Receiver::start(&[], 200);
    ok(gw, "setWebhook", json!({ "url": new.url }));
    old.hang_up();
    assert_eq!(texts(&new.wait_delivered(1)), ["in flight"]);
    let info = wait_info(gw, "acknowledged", |i| i["pending_update_count"] == 0);
    assert!(info.get("last_error_message").is_none(), "the old URL's failure is not the new one's: {info}");

    // The same with deleteWebhook: the failure does not show up in polling mode.
    let old = Hanging::start();
    ok(gw, "setWebhook", json!({ "url": old.url }));
    judy.send_text(&bot, "in flight again").expect("send");
    old.wait_request();
    ok(gw, "deleteWebhook", json!({}));
    old.hang_up();
    let updates = gw.poll_until(0, 1);
    assert_eq!(updates[0]["message"]["text"], "in flight again");
    let info = webhook_info(gw);
    assert!(info.get("last_error_message").is_none(), "{info}");
}

#[test]
fn a_revoked_credential_stops_delivery_and_keeps_the_queue() {
    let world = start_world("wh_revoked_bot");
    let gw = &world.gateway;
    let receiver = Receiver::start(&[], 500);
    ok(gw, "setWebhook", json!({ "url": receiver.url }));
    let grace = world.user("grace_w");
    let bot = format!("@{}", world.bot_username());
    for t in ["queued 1", "queued 2"] {
        grace.send_text(&bot, t).expect("send");
    }
    receiver.wait_until("a failed attempt", |rs| !rs.is_empty());
    wait_info(gw, "queued", |i| i["pending_update_count"] == 2);

    // Disable the bot on the platform (revokes its token), as /disable does.
    let platform = bot_gateway::platform::store::Store::open(&world.platform.data_dir).expect("open platform store");
    let bot_id = world.bot["compat_user_id"].as_u64().expect("bot id");
    platform.set_bot_status(bot_id, bot_gateway::platform::store::AccountStatus::Disabled).expect("disable");

    let deadline = Instant::now() + WAIT;
    while bot_health(gw)["revoked"] != true {
        assert!(Instant::now() < deadline, "the gateway never noticed; stderr:\n{}", gw.proc.stderr_text());
        std::thread::sleep(Duration::from_millis(100));
    }
    // Let an attempt that was already past its check finish, then make the receiver accept.
    std::thread::sleep(Duration::from_secs(1));
    receiver.set_default(200);
    let before = receiver.requests().len();
    let _ = grace.send_text(&bot, "after revocation");
    // A negative check has to wait: several retry periods (the delay starts at 200 ms).
    std::thread::sleep(Duration::from_secs(6));
    let after = receiver.requests();
    assert_eq!(after.len(), before, "nothing was sent after the revocation: {:#?}", &after[before..]);
    assert!(after.iter().all(|r| r.status == 500));
    #[cfg(target_os = "linux")]
    {
        let threads = support::thread_names(gw.proc.child.id());
        assert!(!threads.iter().any(|n| n == "wh/1"), "a revoked bot keeps no webhook thread: {threads:?}");
    }
    let health = bot_health(gw);
    assert!(health["queue_depth"].as_i64().unwrap_or(0) >= 2, "the queue is kept: {health}");
    let (status, _) = gw.call("getWebhookInfo", json!({}));
    assert_eq!(status, 401, "a revoked bot's calls answer 401");
}
