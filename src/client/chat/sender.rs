//! The sending side of chat mode (`chat-sender`): the outbox sent in order, and the commands
//! that talk to the platform. While the platform cannot be reached, what waits is retried with
//! a backoff (`FIRST_RETRY` to `MAX_RETRY`), and at once when the reader reconnects.

use std::collections::HashSet;
use std::sync::PoisonError;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::super::display::ChatEvent;
use super::super::places::Shared;
use super::super::message::keyboard_from_wire;
use super::super::outbox::Attempt;
use super::super::profile::Profile;
use super::super::tui::view::ChatKey;
use super::super::deep_link;
use super::command::{language_from_env, pick_button};
use super::command_error::CommandError;
use crate::wire::e2e::Content;
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

    fn run_one(&mut self, job: Job) {
        let peer = lock(&self.target).peer.clone();
        let in_dialog = |command: &'static str| peer.clone().ok_or(CommandError::NotInDialog { command });
        let failed = |command: &'static str, reason: CommandError| {
            self.screen.show(&ChatEvent::Failed { command, reason: &reason.to_string() })
        };
        match job {
            Job::Flush => {}
            Job::Press { message_id, button } => match in_dialog("/press").and_then(|p| self.press(&p.username, p.user_id, message_id, &button)) {
                Ok((message_id, number, text)) => self.screen.show(&ChatEvent::Pressed { message_id, number, text: &text }),
                Err(reason) => failed("/press", reason),
            },
            Job::React { message_id, emoji } => {
                match in_dialog("/react").and_then(|p| Ok(self.profile.react(&p.username, message_id, &emoji)?)) {
                    Ok(_) => self.screen.show(&ChatEvent::Reacted { message_id, emoji: &emoji }),
                    Err(reason) => failed("/react", reason),
                }
            }
            Job::Edit { message_id, text } => {
                // In the open conversation: a dialog's peer, or a group.
                let group = lock(&self.target).group.as_ref().map(|(id, _)| *id);
                let edited = match (group, peer.as_ref()) {
                    (Some(group), _) => self.profile.edit_group_message(&group, message_id, &text).map_err(CommandError::from),
                    (None, Some(p)) => self.profile.edit_message(&p.username, message_id, &text).map_err(CommandError::from),
                    (None, None) => Err(CommandError::NothingToEdit),
                };
                match edited {
                    Ok(_) => self.screen.show(&ChatEvent::Edited { message_id, text: &text }),
                    Err(reason) => failed("/edit", reason),
                }
            }
            Job::Inline(query) => {
                match in_dialog("/inline").and_then(|p| Ok((self.profile.inline_query(&p.username, &query)?, p))) {
                    Ok((session_id, p)) => self.screen.show(&ChatEvent::InlineAsked { bot: &p.username, session_id }),
                    Err(reason) => failed("/inline", reason),
                }
            }
            Job::Choose { session_id, result_id } => {
                let chosen = in_dialog("/choose").and_then(|p| Ok(self.profile.choose_inline(&p.username, session_id, &result_id)?));
                match chosen {
                    Ok(sent) => self.screen.show(&ChatEvent::Chose { session_id, result_id: &result_id, message_id: sent.message_id }),
                    Err(reason) => failed("/choose", reason),
                }
            }
            Job::AtName { name, query, line } => self.at_name(&name, &query, &line),
            Job::Open(link) => self.open(&link),
            Job::Switch(name) => {
                self.switch(&name);
            }
            Job::Share(shared) => {
                let command = match &shared {
                    Shared::Location(_) => "/location",
                    Shared::Poll(p) if p.quiz => "/quiz",
                    Shared::Poll(_) => "/poll",
                    _ => "/contact",
                };
                match self.share(&shared) {
                    Ok(message_id) => {
                        let conversation = lock(&self.target).keyboard_peer();
                        self.screen.own_message(&self.profile, conversation, message_id);
                    }
                    Err(reason) => failed(command, reason),
                }
            }
            Job::Vote { message_id, options } => {
                match in_dialog("/vote").and_then(|p| Ok(self.profile.vote(&p.username, message_id, &options)?)) {
                    Ok(_) => self.screen.show(&ChatEvent::Voted { message_id, options: &options }),
                    Err(reason) => failed("/vote", reason),
                }
            }
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
    fn press(&self, peer: &str, peer_user_id: u64, message_id: Option<u64>, button: &str) -> Result<(u64, usize, String), CommandError> {
        let message_id = match message_id {
            Some(id) => id,
            None => lock(&self.target).last_keyboard.ok_or(CommandError::NoKeyboardYet)?,
        };
        let content = self
            .profile
            .remembered(peer_user_id, message_id)?
            .ok_or_else(|| CommandError::UnknownMessage { peer: peer.to_string(), message_id })?;
        let keyboard = keyboard_from_wire(content.keyboard.as_ref());
        let (number, chosen) = pick_button(&keyboard, button)
            .ok_or_else(|| CommandError::NoSuchButton { message_id, button: button.to_string() })?;
        let chosen = chosen.clone();
        if !chosen.url.is_empty() {
            return Err(CommandError::LinkButton { message_id, number, url: chosen.url });
        }
        self.profile.press(peer, message_id, &chosen.callback_data)?;
        Ok((message_id, number, chosen.text))
    }

    /// A typed `@name query`: inline mode when `name` is a bot (in its dialog, which opens,
    /// as the choice goes there); to anyone else, or when the name is nobody's, the line is
    /// an ordinary message.
    fn at_name(&mut self, name: &str, query: &str, line: &str) {
        let current = lock(&self.target).peer.clone();
        let bot = match current.filter(|p| p.is_bot && p.username.eq_ignore_ascii_case(name)) {
            Some(p) => Some(p),
            None => self.profile.lookup(name).ok().filter(|p| p.is_bot),
        };
        let Some(bot) = bot else {
            let reply_to = lock(&self.target).force_reply.take();
            let mut content = Content::new();
            content.mut_text().text = line.to_string();
            content.reply_to_message_id = reply_to.unwrap_or(0);
            self.queue_and_flush(&content, line);
            return;
        };
        if lock(&self.target).peer_user_id() != bot.user_id && !self.switch(&format!("@{}", bot.username)) {
            return;
        }
        match self.profile.inline_query(&bot.username, query) {
            Ok(session_id) => self.screen.show(&ChatEvent::InlineAsked { bot: &bot.username, session_id }),
            Err(e) => self.screen.show(&ChatEvent::Failed { command: "@bot query", reason: &e.to_string() }),
        }
    }

    /// `/open LINK`: the bot's dialog opens (if another is open) and `/start PAYLOAD` goes to it.
    fn open(&mut self, link: &str) {
        let link = match deep_link::parse(link) {
            Ok(link) => link,
            Err(e) => return self.screen.show(&ChatEvent::Failed { command: "/open", reason: &e.to_string() }),
        };
        let open = lock(&self.target).peer.as_ref().is_some_and(|p| p.username.eq_ignore_ascii_case(link.bot.trim_start_matches('@')));
        if !open && !self.switch(&link.bot) {
            return;
        }
        let mut content = Content::new();
        content.mut_text().text = link.start_text();
        self.queue_and_flush(&content, &link.start_text());
    }

    /// Queues a message for the open conversation, shows it pending, and sends the outbox.
    fn queue_and_flush(&mut self, content: &Content, shown: &str) {
        let to = lock(&self.target).outbox_name();
        match self.profile.queue_content(&to, content) {
            Ok(queued) => {
                self.screen.typed(&queued);
                self.flush();
            }
            Err(e) => self.screen.show(&ChatEvent::SendFailed { text: shown, reason: &e.to_string() }),
        }
    }

    /// Shares `shared` in the current conversation (a dialog or a group), through the one
    /// sending path of such items; returns the message id.
    fn share(&self, shared: &Shared) -> Result<u64, CommandError> {
        let (peer, group) = {
            let target = lock(&self.target);
            (target.peer.as_ref().map(|p| p.username.clone()), target.group.as_ref().map(|(id, _)| *id))
        };
        match (group, peer) {
            (Some(id), _) => self.profile.send_group_shared(&id, shared, None).map(|s| s.message_id),
            (None, Some(peer)) => self.profile.send_shared(&peer, shared, None).map(|s| s.message_id),
            (None, None) => return Err(CommandError::NoConversation),
        }
        .map_err(CommandError::from)
    }

    /// `/switch NAME`: a user or bot (`@name`), else a group of this device by title or id.
    /// False when there is no such conversation (said on the screen).
    fn switch(&self, name: &str) -> bool {
        let found = if name.starts_with('@') {
            self.profile.lookup(name).map(|p| {
                let about = super::about_peer(&self.profile, &p);
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
                (ChatKey::Group(id), title.clone(), format!("group {title}"), Target::of_group(id, title))
            })
        };
        match found {
            Ok((key, shown, about, target)) => {
                let peer = target.keyboard_peer();
                *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target.clone();
                self.screen.open(key.clone(), &shown, &about);
                self.screen.history(&self.profile, &target);
                self.screen.reply_keyboard(key, self.profile.reply_keyboard(peer).ok().flatten());
                true
            }
            Err(e) => {
                self.screen.show(&ChatEvent::Failed { command: "/switch", reason: &e.to_string() });
                false
            }
        }
    }
}
