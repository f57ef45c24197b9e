//! End to end: locations (static and live), venues, contacts and dice through the real
//! binaries. The bot sends each kind and `e2e-chat listen` shows it; a live location moved and
//! stopped arrives as edits; a user shares a location and a contact card with `e2e-chat` and
//! the bot's getUpdates shows them; the ranges are 400s that say what was wrong.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use bot_gateway::client::{ContactCard, DiceInfo, LocationInfo, Shared};
use serde_json::{json, Value};
use support::{bin_path, Gateway, World};

fn ok(gateway: &Gateway, method: &str, params: Value) -> Value {
    let (status, body) = gateway.call(method, params.clone());
    assert_eq!(status, 200, "{method} {params}: {body}");
    body["result"].clone()
}

fn refused(gateway: &Gateway, method: &str, params: Value, needle: &str) {
    let (status, body) = gateway.call(method, params.clone());
    assert_eq!(status, 400, "{method} {params}: {body}");
    let d = body["description"].as_str().unwrap_or("");
    assert!(d.contains(needle), "{method} {params}: description {d:?} lacks {needle:?}");
}

/// `e2e-chat --profile PROFILE ARGS`: its JSON lines; a failure fails the test with stderr.
fn e2e_chat(profile: &Path, args: &[&str]) -> Vec<Value> {
    let out = Command::new(bin_path("e2e-chat")).arg("--profile").arg(profile).args(args).env("RUST_LOG", "warn").output().expect("run e2e-chat");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "e2e-chat {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

/// `listen` until `n` lines arrived (bounded by its timeout).
fn listen(profile: &Path, n: usize) -> Vec<Value> {
    let lines = e2e_chat(profile, &["listen", "--count", &n.to_string(), "--timeout", "30"]);
    assert_eq!(lines.len(), n, "listen got {lines:?}");
    lines
}

#[test]
fn the_bot_shares_places_contacts_and_dice_and_moves_a_live_location() {
    let world = World::start("map_bot");
    let alice = world.user("alice");
    let profile = world.dir.path().join("user-alice");
    let bot = format!("@{}", world.bot_username());
    alice.send_text(&bot, "hello").expect("hello");
    let hello = world.gateway.poll_until(0, 1)[0]["message"].clone();
    let chat = alice.user_id();

    // Each kind, with the fields every SDK requires and nothing null.
    let point = ok(&world.gateway, "sendLocation", json!({"chat_id": chat, "latitude": 52.52, "longitude": 13.405, "reply_parameters": {"message_id": hello["message_id"]}}));
    assert_eq!(point["location"], json!({"latitude": 52.52, "longitude": 13.405}));
    assert_eq!(point["reply_to_message"]["text"], "hello");
    let live = ok(&world.gateway, "sendLocation", json!({
        "chat_id": chat, "latitude": 48.85, "longitude": 2.29, "live_period": 600, "heading": 90,
        "reply_markup": {"inline_keyboard": [[{"text": "Stop", "callback_data": "stop"}]]}
    }));
    assert_eq!(live["location"], json!({"latitude": 48.85, "longitude": 2.29, "live_period": 600, "heading": 90}));
    assert_eq!(live["reply_markup"]["inline_keyboard"][0][0]["callback_data"], "stop");
    let venue = ok(&world.gateway, "sendVenue", json!({"chat_id": chat, "latitude": 1.5, "longitude": -2.5, "title": "Cafe", "address": "Main St 1", "google_place_id": "g1"}));
    assert_eq!(venue["venue"], json!({"location": {"latitude": 1.5, "longitude": -2.5}, "title": "Cafe", "address": "Main St 1", "google_place_id": "g1"}));
    assert_eq!(venue["location"], venue["venue"]["location"]);
    let contact = ok(&world.gateway, "sendContact", json!({"chat_id": chat, "phone_number": "+15550100", "first_name": "Ann", "last_name": "Lee"}));
    assert_eq!(contact["contact"], json!({"phone_number": "+15550100", "first_name": "Ann", "last_name": "Lee"}));
    let dice = ok(&world.gateway, "sendDice", json!({"chat_id": chat, "emoji": "🎯"}));
    let value = dice["dice"]["value"].as_u64().expect("a value");
    assert!((1..=6).contains(&value) && dice["dice"]["emoji"] == "🎯", "{dice}");
    let slot = ok(&world.gateway, "sendDice", json!({"chat_id": chat}));
    assert_eq!(slot["dice"]["emoji"], "🎲", "the default dice");

    // Clear 400s, before anything is sent.
    refused(&world.gateway, "sendLocation", json!({"chat_id": chat, "latitude": 91, "longitude": 0}), "latitude must be a number between -90 and 90");
    refused(&world.gateway, "sendLocation", json!({"chat_id": chat, "latitude": 1, "longitude": 1, "live_period": 30}), "live_period must be between 60 and 86400");
    refused(&world.gateway, "sendLocation", json!({"chat_id": chat, "latitude": 1}), "longitude is required");
    refused(&world.gateway, "sendVenue", json!({"chat_id": chat, "latitude": 1, "longitude": 1, "address": "A"}), "title is required");
    refused(&world.gateway, "sendContact", json!({"chat_id": chat, "first_name": "Ann"}), "phone_number is required");
    refused(&world.gateway, "sendDice", json!({"chat_id": chat, "emoji": "🃏"}), "emoji must be one of");
    refused(&world.gateway, "sendLocation", json!({"chat_id": 777, "latitude": 1, "longitude": 1}), "chat not found");

    // e2e-chat shows each, under its Bot API name.
    let lines = listen(&profile, 6);
    assert_eq!(lines[0]["location"], json!({"latitude": 52.52, "longitude": 13.405}));
    assert_eq!(lines[0]["reply_to_message_id"], hello["message_id"]);
    assert!(lines[0].get("text").is_none(), "{}", lines[0]);
    assert_eq!(lines[1]["location"], json!({"latitude": 48.85, "longitude": 2.29, "live_period": 600, "heading": 90}));
    assert_eq!(lines[1]["keyboard"][0][0]["callback_data"], "stop");
    assert_eq!(lines[2]["venue"]["title"], "Cafe");
    assert_eq!(lines[2]["venue"]["location"]["longitude"], -2.5);
    assert_eq!(lines[3]["contact"], json!({"phone_number": "+15550100", "first_name": "Ann", "last_name": "Lee"}));
    assert_eq!(lines[4]["dice"], json!({"emoji": "🎯", "value": value}));
    assert_eq!(lines[5]["dice"]["emoji"], "🎲");

    // The live location moves, then stops: the results are the edited messages.
    let live_id = live["message_id"].clone();
    let moved = ok(&world.gateway, "editMessageLiveLocation", json!({"chat_id": chat, "message_id": live_id, "latitude": 48.86, "longitude": 2.30, "heading": 180}));
    assert_eq!(moved["location"], json!({"latitude": 48.86, "longitude": 2.30, "live_period": 600, "heading": 180}));
    assert!(moved["edit_date"].as_i64().unwrap_or(0) > 0, "{moved}");
    assert!(moved.get("reply_markup").is_none(), "no keyboard given: the buttons go");
    refused(&world.gateway, "editMessageLiveLocation", json!({"chat_id": chat, "message_id": live_id, "latitude": 48.86, "longitude": 2.30, "heading": 180}), "message is not modified");
    refused(&world.gateway, "editMessageLiveLocation", json!({"chat_id": chat, "message_id": live_id, "latitude": -91, "longitude": 2.30}), "latitude");
    let stopped = ok(&world.gateway, "stopMessageLiveLocation", json!({"chat_id": chat, "message_id": live_id}));
    assert_eq!(stopped["location"], json!({"latitude": 48.86, "longitude": 2.30}), "a stopped location has no live fields");
    refused(&world.gateway, "editMessageLiveLocation", json!({"chat_id": chat, "message_id": live_id, "latitude": 1, "longitude": 1}), "not live");
    refused(&world.gateway, "stopMessageLiveLocation", json!({"chat_id": chat, "message_id": live_id}), "not live");
    refused(&world.gateway, "editMessageLiveLocation", json!({"chat_id": chat, "message_id": point["message_id"], "latitude": 1, "longitude": 1}), "not live");
    refused(&world.gateway, "editMessageLiveLocation", json!({"chat_id": chat, "message_id": hello["message_id"], "latitude": 1, "longitude": 1}), "not sent by this bot");
    refused(&world.gateway, "editMessageText", json!({"chat_id": chat, "message_id": point["message_id"], "text": "x"}), "can't be edited");

    // The user's client sees both as edits of the same message.
    let edits = listen(&profile, 2);
    for e in &edits {
        assert_eq!((e["event"].as_str(), &e["message_id"]), (Some("edited"), &live_id), "{e}");
    }
    assert_eq!(edits[0]["location"], json!({"latitude": 48.86, "longitude": 2.30, "live_period": 600, "heading": 180}));
    assert_eq!(edits[0]["keyboard"], json!([]));
    assert_eq!(edits[1]["location"]["live_stopped"], true);

    // Deleting and forwarding work on these messages too; a forwarded live location is a point.
    let fwd = ok(&world.gateway, "forwardMessage", json!({"chat_id": chat, "from_chat_id": chat, "message_id": venue["message_id"]}));
    assert_eq!(fwd["venue"]["title"], "Cafe");
    assert_eq!(ok(&world.gateway, "deleteMessage", json!({"chat_id": chat, "message_id": dice["message_id"]})), json!(true));
    let after = listen(&profile, 2);
    assert_eq!(after[0]["venue"]["title"], "Cafe");
    assert_eq!((after[1]["event"].as_str(), &after[1]["message_id"]), (Some("deleted"), &dice["message_id"]));
}

#[test]
fn a_user_shares_a_location_and_a_contact_with_e2e_chat() {
    let world = World::start("where_bot");
    let alice = world.user("alice");
    let mallory = world.user("mallory");
    let profile = world.dir.path().join("user-alice");
    let bot = format!("@{}", world.bot_username());

    let sent = e2e_chat(&profile, &["send-location", &bot, "--accuracy", "12", "--", "-33.87", "151.21"]);
    assert!(sent[0]["message_id"].as_u64().unwrap_or(0) > 0, "{sent:?}");
    e2e_chat(&profile, &["send-location", &bot, "48.85", "2.29", "--live", "900", "--heading", "45"]);
    e2e_chat(&profile, &["send-contact", &bot, "--reply-to", &sent[0]["message_id"].to_string()]);
    // A card claiming another user's id keeps its name, not the id; a dice keeps its value.
    let forged = ContactCard { first_name: "Alice".into(), user_id: alice.user_id(), ..Default::default() };
    mallory.send_shared(&bot, &Shared::Contact(forged), None).expect("forged card");
    mallory.send_shared(&bot, &Shared::Dice(DiceInfo { emoji: "🎳".into(), value: 6 }), None).expect("dice");

    let updates = world.gateway.poll_until(0, 5);
    let messages: Vec<&Value> = updates.iter().map(|u| &u["message"]).collect();
    assert_eq!(messages[0]["location"], json!({"latitude": -33.87, "longitude": 151.21, "horizontal_accuracy": 12.0}));
    assert_eq!(messages[0]["from"]["id"].as_u64(), Some(alice.user_id()));
    assert!(messages[0].get("text").is_none(), "{}", messages[0]);
    assert_eq!(messages[1]["location"], json!({"latitude": 48.85, "longitude": 2.29, "live_period": 900, "heading": 45}));
    assert_eq!(
        messages[2]["contact"],
        json!({"phone_number": "", "first_name": "User alice", "user_id": alice.user_id()}),
        "the user's own card: display name, user id, no phone number"
    );
    assert_eq!(messages[2]["reply_to_message"]["location"]["latitude"], -33.87);
    assert_eq!(messages[3]["contact"], json!({"phone_number": "", "first_name": "Alice"}), "another user's id is dropped");
    assert_eq!(messages[3]["from"]["id"].as_u64(), Some(mallory.user_id()));
    assert_eq!(messages[4]["dice"], json!({"emoji": "🎳", "value": 6}));

    // The client refuses what breaks the rules before anything is sent.
    let out = Command::new(bin_path("e2e-chat"))
        .arg("--profile")
        .arg(&profile)
        .args(["send-location", &bot, "95", "1"])
        .output()
        .expect("run e2e-chat");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("latitude must be a number between -90 and 90"));
    assert!(mallory.send_shared(&bot, &Shared::Location(LocationInfo::point(0.0, 181.0)), None).is_err());
    // The bot, replying to the user's location, gets it nested as the reply.
    let reply = ok(&world.gateway, "sendLocation", json!({"chat_id": alice.user_id(), "latitude": 0, "longitude": 0, "reply_parameters": {"message_id": messages[0]["message_id"]}}));
    assert_eq!(reply["reply_to_message"]["location"]["longitude"], 151.21);
}

