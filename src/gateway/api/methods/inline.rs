//! Inline mode: `answerInlineQuery`. The query arrives as an `inline_query` update
//! (`gateway::updates::enqueue_inline_query`); the answer travels end to end to the user's
//! devices, bound to the platform's session, which refuses it once the user chose a result or
//! after 5 minutes (then this method answers 400 saying which).
//!
//! A result is an article (text) or a cached file (a file_id this gateway issued: photo,
//! document, audio, video, voice, gif/mpeg4_gif as an animation, sticker), with its caption;
//! its `input_message_content` text replaces the file, as in the Bot API. A result's
//! `reply_markup` travels with it, signed for the inline message (`keyboard::attach_inline_context`):
//! the user's choice sends the message with the buttons, and a press reaches the bot as a
//! `callback_query` with `inline_message_id`. `button` (or the older `switch_pm_text`) is shown
//! above the results and opens the bot's dialog with `/start <start_parameter>`.

use std::collections::BTreeSet;

use protobuf::MessageField;
use serde_json::{Map, Value};

use super::messages::{formatted, formatted_text, CAPTION, SEND_WAIT};
use super::store_error;
use crate::gateway::botapi::types::MediaKind;
use crate::gateway::botapi::{markup, ApiError, Params};
use crate::gateway::keyboard;
use super::submit;
use crate::gateway::runtime::BotShared;
use crate::gateway::store::{files, inline};
use crate::wire::e2e::{Content, InlineArticle, InlineResults, InlineResultsButton, Text};

/// Most results in one answer (Bot API).
pub const RESULTS_MAX: usize = 50;
/// Longest result id, in bytes (Bot API).
pub const RESULT_ID_MAX: usize = 64;
/// Longest `start_parameter` of the results button (Bot API: 1-64 of A-Z a-z 0-9 _ -).
pub const START_PARAMETER_MAX: usize = 64;

/// The cached result types: the type, the field that names the file_id, the kind of file.
const CACHED: &[(&str, &str, MediaKind)] = &[
    ("photo", "photo_file_id", MediaKind::Photo),
    ("document", "document_file_id", MediaKind::Document),
    ("audio", "audio_file_id", MediaKind::Audio),
    ("video", "video_file_id", MediaKind::Video),
    ("voice", "voice_file_id", MediaKind::Voice),
    ("gif", "gif_file_id", MediaKind::Animation),
    ("mpeg4_gif", "mpeg4_file_id", MediaKind::Animation),
    ("sticker", "sticker_file_id", MediaKind::Sticker),
];

/// One result as the bot gave it, checked; a cached one still names its file by file_id.
#[derive(Debug)]
pub struct ResultRequest {
    pub article: InlineArticle,
    /// A cached result's file_id and the kind the result type shows it as.
    pub file: Option<(String, MediaKind)>,
}

/// The results of an answer, checked.
pub fn results_request(params: &Params) -> Result<Vec<ResultRequest>, ApiError> {
    let Some(results) = params.nested_items("results")? else {
        return Err(ApiError::bad_request("results is required"));
    };
    if results.len() > RESULTS_MAX {
        return Err(ApiError::bad_request(format!("at most {RESULTS_MAX} results are allowed, got {}", results.len())));
    }
    let mut ids = BTreeSet::new();
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let result = result(r, i)?;
            if !ids.insert(result.article.id.clone()) {
                return Err(ApiError::bad_request(format!("results[{i}]: duplicate result id {:?}", result.article.id)));
            }
            Ok(result)
        })
        .collect()
}

