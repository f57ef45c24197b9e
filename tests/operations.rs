//! Operating the gateway: `/metrics` after traffic (and a real Prometheus parser accepts it),
//! `/healthz` on both listeners, first contact (the config @BotManager hands out runs as is
//! once state_dir is filled in; a refused credential says whether the bot was disabled or its
//! token replaced; a wrong token is logged at info, redacted).

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{ask_manager, free_port, reply_line, write_config, Gateway, PlatformServer, World};

fn get(url: &str) -> (u16, String, String) {
    match ureq::get(url).timeout(Duration::from_secs(10)).call() {
        Ok(r) | Err(ureq::Error::Status(_, r)) => {
            let status = r.status();
            let ct = r.header("Content-Type").unwrap_or("").to_string();
            (status, ct, r.into_string().expect("body"))
        }
        Err(e) => panic!("GET {url}: {e}"),
    }
}

/// The value of the sample `name{labels}` in a scrape; there must be one.
fn sample(scrape: &str, series: &str) -> f64 {
    support::metric_sample(scrape, series).unwrap_or_else(|| panic!("no sample {series} with a number in\n{scrape}"))
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The Python of the pinned SDK venv (scripts/sdk-setup.sh installs prometheus_client there),
/// or `PROMETHEUS_PARSER_PYTHON`.
fn parser_python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PROMETHEUS_PARSER_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/.venv/bin/python");
    venv.is_file().then_some(venv)
}

const PARSER_CHECK: &str = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
families = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
want = {
    "botgw_updates_received": "counter", "botgw_updates_delivered": "counter",
    "botgw_bot_api_requests": "counter", "botgw_queue_depth": "gauge",
    "botgw_get_updates_duration_seconds": "histogram", "botgw_send_message_duration_seconds": "histogram",
    "botgw_platform_reconnects": "counter", "process_threads": "gauge",
    "botgw_platform_call_duration_seconds": "histogram",
}
for name, kind in want.items():
    if name not in families or families[name].type != kind:
        sys.exit(f"{name}: want a {kind}; parsed {sorted((f.name, f.type) for f in families.values())}")
received = [s.value for s in families["botgw_updates_received"].samples if s.name == "botgw_updates_received_total"]
if received != [3.0]:
    sys.exit(f"botgw_updates_received_total parsed as {received}")
print("parsed", len(families), "families")
"#;

/// Runs the real Prometheus parser over `scrape` when it is installed; scripts/test.sh sets
/// `BOTGW_REQUIRE_PROMETHEUS_PARSER=1`, so there a missing parser fails instead of skipping.
fn prometheus_parser_accepts(scrape: &str, dir: &Path) {
    let required = std::env::var("BOTGW_REQUIRE_PROMETHEUS_PARSER").is_ok_and(|v| v == "1");
    let Some(python) = parser_python() else {
        assert!(!required, "no Python with prometheus_client: run scripts/sdk-setup.sh");
        eprintln!("prometheus_client not installed (scripts/sdk-setup.sh): parser check skipped");
        return;
    };
    let file = dir.join("scrape.txt");
    std::fs::write(&file, scrape).expect("write scrape");
    let out = std::process::Command::new(&python).args(["-c", PARSER_CHECK]).arg(&file).output().expect("run python");
    let err = String::from_utf8_lossy(&out.stderr);
    if !required && err.contains("No module named 'prometheus_client'") {
        eprintln!("prometheus_client not installed in {}: parser check skipped", python.display());
        return;
    }
    assert!(out.status.success(), "the Prometheus parser refused /metrics: {err}\n{scrape}");
}

