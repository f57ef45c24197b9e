//! The bot's profile: `setMyCommands`, `getMyCommands`, `deleteMyCommands`,
//! `setMyDescription`, `getMyDescription`, `setMyShortDescription`, `getMyShortDescription`,
//! `getMyName`, `setMyName`.
//!
//! The platform holds the profile (every runtime of the bot and every user sees the same one),
//! so these methods are platform calls; the gateway keeps nothing. Scopes go as far as private
//! chats: `default`, `all_private_chats` and `chat` with a private chat's id. The rules on
//! commands, descriptions and language codes are `wire::bot_profile`, which the platform applies
//! too.

use serde_json::{json, Map, Value};

use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::ctx::Ctx;
use crate::wire::bot_profile as rules;
use crate::wire::platform::{
    bot_command_scope::Kind, set_bot_description_request::Field, BotCommand, BotCommandScope, GetBotCommandsRequest,
    GetBotDescriptionRequest, SetBotCommandsRequest, SetBotDescriptionRequest,
};
use crate::wire::rpc;

/// The BotCommandScope types that name group chats: refused until groups exist.
const GROUP_SCOPES: &[&str] = &["all_group_chats", "all_chat_administrators", "chat_administrators", "chat_member"];

/// Which command list a call means: a scope and a language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandList {
    pub kind: Kind,
    /// The private chat (the user's id) of a `chat` scope; 0 otherwise.
    pub chat_id: u64,
    /// Two lowercase letters, or empty.
    pub language_code: String,
}

/// `setMyCommands`' parameters: the list and what it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetCommands {
    pub list: CommandList,
    /// (command, description) in order.
    pub commands: Vec<(String, String)>,
}

/// Reads `scope` and `language_code` (getMyCommands, deleteMyCommands).
pub fn command_list_request(params: &Params) -> Result<CommandList, ApiError> {
    let language_code = language_code(params)?;
    let Some(scope) = params.optional_nested("scope")? else {
        return Ok(CommandList { kind: Kind::DEFAULT, chat_id: 0, language_code });
    };
    let kind = scope.required_str("type")?;
    let (kind, chat_id) = match kind.as_str() {
        "default" => (Kind::DEFAULT, 0),
        "all_private_chats" => (Kind::ALL_PRIVATE_CHATS, 0),
        "chat" => (Kind::CHAT, private_chat_id(&scope)?),
        group if GROUP_SCOPES.contains(&group) => {
            return Err(ApiError::bad_request(format!(
                "scope.type {group} is not supported: group chats are not supported yet"
            )))
        }
        other => return Err(ApiError::bad_request(format!("scope.type {other:?} is not a BotCommandScope type"))),
    };
    Ok(CommandList { kind, chat_id, language_code })
}

/// Reads `commands`, `scope` and `language_code` (setMyCommands).
pub fn set_commands_request(params: &Params) -> Result<SetCommands, ApiError> {
    let items = params.optional_array("commands")?.ok_or_else(|| ApiError::bad_request("commands is required"))?;
    if items.len() > rules::MAX_COMMANDS {
        return Err(ApiError::bad_request(format!("commands: at most {} commands are allowed", rules::MAX_COMMANDS)));
    }
    let commands = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let obj = item.as_object().ok_or_else(|| ApiError::bad_request(format!("commands[{i}] must be a BotCommand object")))?;
            // "/start" is taken as "start", as the reference server does (bots copy the slash).
            let command = command_field(obj, i, "command")?;
            let command = command.strip_prefix('/').map(str::to_string).unwrap_or(command);
            Ok((command, command_field(obj, i, "description")?))
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    rules::check_commands(commands.iter().map(|(c, d)| (c.as_str(), d.as_str()))).map_err(ApiError::bad_request)?;
    Ok(SetCommands { list: command_list_request(params)?, commands })
}

/// `commands[i].<name>`: a string.
fn command_field(obj: &Map<String, Value>, i: usize, name: &str) -> Result<String, ApiError> {
    match obj.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(ApiError::bad_request(format!("commands[{i}].{name} is required"))),
        Some(_) => Err(ApiError::bad_request(format!("commands[{i}].{name} must be a string"))),
    }
}

