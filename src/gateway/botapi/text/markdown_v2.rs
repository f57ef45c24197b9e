//! MarkdownV2 `parse_mode`: TDLib's `parse_markdown_v2` (see the `text` module note for the
//! differences).

use super::{at, checked_link, is_space, skip_one_newline, utf16_units, Kind, MarkupError, Parsed, Span};

struct OpenMd {
    kind: Kind,
    argument: String,
    offset: u32,
    byte_offset: usize,
    begin: usize,
    /// Opened inside a `[...]` link (see the `text` module note on nested links).
    inside_link: bool,
}

pub(super) fn parse_markdown_v2(t: &[u8]) -> Parsed {
    let mut out = Vec::with_capacity(t.len());
    let mut spans: Vec<Span> = Vec::new();
    let mut utf16 = 0u32;
    let mut open: Vec<OpenMd> = Vec::new();
    let mut have_blockquote = false;
    let mut can_start_blockquote = true;
    let mut i = 0usize;
    while i < t.len() {
        let c = t[i];
        if c == b'\\' && (1..=126).contains(&at(t, i + 1)) {
            i += 1;
            utf16 += 1;
            out.push(t[i]);
            if t[i] != b'\r' {
                can_start_blockquote = t[i] == b'\n';
            }
            i += 1;
            continue;
        }
        let in_code = matches!(open.last().map(|o| o.kind), Some(Kind::Code | Kind::Pre | Kind::PreCode));
        let reserved_set: &[u8] = if in_code { b"`" } else { b"_*[]()~`>#+-=|{}.!\n" };
        if !reserved_set.contains(&c) {
            if utf16_units(c) > 0 {
                utf16 += utf16_units(c);
                if c != b'\r' {
                    can_start_blockquote = false;
                }
            }
            out.push(c);
            i += 1;
            continue;
        }
        let is_end = match open.last() {
            None => false,
            Some(_) if have_blockquote && c == b'\n' && (i + 1 == t.len() || t[i + 1] != b'>') => true,
            Some(top) => match top.kind {
                Kind::Bold => c == b'*',
                Kind::Italic => c == b'_' && at(t, i + 1) != b'_',
                Kind::Code => c == b'`',
                Kind::Pre | Kind::PreCode => c == b'`' && at(t, i + 1) == b'`' && at(t, i + 2) == b'`',
                Kind::TextUrl | Kind::CustomEmoji => c == b']',
                Kind::Underline => c == b'_' && at(t, i + 1) == b'_',
                Kind::Strikethrough => c == b'~',
                Kind::Spoiler => c == b'|' && at(t, i + 1) == b'|',
                Kind::BlockQuote | Kind::ExpandableBlockQuote => false,
            },
        };
        if !is_end {
            // The start of an entity (or a line break / blockquote marker).
            let byte_offset = i;
            let mut argument = String::new();
            let kind = match c {
                b'_' if at(t, i + 1) == b'_' => {
                    i += 1;
                    Kind::Underline
                }
                b'_' => Kind::Italic,
                b'*' => Kind::Bold,
                b'~' => Kind::Strikethrough,
                b'|' if at(t, i + 1) == b'|' => {
                    i += 1;
                    Kind::Spoiler
                }
                b'[' => Kind::TextUrl,
                b'`' if at(t, i + 1) == b'`' && at(t, i + 2) == b'`' => {
                    i += 3;
                    let mut kind = Kind::Pre;
                    let mut lang_end = i;
                    while !is_space(at(t, lang_end)) && at(t, lang_end) != b'`' {
                        lang_end += 1;
                    }
                    if i != lang_end && lang_end < t.len() && t[lang_end] != b'`' {
                        kind = Kind::PreCode;
                        argument = String::from_utf8_lossy(&t[i..lang_end]).to_string();
                        i = lang_end;
                    }
                    i = skip_one_newline(t, i);
                    i -= 1; // the loop step below moves past the opening marker
                    kind
                }
                b'`' => Kind::Code,
                b'!' if at(t, i + 1) == b'[' => {
                    i += 1;
                    Kind::CustomEmoji
                }
                b'\n' => {
                    utf16 += 1;
                    out.push(b'\n');
                    can_start_blockquote = true;
                    i += 1;
                    continue;
                }
                b'>' if can_start_blockquote => {
                    if have_blockquote {
                        i += 1;
                        continue;
                    }
                    have_blockquote = true;
                    Kind::BlockQuote
                }
                _ => return Err(MarkupError::Reserved(c)),
            };
            let inside_link = open.last().is_some_and(|o| o.kind == Kind::TextUrl || o.inside_link);
            open.push(OpenMd { kind, argument, offset: utf16, byte_offset, begin: out.len(), inside_link });
            i += 1;
            continue;
        }
        // The end of an entity.
        let mut kind = open.last().expect("is_end implies an open entity").kind;
        if c == b'\n' && kind != Kind::BlockQuote {
            // Only "||" right before the line break may end an expandable blockquote here.
            let top = open.last().expect("open entity");
            let ends_expandable = kind == Kind::Spoiler
                && (top.byte_offset + 2 == i || (top.byte_offset + 3 == i && out.last() == Some(&b'\r')));
            if !ends_expandable {
                return Err(MarkupError::MissingEntityEnd { kind, at: top.byte_offset });
            }
            open.pop();
            let top = open.last().expect("a spoiler closing a blockquote is inside it");
            if top.kind != Kind::BlockQuote {
                return Err(MarkupError::MissingEntityEnd { kind: top.kind, at: top.byte_offset });
            }
            kind = Kind::ExpandableBlockQuote;
        }
        let top = open.pop().expect("open entity");
        let mut argument = top.argument;
        let mut skip = utf16 == top.offset;
        match kind {
            Kind::Bold | Kind::Italic | Kind::Code | Kind::Strikethrough => {}
            Kind::Underline | Kind::Spoiler => i += 1,
            Kind::Pre | Kind::PreCode => i += 2,
            Kind::TextUrl => {
                let url = if at(t, i + 1) == b'(' {
                    i += 2;
                    read_md_url(t, &mut i, Kind::TextUrl)?
                } else if top.inside_link {
                    String::new() // dropped below; its text is not copied
                } else {
                    String::from_utf8_lossy(&out[top.begin..]).to_string()
                };
                match checked_link(&url).filter(|_| !top.inside_link) {
                    Some(u) => argument = u,
                    None => skip = true,
                }
            }
            Kind::CustomEmoji => {
                if at(t, i + 1) != b'(' {
                    return Err(MarkupError::CustomEmojiWithoutUrl);
                }
                i += 2;
                read_md_url(t, &mut i, Kind::CustomEmoji)?;
            }
            Kind::BlockQuote | Kind::ExpandableBlockQuote => {
                have_blockquote = false;
                out.push(t[i]);
                can_start_blockquote = true;
                utf16 += 1;
                skip = false;
            }
        }
        if !skip {
            spans.push(Span { kind, offset: top.offset, length: utf16 - top.offset, argument });
        }
        i += 1;
    }
    if have_blockquote {
        let mut kind = Kind::BlockQuote;
        if let Some(top) = open.last() {
            if top.kind == Kind::Spoiler && top.byte_offset + 2 == t.len() {
                open.pop();
                kind = Kind::ExpandableBlockQuote;
            }
        }
        if open.last().is_some_and(|o| o.kind == Kind::BlockQuote) {
            let top = open.pop().expect("checked");
            if utf16 > top.offset {
                spans.push(Span { kind, offset: top.offset, length: utf16 - top.offset, argument: String::new() });
            }
        }
    }
    if let Some(top) = open.last() {
        return Err(MarkupError::MissingEntityEnd { kind: top.kind, at: top.byte_offset });
    }
    Ok((out, spans))
}