#[test]
fn metrics_count_the_traffic_and_parse() {
    let w = World::start("metered_bot");
    let gw = &w.gateway;
    let user = w.user("mia");
    for i in 0..3 {
        user.send_text("@metered_bot", &format!("m{i}")).expect("send");
    }
    let updates = gw.poll_until(0, 3);
    let chat = updates[0]["message"]["chat"]["id"].clone();
    let next = updates[2]["update_id"].as_i64().expect("id") + 1;
    // Confirming the three delivers them.
    assert_eq!(gw.call("getUpdates", json!({"offset": next, "timeout": 0})).0, 200);
    for text in ["a", "b"] {
        let (status, body) = gw.call("sendMessage", json!({"chat_id": chat, "text": text}));
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(gw.call("sendMessage", json!({"text": "no chat"})).0, 400);
    assert_eq!(gw.call("sendPigeon", json!({})).0, 404);

    let bot = "bot=\"@metered_bot\"";
    // A sent message is answered before the outbox records the platform's answer (decision
    // 0129): the outbox is empty a moment after the last answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (status, content_type, scrape) = loop {
        let (status, content_type, scrape) = get(&format!("{}/metrics", gw.ext_base));
        if sample(&scrape, &format!("botgw_outbox_depth{{{bot}}}")) == 0.0 || Instant::now() > deadline {
            break (status, content_type, scrape);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status, 200);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert_eq!(sample(&scrape, &format!("botgw_updates_received_total{{{bot}}}")), 3.0);
    assert_eq!(sample(&scrape, &format!("botgw_updates_delivered_total{{{bot}}}")), 3.0);
    assert_eq!(sample(&scrape, &format!("botgw_queue_depth{{{bot}}}")), 0.0);
    assert_eq!(sample(&scrape, &format!("botgw_outbox_depth{{{bot}}}")), 0.0);
    assert_eq!(sample(&scrape, &format!("botgw_platform_connected{{{bot}}}")), 1.0);
    assert_eq!(sample(&scrape, &format!("botgw_platform_reconnects_total{{{bot}}}")), 0.0);
    assert_eq!(sample(&scrape, &format!("botgw_decrypt_failures_total{{{bot}}}")), 0.0);
    assert_eq!(sample(&scrape, &format!("botgw_webhook_attempts_total{{{bot}}}")), 0.0);
    assert_eq!(sample(&scrape, &format!("botgw_bot_api_requests_total{{{bot},method=\"sendMessage\",status=\"200\"}}")), 2.0);
    assert_eq!(sample(&scrape, &format!("botgw_bot_api_requests_total{{{bot},method=\"sendMessage\",status=\"400\"}}")), 1.0);
    assert_eq!(sample(&scrape, &format!("botgw_bot_api_requests_total{{{bot},method=\"other\",status=\"404\"}}")), 1.0);
    assert_eq!(sample(&scrape, &format!("botgw_send_message_duration_seconds_count{{{bot}}}")), 3.0);
    assert_eq!(sample(&scrape, &format!("botgw_send_message_duration_seconds_bucket{{{bot},le=\"+Inf\"}}")), 3.0);
    assert!(sample(&scrape, &format!("botgw_get_updates_duration_seconds_count{{{bot}}}")) >= 2.0);
    // Each message sent was a reservation and a send on the platform (counted over all bots).
    assert!(sample(&scrape, "botgw_platform_call_duration_seconds_count{method=\"ReserveMessageIds\"}") >= 2.0);
    assert!(sample(&scrape, "botgw_platform_call_duration_seconds_count{method=\"SendMessages\"}") >= 2.0);
    assert!(sample(&scrape, "botgw_platform_call_duration_seconds_sum{method=\"SendMessages\"}") > 0.0);
    assert!(sample(&scrape, "process_threads") > 10.0);
    assert!(sample(&scrape, "process_open_fds") > 3.0);
    assert!(sample(&scrape, "process_resident_memory_bytes") > 1e6);
    // Only the extensions listener serves it.
    assert_eq!(get(&format!("{}/metrics", gw.base)).0, 404);
    prometheus_parser_accepts(&scrape, w.dir.path());
}

#[test]
fn healthz_reports_each_bot_on_both_listeners() {
    let w = World::start("healthy_bot");
    let gw = &w.gateway;
    for base in [&gw.base, &gw.ext_base] {
        let (status, content_type, body) = get(&format!("{base}/healthz"));
        assert_eq!((status, content_type.as_str()), (200, "application/json"), "{body}");
        let h: Value = serde_json::from_str(&body).expect("json");
        assert_eq!((h["ok"].clone(), h["status"].clone()), (json!(true), json!("ok")), "{h}");
        assert_eq!(h["compatibility_profile_id"], "compat-v1-core-preview-4");
        assert_eq!(h["bot_api"]["serving"], true);
        let b = &h["bots"][0];
        assert_eq!(b["username"], "healthy_bot");
        assert_eq!((b["connected"].clone(), b["revoked"].clone()), (json!(true), json!(false)), "{b}");
        assert_eq!((b["queue_depth"].clone(), b["outbox_depth"].clone()), (json!(0), json!(0)), "{b}");
        assert_eq!(b["mode"], "polling");
        assert!(b.get("failed_threads").is_none() && b.get("credential").is_none(), "{b}");
    }
}

/// A /newbot dialog's final reply, the gateway config snippet in it, and the recovery secret
/// the owner's client drew (the reply never carries it).
fn new_bot_snippet(owner: &bot_gateway::client::Profile, username: &str) -> (String, String, String) {
    let request = bot_gateway::client::NewBot {
        username: username.to_string(),
        display_name: "First Contact".to_string(),
        capabilities: "default".to_string(),
    };
    let bot = owner.create_bot("@BotManager", &request).expect("/newbot");
    let done = bot.reply.clone();
    let start = done.find("Full gateway config").expect("the reply has a full config");
    let json_start = start + done[start..].find('{').expect("a JSON object");
    (done.clone(), done[json_start..].trim().to_string(), bot.secret_hex.to_string())
}

#[test]
fn the_config_botmanager_hands_out_runs_as_is() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let owner = bot_gateway::client::Profile::register(&platform.url, dir.path().join("owner"), "owner", "Owner")
        .expect("register owner");
    let (reply, snippet, secret) = new_bot_snippet(&owner, "first_bot");
    let mut config: Value = serde_json::from_str(&snippet).expect("the snippet is JSON");
    // It names the platform endpoint the user reached, not a default port.
    assert_eq!(config["bot_platform_endpoint"], platform.url.as_str(), "{snippet}");
    assert_eq!(config["bots"][0]["token"], reply_line(&reply, "Token").as_str());
    assert_eq!((config["compat_listen_addr"].as_str(), config["extensions_listen_addr"].as_str()), (Some("127.0.0.1:8081"), Some("127.0.0.1:8082")));

    // Saved as is, the placeholder is refused with a clear message, by serve and check-config.
    let path = dir.path().join("gateway.json");
    write_config(&path, &config);
    let out = std::process::Command::new(support::gateway_bin()).arg("serve").arg(&path).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("state_dir is still the placeholder") && err.contains("replace it"), "{err}");

    // The owner's two additions: state_dir, and the secret their client drew (the platform
    // never had it; `e2e-chat newbot --config` fills both in). The standard ports are swapped
    // for free ones only because tests run side by side on this machine.
    assert!(config["bots"][0]["identity_recovery_secret_hex"].as_str().expect("string").starts_with('<'));
    assert!(!reply.contains(&secret) && !snippet.contains(&secret), "the reply never carries the secret");
    config["state_dir"] = json!(dir.path().join("state"));
    config["bots"][0]["identity_recovery_secret_hex"] = json!(secret);
    config["compat_listen_addr"] = json!("127.0.0.1:0");
    config["extensions_listen_addr"] = json!("127.0.0.1:0");
    write_config(&path, &config);
    let gw = Gateway::start(&path);
    let user = bot_gateway::client::Profile::register(&platform.url, dir.path().join("user"), "fay", "Fay").expect("user");
    user.send_text("@first_bot", "hello first bot").expect("send");
    assert_eq!(gw.poll_until(0, 1)[0]["message"]["text"], "hello first bot");
}

