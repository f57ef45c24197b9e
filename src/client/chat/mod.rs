//! `e2e-chat chat @peer`: an interactive dialog for a person.
//!
//! Three threads, each with its own connection to the profile (the profile's `BEGIN
//! IMMEDIATE` transactions keep their writes apart):
//! - the main thread reads what is typed (keys on a terminal, lines otherwise). A line to
//!   send goes into the profile's outbox at once and shows as pending; a command goes to the
//!   sender as a `Job`.
//! - `chat-sender` sends the outbox in order (`Profile::flush_outbox`) and runs the commands
//!   (`/press`, `/edit`, `/react`, `/inline`, `/choose`, `/switch`, `/commands`). While the platform
//!   cannot be reached, what is queued waits and is retried with a backoff, and at once when
//!   the reader is connected again; a line is never typed twice.
//! - `chat-reader` (`reader.rs`) shows what arrives and reconnects a broken inbox stream.
//!
//! `e2e-chat web` (`web/`) runs the same session with a page for a screen: its server's
//! workers take the typed lines, and the main thread waits for SIGINT or SIGTERM.
//!
//! On a terminal the screen is drawn from a model (`tui`); elsewhere (a script, a test) lines
//! are read and printed plainly: what happens in the dialog to stdout, everything about the
//! program to stderr. Whatever is shown passes through `display`, so nothing from the network
//! reaches the terminal raw.

mod command;
mod command_error;
mod reader;
mod screen;
mod sender;
mod web;

pub(in crate::client) use web::{web, DEFAULT_LISTEN};

use std::io::{self, BufRead, IsTerminal};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{bounded, Sender};

use super::display::ChatEvent;
use super::message::GroupId;
use super::outbox::group_target_name;
use super::profile::Profile;
use super::tui::editor::Edit;
use super::tui::keys::Decoder;
use super::tui::view::ChatKey;
use super::tui::logs as tui_log;
use super::tui::Tui;
use super::reply_keyboard::ButtonRequest;
use super::places::{LocationInfo, Shared};
use crate::cli::{CliError, Context};
use crate::wire::e2e::{Content, Text};
use crate::wire::platform::Profile as PeerProfile;
use command::{command, Command};
use reader::{read_loop, Shown};
use screen::Screen;

/// Jobs waiting for the sender. A person types far slower than this fills; the reader's
/// "send the outbox now" is dropped when the queue is full, as one is then queued already.
const JOBS: usize = 64;
/// How long the terminal's input loop sleeps between looks at the terminal's size.
const INPUT_TICK: Duration = Duration::from_millis(500);

/// What the sender is asked to do.
enum Job {
    /// Send what the outbox holds.
    Flush,
    Press { message_id: Option<u64>, button: String },
    React { message_id: u64, emoji: String },
    Edit { message_id: u64, text: String },
    Inline(String),
    /// A typed `@name query`: inline mode when `name` is a bot (its dialog opens), else
    /// `line` is an ordinary message.
    AtName { name: String, query: String, line: String },
    Choose { session_id: u64, result_id: String },
    /// `/open LINK`: the bot's dialog opens and `/start PAYLOAD` is sent.
    Open(String),
    /// Share a location, our own contact card or a poll in the current conversation.
    Share(Shared),
    Vote { message_id: u64, options: Vec<u32> },
    Switch(String),
    /// The bot's description and commands, then chat mode's (`/commands`).
    Commands,
    /// The bot's description and commands alone (when the dialog opens).
    Menu,
}

/// The conversation typed lines go to, changed by `/switch`; shared by the three threads.
#[derive(Clone)]
pub(super) struct Target {
    /// A dialog's peer; none in a group.
    peer: Option<PeerProfile>,
    group: Option<(GroupId, String)>,
    /// Which message of the dialog last arrived (or was edited) with buttons: `/press
    /// BUTTON` presses under it.
    last_keyboard: Option<u64>,
    /// A message the peer asked an answer to (`force_reply`): the next typed line replies to it.
    force_reply: Option<u64>,
}

impl Target {
    fn of_peer(peer: PeerProfile) -> Target {
        Target { peer: Some(peer), group: None, last_keyboard: None, force_reply: None }
    }

    fn of_group(id: GroupId, title: String) -> Target {
        Target { peer: None, group: Some((id, title)), last_keyboard: None, force_reply: None }
    }

    fn peer_user_id(&self) -> u64 {
        self.peer.as_ref().map_or(0, |p| p.user_id)
    }

    /// Whose reply keyboard typed numbers use: the peer's id, or the group's
    /// `history::group_peer`.
    fn keyboard_peer(&self) -> u64 {
        match &self.group {
            Some((id, _)) => super::history::group_peer(&id.0),
            None => self.peer_user_id(),
        }
    }

