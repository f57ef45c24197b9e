//! Formatted text: turns `parse_mode` markup (HTML, MarkdownV2, legacy Markdown) into plain
//! text plus MessageEntity values, offsets in UTF-16 code units.
//!
//! The rules follow the reference Bot API server, which uses TDLib's `parse_html`,
//! `parse_markdown_v2` and `parse_markdown` (td/telegram/MessageEntity.cpp): the same tags and
//! markers, the same escaping rules, the same error texts ("Can't find end of Bold entity at byte
//! offset 0", "Unsupported start tag \"foo\" at byte offset 0", ...), prefixed with
//! "Bad Request: can't parse entities: ". Differences: a link that TDLib would turn into a user
//! mention (`tg://user?id=...`) stays a `text_link`, and custom emoji (`<tg-emoji>`,
//! `![..](tg://emoji?id=..)`) keep their text but lose the entity, because the e2e `Entity`
//! cannot carry a user or an emoji id yet. A link inside another link never becomes an entity
//! (TDLib drops it later too, as text links may not nest, except when the outer link is itself
//! invalid); taking each inner link's text as its URL would copy the same text once per level
//! of nesting, quadratic work. Afterwards every text, markup or entities, goes through
//! `fix::fix_formatted`, the reference's last pass: `\r` removed, blanks at the ends trimmed.
//!
//! One file per markup language (`html`, `markdown_v2`, `markdown` for legacy Markdown), each
//! turning bytes into plain text plus spans; this module holds what they share (the span kinds,
//! the byte helpers, the one link rule) and `parse`, which sorts the spans into entities.
//! `entities` holds the MessageEntity rules: reading and checking entities a bot sends, counting
//! UTF-16 units, and the `bot_command` entity of an incoming command.

pub(crate) mod entities;
mod fix;
mod html;
mod markdown;
mod markdown_v2;
mod markup_error;

pub use fix::fix_formatted;
use html::parse_html;
use markdown::parse_markdown;
use markdown_v2::parse_markdown_v2;
use markup_error::MarkupError;

use super::ApiError;
use crate::wire::e2e::Entity;

/// A `parse_mode` value (names are case-insensitive, as in the Bot API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseMode {
    Html,
    MarkdownV2,
    Markdown,
}

impl ParseMode {
    pub fn from_name(name: &str) -> Option<ParseMode> {
        match name.to_ascii_lowercase().as_str() {
            "html" => Some(ParseMode::Html),
            "markdownv2" => Some(ParseMode::MarkdownV2),
            "markdown" => Some(ParseMode::Markdown),
            _ => None,
        }
    }
}

/// Parses `text` written in `mode` into plain text and entities sorted by offset (outer
/// entities first).
pub fn parse(text: &str, mode: ParseMode) -> Result<(String, Vec<Entity>), ApiError> {
    let parsed = match mode {
        ParseMode::Html => parse_html(text.as_bytes()),
        ParseMode::MarkdownV2 => parse_markdown_v2(text.as_bytes()),
        ParseMode::Markdown => parse_markdown(text.as_bytes()),
    };
    let refused = |e: MarkupError| ApiError::bad_request(format!("can't parse entities: {e}"));
    let (bytes, mut spans) = parsed.map_err(refused)?;
    let text = String::from_utf8(bytes).map_err(|_| refused(MarkupError::NotUtf8))?;
    spans.sort_by_key(|s| (s.offset, std::cmp::Reverse(s.length), s.kind.priority()));
    let entities = spans
        .into_iter()
        .filter(|s| s.length > 0)
        .filter_map(|s| {
            let name = s.kind.bot_api_name()?;
            let mut e = Entity::new();
            e.type_ = name.to_string();
            e.offset = s.offset;
            e.length = s.length;
            match s.kind {
                Kind::TextUrl => e.url = s.argument,
                Kind::PreCode => e.language = s.argument,
                _ => {}
            }
            Some(e)
        })
        .collect();
    Ok((text, entities))
}