/// One InlineQueryResult, its fields as parameters named `results[i].` in errors.
fn result(r: &Params, i: usize) -> Result<ResultRequest, ApiError> {
    let at = format!("results[{i}]");
    let str_field = |name: &str| r.get(name).and_then(Value::as_str).map(str::to_string);
    let kind = str_field("type").unwrap_or_default();
    let id = str_field("id").unwrap_or_default();
    if id.is_empty() || id.len() > RESULT_ID_MAX {
        return Err(ApiError::bad_request(format!("{at}.id must be 1 to {RESULT_ID_MAX} bytes")));
    }
    let keyboard = markup::inline_keyboard(r)?;
    let text = match r.get("input_message_content") {
        None => None,
        Some(Value::Object(content)) => Some(text_content(content, &at)?),
        Some(_) => return Err(ApiError::bad_request(format!("{at}.input_message_content must be an object"))),
    };
    let mut article = InlineArticle {
        id,
        title: str_field("title").unwrap_or_default(),
        description: str_field("description").unwrap_or_default(),
        type_: kind.clone(),
        keyboard: MessageField::from_option(keyboard),
        message: MessageField::from_option(text),
        ..Default::default()
    };
    if kind == "article" {
        if article.title.trim().is_empty() {
            return Err(ApiError::bad_request(format!("{at}.title must be a non-empty string")));
        }
        if article.message.is_none() {
            return Err(ApiError::bad_request(format!("{at}.input_message_content must be an object")));
        }
        return Ok(ResultRequest { article, file: None });
    }
    let Some((_, field, media_kind)) = CACHED.iter().find(|(t, ..)| *t == kind) else {
        return Err(ApiError::bad_request(format!(
            "{at}: inline results of type {kind:?} are not supported by this gateway; article results and cached ones (by file_id) are"
        )));
    };
    let Some(file_id) = str_field(field).filter(|f| !f.trim().is_empty()) else {
        return Err(ApiError::bad_request(if r.names().any(|k| k.ends_with("_url")) {
            format!("{at}: results by URL are not supported (external URLs are not supported); send the file_id of a file this gateway issued in {field}")
        } else {
            format!("{at}.{field} is required")
        }));
    };
    // A text content replaces the file (as in the Bot API); otherwise the caption goes with it.
    if article.message.is_some() {
        return Ok(ResultRequest { article, file: None });
    }
    article.message = MessageField::from_option(formatted(r, &CAPTION)?.map(|(text, entities)| Text { text, entities, ..Default::default() }));
    Ok(ResultRequest { article, file: Some((file_id.trim().to_string(), *media_kind)) })
}

/// An InputTextMessageContent: `message_text` with `parse_mode` or `entities`. Other contents
/// (location, venue, contact, invoice) are refused by name.
fn text_content(content: &Map<String, Value>, at: &str) -> Result<Text, ApiError> {
    if !content.contains_key("message_text") {
        return Err(ApiError::bad_request(format!(
            "{at}.input_message_content: only text content (message_text) is supported by this gateway"
        )));
    }
    let (text, entities) = formatted_text(&text_params(content)).map_err(|e| {
        ApiError::new(e.status, format!("{}: {at}.input_message_content", e.description))
    })?;
    Ok(Text { text, entities, ..Default::default() })
}

/// InputTextMessageContent as the parameters of a text: `message_text` is `text`.
fn text_params(content: &Map<String, Value>) -> Params {
    let mut p = Params::new();
    for (k, v) in content {
        let name = if k == "message_text" { "text" } else { k.as_str() };
        p.insert_json(name, v.clone());
    }
    p
}

/// `button` (InlineQueryResultsButton: `text` and `start_parameter`; a web app is refused), or
/// the older `switch_pm_text` and `switch_pm_parameter`.
pub fn button_request(params: &Params) -> Result<Option<InlineResultsButton>, ApiError> {
    let (text, start) = match params.optional_nested("button")? {
        Some(b) => {
            if b.contains("web_app") {
                return Err(ApiError::bad_request("button.web_app: web apps are not supported by this gateway"));
            }
            (b.required_str("text")?, b.required_str("start_parameter")?)
        }
        None => match params.optional_str("switch_pm_text")?.filter(|t| !t.is_empty()) {
            Some(text) => (text, params.optional_str("switch_pm_parameter")?.unwrap_or_default()),
            None => return Ok(None),
        },
    };
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("button.text must be a non-empty string"));
    }
    let ok = !start.is_empty()
        && start.len() <= START_PARAMETER_MAX
        && start.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return Err(ApiError::bad_request(format!(
            "button.start_parameter must be 1 to {START_PARAMETER_MAX} of A-Z, a-z, 0-9, _ and -"
        )));
    }
    Ok(Some(InlineResultsButton { text, start_parameter: start, ..Default::default() }))
}

