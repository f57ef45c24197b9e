//! Benchmarks of the whole system on loopback (not a test): the real platform server and
//! gateway binaries, users driven through the client library or the raw platform API, the bot
//! through HTTP.
//!
//! - the limit (`private_limit`): what one private message must cost the gateway at least,
//!   measured first in the same run: messages sealed ahead, opened by the gateway's own store
//!   (SQLCipher, writer thread) 256 per writer job, each with an update row and the cursor;
//!   the inbound figures are printed as a share of it;
//! - inbound: a load generator (`Loader`: one thread per user device, registered through the
//!   raw API, every message sealed before the clock starts, submitted 100 per SendMessages)
//!   while the bot long-polls; messages/s that reach bot code through `getUpdates` (decrypted,
//!   stored, served, acknowledged), beside the generator's own rate, flagged "bench-bound" when
//!   the generator was not 20% faster;
//! - backlog drain: messages queued while the gateway is down, then the rate at which a
//!   fresh gateway imports them into its queue;
//! - echo round trip: a user sends, the bot (one pooled connection) answers through
//!   `sendMessage`, the user receives the reply; p50 / p99 over N messages, and the p50 of each
//!   leg: the user's send call, on to the bot, the bot's sendMessage, back to the user; and,
//!   from the gateway's `/metrics` over the echoes, the mean of its sendMessage split into its
//!   two platform calls and the rest (the gateway's own steps and hand-offs), and the commits of
//!   the bot's store and the platform calls the gateway waited for, per echo. The target
//!   (issue 48) is p50 < 3 ms and p99 < 10 ms; docs/decisions/0129 says where it stands.
//!
//! Run with `scripts/bench` (it builds the binaries first). Sizes: BENCH_USERS (4),
//! BENCH_MESSAGES (20,000: a run of 500 lasted about 80 ms, so the first batch, the threads'
//! start and the connections decided the rate), BENCH_ECHO (200), BENCH_LIMIT_MESSAGES (5000).

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
    let per_user = env_usize("BENCH_MESSAGES", 20_000) / users.max(1);
    let echo_n = env_usize("BENCH_ECHO", 200);
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let limit = private_limit(env_usize("BENCH_LIMIT_MESSAGES", 5000).max(1));

    // ── Inbound while polling ──
    let world = World::start("bench_in_bot");
    let bot = format!("@{}", world.bot_username());
    // The load generator: each user device seals its messages before the clock starts and
    // submits them in batches, one thread per device, so the figure is the gateway's.
    let loaders: Vec<Loader> = (0..users).map(|i| Loader::new(&world.platform.url, &format!("sender{i}"), &bot, per_user)).collect();
    let total = users * per_user;
    let start = Instant::now();
    let senders: Vec<_> = loaders
        .into_iter()
        .enumerate()
        .map(|(i, l)| std::thread::Builder::new().name(format!("bench-sender-{i}")).spawn(move || l.submit()).expect("spawn sender"))
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
        {
            let (rate, senders) = (total as f64 / inbound.as_secs_f64(), total as f64 / send_time.as_secs_f64());
            format!(
                "{rate:.0} msg/s, {:.0}% of the limit (senders alone: {senders:.0} msg/s{})",
                100.0 * rate / limit,
                if senders < 1.2 * rate { ": bench-bound" } else { "" }
            )
        },
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
        {
            let rate = queued as f64 / drain.as_secs_f64();
            format!("{rate:.0} msg/s, {:.0}% of the limit", 100.0 * rate / limit)
        },
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
    let scrape = || -> String {
        ureq::get(&format!("{}/metrics", world.gateway.ext_base)).call().expect("/metrics").into_string().expect("text")
    };
    let before = scrape();
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
    // Inside the gateway, from its /metrics over the echoes: sendMessage's two platform calls
    // and what is left for its own steps (the outbox's writer jobs, the seal, the hand-offs).
    let after = scrape();
    let mean_ms = |sum: &str, count: &str| {
        // A series not scraped yet counts from 0.
        let delta = |series: &str| {
            support::metric_sample(&after, series).unwrap_or(0.0) - support::metric_sample(&before, series).unwrap_or(0.0)
        };
        let n = delta(count);
        if n > 0.0 { delta(sum) / n * 1e3 } else { f64::NAN }
    };
    let call = |rpc: &str| {
        let series = |part: &str| format!("botgw_platform_call_duration_seconds_{part}{{method=\"{rpc}\"}}");
        mean_ms(&series("sum"), &series("count"))
    };
    let commits = {
        let series = format!("botgw_store_commits_total{{bot=\"{bot}\"}}");
        let of = |scrape: &str| support::metric_sample(scrape, &series).unwrap_or(0.0);
        (of(&after) - of(&before)) / echo_n.max(1) as f64
    };
    // Every unary call the gateway waited for, whatever its method.
    let calls_in = |scrape: &str| -> f64 {
        scrape
            .lines()
            .filter(|l| l.starts_with("botgw_platform_call_duration_seconds_count{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let rpcs = (calls_in(&after) - calls_in(&before)) / echo_n.max(1) as f64;
    rows.push((
        "the gateway per echo (its /metrics): commits of the bot's store, unary platform calls".into(),
        format!("{echo_n} msgs"),
        format!("{commits:.1} commits, {rpcs:.1} calls waited for (acks are sent without waiting)"),
    ));
    let of_bot = |part: &str| format!("botgw_send_message_duration_seconds_{part}{{bot=\"{bot}\"}}");
    let send_message = mean_ms(&of_bot("sum"), &of_bot("count"));
    let (reserve, send) = (call("ReserveMessageIds"), call("SendMessages"));
    rows.push((
        "the bot's sendMessage inside the gateway, mean ms (its /metrics)".into(),
        format!("{echo_n} msgs"),
        format!(
            "{send_message:.2}: ReserveMessageIds {reserve:.2}, SendMessages {send:.2}, the gateway's own steps and hand-offs {:.2}",
            send_message - reserve - send
        ),
    ));

    rows.push((
        format!("limit: open a ratchet step + store an update + advance the cursor, {LIMIT_BATCH} per writer job (in process)"),
        format!("{} msgs", env_usize("BENCH_LIMIT_MESSAGES", 5000).max(1)),
        format!("{limit:.0} msg/s"),
    ));
    println!("\n| benchmark | size | result |\n|---|---|---|");
    for (a, b, c) in rows {
        println!("| {a} | {b} | {c} |");
    }
}

/// Envelopes per writer job in [`private_limit`], as the inbox takes them.
const LIMIT_BATCH: usize = 256;

/// What one private message must cost the gateway at least, measured in this run: a user's
/// messages, sealed ahead of time, opened by the gateway's own store (`gateway::store::Store`:
/// SQLCipher, its writer thread), LIMIT_BATCH per writer job as the inbox commits a batch: one
/// ratchet step each, an update row, and the inbound cursor. No platform, no HTTP.
fn private_limit(n: usize) -> f64 {
    use bot_gateway::crypto::IdentityKeyPair;
    use bot_gateway::e2e;
    use bot_gateway::gateway::store::{queue, Store};
    use bot_gateway::wire::platform::{InboxEnvelope, PrekeyBundle, Profile};
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let user = rusqlite::Connection::open_in_memory().expect("user db");
    e2e::create_all_tables(&user).expect("tables");
    let user_account = IdentityKeyPair::generate();
    let user_keys = e2e::create_device_keys(&user, &user_account).expect("user keys");
    e2e::save_registration(&user, e2e::Registration { user_id: 1, device_id: 1 }).expect("registration");
    let store = Store::open(&dir.path().join("bot.db"), &[7; 32], "bench", "bench-wr").expect("store");
    let bot_account = IdentityKeyPair::generate();
    let bot_identity = bot_account.public_key().to_vec();
    let bot_keys = store
        .write(move |c| {
            let keys = e2e::create_device_keys(c, &bot_account)?;
            e2e::save_registration(c, e2e::Registration { user_id: 2, device_id: 1 })?;
            Ok(keys)
        })
        .expect("bot keys");
    // The user starts a session from the bot's bundle; the bot records the user's device.
    let bot_profile = Profile { user_id: 2, identity_key: bot_identity, ..Default::default() };
    let bundle = PrekeyBundle {
        device_id: 1,
        device_key: bot_keys.device_key.clone(),
        device_certificate: bot_keys.device_certificate.clone(),
        signed_prekey: bot_keys.signed_prekey.clone(),
        one_time_prekey: protobuf::MessageField::some(bot_keys.one_time_prekeys[0].clone()),
        ..Default::default()
    };
    e2e::add_sessions(&user, &bot_profile, &[bundle]).expect("session");
    let (user_identity, certified_keys) = (user_account.public_key().to_vec(), user_keys.clone());
    store
        .write(move |c| Ok(support::certify_device_one(c, 1, &user_identity, &certified_keys)?))
        .expect("certify the user's device");
    let text = "a private message of ordinary length, about as long as a chat line".repeat(2);
    let envelopes: Vec<InboxEnvelope> = (0..n)
        .map(|i| {
            let sealed = e2e::seal(&user, 2, &e2e::text_content(&format!("{i} {text}"))).expect("seal");
            InboxEnvelope {
                seq: i as u64 + 1,
                sender_user_id: 1,
                sender_device_id: 1,
                client_message_id: format!("bench-{i}"),
                ciphertext: sealed[0].ciphertext.clone(),
                ..Default::default()
            }
        })
        .collect();
    let started = Instant::now();
    for batch in envelopes.chunks(LIMIT_BATCH) {
        let batch = batch.to_vec();
        store
            .write(move |c| {
                for env in &batch {
                    let content = e2e::open_envelope(c, env)?;
                    queue::enqueue(c, "message", &json!({ "message_id": env.seq, "text": content.text().text }))?;
                    e2e::inbound::accept(c, env.seq, env.sender_user_id, &env.client_message_id)?;
                }
                Ok(())
            })
            .expect("import a batch");
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// Messages per SendMessages call of the load generator.
const SUBMIT_BATCH: usize = 100;

/// One user device of the load generator: registered with the platform through the raw API,
/// its messages to the bot sealed ahead of time.
struct Loader {
    platform: bot_gateway::wire::Platform,
    batches: Vec<bot_gateway::wire::platform::SendMessagesRequest>,
}

impl Loader {
    fn new(url: &str, name: &str, bot: &str, n: usize) -> Loader {
        use bot_gateway::e2e;
        use bot_gateway::wire::platform as pb;
        let (conn, platform, _) = support::group_member::register_device(url, name);
        let lookup = pb::LookupUserRequest { username: bot.into(), ..Default::default() };
        let peer = platform.client.lookup_user(&lookup, platform.opt()).expect("lookup the bot");
        let get = pb::GetPrekeyBundlesRequest { user_id: peer.user_id, ..Default::default() };
        let bundles = platform.client.get_prekey_bundles(&get, platform.opt()).expect("bundles");
        e2e::add_sessions(&conn, &peer, &bundles.bundles).expect("sessions");
        let messages: Vec<pb::OutgoingMessage> = (0..n)
            .map(|k| pb::OutgoingMessage {
                client_message_id: format!("{name}-{k}"),
                recipient_user_id: peer.user_id,
                ciphertexts: e2e::seal(&conn, peer.user_id, &e2e::text_content(&format!("m-{name}-{k}"))).expect("seal"),
                ..Default::default()
            })
            .collect();
        let batches = messages.chunks(SUBMIT_BATCH).map(|m| pb::SendMessagesRequest { messages: m.to_vec(), ..Default::default() }).collect();
        Loader { platform, batches }
    }

    /// Submits every batch in order; returns when the platform accepted the last.
    fn submit(self) -> Instant {
        for batch in &self.batches {
            let resp = self.platform.client.send_messages(batch, self.platform.opt()).expect("SendMessages");
            assert!(resp.results.iter().all(|r| r.message_id != 0), "every message accepted: {:?}", resp.results.iter().find(|r| r.message_id == 0));
        }
        Instant::now()
    }
}
