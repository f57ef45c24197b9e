//! Inline mode: `answerInlineQuery`. The query arrives as an `inline_query` update
//! (`gateway::updates::inline_query_updates`); the answer travels end to end to the user's
//! devices, bound to the platform's session, which refuses it once the user chose a result or
//! after 5 minutes (then this method answers 400 saying which).
//!
//! A result is an article (text) or a cached file (a file_id this gateway issued: photo,
//! document, audio, video, voice, gif/mpeg4_gif as an animation, sticker), with its caption;
//! its `input_message_content` text replaces the file, as in the Bot API. With
//! `media_from_urls` on, a file result may name its file by URL (`photo_url`, `video_url`, …):
//! the gateway fetches it when the answer is sent, within the limits of the send methods, and
//! the result carries it as an uploaded file (never the URL; `thumbnail_url` is not fetched). A result's
//! `reply_markup` travels with it, signed for the inline message (`keyboard::attach_inline_context`):
//! the user's choice sends the message with the buttons, and a press reaches the bot as a
//! `callback_query` with `inline_message_id`. `button` (or the older `switch_pm_text`) is shown
//! above the results and opens the bot's dialog with `/start <start_parameter>`.

use std::collections::BTreeSet;

use protobuf::MessageField;
use serde_json::{Map, Value};

use super::media::media_from_url;
use super::messages::{formatted, formatted_text, CAPTION, SEND_WAIT};
use super::store_error;
use crate::gateway::api::url_media;
use crate::gateway::botapi::types::MediaKind;
use crate::gateway::botapi::{markup, ApiError, Params};
use crate::gateway::config::MediaFromUrls;
use crate::gateway::keyboard;
use super::submit;
use crate::gateway::ctx::Sending;
use crate::gateway::store::{files, inline};
use crate::wire::e2e::{Content, InlineArticle, InlineResults, InlineResultsButton, Text};

/// Most results in one answer (Bot API).
pub const RESULTS_MAX: usize = 50;
/// Longest result id, in bytes (Bot API).
pub const RESULT_ID_MAX: usize = 64;
/// Longest `start_parameter` of the results button (Bot API: 1-64 of A-Z a-z 0-9 _ -).
pub const START_PARAMETER_MAX: usize = 64;

/// The file result types: the type, the field that names a cached one's file_id, the field
/// of one by URL (stickers have none), the kind of file.
const FILE_RESULTS: &[(&str, &str, Option<&str>, MediaKind)] = &[
    ("photo", "photo_file_id", Some("photo_url"), MediaKind::Photo),
    ("document", "document_file_id", Some("document_url"), MediaKind::Document),
    ("audio", "audio_file_id", Some("audio_url"), MediaKind::Audio),
    ("video", "video_file_id", Some("video_url"), MediaKind::Video),
    ("voice", "voice_file_id", Some("voice_url"), MediaKind::Voice),
    ("gif", "gif_file_id", Some("gif_url"), MediaKind::Animation),
    ("mpeg4_gif", "mpeg4_file_id", Some("mpeg4_url"), MediaKind::Animation),
    ("sticker", "sticker_file_id", None, MediaKind::Sticker),
];

/// How a file result names its file.
#[derive(Debug, PartialEq)]
pub enum ResultFile {
    /// A file_id this gateway issued.
    Cached(String),
    /// An http(s) URL (`media_from_urls` on), fetched when the answer is sent.
    Url(url::Url),
}

/// One result as the bot gave it, checked; a file result still names its file.
#[derive(Debug)]
pub struct ResultRequest {
    pub article: InlineArticle,
    /// A file result's file and the kind the result type shows it as.
    pub file: Option<(ResultFile, MediaKind)>,
}

/// The results of an answer, checked; results by URL only when `urls` allows them.
pub fn results_request(params: &Params, urls: &MediaFromUrls) -> Result<Vec<ResultRequest>, ApiError> {
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
            let result = result(r, i, urls)?;
            if !ids.insert(result.article.id.clone()) {
                return Err(ApiError::bad_request(format!("results[{i}]: duplicate result id {:?}", result.article.id)));
            }
            Ok(result)
        })
        .collect()
}