#[test]
fn groups_share_locations_contacts_and_dice_both_ways() {
    use bot_gateway::e2e;
    use bot_gateway::wire::e2e::poll::Type as PollType;
    use bot_gateway::wire::e2e::{Contact, Content, Poll, PollOption, Venue};
    use protobuf::Message as _;
    use support::group_member::{bot_world, Member};

    let dir = tempfile::tempdir().expect("tempdir");
    let (platform, bot, config) = bot_world(dir.path(), "dm,groups");
    let bot_id = bot["compat_user_id"].as_u64().expect("bot id");
    let gw = Gateway::start(&config);
    gw.wait_connected();
    let mut alice = Member::register(&platform.url, "alice");
    let gid = alice.create_group("Walkers");
    alice.invite(&gid, bot_id).expect("invite the bot");
    // The bot's own join: `my_chat_member`, then the service message that names it.
    let joined = gw.poll_until(0, 2);
    let chat_id = joined[0]["my_chat_member"]["chat"]["id"].as_i64().expect("a group chat id");
    assert_eq!(joined[1]["message"]["new_chat_members"][0]["id"], bot_id, "{joined:?}");
    assert_eq!(joined[1]["message"]["from"]["id"], alice.user_id, "{joined:?}");
    let offset = joined[1]["update_id"].as_i64().expect("id") + 1;
    alice.pump(Duration::from_millis(700));

    // The bot's location and dice reach the member as MLS application messages.
    let sent = ok(&gw, "sendLocation", json!({"chat_id": chat_id, "latitude": 10.5, "longitude": 20.25}));
    assert_eq!((sent["chat"]["type"].as_str(), &sent["location"]["latitude"]), (Some("group"), &json!(10.5)));
    let dice = ok(&gw, "sendDice", json!({"chat_id": chat_id, "emoji": "🏀"}));
    assert!((1..=5).contains(&dice["dice"]["value"].as_u64().unwrap_or(0)), "{dice}");
    alice.pump(Duration::from_millis(1500));
    let got: Vec<&Content> = alice.contents.iter().filter(|(from, _, _)| *from == bot_id).map(|(_, _, c)| c).collect();
    assert!(got.iter().any(|c| c.has_location() && c.location().longitude == 20.25), "the location arrived");
    assert!(got.iter().any(|c| c.has_dice() && c.dice().emoji == "🏀"), "the dice arrived");

    // A member's card and a broken venue: the card is a message, the venue is dropped.
    let share = |content: &Content| {
        let (message, _) = e2e::group::encrypt(&alice.conn, &gid, &content.write_to_bytes().expect("bytes")).expect("encrypt");
        alice.send(&gid, &e2e::group::CommitOut { message, ..Default::default() });
    };
    let mut broken = Content::new();
    broken.set_venue(Venue { title: "Nowhere".into(), address: "-".into(), ..Default::default() });
    share(&broken);
    let mut card = Content::new();
    card.set_contact(Contact { first_name: "Alice".into(), user_id: alice.user_id, ..Default::default() });
    share(&card);
    let updates = gw.poll_until(offset, 1);
    let msg = &updates[0]["message"];
    assert_eq!(msg["contact"], json!({"phone_number": "", "first_name": "Alice", "user_id": alice.user_id}), "{updates:?}");
    assert_eq!(msg["chat"]["id"].as_i64(), Some(chat_id));
    assert_eq!(updates.len(), 1, "the venue without a point was dropped: {updates:?}");

    // A member's quiz: the bot sees the question and options, but not the answer while the
    // quiz is open (the reference's rule for groups).
    let mut quiz = Content::new();
    quiz.set_poll(Poll {
        question: "Highest peak?".into(),
        options: vec![PollOption { text: "Everest".into(), ..Default::default() }, PollOption { text: "K2".into(), ..Default::default() }],
        type_: PollType::QUIZ.into(),
        is_anonymous: true,
        correct_option_ids: vec![0],
        ..Default::default()
    });
    share(&quiz);
    let updates = gw.poll_until(updates[0]["update_id"].as_i64().expect("id") + 1, 1);
    let poll = &updates[0]["message"]["poll"];
    assert_eq!((poll["question"].as_str(), poll["type"].as_str()), (Some("Highest peak?"), Some("quiz")), "{updates:?}");
    assert!(poll.get("correct_option_ids").is_none(), "an open quiz of a member keeps its answer: {poll}");
    assert_eq!(updates[0]["message"]["from"]["id"], alice.user_id);
}

