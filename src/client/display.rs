//! What `e2e-chat` shows a person: text from the network made safe for a terminal
//! (`sanitize`), and the chat mode's events rendered as lines (`ChatEvent::render`).
//!
//! Anything that arrives over the network (a message, a sender's username or display name) is
//! written by someone else, and a terminal obeys control characters: `ESC [2J` clears the
//! screen, an OSC sequence can set the window title or write to the clipboard, a bidi override
//! makes `exe.txt` look like `txt.exe`. So nothing from the network reaches the terminal raw:
//! every such character is shown escaped instead, and the rest (letters of any script, emoji)
//! untouched.

use super::message::ReceivedMessage;

/// Renders network text for a terminal, on one line: C0 controls (newline included), DEL, C1
/// controls (U+0080–U+009F) and the bidi embedding, override and isolate characters
/// (U+202A–U+202E, U+2066–U+2069) are shown escaped (`\e`, `\n`, `\r`, `\t`, `\x07`,
/// `\x7f`, `\u{9b}`, `\u{202e}`). An escape sequence is harmless once its ESC is shown as
/// `\e`: the rest of it is printable text. A backslash is left as it is (a literal `\e` in a
/// message looks like an escaped ESC, which is confusing but not unsafe).
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_safe(&mut out, c);
    }
    out
}

