//! Keys from the bytes a terminal sends. Everything one read brings is decoded, however much
//! it is: a paste without bracketed paste, an input method's commit, a slow SSH link or
//! `expect` send many keys in one write, and each of them counts (rustyline showed only the
//! first character of such a burst and held the line until the next key; issue 20). A
//! sequence cut between two reads waits for the rest.

/// One key, or one paste.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Enter,
    Backspace,
    Delete,
    Left,
    Right,
    Home,
    End,
    Up,
    Down,
    Tab,
    /// Ctrl and a letter (lowercase), for the ones that are not keys above (Ctrl-C, Ctrl-D,
    /// Ctrl-U, Ctrl-W, Ctrl-A, Ctrl-E, Ctrl-L).
    Ctrl(char),
    /// Text pasted between the terminal's bracketed-paste marks: never a command to run.
    Paste(String),
}

const PASTE_END: &[u8] = b"\x1b[201~";

/// Turns bytes into keys, keeping an unfinished sequence for the next read.
#[derive(Default)]
pub struct Decoder {
    pending: Vec<u8>,
    /// Inside a bracketed paste: its text so far.
    paste: Option<Vec<u8>>,
}

impl Decoder {
    /// The keys in `bytes` (with what an earlier read left unfinished).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Key> {
        self.pending.extend_from_slice(bytes);
        let mut keys = Vec::new();
        let mut i = 0;
        while i < self.pending.len() {
            if let Some(paste) = self.paste.as_mut() {
                match find(&self.pending[i..], PASTE_END) {
                    Some(at) => {
                        paste.extend_from_slice(&self.pending[i..i + at]);
                        let text = String::from_utf8_lossy(paste).into_owned();
                        keys.push(Key::Paste(text));
                        self.paste = None;
                        i += at + PASTE_END.len();
                        continue;
                    }
                    None => {
                        // Keep what could be the start of the end mark.
                        let keep = partial_suffix(&self.pending[i..], PASTE_END);
                        let end = self.pending.len() - keep;
                        paste.extend_from_slice(&self.pending[i..end]);
                        i = end;
                        break;
                    }
                }
            }
            match decode_one(&self.pending[i..]) {
                Step::Key(key, used) => {
                    keys.push(key);
                    i += used;
                }
                Step::PasteStart(used) => {
                    self.paste = Some(Vec::new());
                    i += used;
                }
                Step::Skip(used) => i += used,
                Step::Incomplete => break,
            }
        }
        self.pending.drain(..i);
        keys
    }

    /// A lone ESC (or a cut sequence) that no more bytes followed: drop it.
    pub fn flush_stale(&mut self) {
        if self.paste.is_none() {
            self.pending.clear();
        }
    }
}

enum Step {
    Key(Key, usize),
    PasteStart(usize),
    /// Bytes that are no key we use (an unknown sequence, a stray control).
    Skip(usize),
    Incomplete,
}

fn decode_one(b: &[u8]) -> Step {
    match b[0] {
        b'\r' | b'\n' => Step::Key(Key::Enter, 1),
        0x7f | 0x08 => Step::Key(Key::Backspace, 1),
        b'\t' => Step::Key(Key::Tab, 1),
        0x1b => escape(b),
        c @ 0x01..=0x1a => Step::Key(Key::Ctrl((b'a' + c - 1) as char), 1),
        c if c < 0x20 => Step::Skip(1),
        _ => utf8(b),
    }
}

fn utf8(b: &[u8]) -> Step {
    let len = match b[0] {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return Step::Skip(1),
    };
    if b.len() < len {
        return Step::Incomplete;
    }
    match std::str::from_utf8(&b[..len]).ok().and_then(|s| s.chars().next()) {
        Some(c) => Step::Key(Key::Char(c), len),
        None => Step::Skip(1),
    }
}

