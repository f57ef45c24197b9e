//! A bot's database that lost its contents is refused, not replaced (issue 46, part 2): the
//! real gateway and platform processes on loopback, the damage done to the files as operators
//! and backups do it. A clean stop leaves the `.db` alone holding everything; a held bot whose
//! `.db` is emptied, deleted or left without its tables is refused with the sentence and both
//! ways on, writing nothing; `reset-state` starts it anew on purpose.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use support::{gateway_bin, Gateway, World};

fn files(db: &Path) -> [PathBuf; 3] {
    ["", "-wal", "-shm"].map(|s| PathBuf::from(format!("{}{s}", db.display())))
}

/// The length and a digest of each of the database's files (absent: none).
fn snapshot(db: &Path) -> Vec<Option<(usize, u64)>> {
    use std::hash::{Hash, Hasher};
    files(db)
        .iter()
        .map(|f| {
            std::fs::read(f).ok().map(|bytes| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut h);
                (bytes.len(), h.finish())
            })
        })
        .collect()
}

fn stop(gw: &mut Gateway) {
    // SAFETY: kill(2) on the child's pid; no memory is involved.
    unsafe { libc::kill(gw.proc.child.id() as i32, libc::SIGTERM) };
    assert!(gw.proc.wait_exit(Duration::from_secs(20)).is_some_and(|s| s.success()), "a clean stop");
}

/// `bot-gateway serve` that must refuse to start: its stderr.
fn refused_start(config: &Path) -> String {
    let out = std::process::Command::new(gateway_bin()).arg("serve").arg(config).env("RUST_LOG", "info").output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "refused: {err}");
    err
}

#[test]
fn a_held_bots_lost_database_is_refused_untouched_and_reset_only_on_purpose() {
    let mut world = World::start("held_bot");
    let user = world.user("alice");
    user.send_text("@held_bot", "keep me").expect("send");
    world.gateway.poll_until(0, 1);
    let state = world.dir.path().join("state");
    let db = state.join(format!("bot-{}.db", world.bot["compat_user_id"].as_u64().expect("id")));
    let config = world.gateway.config_path.clone();
    let held: Value = serde_json::from_slice(&std::fs::read(state.join("held-bots.json")).expect("the record")).expect("json");
    let device = held["bots"][world.bot["compat_user_id"].as_u64().unwrap().to_string()]["device_id"].as_u64().expect("device");

    // A clean stop: the .db alone is the state (a copy without the -wal loses nothing).
    stop(&mut world.gateway);
    assert_eq!(std::fs::metadata(&files(&db)[1]).map(|m| m.len()).unwrap_or(0), 0, "the -wal is checkpointed away");
    let whole = std::fs::read(&db).expect("db");
    assert!(whole.len() > 4096, "the .db holds the state: {} bytes", whole.len());

    // Emptied, deleted, or without tables: refused with both ways on, and nothing written.
    let damages: [(&str, &dyn Fn()); 3] = [
        ("is empty (0 bytes)", &|| std::fs::write(&db, b"").expect("truncate")),
        ("is missing", &|| std::fs::remove_file(&db).expect("delete")),
        ("holds no tables", &|| {
            // A keyed database with nothing in it: a .db copied without its -wal by a release
            // that left everything in the log.
            let _ = std::fs::remove_file(&db);
            let c = rusqlite::Connection::open(&db).expect("open");
            let key = bot_gateway::gateway::store::database_key(&secret(&world.bot));
            c.pragma_update(None, "key", format!("x'{}'", bot_gateway::crypto::hex_encode(&key))).expect("key");
            c.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v); DROP TABLE t;").expect("one page");
        }),
    ];
    for (what, damage) in damages {
        damage();
        let before = snapshot(&db);
        let err = refused_start(&config);
        assert!(err.contains(what) && err.contains(&format!("device {device}")), "{what}: {err}");
        assert!(err.contains("Restore the database together with its -wal") && err.contains("bot-gateway reset-state"), "{err}");
        assert_eq!(snapshot(&db), before, "{what}: the files are untouched");
    }

    // Restored from the copy: it starts as the same device, with the update still queued.
    std::fs::write(&db, &whole).expect("restore");
    world.gateway = Gateway::start(&config);
    let updates = world.gateway.poll_until(0, 1);
    assert_eq!(updates[0]["message"]["text"], "keep me");
    stop(&mut world.gateway);

    // On purpose: reset-state says what it throws away and moves the files aside.
    let out = std::process::Command::new(gateway_bin()).args(["reset-state"]).arg(&config).arg("@held_bot").output().expect("reset");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains(&format!("device {device}")) && said.contains("updates") && said.contains(".reset-"), "{said}");
    assert!(!db.exists());
    world.gateway = Gateway::start(&config);
    let (status, body) = world.gateway.call("getUpdates", json!({"timeout": 0}));
    assert_eq!((status, body["result"].as_array().map(Vec::len)), (200, Some(0)), "a new start: {body}");
    let held: Value = serde_json::from_slice(&std::fs::read(state.join("held-bots.json")).expect("record")).expect("json");
    let now = held["bots"][world.bot["compat_user_id"].as_u64().unwrap().to_string()]["device_id"].as_u64().expect("device");
    assert_ne!(now, device, "a new device");
}

fn secret(bot: &Value) -> [u8; 32] {
    let hex = bot["identity_recovery_secret_hex"].as_str().expect("secret");
    bot_gateway::crypto::hex_decode_32(hex).expect("hex")
}

#[test]
fn a_database_with_a_damaged_header_is_refused_and_neither_it_nor_its_wal_is_touched() {
    let mut world = World::start("header_bot");
    let user = world.user("bob");
    user.send_text("@header_bot", "in the log").expect("send");
    world.gateway.poll_until(0, 1);
    // The first message used a one-time prekey, whose deletion checkpoints the log away
    // (`e2e::wal`); the second commits frames that stay in it.
    user.send_text("@header_bot", "still in the log").expect("send");
    world.gateway.poll_until(0, 2);
    let state = world.dir.path().join("state");
    let db = state.join(format!("bot-{}.db", world.bot["compat_user_id"].as_u64().expect("id")));
    let config = world.gateway.config_path.clone();
    // Killed while the writer holds its connection: the -wal keeps what was last committed.
    world.gateway.proc.kill();
    assert!(std::fs::metadata(&files(&db)[1]).map(|m| m.len()).unwrap_or(0) > 0, "a -wal beside the .db");

    // The first 16 bytes (SQLCipher's salt) overwritten: the key no longer opens page 1.
    let mut bytes = std::fs::read(&db).expect("db");
    bytes[..16].fill(0);
    std::fs::write(&db, &bytes).expect("damage");
    let before = snapshot(&db);
    let err = refused_start(&config);
    assert!(err.contains("does not open under the key") && err.contains("restore it from a backup"), "{err}");
    assert_eq!(snapshot(&db), before, "the .db, its -wal and -shm are as they were");
}
