//! Nothing answered with an error and then sent (issue 21): the real platform server stalls
//! (SIGSTOP) for longer than a sending call's wait while a bot sends and retries as SDKs do, on
//! 429 after `retry_after`. Every answer must be the truth: a message answered with its id
//! reaches the user once, a message answered with an error never does, and the user gets each
//! text exactly once however the bot retried. And a gateway stopped while its message is with
//! the stalled platform ends that call without an answer and sends the message once after its
//! restart.
//!
//! `send_wait_seconds` is 2 here instead of 25; every other wait is bounded by tens of seconds
//! and nothing asserts how long anything took.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{call_url, gateway_config, write_config, Gateway, PlatformServer};

const SEND_WAIT_SECONDS: u64 = 2;

/// Stops the platform server's process (SIGSTOP) until dropped (SIGCONT): its sockets stay
/// open, so calls to it hang rather than fail, as with a platform that is slow.
struct Stalled(u32);

impl Stalled {
    fn new(platform: &PlatformServer) -> Stalled {
        let pid = platform.proc.child.id();
        signal(pid, libc::SIGSTOP);
        Stalled(pid)
    }
}

impl Drop for Stalled {
    fn drop(&mut self) {
        signal(self.0, libc::SIGCONT);
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on the child process this test started.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// What a bot does: sendMessage, and on 429 wait `retry_after` and send again; any other answer
/// ends it. Every answer goes to `answers` as it comes.
fn send_retrying(url: String, chat_id: u64, text: &'static str, answers: mpsc::Sender<(&'static str, u16, Value)>) {
    for _ in 0..30 {
        let (status, body) = call_url(&url, json!({"chat_id": chat_id, "text": text}));
        let _ = answers.send((text, status, body.clone()));
        if status != 429 {
            return;
        }
        let secs = body["parameters"]["retry_after"].as_u64().expect("a 429 says when to retry");
        thread::sleep(Duration::from_secs(secs));
    }
    panic!("{text}: still refused after 30 tries");
}

fn metric(gw: &Gateway, name: &str) -> f64 {
    let text = ureq::get(&format!("{}/metrics", gw.ext_base)).call().expect("metrics").into_string().expect("text");
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix("{bot=\"@stall_bot\"} ")))
        .unwrap_or_else(|| panic!("{name} not in /metrics"))
        .parse()
        .expect("number")
}

#[test]
fn a_stalled_platform_and_a_retrying_bot_deliver_each_message_once() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let bot = platform.create_bot("stall_bot", "Stall Bot");
    let mut config = gateway_config(&platform.url, &dir.path().join("state"), &bot);
    config["send_wait_seconds"] = json!(SEND_WAIT_SECONDS);
    let config_path = dir.path().join("gateway.json");
    write_config(&config_path, &config);
    let gw = Gateway::start(&config_path);
    let alice = bot_gateway::client::Profile::register(&platform.url, dir.path().join("alice"), "alice_st", "Alice")
        .expect("register alice");
    alice.send_text("@stall_bot", "hello").expect("send hello");
    let updates = gw.poll_until(0, 1);
    let chat_id = updates[0]["message"]["chat"]["id"].as_u64().expect("chat id");
    assert_eq!(chat_id, alice.user_id());
    let url = format!("{}/bot{}/sendMessage", gw.base, gw.token);

    let (tx, answers) = mpsc::channel();
    let stalled = Stalled::new(&platform);
    let first = {
        let (url, tx) = (url.clone(), tx.clone());
        thread::Builder::new().name("bot-first".into()).spawn(move || send_retrying(url, chat_id, "first", tx)).expect("spawn")
    };
    // The outbox hands "first" to the stalled platform at once; "second" comes while it is
    // there unanswered, so it is not handed, and its wait ends with it withdrawn.
    thread::sleep(Duration::from_secs(1));
    let second = {
        let (url, tx) = (url.clone(), tx.clone());
        thread::Builder::new().name("bot-second".into()).spawn(move || send_retrying(url, chat_id, "second", tx)).expect("spawn")
    };
    drop(tx);
    let mut all: Vec<(&str, u16, Value)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !all.iter().any(|(text, _, _)| *text == "second") {
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = answers.recv_timeout(left).unwrap_or_else(|_| panic!("no answer to \"second\" while stalled; gateway stderr:\n{}", gw.proc.stderr_text()));
        all.push(answer);
    }
    let (_, status, body) = all.iter().find(|(text, _, _)| *text == "second").expect("second").clone();
    assert_eq!(status, 429, "a message the platform was not handed is withdrawn: {body}");
    assert_eq!(body["error_code"], 429);
    assert_eq!(body["parameters"]["retry_after"], 5);
    let description = body["description"].as_str().expect("description");
    assert!(description.starts_with("Too Many Requests: retry after 5") && description.contains("NOT sent"), "{description}");
    assert!(!all.iter().any(|(text, _, _)| *text == "first"), "\"first\" is with the platform: no answer may be guessed yet");
    assert_eq!(metric(&gw, "botgw_outbox_withdrawn_total"), 1.0);

    drop(stalled);
    first.join().expect("first bot thread");
    second.join().expect("second bot thread");
    all.extend(answers.iter());

    // The final answer of each is its message; every earlier answer was a 429 (not sent).
    let mut sent_ids = Vec::new();
    for text in ["first", "second"] {
        let mine: Vec<&(&str, u16, Value)> = all.iter().filter(|(t, _, _)| *t == text).collect();
        let (last, earlier) = mine.split_last().expect("answered");
        assert_eq!(last.1, 200, "{text}: {}", last.2);
        assert_eq!(last.2["result"]["text"], text);
        assert!(earlier.iter().all(|(_, s, _)| *s == 429), "{text}: {mine:?}");
        sent_ids.push(last.2["result"]["message_id"].as_u64().expect("message_id"));
    }
    assert_eq!(all.iter().filter(|(t, _, _)| *t == "first").count(), 1, "\"first\" was answered once, with its id, after the stall");

    let mut got = alice.receive(Duration::from_secs(30), 2).expect("receive");
    // Anything sent twice would arrive within this; nothing may.
    got.extend(alice.receive(Duration::from_secs(3), 10).expect("receive more"));
    let texts: Vec<(&str, u64)> = got.iter().map(|m| (m.text.as_str(), m.message_id)).collect();
    assert_eq!(texts, [("first", sent_ids[0]), ("second", sent_ids[1])], "each message once, under the id its call answered");
    assert_eq!(metric(&gw, "botgw_outbox_given_up_total"), 0.0);
    let given_up: Value = ureq::get(&format!("{}/outbox/given-up", gw.ext_base)).call().expect("given-up").into_json().expect("json");
    assert_eq!(given_up["bots"][0]["given_up"], json!([]), "{given_up}");
}

