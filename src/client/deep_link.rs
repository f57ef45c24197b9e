//! Bot links (deep links): what `e2e-chat start` and chat mode's `/open` take. A bot shares
//! `https://t.me/NAME?start=PAYLOAD` (what the SDKs' helpers build) or
//! `tg://resolve?domain=NAME&start=PAYLOAD`; opening it sends `/start PAYLOAD` to the bot,
//! as a Bot API client does. A bare `@NAME` opens the dialog with no payload.

use std::fmt;

/// Longest `start` payload (Bot API: up to 64 characters of `A-Z a-z 0-9 _ -`).
pub const PAYLOAD_MAX: usize = 64;

/// A bot and what its link starts it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotLink {
    /// `@name`.
    pub bot: String,
    pub payload: Option<String>,
}

impl BotLink {
    /// The message opening the link sends.
    pub fn start_text(&self) -> String {
        match &self.payload {
            Some(p) => format!("/start {p}"),
            None => "/start".to_string(),
        }
    }
}

/// Why a link is not one we open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLink(pub String);

impl fmt::Display for BadLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadLink {}

/// Reads a bot link: `https://t.me/NAME?start=P` (with or without the scheme, `telegram.me`
/// too), `tg://resolve?domain=NAME&start=P`, or `@NAME`.
pub fn parse(link: &str) -> Result<BotLink, BadLink> {
    let link = link.trim();
    let bad = |why: &str| Err(BadLink(format!("{link:?} is not a bot link: {why}")));
    let lower = link.to_ascii_lowercase();
    let (name, query) = if let Some(rest) = lower.strip_prefix("tg://resolve") {
        let query = rest.strip_prefix('?').unwrap_or("");
        let query = &link[link.len() - query.len()..];
        match param(query, "domain") {
            Some(name) => (name, query),
            None => return bad("a tg://resolve link names the bot with domain="),
        }
    } else if let Some(name) = link.strip_prefix('@') {
        (name, "")
    } else {
        let without_scheme = ["https://", "http://"]
            .iter()
            .find_map(|s| lower.starts_with(s).then(|| &link[s.len()..]))
            .unwrap_or(link);
        let host_end = without_scheme.find('/').unwrap_or(without_scheme.len());
        let host = without_scheme[..host_end].to_ascii_lowercase();
        if !matches!(host.as_str(), "t.me" | "telegram.me" | "www.t.me") {
            return bad("expected https://t.me/NAME?start=PAYLOAD, tg://resolve?domain=NAME&start=PAYLOAD or @NAME");
        }
        let path = &without_scheme[host_end..];
        let path = path.strip_prefix('/').unwrap_or(path);
        match path.split_once('?') {
            Some((name, query)) => (name.trim_end_matches('/'), query),
            None => (path.trim_end_matches('/'), ""),
        }
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return bad("the bot's name must be letters, digits and _");
    }
    if param(query, "startgroup").is_some() || param(query, "startchannel").is_some() {
        return bad("it adds the bot to a group or channel (use e2e-chat group add GROUP @BOT)");
    }
    let payload = match param(query, "start") {
        None | Some("") => None,
        Some(p) if good_payload(p) => Some(p.to_string()),
        Some(_) => {
            return bad(&format!("the start payload must be 1 to {PAYLOAD_MAX} of A-Z, a-z, 0-9, _ and -"));
        }
    };
    Ok(BotLink { bot: format!("@{name}"), payload })
}

/// A start payload given on its own (`e2e-chat start @bot PAYLOAD`), checked as a link's is.
pub fn with_payload(bot: &str, payload: &str) -> Result<BotLink, BadLink> {
    let mut link = parse(&format!("@{}", bot.trim_start_matches('@')))?;
    if !payload.is_empty() {
        if !good_payload(payload) {
            return Err(BadLink(format!("start payload {payload:?}: 1 to {PAYLOAD_MAX} of A-Z, a-z, 0-9, _ and -")));
        }
        link.payload = Some(payload.to_string());
    }
    Ok(link)
}

fn good_payload(p: &str) -> bool {
    p.len() <= PAYLOAD_MAX && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The value of `name` in a query string (`a=1&b=2`); no percent-decoding (payloads are
/// plain by the rule above).
fn param<'q>(query: &'q str, name: &str) -> Option<&'q str> {
    query.split('&').find_map(|kv| match kv.split_once('=') {
        Some((k, v)) if k == name => Some(v),
        None if kv == name => Some(""),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(link: &str) -> (String, Option<String>) {
        let l = parse(link).expect(link);
        (l.bot, l.payload)
    }

    #[test]
    fn the_link_forms_bots_share() {
        let want = ("@shop_bot".to_string(), Some("ref-42_x".to_string()));
        assert_eq!(ok("https://t.me/shop_bot?start=ref-42_x"), want);
        assert_eq!(ok("http://t.me/shop_bot/?start=ref-42_x"), want);
        assert_eq!(ok("t.me/shop_bot?start=ref-42_x"), want);
        assert_eq!(ok("  https://telegram.me/shop_bot?foo=1&start=ref-42_x "), want);
        assert_eq!(ok("tg://resolve?domain=shop_bot&start=ref-42_x"), want);
        assert_eq!(ok("https://t.me/shop_bot"), ("@shop_bot".into(), None));
        assert_eq!(ok("@shop_bot"), ("@shop_bot".into(), None));
        assert_eq!(ok("https://t.me/shop_bot?start="), ("@shop_bot".into(), None));
        assert_eq!(parse("t.me/b?start=x").expect("ok").start_text(), "/start x");
        assert_eq!(parse("@b").expect("ok").start_text(), "/start");
    }

    #[test]
    fn other_links_and_bad_payloads_are_refused_with_why() {
        let why = |l: &str| parse(l).expect_err(l).0;
        assert!(why("https://example.org/shop_bot?start=x").contains("expected https://t.me/NAME"));
        assert!(why("https://t.me/shop_bot?start=a%20b").contains("start payload"));
        assert!(why(&format!("https://t.me/b?start={}", "a".repeat(65))).contains("1 to 64"));
        assert!(why("https://t.me/shop_bot?startgroup=x").contains("group"));
        assert!(why("https://t.me/bad-name?start=x").contains("letters, digits"));
        assert!(why("tg://resolve?start=x").contains("domain="));
        assert!(why("@").contains("letters, digits"));
    }

    #[test]
    fn a_payload_given_apart_follows_the_same_rule() {
        assert_eq!(with_payload("@b", "abc").expect("ok").payload.as_deref(), Some("abc"));
        assert_eq!(with_payload("b", "").expect("ok").payload, None);
        assert!(with_payload("@b", "a b").expect_err("space").0.contains("start payload"));
        assert!(with_payload("@b", "x&start=y").is_err());
    }
}
