//! Bots created through the management bot, credentials rotated and revoked, and device
//! registration refused when token, recovery secret and state do not belong to one bot.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{ask_manager, create_bot_via_manager, gateway_config, reply_line, write_config, Gateway, PlatformServer};

use bot_gateway::wire::platform::VerifyCredentialRequest;
use bot_gateway::wire::{Credential, Platform};

struct Setup {
    dir: tempfile::TempDir,
    platform: PlatformServer,
    owner: bot_gateway::client::Profile,
}

fn setup() -> Setup {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let owner = bot_gateway::client::Profile::register(&platform.url, dir.path().join("owner"), "owner", "Owner")
        .expect("register owner");
    Setup { dir, platform, owner }
}

impl Setup {
    fn user(&self, name: &str) -> bot_gateway::client::Profile {
        bot_gateway::client::Profile::register(&self.platform.url, self.dir.path().join(name), name, name).expect("register")
    }

    fn start_gateway(&self, bot: &Value, state: &str) -> Gateway {
        let path = self.dir.path().join(format!("{state}.json"));
        write_config(&path, &gateway_config(&self.platform.url, &self.dir.path().join(state), bot));
        Gateway::start(&path)
    }

    /// Runs the gateway expecting it to refuse to start; returns its stderr.
    fn refused(&self, config: &Value, name: &str) -> String {
        let path = self.dir.path().join(format!("{name}.json"));
        write_config(&path, config);
        let out = std::process::Command::new(support::gateway_bin()).arg("serve").arg(&path).output().expect("run");
        assert!(!out.status.success(), "{name}: the gateway must refuse to start");
        String::from_utf8_lossy(&out.stderr).to_string()
    }