    /// The conversation's key in the chat view.
    fn key(&self) -> ChatKey {
        match &self.group {
            Some((id, _)) => ChatKey::Group(*id),
            None => ChatKey::User(self.peer_user_id()),
        }
    }

    /// The conversation as messages name it: `@name` or the group's title.
    fn shown_name(&self) -> String {
        match (&self.peer, &self.group) {
            (_, Some((_, title))) => title.clone(),
            (Some(p), None) => format!("@{}", p.username),
            (None, None) => String::new(),
        }
    }

    /// The outbox's name for it.
    fn outbox_name(&self) -> String {
        match (&self.peer, &self.group) {
            (_, Some((id, _))) => group_target_name(id),
            (Some(p), None) => p.username.clone(),
            (None, None) => String::new(),
        }
    }
}

pub(super) type SharedTarget = Arc<Mutex<Target>>;

fn lock(target: &SharedTarget) -> std::sync::MutexGuard<'_, Target> {
    target.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn chat(dir: &Path, server: Option<&str>, peer: &str) -> Result<(), CliError> {
    let typist = Profile::open_at(dir, server)?;
    let peer_profile = typist.lookup(peer)?;
    let screen = open_screen(typist.username(), &peer_profile, &about_peer(&typist, &peer_profile));
    run_session(dir, server, typist, peer_profile, screen, |session| match session.screen {
        Screen::Tui(tui) => type_keys(tui, session.screen, session.typist, session.target, session.jobs),
        _ => type_lines(session.screen, session.typist, session.target, session.jobs),
    })
}

/// What a front end (a terminal, plain lines, a web page) reads typed lines with.
struct Session<'a> {
    own: &'a str,
    screen: &'a Screen,
    typist: &'a Profile,
    target: &'a SharedTarget,
    jobs: &'a Sender<Job>,
}

/// A dialog with `peer_profile` shown on `screen`: the reader and the sender run while
/// `front` reads what is typed; when it returns, the reader stops and the sender finishes
/// what was typed.
fn run_session(
    dir: &Path,
    server: Option<&str>,
    typist: Profile,
    peer_profile: PeerProfile,
    screen: Screen,
    front: impl FnOnce(&Session<'_>) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let sender = Profile::open_at(dir, server)?;
    let reader = Profile::open_at(dir, server)?;
    let own = typist.username().to_string();
    screen.show(&ChatEvent::Started {
        peer_username: &peer_profile.username,
        peer_display_name: &peer_profile.display_name,
        peer_is_bot: peer_profile.is_bot,
        own_username: &own,
    });
    let opened = Target::of_peer(peer_profile.clone());
    screen.history(&typist, &opened);
    let target: SharedTarget = Arc::new(Mutex::new(opened));
    screen.show(&ChatEvent::Help);

    screen.reply_keyboard(ChatKey::User(peer_profile.user_id), typist.reply_keyboard(peer_profile.user_id).ok().flatten());
    let (jobs_tx, jobs_rx) = bounded::<Job>(JOBS);
    let (stop_tx, stop_rx) = bounded::<()>(1);
    let shown = Shown::new(&peer_profile, target.clone());
    let reader_screen = screen.clone();
    let reader_jobs = jobs_tx.clone();
    let reading = thread::Builder::new()
        .name("chat-reader".to_string())
        .spawn(move || read_loop(reader, stop_rx, reader_screen, shown, reader_jobs))
        .context("starting the reader thread")?;
    let sending = {
        let dialog = sender::Dialog::new(sender, target.clone(), screen.clone());
        thread::Builder::new()
            .name("chat-sender".to_string())
            .spawn(move || dialog.run(jobs_rx))
            .context("starting the sender thread")?
    };
    if peer_profile.is_bot {
        // What a chat view shows when a dialog with a bot opens: what it is and what it offers.
        let _ = jobs_tx.send(Job::Menu);
    }
    // What an earlier session left unsent shows first, and goes first.
    match typist.queued() {
        Ok(left) => left.iter().for_each(|q| screen.typed(q)),
        Err(e) => screen.show(&ChatEvent::Failed { command: "outbox", reason: &e.to_string() }),
    }
    let _ = jobs_tx.send(Job::Flush);

    let typed = front(&Session { own: &own, screen: &screen, typist: &typist, target: &target, jobs: &jobs_tx });
    // The reader stops (it holds a handle on the jobs), then the sender finishes what was
    // typed; the terminal is given back when the last screen handle goes.
    drop(stop_tx);
    let read = reading.join();
    drop(jobs_tx);
    let sent = sending.join();
    drop(screen);
    if let Ok(left) = typist.queued() {
        if !left.is_empty() {
            eprintln!("{} message(s) wait in the outbox; they are sent the next time chat mode runs", left.len());
        }
    }
    if sent.is_err() || read.is_err() {
        return Err(CliError::Failed("a chat thread panicked".into()));
    }
    typed
}

/// The header's words about a peer: who, with the account's id (the name's binding), and whether the person checked their identity key
/// (`e2e-chat verify --mark`, docs/verify.md). A changed key never gets here: the lookup
/// that found the peer refused it with its warning.
pub(super) fn about_peer(profile: &Profile, p: &PeerProfile) -> String {
    let kind = if p.is_bot { "bot " } else { "" };
    let check = match profile.is_verified(p.user_id) {
        Ok(true) => "verified ✓".to_string(),
        _ => format!("not verified: e2e-chat verify @{}", p.username),
    };
    format!("{kind}@{} ({}) · user {} · {check}", p.username, p.display_name, p.user_id)
}

/// The terminal when stdin and stdout are one we can drive, else plain lines.
fn open_screen(own: &str, peer: &PeerProfile, about: &str) -> Screen {
    let dumb = std::env::var("TERM").map_or(true, |t| t == "dumb" || t.is_empty());
    if io::stdin().is_terminal() && io::stdout().is_terminal() && !dumb {
        match Tui::open(own, ChatKey::User(peer.user_id), &format!("@{}", peer.username), about) {
            Ok(tui) => return Screen::Tui(Arc::new(tui)),
            Err(e) => log::info!("cannot drive this terminal ({e}); reading plain lines"),
        }
    }
    Screen::Plain
}

/// Reads keys until the person leaves.
fn type_keys(tui: &Tui, screen: &Screen, typist: &Profile, target: &SharedTarget, jobs: &Sender<Job>) -> Result<(), CliError> {
    let mut decoder = Decoder::default();
    let mut size = tui.size();
    loop {
        let bytes = match tui.read(INPUT_TICK) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e).context("reading the terminal"),
        };
        if bytes.is_empty() {
            decoder.flush_stale();
            if tui.size() != size || tui_log::any() {
                size = tui.size();
                tui.redraw();
            }
            continue;
        }
        for key in decoder.feed(&bytes) {
            match tui.key(key) {
                Edit::Submit(line) => {
                    if !handle_line(&line, screen, typist, target, jobs) {
                        return Ok(());
                    }
                }
                Edit::Cleared { was_empty: true } => screen.hint("Ctrl-C clears; to leave: /quit or Ctrl-D"),
                Edit::End => return Ok(()),
                Edit::Redraw => tui.redraw(),
                Edit::Changed | Edit::Cleared { .. } | Edit::Nothing => {}
            }
        }
    }
}

