//! The reading side of chat mode: a thread (`chat-reader`) that shows everything arriving on
//! the device's inbox stream, and reconnects when it breaks. The platform is probed with a
//! short backoff (`FIRST_RECONNECT_DELAY` to `MAX_RECONNECT_DELAY`) and the channel's own
//! reconnection is capped at a second (`wire::connect`), so the chat follows the platform
//! within two seconds of its return; then the outbox is sent.

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::super::display::ChatEvent;
use super::super::error::ClientError;
use super::super::inbox::StreamEnd;
use super::super::message::{Incoming, ReceivedMessage, ReplyMarkup};
use super::super::profile::Profile;
use super::screen::Screen;
use super::{Job, SharedTarget};
use crate::backoff::Backoff;
use crate::wire::platform::Profile as PeerProfile;

/// First and longest wait between two probes of a platform that went away.
const FIRST_RECONNECT_DELAY: Duration = Duration::from_millis(100);
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// How long one probe waits for the channel to connect. It is not cut short by leaving, so it
/// bounds how long leaving can take while the platform is unreachable.
const RECONNECT_PROBE: Duration = Duration::from_secs(1);
/// A stream that held this long was a real recovery: the backoff starts again.
const HELD: Duration = Duration::from_secs(30);
/// How long "@bot is typing…" holds after a chat action (the Bot API's 5 s): a further action
/// within it is not shown again, and the bot's next message ends it.
const TYPING_HOLDS: Duration = Duration::from_secs(5);
/// Usernames the reader keeps for showing events that name only a user id.
const MAX_KNOWN_NAMES: usize = 1000;

/// How often chat mode looks again whether another process still reads the inbox.
const BUSY_RECHECK: Duration = Duration::from_secs(2);

