//! `e2e-chat chat @peer`: an interactive dialog for a person. A reader thread (`chat-reader`)
//! shows incoming messages as `[@sender] text`; each line typed is sent to the peer and shown
//! as `[you] text (#message_id)`. `/quit`, Ctrl-D or end of input leaves.
//!
//! On a terminal, lines are read with a line editor (prompt, in-session history, cursor keys;
//! Ctrl-C clears the line), and the reader prints through the editor's printer, which redraws
//! the prompt and the half-typed line below what it printed. When stdin or stdout is not a
//! terminal (a script, a test), lines are read plainly, with no prompt: messages go to
//! stdout, everything else to stderr. Whatever is shown passes through `display`, so nothing
//! from the network reaches the terminal raw.
//!
//! The reader and the sender each open the profile (two database connections); the profile's
//! `BEGIN IMMEDIATE` transactions keep their session updates apart.

use std::io::{self, BufRead, IsTerminal, Write};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};
use rustyline::error::ReadlineError;
use rustyline::{Config, DefaultEditor};

use super::display::ChatEvent;
use super::inbox::StreamEnd;
use super::profile::Profile;
use crate::backoff::Backoff;

/// First and longest wait before reconnecting a broken inbox stream.
const FIRST_RECONNECT_DELAY: Duration = Duration::from_secs(1);
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(30);
/// How long one reconnection attempt waits for the platform to answer. It is not cut short by
/// leaving, so it bounds how long leaving can take while the platform is unreachable.
const RECONNECT_PROBE: Duration = Duration::from_secs(2);
/// Lines kept in the editor's history (this session only: nothing typed is written to disk).
const HISTORY_LINES: usize = 500;

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

    let (stop_tx, stop_rx) = bounded::<()>(1);
    let thread = thread::Builder::new()
        .name("chat-reader".to_string())
        .spawn(move || read_loop(reader, stop_rx, reader_screen))
        .context("starting the reader thread")?;

    let typed = type_loop(&mut input, &mut screen, |text| sender.send_text(&peer_profile.username, text));
    // The editor goes first: a reader printing into it then fails at once instead of waiting
    // for a next prompt that will never come.
    drop(input);
    drop(stop_tx);
    if thread.join().is_err() {
        anyhow::bail!("the reader thread panicked");
    }
    typed
}

/// Reads lines until the person leaves, sending each with `send` and showing the result.
fn type_loop(
    input: &mut Input,
    screen: &mut Screen,
    mut send: impl FnMut(&str) -> super::Result<super::SentMessage>,
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
            Command::Send(text) => {
                // Each line looks the peer up again, so a bot that added a device is reached.
                match send(text) {
                    Ok(sent) => screen.show(&ChatEvent::Sent { text, message_id: sent.message_id }),
                    Err(e) => screen.show(&ChatEvent::SendFailed { text, reason: &e.to_string() }),
                }
            }
        }
    }
}

/// What a typed line asks for. Only `/quit` is ours: every other line, `/start` and the like
/// included, is a message to the peer. (Local commands to come, e.g. `/press N` for a button,
/// are parsed here.)
#[derive(Debug, PartialEq, Eq)]
enum Command<'a> {
    Quit,
    Nothing,
    Send(&'a str),
}

fn command(line: &str) -> Command<'_> {
    let text = line.trim_end_matches(['\r', '\n']);
    match text.trim() {
        "/quit" => Command::Quit,
        "" => Command::Nothing,
        _ => Command::Send(text),
    }
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

/// Messages are the program's output; the rest is about the program.
fn is_message(event: &ChatEvent) -> bool {
    matches!(event, ChatEvent::Incoming(_) | ChatEvent::Sent { .. })
}

fn write_flushed(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Shows incoming messages until `stop` is disconnected. A broken stream is shown once
/// ("connection lost"), then retried quietly with a growing delay until the platform answers
/// again ("connected again").
fn read_loop(profile: Profile, stop: Receiver<()>, mut screen: Screen) {
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
        let reason = match profile.receive_until(&stop, |m| screen.show(&ChatEvent::Incoming(m))) {
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
    fn only_quit_is_a_local_command() {
        assert_eq!(command("/quit"), Command::Quit);
        assert_eq!(command("  /quit \r\n"), Command::Quit);
        assert_eq!(command("   "), Command::Nothing);
        assert_eq!(command(""), Command::Nothing);
        assert_eq!(command("/start"), Command::Send("/start"));
        assert_eq!(command("  two words  \r"), Command::Send("  two words  "));
        assert_eq!(command("/quit now"), Command::Send("/quit now"));
    }
}
