//! HTML `parse_mode`: TDLib's `parse_html` (see the `text` module note for the differences).

use super::{at, checked_link, is_space, utf16_units, Kind, MarkupError, Parsed, Span};

/// `&lt;` `&gt;` `&amp;` `&quot;` and numeric references at `pos`; advances `pos` past it.
fn decode_html_entity(t: &[u8], pos: &mut usize) -> Option<u32> {
    let p = *pos;
    let mut end = p + 1;
    let mut res: u32 = 0;
    if at(t, p + 1) == b'#' {
        end += 1;
        if at(t, p + 2) == b'x' {
            end += 1;
            while at(t, end).is_ascii_hexdigit() {
                res = res.saturating_mul(16).saturating_add((at(t, end) as char).to_digit(16).unwrap_or(0));
                end += 1;
            }
        } else {
            while at(t, end).is_ascii_digit() {
                res = res.saturating_mul(10).saturating_add((at(t, end) - b'0') as u32);
                end += 1;
            }
        }
        if res == 0 || res >= 0x10ffff || end - p >= 10 {
            return None;
        }
    } else {
        while at(t, end).is_ascii_alphabetic() {
            end += 1;
        }
        res = match &t[p + 1..end] {
            b"lt" => '<' as u32,
            b"gt" => '>' as u32,
            b"amp" => '&' as u32,
            b"quot" => '"' as u32,
            _ => return None,
        };
    }
    *pos = if at(t, end) == b';' { end + 1 } else { end };
    Some(res)
}

