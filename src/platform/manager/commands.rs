//! The management bot's conversation, free of transport and storage: one incoming text, the
//! sender and their scenario state in; replies, the new scenario state and at most one platform
//! effect out (`handle`). Once the caller has applied the effect, `complete` turns its outcome
//! into the remaining replies.
//!
//! A message whose first word is a known command (`/cmd` or `/cmd@name`, any case) is that
//! command, also in the middle of `/newbot`: `/newbot` starts over, `/cancel` ends the
//! scenario, and `/help`, `/mybots`, `/token`, `/disable`, `/devices`, `/removedevice`,
//! `/rekey` act and then repeat the pending question. Any other text answers the pending question, or gets a hint when there is none.
//! Messages are trimmed; a username answer may start with `@`.
//!
//! Reads the platform needs for a decision (is a username taken, which bots does a user own)
//! go through the `Directory` trait, so the logic is testable with an in-memory directory.
//!
//! # Bot keys
//! The platform never draws a bot's identity secret. The owner's client draws it, and attaches
//! the public key with a proof of possession (`e2e::bot_key`) to its answer to the last
//! `/newbot` question and to `/rekey`; the proof is checked here, against the sender, the
//! username and the capabilities of the scenario. A client that attaches none (a person typing
//! `/newbot` by hand) is told the one command that does it (`no_key_reply`), after the same
//! three questions, and no bot is created.
//!
//! # Reply formats (other programs parse these)
//! - `/start`, `/help`: `HELP`, which lists every command as `/command - what it does`.
//! - `/newbot`: the questions `ASK_USERNAME`, `ASK_DISPLAY_NAME`, `ASK_CAPABILITIES` in order.
//!   A refused answer gets one reply `Invalid <what>: <reason>.` + blank line + the same question.
//! - The final `/newbot` reply (`created_reply`) has, each on its own line,
//!   `Token: <numeric_id>:<64 hex>`, `Bot ID: <64 hex>`, `Bot ID short form: <30 digits in
//!   six groups>`, `Recovery secret: <where it is>` (never the secret: only the owner's
//!   client has it),
//!   `Numeric id: <n>`, `Username: @<username>`, `Display name: <name>`,
//!   `Capabilities: <caps>`, then the `bots[]` JSON entry and a full gateway config.
//! - `/token @name` (owner): `New token for @<username>:` then a line `Token: <token>`.
//! - `/disable @name` (owner): `@<username> is disabled. ...`.
//! - `/mybots`: `Your bots:` then one line per bot
//!   `@<username>: "<display name>", id <n>, Bot ID <64 hex>, capabilities <caps>, <active|disabled>`,
//!   or `NO_BOTS`.
//! - `/devices @name` (owner): `Devices of @<username>:` then one line per device
//!   `#<n>: registered <time>, last seen <time|now|never>, <connected|not connected>,
//!   <active|removed <time>>` (times `YYYY-MM-DD HH:MM:SS UTC`; "connected" = holds an Inbox
//!   stream now, and then last seen is `now`), then a hint line; or
//!   `@<username> has no devices yet. ...`.
//! - `/removedevice @name N` (owner): `Device <n> of @<username> is removed. ...`, or
//!   `Device <n> of @<username> was already removed.`
//! - `/rekey @name` with a proof (owner): `@<username> has a new identity.` then the lines
//!   `Bot ID: <64 hex>`, `Bot ID short form: ...`, `Devices removed: <n>`.

use super::super::bots::BotCredentials;
use super::super::error::{PlatformError, Result};
use super::super::rules;
pub use super::directory::{BotInfo, DeviceView, Directory};
pub use super::replies::NO_BOTS;
use super::replies::{created_reply, devices_reply, my_bots_reply, rekeyed_reply, rotated_reply};
use crate::crypto::identity::BotKeyPurpose;
use crate::e2e::bot_key;
use crate::wire::e2e::BotKeyProof;

/// The profile the gateway implements; the snippet in the final reply names it.
pub use crate::compat::COMPATIBILITY_PROFILE_ID;

pub const HELP: &str = "\
I create and manage bots for the Bot Gateway.

/newbot - create a new bot
/mybots - list your bots and their status
/token @username - revoke the bot's token and issue a new one
/disable @username - disable the bot and revoke all its credentials
/devices @username - list the bot's devices (its gateway runtimes)
/removedevice @username N - remove device N of the bot (a stale or unwanted runtime)
/rekey @username - give the bot a new identity key, drawn on your device (e2e-chat rekey)
/cancel - stop creating a bot
/help - show this help";

pub const ASK_USERNAME: &str = "\
Choose a username for your bot: 3 to 32 characters, Latin letters, digits and _ only. \
It must not be taken by anyone (ignoring case).";

pub const ASK_DISPLAY_NAME: &str = "Now send the bot's display name (up to 128 characters).";

pub const ASK_CAPABILITIES: &str = "\
Last step: the bot's capabilities. Send `default` (private messages), or a comma-separated \
list drawn from dm, groups, channels (groups and channels let the bot work there).";

pub const NOTHING_TO_CANCEL: &str = "There is nothing to cancel. Send /help for the list of commands.";
pub const CANCELLED: &str = "Cancelled: no bot was created. Send /newbot to start again.";
pub const NOT_UNDERSTOOD: &str = "I did not understand that. Send /help for the list of commands.";
pub const TEXT_ONLY: &str = "I understand text commands only. Send /help for the list of commands.";

/// Where a user is in the `/newbot` scenario (persisted per user by the caller).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Scenario {
    #[default]
    Idle,
    /// Asked for the username.
    NewBotUsername,
    /// Username accepted; asked for the display name.
    NewBotDisplayName { username: String },
    /// Display name accepted; asked for the capabilities.
    NewBotCapabilities { username: String, display_name: String },
}

impl Scenario {
    /// The question this step waits for an answer to.
    pub fn question(&self) -> Option<&'static str> {
        match self {
            Scenario::Idle => None,
            Scenario::NewBotUsername => Some(ASK_USERNAME),
            Scenario::NewBotDisplayName { .. } => Some(ASK_DISPLAY_NAME),
            Scenario::NewBotCapabilities { .. } => Some(ASK_CAPABILITIES),
        }
    }
}

/// A change to the platform the caller applies (idempotently) before `complete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A new bot whose identity key the owner's client drew and proved.
    CreateBot { username: String, display_name: String, capabilities: String, identity_key: [u8; 32] },
    /// The bot's identity becomes `identity_key` (proved by the owner's client); every device of
    /// the old one is removed.
    Rekey { bot_id: u64, username: String, identity_key: [u8; 32] },
    RotateToken { bot_id: u64, username: String },
    DisableBot { bot_id: u64, username: String },
    RemoveDevice { bot_id: u64, username: String, device_id: u32 },
}