/// `answerInlineQuery`: the results (a later answer replaces the list) reach the user who
/// opened the session. `next_offset` is accepted and ignored: the results are one page.
pub(super) fn answer_inline_query(bot: &BotShared, params: &Params) -> Result<Value, ApiError> {
    let id = params.required_str("inline_query_id")?;
    let requests = results_request(params)?;
    let button = button_request(params)?;
    let cache_time = params.optional_i64("cache_time")?.unwrap_or(300).clamp(0, i32::MAX as i64) as i32;
    let is_personal = params.flag("is_personal")?;
    let unknown = || ApiError::bad_request("query is too old and response timeout expired or query ID is invalid");
    let session_id: u64 = id.trim().parse().map_err(|_| unknown())?;
    let session = bot.store.read(|c| inline::get(c, session_id)).map_err(store_error)?.ok_or_else(unknown)?;
    let results = requests
        .into_iter()
        .enumerate()
        .map(|(i, r)| resolved(bot, session_id, session.user_id, r, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut content = Content::new();
    content.set_inline_results(InlineResults {
        session_id,
        results,
        cache_time,
        is_personal,
        button: MessageField::from_option(button),
        ..Default::default()
    });
    submit::submit(bot, session.user_id as i64, content, SEND_WAIT)?;
    Ok(Value::Bool(true))
}

/// A result ready to travel: a cached file found by its file_id (the caption and kind the
/// result gives), and its buttons signed for the inline message the choice will send.
fn resolved(bot: &BotShared, session_id: u64, user_id: u64, r: ResultRequest, i: usize) -> Result<InlineArticle, ApiError> {
    let mut article = r.article;
    if let Some((file_id, kind)) = r.file {
        let record = bot.store.read(|c| files::by_id(c, &file_id)).map_err(store_error)?.ok_or_else(|| {
            ApiError::bad_request(format!("results[{i}]: wrong file_id: {file_id:?} is unknown to this gateway"))
        })?;
        let mut media = record.media;
        media.kind = kind.to_wire().into();
        media.caption = article.message.take().into();
        article.media = MessageField::some(media);
    }
    let inline_message_id = format!("{session_id}_{}", article.id);
    let mut message = article.choice_content();
    keyboard::attach_inline_context(&bot.identity, bot.compat_user_id, user_id, &inline_message_id, &mut message);
    article.keyboard = message.keyboard;
    Ok(article)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, p};
    use super::*;

    fn art(id: &str) -> Value {
        json!({"type": "article", "id": id, "title": "T", "input_message_content": {"message_text": "<b>hi</b>", "parse_mode": "HTML"}})
    }

    #[test]
    fn articles_with_text_are_read_and_others_refused() {
        let r = results_request(&p(json!({"results": [art("a"), art("b")]}))).expect("ok");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].article.message.text, "hi");
        assert_eq!(r[0].article.message.entities[0].type_, "bold");
        assert!(bad(results_request(&p(json!({"results": [art("a"), art("a")]})))).contains("duplicate"));
        let by_url = json!({"results": [{"type": "photo", "id": "p", "photo_url": "x", "thumbnail_url": "x"}]});
        assert!(bad(results_request(&p(by_url))).contains("external URLs are not supported"));
        let game = json!({"results": [{"type": "game", "id": "g", "game_short_name": "x"}]});
        assert!(bad(results_request(&p(game))).contains("\"game\" are not supported"));
        let no_text = json!({"results": [{"type": "article", "id": "a", "title": "T", "input_message_content": {"latitude": 1}}]});
        assert!(bad(results_request(&p(no_text))).contains("message_text"));
        assert!(bad(results_request(&p(json!({"results": [{"type": "article", "id": "", "title": "T"}]})))).contains("1 to 64"));
        let many: Vec<Value> = (0..51).map(|i| art(&i.to_string())).collect();
        assert!(bad(results_request(&p(json!({"results": many})))).contains("at most 50"));
        assert!(bad(results_request(&p(json!({})))).contains("results is required"));
        let both = json!({"results": [{"type": "article", "id": "a", "title": "T",
            "input_message_content": {"message_text": "x", "parse_mode": "HTML", "entities": []}}]});
        assert!(bad(results_request(&p(both))).contains("can't be used together"));
    }

    #[test]
    fn cached_results_name_their_file_and_carry_caption_and_buttons() {
        let buttons = json!({"inline_keyboard": [[{"text": "Press", "callback_data": "p"}]]});
        let kinds = [
            ("photo", "photo_file_id", MediaKind::Photo),
            ("document", "document_file_id", MediaKind::Document),
            ("audio", "audio_file_id", MediaKind::Audio),
            ("video", "video_file_id", MediaKind::Video),
            ("voice", "voice_file_id", MediaKind::Voice),
            ("gif", "gif_file_id", MediaKind::Animation),
            ("mpeg4_gif", "mpeg4_file_id", MediaKind::Animation),
            ("sticker", "sticker_file_id", MediaKind::Sticker),
        ];
        for (kind, field, media) in kinds {
            let one = json!({"results": [{"type": kind, "id": "r", field: "FID", "title": "T", "caption": "<i>c</i>",
                "parse_mode": "HTML", "reply_markup": buttons}]});
            let r = results_request(&p(one)).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(r[0].file, Some(("FID".to_string(), media)), "{kind}");
            assert_eq!((r[0].article.message.text.as_str(), r[0].article.type_.as_str()), ("c", kind));
            assert_eq!(r[0].article.keyboard.rows[0].buttons[0].callback_data, "p");
            let missing = json!({"results": [{"type": kind, "id": "r"}]});
            assert!(bad(results_request(&p(missing))).contains(&format!("results[0].{field} is required")), "{kind}");
        }
        // A text content replaces the file: the result is a text.
        let text = json!({"results": [{"type": "photo", "id": "r", "photo_file_id": "F", "input_message_content": {"message_text": "words"}}]});
        let r = results_request(&p(text)).expect("ok");
        assert_eq!((r[0].file.is_none(), r[0].article.message.text.as_str()), (true, "words"));
        let login = json!({"results": [{"type": "article", "id": "a", "title": "T", "input_message_content": {"message_text": "x"},
            "reply_markup": {"inline_keyboard": [[{"text": "L", "login_url": {"url": "https://a"}}]]}}]});
        assert!(bad(results_request(&p(login))).contains("login_url buttons are not supported"));
    }

    #[test]
    fn the_results_button_opens_the_bot_with_a_start_parameter() {
        let b = button_request(&p(json!({"button": {"text": "Open", "start_parameter": "from-inline"}}))).expect("ok").expect("a button");
        assert_eq!((b.text.as_str(), b.start_parameter.as_str()), ("Open", "from-inline"));
        let old = button_request(&p(json!({"switch_pm_text": "Go", "switch_pm_parameter": "x_1"}))).expect("ok").expect("a button");
        assert_eq!(old.start_parameter, "x_1");
        assert_eq!(button_request(&p(json!({}))).expect("none"), None);
        let e = bad(button_request(&p(json!({"button": {"text": "App", "web_app": {"url": "https://a"}}}))));
        assert!(e.contains("web apps are not supported"), "{e}");
        assert!(bad(button_request(&p(json!({"button": {"text": "Go", "start_parameter": "a b"}})))).contains("start_parameter"));
        assert!(bad(button_request(&p(json!({"button": {"text": " ", "start_parameter": "a"}})))).contains("button.text"));
    }
}
