//! The terminal itself: raw mode (every key as it is typed, Ctrl-C as a key), its size, the
//! alternate screen, bracketed paste, and drawing a whole frame. Restored when dropped, also
//! when the program unwinds from a panic.

use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::style::{ansi, Palette};
use super::view::Frame;

/// A terminal in raw mode on the alternate screen, until dropped.
pub struct Terminal {
    fd: RawFd,
    saved: libc::termios,
    palette: Palette,
    restored: AtomicBool,
}

impl Terminal {
    /// Takes over the terminal of stdin/stdout.
    pub fn open(palette: Palette) -> io::Result<Terminal> {
        let fd = io::stdin().as_raw_fd();
        // SAFETY: termios is plain data; tcgetattr fills it or fails.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        if unsafe { libc::tcgetattr(fd, &mut saved) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut raw = saved;
        // No line discipline: bytes as typed, no echo, Ctrl-C/Ctrl-Z/Ctrl-S as keys, CR as CR.
        raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG | libc::IEXTEN);
        raw.c_iflag &= !(libc::IXON | libc::ICRNL | libc::INLCR | libc::ISTRIP);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        // SAFETY: fd is stdin, raw an initialised termios.
        if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let terminal = Terminal { fd, saved, palette, restored: AtomicBool::new(false) };
        // Alternate screen, bracketed paste on.
        terminal.write_raw("\x1b[?1049h\x1b[?2004h\x1b[H\x1b[2J")?;
        Ok(terminal)
    }

    /// Columns and rows (80×24 when the terminal does not say).
    pub fn size(&self) -> (usize, usize) {
        // SAFETY: winsize is plain data; the ioctl fills it or fails.
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::ioctl(io::stdout().as_raw_fd(), libc::TIOCGWINSZ, &mut ws) } == 0;
        if ok && ws.ws_col > 0 && ws.ws_row > 0 {
            (usize::from(ws.ws_col), usize::from(ws.ws_row))
        } else {
            (80, 24)
        }
    }

    /// Waits up to `timeout` for input; returns what one read brought (empty: none in time).
    /// End of input is an error of kind `UnexpectedEof`.
    pub fn read(&self, timeout: Duration) -> io::Result<Vec<u8>> {
        let mut pfd = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(Vec::new()) } else { Err(e) };
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; 4096];
        // SAFETY: buf is writable for its length.
        let got = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        match got {
            0 => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "end of input")),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(Vec::new())
                } else {
                    Err(e)
                }
            }
            n => {
                buf.truncate(n as usize);
                Ok(buf)
            }
        }
    }

    /// Draws `frame`: every line from the top, each cleared to its end, then the cursor.
    pub fn draw(&self, frame: &Frame) -> io::Result<()> {
        let mut out = String::from("\x1b[?25l");
        for (row, line) in frame.lines.iter().enumerate() {
            out.push_str(&format!("\x1b[{};1H{}\x1b[K", row + 1, ansi(line, self.palette)));
        }
        out.push_str(&format!("\x1b[{};{}H\x1b[?25h", frame.cursor.0 + 1, frame.cursor.1 + 1));
        self.write_raw(&out)
    }

    fn write_raw(&self, text: &str) -> io::Result<()> {
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    }
}

impl Terminal {
    /// Gives the terminal back as it was (once; dropping does it too).
    pub fn restore(&self) {
        if self.restored.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.write_raw("\x1b[?2004l\x1b[?1049l");
        // SAFETY: restoring the settings read at open.
        unsafe { libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved) };
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.restore();
    }
}

/// A unix time as the local `HH:MM` (the C library's idea of the local zone: `TZ`).
pub fn local_time(t: i64) -> String {
    let time = t as libc::time_t;
    // SAFETY: tm is plain data; localtime_r fills it from a valid time_t or returns null.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&time, &mut tm) }.is_null() {
        return "--:--".to_string();
    }
    format!("{:02}:{:02}", tm.tm_hour, tm.tm_min)
}