/// `scope.chat_id` of a `chat` scope: a private chat, whose id is positive. Groups have
/// negative ids, channels may be named by `@username`.
fn private_chat_id(scope: &Params) -> Result<u64, ApiError> {
    if let Some(Value::String(s)) = scope.get("chat_id") {
        if s.starts_with('@') {
            return Err(ApiError::bad_request("scope.chat_id: group chats and channels are not supported yet"));
        }
    }
    match scope.required_i64("chat_id")? {
        id if id > 0 => Ok(id as u64),
        0 => Err(ApiError::bad_request("chat not found")),
        _ => Err(ApiError::bad_request("scope.chat_id: group chats are not supported yet")),
    }
}

/// `language_code`: two letters (any case, stored lowercase) or empty; absent is empty.
fn language_code(params: &Params) -> Result<String, ApiError> {
    let code = params.optional_str("language_code")?.unwrap_or_default().to_ascii_lowercase();
    rules::check_language_code(&code).map_err(|e| ApiError::bad_request(format!("language_code {e}")))?;
    Ok(code)
}

/// A description text (`name`, absent is empty, which removes it) of at most `max` characters.
fn description_text(params: &Params, name: &str, max: usize) -> Result<String, ApiError> {
    let text = params.optional_str(name)?.unwrap_or_default();
    if text.chars().count() > max {
        return Err(ApiError::bad_request(format!("{name} must be at most {max} characters long")));
    }
    Ok(text)
}

fn wire_scope(list: &CommandList) -> BotCommandScope {
    rules::scope(list.kind, list.chat_id)
}

/// What a failed platform call means to the Bot API caller.
pub(super) fn platform_error(bot: &Ctx, call: &str, e: grpcio::Error) -> ApiError {
    if rpc::is_unauthenticated(&e) {
        bot.revoke(&rpc::text(&e));
        return bot.refusal();
    }
    match (rpc::code(&e), &e) {
        (Some(grpcio::RpcStatusCode::NOT_FOUND), _) => ApiError::bad_request("chat not found"),
        (Some(grpcio::RpcStatusCode::INVALID_ARGUMENT), grpcio::Error::RpcFailure(s)) => {
            ApiError::bad_request(s.message())
        }
        _ => {
            log::warn!("bot @{}: platform call {call} failed: {}", bot.name, rpc::text(&e));
            ApiError::platform(502, format!("the platform did not answer {call}: {}", rpc::text(&e)))
        }
    }
}

fn store_commands(bot: &Ctx, list: &CommandList, commands: Vec<(String, String)>) -> Result<Value, ApiError> {
    let mut req = SetBotCommandsRequest::new();
    req.scope = Some(wire_scope(list)).into();
    req.language_code = list.language_code.clone();
    req.commands = commands
        .into_iter()
        .map(|(command, description)| BotCommand { command, description, ..Default::default() })
        .collect();
    bot.port
        .set_bot_commands(&req)
        .map_err(|e| platform_error(bot, "SetBotCommands", e))?;
    Ok(Value::Bool(true))
}

/// `setMyCommands`: replaces the list of the scope and language.
pub(super) fn set_my_commands(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let req = set_commands_request(params)?;
    store_commands(bot, &req.list, req.commands)
}

/// `deleteMyCommands`: removes the list of the scope and language (the next broader list then
/// applies for users).
pub(super) fn delete_my_commands(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let list = command_list_request(params)?;
    store_commands(bot, &list, Vec::new())
}

/// `getMyCommands`: the list of exactly this scope and language (`[]` when none), as the Bot API
/// answers it.
pub(super) fn get_my_commands(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let list = command_list_request(params)?;
    let mut req = GetBotCommandsRequest::new();
    req.bot_user_id = bot.user_id;
    req.scope = Some(wire_scope(&list)).into();
    req.language_code = list.language_code;
    let resp = bot
        .port
        .get_bot_commands(&req)
        .map_err(|e| platform_error(bot, "GetBotCommands", e))?;
    Ok(Value::Array(
        resp.commands.iter().map(|c| json!({"command": c.command, "description": c.description})).collect(),
    ))
}

fn set_description(bot: &Ctx, params: &Params, field: Field, name: &str, max: usize) -> Result<Value, ApiError> {
    let text = description_text(params, name, max)?;
    let mut req = SetBotDescriptionRequest::new();
    req.field = field.into();
    req.language_code = language_code(params)?;
    req.text = text;
    bot.port
        .set_bot_description(&req)
        .map_err(|e| platform_error(bot, "SetBotDescription", e))?;
    Ok(Value::Bool(true))
}