/// Reads plain lines until the person (or the script) leaves.
fn type_lines(screen: &Screen, typist: &Profile, target: &SharedTarget, jobs: &Sender<Job>) -> Result<(), CliError> {
    for line in io::stdin().lock().lines() {
        if !handle_line(&line.context("reading stdin")?, screen, typist, target, jobs) {
            break;
        }
    }
    Ok(())
}

/// One typed line: a message goes into the outbox and to the sender; a command to the sender.
/// False when the person leaves.
fn handle_line(line: &str, screen: &Screen, typist: &Profile, target: &SharedTarget, jobs: &Sender<Job>) -> bool {
    let job = match command(line) {
        Command::Quit => return false,
        Command::Nothing => return true,
        Command::Send(text) => {
            // A bare number under a reply keyboard is its button; a number beyond it is text.
            if let Some(n) = command::bare_number(text) {
                let peer = lock(target).keyboard_peer();
                if typist.reply_keyboard(peer).ok().flatten().is_some_and(|(_, k)| n <= k.len()) {
                    return use_reply_button(n, None, screen, typist, target, jobs);
                }
            }
            if let Some((name, query)) = command::at_name(text) {
                let job = Job::AtName { name: name.to_string(), query: query.to_string(), line: text.to_string() };
                return jobs.send(job).is_ok();
            }
            let reply_to = lock(target).force_reply.take();
            return queue(text, reply_to, screen, typist, target, jobs);
        }
        Command::ReplyButton(n) => return use_reply_button(n, None, screen, typist, target, jobs),
        Command::Open(link) => Job::Open(link.to_string()),
        Command::Reply { message_id, text } => return queue(text, Some(message_id), screen, typist, target, jobs),
        Command::Usage { command, usage } => {
            screen.show(&ChatEvent::Failed { command, reason: usage });
            return true;
        }
        Command::Press { message_id, button } => Job::Press { message_id, button: button.to_string() },
        Command::React { message_id, emoji } => Job::React { message_id, emoji: emoji.to_string() },
        Command::Edit { message_id, text } => Job::Edit { message_id, text: text.to_string() },
        Command::Inline(query) => Job::Inline(query.to_string()),
        Command::Choose { session_id, result_id } => Job::Choose { session_id, result_id: result_id.to_string() },
        Command::Switch(name) => Job::Switch(name.to_string()),
        // Sharing a location, the card or a poll answers the keyboard's button that asks for it.
        Command::Location { latitude, longitude } => {
            let location = Shared::Location(LocationInfo::point(latitude, longitude));
            match request_button(|r| r == ButtonRequest::Location, typist, target) {
                Some(n) => return use_reply_button(n, Some(location), screen, typist, target, jobs),
                None => Job::Share(location),
            }
        }
        Command::Contact => match request_button(|r| r == ButtonRequest::Contact, typist, target) {
            Some(n) => return use_reply_button(n, None, screen, typist, target, jobs),
            None => Job::Share(Shared::Contact(typist.own_contact_card())),
        },
        Command::Poll(poll) => match request_button(|r| matches!(r, ButtonRequest::Poll(kind) if kind.admits(poll.quiz)), typist, target) {
            Some(n) => return use_reply_button(n, Some(Shared::Poll(poll)), screen, typist, target, jobs),
            None => Job::Share(Shared::Poll(poll)),
        },
        Command::Vote { message_id, options } => Job::Vote { message_id, options },
        Command::Commands => Job::Commands,
    };
    // The sender is gone only when it panicked; leaving is all that is left.
    jobs.send(job).is_ok()
}

