//! Queue-length benchmark (not a test): what `getUpdates` and webhook delivery cost with 1,000
//! and with 100,000 updates pending in the real gateway. The spec asks that neither grows with
//! the queue; `store::queue`'s unit tests check the query plans and step counts, this measures.
//!
//! For each size the gateway is stopped, BENCH_QUEUE_SIZES (default "1000,100000") message
//! updates are written straight into its encrypted state database (as many real messages
//! would take minutes to send), and the gateway is started again. Then:
//! - 200 `getUpdates` calls with `limit=1`, each acknowledging the previous update: p50, p99;
//! - a local receiver is registered with `setWebhook` and the time for 500 deliveries after the
//!   first (each with its credential check, POST and acknowledgement commit) gives updates per
//!   second;
//! - `deleteWebhook` with `drop_pending_updates` clears the rest.
//!
//! Run by `scripts/bench` (every `examples/bench_*`); prints table rows.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bot_gateway::gateway::state_dir::StateDir;
use bot_gateway::gateway::store::{queue, Store};
use serde_json::{json, Value};
use support::World;

const POLLS: usize = 200;
const DELIVERIES: usize = 500;

fn main() {
    let sizes: Vec<usize> = std::env::var("BENCH_QUEUE_SIZES")
        .unwrap_or_else(|_| "1000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|&n| n > POLLS + DELIVERIES)
        .collect();
    let mut world = World::start("bench_queue_bot");
    let mut rows = Vec::new();
    for n in sizes {
        fill_queue(&mut world, n);
        let (p50, p99) = poll_latency(&world);
        rows.push(format!("| getUpdates (limit 1, acknowledging) with {n} pending | {POLLS} calls | p50 {p50:.2} ms, p99 {p99:.2} ms |"));
        let rate = webhook_rate(&world);
        rows.push(format!("| webhook delivery with {n} pending | {DELIVERIES} updates | {rate:.0} updates/s after the first |"));
        let (status, body) = world.gateway.call("deleteWebhook", json!({ "drop_pending_updates": true }));
        assert_eq!(status, 200, "deleteWebhook: {body}");
    }
    for r in rows {
        println!("{r}");
    }
}

/// Stops the gateway, appends `n` message updates to its queue in one transaction, restarts it.
fn fill_queue(world: &mut World, n: usize) {
    world.gateway.proc.kill();
    let bot = &world.bot;
    let secret = bot_gateway::crypto::hex_decode_32(bot["identity_recovery_secret_hex"].as_str().expect("secret"))
        .expect("64 hex");
    let bot_id = bot["bot_id_hex"].as_str().expect("bot id").to_string();
    let compat_user_id = bot["compat_user_id"].as_u64().expect("compat id");
    {
        let state = StateDir::open(&world.dir.path().join("state")).expect("state dir");
        let store = Store::open(&state.bot_database(compat_user_id), &secret, &bot_id, "bench").expect("open store");
        let user = json!({ "id": 4_000_000_001u64, "is_bot": false, "first_name": "Bench", "username": "bench_user" });
        store
            .write(move |c| {
                for i in 0..n {
                    let message = json!({
                        "message_id": i + 1, "date": 1_700_000_000 + i as i64,
                        "chat": { "id": 4_000_000_001u64, "type": "private", "first_name": "Bench", "username": "bench_user" },
                        "from": user, "text": format!("queued message number {i} of a long backlog"),
                    });
                    queue::enqueue(c, "message", &message)?;
                }
                Ok(())
            })
            .expect("fill the queue");
    }
    world.restart_gateway();
    let depth = world.gateway.health()["bots"][0]["queue_depth"].as_u64().expect("depth");
    assert!(depth >= n as u64, "queue depth {depth} after filling {n}");
}

/// `getUpdates` with `limit=1`, acknowledging the previous update on each call.
fn poll_latency(world: &World) -> (f64, f64) {
    let mut offset = 0i64;
    let mut took = Vec::with_capacity(POLLS);
    for _ in 0..POLLS {
        let t = Instant::now();
        let (status, body) = world.gateway.call("getUpdates", json!({ "offset": offset, "limit": 1, "timeout": 0 }));
        took.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(status, 200, "getUpdates: {body}");
        offset = body["result"][0]["update_id"].as_i64().expect("an update") + 1;
    }
    // Acknowledge the last one too, so the webhook starts after it.
    let (status, _) = world.gateway.call("getUpdates", json!({ "offset": offset, "limit": 1, "timeout": 0 }));
    assert_eq!(status, 200);
    took.sort_by(f64::total_cmp);
    (took[POLLS / 2], took[POLLS * 99 / 100])
}

/// Deliveries per second to a local receiver, over the first DELIVERIES updates.
fn webhook_rate(world: &World) -> f64 {
    let receiver = support::CountingReceiver::start();
    let deadline = Instant::now() + Duration::from_secs(300);
    let (status, body) = world.gateway.call("setWebhook", json!({ "url": receiver.url }));
    assert_eq!(status, 200, "setWebhook: {body}");
    // The first delivery also starts the bot's webhook threads and their HTTP agent (50-80
    // ms, once): the rate is of the rest, as `bench_webhook` reports it, so the two compare.
    let (_, rate) = receiver.first_then_rate(Instant::now(), DELIVERIES, deadline, String::new);
    let (status, body): (u16, Value) = world.gateway.call("deleteWebhook", json!({}));
    assert_eq!(status, 200, "deleteWebhook: {body}");
    rate
}