fn get_description(bot: &Ctx, params: &Params) -> Result<(String, String), ApiError> {
    let mut req = GetBotDescriptionRequest::new();
    req.bot_user_id = bot.user_id;
    req.language_code = language_code(params)?;
    let resp = bot
        .port
        .get_bot_description(&req)
        .map_err(|e| platform_error(bot, "GetBotDescription", e))?;
    Ok((resp.description, resp.short_description))
}

/// `setMyDescription`: the text shown in an empty chat with the bot (≤ 512 characters).
pub(super) fn set_my_description(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    set_description(bot, params, Field::DESCRIPTION, "description", rules::MAX_DESCRIPTION)
}

/// `getMyDescription`: a BotDescription for exactly the language (`""` when none).
pub(super) fn get_my_description(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let (description, _) = get_description(bot, params)?;
    Ok(json!({ "description": description }))
}

/// `setMyShortDescription`: the bot's short description (≤ 120 characters).
pub(super) fn set_my_short_description(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    set_description(bot, params, Field::SHORT_DESCRIPTION, "short_description", rules::MAX_SHORT_DESCRIPTION)
}

/// `getMyShortDescription`: a BotShortDescription for exactly the language (`""` when none).
pub(super) fn get_my_short_description(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let (_, short_description) = get_description(bot, params)?;
    Ok(json!({ "short_description": short_description }))
}

/// `getMyName`: a BotName, the bot's display name (`first_name`, checked against the platform
/// at start). The platform keeps one name for all languages.
pub(super) fn get_my_name(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    language_code(params)?;
    Ok(json!({ "name": bot.first_name }))
}