/// What applying an effect gave. No `Debug`: it may hold a new token.
pub enum EffectOutcome {
    Created {
        credentials: BotCredentials,
        capabilities: String,
        /// The platform endpoint gateways reach (`None`: a placeholder in the config).
        endpoint: Option<String>,
    },
    Rotated {
        token: String,
    },
    Disabled,
    /// The bot has the new identity key; `removed_devices` devices of the old one were removed
    /// (none on a retry after a crash).
    Rekeyed {
        bot_id: u64,
        identity_key: [u8; 32],
        removed_devices: usize,
    },
    /// The device is removed; `dropped` undelivered messages for it were dropped, none when it
    /// had been removed before (a retry after a crash).
    DeviceRemoved {
        dropped: usize,
        already: bool,
    },
    /// The platform refused (e.g. the username was taken in the meantime).
    Failed(PlatformError),
}

/// The answer to one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Sent in order, before the effect's replies.
    pub replies: Vec<String>,
    /// The user's scenario after this message.
    pub scenario: Scenario,
    pub effect: Option<Effect>,
}

impl Decision {
    fn reply(text: impl Into<String>, scenario: Scenario) -> Decision {
        Decision { replies: vec![text.into()], scenario, effect: None }
    }
}

/// The commands; a message whose first word is one of these is a command even mid-scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Help,
    NewBot,
    MyBots,
    Token,
    Disable,
    Devices,
    RemoveDevice,
    Rekey,
    Cancel,
}

/// One message to the management bot, as the logic reads it.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub text: &'a str,
    /// The bot key proof the owner's client attached (`e2e::bot_key`), if any.
    pub bot_key: Option<&'a BotKeyProof>,
    /// The platform's clock (unix seconds), which a proof's time must be near.
    pub now: i64,
}

impl<'a> Message<'a> {
    /// A plain text, as a person types it.
    pub fn text(text: &'a str, now: i64) -> Message<'a> {
        Message { text, bot_key: None, now }
    }
}

/// Splits `/cmd[@botname] args` into a known command and its argument text.
fn parse_command(text: &str) -> Option<(Command, &str)> {
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let word = word.strip_prefix('/')?;
    // `/help@BotManager` is how some clients address a command to one bot.
    let name = word.split_once('@').map_or(word, |(n, _)| n).to_ascii_lowercase();
    let command = match name.as_str() {
        "start" | "help" => Command::Help,
        "newbot" => Command::NewBot,
        "mybots" => Command::MyBots,
        "token" => Command::Token,
        "disable" => Command::Disable,
        "devices" => Command::Devices,
        "removedevice" => Command::RemoveDevice,
        "rekey" => Command::Rekey,
        "cancel" => Command::Cancel,
        _ => return None,
    };
    Some((command, rest.trim()))
}

/// Decides the answer to `message` from `user_id`, whose scenario is `scenario`.
/// An error means the directory could not be read: nothing happened, retry later.
pub fn handle(message: Message<'_>, user_id: u64, scenario: &Scenario, dir: &dyn Directory) -> Result<Decision> {
    let text = message.text.trim();
    if let Some((command, args)) = parse_command(text) {
        return command_decision(command, args, &message, user_id, scenario, dir);
    }
    match scenario {
        Scenario::Idle if text.starts_with('/') => {
            let word = text.split_whitespace().next().unwrap_or(text);
            Ok(Decision::reply(format!("Unknown command {word}. Send /help for the list of commands."), Scenario::Idle))
        }
        Scenario::Idle => Ok(Decision::reply(NOT_UNDERSTOOD, Scenario::Idle)),
        Scenario::NewBotUsername => answer_username(text, dir),
        Scenario::NewBotDisplayName { username } => Ok(answer_display_name(text, username)),
        Scenario::NewBotCapabilities { username, display_name } => {
            answer_capabilities(text, &message, user_id, username, display_name, dir)
        }
    }
}

/// The answer to a message without text (a future content kind): a hint, the scenario kept.
pub fn handle_non_text(scenario: &Scenario) -> Decision {
    let mut replies = vec![TEXT_ONLY.to_string()];
    replies.extend(scenario.question().map(str::to_string));
    Decision { replies, scenario: scenario.clone(), effect: None }
}

fn command_decision(
    command: Command,
    args: &str,
    message: &Message<'_>,
    user_id: u64,
    scenario: &Scenario,
    dir: &dyn Directory,
) -> Result<Decision> {
    match command {
        Command::Help => Ok(with_reminder(vec![HELP.to_string()], scenario)),
        Command::NewBot => Ok(Decision::reply(
            format!("Let's create a new bot. Send /cancel to stop at any time.\n\n{ASK_USERNAME}"),
            Scenario::NewBotUsername,
        )),
        Command::Cancel => Ok(match scenario {
            Scenario::Idle => Decision::reply(NOTHING_TO_CANCEL, Scenario::Idle),
            _ => Decision::reply(CANCELLED, Scenario::Idle),
        }),
        Command::MyBots => {
            let bots = dir.bots_owned_by(user_id)?;
            Ok(with_reminder(vec![my_bots_reply(&bots)], scenario))
        }
        Command::Devices => {
            let Some(name) = bot_argument(args) else {
                return Ok(with_reminder(vec!["Usage: /devices @username".to_string()], scenario));
            };
            let bot = match owned_bot(dir, name, user_id)? {
                Ok(bot) => bot,
                Err(refusal) => return Ok(with_reminder(vec![refusal.to_string()], scenario)),
            };
            let devices = dir.bot_devices(bot.id)?;
            Ok(with_reminder(vec![devices_reply(&bot.username, &devices)], scenario))
        }
        Command::RemoveDevice => {
            let Some((name, device_id)) = remove_device_arguments(args) else {
                return Ok(with_reminder(vec!["Usage: /removedevice @username <device number>".to_string()], scenario));
            };
            let bot = match owned_bot(dir, name, user_id)? {
                Ok(bot) => bot,
                Err(refusal) => return Ok(with_reminder(vec![refusal.to_string()], scenario)),
            };
            let devices = dir.bot_devices(bot.id)?;
            let refusal = match devices.iter().find(|d| d.device_id == device_id) {
                None => Some(format!(
                    "@{} has no device {device_id}. Send /devices @{} to see its devices.",
                    bot.username, bot.username
                )),
                Some(d) if d.removed_at.is_some() => {
                    Some(format!("Device {device_id} of @{} was already removed.", bot.username))
                }
                Some(_) => None,
            };
            if let Some(text) = refusal {
                return Ok(with_reminder(vec![text], scenario));
            }
            let effect = Effect::RemoveDevice { bot_id: bot.id, username: bot.username, device_id };
            Ok(Decision { replies: Vec::new(), scenario: scenario.clone(), effect: Some(effect) })
        }
        Command::Rekey => {
            let Some(name) = bot_argument(args) else {
                return Ok(with_reminder(vec!["Usage: /rekey @username (sent by e2e-chat rekey)".to_string()], scenario));
            };
            let bot = match owned_bot(dir, name, user_id)? {
                Ok(bot) => bot,
                Err(refusal) => return Ok(with_reminder(vec![refusal.to_string()], scenario)),
            };
            if !bot.active {
                return Ok(with_reminder(vec![format!("@{} is disabled; a disabled bot cannot get a new identity.", bot.username)], scenario));
            }
            let Some(proof) = message.bot_key else {
                return Ok(with_reminder(vec![no_rekey_key_reply(&bot.username)], scenario));
            };
            let identity_key = match bot_key::check(proof, BotKeyPurpose::Rekey, user_id, &bot.username, "", message.now) {
                Ok(key) => key,
                Err(e) => return Ok(with_reminder(vec![format!("@{} keeps its identity: {e}.", bot.username)], scenario)),
            };
            if dir.identity_key_in_use(&identity_key)? {
                return Ok(with_reminder(vec![key_in_use(&bot.username)], scenario));
            }
            let effect = Effect::Rekey { bot_id: bot.id, username: bot.username, identity_key };
            Ok(Decision { replies: Vec::new(), scenario: scenario.clone(), effect: Some(effect) })
        }
        Command::Token | Command::Disable => {
            let verb = if command == Command::Token { "token" } else { "disable" };
            let Some(name) = bot_argument(args) else {
                return Ok(with_reminder(vec![format!("Usage: /{verb} @username")], scenario));
            };
            let bot = match owned_bot(dir, name, user_id)? {
                Ok(bot) => bot,
                Err(refusal) => return Ok(with_reminder(vec![refusal.to_string()], scenario)),
            };
            let refusal = match (command, bot.active) {
                (Command::Token, false) => {
                    Some(format!("@{} is disabled; a disabled bot cannot get a new token.", bot.username))
                }
                (Command::Disable, false) => Some(format!("@{} is already disabled.", bot.username)),
                _ => None,
            };
            if let Some(text) = refusal {
                return Ok(with_reminder(vec![text], scenario));
            }
            let effect = if command == Command::Token {
                Effect::RotateToken { bot_id: bot.id, username: bot.username }
            } else {
                Effect::DisableBot { bot_id: bot.id, username: bot.username }
            };
            // The reminder of an unfinished scenario follows the effect's reply (`complete`).
            Ok(Decision { replies: Vec::new(), scenario: scenario.clone(), effect: Some(effect) })
        }
    }
}

/// A command named bot `name`, and the sender owns no bot of that name: the same refusal for
/// someone else's bot and for no bot, so nobody learns whose bots exist. Its text is the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NoSuchBot {
    name: String,
}

