//! What chat mode shows on a terminal, as a model drawn whole on every change: the
//! conversations (the one open, and every other that something arrived in, with its unread
//! count), each a list of messages and notes. Because the screen is drawn from the model, an
//! edit changes the message where it is, a deletion strikes it through, and a line the person
//! sent turns from pending to sent in place.
//!
//! Everything from the network goes through `display::sanitize` one character at a time, so
//! no control character reaches the terminal and entity offsets still line up.

mod json;

use std::collections::VecDeque;

use unicode_width::UnicodeWidthChar;

use super::super::display::{self, sanitize, ChatEvent};
use super::super::message::{Entity, GroupId, Incoming, InlineResult, Keyboard, MediaInfo, ReceivedMessage, ReplyMarkup};
use super::super::places::Shared;
use super::super::reply_keyboard::ReplyKeyboard;
use super::style::{Line, Span, Style};

/// Entries kept per conversation (older ones scroll away for good).
const MAX_ENTRIES: usize = 500;

/// Which conversation something belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatKey {
    User(u64),
    Group(GroupId),
}

/// What became of a line the person typed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendState {
    /// Typed; the platform has not answered yet.
    Pending,
    /// The platform cannot be reached: it waits in the outbox.
    Waiting,
    Sent,
    /// Refused for good, with why.
    Failed(String),
}

#[derive(Clone, Debug)]
struct Message {
    /// The platform's id (none until sent).
    id: Option<u64>,
    /// The outbox's id of a line we typed.
    queued: Option<i64>,
    /// The sender's name; none: the person.
    from: Option<String>,
    text: String,
    entities: Vec<Entity>,
    reply_to: Option<u64>,
    keyboard: Keyboard,
    about: Vec<String>,
    state: Option<SendState>,
    edited: bool,
    deleted: bool,
    /// A file's description (the web page shows it; the terminal its label in `text`).
    media: Option<MediaInfo>,
    /// A location, contact, dice or poll as it is now (the web page draws a poll's options).
    shared: Option<Shared>,
    /// Our vote in this poll (options from 0), as we cast it here.
    voted: Vec<u32>,
}

#[derive(Clone, Debug)]
enum Entry {
    Message { time: i64, message: Message },
    Note { time: i64, text: String, style: Style },
}

/// One conversation: a dialog with a user or bot, or a group.
pub struct Conversation {
    pub key: ChatKey,
    /// `@name` or the group's title.
    pub name: String,
    entries: VecDeque<Entry>,
    pub unread: usize,
    /// The bot's reply keyboard, drawn above the status line while it shows.
    reply_keyboard: Option<ReplyKeyboard>,
    /// The latest results of an inline query in this dialog, until one is chosen (the web page
    /// lists them; the terminal shows them as a note).
    inline: Option<(u64, Vec<InlineResult>)>,
}

impl Conversation {
    fn new(key: ChatKey, name: String) -> Conversation {
        Conversation { key, name, entries: VecDeque::new(), unread: 0, reply_keyboard: None, inline: None }
    }

    fn push(&mut self, entry: Entry) {
        if self.entries.len() == MAX_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    /// A received message, placed in its sender's order: before the messages at the end that
    /// have a higher id. Ids are the ones senders vouch for (`e2e::vouch`), reserved in the
    /// order they send, so a message the platform delivered late is shown where it was sent.
    fn push_received(&mut self, time: i64, message: Message) {
        let id = message.id.unwrap_or(u64::MAX);
        let later = |e: &Entry| matches!(e, Entry::Message { message, .. } if message.id.is_some_and(|other| other > id));
        let mut at = self.entries.len() - self.entries.iter().rev().take_while(|e| later(e)).count();
        if self.entries.len() == MAX_ENTRIES {
            self.entries.pop_front();
            at = at.saturating_sub(1);
        }
        self.entries.insert(at, Entry::Message { time, message });
    }

    fn message_mut(&mut self, id: u64) -> Option<&mut Message> {
        self.entries.iter_mut().rev().find_map(|e| match e {
            Entry::Message { message, .. } if message.id == Some(id) => Some(message),
            _ => None,
        })
    }

    fn message(&self, id: u64) -> Option<&Message> {
        self.entries.iter().rev().find_map(|e| match e {
            Entry::Message { message, .. } if message.id == Some(id) => Some(message),
            _ => None,
        })
    }
}

/// Everything chat mode shows.
pub struct View {
    own: String,
    /// The header's words about the open conversation's peer (`bot @x (X)`).
    about_peer: String,
    convs: Vec<Conversation>,
    current: usize,
    /// Set while the inbox stream is down, with why.
    lost: Option<String>,
    /// A one-line hint above the input (a Ctrl-C reminder, a command's usage).
    hint: Option<String>,
}

/// A drawn screen: its lines, and where the cursor goes (row, column; from 0).
pub struct Frame {
    pub lines: Vec<Line>,
    pub cursor: (usize, usize),
}

impl View {
    pub fn new(own: &str, peer: ChatKey, peer_name: &str, about_peer: &str) -> View {
        View {
            own: sanitize(own),
            about_peer: sanitize(about_peer),
            convs: vec![Conversation::new(peer, sanitize(peer_name))],
            current: 0,
            lost: None,
            hint: None,
        }
    }

