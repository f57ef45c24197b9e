//! `e2e-chat chat @peer`: an interactive dialog for a person. A reader thread (`chat-reader`)
//! shows everything that arrives (messages with their buttons, edits, deletions, reactions,
//! "is typing", answers to presses, inline results, and the messages and membership changes
//! of the person's groups, each with the group's title); each line typed is sent to the peer and
//! shown as `[you] text (#message_id)`, unless it is one of the chat mode's commands
//! (`/press`, `/reply`, `/react`, `/inline`, `/choose`, `/commands`, `/quit`; see
//! `display::HELP`). `/quit`, Ctrl-D or end of input leaves.
//!
//! On a terminal, lines are read with a line editor (prompt, in-session history, cursor keys;
//! Ctrl-C clears the line), and the reader prints through the editor's printer, which redraws
//! the prompt and the half-typed line below what it printed. When stdin or stdout is not a
//! terminal (a script, a test), lines are read plainly, with no prompt: what happens in the
//! dialog goes to stdout, everything about the program to stderr. Whatever is shown passes
//! through `display`, so nothing from the network reaches the terminal raw.
//!
//! The reader and the sender each open the profile (two database connections); the profile's
//! `BEGIN IMMEDIATE` transactions keep their session updates apart. The one thing they share
//! is which message last arrived with buttons (for `/press BUTTON`).

