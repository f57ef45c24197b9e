//! The line being typed: its text, the cursor, and this session's history (never written to
//! disk). Keys come from `keys::Decoder`; what a key does to the line is decided here alone.

use super::keys::Key;

/// Lines kept in the history.
const HISTORY_LINES: usize = 500;

/// What a key did.
#[derive(Debug, PartialEq, Eq)]
pub enum Edit {
    /// The line changed (or only the cursor moved): draw it again.
    Changed,
    /// Enter: the line is done and the editor is empty again.
    Submit(String),
    /// Ctrl-C: the line was dropped; `was_empty` when there was nothing to drop.
    Cleared { was_empty: bool },
    /// Ctrl-D on an empty line: leave.
    End,
    /// Ctrl-L: draw the whole screen again.
    Redraw,
    /// Nothing to do.
    Nothing,
}

#[derive(Default)]
pub struct Editor {
    line: Vec<char>,
    /// In chars, 0..=line.len().
    cursor: usize,
    history: Vec<String>,
    /// While browsing the history: the entry shown, and the line typed before browsing.
    browsing: Option<(usize, Vec<char>)>,
}

impl Editor {
    pub fn text(&self) -> String {
        self.line.iter().collect()
    }

    /// The cursor's place, in chars from the start of the line.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn apply(&mut self, key: Key) -> Edit {
        match key {
            Key::Char(c) => self.insert(&[c]),
            Key::Paste(text) => {
                // A pasted newline would send half a paste: it becomes a space, so a person
                // reviews the whole text before Enter sends it.
                let chars: Vec<char> = text.replace("\r\n", "\n").chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }).collect();
                self.insert(&chars)
            }
            Key::Tab => self.insert(&[' ']),
            Key::Enter => {
                let line = self.take();
                if !line.trim().is_empty() && self.history.last() != Some(&line) {
                    self.history.push(line.clone());
                    if self.history.len() > HISTORY_LINES {
                        self.history.remove(0);
                    }
                }
                Edit::Submit(line)
            }
            Key::Backspace if self.cursor > 0 => {
                self.cursor -= 1;
                self.line.remove(self.cursor);
                Edit::Changed
            }
            Key::Delete if self.cursor < self.line.len() => {
                self.line.remove(self.cursor);
                Edit::Changed
            }
            Key::Ctrl('d') if self.line.is_empty() => Edit::End,
            Key::Ctrl('d') if self.cursor < self.line.len() => {
                self.line.remove(self.cursor);
                Edit::Changed
            }
            Key::Left if self.cursor > 0 => self.move_to(self.cursor - 1),
            Key::Right if self.cursor < self.line.len() => self.move_to(self.cursor + 1),
            Key::Home | Key::Ctrl('a') => self.move_to(0),
            Key::End | Key::Ctrl('e') => self.move_to(self.line.len()),
            Key::Ctrl('c') => {
                let was_empty = self.line.is_empty();
                self.take();
                Edit::Cleared { was_empty }
            }
            Key::Ctrl('u') => {
                self.line.drain(..self.cursor);
                self.move_to(0)
            }
            Key::Ctrl('w') => {
                let mut start = self.cursor;
                while start > 0 && self.line[start - 1].is_whitespace() {
                    start -= 1;
                }
                while start > 0 && !self.line[start - 1].is_whitespace() {
                    start -= 1;
                }
                self.line.drain(start..self.cursor);
                self.move_to(start)
            }
            Key::Ctrl('l') => Edit::Redraw,
            Key::Up => self.browse(true),
            Key::Down => self.browse(false),
            _ => Edit::Nothing,
        }
    }

    fn insert(&mut self, chars: &[char]) -> Edit {
        for &c in chars {
            self.line.insert(self.cursor, c);
            self.cursor += 1;
        }
        Edit::Changed
    }

    fn move_to(&mut self, at: usize) -> Edit {
        self.cursor = at;
        Edit::Changed
    }

    fn take(&mut self) -> String {
        self.browsing = None;
        self.cursor = 0;
        std::mem::take(&mut self.line).into_iter().collect()
    }

    fn browse(&mut self, older: bool) -> Edit {
        let shown = match (&self.browsing, older) {
            (None, true) if !self.history.is_empty() => self.history.len() - 1,
            (Some((i, _)), true) if *i > 0 => i - 1,
            (Some((i, _)), false) if i + 1 < self.history.len() => i + 1,
            (Some(_), false) => {
                // Past the newest: back to what was being typed.
                let (_, typed) = self.browsing.take().expect("browsing");
                self.line = typed;
                return self.move_to(self.line.len());
            }
            _ => return Edit::Nothing,
        };
        let typed = match self.browsing.take() {
            Some((_, typed)) => typed,
            None => self.line.clone(),
        };
        self.browsing = Some((shown, typed));
        self.line = self.history[shown].chars().collect();
        self.move_to(self.line.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(e: &mut Editor, s: &str) {
        for c in s.chars() {
            e.apply(Key::Char(c));
        }
    }

    #[test]
    fn typing_editing_and_submitting() {
        let mut e = Editor::default();
        typed(&mut e, "helo");
        e.apply(Key::Left);
        typed(&mut e, "l");
        assert_eq!((e.text().as_str(), e.cursor()), ("hello", 4));
        e.apply(Key::End);
        typed(&mut e, " bot");
        e.apply(Key::Backspace);
        assert_eq!(e.apply(Key::Enter), Edit::Submit("hello bo".into()));
        assert_eq!((e.text().as_str(), e.cursor()), ("", 0));
    }

    #[test]
    fn ctrl_keys_clear_words_and_lines() {
        let mut e = Editor::default();
        assert_eq!(e.apply(Key::Ctrl('c')), Edit::Cleared { was_empty: true });
        typed(&mut e, "one two  three");
        e.apply(Key::Ctrl('w'));
        assert_eq!(e.text(), "one two  ");
        e.apply(Key::Ctrl('w'));
        assert_eq!(e.text(), "one ");
        assert_eq!(e.apply(Key::Ctrl('c')), Edit::Cleared { was_empty: false });
        typed(&mut e, "abc");
        e.apply(Key::Left);
        e.apply(Key::Ctrl('u'));
        assert_eq!((e.text().as_str(), e.cursor()), ("c", 0));
        assert_eq!(e.apply(Key::Ctrl('d')), Edit::Changed, "Ctrl-D deletes under the cursor");
        assert_eq!(e.apply(Key::Ctrl('d')), Edit::End, "and leaves on an empty line");
    }

    #[test]
    fn a_paste_is_one_line_to_review() {
        let mut e = Editor::default();
        e.apply(Key::Paste("two\r\nlines".into()));
        assert_eq!(e.text(), "two lines");
    }

    #[test]
    fn history_goes_back_and_returns_to_the_typed_line() {
        let mut e = Editor::default();
        for line in ["first", "second"] {
            typed(&mut e, line);
            e.apply(Key::Enter);
        }
        typed(&mut e, "draft");
        e.apply(Key::Up);
        assert_eq!(e.text(), "second");
        e.apply(Key::Up);
        assert_eq!(e.text(), "first");
        assert_eq!(e.apply(Key::Up), Edit::Nothing);
        e.apply(Key::Down);
        e.apply(Key::Down);
        assert_eq!(e.text(), "draft");
    }
}
