//! Upgrades keep a user's state: a `state_dir`, a platform data directory and an `e2e-chat`
//! profile written by the release before schema versions (the fixture
//! `tests/fixtures/unversioned-v1`, see its README) open with this code, are adopted as schema
//! version 1 and migrated to the newest version, and keep the bot's queue, its ratchet sessions
//! and its webhook configuration. A file from a newer release is refused and left untouched.
//!
//! Every test works on a copy of the fixture in a temporary directory; the fixture itself is
//! never opened.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bot_gateway::gateway::store::{self, webhook, Store, StoreOpenError};
use rusqlite::Connection;
use serde_json::{json, Value};
use support::{ask_manager, gateway_config, write_config, Gateway, PlatformServer, Proc};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/unversioned-v1");
/// What the fixture's user sent, in order: three while the bot polled, one in webhook mode.
const QUEUED: [&str; 4] = ["queued one", "queued two: ünïcödé ✓", "queued three", "queued four, in webhook mode"];
const WEBHOOK_URL: &str = "http://127.0.0.1:9/fixture-hook";
const WEBHOOK_SECRET: &str = "fixture_secret_token";

/// A private copy of the fixture.
struct Fixture {
    dir: tempfile::TempDir,
    bot: Value,
}

impl Fixture {
    fn copy() -> Fixture {
        bot_gateway::crypto::init();
        let dir = tempfile::tempdir().expect("tempdir");
        copy_tree(Path::new(FIXTURE), dir.path());
        let bot = serde_json::from_slice(&std::fs::read(dir.path().join("bot.json")).expect("bot.json")).expect("json");
        Fixture { dir, bot }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn bot_db(&self) -> PathBuf {
        self.path("state").join(format!("bot-{}.db", self.bot["compat_user_id"]))
    }

    fn bot_id_hex(&self) -> &str {
        self.bot["bot_id_hex"].as_str().expect("bot_id_hex")
    }

    fn recovery_secret(&self) -> [u8; 32] {
        let hex = self.bot["identity_recovery_secret_hex"].as_str().expect("secret");
        bot_gateway::crypto::hex_decode_32(hex).expect("32 bytes of hex")
    }

    fn open_store(&self) -> Result<Store, StoreOpenError> {
        Store::open(&self.bot_db(), &self.recovery_secret(), self.bot_id_hex(), "upgrade")
    }

    /// A raw connection to the bot database, keyed like the gateway's.
    fn raw_bot_db(&self) -> Connection {
        keyed(&self.bot_db(), &self.recovery_secret())
    }

    /// The fixture user's numeric id, from the profile (read before anything migrates it).
    fn user_id(&self) -> i64 {
        let c = Connection::open(self.path("user/profile.db")).expect("profile.db");
        c.query_row("SELECT user_id FROM client_account WHERE id = 1", [], |r| r.get(0)).expect("account")
    }
}

/// Copies the fixture with the modes a real state has (git keeps none): 0700 directories,
/// 0600 files.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o700)).expect("chmod dir");
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else if entry.file_name() != "README.md" {
            std::fs::copy(entry.path(), &target).expect("copy");
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod file");
        }
    }
}

fn keyed(path: &Path, recovery_secret: &[u8; 32]) -> Connection {
    let c = Connection::open(path).expect("open");
    let key = bot_gateway::crypto::hex_encode(&store::database_key(recovery_secret));
    c.execute_batch(&format!("PRAGMA key = \"x'{key}'\";")).expect("key");
    c
}

fn user_version(c: &Connection) -> u32 {
    c.query_row("PRAGMA user_version", [], |r| r.get(0)).expect("user_version")
}

/// The schema version and every schema object (type, name, SQL text) of a database.
fn schema(c: &Connection) -> (u32, Vec<(String, String, Option<String>)>) {
    let mut stmt = c.prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").expect("query");
    let objects = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("rows")
        .collect::<rusqlite::Result<_>>()
        .expect("schema");
    (user_version(c), objects)
}

