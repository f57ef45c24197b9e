//! MessageEntity rules shared by every method: reading the entities a bot sends
//! (`entities_from_json`, `check_entity_count`), checking them against the text
//! (`validate_entities`), UTF-16 lengths, and the `bot_command` entity of an incoming command.
//! Offsets and lengths are in UTF-16 code units, as in the Bot API.

use serde_json::{Map, Value};

use super::checked_link;
use crate::gateway::botapi::ApiError;
use crate::wire::e2e::Entity;

/// MessageEntity types a bot may send and the gateway can carry in `e2e.Entity`.
/// `text_mention` (needs `user`) and `custom_emoji` (needs `custom_emoji_id`) are not carried
/// by the e2e message yet, so they are refused rather than silently degraded.
const ENTITY_TYPES: &[&str] = &[
    "mention",
    "hashtag",
    "cashtag",
    "bot_command",
    "url",
    "email",
    "phone_number",
    "bold",
    "italic",
    "underline",
    "strikethrough",
    "spoiler",
    "blockquote",
    "expandable_blockquote",
    "code",
    "pre",
    "text_link",
];

/// Entity types of the Bot API that the e2e `Entity` cannot carry yet.
const UNCARRIED_ENTITY_TYPES: &[&str] = &["text_mention", "custom_emoji", "date_time"];

/// Most entities one message may carry, whatever its length. Telegram renders at most 100 and
/// silently ignores the rest; the gateway carries ten times that and refuses more, so the work
/// and memory of one call stay bounded (docs/decisions.md).
pub const MAX_ENTITIES: usize = 1000;

/// Refuses more entities than a text of `text_utf16` units can carry: [`MAX_ENTITIES`], and for
/// a short text one entity of each type per unit (every entity covers at least one unit, and a
/// unit inside two entities of one type is redundant: same-type entities may neither overlap nor
/// nest). Called as soon as the count is known, before any per-entity work.
pub fn check_entity_count(count: usize, text_utf16: usize) -> Result<(), ApiError> {
    if count > MAX_ENTITIES {
        return Err(ApiError::bad_request(format!(
            "too many entities: {count} given, at most {MAX_ENTITIES} are accepted per message"
        )));
    }
    let per_text = text_utf16.saturating_mul(ENTITY_TYPES.len());
    if count > per_text {
        return Err(ApiError::bad_request(format!(
            "too many entities: {count} given for a text of {text_utf16} UTF-16 code units, which can carry at most \
             {per_text} (one entity of each of the {} types per unit)",
            ENTITY_TYPES.len()
        )));
    }
    Ok(())
}

/// Reads a MessageEntity array (as given in `entities` / `caption_entities`) for a text of
/// `text_utf16` units: the count first ([`check_entity_count`]), then the JSON shape of each.
/// A `text_link` URL must pass the gateway's one link rule (`text::checked_link`, also applied
/// to markup) and is kept normalised; `url` is kept only on `text_link` and `language` only on
/// `pre`, so nothing else reaches the recipient. Call [`validate_entities`] against the text
/// afterwards. Unknown keys are ignored.
pub fn entities_from_json(value: &Value, text_utf16: usize) -> Result<Vec<Entity>, ApiError> {
    let items = value.as_array().ok_or_else(|| ApiError::bad_request("entities must be an array of MessageEntity"))?;
    check_entity_count(items.len(), text_utf16)?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let obj = item.as_object().ok_or_else(|| entity_error(i, "is not an object"))?;
        let kind =
            obj.get("type").and_then(Value::as_str).ok_or_else(|| entity_error(i, "has no string field \"type\""))?;
        let offset =
            entity_u32(obj, "offset").ok_or_else(|| entity_error(i, "has no valid non-negative integer \"offset\""))?;
        let length =
            entity_u32(obj, "length").ok_or_else(|| entity_error(i, "has no valid non-negative integer \"length\""))?;
        let mut e = Entity::new();
        e.type_ = kind.to_string();
        e.offset = offset;
        e.length = length;
        if let Some(url) = obj.get("url") {
            let url = url.as_str().ok_or_else(|| entity_error(i, "has a non-string \"url\""))?;
            // A blank url is left to `validate_entities` ("has no url").
            if kind == "text_link" && !url.trim().is_empty() {
                e.url = checked_link(url).ok_or_else(|| {
                    entity_error(
                        i,
                        "(text_link) has an unsupported URL: only http(s) links with a host and tg:, ton: and \
                         tonsite: links are accepted",
                    )
                })?;
            }
        }
        if let Some(lang) = obj.get("language") {
            let lang = lang.as_str().ok_or_else(|| entity_error(i, "has a non-string \"language\""))?;
            if kind == "pre" {
                e.language = lang.to_string();
            }
        }
        out.push(e);
    }
    Ok(out)
}

