//! Log lines while the screen is drawn: written to stderr they would land in the middle of the
//! drawn screen (stderr is the same terminal), so while a `Tui` is open they are kept here and
//! shown as notes in the view at its next drawing. `env_logger` writes through `Sink`.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// Lines kept while the screen has not taken them (older ones are dropped).
const MAX_KEPT: usize = 100;

static CAPTURING: AtomicBool = AtomicBool::new(false);
static KEPT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Where `env_logger` writes: stderr, or the kept lines while the screen is drawn.
pub struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if !CAPTURING.load(Ordering::Acquire) {
            return io::stderr().write(buf);
        }
        let text = String::from_utf8_lossy(buf);
        let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if kept.len() == MAX_KEPT {
                kept.remove(0);
            }
            kept.push(line.to_string());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().flush()
    }
}

/// From now on (`true`) log lines are kept for the screen; `false` sends them to stderr again.
pub fn capture(on: bool) {
    CAPTURING.store(on, Ordering::Release);
}

/// Whether lines wait to be shown.
pub fn any() -> bool {
    !KEPT.lock().unwrap_or_else(PoisonError::into_inner).is_empty()
}

/// The lines kept since the last call.
pub fn take() -> Vec<String> {
    std::mem::take(&mut *KEPT.lock().unwrap_or_else(PoisonError::into_inner))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_only_while_capturing() {
        capture(true);
        Sink.write_all(b"[WARN x] one\n[WARN x] two\n").expect("write");
        capture(false);
        assert_eq!(take(), ["[WARN x] one", "[WARN x] two"]);
        assert!(take().is_empty());
    }
}