/// Shows what arrives until `stop` is disconnected. A broken stream is shown once
/// ("connection lost"), then probed quietly until the platform answers again ("connected
/// again"), and the sender is asked to send what waits in the outbox. While another process
/// of the profile reads the inbox, that is said once, and looked at again quietly.
pub(super) fn read_loop(profile: Profile, stop: Receiver<()>, screen: Screen, mut shown: Shown, jobs: Sender<Job>) {
    let mut backoff = Backoff::new(FIRST_RECONNECT_DELAY, MAX_RECONNECT_DELAY);
    let mut reconnecting = false;
    let mut busy_said = false;
    loop {
        if reconnecting {
            match stop.recv_timeout(backoff.next_delay()) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
            if !profile.platform().wait_connected(RECONNECT_PROBE) {
                continue;
            }
            screen.show(&ChatEvent::Reconnected);
            // Full: a flush is queued already.
            let _ = jobs.try_send(Job::Flush);
        }
        let started = Instant::now();
        let reason = match profile.receive_events_until(&stop, |e| shown.show(e, &screen, Instant::now())) {
            Ok(StreamEnd::Stopped) => return,
            Ok(StreamEnd::Closed(why)) => why,
            Err(e @ ClientError::InboxBusy { .. }) => {
                if !busy_said {
                    screen.show(&ChatEvent::ConnectionLost { reason: &e.to_string() });
                    busy_said = true;
                }
                reconnecting = false;
                match stop.recv_timeout(BUSY_RECHECK) {
                    Err(RecvTimeoutError::Timeout) => continue,
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            Err(e) => e.to_string(),
        };
        busy_said = false;
        if started.elapsed() >= HELD {
            backoff.reset();
        }
        log::debug!("inbox stream of @{} closed: {reason}", profile.username());
        screen.show(&ChatEvent::ConnectionLost { reason: &reason });
        reconnecting = true;
    }
}

/// The reader's view of the dialog: names for events that carry only a user id, who is typing,
/// and which message last came with buttons.
pub(super) struct Shown {
    names: HashMap<u64, String>,
    typing: Typing,
    target: SharedTarget,
}

impl Shown {
    pub(super) fn new(peer: &PeerProfile, target: SharedTarget) -> Shown {
        let names = HashMap::from([(peer.user_id, peer.username.clone())]);
        Shown { names, typing: Typing::default(), target }
    }

    /// The user id of the dialog typed lines go to (0 in a group).
    fn peer_user_id(&self) -> u64 {
        self.target.lock().unwrap_or_else(PoisonError::into_inner).peer_user_id()
    }

    /// Shows one arrival (or nothing, for a chat action while the bot is already shown typing).
    fn show(&mut self, event: &Incoming, screen: &Screen, now: Instant) {
        match event {
            Incoming::Message(m) => {
                self.learn(m.sender.user_id, &m.sender.username);
                self.typing.ended(m.sender.user_id);
                if m.chat_id == self.peer_user_id() && !m.keyboard.is_empty() {
                    self.set_last_keyboard(Some(m.message_id), |_| true);
                }
                if m.chat_id == self.peer_user_id() {
                    self.note_force_reply(m);
                }
            }
            Incoming::Edited { chat_id, message_id, keyboard, .. } if *chat_id == self.peer_user_id() => {
                if keyboard.is_empty() {
                    self.set_last_keyboard(None, |last| last == Some(*message_id));
                } else {
                    self.set_last_keyboard(Some(*message_id), |_| true);
                }
            }
            Incoming::Deleted { chat_id, message_id } if *chat_id == self.peer_user_id() => {
                self.set_last_keyboard(None, |last| last == Some(*message_id));
            }
            Incoming::Reaction { from, .. } => self.learn(from.user_id, &from.username),
            Incoming::GroupMessage { group, message } => {
                self.learn(message.sender.user_id, &message.sender.username);
                self.typing.ended(message.sender.user_id);
                let here = self.target.lock().unwrap_or_else(PoisonError::into_inner).group.as_ref().is_some_and(|(id, _)| *id == group.id);
                if here {
                    self.note_force_reply(message);
                }
            }
            Incoming::GroupTitle { actor, .. } => self.learn(actor.user_id, &actor.username),
            Incoming::GroupMembership { user, actor, .. } => {
                self.learn(user.user_id, &user.username);
                self.learn(actor.user_id, &actor.username);
            }
            Incoming::ChatAction { from, .. } | Incoming::GroupChatAction { from, .. } => {
                self.learn(from.user_id, &from.username);
                if !self.typing.should_show(from.user_id, now) {
                    return;
                }
            }
            _ => {}
        }
        let chat = self.name(event.chat_id());
        let via = match event {
            Incoming::Message(m) => m.via_bot_user_id.map(|id| self.name(id)),
            _ => None,
        };
        screen.show(&ChatEvent::Incoming { event, chat: &chat, via: via.as_deref() });
    }

    /// A message of the open conversation that asks for an answer: the next typed line
    /// replies to it.
    fn note_force_reply(&self, m: &ReceivedMessage) {
        if matches!(m.reply_markup, Some(ReplyMarkup::ForceReply { .. })) {
            self.target.lock().unwrap_or_else(PoisonError::into_inner).force_reply = Some(m.message_id);
        }
    }

    fn learn(&mut self, user_id: u64, username: &str) {
        if !username.is_empty() && (self.names.len() < MAX_KNOWN_NAMES || self.names.contains_key(&user_id)) {
            self.names.insert(user_id, username.to_string());
        }
    }

    pub(super) fn name(&self, user_id: u64) -> String {
        self.names.get(&user_id).cloned().unwrap_or_else(|| format!("user{user_id}"))
    }

    fn set_last_keyboard(&self, to: Option<u64>, when: impl Fn(Option<u64>) -> bool) {
        let mut target = self.target.lock().unwrap_or_else(PoisonError::into_inner);
        if when(target.last_keyboard) {
            target.last_keyboard = to;
        }
    }
}

/// Who is shown typing: "@bot is typing…" is shown once per spell of typing: a chat action shows it unless one
/// from the same sender came within `TYPING_HOLDS` (bots repeat it every few seconds while
/// working), and the sender's next message ends the spell.
#[derive(Default)]
struct Typing {
    /// Sender → their last chat action.
    since: HashMap<u64, Instant>,
}

impl Typing {
    fn should_show(&mut self, from: u64, now: Instant) -> bool {
        // Only spells still holding are kept, so the map stays as small as who is typing now.
        self.since.retain(|_, at| now.saturating_duration_since(*at) < TYPING_HOLDS);
        self.since.insert(from, now).is_none()
    }

    fn ended(&mut self, from: u64) {
        self.since.remove(&from);
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_shows_once_per_spell_and_ends_with_a_message() {
        let mut typing = Typing::default();
        let t0 = Instant::now();
        assert!(typing.should_show(9, t0));
        assert!(!typing.should_show(9, t0 + Duration::from_secs(4)), "a repeated action within the spell");
        assert!(!typing.should_show(9, t0 + Duration::from_secs(8)), "each action extends the spell");
        assert!(typing.should_show(9, t0 + Duration::from_secs(14)), "after 5 s without one, a new spell");
        assert!(typing.should_show(10, t0 + Duration::from_secs(14)), "per sender");
        typing.ended(9);
        assert!(typing.should_show(9, t0 + Duration::from_secs(15)), "the message ended it");
        assert!(typing.since.len() <= 2);
    }

}
