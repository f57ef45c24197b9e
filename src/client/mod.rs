//! The user-device client library: a profile directory with the user's keys and sessions,
//! sending to and receiving from bots and other users. Used by `e2e-chat` and by the
//! end-to-end tests.
//!
//! - `profile`: the profile directory and database, registration, opening.
//! - `send`: looking peers up, sessions with their devices, sealing and sending (text,
//!   button presses, reactions).
//! - `bot_keys`: creating a bot (`Profile::create_bot`) and moving it to a new identity
//!   (`Profile::rekey_bot`) with the identity secret drawn here, never sent to the platform.
//! - `bot_profile`: a bot's commands and descriptions as a user sees them
//!   (`Profile::bot_menu`, `Profile::bot_commands`).
//! - `inbox`: the Inbox stream, opening envelopes into `Incoming` events, acknowledging,
//!   prekey replenishment.
//! - `group`: groups over MLS (create, add, remove, leave, send) against the platform's
//!   delivery service, and what arrives for a group in the inbox.
//! - `places`: locations, venues, contact cards and dice (`Shared`), and the one way to send
//!   one (`Profile::send_shared`, `Profile::send_group_shared`, `Profile::own_contact_card`).
//! - `outbox`: lines typed in chat mode, kept until the platform takes them.
//! - `history`: the received messages remembered per dialog (edits applied), for presses
//!   and downloads, and the texts we sent, for our edits.
//! - `edit`: editing our own texts end to end (`Profile::edit_message`).
//! - `reply_keyboard`: the reply keyboard each conversation shows, until replaced, removed
//!   or (one-time) used.
//! - `media`: sending a file (encrypted while streamed to the platform) and downloading one
//!   (verified whole before a byte is written).
//! - `cli`, `chat`: the `e2e-chat` program (its command families in `cli/`, the JSON lines it
//!   prints in `cli/json.rs`) and its chat mode; `tui`: chat mode on a terminal
//!   (a screen drawn from a model, a line editor); `display`: what it shows a person, made safe
//!   for a terminal.
//!
//! ```no_run
//! use std::time::Duration;
//! use bot_gateway::client::Profile;
//! # fn main() -> Result<(), bot_gateway::client::ClientError> {
//! let dir = std::path::Path::new("/tmp/alice");
//! let alice = Profile::register("http://127.0.0.1:50051", dir, "alice", "Alice")?;
//! let sent = alice.send_text("@somebot", "/start")?;
//! for m in alice.receive(Duration::from_secs(5), 10)? {
//!     println!("{} in chat {}: {}", m.sender.username, m.chat_id, m.text);
//! }
//! # let _ = sent; Ok(()) }
//! ```

mod admin;
mod bot_config;
mod bot_keys;
mod bot_profile;
mod chat;
mod deep_link;
mod cli;
mod cli_common;
mod cli_bot;
mod cli_config;
mod cli_places;
pub mod display;
mod edit;
mod error;
mod group;
mod group_commit;
mod group_delivery;
mod history;
mod identity;
mod inline;
mod inbox;
mod media;
mod message;
mod outbox;
mod places;
mod profile;
mod reader;
mod reply_keyboard;
mod reply_markup;
mod schema;
mod send;
mod shared_item;
mod tui;

#[cfg(test)]
mod dialog_tests;

pub use bot_keys::{CreatedBot, NewBot, RekeyedBot};
pub use bot_profile::{BotCommand, BotMenu};
pub use cli::run_cli;
pub use edit::EditedMessage;
pub use error::{ClientError, Result};
pub use inbox::{StreamEnd, REPLENISH_BELOW};
pub use group::{Added, GroupDetails, GroupMemberInfo, SentGroupMessage, CATCH_UP_WAIT, MAX_GROUP_ATTEMPTS};
pub use group_delivery::{KnownGroup, KEY_PACKAGES_LOW, KEY_PACKAGES_TARGET};
pub use history::MAX_REMEMBERED;
pub use identity::PeerIdentity;
pub use media::{guess_kind, guess_mime, MAX_FILE_SIZE};
pub use message::{
    role_name, Button, Entity, ForwardOrigin, GroupId, GroupRef, GroupRole, Incoming, InlineResult, Keyboard, MediaInfo, MediaKind, ReactionType, ReceivedMessage, SentMessage,
    SentPress, Sender,
};
pub use outbox::{Attempt, Queued};
pub use reply_keyboard::{ButtonRequest, ReplyButton, ReplyKeyboard, ReplyMarkup};
pub use places::{ContactCard, DiceInfo, LocationInfo, PollInfo, Shared, VenueInfo};
pub use profile::{Profile, BUSY_TIMEOUT, DB_FILE};
pub use send::MAX_SEND_ATTEMPTS;