/// One InlineQueryResult, its fields as parameters named `results[i].` in errors.
fn result(r: &Params, i: usize, urls: &MediaFromUrls) -> Result<ResultRequest, ApiError> {
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
    let Some((_, field, url_field, media_kind)) = FILE_RESULTS.iter().find(|(t, ..)| *t == kind) else {
        return Err(ApiError::bad_request(format!(
            "{at}: inline results of type {kind:?} are not supported by this gateway; article results and cached ones (by file_id) are"
        )));
    };
    let file = match (str_field(field).filter(|f| !f.trim().is_empty()), url_field.and_then(|u| Some((u, str_field(u)?)))) {
        (Some(file_id), _) => ResultFile::Cached(file_id.trim().to_string()),
        (None, Some((url_field, url))) if urls.enabled => ResultFile::Url(result_url(r, &format!("{at}.{url_field}"), &url)?),
        (None, _) => {
            return Err(ApiError::bad_request(match url_field {
                Some(url_field) if urls.enabled => format!("{at}.{field} or {at}.{url_field} is required"),
                _ if !urls.enabled && r.names().any(|k| k.ends_with("_url")) => {
                    format!("{at}: results by URL: {}; send the file_id of a file this gateway issued in {field}", url_media::OFF)
                }
                _ => format!("{at}.{field} is required"),
            }))
        }
    };
    // A text content replaces the file (as in the Bot API); otherwise the caption goes with it.
    if article.message.is_some() {
        return Ok(ResultRequest { article, file: None });
    }
    article.message = MessageField::from_option(formatted(r, &CAPTION)?.map(|(text, entities)| Text { text, entities, ..Default::default() }));
    Ok(ResultRequest { article, file: Some((file, *media_kind)) })
}