use std::collections::HashMap;
use std::io::{self, BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use rustyline::error::ReadlineError;
use rustyline::{Config, DefaultEditor};

use super::display::ChatEvent;
use super::inbox::StreamEnd;
use super::message::{keyboard_from_wire, Button, Incoming, Keyboard};
use super::profile::Profile;
use crate::backoff::Backoff;
use crate::wire::platform::Profile as PeerProfile;

/// First and longest wait before reconnecting a broken inbox stream.
const FIRST_RECONNECT_DELAY: Duration = Duration::from_secs(1);
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(30);
/// How long one reconnection attempt waits for the platform to answer. It is not cut short by
/// leaving, so it bounds how long leaving can take while the platform is unreachable.
const RECONNECT_PROBE: Duration = Duration::from_secs(2);
/// Lines kept in the editor's history (this session only: nothing typed is written to disk).
const HISTORY_LINES: usize = 500;
/// How long "@bot is typing…" holds after a chat action (the Bot API's 5 s): a further action
/// within it is not shown again, and the bot's next message ends it.
const TYPING_HOLDS: Duration = Duration::from_secs(5);
/// Usernames the reader keeps for showing events that name only a user id.
const MAX_KNOWN_NAMES: usize = 1000;

/// Which message of the peer last arrived (or was edited) with buttons: `/press BUTTON`
/// presses under it. Written by the reader, read by the typing thread.
type LastKeyboard = Arc<Mutex<Option<u64>>>;

pub(super) fn chat(dir: &Path, server: Option<&str>, peer: &str) -> anyhow::Result<()> {
    let sender = Profile::open_at(dir, server)?;
    let peer_profile = sender.lookup(peer)?;
    let reader = Profile::open_at(dir, server)?;
    let mut input = Input::open(sender.username());
    let mut screen = input.screen();
    let reader_screen = input.screen();
    screen.show(&ChatEvent::Started {
        peer_username: &peer_profile.username,
        peer_display_name: &peer_profile.display_name,
        peer_is_bot: peer_profile.is_bot,
        own_username: sender.username(),
    });
    screen.show(&ChatEvent::Help);

    let last_keyboard = LastKeyboard::default();
    let dialog = Dialog { profile: sender, peer: peer_profile, language: language_from_env(), last_keyboard };
    if dialog.peer.is_bot {
        // What a chat view shows when a dialog with a bot opens: what it is and what it offers.
        dialog.show_menu(&mut screen);
    }

    let (stop_tx, stop_rx) = bounded::<()>(1);
    let shown = Shown::new(&dialog.peer, dialog.last_keyboard.clone());
    let thread = thread::Builder::new()
        .name("chat-reader".to_string())
        .spawn(move || read_loop(reader, stop_rx, reader_screen, shown))
        .context("starting the reader thread")?;

    let typed = type_loop(&mut input, &mut screen, |command, screen| dialog.run(command, screen));
    // The editor goes first: a reader printing into it then fails at once instead of waiting
    // for a next prompt that will never come.
    drop(input);
    drop(stop_tx);
    if thread.join().is_err() {
        anyhow::bail!("the reader thread panicked");
    }
    typed
}

/// Reads lines until the person leaves, handing each command to `run`.
fn type_loop(
    input: &mut Input,
    screen: &mut Screen,
    mut run: impl FnMut(Command<'_>, &mut Screen),
) -> anyhow::Result<()> {
    loop {
        let line = match input.next_line()? {
            Typed::Line(line) => line,
            Typed::Cleared => continue,
            Typed::End => return Ok(()),
        };
        match command(&line) {
            Command::Quit => return Ok(()),
            Command::Nothing => {}
            other => run(other, screen),
        }
    }
}

/// The typing side of the dialog: sends and runs commands with its own profile connection.
struct Dialog {
    profile: Profile,
    peer: PeerProfile,
    /// The person's language (two letters) for the bot's command list, from the locale.
    language: Option<String>,
    last_keyboard: LastKeyboard,
}

impl Dialog {
    fn run(&self, command: Command<'_>, screen: &mut Screen) {
        // Each call looks the peer up again, so a bot that added a device is reached.
        let peer = self.peer.username.clone();
        match command {
            Command::Quit | Command::Nothing => {}
            Command::Send(text) => self.send(text, None, screen),
            Command::Reply { message_id, text } => self.send(text, Some(message_id), screen),
            Command::Press { message_id, button } => match self.press(message_id, button) {
                Ok((message_id, number, button)) => {
                    screen.show(&ChatEvent::Pressed { message_id, number, text: &button.text })
                }
                Err(reason) => screen.show(&ChatEvent::Failed { command: "/press", reason: &reason }),
            },
            Command::React { message_id, emoji } => match self.profile.react(&peer, message_id, emoji) {
                Ok(_) => screen.show(&ChatEvent::Reacted { message_id, emoji }),
                Err(e) => screen.show(&ChatEvent::Failed { command: "/react", reason: &e.to_string() }),
            },
            Command::Inline(query) => match self.profile.inline_query(&peer, query) {
                Ok(session_id) => screen.show(&ChatEvent::InlineAsked { bot: &peer, session_id }),
                Err(e) => screen.show(&ChatEvent::Failed { command: "/inline", reason: &e.to_string() }),
            },
            Command::Choose { session_id, result_id } => {
                match self.profile.choose_inline(&peer, session_id, result_id) {
                    Ok(sent) => screen.show(&ChatEvent::Chose { session_id, result_id, message_id: sent.message_id }),
                    Err(e) => screen.show(&ChatEvent::Failed { command: "/choose", reason: &e.to_string() }),
                }
            }
            Command::Commands => {
                if self.peer.is_bot {
                    self.show_menu(screen);
                }
                screen.show(&ChatEvent::Help);
            }
            Command::Usage { command, usage } => screen.show(&ChatEvent::Failed { command, reason: usage }),
        }
    }

    fn send(&self, text: &str, reply_to: Option<u64>, screen: &mut Screen) {
        match self.profile.send_message(&self.peer.username, text, &[], reply_to) {
            Ok(sent) => screen.show(&ChatEvent::Sent { text, message_id: sent.message_id, reply_to }),
            Err(e) => screen.show(&ChatEvent::SendFailed { text, reason: &e.to_string() }),
        }
    }

    /// Presses `button` (its number as shown, or its callback data) under `message_id` (none:
    /// the last message with buttons). The keyboard is the one the profile remembers, edits
    /// applied, so the numbers are those last shown. Returns the message, number and button.
    fn press(&self, message_id: Option<u64>, button: &str) -> Result<(u64, usize, Button), String> {
        let peer = &self.peer.username;
        let message_id = match message_id {
            Some(id) => id,
            None => self.last_keyboard.lock().unwrap_or_else(PoisonError::into_inner).ok_or_else(|| {
                "no message with buttons has arrived in this chat yet; name one: /press N BUTTON".to_string()
            })?,
        };
        let content = self
            .profile
            .remembered(self.peer.user_id, message_id)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no message #{message_id} from @{peer} is known to this profile"))?;
        let keyboard = keyboard_from_wire(content.keyboard.as_ref());
        let (number, chosen) = pick_button(&keyboard, button)
            .ok_or_else(|| format!("message #{message_id} has no button {button:?} (a number as shown, or its callback data)"))?;
        let chosen = chosen.clone();
        self.profile.press(peer, message_id, &chosen.callback_data).map_err(|e| e.to_string())?;
        Ok((message_id, number, chosen))
    }

    /// The bot's description and commands, or why they could not be fetched.
    fn show_menu(&self, screen: &mut Screen) {
        match self.profile.bot_menu(&self.peer.username, self.language.as_deref()) {
            Ok(menu) => screen.show(&ChatEvent::Menu(&menu)),
            Err(e) => screen.show(&ChatEvent::Failed { command: "/commands", reason: &e.to_string() }),
        }
    }
}

/// Button `wanted` of a keyboard: a number from 1 counts across rows as shown; anything else
/// (or a number beyond the buttons) is matched against the callback data. Returns the number too.
fn pick_button<'k>(keyboard: &'k Keyboard, wanted: &str) -> Option<(usize, &'k Button)> {
    let buttons = keyboard.iter().flatten().enumerate().map(|(i, b)| (i + 1, b));
    if let Ok(n) = wanted.parse::<usize>() {
        if let Some(found) = buttons.clone().find(|(i, _)| *i == n) {
            return Some(found);
        }
    }
    buttons.clone().find(|(_, b)| b.callback_data == wanted)
}

/// The person's language from the locale (`LC_ALL`, `LC_MESSAGES`, `LANG`, the first set):
/// `de_DE.UTF-8` is `de`; `C`, `POSIX` or anything else not two letters is none.
fn language_from_env() -> Option<String> {
    let value = ["LC_ALL", "LC_MESSAGES", "LANG"].iter().find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))?;
    language_of_locale(&value)
}

