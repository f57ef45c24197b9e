//! Webhook delivery throughput (not a test): updates per second that the gateway posts to a
//! local receiver, from a queue that is already full.
//!
//! Users send BENCH_WEBHOOK messages (default 1000) while the bot is in polling mode and nobody
//! polls, so they pile up in the durable queue; then a local receiver (the gateway's HTTP server on 127.0.0.1,
//! answering 200 with an empty body) is registered with `setWebhook`, and the time until it
//! has received every update is measured: the first delivery (which starts the bot's webhook
//! threads and their HTTP agent) apart, then the rate of the rest. Each delivery includes the credential check with the
//! platform, the POST, and the acknowledgement commit, exactly as in production.
//!
//! Run by `scripts/bench` (every `examples/bench_*`); prints one table row:
//! `| webhook delivery | <N> updates | <X> updates/s after the first; the first <T> ms after setWebhook |`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::World;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let n = env_usize("BENCH_WEBHOOK", 1000).max(1);
    let senders = env_usize("BENCH_USERS", 4).clamp(1, n);
    let world = World::start("bench_webhook_bot");
    let gw = &world.gateway;
    let bot = format!("@{}", world.bot_username());

    // Fill the queue: several users at once, the bot in polling mode and not polling.
    let profiles: Vec<_> = (0..senders).map(|i| world.user(&format!("whsender{i}"))).collect();
    let threads: Vec<_> = profiles
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            let bot = bot.clone();
            let count = n / senders + usize::from(i < n % senders);
            std::thread::Builder::new()
                .name(format!("bench-sender-{i}"))
                .spawn(move || {
                    for k in 0..count {
                        p.send_text(&bot, &format!("w{i}-{k}")).expect("send");
                    }
                })
                .expect("spawn sender")
        })
        .collect();
    for t in threads {
        t.join().expect("sender");
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    while gw.health()["bots"][0]["queue_depth"].as_u64().unwrap_or(0) < n as u64 {
        assert!(Instant::now() < deadline, "the queue never reached {n}; stderr:\n{}", gw.proc.stderr_text());
        std::thread::sleep(Duration::from_millis(100));
    }

    let receiver = support::CountingReceiver::start();
    let start = Instant::now();
    let (status, body) = gw.call("setWebhook", json!({ "url": receiver.url }));
    assert_eq!(status, 200, "setWebhook: {body}");
    // The first delivery also starts the bot's webhook threads (a bot that polled had none)
    // and their HTTP agent: timed apart, once, from the steady rate after it.
    let (first, rate) = receiver.first_then_rate(start, n, deadline, || format!("stderr:\n{}", gw.proc.stderr_text()));
    // The last acknowledgement commits just after the receiver answered.
    loop {
        let info: Value = gw.call("getWebhookInfo", json!({})).1;
        if info["result"]["pending_update_count"] == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the queue did not drain: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }

    println!("| webhook delivery | {n} updates | {rate:.0} updates/s after the first; the first {:.0} ms after setWebhook |", first.as_secs_f64() * 1000.0);
}