/// A result's file URL (`at` names its field). A video result whose `mime_type` is
/// text/html names a page to embed (a player), which is no file to send.
fn result_url(r: &Params, at: &str, url: &str) -> Result<url::Url, ApiError> {
    if r.get("mime_type").and_then(Value::as_str).is_some_and(|t| t.trim().eq_ignore_ascii_case("text/html")) {
        return Err(ApiError::bad_request(format!(
            "{at}: a page to embed (mime_type text/html) is not supported by this gateway; link the video file itself (video/mp4)"
        )));
    }
    url_media::parse(url).map_err(|refusal| refusal.to_api(at))
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
pub(super) fn answer_inline_query(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let id = params.required_str("inline_query_id")?;
    let requests = results_request(params, &bot.delivery.media_from_urls)?;
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

/// A result ready to travel: a cached file found by its file_id, or a file by URL fetched and
/// stored now, one after the other (the platform takes a few transfers at once, not fifty), with
/// the caption and kind the result gives; and its buttons signed for the inline message the
/// choice will send.
fn resolved(bot: &Sending, session_id: u64, user_id: u64, r: ResultRequest, i: usize) -> Result<InlineArticle, ApiError> {
    let mut article = r.article;
    if let Some((file, kind)) = r.file {
        let mut media = match file {
            ResultFile::Cached(file_id) => {
                bot.store.read(|c| files::by_id(c, &file_id)).map_err(store_error)?.ok_or_else(|| {
                    ApiError::bad_request(format!("results[{i}]: wrong file_id: {file_id:?} is unknown to this gateway"))
                })?
                .media
            }
            ResultFile::Url(url) => media_from_url(bot, &format!("results[{i}]"), &url, kind)?,
        };
        media.kind = kind.to_wire().into();
        media.caption = article.message.take().into();
        article.media = MessageField::some(media);
    }
    let inline_message_id = format!("{session_id}_{}", article.id);
    let mut message = article.choice_content();
    keyboard::attach_inline_context(&bot.identity, bot.user_id, user_id, &inline_message_id, &mut message);
    article.keyboard = message.keyboard;
    Ok(article)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, p};
    use super::*;

    fn off() -> MediaFromUrls {
        MediaFromUrls::default()
    }

    fn art(id: &str) -> Value {
        json!({"type": "article", "id": id, "title": "T", "input_message_content": {"message_text": "<b>hi</b>", "parse_mode": "HTML"}})
    }

    #[test]
    fn articles_with_text_are_read_and_others_refused() {
        let r = results_request(&p(json!({"results": [art("a"), art("b")]})), &off()).expect("ok");
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].article.message.text, "hi");
        assert_eq!(r[0].article.message.entities[0].type_, "bold");
        assert!(bad(results_request(&p(json!({"results": [art("a"), art("a")]})), &off())).contains("duplicate"));
        let by_url = json!({"results": [{"type": "photo", "id": "p", "photo_url": "x", "thumbnail_url": "x"}]});
        let e = bad(results_request(&p(by_url), &off()));
        assert!(e.contains("results by URL: external URLs are not supported unless") && e.contains("media_from_urls"), "{e}");
        let game = json!({"results": [{"type": "game", "id": "g", "game_short_name": "x"}]});
        assert!(bad(results_request(&p(game), &off())).contains("\"game\" are not supported"));
        let no_text = json!({"results": [{"type": "article", "id": "a", "title": "T", "input_message_content": {"latitude": 1}}]});
        assert!(bad(results_request(&p(no_text), &off())).contains("message_text"));
        assert!(bad(results_request(&p(json!({"results": [{"type": "article", "id": "", "title": "T"}]})), &off())).contains("1 to 64"));
        let many: Vec<Value> = (0..51).map(|i| art(&i.to_string())).collect();
        assert!(bad(results_request(&p(json!({"results": many})), &off())).contains("at most 50"));
        assert!(bad(results_request(&p(json!({})), &off())).contains("results is required"));
        let both = json!({"results": [{"type": "article", "id": "a", "title": "T",
            "input_message_content": {"message_text": "x", "parse_mode": "HTML", "entities": []}}]});
        assert!(bad(results_request(&p(both), &off())).contains("can't be used together"));
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
            let r = results_request(&p(one), &off()).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(r[0].file, Some((ResultFile::Cached("FID".to_string()), media)), "{kind}");
            assert_eq!((r[0].article.message.text.as_str(), r[0].article.type_.as_str()), ("c", kind));
            assert_eq!(r[0].article.keyboard.rows[0].buttons[0].callback_data, "p");
            let missing = json!({"results": [{"type": kind, "id": "r"}]});
            assert!(bad(results_request(&p(missing), &off())).contains(&format!("results[0].{field} is required")), "{kind}");
        }
        // A text content replaces the file: the result is a text.
        let text = json!({"results": [{"type": "photo", "id": "r", "photo_file_id": "F", "input_message_content": {"message_text": "words"}}]});
        let r = results_request(&p(text), &off()).expect("ok");
        assert_eq!((r[0].file.is_none(), r[0].article.message.text.as_str()), (true, "words"));
        let login = json!({"results": [{"type": "article", "id": "a", "title": "T", "input_message_content": {"message_text": "x"},
            "reply_markup": {"inline_keyboard": [[{"text": "L", "login_url": {"url": "https://a"}}]]}}]});
        assert!(bad(results_request(&p(login), &off())).contains("login_url buttons are not supported"));
    }

    #[test]
    fn results_by_url_name_their_file_only_when_urls_are_allowed() {
        let on = MediaFromUrls { enabled: true, ..Default::default() };
        let kinds = [
            ("photo", "photo_url", MediaKind::Photo),
            ("document", "document_url", MediaKind::Document),
            ("audio", "audio_url", MediaKind::Audio),
            ("video", "video_url", MediaKind::Video),
            ("voice", "voice_url", MediaKind::Voice),
            ("gif", "gif_url", MediaKind::Animation),
            ("mpeg4_gif", "mpeg4_url", MediaKind::Animation),
        ];
        for (kind, field, media) in kinds {
            let one = json!({"results": [{"type": kind, "id": "r", field: "https://cdn.example/f?sig=1", "thumbnail_url": "https://cdn.example/t",
                "title": "T", "caption": "c"}]});
            let r = results_request(&p(one.clone()), &on).unwrap_or_else(|e| panic!("{kind}: {e}"));
            let url = url::Url::parse("https://cdn.example/f?sig=1").expect("url");
            assert_eq!(r[0].file, Some((ResultFile::Url(url), media)), "{kind}");
            assert_eq!(r[0].article.message.text, "c");
            assert!(bad(results_request(&p(one), &off())).contains("external URLs are not supported"), "{kind}");
        }
        // A file_id wins over a URL; the thumbnail alone names no file.
        let both = json!({"results": [{"type": "photo", "id": "r", "photo_file_id": "FID", "photo_url": "https://a/b.png"}]});
        assert_eq!(results_request(&p(both), &on).expect("ok")[0].file, Some((ResultFile::Cached("FID".into()), MediaKind::Photo)));
        let thumb = json!({"results": [{"type": "photo", "id": "r", "thumbnail_url": "https://a/t.png"}]});
        assert!(bad(results_request(&p(thumb), &on)).contains("results[0].photo_file_id or results[0].photo_url is required"));
        let sticker = json!({"results": [{"type": "sticker", "id": "r", "sticker_url": "https://a/s.webp"}]});
        assert!(bad(results_request(&p(sticker), &on)).contains("results[0].sticker_file_id is required"));
        let page = json!({"results": [{"type": "video", "id": "v", "video_url": "https://a/embed", "mime_type": "text/html", "title": "T"}]});
        assert!(bad(results_request(&p(page), &on)).contains("results[0].video_url: a page to embed (mime_type text/html) is not supported"));
        let malformed = json!({"results": [{"type": "document", "id": "d", "document_url": "ftp://a/b.zip", "title": "T"}]});
        let e = bad(results_request(&p(malformed), &on));
        assert!(e.starts_with("Bad Request: wrong file identifier/HTTP URL specified: results[0].document_url: a ftp: URL"), "{e}");
    }

    #[test]
    fn a_result_by_url_is_fetched_and_stored_when_the_answer_is_sent_and_refused_when_the_url_is() {
        use crate::gateway::api::url_media::tests::{Server, PNG};
        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let bot = super::super::testing::with_media_from_urls(bot, MediaFromUrls { enabled: true, allow_hosts: vec!["localhost".into()], max_bytes: None });
        let server = Server::start();
        let answer = json!({"results": [
            {"type": "photo", "id": "p", "photo_url": server.url("localhost", "/cat.png").as_str(), "thumbnail_url": server.url("localhost", "/thumb").as_str(), "caption": "a cat"},
            {"type": "document", "id": "d", "document_url": server.url("localhost", "/notes.txt").as_str(), "title": "Notes"},
        ]});
        let requests = results_request(&p(answer), &bot.delivery.media_from_urls).expect("checked");
        let results: Vec<InlineArticle> = requests.into_iter().enumerate().map(|(i, r)| resolved(&bot.sending(), 7, 9, r, i).expect("resolved")).collect();
        let photo = &results[0].media;
        assert_eq!((photo.mime_type.as_str(), photo.file_name.as_str(), photo.size), ("image/png", "cat.png", PNG.len() as u64));
        assert_eq!((MediaKind::of(photo), results[0].message.is_none(), photo.caption.text.as_str()), (MediaKind::Photo, true, "a cat"));
        let doc = &results[1].media;
        assert_eq!((MediaKind::of(doc), doc.mime_type.as_str(), doc.file_name.as_str()), (MediaKind::Document, "text/plain", "notes.txt"));
        assert_eq!(fake.stored_files(), 2, "both files reached the platform, encrypted");
        let stored = fake.stored_file(&photo.file_ref).expect("stored");
        assert!(!stored.windows(8).any(|w| w == &PNG[..8]), "no plaintext on the platform");
        assert!(!server.asked().iter().any(|p| p == "/thumb"), "thumbnails are not fetched: {:?}", server.asked());

        let refused = json!({"results": [{"type": "photo", "id": "p", "photo_url": server.url("127.0.0.1", "/cat.png").as_str()}]});
        let request = results_request(&p(refused), &bot.delivery.media_from_urls).expect("checked").remove(0);
        let e = bad(resolved(&bot.sending(), 7, 9, request, 0));
        assert!(e.starts_with("Bad Request: failed to get HTTP URL content: results[0]: 127.0.0.1 is a loopback address"), "{e}");
        assert_eq!(fake.stored_files(), 2, "nothing more stored");
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