fn language_of_locale(locale: &str) -> Option<String> {
    let lang = locale.split(['_', '.', '@', '-']).next()?;
    (lang.len() == 2 && lang.bytes().all(|b| b.is_ascii_alphabetic())).then(|| lang.to_ascii_lowercase())
}

/// What a typed line asks for. A line whose first word is one of the chat mode's commands is
/// ours (mistyped: `Usage`); `//x` sends `/x`; every other line, `/start` and the like
/// included, is a message to the peer.
#[derive(Debug, PartialEq, Eq)]
enum Command<'a> {
    Quit,
    Nothing,
    Send(&'a str),
    Reply { message_id: u64, text: &'a str },
    /// `message_id` none: the last message with buttons.
    Press { message_id: Option<u64>, button: &'a str },
    /// An empty emoji removes our reaction.
    React { message_id: u64, emoji: &'a str },
    Inline(&'a str),
    Choose { session_id: u64, result_id: &'a str },
    Commands,
    Usage { command: &'static str, usage: &'static str },
}

fn command(line: &str) -> Command<'_> {
    let text = line.trim_end_matches(['\r', '\n']);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Command::Nothing;
    }
    if let Some(literal) = text.trim_start().strip_prefix('/').filter(|rest| rest.starts_with('/')) {
        return Command::Send(literal);
    }
    let (word, rest) = split_word(trimmed);
    let usage = |command: &'static str, usage: &'static str| Command::Usage { command, usage };
    match word {
        "/quit" if rest.is_empty() => Command::Quit,
        "/quit" => usage("/quit", "takes nothing after it"),
        "/commands" if rest.is_empty() => Command::Commands,
        "/commands" => usage("/commands", "takes nothing after it"),
        "/press" if rest.is_empty() => usage("/press", "usage: /press [MESSAGE_ID] BUTTON"),
        "/press" => match split_word(rest) {
            (first, button) if !button.is_empty() && positive(first).is_some() => {
                Command::Press { message_id: positive(first), button }
            }
            _ => Command::Press { message_id: None, button: rest },
        },
        "/reply" => match split_word(rest) {
            (first, text) if !text.is_empty() => match positive(first) {
                Some(message_id) => Command::Reply { message_id, text },
                None => usage("/reply", "usage: /reply MESSAGE_ID TEXT"),
            },
            _ => usage("/reply", "usage: /reply MESSAGE_ID TEXT"),
        },
        "/react" => {
            let (first, emoji) = split_word(rest);
            match positive(first) {
                Some(message_id) => Command::React { message_id, emoji },
                None => usage("/react", "usage: /react MESSAGE_ID [EMOJI] (no emoji: remove yours)"),
            }
        }
        "/inline" => Command::Inline(rest),
        "/choose" => match split_word(rest) {
            (first, result_id) if !result_id.is_empty() => match positive(first) {
                Some(session_id) => Command::Choose { session_id, result_id },
                None => usage("/choose", "usage: /choose SESSION_ID RESULT_ID"),
            },
            _ => usage("/choose", "usage: /choose SESSION_ID RESULT_ID"),
        },
        _ => Command::Send(text),
    }
}

/// The first word and the rest (leading whitespace dropped).
fn split_word(s: &str) -> (&str, &str) {
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], s[i..].trim_start()),
        None => (s, ""),
    }
}

