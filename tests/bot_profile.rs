//! The bot's profile through the real programs: commands set by the bot over the Bot API,
//! read back by the bot, and read by users (the client library and `e2e-chat commands`) per
//! scope and language; the rejections; deleting; descriptions and the name.

mod support;

use std::process::Command;

use serde_json::{json, Value};
use support::World;

use bot_gateway::client::{BotCommand, Profile};
use bot_gateway::wire::bot_profile::scope;
use bot_gateway::wire::platform::{
    bot_command_scope::Kind, BotCommand as PbCommand, GetBotCommandsRequest, SetBotCommandsRequest,
};

fn ok(world: &World, method: &str, params: Value) -> Value {
    let (status, body) = world.gateway.call(method, params.clone());
    assert_eq!(status, 200, "{method} {params} failed: {body}");
    assert_eq!(body["ok"], true, "{body}");
    body["result"].clone()
}

fn refused(world: &World, method: &str, params: Value) -> String {
    let (status, body) = world.gateway.call(method, params);
    assert_eq!(status, 400, "{method} must be refused: {body}");
    assert_eq!((body["ok"].clone(), body["error_code"].clone()), (json!(false), json!(400)), "{body}");
    body["description"].as_str().expect("description").to_string()
}

fn commands(pairs: &[(&str, &str)]) -> Value {
    Value::Array(pairs.iter().map(|(c, d)| json!({"command": c, "description": d})).collect())
}

fn seen(list: &[BotCommand]) -> Vec<(String, String)> {
    list.iter().map(|c| (c.command.clone(), c.description.clone())).collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(c, d)| (c.to_string(), d.to_string())).collect()
}

/// `e2e-chat commands` for the user whose profile is `user-<name>`; its stdout lines as JSON.
fn e2e_chat_commands(world: &World, user: &str, args: &[&str]) -> Vec<Value> {
    let out = Command::new(support::bin_path("e2e-chat"))
        .arg("--profile")
        .arg(world.dir.path().join(format!("user-{user}")))
        .arg("commands")
        .args(args)
        .output()
        .expect("run e2e-chat");
    assert!(out.status.success(), "e2e-chat commands failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?} is not JSON: {e}")))
        .collect()
}

