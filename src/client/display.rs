//! What `e2e-chat` shows a person: text from the network made safe for a terminal
//! (`sanitize`), and the chat mode's events rendered as lines (`ChatEvent::render`).
//!
//! Anything that arrives over the network (a message, a sender's username or display name) is
//! written by someone else, and a terminal obeys control characters: `ESC [2J` clears the
//! screen, an OSC sequence can set the window title or write to the clipboard, a bidi override
//! makes `exe.txt` look like `txt.exe`. So nothing from the network reaches the terminal raw:
//! every such character is shown escaped instead, and the rest (letters of any script, emoji)
//! untouched.

use super::bot_profile::BotMenu;
use super::message::{role_name, ForwardOrigin, Incoming, Keyboard, MediaInfo, ReactionType, ReceivedMessage, Sender};
use super::reply_keyboard::{ButtonRequest, PollKind, ReplyKeyboard, ReplyMarkup};
use super::places::{LocationInfo, Shared};

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
/// Where the lines under a message start (its reply/forward line, its keyboard rows, inline
/// results, a bot's commands). A message body's own lines always start with `CONTINUATION`,
/// so a body cannot draw one of these.
const UNDER: &str = "  ";

/// The chat mode's own commands, as the help line lists them.
pub const HELP: &str = "commands: /press [N] BUTTON (a button by number or callback data; no N: the last message \
with buttons) · /reply N TEXT · /edit N TEXT · /react N [EMOJI] · /inline QUERY (or type @bot QUERY) · /choose SESSION RESULT_ID · \
a reply keyboard's button: its number, or /choose N · /location LAT LON · /contact (your card) · /vote N [OPTION…] · /poll QUESTION | OPTION | OPTION… · /quiz N QUESTION | OPTION | … · \
/open LINK (a bot link) · /switch @NAME or GROUP · /commands · /quit; //x sends /x, any other /x (like /start) goes to the peer as text";

