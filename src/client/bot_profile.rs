//! Reading a bot's public profile as a user: the command list of the private chat with it, and
//! its descriptions. The platform stores one list per (scope, language); the client picks the
//! first that exists in the Bot API's order (`wire::bot_profile::private_chat_lookup_order`).
//!
//! `Profile::bot_menu` is what a chat view shows when a dialog with a bot opens.

use super::error::{ClientError, Result, rpc};
use super::profile::Profile;
use crate::wire::bot_profile as rules;
use crate::wire::platform::{GetBotCommandsRequest, GetBotDescriptionRequest, Profile as PeerProfile};

/// One command of a bot's menu.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotCommand {
    pub command: String,
    pub description: String,
}

/// What a user sees of a bot before writing to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BotMenu {
    /// The bot's username.
    pub bot: String,
    /// The commands of this user's private chat with the bot; empty when the bot set none.
    pub commands: Vec<BotCommand>,
    /// In the user's language when the bot set one, else the language-neutral one ("" if none).
    pub description: String,
    pub short_description: String,
}

impl Profile {
    /// The commands this user sees in its private chat with `bot` (a username, `@` optional),
    /// in the language `language_code` (two letters) when the bot has a list for it.
    pub fn bot_commands(&self, bot: &str, language_code: Option<&str>) -> Result<Vec<BotCommand>> {
        let peer = self.lookup_bot(bot)?;
        self.commands_of(&peer, &checked_language(language_code)?)
    }

    /// The commands and descriptions of `bot` for this user, as [`Profile::bot_commands`].
    pub fn bot_menu(&self, bot: &str, language_code: Option<&str>) -> Result<BotMenu> {
        let peer = self.lookup_bot(bot)?;
        let lang = checked_language(language_code)?;
        let commands = self.commands_of(&peer, &lang)?;
        let (mut description, mut short_description) = self.descriptions_of(&peer, &lang)?;
        if !lang.is_empty() && (description.is_empty() || short_description.is_empty()) {
            // Each text falls back to the language-neutral one on its own.
            let (d, s) = self.descriptions_of(&peer, "")?;
            if description.is_empty() {
                description = d;
            }
            if short_description.is_empty() {
                short_description = s;
            }
        }
        Ok(BotMenu { bot: peer.username, commands, description, short_description })
    }

    fn lookup_bot(&self, bot: &str) -> Result<PeerProfile> {
        let peer = self.lookup(bot)?;
        if !peer.is_bot {
            return Err(ClientError::Invalid(format!("@{} is not a bot", peer.username)));
        }
        Ok(peer)
    }

    fn commands_of(&self, bot: &PeerProfile, lang: &str) -> Result<Vec<BotCommand>> {
        for (scope, language_code) in rules::private_chat_lookup_order(self.user_id(), lang) {
            let mut req = GetBotCommandsRequest::new();
            req.bot_user_id = bot.user_id;
            req.scope = Some(scope).into();
            req.language_code = language_code;
            let resp = self
                .platform
                .client
                .get_bot_commands(&req, self.platform.opt())
                .map_err(rpc("GetBotCommands"))?;
            if !resp.commands.is_empty() {
                return Ok(resp
                    .commands
                    .into_iter()
                    .map(|c| BotCommand { command: c.command, description: c.description })
                    .collect());
            }
        }
        Ok(Vec::new())
    }

    fn descriptions_of(&self, bot: &PeerProfile, lang: &str) -> Result<(String, String)> {
        let mut req = GetBotDescriptionRequest::new();
        req.bot_user_id = bot.user_id;
        req.language_code = lang.to_string();
        let resp = self
            .platform
            .client
            .get_bot_description(&req, self.platform.opt())
            .map_err(rpc("GetBotDescription"))?;
        Ok((resp.description, resp.short_description))
    }
}

/// A language code as given by a person: any case, stored lowercase; none is "".
fn checked_language(code: Option<&str>) -> Result<String> {
    let code = code.unwrap_or("").trim().to_ascii_lowercase();
    rules::check_language_code(&code).map_err(|e| ClientError::Invalid(format!("language {code:?} {e}")))?;
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_two_letters_in_any_case() {
        assert_eq!(checked_language(None).expect("none"), "");
        assert_eq!(checked_language(Some("DE")).expect("upper"), "de");
        assert!(checked_language(Some("deu")).is_err());
    }
}
