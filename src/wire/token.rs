//! The one bot-token parser, shared by the gateway and the platform server, so both sides
//! agree on what a token is: `<numeric_id>:<secret>` (SPEC "Bot credentials"), the numeric id
//! 1..=2^52-1 in decimal without sign or leading zeros, the secret exactly 64 hex digits
//! (either case). Whether a well-formed token is a bot's current one is for the caller to
//! decide, comparing the secret in constant time.

use std::fmt;

/// Largest numeric id: ids are positive and fit in 52 bits (SPEC "Limits").
pub const MAX_NUMERIC_ID: u64 = (1 << 52) - 1;

/// Length of the secret part: 64 hex characters (256 bits).
pub const SECRET_HEX_LEN: usize = 64;

/// A token split into its parts. `Debug` never prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct BotToken {
    /// The bot's user id (`getMe().id`), stable across token rotation.
    pub numeric_id: u64,
    /// The secret's 32 bytes.
    pub secret: [u8; 32],
}

impl fmt::Debug for BotToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BotToken").field("numeric_id", &self.numeric_id).field("secret", &"<redacted>").finish()
    }
}

/// Parses a token; `None` for anything malformed, including tokens issued before the
/// numeric-id format.
pub fn parse(token: &str) -> Option<BotToken> {
    let (id, secret) = token.split_once(':')?;
    if id.is_empty() || id.len() > 16 || !id.bytes().all(|b| b.is_ascii_digit()) || id.starts_with('0') {
        return None;
    }
    let numeric_id: u64 = id.parse().ok()?;
    if numeric_id == 0 || numeric_id > MAX_NUMERIC_ID || secret.len() != SECRET_HEX_LEN {
        return None;
    }
    let secret = crate::crypto::hex_decode_32(secret)?;
    Some(BotToken { numeric_id, secret })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn accepts_well_formed_tokens() {
        let t = parse(&format!("123456:{HEX}")).expect("valid");
        assert_eq!(t.numeric_id, 123456);
        assert_eq!(crate::crypto::hex_encode(&t.secret), HEX);
        assert_eq!(parse(&format!("{MAX_NUMERIC_ID}:{HEX}")).expect("2^52-1").numeric_id, MAX_NUMERIC_ID);
        // Either case of hex, the same secret.
        assert_eq!(parse(&format!("1:{}", HEX.to_uppercase())).expect("upper").secret, t.secret);
        assert!(!format!("{t:?}").contains("0123456789abcdef"), "Debug must not print the secret");
    }

    #[test]
    fn refuses_everything_else() {
        for bad in [
            String::new(),
            "123".to_string(),
            format!(":{HEX}"),
            format!("0:{HEX}"),
            format!("0123:{HEX}"),
            format!("-1:{HEX}"),
            format!("+1:{HEX}"),
            format!("{}:{HEX}", MAX_NUMERIC_ID + 1),
            format!("123:{HEX}0"),
            format!("123:{}", &HEX[1..]),
            format!("123:{}", "zz".repeat(32)),
            format!("123:{HEX} "),
            format!("12a:{HEX}"),
            format!("00123:{HEX}"),
            format!(" 123:{HEX}"),
            format!("123:{}g", &HEX[1..]),
            format!("123:{HEX}:{HEX}"),
            format!("99999999999999999999999:{HEX}"),
            HEX.to_string(),                  // the old format: no numeric id
            "123456:ABC-def_ghi".to_string(), // a test-style token
        ] {
            assert!(parse(&bad).is_none(), "{bad:?} must be refused");
        }
    }
}
