//! Redaction of tokens in anything that may be logged. The token syntax itself is the one
//! shared parser, `crate::wire::token`.

/// A token as it may appear in logs: `123:<redacted>` when the part before `:` is digits,
/// `<redacted>` otherwise (a malformed token may still be somebody's secret).
pub fn redact_token(token: &str) -> String {
    match token.split_once(':') {
        Some((id, _)) if !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{id}:<redacted>")
        }
        _ => "<redacted>".to_string(),
    }
}

/// A request path safe to log. The query string (which may carry message text) is dropped, and
/// every path segment that could hold a token, or a piece of one, is redacted wherever it
/// stands: not only the `/bot<token>/` of a well-formed call but also a misrouted
/// `/<token>/getMe` (an SDK base URL without `/bot`), `//bot<token>`, `/Bot<token>`,
/// `/prefix/bot<token>`, or a token cut into pieces by a stray `/`. See [`may_hold_secret`].
pub fn redact_path(path: &str) -> String {
    let path = path.split('?').next().unwrap_or("");
    path.split('/').map(redact_segment).collect::<Vec<_>>().join("/")
}

/// Shortest run of hex digits treated as a piece of a secret. A token's secret is 64 hex
/// digits, so every piece of it is a run of hex digits; no Bot API method name or route word
/// has a run this long, and a shorter piece reveals at most 28 of the secret's 256 bits.
const SECRET_PIECE_HEX_RUN: usize = 8;

/// Longest segment kept when it is not made of letters only (method names are letters only).
const LONGEST_PLAIN_SEGMENT: usize = 31;

fn redact_segment(segment: &str) -> String {
    // Judge the decoded text, so `%3A` or percent-encoding every digit hides nothing; a segment
    // that does not even decode to UTF-8 is no route word.
    let Some(decoded) = crate::http::percent::percent_decode_path(segment) else {
        return "<redacted>".to_string();
    };
    let split = if decoded.len() >= 3 && decoded.is_char_boundary(3) && decoded[..3].eq_ignore_ascii_case("bot") { 3 } else { 0 };
    let (prefix, rest) = decoded.split_at(split);
    if may_hold_secret(rest) {
        format!("{prefix}{}", redact_token(rest))
    } else {
        segment.to_string()
    }
}

/// Whether a decoded path segment (after any `bot` prefix) could be a token or a piece of one:
/// it contains `:`, or a run of [`SECRET_PIECE_HEX_RUN`] hex digits, or it is longer than
/// [`LONGEST_PLAIN_SEGMENT`] and not letters only (a secret of some other shape).
fn may_hold_secret(s: &str) -> bool {
    let longest_hex_run = s
        .split(|c: char| !c.is_ascii_hexdigit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    s.contains(':')
        || longest_hex_run >= SECRET_PIECE_HEX_RUN
        || (s.chars().count() > LONGEST_PLAIN_SEGMENT && !s.chars().all(|c| c.is_ascii_alphabetic()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn redacts_paths() {
        assert_eq!(redact_path(&format!("/bot123:{HEX}/getMe")), "/bot123:<redacted>/getMe");
        assert_eq!(redact_path(&format!("/bot123:{HEX}//getMe?text=secret")), "/bot123:<redacted>//getMe");
        assert_eq!(redact_path(&format!("/file/bot7:{HEX}/photos/a.jpg")), "/file/bot7:<redacted>/photos/a.jpg");
        assert_eq!(redact_path(&format!("/bot{HEX}/getMe")), "/bot<redacted>/getMe");
        assert_eq!(redact_path("/botabc:def"), "/bot<redacted>");
        assert_eq!(redact_path("/healthz?x=1"), "/healthz");
        // Misrouted requests: the token is redacted wherever it stands.
        assert_eq!(redact_path(&format!("/123:{HEX}/getMe")), "/123:<redacted>/getMe");
        assert_eq!(redact_path(&format!("//bot123:{HEX}/getMe")), "//bot123:<redacted>/getMe");
        assert_eq!(redact_path(&format!("/Bot123:{HEX}/getMe")), "/Bot123:<redacted>/getMe");
        assert_eq!(redact_path(&format!("/api/bot123:{HEX}/getMe")), "/api/bot123:<redacted>/getMe");
        assert_eq!(redact_path(&format!("/bot123%3A{HEX}/getMe")), "/bot123:<redacted>/getMe");
        assert_eq!(redact_path(&format!("/{HEX}")), "/<redacted>");
        assert_eq!(redact_path("/bot/getMe"), "/bot/getMe");
        assert_eq!(redact_path("/é/ü"), "/é/ü");
    }

    #[test]
    fn redacts_pieces_of_a_secret() {
        let encoded: String = HEX[..16].bytes().map(|b| format!("%{b:02X}")).collect();
        let cases = [
            // The probe's case: 31 characters of a secret in a misrouted path.
            (format!("/{}/getMe", &HEX[..31]), "/<redacted>/getMe"),
            (format!("/bot{}/getMe", &HEX[..31]), "/bot<redacted>/getMe"),
            // Shorter pieces, either case, anywhere in the path, cut by a stray slash.
            (format!("/{}", &HEX[40..56]), "/<redacted>"),
            (format!("/{}", HEX[3..11].to_uppercase()), "/<redacted>"),
            (format!("/api/x{}y/getMe", &HEX[5..21]), "/api/<redacted>/getMe"),
            (format!("/bot123:{}/{}/getMe", &HEX[..20], &HEX[20..]), "/bot123:<redacted>/<redacted>/getMe"),
            // Percent-encoded: every character encoded, or only some; not even UTF-8.
            (format!("/{encoded}/getMe"), "/<redacted>/getMe"),
            (format!("/bot{encoded}/getMe"), "/bot<redacted>/getMe"),
            (format!("/bot%31%32%33%3a{encoded}/getMe"), "/bot123:<redacted>/getMe"),
            ("/%FF%FE/getMe".to_string(), "/<redacted>/getMe"),
            // A secret of another shape: long, and not letters only.
            ("/zyxwvutsrqponmlkjihg_zyxwvutsrqponmlk".to_string(), "/<redacted>"),
        ];
        for (path, want) in &cases {
            assert_eq!(redact_path(path), *want, "{path}");
        }
    }

    #[test]
    fn route_words_stay_readable() {
        assert_eq!(redact_path(&format!("/bot123:{HEX}/sendMessage")), "/bot123:<redacted>/sendMessage");
        for method in crate::gateway::api::methods::METHODS {
            let path = format!("/bot/{}", method.name);
            assert_eq!(redact_path(&path), path);
        }
        // Method names of the wider Bot API, including the longest ones, and other routes.
        for path in [
            "/healthz",
            "/bot/getMe",
            "/deleteMessages",
            "/setChatAdministratorCustomTitle",
            "/removeBusinessAccountProfilePhoto",
            "/getBusinessAccountStarBalance",
            "/file/photos/file_0.jpg",
            "/bot7/getMe",
            "/cafe/beef/feedbac",
        ] {
            assert_eq!(redact_path(path), path);
        }
    }
}
