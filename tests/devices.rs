//! The devices of a bot: two gateway runtimes (two state_dirs) of one bot are two devices;
//! the owner lists them with `/devices` and removes one with `/removedevice`, after which that
//! gateway says why and stops while users' messages reach the remaining device only; and a
//! gateway that cannot start registers no device.

mod support;

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{ask_manager, create_bot_via_manager, gateway_config, write_config, Gateway, PlatformServer, Proc};

struct Setup {
    dir: tempfile::TempDir,
    platform: PlatformServer,
}

fn setup() -> Setup {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    Setup { dir, platform }
}

impl Setup {
    fn profile(&self, name: &str) -> bot_gateway::client::Profile {
        bot_gateway::client::Profile::register(&self.platform.url, self.dir.path().join(name), name, name)
            .expect("register")
    }

    fn config(&self, bot: &Value, state: &str) -> Value {
        gateway_config(&self.platform.url, &self.dir.path().join(state), bot)
    }

    fn start_gateway(&self, bot: &Value, state: &str) -> Gateway {
        let path = self.dir.path().join(format!("{state}.json"));
        write_config(&path, &self.config(bot, state));
        Gateway::start(&path)
    }

    /// Runs a gateway that must fail to start (bounded wait); returns its stderr.
    fn refused(&self, config: &Value, name: &str) -> String {
        let path = self.dir.path().join(format!("{name}.json"));
        write_config(&path, config);
        let mut cmd = Command::new(support::gateway_bin());
        cmd.arg("serve").arg(&path).env("RUST_LOG", "info");
        let (mut proc, out) = Proc::spawn(name, cmd);
        proc.drain_stdout(out);
        let status = proc.wait_exit(Duration::from_secs(30));
        let stderr = proc.stderr_text();
        let status = status.unwrap_or_else(|| panic!("{name}: the gateway kept running; stderr:\n{stderr}"));
        assert!(!status.success(), "{name}: the gateway must exit non-zero; stderr:\n{stderr}");
        stderr
    }

