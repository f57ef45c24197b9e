//! Where chat mode shows things: a terminal (`tui::Tui`, drawn whole from a model), a web page
//! (`web`: the same model, served as JSON), or plain lines (a script, a pipe, `TERM=dumb`: what
//! happens in the dialog to stdout, everything about the program to stderr, one line per thing,
//! never redrawn). Every thread shows through one `Screen`; all kinds take the same
//! `ChatEvent`s.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use super::super::display::ChatEvent;
use super::super::group_delivery::sender_of;
use super::super::message::{message_of, ReceivedMessage, Sender};
use super::super::history::Remembered;
use super::super::profile::Profile;
use super::Target;
use super::super::outbox::{Attempt, Queued};
use super::super::tui::style::Style;
use super::super::tui::view::{shown_text, ChatKey, SendState, View};
use super::web::model::Page;
use super::super::reply_keyboard::ReplyKeyboard;
use super::super::tui::Tui;

/// How many remembered messages a dialog shows when it opens.
const HISTORY: usize = 100;

#[derive(Clone)]
pub(super) enum Screen {
    Tui(Arc<Tui>),
    /// A page in a browser (`web`), drawn there from the same model.
    Web(Arc<Page>),
    Plain,
}

impl Screen {
    /// Shows one event.
    pub fn show(&self, event: &ChatEvent) {
        if let Screen::Plain = self {
            return plain(event);
        }
        let now = crate::clock::unix_now();
        self.with_view(|view| match event {
            ChatEvent::Started { .. } => {}
            ChatEvent::Incoming { event, chat, .. } => view.incoming(event, chat, now),
            ChatEvent::ConnectionLost { reason } => {
                view.set_lost(Some(reason.to_string()));
                view.note(&event_text(event), Style::ALERT, now);
            }
            ChatEvent::Reconnected => {
                view.set_lost(None);
                view.note(&event_text(event), Style::OK, now);
            }
            ChatEvent::Failed { .. } | ChatEvent::SendFailed { .. } => view.note(&event_text(event), Style::ALERT, now),
            ChatEvent::Help | ChatEvent::Menu(_) => view.note(&event_text(event), Style::DIM, now),
            ChatEvent::Chose { .. } => {
                view.chose_inline();
                view.note(&event_text(event), Style::NOTE, now);
            }
            // The poll shows our vote; the note says it too (the terminal draws no options).
            ChatEvent::Voted { message_id, options } => {
                view.voted(*message_id, options);
                view.note(&event_text(event), Style::NOTE, now);
            }
            // Our message changes where it is, marked edited (a note when it scrolled away).
            ChatEvent::Edited { message_id, text } => {
                if !view.edited_own(*message_id, text) {
                    view.note(&event_text(event), Style::NOTE, now);
                }
            }
            _ => view.note(&event_text(event), Style::NOTE, now),
        });
    }

    /// Reads the model a terminal draws or a web page shows, drawing nothing (none on a plain
    /// screen).
    fn read_view<T>(&self, look: impl FnOnce(&View) -> T) -> Option<T> {
        match self {
            Screen::Tui(tui) => Some(tui.look(|s| look(&s.view))),
            Screen::Web(page) => Some(page.read(look)),
            Screen::Plain => None,
        }
    }

    /// Changes the model a terminal draws or a web page shows (nothing on a plain screen).
    fn with_view<T>(&self, change: impl FnOnce(&mut View) -> T) -> Option<T> {
        match self {
            Screen::Tui(tui) => Some(tui.update(|s| change(&mut s.view))),
            Screen::Web(page) => Some(page.update(change)),
            Screen::Plain => None,
        }
    }

    /// A line the person typed, queued: on a terminal it shows at once, pending.
    pub fn typed(&self, queued: &Queued) {
        let now = crate::clock::unix_now();
        self.with_view(|view| view.typed(queued.id, &queued.text(), reply_to(queued), now));
    }

    /// What became of a queued line. `first_wait`: the first time it could not be sent (a
    /// plain screen says so once, not at every retry).
    pub fn settled(&self, queued: &Queued, attempt: &Attempt, first_wait: bool) {
        let shown = queued.text();
        let text: &str = &shown;
        match self {
            Screen::Tui(_) | Screen::Web(_) => {
                let (state, id) = match attempt {
                    Attempt::Sent(sent) => (SendState::Sent, Some(sent.message_id)),
                    Attempt::Waiting(_) => (SendState::Waiting, None),
                    Attempt::Refused(e) => (SendState::Failed(e.to_string()), None),
                };
                self.with_view(|view| view.settle(queued.id, state, id));
            }
            Screen::Plain => match attempt {
                Attempt::Sent(sent) => {
                    plain(&ChatEvent::Sent { text, message_id: sent.message_id, reply_to: reply_to(queued) })
                }
                Attempt::Waiting(e) if first_wait => plain(&ChatEvent::Waiting { text, reason: &e.to_string() }),
                Attempt::Waiting(_) => {}
                Attempt::Refused(e) => plain(&ChatEvent::SendFailed { text, reason: &e.to_string() }),
            },
        }
    }

