//! The sending side of chat mode (`chat-sender`): the outbox sent in order, and the commands
//! that talk to the platform. While the platform cannot be reached, what waits is retried with
//! a backoff (`FIRST_RETRY` to `MAX_RETRY`), and at once when the reader reconnects.

use std::collections::HashSet;
use std::sync::PoisonError;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::super::display::ChatEvent;
use super::super::message::keyboard_from_wire;
use super::super::outbox::Attempt;
use super::super::profile::Profile;
use super::super::tui::view::ChatKey;
use super::command::{language_from_env, pick_button};
use super::screen::Screen;
use super::{lock, Job, SharedTarget, Target};
use crate::backoff::Backoff;

/// First and longest wait before sending the outbox again when the platform was unreachable.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(2);

pub(super) struct Dialog {
    profile: Profile,
    target: SharedTarget,
    screen: Screen,
    /// The person's language (two letters) for the bot's command list, from the locale.
    language: Option<String>,
    /// Queued messages already said to be waiting (a plain screen says it once).
    told_waiting: HashSet<i64>,
}

impl Dialog {
    pub(super) fn new(profile: Profile, target: SharedTarget, screen: Screen) -> Dialog {
        Dialog { profile, target, screen, language: language_from_env(), told_waiting: HashSet::new() }
    }

    /// Runs jobs until the typing side is gone, retrying a waiting outbox meanwhile.
    pub(super) fn run(mut self, jobs: Receiver<Job>) {
        let mut retry = Backoff::new(FIRST_RETRY, MAX_RETRY);
        let mut waiting = false;
        loop {
            let job = if waiting {
                match jobs.recv_timeout(retry.next_delay()) {
                    Ok(job) => job,
                    Err(RecvTimeoutError::Timeout) => Job::Flush,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match jobs.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                }
            };
            match job {
                Job::Flush => {
                    waiting = !self.flush();
                    if !waiting {
                        retry.reset();
                    }
                }
                other => self.run_one(other),
            }
        }
    }

    /// Sends the outbox; false when the platform could not be reached.
    fn flush(&mut self) -> bool {
        let screen = self.screen.clone();
        let told = &mut self.told_waiting;
        let done = self.profile.flush_outbox(|queued, attempt| {
            let first_wait = matches!(attempt, Attempt::Waiting(_)) && told.insert(queued.id);
            screen.settled(queued, attempt, first_wait);
        });
        match done {
            Ok(done) => done,
            Err(e) => {
                self.screen.show(&ChatEvent::Failed { command: "outbox", reason: &e.to_string() });
                true
            }
        }
    }