#[test]
fn commands_reach_users_by_scope_and_language_and_can_be_deleted() {
    let world = World::start("menu_bot");
    let bot = format!("@{}", world.bot_username());
    let alice: Profile = world.user("alice_m");
    let bob: Profile = world.user("bob_m");
    let alice_chat = json!({"type": "chat", "chat_id": alice.user_id()});

    assert_eq!(ok(&world, "getMyCommands", json!({})), json!([]), "no commands yet");
    assert!(bob.bot_commands(&bot, None).expect("read").is_empty());

    let defaults = [("start", "Start the bot"), ("help", "What I can do")];
    assert_eq!(ok(&world, "setMyCommands", json!({"commands": commands(&defaults)})), json!(true));
    // A form body, as PTB and telegraf send it: nested values as JSON text.
    let url = format!("{}/bot{}/setMyCommands", world.gateway.base, world.gateway.token);
    let german = commands(&[("start", "Den Bot starten")]).to_string();
    let resp = ureq::post(&url).send_form(&[("commands", german.as_str()), ("language_code", "de")]).expect("form call");
    assert_eq!(resp.into_json::<Value>().expect("json")["result"], true);
    let vip = [("vip", "Only for Alice")];
    ok(&world, "setMyCommands", json!({"commands": commands(&vip), "scope": alice_chat}));

    // The bot reads back exactly what it set, per scope and language.
    assert_eq!(ok(&world, "getMyCommands", json!({})), commands(&defaults));
    assert_eq!(ok(&world, "getMyCommands", json!({"scope": {"type": "default"}, "language_code": "de"})), json!([{"command": "start", "description": "Den Bot starten"}]));
    assert_eq!(ok(&world, "getMyCommands", json!({"scope": alice_chat})), commands(&vip));
    assert_eq!(ok(&world, "getMyCommands", json!({"scope": {"type": "all_private_chats"}})), json!([]), "exact match");
    assert_eq!(ok(&world, "getMyCommands", json!({"language_code": "fr"})), json!([]), "exact match");

    // Users see the first list that applies to their private chat.
    assert_eq!(seen(&alice.bot_commands(&bot, None).expect("alice")), pairs(&vip));
    assert_eq!(seen(&bob.bot_commands(&bot, None).expect("bob")), pairs(&defaults));
    assert_eq!(seen(&bob.bot_commands(&bot, Some("de")).expect("bob de")), pairs(&[("start", "Den Bot starten")]));
    assert_eq!(seen(&bob.bot_commands(&bot, Some("fr")).expect("bob fr")), pairs(&defaults), "falls back to default");
    let private = [("menu", "Private menu")];
    ok(&world, "setMyCommands", json!({"commands": commands(&private), "scope": {"type": "all_private_chats"}}));
    assert_eq!(seen(&bob.bot_commands(&bot, Some("fr")).expect("bob")), pairs(&private), "all_private_chats before default");
    assert_eq!(seen(&bob.bot_commands(&bot, Some("de")).expect("bob")), pairs(&private), "a broader scope before a language");

    // The e2e-chat command prints the bot line, then one line per command.
    let lines = e2e_chat_commands(&world, "bob_m", &[&bot]);
    assert_eq!(lines[0]["bot"], world.bot_username());
    assert_eq!(&lines[1..], &[json!({"command": "menu", "description": "Private menu"})]);
    let lines = e2e_chat_commands(&world, "alice_m", &[&bot, "--lang", "de"]);
    assert_eq!(&lines[1..], &[json!({"command": "vip", "description": "Only for Alice"})]);

    // A user cannot read the list of another user's chat.
    let mut req = GetBotCommandsRequest::new();
    req.bot_user_id = world.bot["compat_user_id"].as_u64().expect("bot id");
    req.scope = Some(scope(Kind::CHAT, alice.user_id())).into();
    let err = bob.platform().client.get_bot_commands(&req, bob.platform().opt()).expect_err("not bob's chat");
    assert_eq!(bot_gateway::wire::rpc::code(&err), Some(grpcio::RpcStatusCode::PERMISSION_DENIED), "{err}");
    // Nor change a bot's profile: the setters are for the bot's own devices.
    let mut set = SetBotCommandsRequest::new();
    set.commands.push(PbCommand { command: "pwned".into(), description: "x".into(), ..Default::default() });
    let err = bob.platform().client.set_bot_commands(&set, bob.platform().opt()).expect_err("a user is not the bot");
    assert_eq!(bot_gateway::wire::rpc::code(&err), Some(grpcio::RpcStatusCode::PERMISSION_DENIED), "{err}");
    assert_eq!(seen(&bob.bot_commands(&bot, None).expect("bob")), pairs(&private), "unchanged");

    // Deleting a list lets the next broader one apply.
    assert_eq!(ok(&world, "deleteMyCommands", json!({"scope": alice_chat})), json!(true));
    assert_eq!(ok(&world, "getMyCommands", json!({"scope": alice_chat})), json!([]));
    assert_eq!(seen(&alice.bot_commands(&bot, None).expect("alice")), pairs(&private));
    ok(&world, "deleteMyCommands", json!({"scope": {"type": "all_private_chats"}}));
    assert_eq!(seen(&alice.bot_commands(&bot, None).expect("alice")), pairs(&defaults));
}