    /// A message of ours sent outside the outbox (a file from the web page; a location,
    /// contact or poll), shown as the profile remembers it (`peer_key`: a dialog's user id, or a group's `group_peer`).
    pub fn own_message(&self, profile: &Profile, peer_key: u64, message_id: u64) {
        let content = match profile.remembered_sent(peer_key, message_id) {
            Ok(Some(content)) => content,
            Ok(None) => return log::warn!("message {message_id} was sent, but this profile does not remember it"),
            Err(e) => return log::warn!("message {message_id} was sent, but cannot be read back: {e}"),
        };
        let m = message_of(peer_key, ourselves(profile), message_id, crate::clock::unix_now(), &content);
        match self {
            Screen::Plain => plain(&ChatEvent::Sent { text: &shown_text(&m).0, message_id, reply_to: None }),
            _ => {
                self.with_view(|view| view.own_message(&m));
            }
        }
    }

    /// What the profile remembers of the conversation `target` names, before what arrives now,
    /// into a view that shows none of its messages yet (a terminal or a page; a plain screen
    /// prints only what happens from now on). A group's senders are named as the platform
    /// lists its members now; one no longer listed is `user<ID>`.
    pub fn history(&self, profile: &Profile, target: &Target) {
        let key = target.key();
        if self.read_view(|view| view.shows_messages(&key)) != Some(false) {
            return;
        }
        let remembered = match profile.recent_messages(target.keyboard_peer(), HISTORY) {
            Ok(remembered) => remembered,
            Err(e) => return log::warn!("the history of {} cannot be read: {e}", target.shown_name()),
        };
        if remembered.is_empty() {
            return;
        }
        let own = ourselves(profile);
        // A dialog's messages name no sender (0): the peer sent them.
        let mut senders: HashMap<u64, Sender> = HashMap::new();
        match (&target.peer, &target.group) {
            (_, Some((group, _))) => match profile.group_members(group) {
                Ok(details) => senders.extend(details.members.into_iter().map(|m| (m.user.user_id, m.user))),
                Err(e) => log::warn!("the members of {} cannot be listed ({e}); earlier senders are shown by id", target.shown_name()),
            },
            (Some(p), None) => {
                senders.insert(0, sender_of(p));
            }
            (None, None) => {}
        }
        let sender = |r: &Remembered| match r.own {
            true => own.clone(),
            false => senders.get(&r.sender).cloned().unwrap_or_else(|| unknown(r.sender)),
        };
        let chat_id = target.peer_user_id();
        let earlier: Vec<(bool, ReceivedMessage)> =
            remembered.iter().map(|r| (r.own, message_of(chat_id, sender(r), r.message_id, r.date, &r.content))).collect();
        self.with_view(|view| view.load_history(&key, &target.shown_name(), &earlier));
    }

    /// Opens conversation `key` (after `/switch`).
    pub fn open(&self, key: ChatKey, name: &str, about: &str) {
        match self {
            Screen::Plain => plain(&ChatEvent::Switched { name }),
            _ => {
                self.with_view(|view| view.open(key, name, about));
            }
        }
    }

    /// The reply keyboard conversation `key` shows now (a terminal or a page: a plain screen shows
    /// keyboards under their messages).
    pub fn reply_keyboard(&self, key: ChatKey, keyboard: Option<(u64, ReplyKeyboard)>) {
        self.with_view(|view| view.set_reply_keyboard(&key, keyboard.map(|(_, k)| k)));
    }

    /// A hint beside the status line (a terminal or a page).
    pub fn hint(&self, hint: &str) {
        self.with_view(|view| view.set_hint(Some(hint.to_string())));
    }
}

fn reply_to(queued: &Queued) -> Option<u64> {
    Some(queued.content.reply_to_message_id).filter(|&id| id != 0)
}

fn event_text(event: &ChatEvent) -> String {
    event.render()
}

/// A sender the profile knows only by id.
fn unknown(user_id: u64) -> Sender {
    Sender { user_id, username: String::new(), display_name: String::new(), is_bot: false }
}

/// This profile's user, as the sender of our messages.
fn ourselves(profile: &Profile) -> Sender {
    Sender { user_id: profile.user_id(), username: profile.username().to_string(), display_name: String::new(), is_bot: false }
}

/// What happens in the dialog is the program's output; the rest is about the program.
fn plain(event: &ChatEvent) {
    let mut text = event.render();
    text.push('\n');
    let written = if event.is_dialog() { write_flushed(&mut io::stdout().lock(), &text) } else { write_flushed(&mut io::stderr().lock(), &text) };
    if let Err(e) = written {
        log::debug!("could not show a chat event: {e}");
    }
}

fn write_flushed(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.flush()
}
