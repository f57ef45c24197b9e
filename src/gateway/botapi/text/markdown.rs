//! Legacy Markdown `parse_mode`: TDLib's `parse_markdown` (see the `text` module note for the
//! differences).

use super::{at, checked_link, is_space, skip_one_newline, utf16_units, Kind, MarkupError, Parsed, Span};

pub(super) fn parse_markdown(t: &[u8]) -> Parsed {
    let size = t.len();
    let mut out = Vec::with_capacity(size);
    let mut spans = Vec::new();
    let mut utf16 = 0u32;
    let mut i = 0usize;
    while i < size {
        let c = t[i];
        if c == b'\\' && matches!(at(t, i + 1), b'_' | b'*' | b'`' | b'[') {
            out.push(t[i + 1]);
            utf16 += 1;
            i += 2;
            continue;
        }
        if !matches!(c, b'_' | b'*' | b'`' | b'[') {
            utf16 += utf16_units(c);
            out.push(c);
            i += 1;
            continue;
        }
        let begin = i;
        let end_char = if c == b'[' { b']' } else { c };
        let mut is_pre = false;
        let mut language = String::new();
        i += 1;
        if c == b'`' && at(t, i) == b'`' && at(t, i + 1) == b'`' {
            i += 2;
            is_pre = true;
            let mut lang_end = i;
            while !is_space(at(t, lang_end)) && at(t, lang_end) != b'`' {
                lang_end += 1;
            }
            if i != lang_end && lang_end < size && t[lang_end] != b'`' {
                language = String::from_utf8_lossy(&t[i..lang_end]).to_string();
                i = lang_end;
            }
            i = skip_one_newline(t, i);
        }
        let offset = utf16;
        while i < size && (t[i] != end_char || (is_pre && !(at(t, i + 1) == b'`' && at(t, i + 2) == b'`'))) {
            utf16 += utf16_units(t[i]);
            out.push(t[i]);
            i += 1;
        }
        if i >= size {
            return Err(MarkupError::UnclosedEntity { at: begin });
        }
        if offset != utf16 {
            let length = utf16 - offset;
            let plain = |kind| Span { kind, offset, length, argument: String::new() };
            match c {
                b'_' => spans.push(plain(Kind::Italic)),
                b'*' => spans.push(plain(Kind::Bold)),
                b'[' => {
                    let url = if at(t, i + 1) != b'(' {
                        String::from_utf8_lossy(&t[begin + 1..i]).to_string()
                    } else {
                        i += 2;
                        let start = i;
                        while i < size && t[i] != b')' {
                            i += 1;
                        }
                        String::from_utf8_lossy(&t[start..i]).to_string()
                    };
                    if let Some(url) = checked_link(&url) {
                        spans.push(Span { kind: Kind::TextUrl, offset, length, argument: url });
                    }
                }
                _ if is_pre && language.is_empty() => spans.push(plain(Kind::Pre)),
                _ if is_pre => spans.push(Span { kind: Kind::PreCode, offset, length, argument: language.clone() }),
                _ => spans.push(plain(Kind::Code)),
            }
        }
        if is_pre {
            i += 2;
        }
        i += 1;
    }
    Ok((out, spans))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{e, err, ok, V1};

    #[test]
    fn legacy_markdown() {
        assert_eq!(
            ok("*bold* _it_ `code` [t](http://x.com) \\*", V1),
            (
                "bold it code t *".to_string(),
                vec![
                    e("bold", 0, 4, ""),
                    e("italic", 5, 2, ""),
                    e("code", 8, 4, ""),
                    e("text_link", 13, 1, "http://x.com/")
                ]
            )
        );
        assert_eq!(ok("```py\nprint(1)```", V1), ("print(1)".to_string(), vec![e("pre", 0, 8, "py")]));
        assert_eq!(ok("a.b!", V1).0, "a.b!");
        assert_eq!(
            err("*bold", V1),
            "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 0"
        );
    }
}
