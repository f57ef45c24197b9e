//! Why `parse_mode` markup does not parse, in TDLib's words (the Bot API's `description` after
//! "Bad Request: can't parse entities: "), each with the byte offset it points at.

use std::fmt;

use super::Kind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum MarkupError {
    // ── HTML ──
    /// A `<` whose tag runs to the end of the text, name unknown yet.
    UnclosedStartTag { at: usize },
    /// A start tag `tag` that runs to the end of the text.
    UnclosedNamedStartTag { tag: String, at: usize },
    UnsupportedStartTag { tag: String, at: usize },
    EmptyAttributeName { tag: String, at: usize },
    /// An unquoted attribute value followed by something other than a space or `>`.
    UnexpectedEndOfNameToken { at: usize },
    /// `<span>` other than `<span class="tg-spoiler">`.
    SpanWithoutSpoilerClass { at: usize },
    /// An end tag with nothing open.
    UnexpectedEndTag { at: usize },
    UnclosedEndTag { at: usize },
    UnmatchedEndTag { at: usize, expected: String, found: String },
    /// A start tag still open at the end of the text.
    MissingEndTag { tag: String },
    /// A numeric reference to a surrogate (or another non-character).
    InvalidUnicode,
    /// `<tg-emoji>` without a non-zero numeric `emoji-id`.
    InvalidCustomEmojiId,
    // ── MarkdownV2 ──
    /// An unescaped reserved character.
    Reserved(u8),
    /// An entity of `kind` opened at byte `at` and never closed.
    MissingEntityEnd { kind: Kind, at: usize },
    /// `![...]` not followed by `(tg://emoji?id=...)`.
    CustomEmojiWithoutUrl,
    /// The `(url` of a link (`of` is `TextUrl`) or custom emoji without its `)`.
    UnclosedUrl { of: Kind, at: usize },
    // ── Markdown (legacy) ──
    /// An entity opened at byte `at` and never closed.
    UnclosedEntity { at: usize },
    // ── All ──
    /// The decoded text is not UTF-8 (an entity reference split a character, say).
    NotUtf8,
}

impl fmt::Display for MarkupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarkupError::UnclosedStartTag { at } => write!(f, "Unclosed start tag at byte offset {at}"),
            MarkupError::UnclosedNamedStartTag { tag, at } => write!(f, "Unclosed start tag \"{tag}\" at byte offset {at}"),
            MarkupError::UnsupportedStartTag { tag, at } => write!(f, "Unsupported start tag \"{tag}\" at byte offset {at}"),
            MarkupError::EmptyAttributeName { tag, at } => {
                write!(f, "Empty attribute name in the tag \"{tag}\" at byte offset {at}")
            }
            MarkupError::UnexpectedEndOfNameToken { at } => write!(f, "Unexpected end of name token at byte offset {at}"),
            MarkupError::SpanWithoutSpoilerClass { at } => {
                write!(f, "Tag \"span\" must have class \"tg-spoiler\" at byte offset {at}")
            }
            MarkupError::UnexpectedEndTag { at } => write!(f, "Unexpected end tag at byte offset {at}"),
            MarkupError::UnclosedEndTag { at } => write!(f, "Unclosed end tag at byte offset {at}"),
            MarkupError::UnmatchedEndTag { at, expected, found } => {
                write!(f, "Unmatched end tag at byte offset {at}, expected \"</{expected}>\", found \"</{found}>\"")
            }
            MarkupError::MissingEndTag { tag } => write!(f, "Can't find end tag corresponding to start tag \"{tag}\""),
            MarkupError::InvalidUnicode => f.write_str(
                "Text contains invalid Unicode characters after decoding HTML entities, check for unmatched surrogate code units",
            ),
            MarkupError::InvalidCustomEmojiId => f.write_str("Invalid custom emoji identifier specified"),
            MarkupError::Reserved(c) => {
                write!(f, "Character '{}' is reserved and must be escaped with the preceding '\\'", *c as char)
            }
            MarkupError::MissingEntityEnd { kind, at } => {
                write!(f, "Can't find end of {} entity at byte offset {at}", kind.tdlib_name())
            }
            MarkupError::CustomEmojiWithoutUrl => f.write_str("Custom emoji entity must contain a tg://emoji URL"),
            MarkupError::UnclosedUrl { of, at } => {
                let what = if *of == Kind::CustomEmoji { "a custom emoji URL" } else { "a URL" };
                write!(f, "Can't find end of {what} at byte offset {at}")
            }
            MarkupError::UnclosedEntity { at } => write!(f, "Can't find end of the entity starting at byte offset {at}"),
            MarkupError::NotUtf8 => f.write_str("the text is not valid UTF-8 after decoding the markup"),
        }
    }
}

impl std::error::Error for MarkupError {}
