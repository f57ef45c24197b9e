//! Backup while the gateway runs, restore into a fresh state_dir, and `check-state` (issue 46,
//! part 3): the real gateway and platform processes on loopback, a real user's client. Every
//! update queued before the backup is served after the restore; the user's next message opens
//! on the restored session; the bot's next message starts a new session (it never sends again on
//! keys it may have used after the backup); damage is found and named.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};

use support::{gateway_bin, Gateway, World};

fn run(args: &[&str], config: &Path, more: &[&str]) -> Output {
    Command::new(gateway_bin()).args(args).arg(config).args(more).output().expect("run bot-gateway")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn texts(updates: &[Value]) -> Vec<String> {
    updates.iter().filter_map(|u| u["message"]["text"].as_str().map(String::from)).collect()
}

#[test]
fn a_backup_made_under_load_restores_into_a_fresh_state_dir_with_every_update_queued_before_it() {
    let mut world = World::start("backup_bot");
    let alice = world.user("alice");
    let before: Vec<String> = (0..10).map(|i| format!("before {i}")).collect();
    for t in &before {
        alice.send_text("@backup_bot", t).expect("send");
    }
    let queued = world.gateway.poll_until(0, before.len());
    assert_eq!(texts(&queued), before);
    let chat_id = queued[0]["message"]["chat"]["id"].as_i64().expect("chat id");
    let (status, _) = world.gateway.call("sendMessage", json!({"chat_id": chat_id, "text": "hello alice"}));
    assert_eq!(status, 200);
    assert_eq!(alice.receive(Duration::from_secs(30), 1).expect("receive")[0].text, "hello alice");

    // The backup runs while Alice keeps writing.
    let config = world.gateway.config_path.clone();
    let out = world.dir.path().join("backup");
    let running = Command::new(gateway_bin())
        .arg("backup")
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the backup");
    for i in 0..10 {
        alice.send_text("@backup_bot", &format!("during {i}")).expect("send");
    }
    let backup = running.wait_with_output().expect("backup ran");
    assert!(backup.status.success(), "backup: {}", text(&backup));
    assert!(text(&backup).contains("bot @backup_bot: backed up to") && text(&backup).contains("checked"), "{}", text(&backup));
    let manifest: Value = serde_json::from_slice(&std::fs::read(out.join("backup.json")).expect("manifest")).expect("json");
    assert_eq!(manifest["bots"][0]["username"], "backup_bot");

    // check-state beside the running gateway: whole.
    let checked = run(&["check-state"], &config, &[]);
    assert!(checked.status.success() && text(&checked).contains("is whole"), "{}", text(&checked));

    // A restore refuses to run beside the gateway (it takes the state_dir's lock).
    let beside = run(&["restore"], &config, &["--from", out.to_str().expect("utf-8")]);
    assert_eq!(beside.status.code(), Some(1), "{}", text(&beside));
    assert!(text(&beside).contains("in use by another bot-gateway"), "{}", text(&beside));

    // The machine is lost: the gateway stops, and a fresh state_dir gets the backup.
    world.gateway.proc.kill();
    let mut fresh: Value = serde_json::from_slice(&std::fs::read(&config).expect("config")).expect("json");
    fresh["state_dir"] = json!(world.dir.path().join("state-fresh"));
    let fresh_config = world.dir.path().join("fresh.json");
    support::write_config(&fresh_config, &fresh);
    let restored = run(&["restore"], &fresh_config, &["--from", out.to_str().expect("utf-8")]);
    assert!(restored.status.success(), "restore: {}", text(&restored));
    assert!(text(&restored).contains("bot @backup_bot: restored (device"), "{}", text(&restored));

    world.gateway = Gateway::start(&fresh_config);
    let served = texts(&world.gateway.poll_until(0, before.len()));
    assert_eq!(served[..before.len()], before[..], "every update queued before the backup, in order");

    // Alice's next message opens on the restored session.
    alice.send_text("@backup_bot", "after the restore").expect("send");
    let last = world.gateway.poll_until(0, served.len() + 1);
    assert_eq!(texts(&last).last().map(String::as_str), Some("after the restore"));
    // The bot's next message starts a new session, which Alice opens; then she answers on it.
    let (status, body) = world.gateway.call("sendMessage", json!({"chat_id": chat_id, "text": "back from the backup"}));
    assert_eq!(status, 200, "{body}");
    let got = alice.receive(Duration::from_secs(30), 1).expect("receive");
    assert_eq!(got.iter().map(|m| m.text.as_str()).collect::<Vec<_>>(), ["back from the backup"]);
    alice.send_text("@backup_bot", "on the new session").expect("send");
    let newest = world.gateway.poll_until(0, texts(&last).len() + 1);
    assert_eq!(texts(&newest).last().map(String::as_str), Some("on the new session"));
    let stderr = world.gateway.proc.stderr_text();
    assert!(stderr.contains("restored from a backup: replaced the one-time prekeys"), "{stderr}");

    // Damage in the restored database: check-state finds it and names the fix.
    world.gateway.proc.kill();
    let db = world.dir.path().join("state-fresh").join(format!("bot-{}.db", world.bot["compat_user_id"].as_u64().expect("id")));
    let _ = std::fs::remove_file(format!("{}-wal", db.display()));
    let _ = std::fs::remove_file(format!("{}-shm", db.display()));
    let mut bytes = std::fs::read(&db).expect("db");
    assert!(bytes.len() > 5 * 4096, "{} bytes", bytes.len());
    for b in &mut bytes[3 * 4096 + 64..3 * 4096 + 512] {
        *b ^= 0xa5;
    }
    std::fs::write(&db, &bytes).expect("damage");
    let damaged = run(&["check-state"], &fresh_config, &[]);
    assert_eq!(damaged.status.code(), Some(1), "{}", text(&damaged));
    assert!(text(&damaged).contains("is damaged") && text(&damaged).contains("bot-gateway restore"), "{}", text(&damaged));
}