    pub fn current(&self) -> &Conversation {
        &self.convs[self.current]
    }

    /// Opens (and creates if new) the conversation `key`; its unread count is read.
    pub fn open(&mut self, key: ChatKey, name: &str, about: &str) {
        self.current = self.conversation(&key, name);
        self.convs[self.current].unread = 0;
        self.about_peer = sanitize(about);
    }

    fn conversation(&mut self, key: &ChatKey, name: &str) -> usize {
        match self.convs.iter().position(|c| &c.key == key) {
            Some(i) => i,
            None => {
                self.convs.push(Conversation::new(key.clone(), sanitize(name)));
                self.convs.len() - 1
            }
        }
    }

    /// The reply keyboard conversation `key` shows now (none: it shows none).
    pub fn set_reply_keyboard(&mut self, key: &ChatKey, keyboard: Option<ReplyKeyboard>) {
        if let Some(conv) = self.convs.iter_mut().find(|c| &c.key == key) {
            conv.reply_keyboard = keyboard;
        }
    }

    pub fn set_hint(&mut self, hint: Option<String>) {
        self.hint = hint;
    }

    pub fn set_lost(&mut self, lost: Option<String>) {
        self.lost = lost;
    }

    /// A note in the open conversation.
    pub fn note(&mut self, text: &str, style: Style, now: i64) {
        self.convs[self.current].push(Entry::Note { time: now, text: text.to_string(), style });
    }

    /// A line the person typed, pending, as outbox entry `queued`.
    pub fn typed(&mut self, queued: i64, text: &str, reply_to: Option<u64>, now: i64) {
        let message = Message {
            id: None,
            queued: Some(queued),
            from: None,
            text: text.to_string(),
            entities: Vec::new(),
            reply_to,
            keyboard: Vec::new(),
            about: Vec::new(),
            state: Some(SendState::Pending),
            edited: false,
            deleted: false,
            media: None,
            shared: None,
            voted: Vec::new(),
        };
        self.convs[self.current].push(Entry::Message { time: now, message });
    }

    /// Whether conversation `key` is shown with a message in it already (earlier ones are
    /// not loaded into it again).
    pub fn shows_messages(&self, key: &ChatKey) -> bool {
        self.convs.iter().any(|c| &c.key == key && c.entries.iter().any(|e| matches!(e, Entry::Message { .. })))
    }

    /// Earlier messages of conversation `key` (oldest first; `true`: ours) before what this session
    /// shows, into a conversation that shows no message yet (opened again, it keeps its own).
    pub fn load_history(&mut self, key: &ChatKey, name: &str, earlier: &[(bool, ReceivedMessage)]) {
        if self.shows_messages(key) {
            return;
        }
        let at = self.conversation(key, name);
        let conv = &mut self.convs[at];
        for (own, m) in earlier.iter().rev().take(MAX_ENTRIES.saturating_sub(conv.entries.len())) {
            let message = if *own { self::own(m) } else { received(m) };
            conv.entries.push_front(Entry::Message { time: m.date, message });
        }
    }

    /// An inline result was chosen: the open conversation's results are put away.
    pub fn chose_inline(&mut self) {
        self.convs[self.current].inline = None;
    }

    /// A message of ours sent without the outbox (a file from the web page), sent already, as
    /// the profile remembers it.
    pub fn own_message(&mut self, m: &ReceivedMessage) {
        self.convs[self.current].push(Entry::Message { time: m.date, message: own(m) });
    }

    /// Our vote in poll `message_id` of the open conversation (none: retracted); false when
    /// the poll is not shown.
    pub fn voted(&mut self, message_id: u64, options: &[u32]) -> bool {
        match self.convs[self.current].message_mut(message_id).filter(|m| matches!(m.shared, Some(Shared::Poll(_)))) {
            Some(m) => {
                m.voted = options.to_vec();
                true
            }
            None => false,
        }
    }

    /// What became of typed line `queued` (in whichever conversation it is).
    pub fn settle(&mut self, queued: i64, state: SendState, message_id: Option<u64>) {
        for conv in &mut self.convs {
            for entry in conv.entries.iter_mut() {
                if let Entry::Message { message, .. } = entry {
                    if message.queued == Some(queued) {
                        message.state = Some(state);
                        if message_id.is_some() {
                            message.id = message_id;
                        }
                        return;
                    }
                }
            }
        }
    }

