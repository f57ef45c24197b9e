//! Account rules shared by the CLI and the service: usernames, display names, bot capabilities,
//! the bot token format and the numeric id range. Pure functions, no storage.

use super::error::{PlatformError, Result};
use crate::wire::bot_account;
use crate::wire::token::BotToken;

/// Numeric ids (users and bots share one space) lie in `1..ID_LIMIT` (52 bits, safe in doubles).
pub const ID_LIMIT: u64 = 1 << 52;
pub use crate::wire::bot_account::{DISPLAY_NAME_MAX, USERNAME_MAX, USERNAME_MIN};

/// Checks a username (without a leading '@'): `wire::bot_account`, as the platform refuses it.
pub fn validate_username(username: &str) -> Result<()> {
    bot_account::check_username(username).map_err(invalid)
}

/// Checks a display name: non-empty, at most 128 characters, no control characters.
pub fn validate_display_name(name: &str) -> Result<()> {
    bot_account::check_display_name(name).map_err(invalid)
}

/// Strips one leading '@' from a looked-up username.
pub fn strip_at(username: &str) -> &str {
    username.strip_prefix('@').unwrap_or(username)
}

/// Parses bot capabilities: `default`, or a comma-separated list of `dm`, `groups`, `channels`.
/// Returns the canonical form (`default`, or the listed ones in the order dm, groups, channels).
pub fn parse_capabilities(text: &str) -> Result<String> {
    bot_account::parse_capabilities(text).map_err(invalid)
}

fn invalid(why: crate::wire::invalid::Invalid) -> PlatformError {
    PlatformError::InvalidArgument(why.0)
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
    fn refusals_are_invalid_arguments() {
        assert!(matches!(validate_username("ab"), Err(PlatformError::InvalidArgument(_))));
        assert!(matches!(validate_display_name(""), Err(PlatformError::InvalidArgument(_))));
        let e = parse_capabilities("dm,voice").expect_err("unknown");
        assert!(e.to_string().contains("unknown capability \"voice\""), "{e}");
        assert_eq!(parse_capabilities("channels,dm").expect("valid"), "dm,channels");
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