fn entity_u32(obj: &Map<String, Value>, key: &str) -> Option<u32> {
    let v = obj.get(key)?;
    if let Some(n) = v.as_u64() {
        return u32::try_from(n).ok();
    }
    // telegraf/JS never sends 3.0, but accept an integral float like the param getters do.
    let f = v.as_f64()?;
    (f >= 0.0 && f.fract() == 0.0 && f <= u32::MAX as f64).then_some(f as u32)
}

fn entity_error(index: usize, what: &str) -> ApiError {
    ApiError::bad_request(format!("can't parse entities: entity {index} {what}"))
}

/// Checks entities against `text`: known type, `length > 0`, `offset + length` within the
/// text, both ends on code-point boundaries (never inside a surrogate pair), all in UTF-16 code
/// units; `text_link` needs a `url`. Returns 400 naming the first bad entity.
pub fn validate_entities(text: &str, entities: &[Entity]) -> Result<(), ApiError> {
    if entities.is_empty() {
        return Ok(());
    }
    let total = utf16_len(text) as u64;
    // UTF-16 positions that fall between the two halves of a surrogate pair.
    let mut inside_pairs = Vec::new();
    let mut pos = 0u64;
    for c in text.chars() {
        if c.len_utf16() == 2 {
            inside_pairs.push(pos + 1);
        }
        pos += c.len_utf16() as u64;
    }
    for (i, e) in entities.iter().enumerate() {
        let kind = e.type_.as_str();
        if UNCARRIED_ENTITY_TYPES.contains(&kind) {
            return Err(entity_error(i, &format!("has type {kind:?}, which is not supported yet")));
        }
        if !ENTITY_TYPES.contains(&kind) {
            return Err(entity_error(i, &format!("has unknown type {kind:?}")));
        }
        if e.length == 0 {
            return Err(entity_error(i, &format!("({kind}) has length 0")));
        }
        let start = e.offset as u64;
        let end = start + e.length as u64;
        if end > total {
            return Err(entity_error(
                i,
                &format!("({kind}) ends at {end}, beyond the text length {total} in UTF-16 code units"),
            ));
        }
        for edge in [start, end] {
            if inside_pairs.binary_search(&edge).is_ok() {
                return Err(entity_error(
                    i,
                    &format!("({kind}) has a boundary at {edge}, inside a surrogate pair (UTF-16 code units)"),
                ));
            }
        }
        if kind == "text_link" && e.url.trim().is_empty() {
            return Err(entity_error(i, "(text_link) has no \"url\""));
        }
    }
    Ok(())
}

/// Length of `s` in UTF-16 code units (the unit of entity offsets and text limits).
pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// The `bot_command` entity at offset 0 for a text such as `/start`, `/start@my_bot arg` or
/// `/help-me` (covers `/help`); empty when the text does not start with a command. PTB's
/// CommandHandler and telegraf's `bot.command` route on it (SDK-COMPAT §8.9).
pub fn command_entities(text: &str) -> Vec<Entity> {
    let Some(rest) = text.strip_prefix('/') else {
        return Vec::new();
    };
    let is_cmd = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let name_len = rest.bytes().take_while(|&b| is_cmd(b)).count();
    if name_len == 0 {
        return Vec::new();
    }
    let mut len = 1 + name_len;
    let after = &rest[name_len..];
    if let Some(user) = after.strip_prefix('@') {
        let user_len = user.bytes().take_while(|&b| is_cmd(b)).count();
        if user_len > 0 {
            len += 1 + user_len;
        }
    }
    let mut e = Entity::new();
    e.type_ = "bot_command".to_string();
    e.offset = 0;
    // ASCII only, so bytes equal UTF-16 code units.
    e.length = len as u32;
    vec![e]
}

