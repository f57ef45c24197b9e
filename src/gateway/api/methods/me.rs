//! Who the bot is: `getMe`.

use serde_json::Value;

use crate::gateway::botapi::types;
use crate::gateway::botapi::{ApiError, Params};
use crate::gateway::ctx::Ctx;

/// `getMe`: the bot as a User, from the config (checked against the platform at start).
pub(super) fn get_me(bot: &Ctx, _params: &Params) -> Result<Value, ApiError> {
    Ok(types::user_json(&bot.me()))
}
