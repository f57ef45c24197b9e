//! The rules of a bot's public profile (commands, descriptions, language codes) and the order
//! in which a user's client looks for the command list of a private chat. One place for the
//! gateway (which answers the Bot API's errors), the platform (which never trusts a caller) and
//! the user client, so the three cannot disagree.

use super::invalid::Invalid;
use super::platform::{bot_command_scope::Kind, BotCommandScope};

/// Most commands in one list (Bot API `setMyCommands`).
pub const MAX_COMMANDS: usize = 100;
/// Longest command, in characters.
pub const MAX_COMMAND_LEN: usize = 32;
/// Longest command description, in characters.
pub const MAX_COMMAND_DESCRIPTION: usize = 256;
/// Longest bot description, in characters.
pub const MAX_DESCRIPTION: usize = 512;
/// Longest short description, in characters.
pub const MAX_SHORT_DESCRIPTION: usize = 120;

/// A command: 1-32 characters, lowercase English letters, digits and underscores.
pub fn check_command(command: &str) -> Result<(), Invalid> {
    if command.is_empty() || command.len() > MAX_COMMAND_LEN {
        return Err(Invalid::new(format!("must be 1-{MAX_COMMAND_LEN} characters long")));
    }
    if !command.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(Invalid::new("can contain only lowercase English letters, digits and underscores"));
    }
    Ok(())
}

/// A command's description: 1-256 characters.
pub fn check_command_description(description: &str) -> Result<(), Invalid> {
    let n = description.chars().count();
    if n == 0 || n > MAX_COMMAND_DESCRIPTION {
        return Err(Invalid::new(format!("must be 1-{MAX_COMMAND_DESCRIPTION} characters long")));
    }
    Ok(())
}

/// A whole list: at most 100 commands, each valid, no command twice. The error names the
/// command's place (`commands[3].command ...`).
pub fn check_commands<'a>(commands: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<(), Invalid> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, (command, description)) in commands.into_iter().enumerate() {
        if i >= MAX_COMMANDS {
            return Err(Invalid::new(format!("commands: at most {MAX_COMMANDS} commands are allowed")));
        }
        check_command(command).map_err(|e| Invalid::new(format!("commands[{i}].command {e}")))?;
        check_command_description(description).map_err(|e| Invalid::new(format!("commands[{i}].description {e}")))?;
        if !seen.insert(command) {
            return Err(Invalid::new(format!("commands[{i}].command /{command} is given twice")));
        }
    }
    Ok(())
}

/// A language code as stored: two lowercase letters, or empty for every language.
pub fn check_language_code(code: &str) -> Result<(), Invalid> {
    if code.is_empty() || (code.len() == 2 && code.bytes().all(|b| b.is_ascii_lowercase())) {
        Ok(())
    } else {
        Err(Invalid::new("must be a two-letter ISO 639-1 language code or empty"))
    }
}

/// A scope with its kind and chat id.
pub fn scope(kind: Kind, chat_id: u64) -> BotCommandScope {
    let mut s = BotCommandScope::new();
    s.kind = kind.into();
    s.chat_id = chat_id;
    s
}

/// Where a client looks for the commands of the private chat with `user_id`, first match wins
/// (the Bot API's order): the chat in the user's language, the chat, all private chats in the
/// language, all private chats, default in the language, default. Without a language, only the
/// language-neutral steps.
pub fn private_chat_lookup_order(user_id: u64, language_code: &str) -> Vec<(BotCommandScope, String)> {
    let mut order = Vec::with_capacity(6);
    for (kind, chat_id) in [(Kind::CHAT, user_id), (Kind::ALL_PRIVATE_CHATS, 0), (Kind::DEFAULT, 0)] {
        if !language_code.is_empty() {
            order.push((scope(kind, chat_id), language_code.to_string()));
        }
        order.push((scope(kind, chat_id), String::new()));
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_follow_the_bot_api_rules() {
        assert!(check_command("start").is_ok());
        assert!(check_command("a_1").is_ok());
        assert!(check_command(&"x".repeat(32)).is_ok());
        for bad in ["", "Start", "st-art", "/start", "старт", &"x".repeat(33)] {
            assert!(check_command(bad).is_err(), "{bad:?}");
        }
        assert!(check_command_description(&"é".repeat(256)).is_ok(), "characters, not bytes");
        assert!(check_command_description("").is_err());
        assert!(check_command_description(&"d".repeat(257)).is_err());
        let e = check_commands([("start", "go"), ("start", "again")]).expect_err("twice");
        assert!(e.starts_with("commands[1].command"), "{e}");
        let e = check_commands([("ok", "fine"), ("BAD", "x")]).expect_err("upper case");
        assert!(e.starts_with("commands[1].command can contain only"), "{e}");
        let many: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
        let e = check_commands(many.iter().map(|c| (c.as_str(), "d"))).expect_err("101");
        assert!(e.contains("at most 100"), "{e}");
        assert!(check_commands(many.iter().take(100).map(|c| (c.as_str(), "d"))).is_ok());
    }

    #[test]
    fn language_codes() {
        assert!(check_language_code("").is_ok());
        assert!(check_language_code("en").is_ok());
        for bad in ["EN", "eng", "e", "e1"] {
            assert!(check_language_code(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lookup_order_is_the_bot_apis() {
        let order = private_chat_lookup_order(42, "de");
        let got: Vec<(Kind, u64, &str)> =
            order.iter().map(|(s, l)| (s.kind.enum_value_or_default(), s.chat_id, l.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Kind::CHAT, 42, "de"),
                (Kind::CHAT, 42, ""),
                (Kind::ALL_PRIVATE_CHATS, 0, "de"),
                (Kind::ALL_PRIVATE_CHATS, 0, ""),
                (Kind::DEFAULT, 0, "de"),
                (Kind::DEFAULT, 0, ""),
            ]
        );
        assert_eq!(private_chat_lookup_order(42, "").len(), 3);
    }
}