fn push_safe(out: &mut String, c: char) {
    match c {
        '\u{1b}' => out.push_str("\\e"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{0}'..='\u{1f}' | '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if is_unsafe_beyond_ascii(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        c => out.push(c),
    }
}

/// C1 controls (a terminal may take U+009B as CSI) and the bidi controls that reorder what
/// follows them on the line.
fn is_unsafe_beyond_ascii(c: char) -> bool {
    matches!(c, '\u{80}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Makes one line of JSON (as `serde_json` writes it) safe for a terminal too. serde_json
/// already escapes C0 controls, `"` and `\`; this adds `\uXXXX` escapes for DEL, C1 and bidi
/// controls, which are equally valid JSON for the same string, so a program reading the line
/// gets exactly the same value.
pub fn json_for_terminal(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c == '\u{7f}' || is_unsafe_beyond_ascii(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Where a message's second and later lines start, so a newline in a message can never forge
/// a line that looks like another sender's (`[@BotManager] …`).
pub const CONTINUATION: &str = "  | ";

/// Something the chat mode shows. Every line it prints is one of these, rendered by `render`,
/// so a new kind of thing to show (a keyboard under a message, "@bot is typing…", a bot's
/// command list) is a new variant here and nothing else.
#[derive(Debug)]
pub enum ChatEvent<'a> {
    /// Who the dialog is with, at the start.
    Started { peer_username: &'a str, peer_display_name: &'a str, peer_is_bot: bool, own_username: &'a str },
    /// A message from the peer (or anyone else writing to us).
    Incoming(&'a ReceivedMessage),
    /// A line we sent, with the platform's message id.
    Sent { text: &'a str, message_id: u64 },
    /// A line we could not send.
    SendFailed { text: &'a str, reason: &'a str },
    /// The inbox stream broke; the reader reconnects in the background.
    ConnectionLost { reason: &'a str },
    /// The reader is connected again after a `ConnectionLost`.
    Reconnected,
}

impl ChatEvent<'_> {
    /// The event as terminal-safe text: one line, or several for a message with newlines
    /// (its later lines start with `CONTINUATION`). No trailing newline.
    pub fn render(&self) -> String {
        match self {
            ChatEvent::Started { peer_username, peer_display_name, peer_is_bot, own_username } => {
                let kind = if *peer_is_bot { "bot " } else { "" };
                format!(
                    "chatting with {kind}@{} ({}) as @{}; type a message and press Enter, /quit or Ctrl-D to leave",
                    sanitize(peer_username),
                    sanitize(peer_display_name),
                    sanitize(own_username)
                )
            }
            ChatEvent::Incoming(m) => {
                let who = if m.sender.username.is_empty() {
                    format!("user{}", m.sender.user_id)
                } else {
                    sanitize(&m.sender.username)
                };
                with_body(&format!("[@{who}] "), &m.text)
            }
            ChatEvent::Sent { text, message_id } => format!("{} (#{message_id})", with_body("[you] ", text)),
            ChatEvent::SendFailed { text, reason } => {
                format!("{}\n{CONTINUATION}not sent: {}", with_body("[you] ", text), sanitize(reason))
            }
            ChatEvent::ConnectionLost { reason } => format!("connection lost: {}; reconnecting…", sanitize(reason)),
            ChatEvent::Reconnected => "connected again".to_string(),
        }
    }
}

/// `prefix` and the body's first line, then each further line of the body on its own line
/// after `CONTINUATION`; every line sanitized.
fn with_body(prefix: &str, body: &str) -> String {
    let mut out = String::from(prefix);
    for (i, line) in body.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(CONTINUATION);
        }
        out.push_str(&sanitize(line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::message::Sender;

    /// No character a terminal would act on, other than the newlines `render` puts between lines.
    fn assert_terminal_safe(s: &str) {
        for c in s.chars() {
            assert!(
                c == '\n' || !(c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c)),
                "unsafe {c:?} in {s:?}"
            );
        }
    }

    #[test]
    fn escape_sequences_are_shown_not_obeyed() {
        assert_eq!(sanitize("\u{1b}[2J"), "\\e[2J");
        assert_eq!(sanitize("a\u{1b}]0;pwned\u{7}b"), "a\\e]0;pwned\\x07b");
        assert_eq!(sanitize("\u{1b}[31mred\u{1b}[0m"), "\\e[31mred\\e[0m");
        assert_eq!(sanitize("bell\u{7}"), "bell\\x07");
    }

    #[test]
    fn every_c0_control_and_del_is_escaped() {
        assert_eq!(sanitize("\0"), "\\x00");
        assert_eq!(sanitize("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(sanitize("\u{8}\u{b}\u{c}\u{1f}\u{7f}"), "\\x08\\x0b\\x0c\\x1f\\x7f");
        for b in (0u32..0x20).chain([0x7f]) {
            let s = sanitize(&char::from_u32(b).expect("char").to_string());
            assert!(s.starts_with('\\') && s.len() >= 2, "{b:#x} → {s:?}");
            assert_terminal_safe(&s);
        }
    }

    #[test]
    fn c1_controls_are_escaped() {
        assert_eq!(sanitize("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(sanitize("\u{80}\u{85}\u{9d}\u{9f}"), "\\u{80}\\u{85}\\u{9d}\\u{9f}");
        assert_eq!(sanitize("\u{a0}é"), "\u{a0}é", "U+00A0 and up are ordinary text");
    }

    #[test]
    fn bidi_overrides_and_isolates_are_escaped() {
        assert_eq!(sanitize("invoice\u{202e}fdp.exe"), "invoice\\u{202e}fdp.exe");
        assert_eq!(sanitize("\u{202a}\u{202b}\u{202c}\u{202d}"), "\\u{202a}\\u{202b}\\u{202c}\\u{202d}");
        assert_eq!(sanitize("\u{2066}x\u{2067}\u{2068}\u{2069}"), "\\u{2066}x\\u{2067}\\u{2068}\\u{2069}");
    }

    #[test]
    fn ordinary_text_of_any_script_is_untouched() {
        for s in ["hello, world", "héllo", "日本語のテキスト", "你好", "😀 👍🏽 👨‍👩‍👧", "עברית ومرحبا", "back\\slash", ""] {
            assert_eq!(sanitize(s), s);
        }
    }

    #[test]
    fn json_lines_keep_their_value_and_lose_raw_controls() {
        let text = "\u{1b}[2J\u{7}\u{7f}\u{9b}1m\u{202e}abc 日本 😀";
        let line = json_for_terminal(&serde_json::json!({ "text": text }).to_string());
        assert_terminal_safe(&line);
        assert!(line.contains("\\u001b") && line.contains("\\u009b") && line.contains("\\u202e") && line.contains("\\u007f"));
        assert!(line.contains("日本 😀"));
        let back: serde_json::Value = serde_json::from_str(&line).expect("still JSON");
        assert_eq!(back["text"], text);
    }

    fn message(username: &str, text: &str) -> ReceivedMessage {
        ReceivedMessage {
            chat_id: 7,
            sender: Sender { user_id: 7, username: username.into(), display_name: "D".into(), is_bot: true },
            message_id: 3,
            date: 0,
            text: text.into(),
            entities: vec![],
            reply_to_message_id: None,
        }
    }

    #[test]
    fn incoming_messages_are_sanitized_and_cannot_forge_lines() {
        let m = message("echo_bot", "hi\u{1b}[2J\n[@BotManager] send me your token");
        let shown = ChatEvent::Incoming(&m).render();
        assert_eq!(shown, "[@echo_bot] hi\\e[2J\n  | [@BotManager] send me your token");
        assert_terminal_safe(&shown);
        let m = message("evil\u{1b}[2J", "x");
        assert_eq!(ChatEvent::Incoming(&m).render(), "[@evil\\e[2J] x");
        let m = message("", "x");
        assert_eq!(ChatEvent::Incoming(&m).render(), "[@user7] x");
    }

    #[test]
    fn own_lines_and_connection_state_are_marked() {
        assert_eq!(ChatEvent::Sent { text: "hello", message_id: 12 }.render(), "[you] hello (#12)");
        let failed = ChatEvent::SendFailed { text: "hi", reason: "no\u{7}pe" }.render();
        assert_eq!(failed, "[you] hi\n  | not sent: no\\x07pe");
        let lost = ChatEvent::ConnectionLost { reason: "server gone\u{1b}c" }.render();
        assert_eq!(lost, "connection lost: server gone\\ec; reconnecting…");
        assert_eq!(ChatEvent::Reconnected.render(), "connected again");
        let start = ChatEvent::Started {
            peer_username: "bot",
            peer_display_name: "Nice \u{202e}Bot",
            peer_is_bot: true,
            own_username: "alice",
        };
        let start = start.render();
        assert!(start.starts_with("chatting with bot @bot (Nice \\u{202e}Bot) as @alice;"), "{start}");
        assert_terminal_safe(&start);
    }
}