/// Something the chat mode shows. Every line it prints is one of these, rendered by `render`,
/// so a new kind of thing to show is a new variant here and nothing else.
#[derive(Debug)]
pub enum ChatEvent<'a> {
    /// Who the dialog is with, at the start.
    Started { peer_username: &'a str, peer_display_name: &'a str, peer_is_bot: bool, own_username: &'a str },
    /// The chat mode's commands (`HELP`), at the start and after `/commands`.
    Help,
    /// A bot's description and command list, at the start of a dialog with a bot and on `/commands`.
    Menu(&'a BotMenu),
    /// Anything that arrived. `chat` is the username of the dialog's peer (`user<id>` when not
    /// known), for the events that carry no sender; `via` the username of a message's
    /// `via_bot_user_id`, resolved the same way.
    Incoming { event: &'a Incoming, chat: &'a str, via: Option<&'a str> },
    /// A line we sent, with the platform's message id (and the message it replies to).
    Sent { text: &'a str, message_id: u64, reply_to: Option<u64> },
    /// We replaced the text of our message `message_id`.
    Edited { message_id: u64, text: &'a str },
    /// A line we could not send, and never will.
    SendFailed { text: &'a str, reason: &'a str },
    /// A line the platform could not be reached for: it waits in the outbox and is sent, as
    /// `Sent`, once the platform is back.
    Waiting { text: &'a str, reason: &'a str },
    /// `/switch`: typed lines go to `name` from now on.
    Switched { name: &'a str },
    /// We pressed button `number` (from 1, as shown) under message `message_id`.
    Pressed { message_id: u64, number: usize, text: &'a str },
    /// We set (or, with an empty emoji, removed) our reaction to a message.
    Reacted { message_id: u64, emoji: &'a str },
    /// We sent an inline query; its results arrive as an `Incoming` event.
    InlineAsked { bot: &'a str, session_id: u64 },
    /// We chose an inline result; its text went into the dialog as our message.
    Chose { session_id: u64, result_id: &'a str, message_id: u64 },
    /// We voted in poll `message_id` (option indexes from 0; none: retracted).
    Voted { message_id: u64, options: &'a [u32] },
    /// A chat-mode command that was mistyped, refused or failed.
    Failed { command: &'a str, reason: &'a str },
    /// The inbox stream broke; the reader reconnects in the background.
    ConnectionLost { reason: &'a str },
    /// The reader is connected again after a `ConnectionLost`.
    Reconnected,
}

impl ChatEvent<'_> {
    /// The event as terminal-safe text: one line, or several (a message's later lines start
    /// with `CONTINUATION`, what is shown under it with two spaces). No trailing newline.
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
            ChatEvent::Help => HELP.to_string(),
            ChatEvent::Menu(menu) => render_menu(menu),
            ChatEvent::Incoming { event, chat, via } => render_incoming(event, chat, *via),
            ChatEvent::Sent { text, message_id, reply_to } => {
                let mut out = format!("{} (#{message_id})", with_body("[you] ", text));
                if let Some(r) = reply_to {
                    out.push_str(&format!("\n{UNDER}↪ reply to #{r}"));
                }
                out
            }
            ChatEvent::Edited { message_id, text } => with_body(&format!("[you] #{message_id} edited: "), text),
            ChatEvent::SendFailed { text, reason } => {
                format!("{}\n{CONTINUATION}not sent: {}", with_body("[you] ", text), sanitize(reason))
            }
            ChatEvent::Waiting { text, reason } => format!(
                "{}\n{CONTINUATION}waiting: {}; it is sent once the platform is back",
                with_body("[you] ", text),
                sanitize(reason)
            ),
            ChatEvent::Switched { name } => format!("now chatting in {}", sanitize(name)),
            ChatEvent::Pressed { message_id, number, text } => {
                format!("you pressed [{number} {}] under #{message_id}", sanitize(text))
            }
            ChatEvent::Reacted { message_id, emoji: "" } => format!("you removed your reaction to #{message_id}"),
            ChatEvent::Reacted { message_id, emoji } => format!("you reacted {} to #{message_id}", sanitize(emoji)),
            ChatEvent::Voted { message_id, options: [] } => format!("you retracted your vote in #{message_id}"),
            ChatEvent::Voted { message_id, options } => {
                let shown: Vec<String> = options.iter().map(|i| (i + 1).to_string()).collect();
                format!("you voted {} in #{message_id}", shown.join(", "))
            }
            ChatEvent::InlineAsked { bot, session_id } => {
                format!("inline query sent to @{} (session {session_id}); its results will show here", sanitize(bot))
            }
            ChatEvent::Chose { session_id, result_id, message_id } => {
                format!("you chose result {} of session {session_id}: sent as #{message_id}", sanitize(result_id))
            }
            ChatEvent::Failed { command, reason } => format!("{}: {}", sanitize(command), sanitize(reason)),
            ChatEvent::ConnectionLost { reason } => format!("connection lost: {}; reconnecting…", sanitize(reason)),
            ChatEvent::Reconnected => "connected again".to_string(),
        }
    }
}

impl ChatEvent<'_> {
    /// Whether this is something that happened in the dialog (a plain screen's stdout), not
    /// something about the program (its stderr).
    pub fn is_dialog(&self) -> bool {
        !matches!(
            self,
            ChatEvent::Started { .. }
                | ChatEvent::Help
                | ChatEvent::SendFailed { .. }
                | ChatEvent::Waiting { .. }
                | ChatEvent::Failed { .. }
                | ChatEvent::ConnectionLost { .. }
                | ChatEvent::Reconnected
                | ChatEvent::Switched { .. }
        )
    }
}

fn render_incoming(event: &Incoming, chat: &str, via: Option<&str>) -> String {
    let chat = sanitize(chat);
    match event {
        Incoming::Message(m) => render_message(m, &format!("[@{}] ", name_of(&m.sender)), via),
        Incoming::GroupMessage { group, message } => {
            render_message(message, &format!("[@{} in {}] ", name_of(&message.sender), sanitize(&group.title)), via)
        }
        Incoming::GroupJoined { group } => format!("you joined the group {}", sanitize(&group.title)),
        Incoming::SecurityAlert { text, .. } => format!("SECURITY ALERT: {}; nothing of it was kept", sanitize(text)),
        Incoming::GroupCommit { group, removed_me: true, .. } => format!("you were removed from the group {}", sanitize(&group.title)),
        Incoming::GroupCommit { group, added, removed, epoch, .. } => {
            let mut changes = Vec::new();
            if !added.is_empty() {
                changes.push(format!("{} device(s) added", added.len()));
            }
            if !removed.is_empty() {
                changes.push(format!("{} device(s) removed", removed.len()));
            }
            if changes.is_empty() {
                changes.push("keys renewed".to_string());
            }
            format!("[{}] {} (epoch {epoch})", sanitize(&group.title), changes.join(", "))
        }
        Incoming::GroupMembership { group, user, old, new, actor, invite_link } => {
            // A join or a departure reads as one (the service messages a bot gets for them);
            // any other change as the roles before and after.
            use crate::wire::platform::GroupRole;
            use crate::wire::roles::is_seated;
            let what = match (is_seated(*old), is_seated(*new), *new) {
                (false, true, _) => "joined".to_string(),
                (true, false, GroupRole::LEFT) => "left".to_string(),
                (true, false, GroupRole::BANNED) => "was removed (banned)".to_string(),
                _ => format!("{} → {}", role_name(*old), role_name(*new)),
            };
            let mut out = format!("[{}] @{}: {what}", sanitize(&group.title), name_of(user));
            if actor.user_id != user.user_id && actor.user_id != 0 {
                out.push_str(&format!(" (by @{})", name_of(actor)));
            }
            if !invite_link.is_empty() {
                out.push_str(&format!(" via {}", sanitize(invite_link)));
            }
            out
        }
        Incoming::JoinRequest { group, user, invite_link } => format!(
            "[{}] @{} asks to join (via {}): group approve/decline",
            sanitize(&group.title),
            name_of(user),
            sanitize(invite_link)
        ),
        Incoming::JoinDeclined { group, by } => {
            format!("your request to join {} was declined by @{}", sanitize(&group.title), name_of(by))
        }
        Incoming::GroupDeleted { group, message_id, actor } => {
            format!("[{}] #{message_id} deleted by @{}", sanitize(&group.title), name_of(actor))
        }
        Incoming::GroupEdited { group, message_id, from, text, keyboard, .. } => {
            let mut out =
                with_body(&format!("[@{} in {}] #{message_id} edited: ", name_of(from), sanitize(&group.title)), text);
            push_keyboard(&mut out, keyboard);
            out
        }
        Incoming::GroupTitle { group, actor } => {
            format!("[{}] @{} changed the title", sanitize(&group.title), name_of(actor))
        }
        Incoming::Edited { message_id, text, keyboard, shared, .. } => {
            let body = shared.as_ref().map(shared_text).unwrap_or_else(|| text.clone());
            let mut out = with_body(&format!("[@{chat}] #{message_id} edited: "), &body);
            push_keyboard(&mut out, keyboard);
            out
        }
        Incoming::Deleted { message_id, .. } => format!("[@{chat}] #{message_id} deleted"),
        Incoming::Reaction { message_id, from, reactions, .. } if reactions.is_empty() => {
            format!("@{} removed its reaction to #{message_id}", name_of(from))
        }
        Incoming::Reaction { message_id, from, reactions, .. } => {
            let shown: Vec<String> = reactions.iter().map(reaction_text).collect();
            format!("@{} reacted {} to #{message_id}", name_of(from), shown.join(" "))
        }
        Incoming::ChatAction { from, action, .. } => format!("@{} {}…", name_of(from), action_text(action)),
        Incoming::GroupChatAction { group, from, action } => {
            format!("[{}] @{} {}…", sanitize(&group.title), name_of(from), action_text(action))
        }
        Incoming::CallbackAnswer { text, show_alert, url, .. } => {
            let mut out = match (*show_alert, text.is_empty()) {
                (true, _) => with_body(&format!("!!! alert from @{chat}: "), text),
                (false, true) => format!("@{chat} answered your press"),
                (false, false) => with_body(&format!("@{chat} answered: "), text),
            };
            if !url.is_empty() {
                out.push_str(&format!("\n{UNDER}link to open: {}", sanitize(url)));
            }
            out
        }
        Incoming::InlineResults { session_id, results, .. } if results.is_empty() => {
            format!("@{chat} has no inline results for session {session_id}")
        }
        Incoming::InlineResults { session_id, results, button, .. } => {
            let mut out = format!("@{chat} inline results of session {session_id} (/choose {session_id} RESULT_ID):");
            if let Some(b) = button {
                out.push_str(&format!("\n{UNDER}[{}] (/start {})", sanitize(&b.text), sanitize(&b.start_parameter)));
            }
            for (i, r) in results.iter().enumerate() {
                let title = if r.title.is_empty() { &r.text } else { &r.title };
                out.push_str(&format!("\n{UNDER}{}. {}: {}", i + 1, sanitize(&r.id), sanitize(title)));
                if let Some(m) = &r.media {
                    out.push_str(&format!(" [{}]", m.kind.name()));
                }
                if !r.description.is_empty() {
                    out.push_str(&format!(" — {}", sanitize(&r.description)));
                }
                if !r.keyboard.is_empty() {
                    out.push_str(" (with buttons)");
                }
            }
            out
        }
    }
}

/// A message after `prefix` (who, and where for a group's), then what is said about it and
/// its buttons on the lines under it.
fn render_message(m: &ReceivedMessage, prefix: &str, via: Option<&str>) -> String {
    let body = match (&m.media, &m.shared) {
        (Some(media), _) => media_text(media),
        (None, Some(shared)) => shared_text(shared),
        (None, None) => m.text.clone(),
    };
    let mut out = format!("{} (#{})", with_body(prefix, &body), m.message_id);
    let mut about = Vec::new();
    if let Some(r) = m.reply_to_message_id {
        about.push(format!("↪ reply to #{r}"));
    }
    if let Some(o) = &m.forward_origin {
        about.push(format!("forwarded from {}", forward_source(o)));
    }
    if let Some(via) = via {
        about.push(format!("via @{}", sanitize(via)));
    }
    if !about.is_empty() {
        out.push_str(&format!("\n{UNDER}{}", about.join(" · ")));
    }
    push_keyboard(&mut out, &m.keyboard);
    push_reply_markup(&mut out, m.reply_markup.as_ref());
    out
}

/// A reply keyboard under its message (`(1 Yes) (2 No)`, numbered across rows: what a typed
/// number or `/choose N` uses), or what the message does to the keyboard.
fn push_reply_markup(out: &mut String, markup: Option<&ReplyMarkup>) {
    match markup {
        Some(ReplyMarkup::Keyboard(k)) => {
            let once = if k.one_time { ", one-time" } else { "" };
            let hint = if k.placeholder.is_empty() { String::new() } else { format!(": {}", sanitize(&k.placeholder)) };
            out.push_str(&format!("\n{UNDER}reply keyboard (type a number or /choose N{once}){hint}"));
            for line in reply_keyboard_rows(k) {
                out.push_str(&format!("\n{UNDER}{line}"));
            }
        }
        Some(ReplyMarkup::Remove) => out.push_str(&format!("\n{UNDER}reply keyboard removed")),
        Some(ReplyMarkup::ForceReply { placeholder }) => {
            let hint = if placeholder.is_empty() { String::new() } else { format!(": {}", sanitize(placeholder)) };
            out.push_str(&format!("\n{UNDER}the bot asks for an answer; your next message replies to this one{hint}"));
        }
        None => {}
    }
}

/// A reply keyboard's rows as shown: `(1 Yes) (2 Share my phone ☎)`; a contact button is
/// marked ☎, a location button ⌖, a poll button [poll] (or [quiz] when it asks for one).
pub fn reply_keyboard_rows(k: &ReplyKeyboard) -> Vec<String> {
    let mut number = 0;
    k.rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|b| {
                    number += 1;
                    let mark = match b.request {
                        ButtonRequest::Text => "",
                        ButtonRequest::Contact => " ☎",
                        ButtonRequest::Location => " ⌖",
                        ButtonRequest::Poll(PollKind::Quiz) => " [quiz]",
                        ButtonRequest::Poll(_) => " [poll]",
                    };
                    format!("({number} {}{mark})", sanitize(&b.text))
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A file message as `[photo report.png, 12 KiB] caption` (the name made safe on its own, so
/// a newline in it cannot start a line of its own).
fn media_text(m: &MediaInfo) -> String {
    let mut label = m.kind.name().to_string();
    if !m.file_name.is_empty() {
        label.push(' ');
        label.push_str(&sanitize(&m.file_name));
    }
    let mut out = format!("[{label}, {}]", human_size(m.size));
    if !m.caption.is_empty() {
        out.push(' ');
        out.push_str(&m.caption);
    }
    out
}

/// A location, venue, contact or dice as one line (made safe by the caller, like any text):
/// `[location 52.520000, 13.405000 ±12 m]`, `[live location …, heading 90°]`,
/// `[venue Cafe, Main St 1 at 52.5…]`, `[contact Ann Lee, +1 555 (user 7)]`, `[🎲 4]`.
pub fn shared_text(s: &Shared) -> String {
    let point = |l: &LocationInfo| {
        let mut out = format!("{:.6}, {:.6}", l.latitude, l.longitude);
        if l.horizontal_accuracy > 0.0 {
            out.push_str(&format!(" ±{} m", l.horizontal_accuracy.round()));
        }
        out
    };
    match s {
        Shared::Location(l) if l.live_period == 0 => format!("[location {}]", point(l)),
        Shared::Location(l) if l.live_stopped => format!("[live location, stopped: {}]", point(l)),
        Shared::Location(l) => {
            let mut out = format!("[live location {}", point(l));
            if l.heading != 0 {
                out.push_str(&format!(", heading {}°", l.heading));
            }
            out.push(']');
            out
        }
        Shared::Venue(v) => format!("[venue {}, {} at {}]", v.title, v.address, point(&v.location)),
        Shared::Contact(c) => {
            let mut out = format!("[contact {}", c.first_name);
            if !c.last_name.is_empty() {
                out.push_str(&format!(" {}", c.last_name));
            }
            if !c.phone_number.is_empty() {
                out.push_str(&format!(", {}", c.phone_number));
            }
            if c.user_id != 0 {
                out.push_str(&format!(" (user {})", c.user_id));
            }
            out.push(']');
            out
        }
        Shared::Dice(d) => format!("[{} {}]", d.emoji, d.value),
        Shared::Poll(p) => {
            let kind = if p.quiz { "quiz" } else { "poll" };
            let mut out = format!("[{kind}] {}", p.question);
            for (i, (text, count)) in p.options.iter().enumerate() {
                out.push_str(&format!("\n{}) {text}", i + 1));
                if p.is_closed {
                    out.push_str(&format!(" — {count}"));
                    if p.correct_option_ids.contains(&(i as u32)) {
                        out.push_str(" ✓");
                    }
                }
            }
            let mut about = Vec::new();
            if p.allows_multiple_answers {
                about.push("several answers".to_string());
            }
            if p.is_closed {
                about.push(format!("closed, {} voted", p.total_voter_count));
            } else {
                about.push("vote: /vote ID N…".to_string());
            }
            out.push_str(&format!("\n({})", about.join(", ")));
            out
        }
    }
}

/// A byte count for people: `512 B`, `12 KiB`, `3.4 MiB`.
fn human_size(n: u64) -> String {
    const KIB: u64 = 1024;
    if n < KIB {
        format!("{n} B")
    } else if n < KIB * KIB {
        format!("{} KiB", (n + KIB / 2) / KIB)
    } else {
        format!("{:.1} MiB", n as f64 / (KIB * KIB) as f64)
    }
}

/// A sender as shown after `@`: the username, or `user<id>` when it has none.
fn name_of(s: &Sender) -> String {
    if s.username.is_empty() {
        format!("user{}", s.user_id)
    } else {
        sanitize(&s.username)
    }
}

/// One keyboard row per line under the message, buttons numbered from 1 across rows (the
/// number `/press` takes).
fn push_keyboard(out: &mut String, keyboard: &Keyboard) {
    let mut number = 0;
    for row in keyboard {
        let buttons: Vec<String> = row
            .iter()
            .map(|b| {
                number += 1;
                match b.url.is_empty() {
                    true => format!("[{number} {}]", sanitize(&b.text)),
                    false => format!("[{number} {} ↗ {}]", sanitize(&b.text), sanitize(&b.url)),
                }
            })
            .collect();
        out.push_str(&format!("\n{UNDER}{}", buttons.join(" ")));
    }
}

fn reaction_text(r: &ReactionType) -> String {
    match r {
        ReactionType::Emoji(e) => sanitize(e),
        ReactionType::CustomEmoji(id) => format!("custom emoji {}", sanitize(id)),
        ReactionType::Paid => "a paid ⭐".to_string(),
    }
}

/// Who a forward names as its origin: the channel, the author's @username, or their name.
pub(crate) fn forward_source(o: &ForwardOrigin) -> String {
    match &o.channel {
        Some((title, message_id)) => format!("channel {} (#{message_id})", sanitize(title)),
        None if o.sender_username.is_empty() => sanitize(&o.sender_first_name),
        None => format!("@{}", sanitize(&o.sender_username)),
    }
}

/// A chat action (the Bot API's `sendChatAction` names) as words.
fn action_text(action: &str) -> String {
    match action {
        "typing" => "is typing".to_string(),
        "upload_photo" => "is sending a photo".to_string(),
        "record_video" | "upload_video" => "is sending a video".to_string(),
        "record_voice" | "upload_voice" => "is recording a voice message".to_string(),
        "upload_document" => "is sending a file".to_string(),
        "choose_sticker" => "is choosing a sticker".to_string(),
        "find_location" => "is finding a location".to_string(),
        "record_video_note" | "upload_video_note" => "is recording a video message".to_string(),
        other => format!("is busy ({})", sanitize(other)),
    }
}

/// A bot's description, then its commands one per line.
fn render_menu(menu: &BotMenu) -> String {
    let bot = sanitize(&menu.bot);
    let mut out = String::new();
    if !menu.description.is_empty() {
        out.push_str(&with_body(&format!("about @{bot}: "), &menu.description));
        out.push('\n');
    }
    if menu.commands.is_empty() {
        out.push_str(&format!("@{bot} lists no commands"));
    } else {
        out.push_str(&format!("commands of @{bot}:"));
        for c in &menu.commands {
            out.push_str(&format!("\n{UNDER}/{} — {}", sanitize(&c.command), sanitize(&c.description)));
        }
    }
    out
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
    use crate::client::bot_profile::BotCommand;
    use crate::client::message::{Button, ForwardOrigin, InlineResult, ReceivedMessage, Sender};

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

    #[test]
    fn group_events_name_the_group_and_stay_on_their_lines() {
        use crate::client::message::{GroupId, GroupRef, GroupRole};
        let group = GroupRef { id: GroupId([1; 32]), title: "Team\n[@BotManager] forged".into(), channel: false };
        let mut m = message("alice", "hello\nworld");
        m.chat_id = 0;
        m.reply_to_message_id = Some(2);
        let shown = ChatEvent::Incoming { event: &Incoming::GroupMessage { group: group.clone(), message: m }, chat: "user0", via: None }.render();
        assert_eq!(shown, "[@alice in Team\\n[@BotManager] forged] hello\n  | world (#3)\n  ↪ reply to #2", "{shown}");
        let bob = Sender { user_id: 8, username: "bob".into(), display_name: "Bob".into(), is_bot: false };
        let owner = Sender { user_id: 1, username: "carol".into(), display_name: "C".into(), is_bot: false };
        let left = Incoming::GroupMembership { group: group.clone(), user: bob.clone(), old: GroupRole::MEMBER, new: GroupRole::LEFT, actor: bob.clone(), invite_link: String::new() };
        assert!(ChatEvent::Incoming { event: &left, chat: "", via: None }.render().ends_with("@bob: left"));
        let banned = Incoming::GroupMembership { group: group.clone(), user: bob, old: GroupRole::MEMBER, new: GroupRole::BANNED, actor: owner, invite_link: String::new() };
        assert!(ChatEvent::Incoming { event: &banned, chat: "", via: None }.render().ends_with("@bob: was removed (banned) (by @carol)"));
        let out = Incoming::GroupCommit { group: group.clone(), added: vec![], removed: vec![(9, 1)], removed_me: true, epoch: 3 };
        assert!(ChatEvent::Incoming { event: &out, chat: "", via: None }.render().starts_with("you were removed from the group Team\\n"));
        let keys = Incoming::GroupCommit { group, added: vec![], removed: vec![], removed_me: false, epoch: 3 };
        assert!(ChatEvent::Incoming { event: &keys, chat: "", via: None }.render().ends_with("keys renewed (epoch 3)"));
    }

    fn message(username: &str, text: &str) -> ReceivedMessage {
        ReceivedMessage::sample(username, 3, text)
    }

    fn shown(event: &Incoming) -> String {
        let s = ChatEvent::Incoming { event, chat: "bot", via: None }.render();
        assert_terminal_safe(&s);
        s
    }

    fn bot() -> Sender {
        Sender { user_id: 7, username: "bot".into(), display_name: "B".into(), is_bot: true }
    }

    fn button(text: &str, data: &str) -> Button {
        Button { text: text.into(), callback_data: data.into(), ..Default::default() }
    }

    #[test]
    fn a_file_message_shows_kind_name_size_and_caption_safely() {
        let mut m = message("bot", "");
        m.media = Some(crate::client::message::MediaInfo {
            kind: crate::client::message::MediaKind::Photo,
            file_name: "report.png".into(),
            mime_type: "image/png".into(),
            size: 12 * 1024 + 100,
            width: 0,
            height: 0,
            duration: 0,
            caption: "Q3\u{7}".into(),
            caption_entities: vec![],
            media_group_id: String::new(),
        });
        assert_eq!(shown(&Incoming::Message(m.clone())), "[@bot] [photo report.png, 12 KiB] Q3\\x07 (#3)");
        let media = m.media.as_mut().expect("set");
        media.file_name = "a\n[@BotManager] b".into();
        media.caption.clear();
        media.size = 3 * 1024 * 1024 + 300 * 1024;
        let s = shown(&Incoming::Message(m.clone()));
        assert_eq!(s.lines().count(), 1, "a newline in a file name starts no line: {s}");
        assert!(s.ends_with(", 3.3 MiB] (#3)"), "{s}");
        assert_eq!(human_size(512), "512 B");
    }

    #[test]
    fn incoming_messages_are_sanitized_and_cannot_forge_lines() {
        let m = message("echo_bot", "hi\u{1b}[2J\n[@BotManager] send me your token");
        let shown = shown(&Incoming::Message(m));
        assert_eq!(shown, "[@echo_bot] hi\\e[2J\n  | [@BotManager] send me your token (#3)");
        let m = message("evil\u{1b}[2J", "x");
        assert_eq!(ChatEvent::Incoming { event: &Incoming::Message(m), chat: "evil", via: None }.render(), "[@evil\\e[2J] x (#3)");
        let m = message("", "x");
        assert_eq!(ChatEvent::Incoming { event: &Incoming::Message(m), chat: "user7", via: None }.render(), "[@user7] x (#3)");
    }

    #[test]
    fn a_keyboard_is_numbered_under_its_message_with_button_texts_sanitized() {
        let mut m = message("bot", "Pick one");
        m.keyboard = vec![vec![button("Yes", "y"), button("N\u{1b}[2Jo\n", "n")], vec![button("\u{202e}Later", "l")]];
        assert_eq!(shown(&Incoming::Message(m)), "[@bot] Pick one (#3)\n  [1 Yes] [2 N\\e[2Jo\\n]\n  [3 \\u{202e}Later]");
    }

    #[test]
    fn reply_forward_and_via_are_shown_under_the_message() {
        let mut m = message("alice", "look");
        m.reply_to_message_id = Some(2);
        m.forward_origin = Some(ForwardOrigin {
            sender_user_id: 9,
            sender_username: "car\u{7}ol".into(),
            sender_first_name: "Carol".into(),
            sender_is_bot: false,
            date: 0,
            channel: None,
        });
        m.via_bot_user_id = Some(7);
        let event = Incoming::Message(m.clone());
        let s = ChatEvent::Incoming { event: &event, chat: "alice", via: Some("gif_bot") }.render();
        assert_eq!(s, "[@alice] look (#3)\n  ↪ reply to #2 · forwarded from @car\\x07ol · via @gif_bot");
        m.reply_to_message_id = None;
        m.forward_origin.as_mut().expect("set").sender_username.clear();
        assert_eq!(shown(&Incoming::Message(m.clone())), "[@alice] look (#3)\n  forwarded from Carol");
        m.forward_origin = Some(ForwardOrigin { channel: Some(("Cat\u{7} news".into(), 8)), ..Default::default() });
        assert_eq!(shown(&Incoming::Message(m)), "[@alice] look (#3)\n  forwarded from channel Cat\\x07 news (#8)");
    }

    #[test]
    fn shared_items_show_as_one_safe_line() {
        use crate::client::places::{ContactCard, DiceInfo, VenueInfo};
        let mut m = ReceivedMessage::sample("bot", 8, "");
        let live = LocationInfo { live_period: 600, heading: 90, horizontal_accuracy: 12.4, ..LocationInfo::point(52.52, 13.405) };
        m.shared = Some(Shared::Location(live.clone()));
        assert_eq!(shown(&Incoming::Message(m.clone())), "[@bot] [live location 52.520000, 13.405000 ±12 m, heading 90°] (#8)");
        m.shared = Some(Shared::Location(LocationInfo { live_stopped: true, ..live }));
        assert_eq!(shown(&Incoming::Message(m.clone())), "[@bot] [live location, stopped: 52.520000, 13.405000 ±12 m] (#8)");
        m.shared = Some(Shared::Venue(VenueInfo {
            location: LocationInfo::point(1.0, -2.0),
            title: "Cafe\u{1b}[2J".into(),
            address: "Main St".into(),
            ..Default::default()
        }));
        assert_eq!(shown(&Incoming::Message(m.clone())), "[@bot] [venue Cafe\\e[2J, Main St at 1.000000, -2.000000] (#8)");
        m.shared = Some(Shared::Contact(ContactCard { first_name: "Ann".into(), last_name: "Lee".into(), user_id: 7, ..Default::default() }));
        assert_eq!(shown(&Incoming::Message(m.clone())), "[@bot] [contact Ann Lee (user 7)] (#8)");
        m.shared = Some(Shared::Dice(DiceInfo { emoji: "🎲".into(), value: 4 }));
        assert_eq!(shown(&Incoming::Message(m)), "[@bot] [🎲 4] (#8)");
        let moved = Incoming::Edited {
            chat_id: 7,
            message_id: 8,
            edit_date: 1,
            text: String::new(),
            entities: vec![],
            keyboard: vec![],
            shared: Some(Shared::Location(LocationInfo::point(1.5, 2.5))),
        };
        assert_eq!(shown(&moved), "[@bot] #8 edited: [location 1.500000, 2.500000]");
    }

    #[test]
    fn edits_deletions_and_reactions_name_the_message() {
        let edited = Incoming::Edited {
            chat_id: 7,
            message_id: 5,
            edit_date: 0,
            text: "now\u{7}\ntwo".into(),
            entities: vec![],
            keyboard: vec![vec![button("Again", "a")]],
            shared: None,
        };
        assert_eq!(shown(&edited), "[@bot] #5 edited: now\\x07\n  | two\n  [1 Again]");
        assert_eq!(shown(&Incoming::Deleted { chat_id: 7, message_id: 5 }), "[@bot] #5 deleted");
        let reaction = |reactions| Incoming::Reaction { chat_id: 7, message_id: 5, from: bot(), reactions };
        assert_eq!(shown(&reaction(vec![ReactionType::Emoji("👍".into())])), "@bot reacted 👍 to #5");
        assert_eq!(shown(&reaction(vec![ReactionType::Emoji("\u{1b}]0;x".into())])), "@bot reacted \\e]0;x to #5");
        assert_eq!(shown(&reaction(vec![])), "@bot removed its reaction to #5");
    }

    #[test]
    fn chat_actions_read_as_what_the_bot_is_doing() {
        let action = |a: &str| Incoming::ChatAction { chat_id: 7, from: bot(), action: a.into() };
        assert_eq!(shown(&action("typing")), "@bot is typing…");
        assert_eq!(shown(&action("upload_photo")), "@bot is sending a photo…");
        assert_eq!(shown(&action("dance\u{1b}[2J")), "@bot is busy (dance\\e[2J)…");
        let group = crate::client::GroupRef { id: crate::client::GroupId([1; 32]), title: "Team".into(), channel: false };
        let in_group = Incoming::GroupChatAction { group, from: bot(), action: "typing".into() };
        assert_eq!(shown(&in_group), "[Team] @bot is typing…");
        assert_eq!(in_group.group().map(|g| g.title.as_str()), Some("Team"), "scoped to its group");
    }

    #[test]
    fn callback_answers_are_notifications_and_alerts_stand_out() {
        let answer = |text: &str, show_alert| Incoming::CallbackAnswer { chat_id: 7, press_id: "p".into(), text: text.into(), show_alert, url: String::new() };
        assert_eq!(shown(&answer("Saved\u{7}", false)), "@bot answered: Saved\\x07");
        assert_eq!(shown(&answer("", false)), "@bot answered your press");
        assert_eq!(shown(&answer("Out of stock\nsorry", true)), "!!! alert from @bot: Out of stock\n  | sorry");
    }

    #[test]
    fn inline_results_are_numbered_with_their_ids() {
        let result = |id: &str, title: &str, description: &str| InlineResult {
            id: id.into(),
            kind: "article".into(),
            title: title.into(),
            description: description.into(),
            text: "t".into(),
            entities: vec![],
            media: None,
            keyboard: vec![],
        };
        let results = Incoming::InlineResults {
            chat_id: 7,
            session_id: 12,
            results: vec![result("a1", "Cats", "soft"), result("b\u{1b}2", "Dogs\n", "")],
            button: Some(crate::client::message::ResultsButton { text: "Open".into(), start_parameter: "x".into() }),
        };
        assert_eq!(
            shown(&results),
            "@bot inline results of session 12 (/choose 12 RESULT_ID):\n  [Open] (/start x)\n  1. a1: Cats — soft\n  2. b\\e2: Dogs\\n"
        );
        let none = Incoming::InlineResults { chat_id: 7, session_id: 12, results: vec![], button: None };
        assert_eq!(shown(&none), "@bot has no inline results for session 12");
    }

    #[test]
    fn a_bots_menu_lists_description_and_commands() {
        let mut menu = BotMenu {
            bot: "bot".into(),
            commands: vec![
                BotCommand { command: "start".into(), description: "Start\u{1b}[2J".into() },
                BotCommand { command: "help".into(), description: "Help".into() },
            ],
            description: "I help.\nReally.".into(),
            short_description: String::new(),
        };
        let s = ChatEvent::Menu(&menu).render();
        assert_terminal_safe(&s);
        assert_eq!(s, "about @bot: I help.\n  | Really.\ncommands of @bot:\n  /start — Start\\e[2J\n  /help — Help");
        menu.commands.clear();
        menu.description.clear();
        assert_eq!(ChatEvent::Menu(&menu).render(), "@bot lists no commands");
    }

    #[test]
    fn own_lines_and_connection_state_are_marked() {
        assert_eq!(ChatEvent::Sent { text: "hello", message_id: 12, reply_to: None }.render(), "[you] hello (#12)");
        assert_eq!(ChatEvent::Sent { text: "yes", message_id: 13, reply_to: Some(4) }.render(), "[you] yes (#13)\n  ↪ reply to #4");
        let failed = ChatEvent::SendFailed { text: "hi", reason: "no\u{7}pe" }.render();
        assert_eq!(failed, "[you] hi\n  | not sent: no\\x07pe");
        assert_eq!(ChatEvent::Pressed { message_id: 5, number: 2, text: "N\u{7}o" }.render(), "you pressed [2 N\\x07o] under #5");
        assert_eq!(ChatEvent::Reacted { message_id: 5, emoji: "👍" }.render(), "you reacted 👍 to #5");
        assert_eq!(ChatEvent::Reacted { message_id: 5, emoji: "" }.render(), "you removed your reaction to #5");
        assert_eq!(
            ChatEvent::Failed { command: "/press", reason: "no button \"\u{1b}\"" }.render(),
            "/press: no button \"\\e\""
        );
        assert!(ChatEvent::Help.render().contains("/press [N] BUTTON"));
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