#[test]
fn a_refused_credential_says_disabled_or_replaced_and_what_to_do() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let owner = bot_gateway::client::Profile::register(&platform.url, dir.path().join("owner"), "owner", "Owner")
        .expect("register owner");
    let start = |name: &str| {
        let (_, snippet, secret) = new_bot_snippet(&owner, name);
        let mut bot: Value = serde_json::from_str::<Value>(&snippet).expect("json")["bots"][0].clone();
        bot["identity_recovery_secret_hex"] = json!(secret);
        let path = dir.path().join(format!("{name}.json"));
        write_config(&path, &support::gateway_config(&platform.url, &dir.path().join(name), &bot));
        (Gateway::start(&path), bot)
    };
    let (replaced, replaced_bot) = start("replaced_bot");
    let (disabled, _) = start("disabled_bot");

    // A wrong token: 401, and one info line with the secret redacted.
    let id = replaced_bot["compat_user_id"].as_u64().expect("id");
    let secret = "cd".repeat(32);
    let (status, _) = support::call_url(&format!("{}/bot{id}:{secret}/getMe", replaced.base), json!({}));
    assert_eq!(status, 401);
    wait_until("the refusal in the log", || replaced.proc.stderr_text().contains(&format!("refused POST /bot{id}:<redacted>/getMe")));
    let log = replaced.proc.stderr_text();
    assert!(log.contains(" INFO ") && !log.contains(&secret), "{log}");

    let reply = ask_manager(&owner, "/token @replaced_bot");
    assert!(reply.contains("Token: "), "{reply}");
    let reply = ask_manager(&owner, "/disable @disabled_bot");
    assert!(reply.contains("is disabled"), "{reply}");

    for (gw, name, kind, advice) in [
        (&replaced, "replaced_bot", "token_replaced", "/token @replaced_bot"),
        (&disabled, "disabled_bot", "bot_disabled", "was disabled by its owner"),
    ] {
        wait_until("the refusal in /healthz", || gw.health()["bots"][0]["revoked"] == true);
        let (status, _, body) = get(&format!("{}/healthz", gw.ext_base));
        assert_eq!(status, 503, "a refused credential is unhealthy: {body}");
        let h: Value = serde_json::from_str(&body).expect("json");
        let b = &h["bots"][0];
        assert_eq!((h["status"].clone(), b["credential"].clone()), (json!("unhealthy"), json!(kind)), "{h}");
        let problem = b["problem"].as_str().expect("problem");
        assert!(problem.contains(advice) && problem.contains("restart the gateway"), "{name}: {problem}");
        wait_until("the refusal in the log", || gw.proc.stderr_text().contains(advice));
        assert!(gw.proc.stderr_text().contains(&format!("ERROR bot_gateway::gateway::runtime] bot @{name}: ")), "{name}");
    }
    // A start with the replaced token fails saying the same.
    let path = dir.path().join("stale.json");
    write_config(&path, &support::gateway_config(&platform.url, &dir.path().join("stale"), &replaced_bot));
    let out = std::process::Command::new(support::gateway_bin()).arg("serve").arg(&path).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no longer accepts bot @replaced_bot's token") && err.contains("bots[].token"), "{err}");
}