#[test]
fn bad_commands_scopes_and_descriptions_are_refused() {
    let world = World::start("strict_bot");
    let e = refused(&world, "setMyCommands", json!({"commands": commands(&[("Start", "x")])}));
    assert!(e.contains("commands[0].command can contain only lowercase"), "{e}");
    let e = refused(&world, "setMyCommands", json!({"commands": commands(&[("ok", "")])}));
    assert!(e.contains("commands[0].description"), "{e}");
    let many: Vec<(String, String)> = (0..101).map(|i| (format!("c{i}"), "d".to_string())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(c, d)| (c.as_str(), d.as_str())).collect();
    let e = refused(&world, "setMyCommands", json!({"commands": commands(&many)}));
    assert!(e.contains("at most 100"), "{e}");
    for group in ["all_group_chats", "all_chat_administrators"] {
        let e = refused(&world, "setMyCommands", json!({"commands": commands(&[("a", "b")]), "scope": {"type": group}}));
        assert!(e.contains("group chats are not supported yet"), "{e}");
    }
    let e = refused(&world, "getMyCommands", json!({"scope": {"type": "chat_member", "chat_id": -1, "user_id": 5}}));
    assert!(e.contains("group chats are not supported yet"), "{e}");
    let e = refused(&world, "getMyCommands", json!({"scope": {"type": "nobody"}}));
    assert!(e.contains("scope.type"), "{e}");
    let e = refused(&world, "setMyCommands", json!({"commands": commands(&[("a", "b")]), "scope": {"type": "chat", "chat_id": 4_000_000_000_000u64}}));
    assert!(e.contains("chat not found"), "{e}");
    let bot_id = world.bot["compat_user_id"].clone();
    let e = refused(&world, "setMyCommands", json!({"commands": commands(&[("a", "b")]), "scope": {"type": "chat", "chat_id": bot_id}}));
    assert!(e.contains("chat not found"), "a bot is not a private chat: {e}");
    let e = refused(&world, "setMyCommands", json!({"commands": commands(&[("a", "b")]), "language_code": "english"}));
    assert!(e.contains("language_code"), "{e}");
    let e = refused(&world, "setMyDescription", json!({"description": "d".repeat(513)}));
    assert!(e.contains("description must be at most 512"), "{e}");
    let e = refused(&world, "setMyShortDescription", json!({"short_description": "d".repeat(121)}));
    assert!(e.contains("short_description must be at most 120"), "{e}");
    let e = refused(&world, "setMyName", json!({"name": "Renamed"}));
    assert!(e.contains("@BotManager"), "{e}");
    assert_eq!(ok(&world, "getMyCommands", json!({})), json!([]), "nothing refused was stored");
}

#[test]
fn descriptions_and_name() {
    let world = World::start("about_bot");
    let bot = format!("@{}", world.bot_username());
    let carol = world.user("carol_m");

    assert_eq!(ok(&world, "getMyDescription", json!({})), json!({"description": ""}));
    assert_eq!(ok(&world, "getMyShortDescription", json!({})), json!({"short_description": ""}));
    assert_eq!(ok(&world, "setMyDescription", json!({"description": "An echo bot"})), json!(true));
    assert_eq!(ok(&world, "setMyShortDescription", json!({"short_description": "Echo"})), json!(true));
    ok(&world, "setMyDescription", json!({"description": "Ein Echo-Bot", "language_code": "de"}));

    assert_eq!(ok(&world, "getMyDescription", json!({})), json!({"description": "An echo bot"}));
    assert_eq!(ok(&world, "getMyDescription", json!({"language_code": "de"})), json!({"description": "Ein Echo-Bot"}));
    assert_eq!(ok(&world, "getMyShortDescription", json!({"language_code": "de"})), json!({"short_description": ""}), "exact language");
    assert_eq!(ok(&world, "getMyShortDescription", json!({})), json!({"short_description": "Echo"}));

    // A user sees the texts of its language, each falling back to the neutral one.
    let menu = carol.bot_menu(&bot, Some("de")).expect("menu");
    assert_eq!((menu.description.as_str(), menu.short_description.as_str()), ("Ein Echo-Bot", "Echo"));
    let lines = e2e_chat_commands(&world, "carol_m", &[&bot]);
    assert_eq!(lines, vec![json!({"bot": world.bot_username(), "description": "An echo bot", "short_description": "Echo"})]);

    // An empty text removes it.
    ok(&world, "setMyDescription", json!({"description": ""}));
    assert_eq!(ok(&world, "getMyDescription", json!({})), json!({"description": ""}));
    assert_eq!(ok(&world, "getMyDescription", json!({"language_code": "de"})), json!({"description": "Ein Echo-Bot"}));

    assert_eq!(ok(&world, "getMyName", json!({})), json!({"name": world.bot["first_name"]}));
    assert_eq!(ok(&world, "getMyName", json!({"language_code": "de"})), json!({"name": "Test Bot"}));
}