    fn platform_verifies(&self, token: &str) -> Result<(), grpcio::RpcStatusCode> {
        let p = Platform::connect(&self.platform.url, Credential::Bot { token: token.to_string(), device_id: None })
            .expect("connect");
        p.client.verify_credential(&VerifyCredentialRequest::new(), p.opt()).map(|_| ()).map_err(|e| match e {
            grpcio::Error::RpcFailure(s) => s.code(),
            other => panic!("unexpected error {other}"),
        })
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_bot_created_in_the_dialog_runs_behind_the_gateway() {
    let s = setup();
    assert!(ask_manager(&s.owner, "/start").contains("/newbot"));
    let bot = create_bot_via_manager(&s.owner, "dialog_bot", "Dialog Bot");
    let token = bot["token"].as_str().expect("token");
    let (id, secret) = token.split_once(':').expect("token shape");
    assert_eq!(id, bot["compat_user_id"].to_string());
    assert_eq!(secret.len(), 64);
    let gw = s.start_gateway(&bot, "state");
    let (status, me) = gw.call("getMe", json!({}));
    assert_eq!(status, 200);
    assert_eq!(me["result"]["username"], "dialog_bot");
    let user = s.user("dave");
    user.send_text("@dialog_bot", "hi").expect("send");
    assert_eq!(gw.poll_until(0, 1)[0]["message"]["text"], "hi");
    let listing = ask_manager(&s.owner, "/mybots");
    assert!(listing.contains("@dialog_bot") && listing.contains("active"), "{listing}");
}

#[test]
fn rotation_revokes_at_once_and_pending_updates_survive_the_restart() {
    let s = setup();
    let mut bot = create_bot_via_manager(&s.owner, "rotating_bot", "Rotating");
    let old_token = bot["token"].as_str().expect("token").to_string();
    let gw = s.start_gateway(&bot, "state");
    let user = s.user("erin");
    user.send_text("@rotating_bot", "before rotation").expect("send");
    wait_until("the update to be queued", || gw.health()["bots"][0]["queue_depth"] == 1);

    let reply = ask_manager(&s.owner, "/token @rotating_bot");
    let new_token = reply_line(&reply, "Token");
    assert_ne!(new_token, old_token);
    assert_eq!(new_token.split(':').next(), old_token.split(':').next(), "same numeric id");
    assert_eq!(s.platform_verifies(&old_token), Err(grpcio::RpcStatusCode::UNAUTHENTICATED), "old token refused at once");
    assert_eq!(s.platform_verifies(&new_token), Ok(()));
    // The running gateway learns of it from the platform and answers 401 from now on.
    wait_until("the running gateway to answer 401", || gw.call("getMe", json!({})).0 == 401);

    // Edit the config, restart: the pending update is still there; the old token gets 401.
    drop(gw);
    bot["token"] = json!(new_token);
    let gw = s.start_gateway(&bot, "state");
    let updates = gw.poll_until(0, 1);
    assert_eq!(updates[0]["message"]["text"], "before rotation");
    let (status, _) = support::call_url(&format!("{}/bot{old_token}/getMe", gw.base), json!({}));
    assert_eq!(status, 401);
}

#[test]
fn disabling_stops_a_running_gateway() {
    let s = setup();
    let bot = create_bot_via_manager(&s.owner, "doomed_bot", "Doomed");
    let gw = s.start_gateway(&bot, "state");
    let user = s.user("frank");
    user.send_text("@doomed_bot", "hello").expect("send");
    let updates = gw.poll_until(0, 1);
    let chat = updates[0]["message"]["chat"]["id"].clone();

    let stranger = s.user("mallory");
    let refused = ask_manager(&stranger, "/disable @doomed_bot");
    assert!(refused.contains("You have no bot @doomed_bot"), "{refused}");
    assert_eq!(gw.call("getMe", json!({})).0, 200, "a non-owner cannot disable it");

    // A long poll waiting when the bot is disabled is answered 401 then, not at its timeout.
    let url = format!("{}/bot{}/getUpdates", gw.base, gw.token);
    let offset = updates[0]["update_id"].as_i64().expect("id") + 1;
    let poll = std::thread::spawn(move || {
        let started = Instant::now();
        (support::call_url(&url, json!({ "offset": offset, "timeout": 40 })), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    ask_manager(&s.owner, "/disable @doomed_bot");
    let ((status, body), took) = poll.join().expect("poll");
    assert_eq!(status, 401, "{body}");
    assert!(took < Duration::from_secs(30), "the waiting poll ended at the revocation, not at its 40 s timeout");
    wait_until("the gateway to answer 401", || gw.call("getMe", json!({})).0 == 401);
    let (status, _) = gw.call("sendMessage", json!({ "chat_id": chat, "text": "after disable" }));
    assert_eq!(status, 401);
    let (status, _) = gw.call("getUpdates", json!({ "timeout": 0 }));
    assert_eq!(status, 401, "nothing is delivered any more");
    assert_eq!(gw.health()["bots"][0]["revoked"], true);
    assert!(user.receive(Duration::from_secs(2), 1).expect("receive").is_empty(), "nothing was sent");
    let listing = ask_manager(&s.owner, "/mybots");
    assert!(listing.contains("disabled"), "{listing}");
}

#[test]
fn a_fresh_state_dir_with_the_recovery_secret_is_a_new_device_users_accept() {
    let s = setup();
    let bot = create_bot_via_manager(&s.owner, "phoenix_bot", "Phoenix");
    let first = s.start_gateway(&bot, "state-a");
    let user = s.user("grace");
    user.send_text("@phoenix_bot", "to the first device").expect("send");
    assert_eq!(first.poll_until(0, 1)[0]["message"]["text"], "to the first device");
    drop(first);

    // A second runtime of the same bot with an empty state_dir registers a new device.
    let second = s.start_gateway(&bot, "state-b");
    user.send_text("@phoenix_bot", "to both devices").expect("send without warnings");
    let updates = second.poll_until(0, 1);
    assert_eq!(updates[0]["message"]["text"], "to both devices");
    let chat = updates[0]["message"]["chat"]["id"].clone();
    let (status, body) = second.call("sendMessage", json!({ "chat_id": chat, "text": "from the new device" }));
    assert_eq!(status, 200, "{body}");
    let got = user.receive(Duration::from_secs(30), 1).expect("receive");
    assert_eq!(got[0].text, "from the new device");
    assert!(got[0].sender.is_bot);
}

#[test]
fn registration_is_refused_for_each_kind_of_mismatch() {
    let s = setup();
    let a = create_bot_via_manager(&s.owner, "bot_a", "A");
    let b = create_bot_via_manager(&s.owner, "bot_b", "B");
    let state = s.dir.path().join("state");

    // Token of A with the identity (Bot ID + recovery secret) of B: the platform refuses.
    let mut mixed = a.clone();
    mixed["bot_id_hex"] = b["bot_id_hex"].clone();
    mixed["identity_recovery_secret_hex"] = b["identity_recovery_secret_hex"].clone();
    let err = s.refused(&gateway_config(&s.platform.url, &state, &mixed), "mixed");
    assert!(err.contains("refused to register"), "{err}");

    // A recovery secret that does not derive the configured Bot ID: refused before any call.
    let mut wrong_secret = a.clone();
    wrong_secret["identity_recovery_secret_hex"] = b["identity_recovery_secret_hex"].clone();
    let err = s.refused(&gateway_config(&s.platform.url, &state, &wrong_secret), "wrong_secret");
    assert!(err.contains("does not belong to bot_id_hex"), "{err}");

    // compat_user_id that is not the token's numeric id.
    let mut wrong_id = a.clone();
    wrong_id["compat_user_id"] = b["compat_user_id"].clone();
    let err = s.refused(&gateway_config(&s.platform.url, &state, &wrong_id), "wrong_id");
    assert!(err.contains("does not match the token"), "{err}");

    // A username or first_name that is not the platform's (getMe would serve it).
    let mut wrong_name = a.clone();
    wrong_name["username"] = json!("bot_a_typo");
    let err = s.refused(&gateway_config(&s.platform.url, &state, &wrong_name), "wrong_username");
    assert!(err.contains("username \"bot_a_typo\" does not match the platform"), "{err}");
    let mut wrong_first = a.clone();
    wrong_first["first_name"] = json!("Not A");
    let err = s.refused(&gateway_config(&s.platform.url, &state, &wrong_first), "wrong_first_name");
    assert!(err.contains("first_name \"Not A\" does not match"), "{err}");

    // A state database of another bot under this bot's name cannot be opened.
    drop(s.start_gateway(&a, "state"));
    let a_db = state.join(format!("bot-{}.db", a["compat_user_id"]));
    let b_db = state.join(format!("bot-{}.db", b["compat_user_id"]));
    std::fs::copy(&a_db, &b_db).expect("copy state database");
    let err = s.refused(&gateway_config(&s.platform.url, &state, &b), "foreign_state");
    assert!(err.contains("does not open under the key of this bot's identity_recovery_secret_hex") && err.contains("another bot's"), "{err}");

    // A revoked token cannot register.
    let reply = ask_manager(&s.owner, "/token @bot_a");
    assert!(reply.contains("Token: "));
    let err = s.refused(&gateway_config(&s.platform.url, &s.dir.path().join("fresh"), &a), "revoked");
    assert!(err.contains("no longer accepts bot @bot_a's token") && err.contains("bots[].token"), "{err}");
}