impl std::fmt::Display for NoSuchBot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "You have no bot @{}. Send /mybots to see your bots.", self.name)
    }
}

impl std::error::Error for NoSuchBot {}

/// The bot `name` if `user_id` owns it, else [`NoSuchBot`].
fn owned_bot(dir: &dyn Directory, name: &str, user_id: u64) -> Result<std::result::Result<BotInfo, NoSuchBot>> {
    Ok(dir
        .bot_named(name)?
        .filter(|b| b.owner_id == Some(user_id))
        .ok_or_else(|| NoSuchBot { name: name.to_string() }))
}

/// `@name N` (or `name #N`): the bot and a device number; `None` when malformed.
fn remove_device_arguments(args: &str) -> Option<(&str, u32)> {
    let mut words = args.split_whitespace();
    let name = rules::strip_at(words.next()?);
    let number = words.next()?;
    if name.is_empty() || words.next().is_some() {
        return None;
    }
    let device_id = number.strip_prefix('#').unwrap_or(number).parse::<u32>().ok().filter(|n| *n > 0)?;
    Some((name, device_id))
}

/// `@name` or `name` as the only argument; `None` when missing or more than one word.
fn bot_argument(args: &str) -> Option<&str> {
    let mut words = args.split_whitespace();
    let name = rules::strip_at(words.next()?);
    if name.is_empty() || words.next().is_some() {
        return None;
    }
    Some(name)
}

/// `replies`, then the pending question again when a scenario is unfinished.
fn with_reminder(mut replies: Vec<String>, scenario: &Scenario) -> Decision {
    if let Some(question) = scenario.question() {
        replies.push(format!("We are still creating a bot (send /cancel to stop). {question}"));
    }
    Decision { replies, scenario: scenario.clone(), effect: None }
}

fn answer_username(text: &str, dir: &dyn Directory) -> Result<Decision> {
    let username = rules::strip_at(text);
    if let Err(e) = rules::validate_username(username) {
        return Ok(invalid("username", e.message(), Scenario::NewBotUsername));
    }
    if dir.username_taken(username)? {
        return Ok(invalid("username", &format!("@{username} is already taken"), Scenario::NewBotUsername));
    }
    Ok(Decision::reply(
        format!("Good, @{username} is free.\n\n{ASK_DISPLAY_NAME}"),
        Scenario::NewBotDisplayName { username: username.to_string() },
    ))
}

fn answer_display_name(text: &str, username: &str) -> Decision {
    let display_name = text.trim();
    if let Err(e) = rules::validate_display_name(display_name) {
        return invalid("display name", e.message(), Scenario::NewBotDisplayName { username: username.to_string() });
    }
    Decision::reply(
        format!("Display name: {display_name}\n\n{ASK_CAPABILITIES}"),
        Scenario::NewBotCapabilities { username: username.to_string(), display_name: display_name.to_string() },
    )
}

fn answer_capabilities(
    text: &str,
    message: &Message<'_>,
    user_id: u64,
    username: &str,
    display_name: &str,
    dir: &dyn Directory,
) -> Result<Decision> {
    let step = || Scenario::NewBotCapabilities { username: username.to_string(), display_name: display_name.to_string() };
    let capabilities = match rules::parse_capabilities(text) {
        Ok(capabilities) => capabilities,
        Err(e) => return Ok(invalid("capabilities", e.message(), step())),
    };
    let Some(proof) = message.bot_key else {
        return Ok(Decision::reply(no_key_reply(username, display_name, &capabilities), Scenario::Idle));
    };
    let identity_key = match bot_key::check(proof, BotKeyPurpose::Creation, user_id, username, &capabilities, message.now) {
        Ok(key) => key,
        Err(e) => return Ok(invalid("bot key", &e.to_string(), step())),
    };
    if dir.identity_key_in_use(&identity_key)? {
        return Ok(Decision::reply(key_in_use(username), Scenario::Idle));
    }
    Ok(Decision {
        replies: Vec::new(),
        scenario: Scenario::Idle,
        effect: Some(Effect::CreateBot {
            username: username.to_string(),
            display_name: display_name.to_string(),
            capabilities,
            identity_key,
        }),
    })
}

/// `/newbot` answered in full, but without a key: nothing is created, and the person is told
/// the one command that asks the same questions and draws the key on their device.
pub fn no_key_reply(username: &str, display_name: &str, capabilities: &str) -> String {
    format!(
        "No bot was created: your client sent no identity key for it. A bot's identity secret is drawn on \
         its owner's device and never reaches the platform, so that the platform cannot read the bot's \
         messages or act as the bot. Create it with this command, which answers these same questions and \
         draws the secret on your device:\n\n\
         e2e-chat newbot {username} --name {} --capabilities {capabilities}",
        shell_quote(display_name)
    )
}

/// `/rekey` without a key: the command that draws one and sends its proof.
fn no_rekey_key_reply(username: &str) -> String {
    format!(
        "@{username} keeps its identity: your client sent no new key for it. Run on your device:\n\n\
         e2e-chat rekey @{username} --config GATEWAY_CONFIG\n\n\
         It draws the new secret there (the platform never sees it), sends its proof, and updates the \
         gateway config."
    )
}