fn push_code_point(out: &mut Vec<u8>, code: u32) -> Result<(), MarkupError> {
    let c = char::from_u32(code).ok_or(MarkupError::InvalidUnicode)?;
    let mut buf = [0u8; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    Ok(())
}

const HTML_TAGS: &[&str] = &[
    "a",
    "b",
    "strong",
    "i",
    "em",
    "s",
    "strike",
    "del",
    "u",
    "ins",
    "tg-spoiler",
    "tg-emoji",
    "span",
    "pre",
    "code",
    "blockquote",
];

struct OpenTag {
    name: String,
    argument: String,
    offset: u32,
    begin: usize,
    /// Opened inside an `<a>` (see the `text` module note on nested links).
    inside_link: bool,
}

pub(super) fn parse_html(t: &[u8]) -> Parsed {
    let mut out = Vec::with_capacity(t.len());
    let mut spans: Vec<Span> = Vec::new();
    let mut utf16 = 0u32;
    let mut open: Vec<OpenTag> = Vec::new();
    let mut i = 0usize;
    while i < t.len() {
        let c = t[i];
        if c == b'&' {
            let mut p = i;
            if let Some(code) = decode_html_entity(t, &mut p) {
                utf16 += if code > 0xffff { 2 } else { 1 };
                push_code_point(&mut out, code)?;
                i = p;
                continue;
            }
        }
        if c != b'<' {
            utf16 += utf16_units(c);
            out.push(c);
            i += 1;
            continue;
        }
        let begin = i;
        i += 1;
        if at(t, i) != b'/' {
            // A start tag.
            while !is_space(at(t, i)) && at(t, i) != b'>' {
                i += 1;
            }
            if at(t, i) == 0 {
                return Err(MarkupError::UnclosedStartTag { at: begin });
            }
            let name = String::from_utf8_lossy(&t[begin + 1..i]).to_lowercase();
            if !HTML_TAGS.contains(&name.as_str()) {
                return Err(MarkupError::UnsupportedStartTag { tag: name, at: begin });
            }
            let mut argument = String::new();
            while at(t, i) != b'>' {
                while at(t, i) != 0 && is_space(at(t, i)) {
                    i += 1;
                }
                if at(t, i) == b'>' {
                    break;
                }
                let attr_begin = i;
                while !is_space(at(t, i)) && !matches!(at(t, i), b'=' | b'>' | b'/' | b'"' | b'\'') {
                    i += 1;
                }
                let attr = String::from_utf8_lossy(&t[attr_begin..i]).to_string();
                if attr.is_empty() {
                    return Err(MarkupError::EmptyAttributeName { tag: name, at: begin });
                }
                while at(t, i) != 0 && is_space(at(t, i)) {
                    i += 1;
                }
                if at(t, i) != b'=' {
                    if at(t, i) == 0 {
                        return Err(MarkupError::UnclosedNamedStartTag { tag: name, at: begin });
                    }
                    if name == "blockquote" && attr == "expandable" {
                        argument = "1".into();
                    }
                    continue;
                }
                i += 1;
                while at(t, i) != 0 && is_space(at(t, i)) {
                    i += 1;
                }
                if at(t, i) == 0 {
                    return Err(MarkupError::UnclosedNamedStartTag { tag: name, at: begin });
                }
                let value = if at(t, i) != b'\'' && at(t, i) != b'"' {
                    let token_begin = i;
                    while at(t, i).is_ascii_alphanumeric() || matches!(at(t, i), b'.' | b'-') {
                        i += 1;
                    }
                    let v = String::from_utf8_lossy(&t[token_begin..i]).to_lowercase();
                    if !is_space(at(t, i)) && at(t, i) != b'>' {
                        return Err(MarkupError::UnexpectedEndOfNameToken { at: token_begin });
                    }
                    v
                } else {
                    let quote = t[i];
                    i += 1;
                    let mut v = Vec::new();
                    while at(t, i) != quote && at(t, i) != 0 {
                        if t[i] == b'&' {
                            let mut p = i;
                            if let Some(code) = decode_html_entity(t, &mut p) {
                                push_code_point(&mut v, code)?;
                                i = p;
                                continue;
                            }
                        }
                        v.push(t[i]);
                        i += 1;
                    }
                    if at(t, i) == quote {
                        i += 1;
                    }
                    String::from_utf8_lossy(&v).to_string()
                };
                if at(t, i) == 0 {
                    return Err(MarkupError::UnclosedStartTag { at: begin });
                }
                match (name.as_str(), attr.as_str()) {
                    ("a", "href") | ("tg-emoji", "emoji-id") => argument = value,
                    ("code", "class") if value.starts_with("language-") => {
                        argument = value["language-".len()..].to_string()
                    }
                    ("span", "class") if value.starts_with("tg-") => argument = value["tg-".len()..].to_string(),
                    ("blockquote", "expandable") => argument = "1".into(),
                    _ => {}
                }
            }
            if name == "span" && argument != "spoiler" {
                return Err(MarkupError::SpanWithoutSpoilerClass { at: begin });
            }
            let inside_link = open.last().is_some_and(|o| o.name == "a" || o.inside_link);
            open.push(OpenTag { name, argument, offset: utf16, begin: out.len(), inside_link });
            i += 1; // the '>'
        } else {
            // An end tag.
            let Some(top) = open.pop() else {
                return Err(MarkupError::UnexpectedEndTag { at: begin });
            };
            while !is_space(at(t, i)) && at(t, i) != b'>' {
                i += 1;
            }
            let end_name = String::from_utf8_lossy(&t[begin + 2..i]).to_lowercase();
            while is_space(at(t, i)) && at(t, i) != 0 {
                i += 1;
            }
            if at(t, i) != b'>' {
                return Err(MarkupError::UnclosedEndTag { at: begin });
            }
            if !end_name.is_empty() && end_name != top.name {
                return Err(MarkupError::UnmatchedEndTag { at: begin, expected: top.name, found: end_name });
            }
            i += 1; // the '>'
            if utf16 > top.offset {
                close_html_tag(&mut spans, top, utf16, &out)?;
            }
        }
    }
    if let Some(top) = open.last() {
        return Err(MarkupError::MissingEndTag { tag: top.name.clone() });
    }
    for s in &mut spans {
        if s.kind == Kind::Code {
            s.argument.clear();
        }
    }
    Ok((out, spans))
}

fn close_html_tag(spans: &mut Vec<Span>, top: OpenTag, utf16: u32, out: &[u8]) -> Result<(), MarkupError> {
    let offset = top.offset;
    let length = utf16 - offset;
    let plain = |kind| Span { kind, offset, length, argument: String::new() };
    match top.name.as_str() {
        "i" | "em" => spans.push(plain(Kind::Italic)),
        "b" | "strong" => spans.push(plain(Kind::Bold)),
        "s" | "strike" | "del" => spans.push(plain(Kind::Strikethrough)),
        "u" | "ins" => spans.push(plain(Kind::Underline)),
        "tg-spoiler" | "span" => spans.push(plain(Kind::Spoiler)),
        "tg-emoji" => {
            if top.argument.parse::<i64>().map_or(true, |id| id == 0) {
                return Err(MarkupError::InvalidCustomEmojiId);
            }
            spans.push(plain(Kind::CustomEmoji));
        }
        "a" if top.inside_link => {}
        "a" => {
            let url = if top.argument.is_empty() {
                String::from_utf8_lossy(&out[top.begin..]).to_string()
            } else {
                top.argument
            };
            if let Some(url) = checked_link(&url) {
                spans.push(Span { kind: Kind::TextUrl, offset, length, argument: url });
            }
        }
        "pre" => match spans.last_mut() {
            Some(last)
                if last.kind == Kind::Code
                    && last.offset == offset
                    && last.length == length
                    && !last.argument.is_empty() =>
            {
                last.kind = Kind::PreCode;
            }
            _ => spans.push(plain(Kind::Pre)),
        },
        "code" => match spans.last_mut() {
            Some(last)
                if last.kind == Kind::Pre
                    && last.offset == offset
                    && last.length == length
                    && !top.argument.is_empty() =>
            {
                last.kind = Kind::PreCode;
                last.argument = top.argument;
            }
            _ => spans.push(Span { kind: Kind::Code, offset, length, argument: top.argument }),
        },
        "blockquote" => {
            spans.push(plain(if top.argument.is_empty() { Kind::BlockQuote } else { Kind::ExpandableBlockQuote }))
        }
        other => unreachable!("tag {other} passed the start-tag check"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{e, err, ok, H};

    #[test]
    fn html_basic_tags_and_entities() {
        assert_eq!(
            ok("<b>bold</b> <I>it</I> <u>u</u> <s>s</s> <tg-spoiler>x</tg-spoiler> <span class=\"tg-spoiler\">y</span>", H),
            (
                "bold it u s x y".to_string(),
                vec![
                    e("bold", 0, 4, ""),
                    e("italic", 5, 2, ""),
                    e("underline", 8, 1, ""),
                    e("strikethrough", 10, 1, ""),
                    e("spoiler", 12, 1, ""),
                    e("spoiler", 14, 1, "")
                ]
            )
        );
        assert_eq!(
            ok("&lt;a&gt; &amp; &quot; &#128512;&#x1F600; &nbsp; a & b > c", H).0,
            "<a> & \" 😀😀 &nbsp; a & b > c"
        );
        // Offsets count UTF-16 units: the emoji is 2.
        assert_eq!(ok("😀<b>x</b>", H).1, vec![e("bold", 2, 1, "")]);
        // Empty elements produce no entity; nesting sorts outer first.
        assert_eq!(ok("<b></b>a", H), ("a".to_string(), vec![]));
        assert_eq!(ok("<i>a<b>b</b></i>", H).1, vec![e("italic", 0, 2, ""), e("bold", 1, 1, "")]);
    }

    #[test]
    fn html_links_code_and_quotes() {
        assert_eq!(
            ok("<a href=\"https://example.com\">site</a>", H).1,
            vec![e("text_link", 0, 4, "https://example.com/")]
        );
        assert_eq!(
            ok("<a href='example.com/x?a=1&amp;b=2'>s</a>", H).1,
            vec![e("text_link", 0, 1, "http://example.com/x?a=1&b=2")]
        );
        assert_eq!(ok("<a href=\"javascript:alert(1)\">x</a>", H), ("x".to_string(), vec![]));
        assert_eq!(
            ok("<pre><code class=\"language-rust\">fn main() {}</code></pre>", H).1,
            vec![e("pre", 0, 12, "rust")]
        );
        assert_eq!(
            ok("<pre>p</pre><code class=\"language-x\">c</code>", H).1,
            vec![e("pre", 0, 1, ""), e("code", 1, 1, "")]
        );
        assert_eq!(
            ok("<blockquote>q</blockquote><blockquote expandable>w</blockquote>", H).1,
            vec![e("blockquote", 0, 1, ""), e("expandable_blockquote", 1, 1, "")]
        );
        // Custom emoji keep their text but no entity.
        assert_eq!(ok("<tg-emoji emoji-id=\"5368324170671202286\">👍</tg-emoji>", H), ("👍".to_string(), vec![]));
    }

    #[test]
    fn html_errors_match_the_bot_api() {
        assert_eq!(
            err("<foo>x</foo>", H),
            "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 0"
        );
        assert_eq!(
            err("a <b>x", H),
            "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\""
        );
        assert_eq!(
            err("<b>x</i>", H),
            "Bad Request: can't parse entities: Unmatched end tag at byte offset 4, expected \"</b>\", found \"</i>\""
        );
        assert_eq!(err("x</b>", H), "Bad Request: can't parse entities: Unexpected end tag at byte offset 1");
        assert!(err("<span>x</span>", H).contains("must have class \"tg-spoiler\""));
        assert!(err("a < b", H).contains("Unsupported start tag \"\""));
        assert!(err("<b", H).contains("Unclosed start tag"));
        assert!(err("&#xD800;", H).contains("surrogate"));
    }
}