/// A thread dump names every thread of the gateway by its job and its bot (docs/operations.md,
/// "Threads"): the per-bot threads, the webhook's while it delivers, and gRPC core's
/// completion queues that every bot's channel shares. (tests/webhook.rs follows the webhook's
/// threads through idle and back.)
#[cfg(target_os = "linux")]
#[test]
fn every_thread_of_a_bot_is_named_after_its_number() {
    let w = World::start("named_bot");
    let pid = w.gateway.proc.child.id();
    let names = || support::thread_names(pid);
    let now = names();
    for expected in ["bot-gateway", "ins/1", "grpc-cq-0", "compat-http-acc", "upkeep"] {
        assert!(now.iter().any(|n| n == expected), "no thread {expected} in {now:?}");
    }
    assert!(!now.iter().any(|n| n == "wh/1" || n == "whr/1"), "a polling bot has no webhook threads: {now:?}");
    assert!(!now.iter().any(|n| n.starts_with("grpc-poll") || n.starts_with("grpc-1-")), "a completion queue of its own: {now:?}");
    // The writer, the inbox and the outbox run on demand: idle, the bot keeps only ins/1.
    let deadline = Instant::now() + Duration::from_secs(40);
    while names().iter().any(|n| ["wr/1", "in/1", "out/1"].contains(&n.as_str())) {
        assert!(Instant::now() < deadline, "on-demand threads still there when idle: {:?}", names());
        std::thread::sleep(Duration::from_millis(200));
    }
    // setWebhook starts delivery (nothing listens there: delivery fails and retries, so wh/1
    // stays; the reply runner starts once a delivered answer carries a call).
    let url = format!("http://127.0.0.1:{}/hook", free_port());
    let (status, body) = w.gateway.call("setWebhook", json!({ "url": url }));
    assert_eq!(status, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !names().iter().any(|n| n == "wh/1") {
        assert!(Instant::now() < deadline, "no webhook thread after setWebhook: {:?}", names());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The setting was written: the writer came back for it (and stays 10 s).
    assert!(names().iter().any(|n| n == "wr/1"), "the writer runs after a write: {:?}", names());
}
