//! End to end: polls and quizzes through the real binaries. The bot sends a poll, the user
//! votes with `e2e-chat vote` (changes and retracts), the bot gets `poll_answer` and `poll`
//! updates with the counts; an anonymous quiz tells only the counts and keeps the first answer;
//! stopPoll closes it and the user sees the final counts.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::{bin_path, Gateway, World};

fn ok(gateway: &Gateway, method: &str, params: Value) -> Value {
    let (status, body) = gateway.call(method, params.clone());
    assert_eq!(status, 200, "{method} {params}: {body}");
    body["result"].clone()
}

fn run(profile: &Path, args: &[&str]) -> Output {
    Command::new(bin_path("e2e-chat")).arg("--profile").arg(profile).args(args).env("RUST_LOG", "warn").output().expect("run e2e-chat")
}

/// `e2e-chat` ARGS, which must succeed: its JSON lines.
fn e2e_chat(profile: &Path, args: &[&str]) -> Vec<Value> {
    let out = run(profile, args);
    assert!(out.status.success(), "e2e-chat {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect()
}

/// The next `n` updates after `offset` (which moves past them).
fn next(gateway: &Gateway, offset: &mut i64, n: usize) -> Vec<Value> {
    let updates = gateway.poll_until(*offset, n);
    *offset = updates.last().and_then(|u| u["update_id"].as_i64()).expect("update_id") + 1;
    updates
}

/// A world whose user alice said hello to the bot, and the offset past that first update.
fn greeted(bot_name: &str) -> (World, bot_gateway::client::Profile, i64) {
    let world = World::start(bot_name);
    let alice = world.user("alice");
    alice.send_text(&format!("@{}", world.bot_username()), "hello").expect("hello");
    let mut offset = 0;
    next(&world.gateway, &mut offset, 1);
    (world, alice, offset)
}

#[test]
fn votes_travel_from_e2e_chat_to_the_bot_and_stop_poll_closes_it() {
    let (world, alice, mut offset) = greeted("poll_bot");
    let profile = world.dir.path().join("user-alice");
    let bot = format!("@{}", world.bot_username());
    let gw = &world.gateway;
    let chat = alice.user_id();

    let sent = ok(gw, "sendPoll", json!({
        "chat_id": chat, "question": "Lunch?", "options": [{"text": "Pizza"}, {"text": "Soup"}, {"text": "Salad"}],
        "is_anonymous": false, "allows_multiple_answers": true
    }));
    let poll_id = sent["poll"]["id"].as_str().expect("poll id").to_string();
    let message_id = sent["message_id"].as_u64().expect("message id");
    assert_eq!(sent["poll"]["options"][2], json!({"persistent_id": "2", "text": "Salad", "voter_count": 0}));
    assert_eq!((sent["poll"]["allows_revoting"].as_bool(), sent["poll"]["members_only"].as_bool()), (Some(true), Some(false)));
    assert_eq!((sent["poll"]["type"].as_str(), sent["poll"]["is_closed"].as_bool()), (Some("regular"), Some(false)));
    let (status, body) = gw.call("sendPoll", json!({"chat_id": chat, "question": "Q", "options": ["only one"]}));
    assert_eq!(status, 400, "{body}");
    assert!(body["description"].as_str().unwrap_or("").contains("2 to 12 options"), "{body}");

    let shown = e2e_chat(&profile, &["listen", "--count", "1", "--timeout", "30"]);
    assert_eq!(shown[0]["poll"]["question"], "Lunch?");
    assert_eq!(shown[0]["poll"]["allows_multiple_answers"], true);

    // A vote, a retraction and a new vote: each a poll_answer and a poll with the counts.
    let id = message_id.to_string();
    e2e_chat(&profile, &["vote", &bot, &id, "1", "3"]);
    let u = next(gw, &mut offset, 2);
    assert_eq!(
        u[0]["poll_answer"],
        json!({
            "poll_id": poll_id, "user": {"id": chat, "is_bot": false, "first_name": "User alice", "username": "alice"},
            "option_ids": [0, 2], "option_persistent_ids": ["0", "2"]
        })
    );
    let counts = |poll: &Value| poll["options"].as_array().expect("options").iter().map(|o| o["voter_count"].as_u64().unwrap_or(99)).collect::<Vec<_>>();
    assert_eq!((counts(&u[1]["poll"]), &u[1]["poll"]["total_voter_count"]), (vec![1, 0, 1], &json!(1)));
    e2e_chat(&profile, &["vote", &bot, &id]);
    let u = next(gw, &mut offset, 2);
    assert_eq!(u[0]["poll_answer"]["option_ids"], json!([]));
    assert_eq!(counts(&u[1]["poll"]), vec![0, 0, 0]);
    e2e_chat(&profile, &["vote", &bot, &id, "2"]);
    next(gw, &mut offset, 2);

    // The client refuses an option the poll lacks.
    let out = run(&profile, &["vote", &bot, &id, "4"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no option 3"), "{}", String::from_utf8_lossy(&out.stderr));

    // An anonymous quiz: only the counts reach the bot, and a second answer is refused.
    // (PTB 22.8 sends correct_option_ids; the older correct_option_id is read too.)
    let quiz = ok(gw, "sendPoll", json!({"chat_id": chat, "question": "2+2?", "options": ["3", "4"], "type": "quiz", "correct_option_id": 1, "open_period": 600}));
    assert_eq!((quiz["poll"]["is_anonymous"].as_bool(), &quiz["poll"]["correct_option_ids"]), (Some(true), &json!([1])));
    assert_eq!(quiz["poll"]["allows_revoting"], false, "a quiz answer is final");
    assert!(quiz["poll"]["close_date"].as_i64().unwrap_or(0) > 0, "{quiz}");
    e2e_chat(&profile, &["listen", "--count", "1", "--timeout", "30"]);
    let quiz_id = quiz["message_id"].to_string();
    e2e_chat(&profile, &["vote", &bot, &quiz_id, "2"]);
    e2e_chat(&profile, &["vote", &bot, &quiz_id, "1"]);
    alice.send_text(&bot, "after").expect("after");
    let u = next(gw, &mut offset, 2);
    assert_eq!(counts(&u[0]["poll"]), vec![0, 1], "{u:?}");
    assert_eq!(u[1]["message"]["text"], "after", "no poll_answer for an anonymous quiz, no second answer: {u:?}");

    // stopPoll answers the closed Poll; the user sees it closed with the final counts.
    let stopped = ok(gw, "stopPoll", json!({"chat_id": chat, "message_id": message_id}));
    assert_eq!((stopped["id"].as_str(), stopped["is_closed"].as_bool()), (Some(poll_id.as_str()), Some(true)));
    assert_eq!(counts(&stopped), vec![0, 1, 0]);
    let (status, body) = gw.call("stopPoll", json!({"chat_id": chat, "message_id": message_id}));
    assert_eq!(status, 400);
    assert!(body["description"].as_str().unwrap_or("").contains("already been closed"), "{body}");
    let edits = e2e_chat(&profile, &["listen", "--count", "1", "--timeout", "30"]);
    assert_eq!((edits[0]["event"].as_str(), edits[0]["message_id"].as_u64()), (Some("edited"), Some(message_id)));
    assert_eq!(edits[0]["poll"]["is_closed"], true);
    assert_eq!(edits[0]["poll"]["options"][1], json!({"text": "Soup", "voter_count": 1}));
    let out = run(&profile, &["vote", &bot, &id, "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("closed"));
}

#[test]
fn chat_mode_shares_a_location_and_a_card_and_votes() {
    use std::io::Write;
    use support::chat::{piped_chat, read_until};

    let (world, alice, mut offset) = greeted("chat_poll_bot");
    let profile = world.dir.path().join("user-alice");
    let bot = format!("@{}", world.bot_username());
    let gw = &world.gateway;
    let poll = ok(gw, "sendPoll", json!({"chat_id": alice.user_id(), "question": "Tea?", "options": ["Yes", "No"], "is_anonymous": false}));
    let poll_message = poll["message_id"].as_u64().expect("message id");

    let (mut chat, mut stdin, out, err) = piped_chat(&profile, &bot);
    read_until(&out, "the poll", |l| l.starts_with(&format!("[{bot}] [poll] Tea?")));
    writeln!(stdin, "/location -33.87 151.21").expect("type");
    read_until(&out, "the shared location", |l| l.starts_with("[you] [location -33.870000, 151.210000] (#"));
    writeln!(stdin, "/contact").expect("type");
    let card = format!("[you] [contact User alice (user {})] (#", alice.user_id());
    read_until(&out, "the shared card", |l| l.starts_with(&card));
    writeln!(stdin, "/vote {poll_message} 3").expect("type");
    read_until(&err, "the refusal", |l| l.contains("/vote") && l.contains("no option 2"));
    writeln!(stdin, "/vote {poll_message} 2").expect("type");
    read_until(&out, "the vote", |l| l == format!("you voted 2 in #{poll_message}"));
    writeln!(stdin, "/quit").expect("type");
    assert!(chat.wait_exit("chat mode").success());

    let u = next(gw, &mut offset, 4);
    assert_eq!(u[0]["message"]["location"], json!({"latitude": -33.87, "longitude": 151.21}));
    assert_eq!(u[1]["message"]["contact"], json!({"phone_number": "", "first_name": "User alice", "user_id": alice.user_id()}));
    assert_eq!(u[2]["poll_answer"]["option_ids"], json!([1]));
    assert_eq!(u[3]["poll"]["options"][1]["voter_count"], 1);
}

#[test]
fn users_make_polls_by_command_by_keyboard_button_and_in_chat_mode() {
    use std::io::Write;
    use support::chat::{piped_chat, read_until};

    let (world, alice, mut offset) = greeted("poll_maker_bot");
    let profile = world.dir.path().join("user-alice");
    let bot = format!("@{}", world.bot_username());
    let gw = &world.gateway;
    let chat = alice.user_id() as i64;

    // By command: a poll that names its voters, with every field the SDKs require.
    let sent = e2e_chat(&profile, &["send-poll", &bot, "Best crab?", "Hermit", "King crab", "--not-anonymous", "--multiple"]);
    let message_id = sent[0]["message_id"].as_i64().expect("message id");
    let u = next(gw, &mut offset, 1);
    assert_eq!(u[0]["message"]["from"]["id"], chat);
    assert_eq!(
        u[0]["message"]["poll"],
        json!({
            "id": format!("{chat}_{message_id}"), "question": "Best crab?",
            "options": [{"persistent_id": "0", "text": "Hermit", "voter_count": 0}, {"persistent_id": "1", "text": "King crab", "voter_count": 0}],
            "total_voter_count": 0, "is_closed": false, "is_anonymous": false, "type": "regular",
            "allows_multiple_answers": true, "allows_revoting": true, "members_only": false
        })
    );

    // The bot's keyboard asks for a quiz (button 1) and for any poll (button 2); the user's
    // client honours the kind.
    let keyboard = json!({"keyboard": [[{"text": "Quiz me", "request_poll": {"type": "quiz"}}, {"text": "Any poll", "request_poll": {}}]]});
    ok(gw, "sendMessage", json!({"chat_id": chat, "text": "Make one", "reply_markup": keyboard}));
    let shown = e2e_chat(&profile, &["listen", "--count", "1", "--timeout", "30"]);
    assert_eq!(shown[0]["reply_keyboard"]["rows"][0][0], json!({"text": "Quiz me", "request": "poll", "poll_type": "quiz"}));
    assert_eq!(shown[0]["reply_keyboard"]["rows"][0][1], json!({"text": "Any poll", "request": "poll"}));
    let refused = run(&profile, &["reply-button", &bot, "1", "Lunch?", "Pizza", "Soup"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("asks for a quiz, not this one"), "{refused:?}");
    let refused = run(&profile, &["reply-button", &bot, "1"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("asks for a quiz you make"), "{refused:?}");
    let used = e2e_chat(&profile, &["reply-button", &bot, "1", "Capital of France?", "Paris", "Rome", "--quiz", "1", "--explanation", "Since 987"]);
    assert_eq!((used[0]["button"].as_str(), used[0]["sent"].as_str()), (Some("Quiz me"), Some("poll")));
    let u = next(gw, &mut offset, 1);
    let quiz = &u[0]["message"]["poll"];
    assert_eq!(
        (quiz["type"].as_str(), &quiz["correct_option_ids"], quiz["explanation"].as_str(), quiz["is_anonymous"].as_bool(), quiz["allows_revoting"].as_bool()),
        (Some("quiz"), &json!([0]), Some("Since 987"), Some(true), Some(false)),
        "in a private chat the bot sees the quiz's answer, as in the reference"
    );

    // Chat mode: /poll answers the button that takes any poll.
    let (mut chat_mode, mut stdin, out, _err) = piped_chat(&profile, &bot);
    writeln!(stdin, "/poll Tea or coffee? | Tea | Coffee").expect("type");
    read_until(&out, "the poll sent", |l| l.starts_with("[you] [poll] Tea or coffee?"));
    writeln!(stdin, "/quit").expect("type");
    assert!(chat_mode.wait_exit("chat mode").success());
    let u = next(gw, &mut offset, 1);
    assert_eq!(u[0]["message"]["poll"]["question"], "Tea or coffee?");
    assert_eq!(u[0]["message"]["poll"]["type"], "regular");

    // A button asking for something unknown is refused by name, before anything is sent.
    let (status, body) = gw.call(
        "sendMessage",
        json!({"chat_id": chat, "text": "x", "reply_markup": {"keyboard": [[{"text": "P", "request_poll": {"type": "survey"}}]]}}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(body["description"].as_str().unwrap_or("").contains("request_poll.type must be \"quiz\" or \"regular\""), "{body}");
}
