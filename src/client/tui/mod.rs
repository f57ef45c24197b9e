//! Chat mode on a terminal: the whole screen drawn from a model on every change (`view`), a
//! line editor of our own (`editor`) fed by a key decoder that takes every byte of a burst
//! (`keys`), styles written as ANSI sequences where the terminal has them (`style`), the
//! terminal in raw mode (`terminal`), and log lines kept for the view while it draws (`logs`).
//! `Tui` holds them together: any thread changes the model and the screen is drawn again under
//! the same lock, so two threads never interleave output.

pub mod editor;
pub mod keys;
pub mod logs;
pub mod style;
pub mod terminal;
pub mod view;

use std::io;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use editor::{Edit, Editor};
use keys::Key;
use style::Palette;
use terminal::{local_time, Terminal};
use view::{ChatKey, View};

/// The terminal, the conversations shown and the line being typed.
pub struct Tui {
    terminal: Terminal,
    state: Mutex<State>,
}

pub struct State {
    pub view: View,
    pub editor: Editor,
}

impl Tui {
    /// Takes over the terminal for a dialog of `own` with `peer`.
    pub fn open(own: &str, peer: ChatKey, peer_name: &str, about_peer: &str) -> io::Result<Tui> {
        let terminal = Terminal::open(Palette::from_env())?;
        let state = State { view: View::new(own, peer, peer_name, about_peer), editor: Editor::default() };
        let tui = Tui { terminal, state: Mutex::new(state) };
        logs::capture(true);
        tui.redraw();
        Ok(tui)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A log line written while this is held is kept, not drawn: no lock is taken twice.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads what is shown, without drawing.
    pub fn look<T>(&self, look: impl FnOnce(&State) -> T) -> T {
        look(&self.lock())
    }

    /// Changes what is shown, then draws the screen again.
    pub fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.lock();
        let out = change(&mut state);
        self.draw(&mut state);
        out
    }

    /// Draws the screen again (after a resize, Ctrl-L, or to show log lines kept meanwhile).
    pub fn redraw(&self) {
        let mut state = self.lock();
        self.draw(&mut state);
    }

    /// A key typed: the editor's verdict, with the screen drawn again.
    pub fn key(&self, key: Key) -> Edit {
        self.update(|s| {
            let edit = s.editor.apply(key);
            if edit == Edit::Changed {
                s.view.set_hint(None);
            }
            edit
        })
    }

    /// Waits up to `timeout` for typed bytes (see `Terminal::read`).
    pub fn read(&self, timeout: Duration) -> io::Result<Vec<u8>> {
        self.terminal.read(timeout)
    }

    pub fn size(&self) -> (usize, usize) {
        self.terminal.size()
    }

    fn draw(&self, state: &mut State) {
        let now = crate::clock::unix_now();
        for line in logs::take() {
            state.view.note(&line, style::Style::DIM, now);
        }
        let (width, height) = self.terminal.size();
        let frame = state.view.render(width, height, &state.editor.text(), state.editor.cursor(), &local_time);
        if let Err(e) = self.terminal.draw(&frame) {
            log::debug!("could not draw the chat: {e}");
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        self.terminal.restore();
        logs::capture(false);
        // What was kept and never drawn goes where it would have gone.
        for line in logs::take() {
            eprintln!("{line}");
        }
    }
}
