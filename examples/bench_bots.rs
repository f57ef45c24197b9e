//! Many bots in one gateway (not a test): BENCH_BOTS bots (default 1,000) created on the real
//! platform server, one gateway serving them all on loopback. It prints:
//!
//! - **start**: from spawning the gateway until every bot answered `getMe` (each bot asked in
//!   turn, again until all have answered; bounded by BENCH_BOTS_START_SECS, 600);
//! - **idle**: the gateway's RSS, threads and open descriptors 15 s later (a store lets its
//!   caches go after 10 s without a write), nobody polling, and each per bot;
//! - **one echo per bot**: a user sends each bot a message, this program reads it through that
//!   bot's `getUpdates` and answers with `sendMessage`, the user receives the answer; the time
//!   for all of them;
//! - **idle webhook bots**: then every bot gets a webhook (one local receiver for all) and one
//!   more message, delivered there; RSS, threads and descriptors after the same idle wait (a
//!   bot's webhook threads, like its other on-demand threads, end after 10 s without work);
//! - **restart**: the gateway stopped (SIGTERM) and started again on the same state, until
//!   every bot answered `getMe` (the first start above also registers every bot's device).
//!
//! Run by `scripts/bench` (every `examples/bench_*`); BENCH_BOTS=100 for a shorter run. The
//! targets (issue 26): 1,000 idle bots in at most 500 MiB and 2,000 threads, all answering
//! `getMe` within 30 s of the start. A step that fails is printed as FAILED with the reason
//! (the rest of `scripts/bench` still runs); the gateway's last log lines go to stderr.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{free_port, gateway_bin, status_kib, threads_and_fds, write_config, PlatformServer, Proc};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

fn main() {
    let n = env_u64("BENCH_BOTS", 1000).max(1) as usize;
    let start_limit = Duration::from_secs(env_u64("BENCH_BOTS_START_SECS", 600));
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let created = Instant::now();
    let bots: Vec<Value> = (0..n).map(|i| platform.create_bot(&format!("many_bot_{i}"), &format!("Many {i}"))).collect();
    eprintln!("bench_bots: {n} bots created in {:.1} s", created.elapsed().as_secs_f64());
    let compat = format!("127.0.0.1:{}", free_port());
    let config = json!({
        "compatibility_profile_id": "compat-v1-core-preview-4",
        "bot_platform_endpoint": platform.url,
        "compat_listen_addr": compat,
        "extensions_listen_addr": format!("127.0.0.1:{}", free_port()),
        "state_dir": dir.path().join("state"),
        "bots": bots.iter().map(|b| json!({
            "bot_id_hex": b["bot_id_hex"],
            "token": b["token"],
            "identity_recovery_secret_hex": b["identity_recovery_secret_hex"],
            "compat_user_id": b["compat_user_id"],
            "username": b["username"],
            "first_name": b["first_name"],
        })).collect::<Vec<_>>(),
    });
    let config_path = dir.path().join("gateway.json");
    write_config(&config_path, &config);
    let base = format!("http://{compat}");
    let tokens: Vec<String> = bots.iter().map(|b| b["token"].as_str().expect("token").to_string()).collect();

    let mut gateway = match serve(&config_path, &base, &tokens, start_limit) {
        Ok((gateway, secs)) => {
            // Printed at once, so a profiler watching the output can look at the idle gateway.
            println!("| {n} bots: start until every bot answered getMe | {n} bots | {secs:.1} s |");
            gateway
        }
        Err(why) => {
            println!("| {n} bots: start until every bot answered getMe | {n} bots | FAILED: {why} |");
            return;
        }
    };
    let pid = gateway.child.id();
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    // Idle: a store lets its caches go after 10 s without a write (`store::writer::IDLE_TRIM`).
    // BENCH_BOTS_IDLE_SECS shortens the wait (the smoke run), and the row then means little.
    std::thread::sleep(Duration::from_secs(env_u64("BENCH_BOTS_IDLE_SECS", 15)));
    let rss_kib = status_kib(&pid.to_string(), "VmRSS:");
    let (threads, fds) = threads_and_fds(pid);

    // One echo per bot, the bench playing each bot's code.
    let profile = bot_gateway::client::Profile::register(&platform.url, dir.path().join("user"), "many_echo_user", "Many Echo User")
        .expect("user profile");
    let echoed = Instant::now();
    let echoes = echo_each(&profile, &agent, &base, &tokens, &bots).map(|()| echoed.elapsed());
    let webhooks = echoes.as_ref().map_err(|_| "after the failed echoes".to_string()).and_then(|_| webhook_each(&profile, &agent, &base, &tokens, &bots, pid));
    if echoes.is_err() || webhooks.is_err() {
        eprintln!("bench_bots: gateway stderr, last lines:\n{}", tail(&gateway.stderr_text()));
    }
    // A restart, the everyday case (an upgrade, a reboot): every bot's state is there.
    let restart = stop(&mut gateway).and_then(|()| serve(&config_path, &base, &tokens, start_limit));
    report_idle(&format!("{n} idle bots"), n, (rss_kib, threads, fds));
    match echoes {
        Ok(took) => {
            let secs = took.as_secs_f64();
            println!("| {n} bots: one echo each (user → bot code → user) | {n} bots | {secs:.1} s ({:.0} ms per bot) |", 1000.0 * secs / n as f64)
        }
        Err(why) => println!("| {n} bots: one echo each (user → bot code → user) | {n} bots | FAILED: {why} |"),
    }
    match webhooks {
        Ok(idle) => report_idle(&format!("{n} idle webhook bots, one delivery each"), n, idle),
        Err(why) => println!("| {n} idle webhook bots, one delivery each | {n} bots | FAILED: {why} |"),
    }
    match restart {
        Ok((mut gateway, secs)) => {
            println!("| {n} bots: restart (state kept) until every bot answered getMe | {n} bots | {secs:.1} s |");
            gateway.kill();
        }
        Err(why) => println!("| {n} bots: restart (state kept) until every bot answered getMe | {n} bots | FAILED: {why} |"),
    }
}

