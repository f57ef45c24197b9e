//! Chat mode on a terminal: the whole screen drawn from a model on every change (`view`), a
//! line editor of our own (`editor`) fed by a key decoder that takes every byte of a burst
//! (`keys`), styles written as ANSI sequences where the terminal has them (`style`), and the
//! terminal in raw mode (`terminal`). `Tui` holds them together: any thread changes the model
//! and the screen is drawn again under the same lock, so two threads never interleave output.

pub mod editor;
pub mod keys;
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
        tui.redraw();
        Ok(tui)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes what is shown, then draws the screen again.
    pub fn update<T>(&self, change: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.lock();
        let out = change(&mut state);
        self.draw(&state);
        out
    }

    /// Draws the screen again (after a resize, Ctrl-L).
    pub fn redraw(&self) {
        let state = self.lock();
        self.draw(&state);
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

    fn draw(&self, state: &State) {
        let (width, height) = self.terminal.size();
        let frame = state.view.render(width, height, &state.editor.text(), state.editor.cursor(), &local_time);
        if let Err(e) = self.terminal.draw(&frame) {
            log::debug!("could not draw the chat: {e}");
        }
    }
}
