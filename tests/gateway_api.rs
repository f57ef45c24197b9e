//! The Bot API surface of a running gateway: authentication, long polling rules, errors, and
//! the start-up refusals. Real platform server and gateway on loopback.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{call_url, gateway_config, write_config, PlatformServer, World};

#[test]
fn tokens_that_are_malformed_or_not_this_bots_get_401() {
    let world = World::start("auth_bot");
    let token = world.gateway.token.clone();
    let (id, secret) = token.split_once(':').expect("token shape");
    let other_secret = "0".repeat(64);
    let bad = [
        format!("{token}x"),                  // extra characters
        secret.to_string(),                   // old format without numeric id
        format!("0:{secret}"),                // numeric id zero
        format!("{}:{secret}", 1u64 << 52),   // beyond 52 bits
        format!("{id}:{other_secret}"),       // not this bot's secret
        format!("{}:{secret}", id.parse::<u64>().expect("id") + 1), // another id
    ];
    for t in bad {
        let (status, body) = call_url(&format!("{}/bot{t}/getMe", world.gateway.base), json!({}));
        assert_eq!(status, 401, "token {t:?} must be refused, got {body}");
        assert_eq!(body["ok"], false);
        assert_eq!(body["error_code"], 401);
    }
    // The secret is compared as the platform compares it, by its bytes: hex case is not part
    // of the token.
    let upper = format!("{id}:{}", secret.to_uppercase());
    let (status, body) = call_url(&format!("{}/bot{upper}/getMe", world.gateway.base), json!({}));
    assert_eq!(status, 200, "the same token in upper-case hex: {body}");
    let (status, body) = world.gateway.call("getMe", json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["is_bot"], true);
    assert_eq!(body["result"]["username"], "auth_bot");
    assert_eq!(body["result"]["id"], world.bot["compat_user_id"]);
}

#[test]
fn a_newer_poll_terminates_the_waiting_one_with_409() {
    let world = World::start("poll_bot");
    let url = format!("{}/bot{}/getUpdates", world.gateway.base, world.gateway.token);
    let first = {
        let url = url.clone();
        std::thread::spawn(move || call_url(&url, json!({ "timeout": 20 })))
    };
    // Give the first poll time to start waiting (it waits up to 20 s, so this is not a race).
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let second = {
        let url = url.clone();
        std::thread::spawn(move || call_url(&url, json!({ "timeout": 1 })))
    };
    let (status, body) = first.join().expect("first poll");
    assert_eq!(status, 409, "the older poll is terminated: {body}");
    assert!(body["description"].as_str().unwrap_or("").contains("terminated by other getUpdates"));
    assert!(started.elapsed() < Duration::from_secs(15), "terminated at once, not at its timeout");
    let (status, body) = second.join().expect("second poll");
    assert_eq!(status, 200, "the newer poll is served: {body}");
}

#[test]
fn request_errors_are_clear() {
    let world = World::start("errors_bot");
    let gw = &world.gateway;
    let (status, body) = gw.call("sendMessage", json!({ "chat_id": 12345, "text": "hi" }));
    assert_eq!(status, 400);
    assert_eq!(
        body["description"], "Bad Request: chat not found (unknown private chat)",
        "the reference server's words, and the SPEC's"
    );

    let (status, body) = gw.call("getUpdates", json!({ "limit": 0 }));
    assert_eq!(status, 400, "{body}");
    let (status, body) = gw.call("getUpdates", json!({ "limit": 101 }));
    assert_eq!(status, 400, "{body}");
    // Names the gateway does not know are taken (SDKs send their whole list), an empty one not.
    let (status, body) = gw.call("getUpdates", json!({ "allowed_updates": ["message", "managed_bot"], "timeout": 0 }));
    assert_eq!(status, 200, "{body}");
    let (status, body) = gw.call("getUpdates", json!({ "allowed_updates": ["message", ""] }));
    assert_eq!(status, 400, "{body}");
    let (status, body) = gw.call("noSuchMethod", json!({}));
    assert_eq!(status, 404, "{body}");
    let (status, body) = gw.call("deleteWebhook", json!({}));
    assert_eq!(status, 200, "deleteWebhook is accepted in polling mode: {body}");
    assert_eq!(body["result"], true);

    // allowed_updates is stored durably: a later call without it keeps the filter.
    let (status, _) = gw.call("getUpdates", json!({ "allowed_updates": ["callback_query"], "timeout": 0 }));
    assert_eq!(status, 200);
    let alice = world.user("alice_f");
    alice.send_text(&format!("@{}", world.bot_username()), "filtered out").expect("send");
    std::thread::sleep(Duration::from_secs(2));
    let (_, body) = gw.call("getUpdates", json!({ "timeout": 1 }));
    assert_eq!(body["result"], json!([]), "messages are filtered by the stored allowed_updates");
    let (_, body) = gw.call("getUpdates", json!({ "allowed_updates": [], "timeout": 0 }));
    assert_eq!(body["result"], json!([]), "a message filtered at arrival is not queued later");
    alice.send_text(&format!("@{}", world.bot_username()), "now allowed").expect("send");
    let updates = gw.poll_until(0, 1);
    assert_eq!(updates[0]["message"]["text"], "now allowed", "[] restores the default set");

    let health = gw.health();
    assert_eq!(health["bots"][0]["connected"], true);
    assert!(health["bots"][0]["queue_depth"].as_i64().is_some());
    let ext: Value = ureq::get(&format!("{}/healthz", gw.ext_base)).call().expect("ext healthz").into_json().expect("json");
    assert_eq!(ext["bots"][0]["connected"], true);
}