fn key_in_use(username: &str) -> String {
    format!("@{username}: that key is already the identity of another account. Draw a new one and try again.")
}

/// `text` as one word of a POSIX shell command line.
fn shell_quote(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "_-.,/@".contains(c)) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// `Invalid <what>: <reason>.` and the same question again, staying at the step.
fn invalid(what: &str, reason: &str, step: Scenario) -> Decision {
    let question = step.question().expect("an invalid answer belongs to a scenario step");
    let reason = reason.trim_end_matches('.');
    Decision::reply(format!("Invalid {what}: {reason}.\n\n{question}"), step)
}

/// The replies after an effect was applied, and the user's scenario from then on. `scenario` is
/// the user's scenario as `handle` left it.
pub fn complete(effect: &Effect, outcome: EffectOutcome, scenario: Scenario) -> (Vec<String>, Scenario) {
    let text = match (effect, outcome) {
        (_, EffectOutcome::Created { credentials, capabilities, endpoint }) => {
            created_reply(&credentials, &capabilities, endpoint.as_deref())
        }
        (_, EffectOutcome::Rotated { token }) => rotated_reply(effect_username(effect), &token),
        (_, EffectOutcome::Rekeyed { bot_id, identity_key, removed_devices }) => {
            rekeyed_reply(effect_username(effect), bot_id, &identity_key, removed_devices)
        }
        (Effect::RemoveDevice { device_id, .. }, EffectOutcome::DeviceRemoved { already: true, .. }) => {
            format!("Device {device_id} of @{} was already removed.", effect_username(effect))
        }
        (Effect::RemoveDevice { device_id, .. }, EffectOutcome::DeviceRemoved { dropped, .. }) => format!(
            "Device {device_id} of @{} is removed. Senders no longer encrypt for it, its {dropped} undelivered \
             message(s) were dropped, and a gateway still running as it stops and logs why. \
             To run the bot there again, start that gateway with a fresh state_dir: it registers a new device.",
            effect_username(effect)
        ),
        (_, EffectOutcome::DeviceRemoved { .. }) | (_, EffectOutcome::Disabled) => format!(
            "@{} is disabled. Its token and all its credentials are revoked; no gateway can act as this bot any more.",
            effect_username(effect)
        ),
        (Effect::CreateBot { username, .. }, EffectOutcome::Failed(PlatformError::AlreadyExists(_))) => {
            // Taken between the question and now: ask again.
            let decision = invalid("username", &format!("@{username} is already taken"), Scenario::NewBotUsername);
            return (decision.replies, decision.scenario);
        }
        (Effect::CreateBot { .. }, EffectOutcome::Failed(e)) => {
            format!("Sorry, the bot could not be created: {}. Send /newbot to try again.", e.message())
        }
        (_, EffectOutcome::Failed(e)) => {
            format!("Sorry, @{} could not be changed: {}.", effect_username(effect), e.message())
        }
    };
    let decision = with_reminder(vec![text], &scenario);
    (decision.replies, decision.scenario)
}

