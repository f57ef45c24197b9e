//! Percent-decoding, once for both of its uses: form values and query strings (`+` is a
//! space) and URL path segments and multipart file names (`+` stays).

/// Decodes a form value or query-string part: `%XX` escapes and `+` as a space. A `%` not
/// followed by two hex digits stays as it is.
pub fn form_decode(s: &[u8]) -> Vec<u8> {
    decode(s, true)
}

/// Percent-decodes a URL path segment (no `+` rule); `None` if the result is not UTF-8.
pub fn percent_decode_path(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_string());
    }
    String::from_utf8(decode(s.as_bytes(), false)).ok()
}

fn decode(s: &[u8], plus_is_space: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' && i + 2 < s.len() {
            if let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(if plus_is_space && s[i] == b'+' { b' ' } else { s[i] });
        i += 1;
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_decoding() {
        assert_eq!(percent_decode_path("123%3Aabc").as_deref(), Some("123:abc"));
        assert_eq!(percent_decode_path("a+b").as_deref(), Some("a+b"));
        assert_eq!(percent_decode_path("%FF"), None);
    }

    #[test]
    fn form_decoding() {
        assert_eq!(form_decode(b"a+b%2Bc"), b"a b+c");
        assert_eq!(form_decode(b"100%"), b"100%");
        assert_eq!(form_decode(b"%zz%41"), b"%zzA");
    }
}