fn queue(text: &str, reply_to: Option<u64>, screen: &Screen, typist: &Profile, target: &SharedTarget, jobs: &Sender<Job>) -> bool {
    let mut t = Text::new();
    t.text = text.to_string();
    let mut content = Content::new();
    content.set_text(t);
    content.reply_to_message_id = reply_to.unwrap_or(0);
    queue_content(&content, text, screen, typist, target, jobs)
}

/// Button `n` of the conversation's reply keyboard (a location or poll button: with what it
/// asks for in `give`), sent like a typed line; a one-time keyboard goes.
fn use_reply_button(
    n: usize,
    give: Option<Shared>,
    screen: &Screen,
    typist: &Profile,
    target: &SharedTarget,
    jobs: &Sender<Job>,
) -> bool {
    let (peer, name, key) = {
        let t = lock(target);
        (t.keyboard_peer(), t.shown_name(), t.key())
    };
    let chosen = match typist.choose_reply_button(peer, &name, n, give) {
        Ok(chosen) => chosen,
        Err(e) => {
            let how = "/location LAT,LON or /poll QUESTION | OPTION | OPTION (/quiz N ... for a quiz) answers a request button";
            screen.show(&ChatEvent::Failed { command: "/choose", reason: &format!("{e} ({how})") });
            return true;
        }
    };
    let mut content = chosen.content;
    content.reply_to_message_id = lock(target).force_reply.take().unwrap_or(0);
    let shown = match chosen.button.request {
        ButtonRequest::Text => chosen.button.text.clone(),
        _ => format!("[{}] {}", chosen.button.request.name(), chosen.button.text),
    };
    let queued = queue_content(&content, &shown, screen, typist, target, jobs);
    if let Err(e) = typist.reply_keyboard_used(peer, chosen.keyboard_message_id) {
        screen.show(&ChatEvent::Failed { command: "/choose", reason: &e.to_string() });
    }
    screen.reply_keyboard(key, typist.reply_keyboard(peer).ok().flatten());
    queued
}

/// The button of the conversation's reply keyboard whose request `answers` (a location, the
/// contact card, a poll of its kind), if one shows: sharing one then answers it.
fn request_button(answers: impl Fn(ButtonRequest) -> bool, typist: &Profile, target: &SharedTarget) -> Option<usize> {
    let peer = lock(target).keyboard_peer();
    let (_, keyboard) = typist.reply_keyboard(peer).ok().flatten()?;
    (1..=keyboard.len()).find(|&n| keyboard.button(n).is_some_and(|b| answers(b.request)))
}

/// Queues a message for the conversation (`shown` is what the screen says of it) and asks
/// the sender to send it.
fn queue_content(content: &Content, shown: &str, screen: &Screen, typist: &Profile, target: &SharedTarget, jobs: &Sender<Job>) -> bool {
    let to = lock(target).outbox_name();
    match typist.queue_content(&to, content) {
        Ok(queued) => {
            screen.typed(&queued);
            jobs.send(Job::Flush).is_ok()
        }
        Err(e) => {
            screen.show(&ChatEvent::SendFailed { text: shown, reason: &e.to_string() });
            true
        }
    }
}