/// A message or session id: a positive whole number.
fn positive(s: &str) -> Option<u64> {
    s.parse::<u64>().ok().filter(|n| *n > 0)
}

/// Where typed lines come from.
enum Input {
    /// A terminal: the line editor and its prompt.
    Editor { editor: Box<DefaultEditor>, prompt: String },
    /// Anything else: plain lines from stdin.
    Plain(io::Lines<io::StdinLock<'static>>),
}

/// One result of reading a line.
enum Typed {
    Line(String),
    /// Ctrl-C: the half-typed line was dropped.
    Cleared,
    /// Ctrl-D on an empty line, or end of input.
    End,
}

impl Input {
    /// The line editor when stdin and stdout are a terminal it can drive, else plain lines.
    fn open(own_username: &str) -> Input {
        if io::stdin().is_terminal() && io::stdout().is_terminal() {
            match editor() {
                Ok(editor) => {
                    let prompt = format!("@{}> ", super::display::sanitize(own_username));
                    return Input::Editor { editor: Box::new(editor), prompt };
                }
                // e.g. TERM=dumb: the editor cannot redraw, so plain lines do better.
                Err(e) => log::info!("no line editor on this terminal ({e}); reading plain lines"),
            }
        }
        Input::Plain(io::stdin().lock().lines())
    }

    /// A screen for one thread. Each has its own printer, so the reader never waits on a lock
    /// that the typing thread holds.
    fn screen(&mut self) -> Screen {
        match self {
            Input::Editor { editor, .. } => match editor.create_external_printer() {
                Ok(printer) => Screen::Editor(Box::new(printer)),
                Err(e) => {
                    log::warn!("could not set up printing beside the line editor: {e}");
                    Screen::Plain
                }
            },
            Input::Plain(_) => Screen::Plain,
        }
    }