    /// Our message `message_id` of the open conversation now says `text`, marked edited;
    /// false when it is not shown (any more).
    pub fn edited_own(&mut self, message_id: u64, text: &str) -> bool {
        match self.convs[self.current].message_mut(message_id).filter(|m| m.from.is_none()) {
            Some(m) => {
                m.text = text.to_string();
                m.entities.clear();
                m.edited = true;
                true
            }
            None => false,
        }
    }

    /// Something that arrived. `name_of(chat_id)` names a dialog's peer for a new
    /// conversation and for the notes that carry no sender.
    pub fn incoming(&mut self, event: &Incoming, peer_name: &str, now: i64) {
        let (key, name) = match event.group() {
            Some(group) => (ChatKey::Group(group.id), group.title.clone()),
            None => (ChatKey::User(event.chat_id()), format!("@{peer_name}")),
        };
        let at = self.conversation(&key, &name);
        let conv = &mut self.convs[at];
        let shown = match event {
            Incoming::Message(m) | Incoming::GroupMessage { message: m, .. } => {
                match &m.reply_markup {
                    Some(ReplyMarkup::Keyboard(k)) => conv.reply_keyboard = Some(k.clone()),
                    Some(ReplyMarkup::Remove) => conv.reply_keyboard = None,
                    _ => {}
                }
                conv.push_received(m.date, received(m));
                true
            }
            // The peer's message only: never a line of ours.
            Incoming::Edited { message_id, text, entities, keyboard, shared, .. }
            | Incoming::GroupEdited { message_id, text, entities, keyboard, shared, .. } => match conv.message_mut(*message_id).filter(|m| m.from.is_some()) {
                Some(m) => {
                    // A moved or stopped live location is shown as it is now.
                    if shared.is_some() {
                        m.shared = shared.clone();
                    }
                    (m.text, m.entities) = match shared {
                        Some(shared) => (crate::client::display::shared_text(shared), Vec::new()),
                        None => (text.clone(), entities.clone()),
                    };
                    m.keyboard = keyboard.clone();
                    m.edited = true;
                    true
                }
                None => false,
            },
            Incoming::InlineResults { session_id, results, .. } => {
                conv.inline = Some((*session_id, results.clone())).filter(|(_, r)| !r.is_empty());
                false
            }
            Incoming::Deleted { message_id, .. } | Incoming::GroupDeleted { message_id, .. } => match conv.message_mut(*message_id) {
                Some(m) => {
                    m.deleted = true;
                    m.keyboard.clear();
                    true
                }
                None => false,
            },
            _ => false,
        };
        if !shown {
            let text = ChatEvent::Incoming { event, chat: peer_name, via: None }.render();
            let style = match event {
                Incoming::CallbackAnswer { show_alert: true, .. } | Incoming::SecurityAlert { .. } => Style::ALERT,
                Incoming::ChatAction { .. } | Incoming::GroupChatAction { .. } => Style::DIM,
                _ => Style::NOTE,
            };
            conv.push(Entry::Note { time: now, text, style });
        }
        if at != self.current && matches!(event, Incoming::Message(_) | Incoming::GroupMessage { .. } | Incoming::SecurityAlert { .. }) {
            conv.unread += 1;
        }
    }

    /// The whole screen for a terminal of `width` × `height`, with `input` typed so far and
    /// the cursor `cursor` chars into it.
    pub fn render(&self, width: usize, height: usize, input: &str, cursor: usize, tz: &dyn Fn(i64) -> String) -> Frame {
        let width = width.max(20);
        let height = height.max(4);
        let conv = self.current();
        let mut lines = vec![fit(
            vec![Span::new(&format!(" e2e-chat · @{} ↔ {} · /commands ", self.own, self.about_peer), Style::HEADER)],
            width,
        )];
        let keyboard = conv.reply_keyboard.as_ref().map(|k| reply_keyboard_lines(k, width)).unwrap_or_default();
        // The keyboard never takes more than half of the screen's body.
        let keyboard: Vec<Line> = keyboard.into_iter().take((height - 3) / 2).collect();
        let body_rows = height - 3 - keyboard.len();
        let mut body: Vec<Line> = Vec::new();
        for entry in &conv.entries {
            body.extend(entry_lines(conv, entry, width, tz));
        }
        let skip = body.len().saturating_sub(body_rows);
        let mut shown: Vec<Line> = body.into_iter().skip(skip).collect();
        while shown.len() < body_rows {
            shown.insert(0, Vec::new());
        }
        lines.extend(shown);
        lines.extend(keyboard);
        lines.push(fit(self.status_line(), width));
        let (input_line, column) = input_line(input, cursor, width);
        lines.push(input_line);
        Frame { lines, cursor: (height - 1, column) }
    }