// ── Shared pieces ──

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bold,
    Italic,
    Underline,
    Strikethrough,
    Spoiler,
    Code,
    Pre,
    PreCode,
    TextUrl,
    BlockQuote,
    ExpandableBlockQuote,
    CustomEmoji,
}

impl Kind {
    /// The name TDLib uses in error texts.
    fn tdlib_name(self) -> &'static str {
        match self {
            Kind::Bold => "Bold",
            Kind::Italic => "Italic",
            Kind::Underline => "Underline",
            Kind::Strikethrough => "Strikethrough",
            Kind::Spoiler => "Spoiler",
            Kind::Code => "Code",
            Kind::Pre => "Pre",
            Kind::PreCode => "PreCode",
            Kind::TextUrl => "TextUrl",
            Kind::BlockQuote => "BlockQuote",
            Kind::ExpandableBlockQuote => "ExpandableBlockQuote",
            Kind::CustomEmoji => "CustomEmoji",
        }
    }

    /// The MessageEntity type; `None` for what the gateway cannot carry.
    fn bot_api_name(self) -> Option<&'static str> {
        Some(match self {
            Kind::Bold => "bold",
            Kind::Italic => "italic",
            Kind::Underline => "underline",
            Kind::Strikethrough => "strikethrough",
            Kind::Spoiler => "spoiler",
            Kind::Code => "code",
            Kind::Pre | Kind::PreCode => "pre",
            Kind::TextUrl => "text_link",
            Kind::BlockQuote => "blockquote",
            Kind::ExpandableBlockQuote => "expandable_blockquote",
            Kind::CustomEmoji => return None,
        })
    }

    /// TDLib's order among entities with equal offset and length.
    fn priority(self) -> u8 {
        match self {
            Kind::BlockQuote | Kind::ExpandableBlockQuote => 0,
            Kind::PreCode => 10,
            Kind::Pre => 11,
            Kind::Code => 20,
            Kind::TextUrl => 49,
            Kind::Bold => 90,
            Kind::Italic => 91,
            Kind::Underline => 92,
            Kind::Strikethrough => 93,
            Kind::Spoiler => 94,
            Kind::CustomEmoji => 99,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Span {
    kind: Kind,
    offset: u32,
    length: u32,
    argument: String,
}

type Parsed = Result<(Vec<u8>, Vec<Span>), MarkupError>;

/// The byte at `i`, or 0 past the end (TDLib reads the C string's terminator there).
fn at(t: &[u8], i: usize) -> u8 {
    t.get(i).copied().unwrap_or(0)
}

/// TDLib's `is_space`: NUL counts, so scans stop at the end of the text.
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n' | 0 | 0x0b | 0x0c)
}

/// UTF-16 units a byte contributes: 1 for a character's first byte (2 for a 4-byte one).
fn utf16_units(c: u8) -> u32 {
    if c & 0xC0 == 0x80 {
        0
    } else if c >= 0xF0 {
        2
    } else {
        1
    }
}

/// The gateway's one link rule, TDLib's `get_checked_link` reduced: http(s) links (a missing
/// scheme means http) must parse with a host and are normalised; `tg:`, `ton:` and `tonsite:`
/// links pass as given; anything else (javascript:, data:, mailto:, ...) is refused. Markup
/// drops a refused link's entity but keeps the text (as TDLib does); a raw `text_link` entity
/// with a refused URL is a 400 (`entities::entities_from_json`).
pub(crate) fn checked_link(url: &str) -> Option<String> {
    let url = url.trim();
    if url.is_empty() || url.chars().any(|c| c.is_control() || c == ' ') {
        return None;
    }
    let lower = url.to_ascii_lowercase();
    if ["tg:", "ton:", "tonsite:"].iter().any(|s| lower.starts_with(s)) {
        return Some(url.to_string());
    }
    // "javascript:x", "mailto:a@b": a scheme without "//" (a host has a dot, so "host:port"
    // is not mistaken for one).
    if let Some((scheme, _)) = lower.split_once(':') {
        let looks_like_scheme = scheme.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-'));
        if looks_like_scheme && !matches!(scheme, "http" | "https") {
            return None;
        }
    }
    let full = if lower.contains("://") { url.to_string() } else { format!("http://{url}") };
    let parsed = url::Url::parse(&full).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return None;
    }
    Some(parsed.to_string())
}