/// `setMyName`: refused; the display name is the platform account's, set with @BotManager.
pub(super) fn set_my_name(_bot: &Ctx, _params: &Params) -> Result<Value, ApiError> {
    Err(ApiError::bad_request("the bot's name is managed with @BotManager"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, bot, form, p};
    use super::*;
    use crate::gateway::ctx::Parts;
    use crate::gateway::port::refusal;
    use crate::wire::rpc::Refusal;

    /// A method's step holds no bot: a refused credential it meets is handed on through its
    /// `Ctx` (the bot stops sending), and its caller gets 401.
    #[test]
    fn a_refused_credential_is_handed_on_and_answered_401() {
        let parts = Parts::new();
        let unauthenticated = refusal(grpcio::RpcStatusCode::UNAUTHENTICATED, "the token is not the current one");
        let e = platform_error(&parts.ctx(), "SetBotCommands", unauthenticated);
        assert_eq!(e.status, 401, "{e:?}");
        assert_eq!(*parts.refusals.0.lock().expect("refusals"), vec![Refusal::TokenReplaced]);

        let unavailable = refusal(grpcio::RpcStatusCode::UNAVAILABLE, "down");
        assert_ne!(platform_error(&parts.ctx(), "SetBotCommands", unavailable).status, 401);
        assert_eq!(parts.refusals.0.lock().expect("refusals").len(), 1, "only a refusal is handed on");
    }

    #[test]
    fn set_commands_reads_json_and_form_bodies() {
        let body = json!({
            "commands": [{"command": "start", "description": "Start"}, {"command": "help_2", "description": "Hilfe ü"}],
            "scope": {"type": "chat", "chat_id": 42},
            "language_code": "DE"
        });
        let req = set_commands_request(&p(body.clone())).expect("json");
        assert_eq!(req.list, CommandList { kind: Kind::CHAT, chat_id: 42, language_code: "de".into() });
        assert_eq!(req.commands, vec![("start".into(), "Start".into()), ("help_2".into(), "Hilfe ü".into())]);
        // Form and multipart send nested values as JSON text.
        let f = form(&[
            ("commands", &body["commands"].to_string()),
            ("scope", r#"{"type":"chat","chat_id":"42"}"#),
            ("language_code", "de"),
        ]);
        assert_eq!(set_commands_request(&f).expect("form"), req);
        let plain = set_commands_request(&p(json!({"commands": []}))).expect("empty list, default scope");
        assert_eq!(plain.list, CommandList { kind: Kind::DEFAULT, chat_id: 0, language_code: String::new() });
        assert!(plain.commands.is_empty());
        let slashed = set_commands_request(&p(json!({"commands": [{"command": "/start", "description": "Begin"}]}))).expect("a leading slash");
        assert_eq!(slashed.commands, vec![("start".to_string(), "Begin".to_string())], "the slash is stripped");
        assert!(bad(set_commands_request(&p(json!({"commands": [{"command": "//start", "description": "x"}]})))).contains("command can contain only"));
    }

    #[test]
    fn set_commands_rejections_name_the_field() {
        let cmd = |c: &str, d: &str| json!({"commands": [{"command": c, "description": d}]});
        assert_eq!(bad(set_commands_request(&p(json!({})))), "Bad Request: commands is required");
        assert_eq!(bad(set_commands_request(&p(json!({"commands": "x"})))), "Bad Request: commands must be a JSON array");
        assert_eq!(bad(set_commands_request(&p(json!({"commands": [1]})))), "Bad Request: commands[0] must be a BotCommand object");
        assert_eq!(
            bad(set_commands_request(&p(json!({"commands": [{"command": "a"}]})))),
            "Bad Request: commands[0].description is required"
        );
        assert!(bad(set_commands_request(&p(cmd("Start", "x")))).starts_with("Bad Request: commands[0].command can contain only"));
        assert!(bad(set_commands_request(&p(cmd(&"a".repeat(33), "x")))).contains("commands[0].command must be 1-32"));
        assert!(bad(set_commands_request(&p(cmd("a", "")))).contains("commands[0].description must be 1-256"));
        assert!(bad(set_commands_request(&p(cmd("a", &"d".repeat(257))))).contains("commands[0].description"));
        let many: Vec<Value> = (0..101).map(|i| json!({"command": format!("c{i}"), "description": "d"})).collect();
        assert!(bad(set_commands_request(&p(json!({"commands": many})))).contains("at most 100"));
        let mut ok = cmd("a", "b");
        ok["language_code"] = json!("eng");
        assert!(bad(set_commands_request(&p(ok))).starts_with("Bad Request: language_code must be a two-letter"));
    }

    #[test]
    fn scopes_go_as_far_as_private_chats() {
        let scope = |s: Value| command_list_request(&p(json!({ "scope": s })));
        assert_eq!(scope(json!({"type": "default"})).expect("default").kind, Kind::DEFAULT);
        assert_eq!(scope(json!({"type": "all_private_chats"})).expect("private").kind, Kind::ALL_PRIVATE_CHATS);
        for group in GROUP_SCOPES {
            let e = bad(scope(json!({"type": group, "chat_id": -5})));
            assert!(e.contains("group chats are not supported yet") && e.contains(group), "{e}");
        }
        assert!(bad(scope(json!({"type": "chat", "chat_id": -100}))).contains("group chats are not supported yet"));
        assert!(bad(scope(json!({"type": "chat", "chat_id": "@chan"}))).contains("not supported yet"));
        assert_eq!(bad(scope(json!({"type": "chat"}))), "Bad Request: scope.chat_id is required");
        assert_eq!(bad(scope(json!({"type": "everyone"}))), "Bad Request: scope.type \"everyone\" is not a BotCommandScope type");
        assert_eq!(bad(scope(json!({}))), "Bad Request: scope.type is required");
        assert_eq!(bad(scope(json!("default"))), "Bad Request: scope must be a JSON object");
    }

    #[test]
    fn descriptions_have_their_limits() {
        assert_eq!(description_text(&p(json!({})), "description", 512).expect("absent is empty"), "");
        assert!(description_text(&p(json!({"description": "é".repeat(512)})), "description", 512).is_ok());
        assert_eq!(
            bad(description_text(&p(json!({"description": "d".repeat(513)})), "description", 512)),
            "Bad Request: description must be at most 512 characters long"
        );
        assert_eq!(
            bad(description_text(&p(json!({"short_description": "d".repeat(121)})), "short_description", 120)),
            "Bad Request: short_description must be at most 120 characters long"
        );
    }

    #[test]
    fn name_is_the_first_name_and_set_my_name_is_refused() {
        let (_dir, bot) = bot();
        assert_eq!(get_my_name(&bot.ctx(), &p(json!({"language_code": "en"}))).expect("name"), json!({"name": "B"}));
        assert!(bad(get_my_name(&bot.ctx(), &p(json!({"language_code": "english"})))).contains("language_code"));
        assert_eq!(bad(set_my_name(&bot.ctx(), &p(json!({"name": "X"})))), "Bad Request: the bot's name is managed with @BotManager");
    }
}