/// An upgraded database has exactly the version and the schema of a database this release
/// creates: nothing an upgrade skipped, nothing only old files have.
fn assert_same_schema(upgraded: &Connection, fresh: &Connection, what: &str) {
    let (up, fr) = (schema(upgraded), schema(fresh));
    assert!(fr.0 >= 1, "{what}: a new database carries a schema version");
    assert_eq!(up.0, fr.0, "{what}: the upgraded file is at the newest version");
    assert_eq!(up.1, fr.1, "{what}: the upgraded file has the schema of a new one");
}

/// The queued updates as stored: (update_id, kind, payload).
fn queued(c: &Connection) -> Vec<(i64, String, Value)> {
    let mut stmt = c.prepare("SELECT update_id, kind, payload FROM updates ORDER BY update_id").expect("query");
    stmt.query_map([], |r| {
        let payload: String = r.get(2)?;
        Ok((r.get(0)?, r.get(1)?, serde_json::from_str(&payload).expect("payload is JSON")))
    })
    .expect("rows")
    .collect::<rusqlite::Result<_>>()
    .expect("updates")
}

fn meta(c: &Connection, key: &str) -> Option<String> {
    c.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).ok()
}

#[test]
fn the_bot_database_of_the_release_before_versions_keeps_its_queue_sessions_and_webhook() {
    let fx = Fixture::copy();
    let user_id = fx.user_id();
    {
        let raw = fx.raw_bot_db();
        assert_eq!(user_version(&raw), 0, "the fixture is an unversioned database of the release before versions");
        assert_eq!(queued(&raw).len(), 4, "the fixture holds four queued updates");
    }

    let store = fx.open_store().expect("the old state opens");
    assert!(!store.created(), "opened, not created");
    let fresh_dir = tempfile::tempdir().expect("tempdir");
    let fresh = Store::open(&fresh_dir.path().join("new.db"), &[7u8; 32], &"ab".repeat(32), "fresh").expect("new store");
    let fresh_schema = fresh.read(|c| Ok(schema(c))).expect("read");
    let upgraded_schema = store.read(|c| Ok(schema(c))).expect("read");
    assert!(fresh_schema.0 >= 1);
    assert_eq!(upgraded_schema.0, fresh_schema.0, "the old database is now at the newest schema version");
    assert_eq!(upgraded_schema.1, fresh_schema.1, "and has exactly the schema of a new one");

    // The queue: every update, in order, with its content; the pending counter agrees.
    let (updates, pending) = store
        .read(|c| Ok((queued(c), c.query_row("SELECT pending FROM queue_stats WHERE id = 1", [], |r| r.get::<_, i64>(0))?)))
        .expect("read");
    let ids: Vec<i64> = updates.iter().map(|u| u.0).collect();
    assert_eq!(ids, vec![1, 2, 3, 4]);
    for ((_, kind, payload), text) in updates.iter().zip(QUEUED) {
        assert_eq!(kind, "message");
        assert_eq!(payload["text"], text);
        assert_eq!(payload["chat"]["id"], user_id);
        assert_eq!(payload["from"]["username"], "fixture_alice");
    }
    assert_eq!(pending, 4);

    // The sessions: the bot's device, its registration and its ratchet session with the user.
    let (sessions, registration, own_devices) = store
        .read(|c| {
            let mut stmt = c.prepare("SELECT user_id, device_id, length(session) FROM e2e_sessions")?;
            let sessions: Vec<(i64, i64, i64)> =
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect::<rusqlite::Result<_>>()?;
            let registration: (i64, i64) =
                c.query_row("SELECT user_id, device_id FROM e2e_registration", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let own: i64 = c.query_row("SELECT count(*) FROM e2e_own_device", [], |r| r.get(0))?;
            Ok((sessions, registration, own))
        })
        .expect("read");
    assert_eq!(sessions.len(), 1, "one session, with the user's device: {sessions:?}");
    assert_eq!((sessions[0].0, sessions[0].1), (user_id, 1));
    assert!(sessions[0].2 > 0, "the session state is there");
    assert_eq!(registration, (fx.bot["compat_user_id"].as_i64().expect("id"), 1));
    assert_eq!(own_devices, 1);

    // The webhook configuration, its filter and its last error; the inbox cursor and the
    // memory of imported messages, moved by step 2 to the one inbound rule (e2e::inbound).
    let (config, allowed, last_error, cursor, seen) = store
        .read(|c| {
            let seen: i64 = c.query_row("SELECT count(*) FROM e2e_inbound_seen", [], |r| r.get(0))?;
            Ok((webhook::config(c)?, meta(c, "allowed_updates"), webhook::last_error(c)?, bot_gateway::e2e::inbound::cursor(c)?, seen))
        })
        .expect("read");
    assert_eq!(
        config,
        Some(webhook::WebhookConfig { url: WEBHOOK_URL.to_string(), secret_token: Some(WEBHOOK_SECRET.to_string()) })
    );
    assert_eq!(allowed.as_deref(), Some(r#"["message","edited_message"]"#));
    assert_eq!(last_error.map(|e| e.message).as_deref(), Some("Connection refused"));
    assert_eq!(cursor, 5, "the inbox cursor, so nothing acknowledged is imported twice");
    assert_eq!(seen, 4, "the four imported messages are remembered");

    // A second open runs no step again: same version, same queue.
    drop(store);
    let store = fx.open_store().expect("opens again");
    let (version, n) = store.read(|c| Ok((user_version(c), queued(c).len()))).expect("read");
    assert_eq!((version, n), (fresh_schema.0, 4));
}

#[test]
fn the_old_state_upgrades_in_place_and_the_bot_carries_on_end_to_end() {
    let fx = Fixture::copy();
    let platform = PlatformServer::start(&fx.path("platform"));
    let config_path = fx.path("gateway.json");
    write_config(&config_path, &gateway_config(&platform.url, &fx.path("state"), &fx.bot));
    let gateway = Gateway::start(&config_path);

    // The webhook configuration survived, with the whole queue pending behind it.
    let (status, info) = gateway.call("getWebhookInfo", json!({}));
    assert_eq!(status, 200, "{info}");
    assert_eq!(info["result"]["url"], WEBHOOK_URL);
    assert_eq!(info["result"]["pending_update_count"], 4);
    assert_eq!(info["result"]["allowed_updates"], json!(["message", "edited_message"]));
    let (status, body) = gateway.call("getUpdates", json!({}));
    assert_eq!(status, 409, "still in webhook mode: {body}");

    // Back to polling, queue intact: every update, in order, with its content.
    let (status, body) = gateway.call("deleteWebhook", json!({}));
    assert_eq!(status, 200, "{body}");
    let updates = gateway.poll_until(0, 4);
    let got: Vec<(i64, &str)> =
        updates.iter().map(|u| (u["update_id"].as_i64().expect("id"), u["message"]["text"].as_str().expect("text"))).collect();
    assert_eq!(got, vec![(1, QUEUED[0]), (2, QUEUED[1]), (3, QUEUED[2]), (4, QUEUED[3])]);

    // The ratchet sessions carry on both ways: the old profile's next message is opened with the
    // stored session, and the bot's answer reaches it.
    let mut user = bot_gateway::client::Profile::open(fx.path("user")).expect("the old profile opens");
    user.set_server_url(&platform.url).expect("server url");
    user.send_text("@fixture_bot", "after the upgrade").expect("send");
    let updates = gateway.poll_until(0, 5);
    assert_eq!(updates.len(), 5, "nothing lost, nothing repeated: {updates:?}");
    assert_eq!(updates[4]["update_id"], 5, "update ids continue after the old ones");
    assert_eq!(updates[4]["message"]["text"], "after the upgrade");
    let chat_id = updates[4]["message"]["chat"]["id"].clone();
    let (status, body) = gateway.call("sendMessage", json!({ "chat_id": chat_id, "text": "answer after the upgrade" }));
    assert_eq!(status, 200, "{body}");
    let got = user.receive(Duration::from_secs(30), 1).expect("receive");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].text, "answer after the upgrade");
    // The management bot runs on the adopted manager.db.
    assert!(!ask_manager(&user, "/mybots").is_empty());

    // Each file is now at the newest version with exactly the schema of a new one: compare
    // with a platform, a profile and a bot database this release creates.
    let fresh = tempfile::tempdir().expect("tempdir");
    let fresh_platform = PlatformServer::start(&fresh.path().join("platform"));
    let fresh_user = bot_gateway::client::Profile::register(&platform.url, fresh.path().join("user"), "fresh_bob", "Fresh Bob")
        .expect("register");
    drop((user, fresh_user, gateway, platform, fresh_platform));
    for file in ["platform/platform.db", "platform/manager.db", "user/profile.db"] {
        let upgraded = Connection::open(fx.path(file)).expect("upgraded file");
        let new = Connection::open(fresh.path().join(file)).expect("new file");
        assert_same_schema(&upgraded, &new, file);
    }
    let new_bot_db = fresh.path().join("bot.db");
    drop(Store::open(&new_bot_db, &[9u8; 32], &"cd".repeat(32), "fresh").expect("new store"));
    assert_same_schema(&fx.raw_bot_db(), &keyed(&new_bot_db, &[9u8; 32]), "bot database");
}

#[test]
fn a_bot_database_from_a_newer_release_is_refused_and_left_untouched() {
    let fx = Fixture::copy();
    let latest = {
        let store = fx.open_store().expect("upgrade");
        store.read(|c| Ok(user_version(c))).expect("read")
    };
    let newer = latest + 1;
    fx.raw_bot_db().pragma_update(None, "user_version", newer).expect("as a later release leaves it");

    let err = fx.open_store().err().expect("refused");
    assert!(matches!(err, StoreOpenError::Schema(_)), "a schema refusal: {err:?}");
    let err = err.to_string();
    let path = fx.bot_db().display().to_string();
    assert!(err.contains(&path), "names the file: {err}");
    assert!(err.contains(&format!("schema version {newer}")) && err.contains(&format!("up to {latest}")), "{err}");
    let raw = fx.raw_bot_db();
    assert_eq!(user_version(&raw), newer, "not downgraded");
    assert_eq!(queued(&raw).len(), 4, "the queue is untouched");
    drop(raw);

    // The gateway refuses to start on it, with the same words (before it contacts the platform).
    let config_path = fx.path("gateway.json");
    write_config(&config_path, &gateway_config("http://127.0.0.1:1", &fx.path("state"), &fx.bot));
    let mut cmd = Command::new(support::gateway_bin());
    cmd.arg("serve").arg(&config_path);
    let (mut gateway, out) = Proc::spawn("bot-gateway", cmd);
    gateway.drain_stdout(out);
    let status = gateway.wait_exit(Duration::from_secs(30)).expect("the gateway exits");
    assert!(!status.success());
    let stderr = gateway.stderr_text();
    assert!(stderr.contains(&path) && stderr.contains(&format!("schema version {newer}")), "{stderr}");
    assert_eq!(user_version(&fx.raw_bot_db()), newer);
}

#[test]
fn a_platform_database_from_a_newer_release_is_refused_and_left_untouched() {
    let fx = Fixture::copy();
    let dir = fx.path("platform");
    let latest = {
        bot_gateway::platform::store::Store::open(&dir).expect("the old platform.db opens");
        user_version(&Connection::open(dir.join("platform.db")).expect("open"))
    };
    assert!(latest >= 1);
    let newer = latest + 1;
    Connection::open(dir.join("platform.db")).expect("open").pragma_update(None, "user_version", newer).expect("set");

    let err = bot_gateway::platform::store::Store::open(&dir).err().expect("refused").to_string();
    let path = dir.join("platform.db").display().to_string();
    assert!(err.contains(&path), "names the file: {err}");
    assert!(err.contains(&format!("schema version {newer}")) && err.contains(&format!("up to {latest}")), "{err}");

    // platform-server refuses to start on it.
    let mut cmd = Command::new(support::platform_bin());
    cmd.args(["--listen", "127.0.0.1:0", "--data-dir"]).arg(&dir);
    let (mut server, out) = Proc::spawn("platform-server", cmd);
    server.drain_stdout(out);
    let status = server.wait_exit(Duration::from_secs(30)).expect("the server exits");
    assert!(!status.success());
    assert!(server.stderr_text().contains(&format!("schema version {newer}")), "{}", server.stderr_text());
    assert_eq!(user_version(&Connection::open(dir.join("platform.db")).expect("open")), newer, "not downgraded");
}
