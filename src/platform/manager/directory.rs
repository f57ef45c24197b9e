//! What the conversation logic reads from the platform (`Directory`), and the shapes it reads:
//! a bot as the commands see it, a device of a bot. `runner` implements it over the store, the
//! tests over memory.

use super::super::error::Result;

/// A bot as the commands see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotInfo {
    pub id: u64,
    pub username: String,
    pub display_name: String,
    pub capabilities: String,
    pub active: bool,
    pub owner_id: Option<u64>,
    /// The bot's identity key in hex: what its owner publishes and users compare
    /// (`e2e-chat verify`).
    pub bot_id_hex: String,
}

/// One device of a bot as `/devices` shows it; times are unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceView {
    pub device_id: u32,
    pub registered_at: i64,
    pub last_seen: Option<i64>,
    /// Holds an open Inbox stream now: a live runtime.
    pub connected: bool,
    /// When the owner removed it; `None` while active.
    pub removed_at: Option<i64>,
}

/// What the logic reads from the platform.
pub trait Directory {
    /// Whether any account (user or bot) has this username, ignoring case.
    fn username_taken(&self, username: &str) -> Result<bool>;
    /// The bot with this username (ignoring case); `None` for no account or a user.
    fn bot_named(&self, username: &str) -> Result<Option<BotInfo>>;
    /// Bots created by `owner_id`, by username.
    fn bots_owned_by(&self, owner_id: u64) -> Result<Vec<BotInfo>>;
    /// Every device of the bot (active and removed), by number.
    fn bot_devices(&self, bot_id: u64) -> Result<Vec<DeviceView>>;
    /// Whether an account already has this identity key (a Bot ID must be one account's).
    fn identity_key_in_use(&self, identity_key: &[u8; 32]) -> Result<bool>;
}