#[test]
// The call thread returns ureq's own Result, whose error is large; it is read once.
#[allow(clippy::result_large_err)]
fn a_gateway_stopped_while_a_message_is_with_the_platform_answers_nothing_and_it_arrives_once() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let bot = platform.create_bot("stall_bot", "Stall Bot");
    let mut config = gateway_config(&platform.url, &dir.path().join("state"), &bot);
    config["send_wait_seconds"] = json!(SEND_WAIT_SECONDS);
    let config_path = dir.path().join("gateway.json");
    write_config(&config_path, &config);
    let mut gw = Gateway::start(&config_path);
    let bob = bot_gateway::client::Profile::register(&platform.url, dir.path().join("bob"), "bob_st", "Bob")
        .expect("register bob");
    bob.send_text("@stall_bot", "hello").expect("send hello");
    let chat_id = gw.poll_until(0, 1)[0]["message"]["chat"]["id"].as_u64().expect("chat id");
    let url = format!("{}/bot{}/sendMessage", gw.base, gw.token);

    let stalled = Stalled::new(&platform);
    let call = thread::Builder::new()
        .name("bot-call".into())
        .spawn(move || ureq::post(&url).timeout(Duration::from_secs(70)).send_json(json!({"chat_id": chat_id, "text": "in flight"})))
        .expect("spawn");
    // Past its wait the message is with the (stalled) platform: the call waits for its answer.
    thread::sleep(Duration::from_secs(SEND_WAIT_SECONDS + 2));
    assert!(!call.is_finished(), "no answer may be given while the platform holds the message");
    signal(gw.proc.child.id(), libc::SIGTERM);
    let status = gw.proc.wait_exit(Duration::from_secs(30)).unwrap_or_else(|| panic!("the gateway did not stop; stderr:\n{}", gw.proc.stderr_text()));
    assert!(status.success(), "{status}; stderr:\n{}", gw.proc.stderr_text());
    match call.join().expect("call thread") {
        Err(ureq::Error::Transport(_)) => {}
        other => panic!("the call must end without an answer (neither sent nor not sent is known): {other:?}"),
    }

    drop(stalled);
    gw = Gateway::start(&config_path);
    let mut got = bob.receive(Duration::from_secs(30), 1).expect("receive");
    got.extend(bob.receive(Duration::from_secs(3), 10).expect("receive more"));
    let texts: Vec<&str> = got.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["in flight"], "sent once, by the outbox after the restart or by the platform before it");
    // The outbox records the platform's answer (bounded wait): nothing is left to send again.
    let deadline = Instant::now() + Duration::from_secs(30);
    while gw.health()["bots"][0]["outbox_depth"] != 0 {
        assert!(Instant::now() < deadline, "the outbox kept the message: {}", gw.health());
        thread::sleep(Duration::from_millis(100));
    }
}