/// Reads `url)` (with `\` escapes) of a link or custom emoji (`of`) starting at `*i`; leaves
/// `*i` on the `)`.
fn read_md_url(t: &[u8], i: &mut usize, of: Kind) -> Result<String, MarkupError> {
    let begin = *i;
    let mut url = Vec::new();
    while *i < t.len() && t[*i] != b')' {
        if t[*i] == b'\\' && (1..=126).contains(&at(t, *i + 1)) {
            url.push(t[*i + 1]);
            *i += 2;
            continue;
        }
        url.push(t[*i]);
        *i += 1;
    }
    if at(t, *i) != b')' {
        return Err(MarkupError::UnclosedUrl { of, at: begin });
    }
    Ok(String::from_utf8_lossy(&url).to_string())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{e, err, ok, V2};

    #[test]
    fn markdown_v2_entities() {
        assert_eq!(
            ok("*bold* _it_ __u__ ~s~ ||sp|| `code`", V2),
            (
                "bold it u s sp code".to_string(),
                vec![
                    e("bold", 0, 4, ""),
                    e("italic", 5, 2, ""),
                    e("underline", 8, 1, ""),
                    e("strikethrough", 10, 1, ""),
                    e("spoiler", 12, 2, ""),
                    e("code", 15, 4, "")
                ]
            )
        );
        assert_eq!(ok("a\\.b\\!c \\*", V2).0, "a.b!c *");
        assert_eq!(
            ok("[link](https://example.com/a\\)b) [x](javascript:1)", V2),
            ("link x".to_string(), vec![e("text_link", 0, 4, "https://example.com/a)b")])
        );
        assert_eq!(ok("```rust\nfn x() {}\n```", V2), ("fn x() {}\n".to_string(), vec![e("pre", 0, 10, "rust")]));
        assert_eq!(ok("```\nplain *not bold*```", V2), ("plain *not bold*".to_string(), vec![e("pre", 0, 16, "")]));
        assert_eq!(ok("*😀 _x_*", V2).1, vec![e("bold", 0, 4, ""), e("italic", 3, 1, "")]);
        assert_eq!(ok("![👍](tg://emoji?id=5368324170671202286)", V2), ("👍".to_string(), vec![]));
    }

    #[test]
    fn markdown_v2_blockquotes() {
        assert_eq!(
            ok(">quote\n>line2\nafter", V2),
            ("quote\nline2\nafter".to_string(), vec![e("blockquote", 0, 12, "")])
        );
        assert_eq!(ok("**>a\n>b||", V2), ("a\nb".to_string(), vec![e("expandable_blockquote", 0, 3, "")]));
        assert_eq!(
            ok("**>a\n>b||\nafter", V2),
            ("a\nb\nafter".to_string(), vec![e("expandable_blockquote", 0, 4, "")])
        );
        assert!(err("a >b", V2).contains("Character '>' is reserved"));
    }

    #[test]
    fn markdown_v2_errors() {
        assert_eq!(
            err("a.b", V2),
            "Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'"
        );
        assert_eq!(
            err("*unclosed", V2),
            "Bad Request: can't parse entities: Can't find end of Bold entity at byte offset 0"
        );
        // A line break ends a blockquote, and with it every entity still open inside it.
        assert!(err(">a _b\nc_", V2).contains("Can't find end of Italic entity at byte offset 3"));
        assert_eq!(ok("x _a\nb_", V2).1, vec![e("italic", 2, 3, "")]);
        assert!(err("[a](http://x.com", V2).contains("Can't find end of a URL"));
        assert!(err("a | b", V2).contains("Character '|' is reserved"));
    }
}
