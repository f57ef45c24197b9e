//! Benchmarks of the whole system on loopback (not a test): the real platform server and
//! gateway binaries, users driven through the client library, the bot through HTTP.
//!
//! - inbound: several user devices send at once while the bot long-polls; messages/s that
//!   reach bot code through `getUpdates` (decrypted, stored, served, acknowledged);
//! - backlog drain: messages queued while the gateway is down, then the rate at which a
//!   fresh gateway imports them into its queue;
//! - echo round trip: a user sends, the bot answers through `sendMessage`, the user receives
//!   the reply; p50 / p99 over N messages.
//!
//! Run with `scripts/bench` (it builds the binaries first). Sizes: BENCH_USERS, BENCH_MESSAGES,
//! BENCH_ECHO.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::World;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let users = env_usize("BENCH_USERS", 4);
    let per_user = env_usize("BENCH_MESSAGES", 500) / users.max(1);
    let echo_n = env_usize("BENCH_ECHO", 200);
    let mut rows: Vec<(String, String, String)> = Vec::new();

    // ── Inbound while polling ──
    let world = World::start("bench_in_bot");
    let bot = format!("@{}", world.bot_username());
    let profiles: Vec<_> = (0..users).map(|i| world.user(&format!("sender{i}"))).collect();
    let total = users * per_user;
    let start = Instant::now();
    let senders: Vec<_> = profiles
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let bot = bot.clone();
            std::thread::Builder::new()
                .name(format!("bench-sender-{i}"))
                .spawn(move || {
                    for n in 0..per_user {
                        p.send_text(&bot, &format!("m{i}-{n}")).expect("send");
                    }
                    Instant::now()
                })
                .expect("spawn sender")
        })
        .collect();
    let mut received = 0usize;
    let mut offset = 0i64;
    let deadline = Instant::now() + Duration::from_secs(600);
    while received < total && Instant::now() < deadline {
        let (status, body) = world.gateway.call("getUpdates", json!({ "offset": offset, "timeout": 10, "limit": 100 }));
        assert_eq!(status, 200, "{body}");
        for u in body["result"].as_array().expect("array") {
            received += 1;
            offset = u["update_id"].as_i64().expect("id") + 1;
        }
    }
    let inbound = start.elapsed();
    let send_done = senders.into_iter().map(|h| h.join().expect("sender")).max().expect("senders");
    let send_time = send_done - start;
    assert_eq!(received, total, "every message reached the bot");
    rows.push((
        "inbound via getUpdates".into(),
        format!("{total} msgs, {users} user devices"),
        format!("{:.0} msg/s (senders alone: {:.0} msg/s)", total as f64 / inbound.as_secs_f64(), total as f64 / send_time.as_secs_f64()),
    ));

    // ── Backlog drain: the gateway imports a queue that built up while it was down ──
    let mut world = world;
    world.gateway.proc.kill();
    let backlog: Vec<_> = (0..users).map(|i| world.user(&format!("backlog{i}"))).collect();
    let queued = users * per_user;
    let handles: Vec<_> = backlog
        .into_iter()
        .map(|p| {
            let bot = bot.clone();
            std::thread::spawn(move || {
                for n in 0..per_user {
                    p.send_text(&bot, &format!("b{n}")).expect("send");
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().expect("backlog sender"));
    let path = world.gateway.config_path.clone();
    let t0 = Instant::now();
    world.gateway = support::Gateway::start(&path);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let depth = world.gateway.health()["bots"][0]["queue_depth"].as_i64().unwrap_or(0) as usize;
        if depth >= queued {
            break;
        }
        assert!(Instant::now() < deadline, "backlog not imported in time");
        std::thread::sleep(Duration::from_millis(20));
    }
    let drain = t0.elapsed();
    rows.push((
        "backlog import (incl. start-up)".into(),
        format!("{queued} msgs"),
        format!("{:.0} msg/s", queued as f64 / drain.as_secs_f64()),
    ));
    drop(world);

    // ── Echo round trip ──
    // The bot keeps one pooled connection, as an SDK does, and says when each update reached it
    // and when its sendMessage returned, so the round trip splits into four legs.
    let world = World::start("bench_echo_bot");
    let base = world.gateway.base.clone();
    let token = world.gateway.token.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let bot_stop = stop.clone();
    let (legs_tx, legs_rx) = crossbeam_channel::unbounded::<(String, Instant, Instant)>();
    let echo_bot = std::thread::Builder::new()
        .name("bench-echo-bot".into())
        .spawn(move || {
            let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(70)).build();
            let call = |method: &str, params: serde_json::Value| -> serde_json::Value {
                let resp = agent.post(&format!("{base}/bot{token}/{method}")).send_json(params).expect(method);
                resp.into_json().expect("json")
            };
            let mut offset = 0i64;
            while !bot_stop.load(std::sync::atomic::Ordering::SeqCst) {
                let body = call("getUpdates", json!({ "offset": offset, "timeout": 1 }));
                let got = Instant::now();
                for u in body["result"].as_array().cloned().unwrap_or_default() {
                    offset = u["update_id"].as_i64().expect("id") + 1;
                    let m = &u["message"];
                    let sent = call("sendMessage", json!({ "chat_id": m["chat"]["id"], "text": m["text"] }));
                    assert_eq!(sent["ok"], true, "{sent}");
                    let _ = legs_tx.send((m["text"].as_str().unwrap_or_default().to_string(), got, Instant::now()));
                }
            }
        })
        .expect("spawn bot");
    let user = world.user("echo_user");
    let bot = format!("@{}", world.bot_username());
    // Per echo: total, user's send call, on to the bot, the bot's sendMessage, back to the user.
    let mut samples: [Vec<Duration>; 5] = Default::default();
    for i in 0..echo_n {
        let text = format!("ping {i}");
        let t0 = Instant::now();
        user.send_text(&bot, &text).expect("send");
        let t1 = Instant::now();
        let got = user.receive(Duration::from_secs(30), 1).expect("receive");
        let t4 = Instant::now();
        assert_eq!(got.len(), 1, "echo {i} arrived");
        let (echoed, t2, t3) = legs_rx.recv_timeout(Duration::from_secs(5)).expect("the bot's timings");
        assert_eq!(echoed, text);
        for (k, d) in [t4 - t0, t1 - t0, t2.saturating_duration_since(t1), t3 - t2, t4.saturating_duration_since(t3)].into_iter().enumerate() {
            samples[k].push(d);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    echo_bot.join().expect("bot thread");
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let pct = |v: &mut Vec<Duration>, p: f64| {
        v.sort();
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    let (p50, p99) = (pct(&mut samples[0], 0.50), pct(&mut samples[0], 0.99));
    rows.push(("echo round trip".into(), format!("{echo_n} msgs"), format!("p50 {:.1} ms, p99 {:.1} ms", ms(p50), ms(p99))));
    let legs = [
        "user's send (SendMessages until the platform committed)",
        "platform → gateway → getUpdates returns",
        "bot's sendMessage (outbox: reserve, seal, send)",
        "platform → user's inbox, decrypted",
    ];
    let legs: Vec<String> = legs
        .iter()
        .zip(samples.iter_mut().skip(1))
        .map(|(name, v)| format!("{name} {:.2}", ms(pct(v, 0.50))))
        .collect();
    rows.push(("echo legs, p50 ms each".into(), format!("{echo_n} msgs"), legs.join("; ")));

    println!("\n| benchmark | size | result |\n|---|---|---|");
    for (a, b, c) in rows {
        println!("| {a} | {b} | {c} |");
    }
}
