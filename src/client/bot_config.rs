//! The gateway config that `@BotManager` sent, found again in the dialog with it: its final
//! `/newbot` reply carries a whole config (`Full gateway config ...:` and the JSON), and a
//! later `/token @name` reply (`New token for @name:` then `Token: ...`) replaces the token.
//! The platform keeps neither the token nor the recovery secret, so the remembered reply is the
//! one place they are; `e2e-chat save-config` writes it to a file in one step.

use serde_json::Value;

/// How the manager's final `/newbot` reply introduces the config (its documented format).
const CONFIG_MARK: &str = "Full gateway config";
/// How its `/token` reply begins, before `@username:`.
const NEW_TOKEN: &str = "New token for @";

/// A config found in the dialog.
#[derive(Debug, PartialEq)]
pub struct FoundConfig {
    /// The bot's username, without `@`.
    pub username: String,
    pub config: Value,
    /// A later `/token` reply replaced the token of the `/newbot` reply.
    pub token_replaced: bool,
}

/// The newest config among `texts` (the manager's messages, newest first) for `bot` (any
/// bot when none), with the newest token issued after it.
pub fn find(texts: &[String], bot: Option<&str>) -> Option<FoundConfig> {
    let wanted = bot.map(|b| b.trim_start_matches('@').to_ascii_lowercase());
    // Username (lowercase) → the newest token a `/token` reply gave it, newer than what follows.
    let mut newer_tokens: Vec<(String, String)> = Vec::new();
    for text in texts {
        if let Some((username, token)) = new_token(text) {
            if !newer_tokens.iter().any(|(u, _)| *u == username) {
                newer_tokens.push((username, token));
            }
            continue;
        }
        let Some(mut config) = config_in(text) else { continue };
        let username = config["bots"][0]["username"].as_str().unwrap_or_default().to_string();
        if wanted.as_ref().is_some_and(|w| *w != username.to_ascii_lowercase()) {
            continue;
        }
        let newer = newer_tokens.iter().find(|(u, _)| *u == username.to_ascii_lowercase()).map(|(_, t)| t.clone());
        let token_replaced = newer.is_some();
        if let Some(token) = newer {
            config["bots"][0]["token"] = Value::String(token);
        }
        return Some(FoundConfig { username, config, token_replaced });
    }
    None
}

/// The JSON object after the config mark's line, when `text` has one that parses.
fn config_in(text: &str) -> Option<Value> {
    let after = &text[text.find(CONFIG_MARK)?..];
    let json = &after[after.find('\n')? + 1..];
    serde_json::from_str::<Value>(json.trim()).ok().filter(|v| v["bots"][0].is_object())
}

/// (username in lowercase, token) of a `/token` reply.
fn new_token(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix(NEW_TOKEN)?;
    let username = rest.split(':').next()?.trim().to_ascii_lowercase();
    let token = text.lines().find_map(|l| l.trim().strip_prefix("Token: "))?.trim().to_string();
    Some((username, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(username: &str, token: &str) -> String {
        format!(
            "Done! Your bot @{username} is created.\n\nToken: {token}\n\nFull gateway config (fill in state_dir; save it with mode 0600, then: bot-gateway serve FILE):\n\
             {{\n  \"state_dir\": \"<STATE_DIR>\",\n  \"bots\": [\n    {{\n      \"token\": \"{token}\",\n      \"username\": \"{username}\"\n    }}\n  ]\n}}"
        )
    }

    #[test]
    fn the_newest_config_with_the_newest_token_after_it() {
        let texts = vec![
            "New token for @cat_bot:\nToken: 9:new".to_string(),
            "New token for @cat_bot:\nToken: 9:older".to_string(),
            created("cat_bot", "9:first"),
            created("dog_bot", "8:first"),
            "New token for @dog_bot:\nToken: 8:before-the-config".to_string(),
        ];
        let cat = find(&texts, None).expect("found");
        assert_eq!((cat.username.as_str(), cat.config["bots"][0]["token"].as_str(), cat.token_replaced), ("cat_bot", Some("9:new"), true));
        let dog = find(&texts, Some("@Dog_Bot")).expect("found");
        assert_eq!((dog.config["bots"][0]["token"].as_str(), dog.token_replaced), (Some("8:first"), false), "an older token does not count");
        assert!(find(&texts, Some("@fish_bot")).is_none());
        assert!(find(&["Full gateway config:\nnot json".to_string()], None).is_none());
    }
}