/// Starts the gateway of `config_path` and asks each bot `getMe` in turn, again until all have
/// answered (bounded by `limit`): the gateway and the seconds from its spawn.
fn serve(config_path: &std::path::Path, base: &str, tokens: &[String], limit: Duration) -> Result<(Proc, f64), String> {
    let mut cmd = std::process::Command::new(gateway_bin());
    cmd.arg("serve").arg(config_path).env("RUST_LOG", "warn");
    let started = Instant::now();
    let (mut gateway, out) = Proc::spawn("bot-gateway", cmd);
    gateway.drain_stdout(out);
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let mut waiting: Vec<usize> = (0..tokens.len()).collect();
    while !waiting.is_empty() {
        if started.elapsed() > limit {
            eprintln!("bench_bots: gateway stderr, last lines:\n{}", tail(&gateway.stderr_text()));
            gateway.kill();
            return Err(format!("{} bots did not answer in {} s", waiting.len(), limit.as_secs()));
        }
        waiting.retain(|&i| !matches!(agent.get(&format!("{base}/bot{}/getMe", tokens[i])).call(), Ok(r) if r.status() == 200));
        if !waiting.is_empty() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok((gateway, started.elapsed().as_secs_f64()))
}

/// Stops the gateway as a supervisor does (SIGTERM) and waits for it to exit.
fn stop(gateway: &mut Proc) -> Result<(), String> {
    // SAFETY: kill(2) on our own child's pid, with a signal number.
    unsafe { libc::kill(gateway.child.id() as libc::pid_t, libc::SIGTERM) };
    match gateway.wait_exit(Duration::from_secs(60)) {
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(format!("the gateway exited with {status} at SIGTERM")),
        None => {
            gateway.kill();
            Err("the gateway did not stop within 60 s of SIGTERM".to_string())
        }
    }
}

/// Sets a webhook for every bot (one local receiver), sends each one message, waits until all
/// were delivered and then the idle wait; the gateway's RSS (KiB), threads and descriptors.
fn webhook_each(
    profile: &bot_gateway::client::Profile,
    agent: &ureq::Agent,
    base: &str,
    tokens: &[String],
    bots: &[Value],
    pid: u32,
) -> Result<(u64, usize, usize), String> {
    let receiver = support::CountingReceiver::start();
    for (i, token) in tokens.iter().enumerate() {
        match agent.post(&format!("{base}/bot{token}/setWebhook")).send_json(json!({ "url": receiver.url })) {
            Ok(r) if r.status() == 200 => {}
            Ok(r) => return Err(format!("bot {i}: setWebhook answered {}", r.status())),
            Err(e) => return Err(format!("bot {i}: setWebhook: {e}")),
        }
    }
    for (i, bot) in bots.iter().enumerate() {
        let bot = format!("@{}", bot["username"].as_str().unwrap_or_default());
        profile.send_text(&bot, &format!("hook {i}")).map_err(|e| format!("bot {i}: the user's send: {e}"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    if let Err(got) = receiver.try_wait_for(tokens.len(), deadline) {
        return Err(format!("{got} of {} updates delivered in 120 s", tokens.len()));
    }
    std::thread::sleep(Duration::from_secs(env_u64("BENCH_BOTS_IDLE_SECS", 15)));
    let (threads, fds) = threads_and_fds(pid);
    Ok((status_kib(&pid.to_string(), "VmRSS:"), threads, fds))
}

/// A user sends each bot a message; this program reads it through the bot's `getUpdates`,
/// answers with `sendMessage`, and the user receives the answer. The first failure ends it.
fn echo_each(profile: &bot_gateway::client::Profile, agent: &ureq::Agent, base: &str, tokens: &[String], bots: &[Value]) -> Result<(), String> {
    let call = |token: &str, method: &str, params: Value| -> Result<Value, String> {
        match agent.post(&format!("{base}/bot{token}/{method}")).send_json(params) {
            Ok(r) => r.into_json().map_err(|e| format!("{method}: {e}")),
            Err(ureq::Error::Status(code, r)) => Err(format!("{method} answered {code}: {}", r.into_string().unwrap_or_default())),
            Err(e) => Err(format!("{method}: {}", e.kind())),
        }
    };
    for (i, token) in tokens.iter().enumerate() {
        let bot = format!("@{}", bots[i]["username"].as_str().unwrap_or_default());
        let text = format!("ping {i}");
        profile.send_text(&bot, &text).map_err(|e| format!("bot {i}: the user's send: {e}"))?;
        let mut offset = 0i64;
        let deadline = Instant::now() + Duration::from_secs(30);
        let chat_id = loop {
            if Instant::now() > deadline {
                return Err(format!("bot {i} got no update in 30 s"));
            }
            let resp = call(token, "getUpdates", json!({ "offset": offset, "timeout": 5 })).map_err(|e| format!("bot {i}: {e}"))?;
            let updates = resp["result"].as_array().cloned().unwrap_or_default();
            if let Some(u) = updates.last() {
                offset = u["update_id"].as_i64().unwrap_or(0) + 1;
            }
            if let Some(u) = updates.iter().find(|u| u["message"]["text"] == text.as_str()) {
                break u["message"]["chat"]["id"].clone();
            }
        };
        call(token, "sendMessage", json!({ "chat_id": chat_id, "text": format!("pong {i}") })).map_err(|e| format!("bot {i}: {e}"))?;
        call(token, "getUpdates", json!({ "offset": offset, "timeout": 0 })).map_err(|e| format!("bot {i}: {e}"))?;
        let got = profile.receive(Duration::from_secs(30), 1).map_err(|e| format!("bot {i}: the user's receive: {e}"))?;
        if got.first().map(|m| m.text.as_str()) != Some(format!("pong {i}").as_str()) {
            return Err(format!("bot {i}: the user received {:?}", got.first().map(|m| &m.text)));
        }
    }
    Ok(())
}

/// An idle row: RSS (KiB), threads and descriptors of the gateway serving `n` bots.
fn report_idle(what: &str, n: usize, (rss_kib, threads, fds): (u64, usize, usize)) {
    let mib = rss_kib as f64 / 1024.0;
    println!(
        "| {what}: RSS, threads, descriptors | {n} bots | {mib:.0} MiB ({:.2} MiB per bot), {threads} threads ({:.1} per bot), {fds} descriptors |",
        mib / n as f64,
        threads as f64 / n as f64
    );
}

/// The last lines of a log.
fn tail(text: &str) -> String {
    let last: Vec<&str> = text.lines().rev().take(15).collect();
    last.into_iter().rev().collect::<Vec<_>>().join("\n")
}