fn run_gateway_expect_failure(config_path: &std::path::Path) -> String {
    let out = Command::new(support::gateway_bin()).arg("serve").arg(config_path).output().expect("run gateway");
    assert!(!out.status.success(), "the gateway must exit non-zero");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn start_up_refuses_bad_config_unreachable_platform_and_unusable_state() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let bot = platform.create_bot("startup_bot", "Startup");
    let config_path = dir.path().join("gateway.json");

    std::fs::write(&config_path, "{ not json").expect("write");
    std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    assert!(run_gateway_expect_failure(&config_path).contains("not valid JSON"));

    let good = gateway_config(&platform.url, &dir.path().join("state"), &bot);
    write_config(&config_path, &good);
    std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(run_gateway_expect_failure(&config_path).contains("chmod 600"));

    let mut unreachable = good.clone();
    unreachable["bot_platform_endpoint"] = json!(format!("http://127.0.0.1:{}", support::free_port()));
    write_config(&config_path, &unreachable);
    assert!(run_gateway_expect_failure(&config_path).contains("cannot reach bot_platform_endpoint"));

    let file_as_state = dir.path().join("not-a-dir");
    std::fs::write(&file_as_state, "x").expect("write");
    let mut bad_state = good.clone();
    bad_state["state_dir"] = json!(file_as_state);
    write_config(&config_path, &bad_state);
    assert!(run_gateway_expect_failure(&config_path).contains("state_dir"));

    // A second instance on the same state_dir is refused.
    write_config(&config_path, &good);
    let first = support::Gateway::start(&config_path);
    let mut second = good.clone();
    second["compat_listen_addr"] = json!("127.0.0.1:0");
    second["extensions_listen_addr"] = json!("127.0.0.1:0");
    let second_path = dir.path().join("second.json");
    write_config(&second_path, &second);
    assert!(run_gateway_expect_failure(&second_path).contains("in use by another bot-gateway instance"));
    drop(first);
}

#[test]
fn sigterm_ends_a_waiting_long_poll_and_exits_promptly() {
    let mut world = World::start("stopping_bot");
    let url = format!("{}/bot{}/getUpdates", world.gateway.base, world.gateway.token);
    let poll = std::thread::spawn(move || {
        let started = Instant::now();
        let r = call_url(&url, json!({ "timeout": 40 }));
        (r, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(world.gateway.proc.child.id() as i32, libc::SIGTERM) };
    let status = world.gateway.proc.wait_exit(Duration::from_secs(10)).expect("the gateway exits within 10 s");
    assert!(status.success(), "graceful stop exits 0: {status:?}");
    let ((code, body), took) = poll.join().expect("poll thread");
    assert_eq!(code, 200, "the waiting poll is answered, not dropped: {body}");
    assert!(took < Duration::from_secs(10), "answered at shutdown, not at its 40 s timeout");
}

/// A supervisor may close our stdout (or never read it): the listening lines must not take the
/// gateway down. This once killed the gateway whenever a test dropped its stdout pipe early.
#[test]
fn a_closed_stdout_does_not_stop_the_gateway() {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let bot = platform.create_bot("stdout_bot", "Stdout");
    let config_path = dir.path().join("gateway.json");
    let mut config = gateway_config(&platform.url, &dir.path().join("state"), &bot);
    // Its stdout is closed, so it cannot say where it listens: a port picked beforehand.
    config["compat_listen_addr"] = json!(format!("127.0.0.1:{}", support::free_port()));
    write_config(&config_path, &config);
    let mut child = Command::new(support::gateway_bin())
        .arg("serve")
        .arg(&config_path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn gateway");
    drop(child.stdout.take()); // the read end is gone before the gateway prints anything
    let health = format!("http://{}/healthz", config["compat_listen_addr"].as_str().expect("addr"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answered = 0;
    while answered < 5 {
        assert!(Instant::now() < deadline, "the gateway did not keep serving");
        assert!(child.try_wait().expect("try_wait").is_none(), "the gateway exited after stdout closed");
        if ureq::get(&health).timeout(Duration::from_secs(2)).call().is_ok() {
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    let _ = child.wait();
}