/// ESC sequences: CSI (`ESC [`) and SS3 (`ESC O`) keys, bracketed paste; ESC and another
/// byte (Alt-key) is skipped.
fn escape(b: &[u8]) -> Step {
    let Some(&kind) = b.get(1) else { return Step::Incomplete };
    match kind {
        b'[' => {
            // Parameters and intermediates, then one final byte in 0x40..=0x7e.
            let Some(end) = b[2..].iter().position(|c| (0x40..=0x7e).contains(c)) else {
                return if b.len() > 32 { Step::Skip(b.len()) } else { Step::Incomplete };
            };
            let used = 2 + end + 1;
            let params = &b[2..2 + end];
            let key = match (params, b[2 + end]) {
                (_, b'A') => Key::Up,
                (_, b'B') => Key::Down,
                (_, b'C') => Key::Right,
                (_, b'D') => Key::Left,
                (_, b'H') => Key::Home,
                (_, b'F') => Key::End,
                (b"200", b'~') => return Step::PasteStart(used),
                (b"1" | b"7", b'~') => Key::Home,
                (b"4" | b"8", b'~') => Key::End,
                (b"3", b'~') => Key::Delete,
                _ => return Step::Skip(used),
            };
            Step::Key(key, used)
        }
        b'O' => {
            let Some(&last) = b.get(2) else { return Step::Incomplete };
            match last {
                b'A' => Step::Key(Key::Up, 3),
                b'B' => Step::Key(Key::Down, 3),
                b'C' => Step::Key(Key::Right, 3),
                b'D' => Step::Key(Key::Left, 3),
                b'H' => Step::Key(Key::Home, 3),
                b'F' => Step::Key(Key::End, 3),
                _ => Step::Skip(3),
            }
        }
        _ => Step::Skip(1),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// How many bytes at the end of `hay` begin `mark`.
fn partial_suffix(hay: &[u8], mark: &[u8]) -> usize {
    (1..mark.len()).rev().find(|&n| hay.len() >= n && hay[hay.len() - n..] == mark[..n]).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<Key> {
        s.chars().map(Key::Char).collect()
    }

    #[test]
    fn a_burst_is_every_key_of_it() {
        let mut d = Decoder::default();
        let mut want = chars("hello bot");
        want.push(Key::Enter);
        assert_eq!(d.feed(b"hello bot\r"), want);
        assert_eq!(d.feed("héllo 日本 😀\n".as_bytes()), [chars("héllo 日本 😀"), vec![Key::Enter]].concat());
    }

    #[test]
    fn sequences_cut_between_reads_wait_for_the_rest() {
        let mut d = Decoder::default();
        let bytes = "é".as_bytes();
        assert_eq!(d.feed(&bytes[..1]), vec![]);
        assert_eq!(d.feed(&bytes[1..]), vec![Key::Char('é')]);
        assert_eq!(d.feed(b"\x1b"), vec![]);
        assert_eq!(d.feed(b"[D\x1b[3~\x1bOH\x1b[F"), vec![Key::Left, Key::Delete, Key::Home, Key::End]);
    }

    #[test]
    fn controls_are_ctrl_keys_and_unknown_sequences_are_skipped() {
        let mut d = Decoder::default();
        assert_eq!(d.feed(b"\x03\x04\x15\x7f\t"), vec![Key::Ctrl('c'), Key::Ctrl('d'), Key::Ctrl('u'), Key::Backspace, Key::Tab]);
        assert_eq!(d.feed(b"\x1b[1;5Ca\x1bxb"), vec![Key::Right, Key::Char('a'), Key::Char('x'), Key::Char('b')]);
        assert_eq!(d.feed(b"\x1b[99zq"), vec![Key::Char('q')]);
    }

    #[test]
    fn a_bracketed_paste_is_one_paste_even_across_reads() {
        let mut d = Decoder::default();
        assert_eq!(d.feed(b"a\x1b[200~line one\r\n/qu"), vec![Key::Char('a')]);
        assert_eq!(d.feed(b"it\x1b[20"), vec![]);
        assert_eq!(d.feed(b"1~b"), vec![Key::Paste("line one\r\n/quit".into()), Key::Char('b')]);
    }
}
