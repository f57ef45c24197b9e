//! A bot's reply keyboard and the other reply markups (`ReplyMarkup`) as a received message
//! carries them, and their wire form. Data only: keeping and using the keyboard is
//! `reply_keyboard.rs`.

use crate::wire::e2e::reply_button::{PollKind as WirePollKind, Request};
use crate::wire::e2e::{Content, ReplyKeyboard as WireKeyboard};

/// What a reply keyboard button does when used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ButtonRequest {
    /// Sends the button's text.
    Text,
    /// Sends the person's contact card.
    Contact,
    /// Sends a location the person gives.
    Location,
    /// Sends a poll the person makes, of the kind asked for.
    Poll(PollKind),
}

impl ButtonRequest {
    pub fn name(self) -> &'static str {
        match self {
            ButtonRequest::Text => "text",
            ButtonRequest::Contact => "contact",
            ButtonRequest::Location => "location",
            ButtonRequest::Poll(_) => "poll",
        }
    }
}

/// Which polls a poll button asks for (the Bot API's KeyboardButtonPollType).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollKind {
    Any,
    Regular,
    Quiz,
}

impl PollKind {
    /// Whether a poll (`quiz`: a quiz) answers a button asking for this kind.
    pub fn admits(self, quiz: bool) -> bool {
        match self {
            PollKind::Any => true,
            PollKind::Regular => !quiz,
            PollKind::Quiz => quiz,
        }
    }

    /// "a poll", "a regular poll", "a quiz".
    pub fn wanted(self) -> &'static str {
        match self {
            PollKind::Any => "a poll",
            PollKind::Regular => "a regular poll",
            PollKind::Quiz => "a quiz",
        }
    }

    fn from_wire(kind: WirePollKind) -> PollKind {
        match kind {
            WirePollKind::ANY_POLL => PollKind::Any,
            WirePollKind::REGULAR_POLL => PollKind::Regular,
            WirePollKind::QUIZ_POLL => PollKind::Quiz,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyButton {
    pub text: String,
    pub request: ButtonRequest,
}

/// A reply keyboard: its rows, and the bot's wishes for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplyKeyboard {
    pub rows: Vec<Vec<ReplyButton>>,
    /// Hidden once a button was used.
    pub one_time: bool,
    pub resize: bool,
    pub persistent: bool,
    /// What the input line shows while the keyboard is up ("" for none).
    pub placeholder: String,
}

/// What a message does to the person's keyboard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplyMarkup {
    /// Shows these buttons.
    Keyboard(ReplyKeyboard),
    /// Takes the bot's keyboard away.
    Remove,
    /// Asks the person to answer this message (chat mode makes the next line a reply to it).
    ForceReply { placeholder: String },
}

impl ReplyKeyboard {
    pub(crate) fn from_wire(k: &WireKeyboard) -> ReplyKeyboard {
        let rows = k
            .rows
            .iter()
            .map(|row| {
                row.buttons
                    .iter()
                    .map(|b| ReplyButton {
                        text: b.text.clone(),
                        request: match b.request.enum_value() {
                            Ok(Request::CONTACT) => ButtonRequest::Contact,
                            Ok(Request::LOCATION) => ButtonRequest::Location,
                            // A kind of a newer release: any poll answers it.
                            Ok(Request::POLL) => ButtonRequest::Poll(PollKind::from_wire(b.poll_kind.enum_value_or_default())),
                            // A request of a newer release: the button still sends its text.
                            _ => ButtonRequest::Text,
                        },
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|row| !row.is_empty())
            .collect();
        ReplyKeyboard {
            rows,
            one_time: k.one_time_keyboard,
            resize: k.resize_keyboard,
            persistent: k.is_persistent,
            placeholder: k.input_field_placeholder.clone(),
        }
    }

    /// Button `n` (from 1, counted across rows as shown).
    pub fn button(&self, n: usize) -> Option<&ReplyButton> {
        self.rows.iter().flatten().nth(n.checked_sub(1)?)
    }

    pub fn len(&self) -> usize {
        self.rows.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ReplyMarkup {
    /// The markup a received message carries, if any.
    pub(crate) fn of(content: &Content) -> Option<ReplyMarkup> {
        if let Some(k) = content.reply_keyboard.as_ref() {
            let keyboard = ReplyKeyboard::from_wire(k);
            return (!keyboard.is_empty()).then_some(ReplyMarkup::Keyboard(keyboard));
        }
        if content.remove_keyboard.is_some() {
            return Some(ReplyMarkup::Remove);
        }
        content.force_reply.as_ref().map(|f| ReplyMarkup::ForceReply { placeholder: f.input_field_placeholder.clone() })
    }
}