#[cfg(test)]
pub(crate) fn entity(kind: &str, offset: u32, length: u32) -> Entity {
    let mut e = Entity::new();
    e.type_ = kind.to_string();
    e.offset = offset;
    e.length = length;
    e
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::gateway::botapi::types::entities_to_json;

    #[test]
    fn entities_round_trip_with_url_and_language() {
        let src = json!([
            {"type": "bold", "offset": 0, "length": 5},
            {"type": "text_link", "offset": 6, "length": 4, "url": "https://example.com"},
            {"type": "pre", "offset": 11, "length": 3, "language": "rust", "unknown_key": true},
            {"type": "code", "offset": 15, "length": 1, "url": "ignored"}
        ]);
        let parsed = entities_from_json(&src, 16).expect("parses");
        // The link is normalised as markup links are; url and language stay on their types only.
        assert_eq!(parsed[1].url, "https://example.com/");
        assert_eq!(parsed[2].language, "rust");
        assert_eq!(parsed[3].url, "");
        let back = entities_to_json(&parsed);
        assert_eq!(
            back,
            json!([
                {"type": "bold", "offset": 0, "length": 5},
                {"type": "text_link", "offset": 6, "length": 4, "url": "https://example.com/"},
                {"type": "pre", "offset": 11, "length": 3, "language": "rust"},
                {"type": "code", "offset": 15, "length": 1}
            ])
        );
    }

    #[test]
    fn entities_from_json_rejects_bad_shapes() {
        for bad in [
            json!({"type": "bold"}),
            json!([1]),
            json!([{"offset": 0, "length": 1}]),
            json!([{"type": "bold", "offset": -1, "length": 1}]),
            json!([{"type": "bold", "offset": 0, "length": "x"}]),
            json!([{"type": "bold", "offset": 0.5, "length": 1}]),
            json!([{"type": "text_link", "offset": 0, "length": 1, "url": 5}]),
        ] {
            let err = entities_from_json(&bad, 16).expect_err(&bad.to_string());
            assert_eq!(err.status, 400);
            assert!(err.description.starts_with("Bad Request: "), "{}", err.description);
        }
    }

    #[test]
    fn entity_count_is_refused_before_any_entity_is_read() {
        // 100,000 items that are not even entities: the count is refused first, so none is read.
        let many = Value::Array(vec![json!(1); 100_000]);
        let err = entities_from_json(&many, 4096).expect_err("too many");
        assert_eq!(err.status, 400);
        assert_eq!(
            err.description,
            "Bad Request: too many entities: 100000 given, at most 1000 are accepted per message"
        );
        let bold = |n: usize| Value::Array(vec![json!({"type": "bold", "offset": 0, "length": 1}); n]);
        assert_eq!(entities_from_json(&bold(MAX_ENTITIES), 4096).expect("at the cap").len(), MAX_ENTITIES);
        assert!(entities_from_json(&bold(MAX_ENTITIES + 1), 4096).is_err());
        // A short text carries at most one entity of each type per UTF-16 unit.
        let per_two_units = 2 * ENTITY_TYPES.len();
        entities_from_json(&bold(per_two_units), 2).expect("within the text's bound");
        let err = entities_from_json(&bold(per_two_units + 1), 2).expect_err("beyond the text's bound");
        assert!(err.description.contains("for a text of 2 UTF-16 code units"), "{}", err.description);
        assert!(check_entity_count(1, 0).is_err(), "an empty text carries no entity");
        check_entity_count(0, 0).expect("no entities");
    }

    #[test]
    fn raw_text_links_follow_the_markup_link_rule() {
        let raw = |url: &str| {
            entities_from_json(&json!([{"type": "text_link", "offset": 0, "length": 1, "url": url}]), 1)
                .map(|es| es[0].url.clone())
        };
        for unsafe_url in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            " javascript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox",
            "file:///etc/passwd",
            "mailto:a@b.c",
            "http://",
            "java\tscript:x",
        ] {
            let err = raw(unsafe_url).expect_err(unsafe_url);
            assert_eq!(err.status, 400);
            assert!(
                err.description.starts_with("Bad Request: can't parse entities: entity 0 (text_link) has an unsupported URL"),
                "{unsafe_url}: {}",
                err.description
            );
        }
        // One rule: a raw text_link is accepted exactly when the same link survives HTML, with
        // the same normalised URL.
        for url in ["javascript:alert(1)", "https://example.com", "example.com/a?b=1", "tg://resolve?domain=x", "ftp://x.y"] {
            let html = crate::gateway::botapi::text::parse(
                &format!("<a href=\"{url}\">x</a>"),
                crate::gateway::botapi::text::ParseMode::Html,
            )
            .expect("html parses");
            assert_eq!(raw(url).ok(), html.1.first().map(|e| e.url.clone()), "{url}");
        }
        assert_eq!(raw("example.com/a").expect("no scheme means http"), "http://example.com/a");
    }

    #[test]
    fn validate_counts_utf16_units() {
        // "😀" is one char, 4 UTF-8 bytes, 2 UTF-16 units; "é" is 1 unit.
        let text = "😀 héllo";
        assert_eq!(utf16_len(text), 8);
        validate_entities(text, &[entity("bold", 0, 2), entity("italic", 3, 5)]).expect("valid");
        let err = validate_entities(text, &[entity("italic", 3, 6)]).expect_err("past the end");
        assert!(err.description.contains("ends at 9"), "{}", err.description);
        let err = validate_entities(text, &[entity("bold", 0, 1)]).expect_err("splits the emoji");
        assert!(err.description.contains("surrogate"), "{}", err.description);
        let err = validate_entities(text, &[entity("bold", 1, 2)]).expect_err("starts inside the emoji");
        assert!(err.description.contains("surrogate"), "{}", err.description);
    }

    #[test]
    fn validate_rejects_bad_entities() {
        let text = "hello";
        let cases = [
            (entity("bold", 0, 0), "length 0"),
            (entity("blink", 0, 1), "unknown type"),
            (entity("text_mention", 0, 1), "not supported yet"),
            (entity("text_link", 0, 1), "url"),
            (entity("bold", u32::MAX, u32::MAX), "beyond"),
        ];
        for (e, want) in cases {
            let err = validate_entities(text, std::slice::from_ref(&e)).expect_err(want);
            assert_eq!(err.status, 400);
            assert!(err.description.contains(want), "{} lacks {want}", err.description);
        }
        let mut link = entity("text_link", 0, 5);
        link.url = "https://example.com".into();
        validate_entities(text, &[link]).expect("text_link with url");
    }

    #[test]
    fn command_entities_cover_the_command_only() {
        let len = |t: &str| command_entities(t).first().map(|e| (e.type_.clone(), e.offset, e.length));
        assert_eq!(len("/start"), Some(("bot_command".into(), 0, 6)));
        assert_eq!(len("/start payload"), Some(("bot_command".into(), 0, 6)));
        assert_eq!(len("/start@my_bot x"), Some(("bot_command".into(), 0, 13)));
        assert_eq!(len("/start@ x"), Some(("bot_command".into(), 0, 6)));
        assert_eq!(len("/help-me"), Some(("bot_command".into(), 0, 5)));
        assert_eq!(len("/"), None);
        assert_eq!(len("/ start"), None);
        assert_eq!(len("hello /start"), None);
        assert_eq!(len("/😀"), None);
        assert_eq!(len(""), None);
    }
}