    fn next_line(&mut self) -> anyhow::Result<Typed> {
        match self {
            Input::Editor { editor, prompt } => match editor.readline(prompt) {
                Ok(line) => Ok(Typed::Line(line)),
                Err(ReadlineError::Interrupted) => Ok(Typed::Cleared),
                Err(ReadlineError::Eof) => Ok(Typed::End),
                Err(e) => Err(e).context("reading the terminal"),
            },
            Input::Plain(lines) => match lines.next() {
                Some(line) => Ok(Typed::Line(line.context("reading stdin")?)),
                None => Ok(Typed::End),
            },
        }
    }
}

fn editor() -> rustyline::Result<DefaultEditor> {
    let config = Config::builder().auto_add_history(true).max_history_size(HISTORY_LINES)?.build();
    let editor = DefaultEditor::with_config(config)?;
    Ok(editor)
}

/// Where a thread shows `ChatEvent`s.
enum Screen {
    /// Through the line editor, which keeps the prompt and the half-typed line intact.
    Editor(Box<dyn rustyline::ExternalPrinter + Send>),
    /// No line editor: messages to stdout, the rest to stderr.
    Plain,
}

impl Screen {
    /// The one way the chat mode shows something.
    fn show(&mut self, event: &ChatEvent) {
        let mut text = event.render();
        text.push('\n');
        let written = match self {
            Screen::Editor(printer) => printer.print(text).map_err(io::Error::other),
            Screen::Plain if is_message(event) => write_flushed(&mut io::stdout().lock(), &text),
            Screen::Plain => write_flushed(&mut io::stderr().lock(), &text),
        };
        if let Err(e) = written {
            log::debug!("could not show a chat event: {e}");
        }
    }
}

/// What happens in the dialog is the program's output; the rest is about the program.
fn is_message(event: &ChatEvent) -> bool {
    !matches!(
        event,
        ChatEvent::Started { .. }
            | ChatEvent::Help
            | ChatEvent::SendFailed { .. }
            | ChatEvent::Failed { .. }
            | ChatEvent::ConnectionLost { .. }
            | ChatEvent::Reconnected
    )
}

fn write_flushed(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// The reader's view of the dialog: names for events that carry only a user id, who is typing,
/// and which message last came with buttons.
struct Shown {
    names: HashMap<u64, String>,
    peer_user_id: u64,
    typing: Typing,
    last_keyboard: LastKeyboard,
}

impl Shown {
    fn new(peer: &PeerProfile, last_keyboard: LastKeyboard) -> Shown {
        let names = HashMap::from([(peer.user_id, peer.username.clone())]);
        Shown { names, peer_user_id: peer.user_id, typing: Typing::default(), last_keyboard }
    }

    /// Shows one arrival (or nothing, for a chat action while the bot is already shown typing).
    fn show(&mut self, event: &Incoming, screen: &mut Screen, now: Instant) {
        match event {
            Incoming::Message(m) => {
                self.learn(m.sender.user_id, &m.sender.username);
                self.typing.ended(m.sender.user_id);
                if m.chat_id == self.peer_user_id && !m.keyboard.is_empty() {
                    self.set_last_keyboard(Some(m.message_id), |_| true);
                }
            }
            Incoming::Edited { chat_id, message_id, keyboard, .. } if *chat_id == self.peer_user_id => {
                if keyboard.is_empty() {
                    self.set_last_keyboard(None, |last| last == Some(*message_id));
                } else {
                    self.set_last_keyboard(Some(*message_id), |_| true);
                }
            }
            Incoming::Deleted { chat_id, message_id } if *chat_id == self.peer_user_id => {
                self.set_last_keyboard(None, |last| last == Some(*message_id));
            }
            Incoming::Reaction { from, .. } => self.learn(from.user_id, &from.username),
            Incoming::GroupMessage { message, .. } => {
                self.learn(message.sender.user_id, &message.sender.username);
                self.typing.ended(message.sender.user_id);
            }
            Incoming::GroupTitle { actor, .. } => self.learn(actor.user_id, &actor.username),
            Incoming::GroupMembership { user, actor, .. } => {
                self.learn(user.user_id, &user.username);
                self.learn(actor.user_id, &actor.username);
            }
            Incoming::ChatAction { from, .. } => {
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

    fn learn(&mut self, user_id: u64, username: &str) {
        if !username.is_empty() && (self.names.len() < MAX_KNOWN_NAMES || self.names.contains_key(&user_id)) {
            self.names.insert(user_id, username.to_string());
        }
    }

    fn name(&self, user_id: u64) -> String {
        self.names.get(&user_id).cloned().unwrap_or_else(|| format!("user{user_id}"))
    }

    fn set_last_keyboard(&self, to: Option<u64>, when: impl Fn(Option<u64>) -> bool) {
        let mut last = self.last_keyboard.lock().unwrap_or_else(PoisonError::into_inner);
        if when(*last) {
            *last = to;
        }
    }
}

/// Who is shown typing. A status line cannot be taken back from above the prompt, so
/// "@bot is typing…" is printed once per spell of typing: a chat action shows it unless one
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

/// Shows what arrives until `stop` is disconnected. A broken stream is shown once
/// ("connection lost"), then retried quietly with a growing delay until the platform answers
/// again ("connected again").
fn read_loop(profile: Profile, stop: Receiver<()>, mut screen: Screen, mut shown: Shown) {
    let mut backoff = Backoff::new(FIRST_RECONNECT_DELAY, MAX_RECONNECT_DELAY);
    // Every stream after the first is a reconnection.
    let mut reconnecting = false;
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
        }
        let started = Instant::now();
        let reason = match profile.receive_events_until(&stop, |e| shown.show(e, &mut screen, Instant::now())) {
            Ok(StreamEnd::Stopped) => return,
            Ok(StreamEnd::Closed(why)) => why,
            Err(e) => e.to_string(),
        };
        // A stream that held for a while was a real recovery; one that breaks at once keeps
        // the delay growing, so a refused stream is not retried (and reported) every second.
        if started.elapsed() >= MAX_RECONNECT_DELAY {
            backoff.reset();
        }
        log::debug!("inbox stream of @{} closed: {reason}", profile.username());
        screen.show(&ChatEvent::ConnectionLost { reason: &reason });
        reconnecting = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_and_bot_commands_go_to_the_peer() {
        assert_eq!(command("/quit"), Command::Quit);
        assert_eq!(command("  /quit \r\n"), Command::Quit);
        assert_eq!(command("   "), Command::Nothing);
        assert_eq!(command(""), Command::Nothing);
        assert_eq!(command("/start"), Command::Send("/start"));
        assert_eq!(command("/start@my_bot deep"), Command::Send("/start@my_bot deep"));
        assert_eq!(command("/help"), Command::Send("/help"), "a bot's /help is the bot's");
        assert_eq!(command("  two words  \r"), Command::Send("  two words  "));
        assert_eq!(command("/Press 1"), Command::Send("/Press 1"), "ours are lowercase");
    }

    #[test]
    fn a_double_slash_sends_the_literal_command() {
        assert_eq!(command("//quit"), Command::Send("/quit"));
        assert_eq!(command("  //press 1 2"), Command::Send("/press 1 2"));
        assert_eq!(command("//"), Command::Send("/"));
    }

    #[test]
    fn press_takes_a_button_and_optionally_the_message() {
        assert_eq!(command("/press 5 2"), Command::Press { message_id: Some(5), button: "2" });
        assert_eq!(command("/press 5 page:2"), Command::Press { message_id: Some(5), button: "page:2" });
        assert_eq!(command("/press 2"), Command::Press { message_id: None, button: "2" });
        assert_eq!(command("/press yes"), Command::Press { message_id: None, button: "yes" });
        assert_eq!(command("/press  yes please "), Command::Press { message_id: None, button: "yes please" });
        assert_eq!(command("/press 0 x"), Command::Press { message_id: None, button: "0 x" }, "0 is no message id");
        assert!(matches!(command("/press"), Command::Usage { command: "/press", .. }));
    }

    #[test]
    fn reply_react_inline_choose_and_commands_parse_their_arguments() {
        assert_eq!(command("/reply 4 sure thing"), Command::Reply { message_id: 4, text: "sure thing" });
        assert!(matches!(command("/reply 4"), Command::Usage { command: "/reply", .. }));
        assert!(matches!(command("/reply x hi"), Command::Usage { command: "/reply", .. }));
        assert_eq!(command("/react 4 👍"), Command::React { message_id: 4, emoji: "👍" });
        assert_eq!(command("/react 4"), Command::React { message_id: 4, emoji: "" });
        assert!(matches!(command("/react"), Command::Usage { command: "/react", .. }));
        assert!(matches!(command("/react -1 👍"), Command::Usage { command: "/react", .. }));
        assert_eq!(command("/inline cats  and dogs"), Command::Inline("cats  and dogs"));
        assert_eq!(command("/inline"), Command::Inline(""));
        assert_eq!(command("/choose 12 r-1"), Command::Choose { session_id: 12, result_id: "r-1" });
        assert!(matches!(command("/choose 12"), Command::Usage { command: "/choose", .. }));
        assert!(matches!(command("/choose r-1 12x"), Command::Usage { command: "/choose", .. }));
        assert_eq!(command("/commands"), Command::Commands);
        assert!(matches!(command("/commands now"), Command::Usage { command: "/commands", .. }));
        assert!(matches!(command("/quit now"), Command::Usage { command: "/quit", .. }));
    }

    fn keyboard() -> Keyboard {
        let b = |text: &str, data: &str| Button { text: text.into(), callback_data: data.into() };
        vec![vec![b("Yes", "yes"), b("No", "7")], vec![b("Later", "2")]]
    }

    #[test]
    fn buttons_are_picked_by_shown_number_then_callback_data() {
        let k = keyboard();
        assert_eq!(pick_button(&k, "1").map(|(n, b)| (n, b.callback_data.as_str())), Some((1, "yes")));
        assert_eq!(pick_button(&k, "3").map(|(n, b)| (n, b.text.as_str())), Some((3, "Later")), "numbers run across rows");
        assert_eq!(pick_button(&k, "2").map(|(n, _)| n), Some(2), "a number shown wins over equal callback data");
        assert_eq!(pick_button(&k, "7").map(|(n, b)| (n, b.text.as_str())), Some((2, "No")), "beyond the numbers: data");
        assert_eq!(pick_button(&k, "yes").map(|(n, _)| n), Some(1));
        assert!(pick_button(&k, "maybe").is_none());
        assert!(pick_button(&k, "0").is_none());
        assert!(pick_button(&Vec::new(), "1").is_none());
    }

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

    #[test]
    fn the_language_comes_from_the_locale() {
        assert_eq!(language_of_locale("de_DE.UTF-8").as_deref(), Some("de"));
        assert_eq!(language_of_locale("PT-br").as_deref(), Some("pt"));
        assert_eq!(language_of_locale("en").as_deref(), Some("en"));
        assert_eq!(language_of_locale("C.UTF-8"), None);
        assert_eq!(language_of_locale("POSIX"), None);
        assert_eq!(language_of_locale(""), None);
    }
}
