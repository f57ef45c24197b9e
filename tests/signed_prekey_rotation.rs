//! Signed prekey rotation of the gateway (docs/decisions.md, "Transport and state"): a signed
//! prekey older than the schedule is replaced when the gateway starts, and the new one is
//! published. A first message built from a bundle fetched before the rotation still opens
//! (the replaced key is kept), and a new user starts a session against the new key.

mod support;

use std::time::Duration;

use bot_gateway::client::{Profile, DB_FILE};
use bot_gateway::e2e::{self, SignedPrekeySchedule};
use bot_gateway::gateway::store::Store;
use bot_gateway::wire::platform::{GetPrekeyBundlesRequest, GetPrekeyBundlesResponse};
use serde_json::json;
use support::World;

fn bundles_of(user: &Profile, peer: u64) -> GetPrekeyBundlesResponse {
    let mut req = GetPrekeyBundlesRequest::new();
    req.user_id = peer;
    let p = user.platform();
    p.client.get_prekey_bundles(&req, p.opt()).expect("GetPrekeyBundles")
}

/// The id of the signed prekey the platform serves for the bot's device.
fn served_signed_prekey(user: &Profile, bot_id: u64) -> u32 {
    let resp = bundles_of(user, bot_id);
    assert_eq!(resp.bundles.len(), 1, "one bot device");
    resp.bundles[0].signed_prekey.id
}

#[test]
fn a_due_signed_prekey_is_rotated_at_start_and_the_replaced_one_still_opens_first_messages() {
    let mut world = World::start("spk_bot");
    let bot_name = format!("@{}", world.bot_username());
    let bot_id = world.bot["compat_user_id"].as_u64().expect("bot id");
    let early = world.user("early_user");
    let late = world.user("late_user");

    // Before the rotation: the early user fetches the bot's bundle (signed prekey 1) and starts
    // a session from it, but sends nothing yet.
    let bot_profile = early.lookup(&bot_name).expect("lookup the bot");
    let before = bundles_of(&early, bot_id);
    assert_eq!(before.bundles[0].signed_prekey.id, 1);
    {
        let conn = rusqlite::Connection::open(early.dir().join(DB_FILE)).expect("open the profile database");
        e2e::add_sessions(&conn, &bot_profile, &before.bundles).expect("session from the fetched bundle");
    }

    // A restart that finds the key young keeps it.
    world.restart_gateway();
    assert_eq!(served_signed_prekey(&late, bot_id), 1, "not due: not rotated");

    // The gateway stops; its signed prekey is made older than the schedule allows.
    world.gateway.proc.kill();
    let secret = bot_gateway::crypto::hex_decode_32(world.bot["identity_recovery_secret_hex"].as_str().expect("secret"))
        .expect("32-byte secret");
    let db = world.dir.path().join("state").join(format!("bot-{bot_id}.db"));
    let store = Store::open(&db, &secret, world.bot["bot_id_hex"].as_str().expect("bot id hex"), "aging").expect("open the bot database");
    let age = SignedPrekeySchedule::DEFAULT.max_age.as_secs() as i64 + 3600;
    store
        .write(move |c| Ok(c.execute("UPDATE e2e_signed_prekeys SET created_at = created_at - ?1", [age])?))
        .expect("age the signed prekey");
    drop(store);

    // At start the gateway rotates and publishes the new key before it serves.
    let config = world.gateway.config_path.clone();
    world.gateway = support::Gateway::start(&config);
    assert_eq!(served_signed_prekey(&late, bot_id), 2, "rotated and published at start");

    // The early user's first message names signed prekey 1, which the bot kept.
    early.send_text(&bot_name, "built before the rotation").expect("early user sends");
    // The late user starts a session against signed prekey 2.
    late.send_text(&bot_name, "built after the rotation").expect("late user sends");
    let updates = world.gateway.poll_until(0, 2);
    let mut texts: Vec<(u64, String)> = updates
        .iter()
        .map(|u| (u["message"]["chat"]["id"].as_u64().expect("chat id"), u["message"]["text"].as_str().expect("text").to_string()))
        .collect();
    texts.sort();
    let mut expected =
        vec![(early.user_id(), "built before the rotation".to_string()), (late.user_id(), "built after the rotation".to_string())];
    expected.sort();
    assert_eq!(texts, expected, "both first messages opened; gateway stderr:\n{}", world.gateway.proc.stderr_text());

    // Both sessions carry the bot's answers.
    for user in [&early, &late] {
        let (status, body) = world.gateway.call("sendMessage", json!({ "chat_id": user.user_id(), "text": "answer" }));
        assert_eq!(status, 200, "{body}");
        let got = user.receive(Duration::from_secs(30), 1).expect("receive the answer");
        assert_eq!(got.len(), 1, "@{} got the answer", user.username());
        assert_eq!(got[0].text, "answer");
    }
}
