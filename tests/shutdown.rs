//! SIGTERM under load: a user sends messages continuously while the bot polls; the gateway is
//! stopped mid-way, exits by itself (status 0) within a generous deadline, is started again,
//! and every message reaches the bot exactly once: one update_id per text (an update seen
//! again under the same update_id is the Bot API's redelivery of an unconfirmed update, not a
//! duplicate).

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{Gateway, World};

const MESSAGES: usize = 40;

/// One getUpdates; `None` while the gateway is down.
fn poll(gw: &Gateway, offset: i64) -> Option<Vec<Value>> {
    let url = format!("{}/bot{}/getUpdates", gw.base, gw.token);
    match ureq::post(&url).timeout(Duration::from_secs(10)).send_json(json!({"offset": offset, "timeout": 1})) {
        Ok(r) => Some(r.into_json::<Value>().expect("json")["result"].as_array().expect("array").clone()),
        Err(_) => None,
    }
}

/// Records updates by id; panics if an update_id comes back with another text.
fn record(seen: &mut BTreeMap<i64, String>, updates: &[Value]) -> i64 {
    let mut next = 0;
    for u in updates {
        let id = u["update_id"].as_i64().expect("update_id");
        let text = u["message"]["text"].as_str().expect("text").to_string();
        if let Some(before) = seen.insert(id, text.clone()) {
            assert_eq!(before, text, "update {id} changed its text");
        }
        next = id + 1;
    }
    next
}

#[test]
fn sigterm_under_load_loses_and_duplicates_nothing() {
    let mut w = World::start("drain_bot");
    let url = w.platform.url.clone();
    let user_dir = w.dir.path().join("user-sender");
    let sender = std::thread::Builder::new()
        .name("sender".into())
        .spawn(move || {
            let user = bot_gateway::client::Profile::register(&url, &user_dir, "sender", "Sender").expect("register");
            for i in 0..MESSAGES {
                user.send_text("@drain_bot", &format!("msg-{i}")).expect("send");
                std::thread::sleep(Duration::from_millis(40));
            }
        })
        .expect("sender thread");

    let mut seen = BTreeMap::new();
    let mut offset = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    // Poll until a part arrived, then stop the gateway with SIGTERM mid-stream.
    while seen.len() < MESSAGES / 3 {
        assert!(Instant::now() < deadline, "only {} updates before the stop", seen.len());
        let updates = poll(&w.gateway, offset).expect("gateway up");
        offset = offset.max(record(&mut seen, &updates));
    }
    let pid = w.gateway.proc.child.id() as libc::pid_t;
    // SAFETY: signals our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = w.gateway.proc.wait_exit(Duration::from_secs(20)).unwrap_or_else(|| {
        panic!("the gateway did not exit after SIGTERM; stderr:\n{}", w.gateway.proc.stderr_text())
    });
    assert!(status.success(), "exit status {status:?}; stderr:\n{}", w.gateway.proc.stderr_text());
    let log = w.gateway.proc.stderr_text();
    assert!(log.contains("signal SIGTERM received") || log.contains("received, stopping"), "{log}");
    assert!(log.contains("stopped") && !log.contains("did not stop in time"), "{log}");

    // Started again on the same state_dir: the rest arrives, nothing twice.
    let path = w.gateway.config_path.clone();
    w.gateway = Gateway::start(&path);
    while seen.len() < MESSAGES {
        assert!(Instant::now() < deadline, "only {} of {MESSAGES} after the restart: {seen:?}", seen.len());
        if let Some(updates) = poll(&w.gateway, offset) {
            offset = offset.max(record(&mut seen, &updates));
        }
    }
    sender.join().expect("sender");
    // Nothing more comes (a duplicate would arrive under a new update_id).
    let extra = poll(&w.gateway, offset).expect("gateway up");
    record(&mut seen, &extra);
    let mut texts: Vec<&String> = seen.values().collect();
    texts.sort();
    let mut want: Vec<String> = (0..MESSAGES).map(|i| format!("msg-{i}")).collect();
    want.sort();
    assert_eq!(texts, want.iter().collect::<Vec<_>>(), "each message exactly once");
}
