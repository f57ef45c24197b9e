//! The rules of a bot account that both ends of `/newbot` apply: the username, the display
//! name and the capabilities. The platform checks every answer with them, and the owner's
//! client brings the capabilities to the canonical form its proof of the bot's key signs
//! (`crypto::identity::bot_key_statement`), so the two cannot disagree about what was signed.

use super::invalid::Invalid;

/// Usernames are 3 to 32 characters of `[A-Za-z0-9_]`.
pub const USERNAME_MIN: usize = 3;
pub const USERNAME_MAX: usize = 32;
/// Display names are at most 128 Unicode characters.
pub const DISPLAY_NAME_MAX: usize = 128;

/// Checks a username (without a leading '@').
pub fn check_username(username: &str) -> Result<(), Invalid> {
    let len = username.chars().count();
    if !(USERNAME_MIN..=USERNAME_MAX).contains(&len) {
        return Err(Invalid::new(format!("username must be {USERNAME_MIN} to {USERNAME_MAX} characters, got {len}")));
    }
    if let Some(c) = username.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '_')) {
        return Err(Invalid::new(format!("username may only contain Latin letters, digits and '_', found {c:?}")));
    }
    Ok(())
}

/// Checks a display name: non-empty, at most 128 characters, no control characters.
pub fn check_display_name(name: &str) -> Result<(), Invalid> {
    if name.trim().is_empty() {
        return Err(Invalid::new("display name must not be empty"));
    }
    let len = name.chars().count();
    if len > DISPLAY_NAME_MAX {
        return Err(Invalid::new(format!("display name must be at most {DISPLAY_NAME_MAX} characters, got {len}")));
    }
    if name.chars().any(char::is_control) {
        return Err(Invalid::new("display name must not contain control characters"));
    }
    Ok(())
}

/// Parses bot capabilities: `default`, or a comma-separated list of `dm`, `groups`, `channels`.
/// Returns the canonical form (`default`, or the listed ones in the order dm, groups, channels).
pub fn parse_capabilities(text: &str) -> Result<String, Invalid> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("default") {
        return Ok("default".into());
    }
    const KNOWN: [&str; 3] = ["dm", "groups", "channels"];
    let mut present = [false; 3];
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(Invalid::new(
                "empty capability in the list: use `default` or a comma-separated list of dm, groups, channels",
            ));
        }
        if part.eq_ignore_ascii_case("default") {
            return Err(Invalid::new(
                "`default` stands alone: send just `default`, or a comma-separated list of dm, groups, channels",
            ));
        }
        match KNOWN.iter().position(|k| k.eq_ignore_ascii_case(part)) {
            Some(i) => present[i] = true,
            None => {
                return Err(Invalid::new(format!(
                    "unknown capability {part:?}: use `default` or a comma-separated list of dm, groups, channels"
                )))
            }
        }
    }
    let list: Vec<&str> = KNOWN.iter().zip(present).filter(|(_, p)| *p).map(|(k, _)| *k).collect();
    Ok(list.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames() {
        for ok in ["abc", "Some_Bot_1", "a_b", &"x".repeat(32)] {
            assert!(check_username(ok).is_ok(), "{ok} should pass");
        }
        for bad in ["", "ab", &"x".repeat(33), "with space", "dash-bot", "ümlaut", "@abc"] {
            assert!(check_username(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn display_names() {
        assert!(check_display_name("Echo Bot 🤖").is_ok());
        assert!(check_display_name(&"é".repeat(128)).is_ok());
        assert!(check_display_name(&"é".repeat(129)).is_err());
        assert!(check_display_name("").is_err());
        assert!(check_display_name("   ").is_err());
        assert!(check_display_name("a\nb").is_err());
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
}