fn effect_username(effect: &Effect) -> &str {
    match effect {
        Effect::CreateBot { username, .. }
        | Effect::Rekey { username, .. }
        | Effect::RotateToken { username, .. }
        | Effect::DisableBot { username, .. }
        | Effect::RemoveDevice { username, .. } => username,
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::super::replies::{bot_config_entry, devices_reply, gateway_config, utc, SECRET_PLACEHOLDER};
    use super::*;

    const ME: u64 = 1000;
    const OTHER: u64 = 2000;

    /// An in-memory directory: taken usernames and bots.
    #[derive(Default)]
    struct Dir {
        users: Vec<String>,
        bots: RefCell<Vec<BotInfo>>,
        /// Identity keys of accounts (besides the bots' Bot IDs).
        keys: RefCell<Vec<[u8; 32]>>,
    }

    impl Dir {
        fn with_bots() -> Dir {
            let bot = |id, name: &str, owner, active| BotInfo {
                id,
                username: name.into(),
                display_name: format!("{name} display"),
                capabilities: "default".into(),
                active,
                owner_id: Some(owner),
                bot_id_hex: format!("{id:064x}"),
            };
            Dir {
                users: vec!["Alice".into()],
                bots: RefCell::new(vec![
                    bot(11, "alpha_bot", ME, true),
                    bot(12, "beta_bot", ME, false),
                    bot(13, "theirs_bot", OTHER, true),
                ]),
                keys: RefCell::default(),
            }
        }
    }

    impl Directory for Dir {
        fn username_taken(&self, username: &str) -> Result<bool> {
            let eq = |n: &String| n.eq_ignore_ascii_case(username);
            Ok(self.users.iter().any(eq) || self.bots.borrow().iter().any(|b| eq(&b.username)))
        }
        fn bot_named(&self, username: &str) -> Result<Option<BotInfo>> {
            Ok(self.bots.borrow().iter().find(|b| b.username.eq_ignore_ascii_case(username)).cloned())
        }
        fn bots_owned_by(&self, owner_id: u64) -> Result<Vec<BotInfo>> {
            Ok(self.bots.borrow().iter().filter(|b| b.owner_id == Some(owner_id)).cloned().collect())
        }
        fn identity_key_in_use(&self, identity_key: &[u8; 32]) -> Result<bool> {
            let hex = crate::crypto::hex_encode(identity_key);
            Ok(self.keys.borrow().contains(identity_key) || self.bots.borrow().iter().any(|b| b.bot_id_hex == hex))
        }
        fn bot_devices(&self, bot_id: u64) -> Result<Vec<DeviceView>> {
            // alpha_bot (11): device 1 live, 2 idle since 2024-01-01, 3 removed.
            if bot_id != 11 {
                return Ok(Vec::new());
            }
            let d = |device_id, last_seen, connected, removed_at| DeviceView {
                device_id,
                registered_at: 1_700_000_000,
                last_seen,
                connected,
                removed_at,
            };
            Ok(vec![
                d(1, Some(1_704_067_200), true, None),
                d(2, Some(1_704_067_200), false, None),
                d(3, None, false, Some(1_704_153_599)),
            ])
        }
    }

    /// A directory whose reads fail (storage down).
    struct Broken;

    impl Directory for Broken {
        fn username_taken(&self, _: &str) -> Result<bool> {
            Err(PlatformError::Internal("down".into()))
        }
        fn bot_named(&self, _: &str) -> Result<Option<BotInfo>> {
            Err(PlatformError::Internal("down".into()))
        }
        fn bots_owned_by(&self, _: u64) -> Result<Vec<BotInfo>> {
            Err(PlatformError::Internal("down".into()))
        }
        fn bot_devices(&self, _: u64) -> Result<Vec<DeviceView>> {
            Err(PlatformError::Internal("down".into()))
        }
        fn identity_key_in_use(&self, _: &[u8; 32]) -> Result<bool> {
            Err(PlatformError::Internal("down".into()))
        }
    }

    /// The platform's clock in these tests.
    const NOW: i64 = 1_800_000_000;

    fn run(dir: &Dir, scenario: &Scenario, text: &str) -> Decision {
        handle(Message::text(text, NOW), ME, scenario, dir).expect("directory works")
    }

    /// `text` with a bot key proof attached, as the owner's client sends it.
    fn run_with_key(dir: &Dir, scenario: &Scenario, text: &str, proof: &BotKeyProof) -> Decision {
        handle(Message { text, bot_key: Some(proof), now: NOW }, ME, scenario, dir).expect("directory works")
    }

    fn handle_text(text: &str, user_id: u64, scenario: &Scenario, dir: &dyn Directory) -> Result<Decision> {
        handle(Message::text(text, NOW), user_id, scenario, dir)
    }

    fn only_reply(d: &Decision) -> &str {
        assert_eq!(d.replies.len(), 1, "{:?}", d.replies);
        &d.replies[0]
    }

    fn credentials() -> BotCredentials {
        BotCredentials {
            token: format!("4503599627370495:{}", "ab".repeat(32)),
            bot_id_hex: "cd".repeat(32),
            identity_recovery_secret_hex: None,
            compat_user_id: 4503599627370495,
            username: "new_bot".into(),
            first_name: "New \"quoted\" Bot 🤖".into(),
        }
    }

    #[test]
    fn start_and_help_list_every_command() {
        let dir = Dir::default();
        for text in ["/start", "/help", "  /HELP  ", "/help@BotManager"] {
            let d = run(&dir, &Scenario::Idle, text);
            assert_eq!(only_reply(&d), HELP);
            assert_eq!((d.scenario.clone(), d.effect.clone()), (Scenario::Idle, None));
        }
        for command in [
            "/newbot",
            "/mybots",
            "/token @username",
            "/disable @username",
            "/devices @username",
            "/removedevice @username N",
            "/cancel",
            "/help",
        ] {
            assert!(HELP.contains(command), "help lists {command}");
        }
        // Mid-scenario the help keeps the scenario and repeats the question.
        let d = run(&dir, &Scenario::NewBotUsername, "/help");
        assert_eq!(d.replies.len(), 2);
        assert!(d.replies[1].contains(ASK_USERNAME));
        assert_eq!(d.scenario, Scenario::NewBotUsername);
    }

    #[test]
    fn newbot_happy_path_asks_three_questions_then_creates() {
        let dir = Dir::with_bots();
        let d = run(&dir, &Scenario::Idle, "/newbot");
        assert!(only_reply(&d).ends_with(ASK_USERNAME));
        assert_eq!(d.scenario, Scenario::NewBotUsername);

        let d = run(&dir, &d.scenario, "@My_New_Bot");
        assert!(only_reply(&d).ends_with(ASK_DISPLAY_NAME), "{:?}", d.replies);
        assert_eq!(d.scenario, Scenario::NewBotDisplayName { username: "My_New_Bot".into() });

        let d = run(&dir, &d.scenario, "  My Bot 🤖 ");
        assert!(only_reply(&d).ends_with(ASK_CAPABILITIES));
        assert_eq!(
            d.scenario,
            Scenario::NewBotCapabilities { username: "My_New_Bot".into(), display_name: "My Bot 🤖".into() }
        );

        // The owner's client signs the answers as the platform reads them: the capabilities in
        // their canonical form.
        let key = bot_key::DrawnBotKey::draw();
        let proof = key.proof(BotKeyPurpose::Creation, ME, "My_New_Bot", "dm,channels", NOW - 30);
        let d = run_with_key(&dir, &d.scenario, "channels, dm", &proof);
        assert!(d.replies.is_empty());
        assert_eq!(d.scenario, Scenario::Idle);
        assert_eq!(
            d.effect,
            Some(Effect::CreateBot {
                username: "My_New_Bot".into(),
                display_name: "My Bot 🤖".into(),
                capabilities: "dm,channels".into(),
                identity_key: key.public_key(),
            })
        );
        let step = Scenario::NewBotCapabilities { username: "x_bot".into(), display_name: "X".into() };
        let proof = key.proof(BotKeyPurpose::Creation, ME, "x_bot", "default", NOW);
        let d = run_with_key(&dir, &step, "DEFAULT", &proof);
        assert!(matches!(d.effect, Some(Effect::CreateBot { ref capabilities, .. }) if capabilities == "default"));
    }

    #[test]
    fn newbot_without_a_key_creates_nothing_and_names_the_command() {
        let dir = Dir::with_bots();
        let step = Scenario::NewBotCapabilities { username: "cat_bot".into(), display_name: "Cat's \"Bot\"".into() };
        let d = run(&dir, &step, "groups, dm");
        assert_eq!(d.effect, None);
        assert_eq!(d.scenario, Scenario::Idle);
        let reply = only_reply(&d);
        assert!(reply.starts_with("No bot was created"), "{reply}");
        assert!(
            reply.ends_with("e2e-chat newbot cat_bot --name 'Cat'\\''s \"Bot\"' --capabilities dm,groups"),
            "{reply}"
        );
        // Capabilities are checked first: a wrong list is asked again, key or not.
        let d = run(&dir, &step, "dm,voice");
        assert!(only_reply(&d).starts_with("Invalid capabilities: "));
        assert_eq!(d.scenario, step);
    }

    #[test]
    fn a_proof_for_another_request_is_refused_and_asked_again() {
        let dir = Dir::with_bots();
        let step = Scenario::NewBotCapabilities { username: "cat_bot".into(), display_name: "Cat".into() };
        let key = bot_key::DrawnBotKey::draw();
        for (proof, reason) in [
            (key.proof(BotKeyPurpose::Creation, ME, "dog_bot", "dm", NOW), "does not verify"),
            (key.proof(BotKeyPurpose::Creation, OTHER, "cat_bot", "dm", NOW), "does not verify"),
            (key.proof(BotKeyPurpose::Creation, ME, "cat_bot", "dm,groups", NOW), "does not verify"),
            (key.proof(BotKeyPurpose::Rekey, ME, "cat_bot", "dm", NOW), "does not verify"),
            (key.proof(BotKeyPurpose::Creation, ME, "cat_bot", "dm", NOW - 3600), "3600 s from the platform's clock"),
        ] {
            let d = run_with_key(&dir, &step, "dm", &proof);
            assert_eq!(d.effect, None);
            assert_eq!(d.scenario, step);
            let reply = only_reply(&d);
            assert!(reply.starts_with("Invalid bot key: ") && reply.contains(reason), "{reply}");
            assert!(reply.ends_with(ASK_CAPABILITIES), "{reply}");
        }
        // A Bot ID that is already an account's.
        let taken = bot_key::DrawnBotKey::draw();
        dir.keys.borrow_mut().push(taken.public_key());
        let d = run_with_key(&dir, &step, "dm", &taken.proof(BotKeyPurpose::Creation, ME, "cat_bot", "dm", NOW));
        assert_eq!(d.effect, None);
        assert!(only_reply(&d).contains("already the identity of another account"));
    }

    #[test]
    fn rekey_needs_the_owner_and_a_proof_of_the_new_key() {
        let dir = Dir::with_bots();
        let key = bot_key::DrawnBotKey::draw();
        let proof = key.proof(BotKeyPurpose::Rekey, ME, "alpha_bot", "", NOW);
        let d = run_with_key(&dir, &Scenario::Idle, "/rekey @ALPHA_BOT", &proof);
        assert!(d.replies.is_empty(), "{:?}", d.replies);
        assert_eq!(
            d.effect,
            Some(Effect::Rekey { bot_id: 11, username: "alpha_bot".into(), identity_key: key.public_key() })
        );
        let d = run(&dir, &Scenario::Idle, "/rekey @alpha_bot");
        assert_eq!(d.effect, None);
        assert!(only_reply(&d).contains("e2e-chat rekey @alpha_bot --config"), "{:?}", d.replies);
        // A proof made for creation, or for another bot, is no rekey proof.
        for wrong in [
            key.proof(BotKeyPurpose::Creation, ME, "alpha_bot", "", NOW),
            key.proof(BotKeyPurpose::Rekey, ME, "theirs_bot", "", NOW),
        ] {
            let d = run_with_key(&dir, &Scenario::Idle, "/rekey @alpha_bot", &wrong);
            assert_eq!(d.effect, None);
            assert!(only_reply(&d).starts_with("@alpha_bot keeps its identity: "), "{:?}", d.replies);
        }
        for text in ["/rekey @theirs_bot", "/rekey @nobody_bot"] {
            let d = run_with_key(&dir, &Scenario::Idle, text, &proof);
            assert_eq!(d.effect, None);
            assert!(only_reply(&d).starts_with("You have no bot @"), "{text}");
        }
        let d = run_with_key(&dir, &Scenario::Idle, "/rekey @beta_bot", &key.proof(BotKeyPurpose::Rekey, ME, "beta_bot", "", NOW));
        assert!(only_reply(&d).contains("is disabled"));
        assert_eq!(d.effect, None);

        let effect = Effect::Rekey { bot_id: 11, username: "alpha_bot".into(), identity_key: key.public_key() };
        let outcome = EffectOutcome::Rekeyed { bot_id: 11, identity_key: key.public_key(), removed_devices: 2 };
        let (replies, _) = complete(&effect, outcome, Scenario::Idle);
        let reply = &replies[0];
        assert!(reply.starts_with("@alpha_bot has a new identity."), "{reply}");
        assert!(reply.lines().any(|l| l == format!("Bot ID: {}", key.bot_id_hex())), "{reply}");
        assert!(reply.lines().any(|l| l == "Devices removed: 2"), "{reply}");
    }

    #[test]
    fn every_invalid_username_is_explained_and_asked_again() {
        let dir = Dir::with_bots();
        let cases = [
            ("bad-name", "Latin letters, digits and '_'"),
            ("has space", "Latin letters"),
            ("ümlaut_bot", "Latin letters"),
            ("ab", "3 to 32 characters, got 2"),
            (&"x".repeat(33), "3 to 32 characters, got 33"),
            ("ALPHA_BOT", "@ALPHA_BOT is already taken"),
            ("alice", "@alice is already taken"),
            ("", "3 to 32 characters, got 0"),
        ];
        for (answer, reason) in cases {
            let d = run(&dir, &Scenario::NewBotUsername, answer);
            let reply = only_reply(&d);
            assert!(reply.starts_with("Invalid username: "), "{answer:?}: {reply}");
            assert!(reply.contains(reason), "{answer:?}: {reply}");
            assert!(reply.ends_with(ASK_USERNAME), "{answer:?}: {reply}");
            assert_eq!(d.scenario, Scenario::NewBotUsername, "{answer:?} stays at the step");
            assert_eq!(d.effect, None);
        }
    }

    #[test]
    fn every_invalid_display_name_is_explained_and_asked_again() {
        let dir = Dir::default();
        let step = Scenario::NewBotDisplayName { username: "some_bot".into() };
        let cases = [
            ("   ".to_string(), "must not be empty"),
            ("a".repeat(129), "at most 128 characters, got 129"),
            ("🤖".repeat(129), "at most 128 characters, got 129"),
            ("line\u{7}bell".to_string(), "control characters"),
        ];
        for (answer, reason) in cases {
            let d = run(&dir, &step, &answer);
            let reply = only_reply(&d);
            assert!(reply.starts_with("Invalid display name: "), "{reply}");
            assert!(reply.contains(reason), "{reply}");
            assert!(reply.ends_with(ASK_DISPLAY_NAME), "{reply}");
            assert_eq!(d.scenario, step);
        }
        // Exactly 128 characters of 4-byte emoji is fine: characters, not bytes, are counted.
        let d = run(&dir, &step, &"🤖".repeat(128));
        assert!(
            matches!(d.scenario, Scenario::NewBotCapabilities { ref display_name, .. } if display_name.chars().count() == 128)
        );
        // A name may start with '/' as long as it is not a command.
        let d = run(&dir, &step, "/slash bot");
        assert!(
            matches!(d.scenario, Scenario::NewBotCapabilities { ref display_name, .. } if display_name == "/slash bot")
        );
    }

    #[test]
    fn every_invalid_capability_list_is_explained_and_asked_again() {
        let dir = Dir::default();
        let step = Scenario::NewBotCapabilities { username: "some_bot".into(), display_name: "Some".into() };
        for (answer, reason) in [
            ("all", "unknown capability \"all\""),
            ("dm,voice", "unknown capability \"voice\""),
            ("", "empty capability"),
            ("dm,,groups", "empty capability"),
            ("default,dm", "`default` stands alone"),
            ("dm groups", "unknown capability \"dm groups\""),
        ] {
            let d = run(&dir, &step, answer);
            let reply = only_reply(&d);
            assert!(reply.starts_with("Invalid capabilities: "), "{answer:?}: {reply}");
            assert!(reply.contains(reason), "{answer:?}: {reply}");
            assert!(reply.ends_with(ASK_CAPABILITIES), "{answer:?}: {reply}");
            assert_eq!(d.scenario, step);
            assert_eq!(d.effect, None);
        }
    }

    #[test]
    fn cancel_resets_a_scenario_and_newbot_restarts_it() {
        let dir = Dir::default();
        let mid = Scenario::NewBotCapabilities { username: "some_bot".into(), display_name: "Some".into() };
        let d = run(&dir, &mid, "/cancel");
        assert_eq!(only_reply(&d), CANCELLED);
        assert_eq!(d.scenario, Scenario::Idle);
        let d = run(&dir, &Scenario::Idle, "/cancel");
        assert_eq!(only_reply(&d), NOTHING_TO_CANCEL);
        let d = run(&dir, &mid, "/newbot");
        assert_eq!(d.scenario, Scenario::NewBotUsername);
    }

    #[test]
    fn anything_else_gets_a_hint() {
        let dir = Dir::default();
        let d = run(&dir, &Scenario::Idle, "hello");
        assert_eq!(only_reply(&d), NOT_UNDERSTOOD);
        let d = run(&dir, &Scenario::Idle, "/frobnicate now");
        assert_eq!(only_reply(&d), "Unknown command /frobnicate. Send /help for the list of commands.");
        let d = handle_non_text(&Scenario::Idle);
        assert_eq!(d.replies, vec![TEXT_ONLY.to_string()]);
        let d = handle_non_text(&Scenario::NewBotUsername);
        assert_eq!(d.replies, vec![TEXT_ONLY.to_string(), ASK_USERNAME.to_string()]);
        assert_eq!(d.scenario, Scenario::NewBotUsername);
    }

    #[test]
    fn mybots_lists_only_own_bots() {
        let dir = Dir::with_bots();
        let d = run(&dir, &Scenario::Idle, "/mybots");
        assert_eq!(
            only_reply(&d),
            format!(
                "Your bots:\n@alpha_bot: \"alpha_bot display\", id 11, Bot ID {:064x}, capabilities default, active\n\
                 @beta_bot: \"beta_bot display\", id 12, Bot ID {:064x}, capabilities default, disabled",
                11, 12
            )
        );
        let d = handle_text("/mybots", 999, &Scenario::Idle, &dir).expect("works");
        assert_eq!(only_reply(&d), NO_BOTS);
    }

    #[test]
    fn token_and_disable_are_for_the_owner_only() {
        let dir = Dir::with_bots();
        let d = run(&dir, &Scenario::Idle, "/token @ALPHA_bot");
        assert!(d.replies.is_empty());
        assert_eq!(d.effect, Some(Effect::RotateToken { bot_id: 11, username: "alpha_bot".into() }));
        let d = run(&dir, &Scenario::Idle, "/disable alpha_bot");
        assert_eq!(d.effect, Some(Effect::DisableBot { bot_id: 11, username: "alpha_bot".into() }));

        for text in ["/token @theirs_bot", "/disable @theirs_bot", "/token @nobody_bot", "/token @Alice"] {
            let d = run(&dir, &Scenario::Idle, text);
            assert_eq!(d.effect, None, "{text}");
            assert!(only_reply(&d).starts_with("You have no bot @"), "{text}: {:?}", d.replies);
        }
        let d = run(&dir, &Scenario::Idle, "/token @beta_bot");
        assert_eq!(
            (only_reply(&d), d.effect.clone()),
            ("@beta_bot is disabled; a disabled bot cannot get a new token.", None)
        );
        let d = run(&dir, &Scenario::Idle, "/disable @beta_bot");
        assert_eq!((only_reply(&d), d.effect.clone()), ("@beta_bot is already disabled.", None));
        for text in ["/token", "/token @", "/disable a_bot b_bot"] {
            let d = run(&dir, &Scenario::Idle, text);
            assert!(only_reply(&d).starts_with("Usage: /"), "{text}");
        }
        // Mid-scenario: the effect happens, the scenario stays.
        let d = run(&dir, &Scenario::NewBotUsername, "/token @alpha_bot");
        assert_eq!(d.scenario, Scenario::NewBotUsername);
        assert!(d.effect.is_some());
    }

    #[test]
    fn utc_times_are_calendar_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_704_067_200), "2024-01-01 00:00:00 UTC");
        assert_eq!(utc(1_709_210_096), "2024-02-29 12:34:56 UTC", "a leap day");
        assert_eq!(utc(-1), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn devices_lists_every_device_for_the_owner_only() {
        let dir = Dir::with_bots();
        let d = run(&dir, &Scenario::Idle, "/devices @ALPHA_BOT");
        assert_eq!(d.effect, None);
        let reply = only_reply(&d);
        let lines: Vec<&str> = reply.lines().collect();
        assert_eq!(lines[0], "Devices of @alpha_bot:");
        assert_eq!(
            lines[1],
            "#1: registered 2023-11-14 22:13:20 UTC, last seen now, connected, active"
        );
        assert_eq!(
            lines[2],
            "#2: registered 2023-11-14 22:13:20 UTC, last seen 2024-01-01 00:00:00 UTC, not connected, active"
        );
        assert_eq!(
            lines[3],
            "#3: registered 2023-11-14 22:13:20 UTC, last seen never, not connected, removed 2024-01-01 23:59:59 UTC"
        );
        assert!(reply.ends_with("Remove a stale one with /removedevice @alpha_bot <number>."), "{reply}");
        assert!(!reply.contains("are connected now"), "one live device is no warning");

        let d = run(&dir, &Scenario::Idle, "/devices beta_bot");
        assert!(only_reply(&d).starts_with("@beta_bot has no devices yet."), "{:?}", d.replies);
        for text in ["/devices @theirs_bot", "/devices @nobody_bot"] {
            let d = run(&dir, &Scenario::Idle, text);
            assert!(only_reply(&d).starts_with("You have no bot @"), "{text}: {:?}", d.replies);
        }
        for text in ["/devices", "/devices a_bot b_bot"] {
            assert_eq!(only_reply(&run(&dir, &Scenario::Idle, text)), "Usage: /devices @username");
        }
        // Mid-scenario: listed, then the pending question again.
        let d = run(&dir, &Scenario::NewBotUsername, "/devices @alpha_bot");
        assert_eq!(d.replies.len(), 2);
        assert_eq!(d.scenario, Scenario::NewBotUsername);

        let two_live = [
            DeviceView { device_id: 1, registered_at: 0, last_seen: None, connected: true, removed_at: None },
            DeviceView { device_id: 2, registered_at: 0, last_seen: None, connected: true, removed_at: None },
        ];
        assert!(devices_reply("x_bot", &two_live).contains("2 devices are connected now"));
    }

    #[test]
    fn removedevice_checks_owner_number_and_state() {
        let dir = Dir::with_bots();
        for text in ["/removedevice @alpha_bot 2", "/removedevice alpha_bot #2", "/REMOVEDEVICE@BotManager @alpha_bot 2"] {
            let d = run(&dir, &Scenario::Idle, text);
            assert!(d.replies.is_empty(), "{text}: {:?}", d.replies);
            assert_eq!(
                d.effect,
                Some(Effect::RemoveDevice { bot_id: 11, username: "alpha_bot".into(), device_id: 2 }),
                "{text}"
            );
        }
        let d = run(&dir, &Scenario::Idle, "/removedevice @alpha_bot 3");
        assert_eq!((only_reply(&d), d.effect.clone()), ("Device 3 of @alpha_bot was already removed.", None));
        let d = run(&dir, &Scenario::Idle, "/removedevice @alpha_bot 9");
        assert_eq!(
            only_reply(&d),
            "@alpha_bot has no device 9. Send /devices @alpha_bot to see its devices."
        );
        let d = run(&dir, &Scenario::Idle, "/removedevice @theirs_bot 1");
        assert!(only_reply(&d).starts_with("You have no bot @theirs_bot"));
        assert_eq!(d.effect, None);
        for text in ["/removedevice", "/removedevice @alpha_bot", "/removedevice @alpha_bot two", "/removedevice @alpha_bot 0", "/removedevice @alpha_bot 1 2"] {
            let d = run(&dir, &Scenario::Idle, text);
            assert_eq!(only_reply(&d), "Usage: /removedevice @username <device number>", "{text}");
            assert_eq!(d.effect, None);
        }

        let effect = Effect::RemoveDevice { bot_id: 11, username: "alpha_bot".into(), device_id: 2 };
        let (replies, scenario) =
            complete(&effect, EffectOutcome::DeviceRemoved { dropped: 4, already: false }, Scenario::Idle);
        assert_eq!(scenario, Scenario::Idle);
        assert!(replies[0].starts_with("Device 2 of @alpha_bot is removed."), "{}", replies[0]);
        assert!(replies[0].contains("its 4 undelivered message(s) were dropped"), "{}", replies[0]);
        let (replies, _) =
            complete(&effect, EffectOutcome::DeviceRemoved { dropped: 0, already: true }, Scenario::NewBotUsername);
        assert_eq!(replies[0], "Device 2 of @alpha_bot was already removed.");
        assert!(replies[1].contains(ASK_USERNAME));
    }

    #[test]
    fn directory_failures_are_errors_not_replies() {
        assert!(handle_text("/mybots", ME, &Scenario::Idle, &Broken).is_err());
        assert!(handle_text("some_bot", ME, &Scenario::NewBotUsername, &Broken).is_err());
        assert!(handle_text("/token @x_bot", ME, &Scenario::Idle, &Broken).is_err());
        assert!(handle_text("/devices @x_bot", ME, &Scenario::Idle, &Broken).is_err());
        assert!(handle_text("/removedevice @x_bot 1", ME, &Scenario::Idle, &Broken).is_err());
        // Decisions that need no reads still work.
        assert!(handle_text("/help", ME, &Scenario::Idle, &Broken).is_ok());
    }

    #[test]
    fn created_reply_has_parseable_lines_and_valid_json() {
        let c = credentials();
        let effect = Effect::CreateBot {
            username: c.username.clone(),
            display_name: c.first_name.clone(),
            capabilities: "dm".into(),
            identity_key: [0xcd; 32],
        };
        let (replies, scenario) = complete(
            &effect,
            EffectOutcome::Created {
                credentials: c.clone(),
                capabilities: "dm".into(),
                endpoint: Some("http://127.0.0.1:40123".into()),
            },
            Scenario::Idle,
        );
        assert_eq!(scenario, Scenario::Idle);
        assert_eq!(replies.len(), 1);
        let text = &replies[0];
        let line = |prefix: &str| {
            text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("no line {prefix}"))
        };
        assert_eq!(line("Token: "), c.token);
        assert_eq!(line("Bot ID: "), c.bot_id_hex);
        let key = crate::crypto::hex_decode_32(&c.bot_id_hex).expect("64 hex");
        assert_eq!(line("Bot ID short form: "), crate::crypto::fingerprint::readable(c.compat_user_id, &key));
        assert!(line("Recovery secret: ").starts_with("only on your device"), "never the secret itself");
        assert_eq!(line("Numeric id: "), c.compat_user_id.to_string());
        assert_eq!(line("Capabilities: "), "dm");

        let entry: serde_json::Value = serde_json::from_str(&bot_config_entry(&c, "")).expect("entry is JSON");
        assert_eq!(entry["token"], c.token.as_str());
        assert_eq!(entry["bot_id_hex"], c.bot_id_hex.as_str());
        assert_eq!(entry["identity_recovery_secret_hex"], SECRET_PLACEHOLDER, "the owner's client fills it in");
        assert_eq!(entry["compat_user_id"], c.compat_user_id);
        assert_eq!(entry["username"], "new_bot");
        assert_eq!(entry["first_name"], c.first_name.as_str());
        let snippet = gateway_config(&c, Some("http://127.0.0.1:40123"));
        let config: serde_json::Value = serde_json::from_str(&snippet).expect("config is JSON");
        assert_eq!(config["compatibility_profile_id"], COMPATIBILITY_PROFILE_ID);
        assert_eq!(config["bots"][0], entry);
        assert_eq!(config["bot_platform_endpoint"], "http://127.0.0.1:40123", "the endpoint the user reached");
        assert_eq!((config["compat_listen_addr"].as_str(), config["extensions_listen_addr"].as_str()), (Some("127.0.0.1:8081"), Some("127.0.0.1:8082")));
        // Left to the user: state_dir and the secret their client drew, placeholders the gateway
        // refuses.
        let placeholders: Vec<&str> = snippet.lines().filter(|l| l.contains("\"<")).collect();
        assert_eq!(placeholders.len(), 2, "{placeholders:?}");
        assert!(config["state_dir"].as_str().expect("string").starts_with('<'), "a placeholder");
        assert!(text.contains(&snippet));
        let unknown: serde_json::Value = serde_json::from_str(&gateway_config(&c, None)).expect("config is JSON");
        assert!(unknown["bot_platform_endpoint"].as_str().expect("string").starts_with('<'));

        // A request an earlier version began, with the secret it drew: shown, and said so.
        let legacy = BotCredentials { identity_recovery_secret_hex: Some(zeroize::Zeroizing::new("ef".repeat(32))), ..c };
        let text = created_reply(&legacy, "dm", None);
        assert_eq!(line_of(&text, "Recovery secret: "), "ef".repeat(32));
        assert!(text.contains("e2e-chat rekey @new_bot"), "{text}");
    }

    fn line_of<'t>(text: &'t str, prefix: &str) -> &'t str {
        text.lines().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("no line {prefix}"))
    }

    #[test]
    fn completions_of_rotate_disable_and_failures() {
        let rotate = Effect::RotateToken { bot_id: 11, username: "alpha_bot".into() };
        let token = format!("11:{}", "01".repeat(32));
        let (replies, scenario) = complete(&rotate, EffectOutcome::Rotated { token: token.clone() }, Scenario::Idle);
        assert_eq!(scenario, Scenario::Idle);
        assert!(replies[0].starts_with("New token for @alpha_bot:\n"));
        assert!(replies[0].lines().any(|l| l == format!("Token: {token}")));

        let disable = Effect::DisableBot { bot_id: 11, username: "alpha_bot".into() };
        let (replies, _) = complete(&disable, EffectOutcome::Disabled, Scenario::NewBotUsername);
        assert!(replies[0].starts_with("@alpha_bot is disabled."));
        assert!(replies[1].contains(ASK_USERNAME), "reminder of the unfinished scenario");

        let create = Effect::CreateBot {
            username: "late_bot".into(),
            display_name: "L".into(),
            capabilities: "dm".into(),
            identity_key: [1; 32],
        };
        let taken = EffectOutcome::Failed(PlatformError::AlreadyExists("username @late_bot is already taken".into()));
        let (replies, scenario) = complete(&create, taken, Scenario::Idle);
        assert_eq!(scenario, Scenario::NewBotUsername, "a username taken meanwhile is asked again");
        assert!(replies[0].starts_with("Invalid username: @late_bot is already taken."));
        let (replies, scenario) =
            complete(&create, EffectOutcome::Failed(PlatformError::InvalidArgument("nope".into())), Scenario::Idle);
        assert_eq!(scenario, Scenario::Idle);
        assert!(replies[0].contains("could not be created: nope"));
    }
}