/// Skips one line break (`\n`, `\r`, `\r\n` or `\n\r`) at `i` after a code fence.
fn skip_one_newline(t: &[u8], i: usize) -> usize {
    let c = at(t, i);
    if c == b'\n' || c == b'\r' {
        let n = at(t, i + 1);
        if (n == b'\n' || n == b'\r') && n != c {
            return i + 2;
        }
        return i + 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn ok(text: &str, mode: ParseMode) -> (String, Vec<(String, u32, u32, String)>) {
        let (t, es) = parse(text, mode).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let es = es
            .into_iter()
            .map(|e| {
                let arg = if e.type_ == "pre" { e.language.clone() } else { e.url.clone() };
                (e.type_, e.offset, e.length, arg)
            })
            .collect();
        (t, es)
    }

    pub(super) fn e(kind: &str, offset: u32, length: u32, arg: &str) -> (String, u32, u32, String) {
        (kind.to_string(), offset, length, arg.to_string())
    }

    pub(super) fn err(text: &str, mode: ParseMode) -> String {
        let e = parse(text, mode).expect_err(text);
        assert_eq!(e.status, 400);
        e.description
    }

    pub(super) const H: ParseMode = ParseMode::Html;
    pub(super) const V2: ParseMode = ParseMode::MarkdownV2;
    pub(super) const V1: ParseMode = ParseMode::Markdown;

    #[test]
    fn mode_names() {
        assert_eq!(ParseMode::from_name("HTML"), Some(H));
        assert_eq!(ParseMode::from_name("html"), Some(H));
        assert_eq!(ParseMode::from_name("MarkdownV2"), Some(V2));
        assert_eq!(ParseMode::from_name("Markdown"), Some(V1));
        assert_eq!(ParseMode::from_name("md"), None);
    }

    #[test]
    fn a_link_inside_a_link_is_dropped() {
        assert_eq!(
            ok("<a href=\"https://a.com\">x <a href=\"https://b.com\">y</a></a>", H),
            ("x y".to_string(), vec![e("text_link", 0, 3, "https://a.com/")])
        );
        assert_eq!(
            ok("<a>example.com/<b><a>y</a></b></a>", H),
            ("example.com/y".to_string(), vec![e("text_link", 0, 13, "http://example.com/y"), e("bold", 12, 1, "")])
        );
        assert_eq!(
            ok("[x [y](https://b.com)](https://a.com)", V2),
            ("x y".to_string(), vec![e("text_link", 0, 3, "https://a.com/")])
        );
    }

    #[test]
    fn deeply_nested_links_make_one_entity() {
        // Each inner link used to copy the text it encloses as its URL, which is quadratic:
        // 60,000 nested MarkdownV2 links took 16 s of CPU, 40,000 nested HTML links 6 s. Only
        // the outermost link is an entity now, so nothing is copied per level. (No timing
        // here: speed is for benchmarks; the single entity shows the copying is gone.)
        let (_, v2) = parse(&format!("{}{}", "[x".repeat(60_000), "]".repeat(60_000)), V2).expect("parses");
        let (_, html) = parse(&format!("{}{}", "<a>x".repeat(40_000), "</a>".repeat(40_000)), H).expect("parses");
        assert_eq!((v2.len(), html.len()), (1, 1), "only the outermost link is an entity");
    }

    #[test]
    fn parsed_entities_pass_validation() {
        for (text, mode) in
            [("<b>a😀</b><i>😀</i>", H), ("*a😀* _😀_ ||b||", V2), (">q\n>r", V2), ("*x* [y](example.com)", V1)]
        {
            let (t, es) = parse(text, mode).expect("parses");
            entities::validate_entities(&t, &es).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        }
    }
}
