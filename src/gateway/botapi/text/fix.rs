//! The reference server's last pass over every formatted text a bot sends, after its markup is
//! parsed or its entities are checked (TDLib's `fix_formatted_text`):
//! - every `\r` is removed (the Bot API documents it as ignored: `___italic underline_\r__`
//!   separates an italic end from an underline end in MarkdownV2, and formatting helpers of the
//!   libraries emit it);
//! - trailing spaces and line breaks are trimmed, and leading ones up to the first entity;
//! - an entity that covers only spaces and line breaks is dropped.
//!
//! Entity offsets and lengths move with the text (UTF-16 code units).

use crate::wire::e2e::Entity;

/// Spaces and line breaks: what trimming takes away (a tab counts as a space, as in TDLib,
/// which turns it into one).
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\n' | '\t')
}

/// `text` and `entities` after the reference's pass (module doc). The entities must be valid
/// for `text` (checked before).
pub fn fix_formatted(text: &str, entities: Vec<Entity>) -> (String, Vec<Entity>) {
    // Each kept character with its UTF-16 offset in `text`.
    let mut kept: Vec<(char, u32)> = Vec::with_capacity(text.len());
    let mut units = 0u32;
    for c in text.chars() {
        if c != '\r' {
            kept.push((c, units));
        }
        units += c.len_utf16() as u32;
    }
    let total = units;
    // The trim: the first and last kept characters that stay. Leading blanks go only up to the
    // first entity (a block that starts with a line break keeps it).
    let first_entity = entities.iter().map(|e| e.offset).min().unwrap_or(total);
    let start = kept.iter().position(|&(c, at)| !is_blank(c) || at >= first_entity).unwrap_or(kept.len());
    let end = kept.iter().rposition(|&(c, _)| !is_blank(c)).map_or(start, |i| i + 1).max(start);
    let kept = &kept[start..end];
    // Old UTF-16 offset → new one, for the ends of entities: the number of kept units before it.
    let new_offset = |old: u32| -> u32 {
        let i = kept.partition_point(|&(_, at)| at < old);
        kept[..i].iter().map(|&(c, _)| c.len_utf16() as u32).sum()
    };
    let fixed: String = kept.iter().map(|&(c, _)| c).collect();
    let fixed_units: Vec<(char, u32)> = {
        let mut at = 0;
        fixed
            .chars()
            .map(|c| {
                let here = at;
                at += c.len_utf16() as u32;
                (c, here)
            })
            .collect()
    };
    let entities = entities
        .into_iter()
        .filter_map(|mut e| {
            let (from, to) = (new_offset(e.offset), new_offset(e.offset + e.length));
            let covers_text = fixed_units.iter().any(|&(c, at)| at >= from && at < to && !is_blank(c));
            if to <= from || !covers_text {
                return None;
            }
            e.offset = from;
            e.length = to - from;
            Some(e)
        })
        .collect();
    (fixed, entities)
}

#[cfg(test)]
mod tests {
    use super::super::{parse, ParseMode};
    use super::*;

    fn entity(kind: &str, offset: u32, length: u32) -> Entity {
        Entity { type_: kind.into(), offset, length, ..Default::default() }
    }

    fn spans(entities: &[Entity]) -> Vec<(&str, u32, u32)> {
        entities.iter().map(|e| (e.type_.as_str(), e.offset, e.length)).collect()
    }

    /// The Bot API's own example: `___italic underline_\r__`, `\r` being ignored.
    #[test]
    fn a_carriage_return_separates_italic_from_underline_and_is_dropped() {
        let (text, entities) = parse("___italic underline_\r__", ParseMode::MarkdownV2).expect("parses");
        let (text, entities) = fix_formatted(&text, entities);
        assert_eq!(text, "italic underline");
        let mut got = spans(&entities);
        got.sort();
        assert_eq!(got, vec![("italic", 0, 16), ("underline", 0, 16)]);
        // Anywhere else too, and every entity after it moves back.
        let (text, entities) = fix_formatted("a\r\nb c", vec![entity("bold", 5, 1)]);
        assert_eq!((text.as_str(), spans(&entities)), ("a\nb c", vec![("bold", 4, 1)]));
    }

    #[test]
    fn blanks_at_the_ends_are_trimmed_and_entities_follow() {
        let (text, entities) = fix_formatted("  \n hello world \n ", vec![entity("bold", 4, 5), entity("italic", 10, 8)]);
        assert_eq!(text, "hello world");
        assert_eq!(spans(&entities), vec![("bold", 0, 5), ("italic", 6, 5)]);
        // Markup the same way: a bold word after a line break.
        let (text, entities) = parse("\n*bold* \n", ParseMode::MarkdownV2).expect("parses");
        let (text, entities) = fix_formatted(&text, entities);
        assert_eq!((text.as_str(), spans(&entities)), ("bold", vec![("bold", 0, 4)]));
        // Leading blanks inside the first entity stay (a code block that starts with a break).
        let (text, entities) = fix_formatted(" \ncode", vec![entity("pre", 1, 5)]);
        assert_eq!((text.as_str(), spans(&entities)), ("\ncode", vec![("pre", 0, 5)]));
        // UTF-16: a surrogate pair before the trimmed end.
        let (text, entities) = fix_formatted("🤖 ok  ", vec![entity("bold", 3, 4)]);
        assert_eq!((text.as_str(), spans(&entities)), ("🤖 ok", vec![("bold", 3, 2)]));
    }

    #[test]
    fn an_entity_of_blanks_only_is_dropped() {
        let (text, entities) = fix_formatted("a   b", vec![entity("bold", 1, 3), entity("italic", 0, 5)]);
        assert_eq!((text.as_str(), spans(&entities)), ("a   b", vec![("italic", 0, 5)]));
        let (text, entities) = fix_formatted("\r\r", vec![entity("bold", 0, 2)]);
        assert_eq!((text.as_str(), entities.len()), ("", 0));
    }
}
