//! Crash safety: the gateway is killed with SIGKILL while users are sending and while the bot
//! is replying. Nothing is lost and no message becomes two updates or two deliveries.

mod support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::json;
use support::World;

#[test]
fn sigkill_under_load_loses_and_duplicates_nothing() {
    let mut world = World::start("crash_bot");
    let bot = format!("@{}", world.bot_username());
    let users: Vec<_> = (0..3).map(|i| world.user(&format!("crash_user{i}"))).collect();
    const PER_USER: usize = 60;

    let senders: Vec<_> = users
        .into_iter()
        .enumerate()
        .map(|(i, u)| {
            let bot = bot.clone();
            std::thread::spawn(move || {
                for n in 0..PER_USER {
                    u.send_text(&bot, &format!("u{i}-m{n}")).expect("send");
                    std::thread::sleep(Duration::from_millis(5));
                }
                u
            })
        })
        .collect();

    // Poll while killing the gateway twice; updates may repeat (same update_id) after a crash
    // before the offset was committed, but a message must never get a second update_id.
    let mut seen: HashMap<String, i64> = HashMap::new();
    let mut offset = 0i64;
    let mut kills = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < 3 * PER_USER {
        assert!(Instant::now() < deadline, "only {} of {} messages arrived", seen.len(), 3 * PER_USER);
        if (kills == 0 && seen.len() >= 40) || (kills == 1 && seen.len() >= 110) {
            kills += 1;
            let _ = world.gateway.proc.child.kill(); // SIGKILL
            let _ = world.gateway.proc.child.wait();
            let path = world.gateway.config_path.clone();
            world.gateway = support::Gateway::start(&path);
        }
        let (status, body) = world.gateway.call("getUpdates", json!({ "offset": offset, "timeout": 2 }));
        assert_eq!(status, 200, "{body}");
        for u in body["result"].as_array().expect("array") {
            let id = u["update_id"].as_i64().expect("id");
            let text = u["message"]["text"].as_str().expect("text").to_string();
            if let Some(prev) = seen.insert(text.clone(), id) {
                assert_eq!(prev, id, "{text} became two updates ({prev} and {id})");
            }
            offset = id + 1;
        }
    }
    assert_eq!(kills, 2);
    let users: Vec<_> = senders.into_iter().map(|h| h.join().expect("sender")).collect();

    // Replies while the gateway is killed: every reply that was accepted arrives exactly once.
    let (_, body) = world.gateway.call("getUpdates", json!({ "offset": offset, "timeout": 0 }));
    assert_eq!(body["result"], json!([]), "every message was imported once and acknowledged");
    let target = users[0].user_id();
    let mut accepted = HashSet::new();
    for n in 0..30 {
        if n == 15 {
            let _ = world.gateway.proc.child.kill();
            let _ = world.gateway.proc.child.wait();
            let path = world.gateway.config_path.clone();
            world.gateway = support::Gateway::start(&path);
        }
        let text = format!("reply-{n}");
        let (status, _) = world.gateway.call("sendMessage", json!({ "chat_id": target, "text": text }));
        if status == 200 {
            accepted.insert(text);
        }
    }
    assert!(accepted.len() >= 29, "replies were accepted around the crash");
    let mut got: HashMap<String, usize> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !accepted.iter().all(|t| got.contains_key(t)) && Instant::now() < deadline {
        for m in users[0].receive(Duration::from_secs(2), 100).expect("receive") {
            *got.entry(m.text).or_default() += 1;
        }
    }
    for t in &accepted {
        assert!(got.contains_key(t), "accepted reply {t} never arrived");
    }
    for (t, n) in &got {
        assert_eq!(*n, 1, "{t} arrived {n} times");
    }
}