    fn status_line(&self) -> Line {
        let mut spans = match &self.lost {
            None => vec![Span::new("● connected", Style::OK)],
            Some(why) => vec![Span::new(&format!("○ connection lost ({}), reconnecting…", sanitize(why)), Style::ALERT)],
        };
        let unread: Vec<String> = self
            .convs
            .iter()
            .enumerate()
            .filter(|(i, c)| *i != self.current && c.unread > 0)
            .map(|(_, c)| format!("{} ({})", c.name, c.unread))
            .collect();
        if !unread.is_empty() {
            spans.push(Span::new(&format!("  unread: {}  /switch NAME", unread.join(", ")), Style::NOTE));
        }
        if let Some(hint) = &self.hint {
            spans.push(Span::new(&format!("  {}", sanitize(hint)), Style::DIM));
        }
        spans
    }
}

/// A reply keyboard as drawn above the status line: a title line, then its rows of numbered
/// buttons (what a typed number uses).
fn reply_keyboard_lines(k: &ReplyKeyboard, width: usize) -> Vec<Line> {
    let once = if k.one_time { ", one-time" } else { "" };
    let hint = if k.placeholder.is_empty() { String::new() } else { format!(" · {}", sanitize(&k.placeholder)) };
    let mut out = vec![fit(vec![Span::new(&format!("⌨ type a button's number or /choose N{once}{hint}"), Style::DIM)], width)];
    for row in display::reply_keyboard_rows(k) {
        out.extend(wrap(vec![Span::new("  ", Style::PLAIN), Span::new(&row, Style::BUTTON)], width, 2));
    }
    out
}

/// A message's text as the screen shows it: a file's `[kind name]` and its caption (entities
/// shifted with it), a location, contact, dice or poll in words, or the text.
pub fn shown_text(m: &ReceivedMessage) -> (String, Vec<Entity>) {
    match &m.media {
        Some(media) => {
            let label = format!("[{} {}] ", media.kind.name(), media.file_name);
            let shift = label.encode_utf16().count() as u32;
            let entities = media.caption_entities.iter().map(|e| Entity { offset: e.offset + shift, ..e.clone() }).collect();
            (format!("{label}{}", media.caption), entities)
        }
        None => match &m.shared {
            Some(shared) => (crate::client::display::shared_text(shared), Vec::new()),
            None => (m.text.clone(), m.entities.clone()),
        },
    }
}

/// A message we sent, as remembered: no sender shown, sent.
fn own(m: &ReceivedMessage) -> Message {
    Message { from: None, state: Some(SendState::Sent), ..received(m) }
}

fn received(m: &ReceivedMessage) -> Message {
    let (text, entities) = shown_text(m);
    let mut about = Vec::new();
    if let Some(o) = &m.forward_origin {
        about.push(format!("forwarded from {}", crate::client::display::forward_source(o)));
    }
    if let Some(ReplyMarkup::ForceReply { placeholder }) = &m.reply_markup {
        let hint = if placeholder.is_empty() { String::new() } else { format!(": {placeholder}") };
        about.push(format!("asks for an answer; your next message replies to it{hint}"));
    }
    let name = if m.sender.username.is_empty() { format!("user{}", m.sender.user_id) } else { format!("@{}", m.sender.username) };
    Message {
        id: Some(m.message_id),
        queued: None,
        from: Some(name),
        text,
        entities,
        reply_to: m.reply_to_message_id,
        keyboard: m.keyboard.clone(),
        about,
        state: None,
        edited: false,
        deleted: false,
        media: m.media.clone(),
        shared: m.shared.clone(),
        voted: Vec::new(),
    }
}

/// The lines of one entry, wrapped to `width`.
fn entry_lines(conv: &Conversation, entry: &Entry, width: usize, tz: &dyn Fn(i64) -> String) -> Vec<Line> {
    match entry {
        Entry::Note { time, text, style } => {
            let mut first = vec![Span::new(&format!("{} ", tz(*time)), Style::DIM)];
            first.push(Span::new(&text.replace('\n', " · "), *style));
            wrap(first, width, 6)
        }
        Entry::Message { time, message: m } => {
            let mut out = Vec::new();
            if let Some(r) = m.reply_to {
                let quote = match conv.message(r) {
                    Some(q) => format!("┃ {}: {}", q.from.clone().unwrap_or_else(|| "you".into()), first_line(&q.text)),
                    None => format!("┃ reply to #{r}"),
                };
                out.push(fit(vec![Span::new("      ", Style::PLAIN), Span::new(&sanitize(&quote), Style::DIM)], width));
            }
            let mut spans = vec![Span::new(&format!("{} ", tz(*time)), Style::DIM)];
            match &m.from {
                Some(name) => spans.push(Span::new(&format!("{}: ", sanitize(name)), Style::PEER)),
                None => spans.push(Span::new("you: ", Style::OWN)),
            }
            let body = styled_body(&m.text, &m.entities, m.deleted);
            for (i, line) in body.into_iter().enumerate() {
                if i > 0 {
                    out.extend(wrap(spans, width, 6));
                    spans = vec![Span::new("      ", Style::PLAIN)];
                }
                spans.extend(line);
            }
            if let Some(id) = m.id {
                spans.push(Span::new(&format!(" #{id}"), Style::DIM));
            }
            if m.edited && !m.deleted {
                spans.push(Span::new(" (edited)", Style::DIM));
            }
            if m.deleted {
                spans.push(Span::new(" (deleted)", Style::DIM));
            }
            match &m.state {
                Some(SendState::Pending) => spans.push(Span::new(" ⧗ sending", Style::DIM)),
                Some(SendState::Waiting) => spans.push(Span::new(" ⧗ waiting for the platform", Style::NOTE)),
                Some(SendState::Sent) => spans.push(Span::new(" ✓", Style::OK)),
                Some(SendState::Failed(why)) => spans.push(Span::new(&format!(" ✗ not sent: {}", sanitize(why)), Style::ALERT)),
                None => {}
            }
            out.extend(wrap(spans, width, 6));
            if !m.about.is_empty() {
                out.push(fit(vec![Span::new(&format!("      {}", sanitize(&m.about.join(" · "))), Style::DIM)], width));
            }
            let mut number = 0;
            for row in &m.keyboard {
                let mut spans = vec![Span::new("      ", Style::PLAIN)];
                for b in row {
                    number += 1;
                    spans.push(Span::new(&format!("[{number} {}]", sanitize(&b.text)), Style::BUTTON));
                    spans.push(Span::new(" ", Style::PLAIN));
                }
                out.extend(wrap(spans, width, 6));
            }
            out
        }
    }
}

fn first_line(text: &str) -> String {
    let line = text.split('\n').next().unwrap_or("");
    let mut out: String = line.chars().take(60).collect();
    if line.chars().count() > 60 || text.contains('\n') {
        out.push('…');
    }
    out
}

/// The body's lines, each a run of spans styled by the entities that cover its characters
/// (offsets in UTF-16 units, as on the wire). A `text_link` is followed by its address.
fn styled_body(text: &str, entities: &[Entity], deleted: bool) -> Vec<Line> {
    let mut lines: Vec<Line> = vec![Vec::new()];
    let mut offset = 0u32;
    for c in text.chars() {
        let units = c.len_utf16() as u32;
        let mut style = Style::PLAIN;
        for e in entities.iter().filter(|e| e.offset <= offset && offset < e.offset + e.length) {
            style = style.with(entity_style(&e.kind));
        }
        if deleted {
            style = style.with(Style::STRIKE);
        }
        if c == '\n' {
            lines.push(Vec::new());
        } else {
            push_span(lines.last_mut().expect("a line"), &sanitize(&c.to_string()), style);
        }
        offset += units;
        // After the last character of a text link: its address.
        for e in entities.iter().filter(|e| e.kind == "text_link" && e.offset + e.length == offset) {
            if let Some(url) = &e.url {
                push_span(lines.last_mut().expect("a line"), &format!(" <{}>", sanitize(url)), Style::DIM);
            }
        }
    }
    lines
}

fn entity_style(kind: &str) -> Style {
    match kind {
        "bold" => Style::BOLD,
        "italic" => Style::ITALIC,
        "underline" => Style::UNDERLINE,
        "strikethrough" => Style::STRIKE,
        "code" | "pre" => Style::CODE,
        "url" | "text_link" | "email" | "mention" | "text_mention" => Style::LINK,
        "spoiler" => Style::DIM,
        _ => Style::PLAIN,
    }
}

fn push_span(line: &mut Line, text: &str, style: Style) {
    match line.last_mut() {
        Some(last) if last.style == style => last.text.push_str(text),
        _ => line.push(Span::new(text, style)),
    }
}

/// Display width of text (wide characters count two).
fn width_of(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `spans` cut to `width` columns (an ellipsis where cut).
fn fit(spans: Line, width: usize) -> Line {
    if spans.iter().map(|s| width_of(&s.text)).sum::<usize>() <= width {
        return spans;
    }
    let mut out = Vec::new();
    let mut used = 0;
    for span in spans {
        let mut text = String::new();
        for c in span.text.chars() {
            let w = c.width().unwrap_or(0);
            if used + w + 1 > width {
                text.push('…');
                out.push(Span { text, style: span.style });
                return out;
            }
            used += w;
            text.push(c);
        }
        out.push(Span { text, style: span.style });
    }
    out
}

/// `spans` wrapped to `width` columns at spaces where it can (a word longer than a line is
/// cut); later lines start `indent` columns in.
fn wrap(spans: Line, width: usize, indent: usize) -> Vec<Line> {
    let cells: Vec<(char, Style)> = spans.iter().flat_map(|s| s.text.chars().map(move |c| (c, s.style))).collect();
    let mut lines: Vec<Vec<(char, Style)>> = vec![Vec::new()];
    let mut used = 0;
    // In the current line: where the words after its last space begin (after the indent).
    let mut after_space: Option<usize> = None;
    // Never break inside the first `indent` columns (the time, or the indent itself).
    let start = indent;
    for (c, style) in cells {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            let line = lines.last_mut().expect("a line");
            let carried: Vec<(char, Style)> = match after_space {
                Some(at) if at > start && at < line.len() => line.split_off(at),
                _ => Vec::new(),
            };
            let mut next: Vec<(char, Style)> = std::iter::repeat_n((' ', Style::PLAIN), indent).collect();
            used = indent + carried.iter().map(|(c, _)| c.width().unwrap_or(0)).sum::<usize>();
            next.extend(carried);
            lines.push(next);
            after_space = None;
        }
        let line = lines.last_mut().expect("a line");
        line.push((c, style));
        used += w;
        if c == ' ' {
            after_space = Some(line.len());
        }
    }
    lines
        .into_iter()
        .map(|cells| {
            let mut line = Vec::new();
            for (c, style) in cells {
                push_span(&mut line, &c.to_string(), style);
            }
            line
        })
        .collect()
}

/// The input line (`> ` and what is typed), scrolled so the cursor shows; and the cursor's
/// column.
fn input_line(input: &str, cursor: usize, width: usize) -> (Line, usize) {
    const PROMPT: &str = "> ";
    let chars: Vec<char> = input.chars().collect();
    let room = width.saturating_sub(PROMPT.len() + 1).max(1);
    let shown: Vec<String> = chars.iter().map(|c| sanitize(&c.to_string())).collect();
    let before: usize = shown[..cursor.min(shown.len())].iter().map(|s| width_of(s)).sum();
    // Scroll so the cursor is on screen: drop whole characters from the left.
    let mut start = 0;
    let mut left = before;
    while left > room && start < shown.len() {
        left -= width_of(&shown[start]);
        start += 1;
    }
    let mut text = String::new();
    let mut used = 0;
    for s in &shown[start..] {
        if used + width_of(s) > room {
            break;
        }
        used += width_of(s);
        text.push_str(s);
    }
    (vec![Span::new(PROMPT, Style::OWN), Span::new(&text, Style::PLAIN)], PROMPT.len() + left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::message::Button;

    fn utc(t: i64) -> String {
        format!("{:02}:{:02}", (t / 3600) % 24, (t / 60) % 60)
    }

    fn text_of(frame: &Frame) -> Vec<String> {
        frame.lines.iter().map(|l| l.iter().map(|s| s.text.as_str()).collect::<String>()).collect()
    }

    fn message(id: u64, text: &str) -> ReceivedMessage {
        ReceivedMessage { date: 3600 * 9 + 60 * 5, ..ReceivedMessage::sample("bot", id, text) }
    }

    #[test]
    fn a_reply_keyboard_is_drawn_above_the_status_line_until_it_goes() {
        use crate::client::reply_keyboard::{ButtonRequest, ReplyButton};
        let mut v = view();
        let mut m = message(3, "Colour?");
        let button = |t: &str, request| ReplyButton { text: t.into(), request };
        m.reply_markup = Some(ReplyMarkup::Keyboard(ReplyKeyboard {
            rows: vec![vec![button("Red", ButtonRequest::Text), button("Here", ButtonRequest::Location)]],
            one_time: true,
            resize: true,
            persistent: false,
            placeholder: "Pick\u{1b}".into(),
        }));
        v.incoming(&Incoming::Message(m), "bot", 0);
        let lines = text_of(&v.render(60, 12, "", 0, &utc));
        let status = lines.iter().position(|l| l.starts_with("● connected")).expect("status line");
        assert_eq!(lines[status - 2], "⌨ type a button's number or /choose N, one-time · Pick\\e");
        assert_eq!(lines[status - 1], "  (1 Red) (2 Here ⌖)");
        v.set_reply_keyboard(&ChatKey::User(7), None);
        let lines = text_of(&v.render(60, 12, "", 0, &utc));
        assert!(!lines.iter().any(|l| l.contains("(1 Red)")), "{lines:?}");
        // A removal in a later message takes it away too.
        let mut again = message(4, "Colour?");
        again.reply_markup = Some(ReplyMarkup::Keyboard(ReplyKeyboard {
            rows: vec![vec![button("Blue", ButtonRequest::Text)]],
            one_time: false,
            resize: false,
            persistent: false,
            placeholder: String::new(),
        }));
        v.incoming(&Incoming::Message(again), "bot", 0);
        assert!(text_of(&v.render(60, 12, "", 0, &utc)).iter().any(|l| l == "  (1 Blue)"));
        let mut bye = message(5, "Bye");
        bye.reply_markup = Some(ReplyMarkup::Remove);
        v.incoming(&Incoming::Message(bye), "bot", 0);
        assert!(!text_of(&v.render(60, 12, "", 0, &utc)).iter().any(|l| l.contains("(1 Blue)")));
    }

    fn view() -> View {
        View::new("alice", ChatKey::User(7), "@bot", "bot @bot (Bot)")
    }

    #[test]
    fn a_typed_line_shows_once_pending_then_sent_in_place() {
        let mut v = view();
        v.typed(1, "hello", None, 0);
        let pending = text_of(&v.render(60, 8, "", 0, &utc));
        assert_eq!(pending.iter().filter(|l| l.contains("you: hello")).count(), 1);
        assert!(pending.iter().any(|l| l.contains("you: hello ⧗ sending")), "{pending:?}");
        v.settle(1, SendState::Sent, Some(12));
        let sent = text_of(&v.render(60, 8, "", 0, &utc));
        assert_eq!(sent.iter().filter(|l| l.contains("you: hello")).count(), 1);
        assert!(sent.iter().any(|l| l.contains("you: hello #12 ✓")), "{sent:?}");
    }

    #[test]
    fn our_own_edit_changes_our_line_in_place_and_never_the_peers() {
        let mut v = view();
        v.incoming(&Incoming::Message(message(3, "theirs")), "bot", 0);
        v.typed(1, "helo", None, 0);
        v.settle(1, SendState::Sent, Some(4));
        assert!(v.edited_own(4, "hello"));
        let shown = text_of(&v.render(60, 8, "", 0, &utc));
        assert!(shown.iter().any(|l| l.contains("you: hello #4") && l.contains("(edited)")), "{shown:?}");
        assert!(!shown.iter().any(|l| l.contains("helo")), "{shown:?}");
        assert!(!v.edited_own(3, "mine now"), "the peer's message is not ours");
        assert!(!v.edited_own(9, "x"), "not shown");
    }

    /// A message the platform delivered after a later one of the same conversation is shown
    /// where its sender sent it (by the id it vouches for).
    #[test]
    fn a_message_delivered_late_is_shown_in_its_senders_order() {
        let mut v = view();
        for (id, text) in [(5, "one"), (7, "three"), (6, "two")] {
            v.incoming(&Incoming::Message(message(id, text)), "bot", 0);
        }
        let shown: Vec<String> = text_of(&v.render(60, 10, "", 0, &utc)).into_iter().filter(|l| l.contains("@bot:")).collect();
        assert_eq!(shown, ["09:05 @bot: one #5", "09:05 @bot: two #6", "09:05 @bot: three #7"]);
    }

    #[test]
    fn edits_change_a_message_in_place_and_deletions_strike_it() {
        let mut v = view();
        let mut m = message(3, "Sure?");
        m.keyboard = vec![vec![Button { text: "Yes".into(), callback_data: "y".into(), ..Default::default() }]];
        v.incoming(&Incoming::Message(m), "bot", 0);
        let shown = text_of(&v.render(60, 8, "", 0, &utc));
        assert!(shown.iter().any(|l| l == "09:05 @bot: Sure? #3"), "{shown:?}");
        assert!(shown.iter().any(|l| l.contains("[1 Yes]")));
        let edit = Incoming::Edited {
            chat_id: 7,
            message_id: 3,
            edit_date: 0,
            text: "Thanks".into(),
            entities: vec![],
            keyboard: vec![],
            shared: None,
        };
        v.incoming(&edit, "bot", 0);
        let shown = text_of(&v.render(60, 8, "", 0, &utc));
        assert!(shown.iter().any(|l| l == "09:05 @bot: Thanks #3 (edited)"), "{shown:?}");
        assert!(!shown.iter().any(|l| l.contains("Sure?") || l.contains("[1 Yes]")));
        v.incoming(&Incoming::Deleted { chat_id: 7, message_id: 3 }, "bot", 0);
        let frame = v.render(60, 8, "", 0, &utc);
        let body = frame.lines.iter().flatten().find(|s| s.text.contains("Thanks")).expect("still shown");
        assert!(body.style.strike, "struck through");
        assert!(text_of(&frame).iter().any(|l| l.ends_with("(deleted)")));
    }

    #[test]
    fn entities_style_the_text_and_links_show_their_address() {
        let mut m = message(4, "bold it link");
        m.entities = vec![Entity::new("bold", 0, 4), Entity::new("italic", 5, 2), Entity { url: Some("https://e.x/\u{1b}".into()), ..Entity::new("text_link", 8, 4) }];
        let mut v = view();
        v.incoming(&Incoming::Message(m), "bot", 0);
        let frame = v.render(80, 8, "", 0, &utc);
        let spans: Vec<&Span> = frame.lines.iter().flatten().collect();
        assert!(spans.iter().any(|s| s.text == "bold" && s.style.bold));
        assert!(spans.iter().any(|s| s.text == "it" && s.style.italic));
        assert!(spans.iter().any(|s| s.text == "link" && s.style.underline));
        assert!(text_of(&frame).iter().any(|l| l.contains("link <https://e.x/\\e>")), "{:?}", text_of(&frame));
    }

    #[test]
    fn a_dialog_opens_with_what_the_profile_remembers_once() {
        let mut v = view();
        v.note("help", Style::DIM, 0);
        let earlier = vec![(false, message(1, "before")), (true, message(2, "mine"))];
        v.load_history(&ChatKey::User(7), "@bot", &earlier);
        v.load_history(&ChatKey::User(7), "@bot", &earlier);
        let shown = text_of(&v.render(60, 10, "", 0, &utc));
        let at = |needle: &str| shown.iter().position(|l| l.contains(needle));
        assert_eq!(shown.iter().filter(|l| l.contains("before")).count(), 1, "loaded once: {shown:?}");
        assert!(at("@bot: before") < at("you: mine #2 ✓") && at("you: mine") < at("help"), "{shown:?}");
    }

    #[test]
    fn replies_quote_one_line_and_unread_counts_other_conversations() {
        let mut v = view();
        v.incoming(&Incoming::Message(message(5, "first line\nsecond")), "bot", 0);
        let mut reply = message(6, "answer");
        reply.reply_to_message_id = Some(5);
        v.incoming(&Incoming::Message(reply), "bot", 0);
        let shown = text_of(&v.render(60, 10, "", 0, &utc));
        assert!(shown.iter().any(|l| l.trim_start() == "┃ @bot: first line…"), "{shown:?}");
        let mut other = message(1, "psst");
        other.chat_id = 9;
        other.sender.username = "bob".into();
        v.incoming(&Incoming::Message(other.clone()), "bob", 0);
        v.incoming(&Incoming::Message(other), "bob", 0);
        let shown = text_of(&v.render(80, 10, "", 0, &utc));
        assert!(shown[8].contains("unread: @bob (2)"), "{shown:?}");
        assert!(!shown.iter().any(|l| l.contains("psst")), "not in this conversation");
        v.open(ChatKey::User(9), "@bob", "@bob");
        let shown = text_of(&v.render(80, 10, "", 0, &utc));
        assert!(shown.iter().any(|l| l.contains("@bob: psst")) && !shown[8].contains("unread"), "{shown:?}");
    }

    #[test]
    fn the_banner_and_the_input_fit_the_width() {
        let mut v = View::new("alice", ChatKey::User(7), "@bot", &"bot @a_very_long_bot_name (".repeat(5));
        v.set_hint(Some("press Ctrl-D or type /quit to leave".into()));
        let frame = v.render(30, 6, &"x".repeat(100), 100, &utc);
        for line in text_of(&frame) {
            assert!(width_of(&line) <= 30, "{line:?} is wider than 30");
        }
        assert_eq!(frame.lines.len(), 6);
        assert!(frame.cursor.0 == 5 && frame.cursor.1 <= 30);
        assert!(text_of(&frame)[0].ends_with('…'));
    }

    #[test]
    fn long_lines_wrap_between_words() {
        let lines = wrap(vec![Span::new("12:00 @bot: one two three four five", Style::PLAIN)], 20, 6);
        let text: Vec<String> = lines.iter().map(|l| l.iter().map(|s| s.text.as_str()).collect()).collect();
        assert_eq!(text, ["12:00 @bot: one two ", "      three four ", "      five"]);
        let long = wrap(vec![Span::new("x".repeat(25).as_str(), Style::PLAIN)], 10, 2);
        assert_eq!(long.len(), 3, "a word longer than a line is cut");
        assert!(long.iter().all(|l| width_of(&l.iter().map(|s| s.text.as_str()).collect::<String>()) <= 10));
    }

    #[test]
    fn network_text_is_sanitized_everywhere() {
        let mut v = view();
        let mut m = message(8, "\u{1b}[2Jboom\u{7}");
        m.sender.username = "ev\u{1b}il".into();
        v.incoming(&Incoming::Message(m), "bot", 0);
        for line in text_of(&v.render(60, 8, "", 0, &utc)) {
            assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        }
    }
}