    fn run_one(&self, job: Job) {
        let peer = lock(&self.target).peer.clone();
        let in_dialog = |command: &'static str| {
            peer.clone().ok_or_else(|| format!("{command} works in a dialog; /switch @NAME to one"))
        };
        match job {
            Job::Flush => {}
            Job::Press { message_id, button } => match in_dialog("/press").and_then(|p| self.press(&p.username, p.user_id, message_id, &button)) {
                Ok((message_id, number, text)) => self.screen.show(&ChatEvent::Pressed { message_id, number, text: &text }),
                Err(reason) => self.screen.show(&ChatEvent::Failed { command: "/press", reason: &reason }),
            },
            Job::React { message_id, emoji } => {
                match in_dialog("/react").and_then(|p| self.profile.react(&p.username, message_id, &emoji).map_err(|e| e.to_string())) {
                    Ok(_) => self.screen.show(&ChatEvent::Reacted { message_id, emoji: &emoji }),
                    Err(reason) => self.screen.show(&ChatEvent::Failed { command: "/react", reason: &reason }),
                }
            }
            Job::Edit { message_id, text } => {
                // In the open conversation: a dialog's peer, or a group.
                let group = lock(&self.target).group.as_ref().map(|(id, _)| *id);
                let edited = match (group, peer.as_ref()) {
                    (Some(group), _) => self.profile.edit_group_message(&group, message_id, &text).map_err(|e| e.to_string()),
                    (None, Some(p)) => self.profile.edit_message(&p.username, message_id, &text).map_err(|e| e.to_string()),
                    (None, None) => Err("/edit works in a dialog or a group; /switch to one".to_string()),
                };
                match edited {
                    Ok(_) => self.screen.show(&ChatEvent::Edited { message_id, text: &text }),
                    Err(reason) => self.screen.show(&ChatEvent::Failed { command: "/edit", reason: &reason }),
                }
            }
            Job::Inline(query) => {
                match in_dialog("/inline").and_then(|p| self.profile.inline_query(&p.username, &query).map(|s| (p, s)).map_err(|e| e.to_string())) {
                    Ok((p, session_id)) => self.screen.show(&ChatEvent::InlineAsked { bot: &p.username, session_id }),
                    Err(reason) => self.screen.show(&ChatEvent::Failed { command: "/inline", reason: &reason }),
                }
            }
            Job::Choose { session_id, result_id } => {
                let chosen = in_dialog("/choose")
                    .and_then(|p| self.profile.choose_inline(&p.username, session_id, &result_id).map_err(|e| e.to_string()));
                match chosen {
                    Ok(sent) => self.screen.show(&ChatEvent::Chose { session_id, result_id: &result_id, message_id: sent.message_id }),
                    Err(reason) => self.screen.show(&ChatEvent::Failed { command: "/choose", reason: &reason }),
                }
            }
            Job::Switch(name) => self.switch(&name),
            Job::Commands | Job::Menu => {
                if let Some(p) = peer.filter(|p| p.is_bot) {
                    match self.profile.bot_menu(&p.username, self.language.as_deref()) {
                        Ok(menu) => self.screen.show(&ChatEvent::Menu(&menu)),
                        Err(e) => self.screen.show(&ChatEvent::Failed { command: "/commands", reason: &e.to_string() }),
                    }
                }
                if matches!(job, Job::Commands) {
                    self.screen.show(&ChatEvent::Help);
                }
            }
        }
    }

    /// Presses `button` (its number as shown, or its callback data) under `message_id` (none:
    /// the last message with buttons). The keyboard is the one the profile remembers, edits
    /// applied, so the numbers are those last shown. Returns the message, number and text.
    fn press(&self, peer: &str, peer_user_id: u64, message_id: Option<u64>, button: &str) -> Result<(u64, usize, String), String> {
        let message_id = match message_id {
            Some(id) => id,
            None => lock(&self.target).last_keyboard.ok_or_else(|| {
                "no message with buttons has arrived in this chat yet; name one: /press N BUTTON".to_string()
            })?,
        };
        let content = self
            .profile
            .remembered(peer_user_id, message_id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no message #{message_id} from @{peer} is known to this profile"))?;
        let keyboard = keyboard_from_wire(content.keyboard.as_ref());
        let (number, chosen) = pick_button(&keyboard, button)
            .ok_or_else(|| format!("message #{message_id} has no button {button:?} (a number as shown, or its callback data)"))?;
        let chosen = chosen.clone();
        self.profile.press(peer, message_id, &chosen.callback_data).map_err(|e| e.to_string())?;
        Ok((message_id, number, chosen.text))
    }

    /// `/switch NAME`: a user or bot (`@name`), else a group of this device by title or id.
    fn switch(&self, name: &str) {
        let found = if name.starts_with('@') {
            self.profile.lookup(name).map(|p| {
                let kind = if p.is_bot { "bot " } else { "" };
                let about = format!("{kind}@{} ({})", p.username, p.display_name);
                (ChatKey::User(p.user_id), format!("@{}", p.username), about, Target::of_peer(p))
            })
        } else {
            self.profile.find_group(name).map(|id| {
                let title = self
                    .profile
                    .known_groups()
                    .ok()
                    .and_then(|groups| groups.into_iter().find(|g| g.id == id).map(|g| g.title))
                    .unwrap_or_else(|| name.to_string());
                (ChatKey::Group(id), title.clone(), format!("group {title}"), Target { peer: None, group: Some((id, title)), last_keyboard: None })
            })
        };
        match found {
            Ok((key, shown, about, target)) => {
                *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target;
                self.screen.open(key, &shown, &about);
            }
            Err(e) => self.screen.show(&ChatEvent::Failed { command: "/switch", reason: &e.to_string() }),
        }
    }
}