    /// Rows of the bot's devices in platform.db (a read-only look; the server keeps running).
    fn device_count(&self, bot_id: u64) -> i64 {
        let conn = rusqlite::Connection::open_with_flags(
            self.platform.data_dir.join("platform.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("open platform.db");
        conn.query_row("SELECT COUNT(*) FROM devices WHERE account_id = ?1", [bot_id as i64], |r| r.get(0))
            .expect("count devices")
    }

    /// Undelivered inbox entries of one device in platform.db.
    fn inbox_entries(&self, bot_id: u64, device_id: u32) -> i64 {
        let conn = rusqlite::Connection::open_with_flags(
            self.platform.data_dir.join("platform.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("open platform.db");
        conn.query_row(
            "SELECT COUNT(*) FROM inbox WHERE account_id = ?1 AND device_id = ?2",
            [bot_id as i64, device_id as i64],
            |r| r.get(0),
        )
        .expect("count inbox entries")
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The line of device `n` in a `/devices` reply.
fn device_line(listing: &str, n: u32) -> String {
    let prefix = format!("#{n}: ");
    listing.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no device {n} in {listing}")).to_string()
}

#[test]
fn the_owner_lists_and_removes_devices_and_the_removed_runtime_stops() {
    let s = setup();
    let owner = s.profile("owner");
    let bot = create_bot_via_manager(&owner, "twin_bot", "Twin");
    let bot_id = bot["compat_user_id"].as_u64().expect("id");

    let first = s.start_gateway(&bot, "state-a");
    let second = s.start_gateway(&bot, "state-b");
    assert_eq!(s.device_count(bot_id), 2, "each state_dir is a device");
    let warned = second.proc.stderr_text();
    assert!(warned.contains("1 other live device(s) of the bot are connected now (device 1)"), "{warned}");
    assert!(first.proc.stderr_text().contains("no other live device of the bot"), "{}", first.proc.stderr_text());

    // Both runtimes are listed, live; a stranger learns nothing.
    let listing = ask_manager(&owner, "/devices @twin_bot");
    assert!(listing.starts_with("Devices of @twin_bot:"), "{listing}");
    for n in [1, 2] {
        let line = device_line(&listing, n);
        assert!(line.contains("last seen now, connected, active"), "{line}");
        assert!(line.contains(" UTC"), "registered when: {line}");
    }
    assert!(listing.contains("2 devices are connected now"), "{listing}");
    let stranger = s.profile("mallory");
    assert!(ask_manager(&stranger, "/devices @twin_bot").starts_with("You have no bot @twin_bot"));
    assert!(ask_manager(&stranger, "/removedevice @twin_bot 2").starts_with("You have no bot @twin_bot"));

    // A message reaches both devices.
    let user = s.profile("ursula");
    user.send_text("@twin_bot", "to both").expect("send");
    let a = first.poll_until(0, 1);
    assert_eq!(a[0]["message"]["text"], "to both");
    assert_eq!(second.poll_until(0, 1)[0]["message"]["text"], "to both");
    let offset = a[0]["update_id"].as_i64().expect("update_id") + 1;

    // The owner removes device 2 (the second runtime).
    let reply = ask_manager(&owner, "/removedevice @twin_bot 2");
    assert!(reply.starts_with("Device 2 of @twin_bot is removed."), "{reply}");

    // The removed runtime says why, stops, and is unhealthy; its Bot API answers 401 with the reason.
    wait_until("the removed gateway to report it", || second.health()["bots"][0]["device_removed"] == true);
    let health = second.health();
    assert_eq!(health["status"], "unhealthy", "{health}");
    assert_eq!(health["ok"], false);
    let problem = health["bots"][0]["problem"].as_str().expect("a reason").to_string();
    assert!(problem.contains("device 2 was removed via @BotManager /removedevice"), "{problem}");
    let log = second.proc.stderr_text();
    assert!(
        log.contains("bot @twin_bot: this runtime's device 2 was removed via @BotManager /removedevice; it receives nothing more. Start it with a fresh state_dir"),
        "{log}"
    );
    assert_eq!(log.matches("was removed via @BotManager").count(), 1, "said once, not retried: {log}");
    let (status, body) = second.call("getMe", json!({}));
    assert_eq!(status, 401, "{body}");
    assert!(body["description"].as_str().expect("description").contains("removed via @BotManager"), "{body}");
    assert_eq!(first.health()["status"], "ok", "the remaining runtime is untouched");

    // The user's next message is encrypted for the remaining device only, and arrives there.
    user.send_text("@twin_bot", "only to the first").expect("send after the removal");
    assert_eq!(s.inbox_entries(bot_id, 2), 0, "nothing was sealed for the removed device");
    let a = first.poll_until(offset, 1);
    assert_eq!(a[0]["message"]["text"], "only to the first");
    let chat = a[0]["message"]["chat"]["id"].clone();
    let (status, body) = first.call("sendMessage", json!({ "chat_id": chat, "text": "still here" }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(user.receive(Duration::from_secs(30), 1).expect("receive")[0].text, "still here");

    // The listing shows the removal; removing again changes nothing.
    let listing = ask_manager(&owner, "/devices @twin_bot");
    assert!(device_line(&listing, 1).ends_with("connected, active"), "{listing}");
    let line = device_line(&listing, 2);
    assert!(line.contains("not connected, removed 2"), "{line}");
    assert!(!listing.contains("devices are connected now"), "{listing}");
    assert_eq!(ask_manager(&owner, "/removedevice @twin_bot 2"), "Device 2 of @twin_bot was already removed.");

    // Restarted on its old state_dir, the removed runtime refuses to start and says why.
    drop(second);
    let err = s.refused(&s.config(&bot, "state-b"), "removed-restart");
    assert!(err.contains("device 2 was removed via @BotManager /removedevice"), "{err}");
    assert_eq!(s.device_count(bot_id), 2, "no device was added");
}

#[test]
fn a_gateway_that_cannot_start_registers_no_device() {
    let s = setup();
    let bot = s.platform.create_bot("lonely_bot", "Lonely");
    let bot_id = bot["compat_user_id"].as_u64().expect("id");
    let running = s.start_gateway(&bot, "state-a");
    assert_eq!(s.device_count(bot_id), 1);

    // The Bot API port is taken: the start fails before registering anything.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut config = s.config(&bot, "state-b");
    config["compat_listen_addr"] = json!(taken.local_addr().expect("addr").to_string());
    let err = s.refused(&config, "port-taken");
    assert!(err.contains("cannot listen on compat_listen_addr"), "{err}");
    assert_eq!(s.device_count(bot_id), 1, "the failed start left no device behind");
    assert!(!Path::new(&s.dir.path().join("state-b")).join(format!("bot-{bot_id}.db")).exists(), "no bot state");

    // The extensions port taken by the running gateway: the same.
    let mut config = s.config(&bot, "state-c");
    config["extensions_listen_addr"] = json!(running.ext_base.trim_start_matches("http://"));
    let err = s.refused(&config, "ext-taken");
    assert!(err.contains("cannot listen on extensions_listen_addr"), "{err}");

    // A placeholder left from the example config is refused naming the field.
    let mut config = s.config(&bot, "state-d");
    config["bots"][0]["token"] = json!("<TOKEN>");
    let err = s.refused(&config, "placeholder");
    assert!(err.contains("token is still the placeholder \"<TOKEN>\""), "{err}");
    assert_eq!(s.device_count(bot_id), 1);
    assert_eq!(running.call("getMe", json!({})).0, 200, "the running gateway is unaffected");
}

/// The owner removes a device; a runtime of the bot signs the removal with the bot's identity;
/// a user's client learns it. When the platform later serves the device again (played here by
/// changing platform.db behind the server's back, the signed removal withheld), the client
/// refuses to encrypt for it: a removed device does not come back on the platform's word alone.
#[test]
fn a_signed_removal_keeps_a_device_out_when_the_platform_brings_it_back() {
    let s = setup();
    let owner = s.profile("owner");
    let bot = create_bot_via_manager(&owner, "signed_bot", "Signed");
    let bot_id = bot["compat_user_id"].as_u64().expect("id");
    let first = s.start_gateway(&bot, "state-a");
    let second = s.start_gateway(&bot, "state-b");
    let user = s.profile("ursula");
    user.send_text("@signed_bot", "to both").expect("send");
    assert_eq!(first.poll_until(0, 1)[0]["message"]["text"], "to both");
    assert_eq!(second.poll_until(0, 1)[0]["message"]["text"], "to both");

    assert!(ask_manager(&owner, "/removedevice @signed_bot 2").starts_with("Device 2 of @signed_bot is removed."));
    drop(second);
    // The remaining runtime signs the removal when it starts.
    drop(first);
    let first = s.start_gateway(&bot, "state-a");
    wait_until("the signed removal", || first.proc.stderr_text().contains("signed the removal of device 2 of the bot"));
    let platform_db = s.platform.data_dir.join("platform.db");
    let signed: i64 = rusqlite::Connection::open(&platform_db)
        .expect("open platform.db")
        .query_row("SELECT COUNT(*) FROM device_removals WHERE account_id = ?1 AND device_id = 2", [bot_id as i64], |r| r.get(0))
        .expect("count");
    assert_eq!(signed, 1, "the platform keeps the signed removal");

    // The user's next message: the platform says device 2 is gone, the client fetches and keeps
    // its signed removal.
    user.send_text("@signed_bot", "after the removal").expect("send");
    let profile_db = rusqlite::Connection::open(s.dir.path().join("ursula").join("profile.db")).expect("profile.db");
    let known: i64 = profile_db
        .query_row("SELECT COUNT(*) FROM e2e_removed_devices WHERE user_id = ?1 AND device_id = 2", [bot_id as i64], |r| r.get(0))
        .expect("count");
    assert_eq!(known, 1, "the client recorded the signed removal");

    // The platform brings device 2 back and withholds its removal.
    let conn = rusqlite::Connection::open(&platform_db).expect("open platform.db");
    conn.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    conn.execute_batch(&format!(
        "UPDATE devices SET active = 1, removed_at = NULL WHERE account_id = {bot_id} AND device_id = 2;
         DELETE FROM device_removals WHERE account_id = {bot_id};"
    ))
    .expect("the platform's lie");
    drop(conn);
    let err = user.send_text("@signed_bot", "not for device 2").expect_err("refused");
    assert!(err.to_string().contains("which its account removed"), "{err}");
    assert_eq!(s.inbox_entries(bot_id, 2), 0, "nothing was sealed for the device brought back");
}
