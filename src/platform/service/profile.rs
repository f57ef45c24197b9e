//! A bot's public profile: SetBotCommands, GetBotCommands, SetBotDescription,
//! GetBotDescription. The setters need a registered device of the bot (a gateway runtime);
//! the getters any active device: the bot reads its own profile, a user reads any bot's, but of
//! the per-chat lists only the one for its own chat. Every value is checked here with the
//! rules the gateway applies (`wire::bot_profile`), since a caller need not be our gateway.

use super::super::auth::Caller;
use super::super::convert::invalid;
use super::super::error::{PlatformError, Result};
use super::super::store::{CommandsKey, DescriptionField, Store};
use crate::wire::bot_profile as rules;
use crate::wire::platform as pb;
use pb::bot_command_scope::Kind;

pub(super) fn set_bot_commands(
    store: &Store,
    caller: Caller,
    req: pb::SetBotCommandsRequest,
) -> Result<pb::SetBotCommandsResponse> {
    let bot_id = bot_itself(&caller, "SetBotCommands")?;
    let key = commands_key(store, req.scope.as_ref(), &req.language_code)?;
    rules::check_commands(req.commands.iter().map(|c| (c.command.as_str(), c.description.as_str()))).map_err(|e| invalid(e.0))?;
    let commands: Vec<(String, String)> = req.commands.into_iter().map(|c| (c.command, c.description)).collect();
    store.set_bot_commands(bot_id, &key, &commands)?;
    log::debug!("bot {bot_id}: {} commands for scope {} language {:?}", commands.len(), key.scope, key.language_code);
    Ok(pb::SetBotCommandsResponse::new())
}

pub(super) fn get_bot_commands(
    store: &Store,
    caller: Caller,
    req: pb::GetBotCommandsRequest,
) -> Result<pb::GetBotCommandsResponse> {
    let bot_id = readable_bot(store, &caller, req.bot_user_id)?;
    let key = commands_key(store, req.scope.as_ref(), &req.language_code)?;
    if !caller.is_bot && key.scope == "chat" && key.chat_id != caller.user_id {
        return Err(PlatformError::PermissionDenied("a user may read only the command list of its own chat".into()));
    }
    let commands = store
        .bot_commands(bot_id, &key)?
        .into_iter()
        .map(|(command, description)| pb::BotCommand { command, description, ..Default::default() })
        .collect();
    Ok(pb::GetBotCommandsResponse { commands, ..Default::default() })
}

pub(super) fn set_bot_description(
    store: &Store,
    caller: Caller,
    req: pb::SetBotDescriptionRequest,
) -> Result<pb::SetBotDescriptionResponse> {
    use pb::set_bot_description_request::Field;
    let bot_id = bot_itself(&caller, "SetBotDescription")?;
    rules::check_language_code(&req.language_code).map_err(|e| invalid(format!("language_code {e}")))?;
    let (field, max, name) = match req.field.enum_value() {
        Ok(Field::DESCRIPTION) => (DescriptionField::Description, rules::MAX_DESCRIPTION, "description"),
        Ok(Field::SHORT_DESCRIPTION) => {
            (DescriptionField::ShortDescription, rules::MAX_SHORT_DESCRIPTION, "short_description")
        }
        Err(n) => return Err(invalid(format!("unknown description field {n}"))),
    };
    if req.text.chars().count() > max {
        return Err(invalid(format!("{name} must be at most {max} characters long")));
    }
    store.set_bot_description(bot_id, &req.language_code, field, &req.text)?;
    Ok(pb::SetBotDescriptionResponse::new())
}

pub(super) fn get_bot_description(
    store: &Store,
    caller: Caller,
    req: pb::GetBotDescriptionRequest,
) -> Result<pb::BotDescription> {
    let bot_id = readable_bot(store, &caller, req.bot_user_id)?;
    rules::check_language_code(&req.language_code).map_err(|e| invalid(format!("language_code {e}")))?;
    let (description, short_description) = store.bot_description(bot_id, &req.language_code)?;
    Ok(pb::BotDescription { description, short_description, ..Default::default() })
}

/// The bot whose device calls: only a bot changes its own profile.
fn bot_itself(caller: &Caller, method: &str) -> Result<u64> {
    if !caller.is_bot {
        return Err(PlatformError::PermissionDenied(format!("{method} is for a bot's own devices")));
    }
    Ok(caller.user_id)
}

/// The bot a getter reads: the calling bot itself, or for a user the named bot account.
fn readable_bot(store: &Store, caller: &Caller, bot_user_id: u64) -> Result<u64> {
    if caller.is_bot {
        return Ok(caller.user_id);
    }
    match store.account_by_id(bot_user_id)? {
        Some(account) if account.is_bot => Ok(account.id),
        _ => Err(PlatformError::NotFound(format!("no bot with id {bot_user_id}"))),
    }
}

/// A scope and language as stored, checked: a chat scope names an existing user (a private
/// chat's id is the user's id).
fn commands_key(store: &Store, scope: Option<&pb::BotCommandScope>, language_code: &str) -> Result<CommandsKey> {
    rules::check_language_code(language_code).map_err(|e| invalid(format!("language_code {e}")))?;
    let (kind, chat_id) = scope.map(|s| (s.kind.enum_value(), s.chat_id)).unwrap_or((Ok(Kind::DEFAULT), 0));
    let (scope, chat_id) = match kind {
        Ok(Kind::DEFAULT) => ("default", 0),
        Ok(Kind::ALL_PRIVATE_CHATS) => ("all_private_chats", 0),
        Ok(Kind::CHAT) => {
            match store.account_by_id(chat_id)? {
                Some(account) if !account.is_bot => {}
                _ => return Err(PlatformError::NotFound(format!("chat {chat_id} not found"))),
            }
            ("chat", chat_id)
        }
        Err(n) => return Err(invalid(format!("unknown command scope kind {n}"))),
    };
    Ok(CommandsKey { scope, chat_id, language_code: language_code.to_string() })
}
