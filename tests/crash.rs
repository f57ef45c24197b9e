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

/// A reply is answered as soon as the platform acknowledges it under the id its seal job put
/// into the history; the outbox records the acknowledgement after the answer. A bot that sends
/// without pause while the gateway is killed twice: every reply it was answered arrives once,
/// under the id it was answered, and after the restarts each can be edited (the history has
/// it). A reply whose call the kill cut off arrives at most once.
#[test]
fn replies_answered_around_sigkills_arrive_once_under_their_ids_and_can_be_edited() {
    let mut world = World::start("crash_reply_bot");
    let user = world.user("crash_reply_user");
    let target = user.user_id();
    // The user starts the dialog, as a bot's users do.
    user.send_text(&format!("@{}", world.bot_username()), "/start").expect("send");
    let offset = world.gateway.poll_until(0, 1)[0]["update_id"].as_i64().expect("id") + 1;
    let (status, _) = world.gateway.call("getUpdates", json!({ "offset": offset, "timeout": 0 }));
    assert_eq!(status, 200);
    let url = format!("{}/bot{}/sendMessage", world.gateway.base, world.gateway.token);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
            let mut answered: HashMap<String, i64> = HashMap::new();
            let mut tried = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && tried < 2_000 {
                let text = format!("fast-{tried}");
                tried += 1;
                match agent.post(&url).send_json(json!({ "chat_id": target, "text": text })) {
                    Ok(resp) => {
                        let body: serde_json::Value = resp.into_json().expect("json");
                        answered.insert(text, body["result"]["message_id"].as_i64().expect("message_id"));
                    }
                    Err(ureq::Error::Status(code, resp)) => {
                        // Only a stopping gateway may refuse (503); anything else is a bug.
                        assert_eq!(code, 503, "{text}: {}", resp.into_string().unwrap_or_default());
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    // The kill cut the call, or the gateway is restarting: no answer.
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            (answered, tried)
        })
    };
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(700));
        let _ = world.gateway.proc.child.kill(); // SIGKILL
        let _ = world.gateway.proc.child.wait();
        let path = world.gateway.config_path.clone();
        world.gateway = support::Gateway::start(&path);
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (answered, tried) = sender.join().expect("sender");
    assert!(answered.len() >= 20 && answered.len() < tried, "answered {} of {tried}: some before and after the kills", answered.len());

    let mut got: HashMap<String, Vec<u64>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !answered.keys().all(|t| got.contains_key(t)) && Instant::now() < deadline {
        for m in user.receive(Duration::from_secs(2), 500).expect("receive") {
            got.entry(m.text).or_default().push(m.message_id);
        }
    }
    for (text, id) in &answered {
        assert_eq!(got.get(text), Some(&vec![*id as u64]), "{text}, answered as message {id}, arrives once under that id");
    }
    for (text, ids) in &got {
        assert_eq!(ids.len(), 1, "{text} arrived {} times", ids.len());
    }
    // Each answered reply is in the history after the kills: an edit of it is accepted.
    for (text, id) in answered.iter().take(40) {
        let (status, body) = world.gateway.call("editMessageText", json!({ "chat_id": target, "message_id": id, "text": format!("{text} (edited)") }));
        assert_eq!(status, 200, "editing {text} (message {id}): {body}");
    }
}
