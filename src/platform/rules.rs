//! Account rules shared by the CLI and the service: usernames, display names, bot capabilities,
//! the bot token format and the numeric id range. Pure functions, no storage.

use super::error::{PlatformError, Result};
use crate::wire::token::BotToken;

/// Numeric ids (users and bots share one space) lie in `1..ID_LIMIT` (52 bits, safe in doubles).
pub const ID_LIMIT: u64 = 1 << 52;
/// Usernames are 3 to 32 characters of `[A-Za-z0-9_]`.
pub const USERNAME_MIN: usize = 3;
pub const USERNAME_MAX: usize = 32;
/// Display names are at most 128 Unicode characters.
pub const DISPLAY_NAME_MAX: usize = 128;

/// Checks a username (without a leading '@').
pub fn validate_username(username: &str) -> Result<()> {
    let len = username.chars().count();
    if !(USERNAME_MIN..=USERNAME_MAX).contains(&len) {
        return Err(PlatformError::InvalidArgument(format!(
            "username must be {USERNAME_MIN} to {USERNAME_MAX} characters, got {len}"
        )));
    }
    if let Some(c) = username.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
        return Err(PlatformError::InvalidArgument(format!(
            "username may only contain Latin letters, digits and '_', found {c:?}"
        )));
    }
    Ok(())
}

/// Checks a display name: non-empty, at most 128 characters, no control characters.
pub fn validate_display_name(name: &str) -> Result<()> {
    if name.trim().is_empty() {
        return Err(PlatformError::InvalidArgument("display name must not be empty".into()));
    }
    let len = name.chars().count();
    if len > DISPLAY_NAME_MAX {
        return Err(PlatformError::InvalidArgument(format!(
            "display name must be at most {DISPLAY_NAME_MAX} characters, got {len}"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(PlatformError::InvalidArgument("display name must not contain control characters".into()));
    }
    Ok(())
}

/// Strips one leading '@' from a looked-up username.
pub fn strip_at(username: &str) -> &str {
    username.strip_prefix('@').unwrap_or(username)
}

/// Parses bot capabilities: `default`, or a comma-separated list of `dm`, `groups`, `channels`.
/// Returns the canonical form (`default`, or the listed ones in the order dm, groups, channels).
pub fn parse_capabilities(text: &str) -> Result<String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("default") {
        return Ok("default".into());
    }
    const KNOWN: [&str; 3] = ["dm", "groups", "channels"];
    let mut present = [false; 3];
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(PlatformError::InvalidArgument(
                "empty capability in the list: use `default` or a comma-separated list of dm, groups, channels".into(),
            ));
        }
        if part.eq_ignore_ascii_case("default") {
            return Err(PlatformError::InvalidArgument(
                "`default` stands alone: send just `default`, or a comma-separated list of dm, groups, channels".into(),
            ));
        }
        match KNOWN.iter().position(|k| k.eq_ignore_ascii_case(part)) {
            Some(i) => present[i] = true,
            None => {
                return Err(PlatformError::InvalidArgument(format!(
                    "unknown capability {part:?}: use `default` or a comma-separated list of dm, groups, channels"
                )))
            }
        }
    }
    let list: Vec<&str> = KNOWN.iter().zip(present).filter(|(_, p)| *p).map(|(k, _)| *k).collect();
    Ok(list.join(","))
}

/// Parses a bot token with the one parser the gateway uses too; the error never repeats the
/// secret.
pub fn parse_bot_token(token: &str) -> Result<BotToken> {
    crate::wire::token::parse(token).ok_or_else(|| {
        PlatformError::Unauthenticated("malformed bot token: expected <numeric_id>:<64 hex characters>".into())
    })
}

/// What the server stores for a token secret: its digest, never the secret.
pub fn token_digest(secret: &[u8; 32]) -> [u8; 32] {
    crate::crypto::digest(secret)
}

/// A fresh random numeric id candidate in `1..ID_LIMIT`.
pub fn random_id() -> u64 {
    1 + crate::crypto::random_below(ID_LIMIT - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames() {
        for ok in ["abc", "Some_Bot_1", "a_b", &"x".repeat(32)] {
            assert!(validate_username(ok).is_ok(), "{ok} should pass");
        }
        for bad in ["", "ab", &"x".repeat(33), "with space", "dash-bot", "ümlaut", "@abc"] {
            assert!(validate_username(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn display_names() {
        assert!(validate_display_name("Echo Bot 🤖").is_ok());
        assert!(validate_display_name(&"é".repeat(128)).is_ok());
        assert!(validate_display_name(&"é".repeat(129)).is_err());
        assert!(validate_display_name("").is_err());
        assert!(validate_display_name("   ").is_err());
        assert!(validate_display_name("a\nb").is_err());
    }

    #[test]
    fn capabilities() {
        assert_eq!(parse_capabilities("default").expect("valid"), "default");
        assert_eq!(parse_capabilities("channels,dm").expect("valid"), "dm,channels");
        assert_eq!(parse_capabilities(" groups , groups ").expect("valid"), "groups");
        assert!(parse_capabilities("dm,voice").is_err());
        assert!(parse_capabilities("").is_err());
        let msg = |t: &str| parse_capabilities(t).expect_err(t).to_string();
        assert!(msg("default,dm").contains("`default` stands alone"), "{}", msg("default,dm"));
        assert!(msg("dm,,groups").contains("empty capability"), "{}", msg("dm,,groups"));
        assert!(msg("dm,voice").contains("unknown capability \"voice\""), "{}", msg("dm,voice"));
    }

    #[test]
    fn tokens() {
        let secret = "ab".repeat(32);
        let t = parse_bot_token(&format!("123:{secret}")).expect("valid token");
        assert_eq!(t.numeric_id, 123);
        assert_eq!(t.secret, [0xab; 32]);
        for bad in [
            String::new(),
            "123".to_string(),
            format!(":{secret}"),
            format!("0:{secret}"),
            format!("0123:{secret}"),
            format!("-1:{secret}"),
            format!("{}:{secret}", ID_LIMIT),
            format!("123:{secret}0"),
            format!("123:{}", "zz".repeat(32)),
            format!("123:{secret} "),
            format!("12a:{secret}"),
        ] {
            let err = parse_bot_token(&bad).expect_err("malformed token must fail");
            assert!(!err.message().contains(&secret), "error must not echo the secret");
        }
    }

    #[test]
    fn ids_in_range() {
        for _ in 0..1000 {
            let id = random_id();
            assert!((1..ID_LIMIT).contains(&id));
        }
    }
}
