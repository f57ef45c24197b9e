//! Why a chat-mode command (`/press`, `/react`, `/location`, ...) did nothing: it needs a
//! conversation, names a message or button that is not there, or the profile refused it. The
//! screen shows it after the command's name.

use std::fmt;

use super::super::error::ClientError;

#[derive(Debug)]
pub(super) enum CommandError {
    /// `command` needs a dialog (with a user or bot) and none is open.
    NotInDialog { command: &'static str },
    /// `/edit` needs a dialog or a group and neither is open.
    NothingToEdit,
    /// Sharing needs an open conversation.
    NoConversation,
    /// `/press` without a message number, and no message with buttons has arrived.
    NoKeyboardYet,
    /// The profile does not remember message `message_id` from `peer`.
    UnknownMessage { peer: String, message_id: u64 },
    /// Message `message_id` has no button `button` (by number or callback data).
    NoSuchButton { message_id: u64, button: String },
    /// Button `number` of message `message_id` opens `url`; there is nothing to press.
    LinkButton { message_id: u64, number: usize, url: String },
    /// The profile or the platform refused.
    Client(ClientError),
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::NotInDialog { command } => write!(f, "{command} works in a dialog; /switch @NAME to one"),
            CommandError::NothingToEdit => f.write_str("/edit works in a dialog or a group; /switch to one"),
            CommandError::NoConversation => f.write_str("no conversation is open; /switch @NAME to one"),
            CommandError::NoKeyboardYet => {
                f.write_str("no message with buttons has arrived in this chat yet; name one: /press N BUTTON")
            }
            CommandError::UnknownMessage { peer, message_id } => {
                write!(f, "no message #{message_id} from @{peer} is known to this profile")
            }
            CommandError::NoSuchButton { message_id, button } => {
                write!(f, "message #{message_id} has no button {button:?} (a number as shown, or its callback data)")
            }
            CommandError::LinkButton { message_id, number, url } => {
                write!(f, "button {number} of #{message_id} is a link, not a button to press: {url}")
            }
            CommandError::Client(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CommandError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CommandError::Client(e) => Some(e),
            _ => None,
        }
    }
}

impl From<ClientError> for CommandError {
    fn from(e: ClientError) -> Self {
        CommandError::Client(e)
    }
}
