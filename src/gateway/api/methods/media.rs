//! Files: `sendPhoto`, `sendDocument`, `sendAudio`, `sendVideo`, `sendVoice`, `sendAnimation`,
//! `sendVideoNote`, `sendSticker`, `getFile`, and the download behind
//! `GET /file/bot<token>/<file_path>`. `thumbnail` (a part or a value) is accepted and ignored
//! on every one: the platform's clients draw their own previews.
//!
//! A file sent by upload is encrypted under a fresh key and streamed to the platform while the
//! request body is read (`FileIntake`, `e2e::file::begin_upload`), and stored once the method
//! uses it; a file sent by `file_id` travels again as the same
//! reference and key, with no upload. A download fetches the whole ciphertext into an unlinked
//! private file in `state_dir`, verifies the digest, every chunk and the final tag, and only then
//! decrypts into the response (`e2e::file::download_verified`): no plaintext ever touches disk.
//!
//! A file named by an http(s) URL is refused unless the config's `media_from_urls` is on; then
//! the gateway fetches it (`url_media`) and streams the body to the platform exactly as an
//! uploaded part (`fetch_url`), and the message carries it as any upload: the platform never
//! sees the URL.

use std::io::Read;
use std::sync::Arc;

use protobuf::MessageField;
use serde_json::Value;

use super::messages::{self, CAPTION};
use super::target::{self, channel_media_refused, Target};
use super::store_error;
use crate::crypto::file::{FileCryptoError, MAX_PLAINTEXT_LEN};
use crate::e2e::file::{begin_upload, download_verified, upload_encrypted, FileError, FileSource};
use crate::gateway::api::multipart::FileIntake;
use crate::gateway::api::url_media::{self, Failure};
use crate::gateway::api::Download;
use crate::gateway::botapi::params::StreamedFile;
use crate::gateway::botapi::types::{self, MediaKind};
use crate::gateway::botapi::{markup, params::UploadedFile, ApiError, Params};
use crate::gateway::config::MediaFromUrls;
use crate::gateway::runtime::unix_now;
use crate::gateway::ctx::{Ctx, Sending};
use crate::gateway::runtime::BotShared;
use crate::gateway::store::files::{self, FileRecord};
use crate::wire::e2e::{Content, Entity, Media, Text};

pub(super) fn send_photo(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::Photo)
}

pub(super) fn send_document(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::Document)
}

pub(super) fn send_audio(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::Audio)
}

pub(super) fn send_video(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::Video)
}

pub(super) fn send_voice(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::Voice)
}

pub(super) fn send_animation(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::Animation)
}

pub(super) fn send_video_note(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::VideoNote)
}

/// `sendSticker`: a static image (WEBP or PNG) by upload or file_id, with its `emoji`.
pub(super) fn send_sticker(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    send_media(bot, params, MediaKind::Sticker)
}

/// What the media parameter names.
#[derive(Debug, PartialEq)]
enum Source<'a> {
    /// A file part of the multipart body (named after the parameter, or `attach://<name>`).
    Upload(&'a UploadedFile),
    /// A file_id this gateway issued.
    FileId(String),
    /// An http(s) URL (`media_from_urls` on), and the parameter that gave it.
    Url(String, url::Url),
    /// That URL's file, fetched and streamed to the platform like an uploaded part.
    Fetched(UploadedFile),
}

/// Reads the media parameter `name`: an uploaded part, `attach://<part>`, or a file_id; an
/// http(s) URL when `urls` allows them, else refused (the gateway then fetches nothing from the
/// network on a bot's behalf).
fn media_source<'a>(params: &'a Params, name: &str, urls: &MediaFromUrls) -> Result<Source<'a>, ApiError> {
    if let Some(file) = params.file(name) {
        return Ok(Source::Upload(file));
    }
    let value = params.required_str(name)?;
    let name = &params.qualified(name);
    let value = value.trim();
    if let Some(part) = value.strip_prefix("attach://") {
        return params
            .file(part)
            .map(Source::Upload)
            .ok_or_else(|| ApiError::bad_request(format!("{name}: attach://{part} names no file part of the request")));
    }
    let lower = value.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        if urls.enabled {
            return url_media::parse(value).map(|url| Source::Url(name.clone(), url)).map_err(|r| r.to_api(name));
        }
        return Err(ApiError::bad_request(format!("{name}: {}; upload the file or send a file_id", url_media::OFF)));
    }
    if lower.starts_with("file://") {
        return Err(ApiError::bad_request(format!("{name}: local file paths are not supported; upload the file")));
    }
    if value.is_empty() {
        return Err(ApiError::bad_request(format!("{name} is required")));
    }
    Ok(Source::FileId(value.to_string()))
}

/// The answer to a file_id this gateway never issued.
fn unknown_file_id() -> ApiError {
    ApiError::bad_request("wrong file_id: this file_id is unknown to this gateway")
}

/// An optional non-negative integer parameter that fits a `u32` (0 when absent).
fn dimension(params: &Params, name: &str) -> Result<u32, ApiError> {
    match params.optional_i64(name)? {
        None => Ok(0),
        Some(v) => u32::try_from(v).map_err(|_| ApiError::bad_request(format!("{name} must be a non-negative integer"))),
    }
}


/// Where a file may go: a private chat that produced an update, or a group the bot is in
/// (through MLS, the per-file key inside the application message); not a channel.
fn media_target(bot: &Ctx, chat_id: i64) -> Result<Target, ApiError> {
    let target = target::target_chat(bot, chat_id)?;
    if let Target::Group(g) = &target {
        if g.is_channel() {
            return Err(channel_media_refused());
        }
    }
    Ok(target)
}

/// The send methods: the file (uploaded now, or reused by file_id), its caption, reply target
/// and keyboard, through the durable outbox, to a private chat or a group; answers the sent
/// Message with the media object.
fn send_media(bot: &Sending, params: &Params, kind: MediaKind) -> Result<Value, ApiError> {
    let chat_id = target::chat_id(params, "chat_id")?;
    let markup = markup::reply_markup(params)?;
    let request = MediaRequest::read(bot, params, kind, kind.name())?;
    let (reply_to, allow_without) = messages::reply_request(params, chat_id)?;
    let target = media_target(bot, chat_id)?;
    let reply_to_message_id = messages::reply_target(bot, chat_id, reply_to, allow_without)?;

    let mut content = Content::new();
    content.set_media(request.into_media(bot)?);
    content.reply_to_message_id = reply_to_message_id;
    markup.apply(&mut content);
    messages::send_new_to(bot, &target, content)
}

/// One file a method sends, as its parameters give it (a send method's, or an InputMedia's):
/// read and checked before anything is uploaded.
pub(super) struct MediaRequest<'a> {
    kind: MediaKind,
    source: Source<'a>,
    caption: Option<(String, Vec<Entity>)>,
    width: u32,
    height: u32,
    duration: u32,
    performer: Option<String>,
    title: Option<String>,
    emoji: Option<String>,
}

impl<'a> MediaRequest<'a> {
    /// `name` is the media parameter: the kind's name for a send method, `media` in an
    /// InputMedia. `thumbnail`, `has_spoiler` and the like are not read: ignored.
    pub(super) fn read(bot: &Sending, params: &'a Params, kind: MediaKind, name: &str) -> Result<MediaRequest<'a>, ApiError> {
        let caption = messages::formatted(params, &CAPTION)?;
        let source = media_source(params, name, &bot.delivery.media_from_urls)?;
        let (width, height) = match kind {
            // A round video: its diameter.
            MediaKind::VideoNote => (dimension(params, "length")?, dimension(params, "length")?),
            _ => (dimension(params, "width")?, dimension(params, "height")?),
        };
        let audio = kind == MediaKind::Audio;
        Ok(MediaRequest {
            kind,
            source,
            caption,
            width,
            height,
            duration: dimension(params, "duration")?,
            performer: if audio { params.optional_str("performer")? } else { None },
            title: if audio { params.optional_str("title")? } else { None },
            emoji: if kind == MediaKind::Sticker { params.optional_str("emoji")? } else { None },
        })
    }

    /// A file by URL fetched now and streamed to the platform, which keeps it only once
    /// [`MediaRequest::into_media`] uses it: an album fetches every item before it stores any.
    /// Other sources stay as they are.
    pub(super) fn fetched(self, bot: &Sending) -> Result<MediaRequest<'a>, ApiError> {
        match self.source {
            Source::Url(at, url) => Ok(MediaRequest { source: Source::Fetched(fetch_url(bot, &at, &url, self.kind)?), ..self }),
            _ => Ok(self),
        }
    }

    /// The file as a message carries it: uploaded, fetched (or found by its file_id) with the
    /// details given, its file_id issued before the answer names it.
    pub(super) fn into_media(self, bot: &Sending) -> Result<Media, ApiError> {
        let mut media = match self.source {
            Source::FileId(id) => bot.store.read(|c| files::by_id(c, &id)).map_err(store_error)?.ok_or_else(unknown_file_id)?.media,
            Source::Upload(file) => upload(bot, file, self.kind)?,
            Source::Fetched(file) => upload(bot, &file, self.kind)?,
            Source::Url(at, url) => media_from_url(bot, &at, &url, self.kind)?,
        };
        media.kind = self.kind.to_wire().into();
        if self.width != 0 || self.height != 0 {
            (media.width, media.height) = (self.width, self.height);
        }
        if self.duration != 0 {
            media.duration = self.duration;
        }
        if let Some(p) = self.performer {
            media.performer = p;
        }
        if let Some(t) = self.title {
            media.title = t;
        }
        if let Some(e) = self.emoji {
            media.emoji = e;
        }
        media.caption = MessageField::from_option(self.caption.map(|(text, entities)| Text { text, entities, ..Default::default() }));
        let issued = media.clone();
        bot.store.write(move |c| files::issue(c, &issued, unix_now())).map_err(store_error)?;
        Ok(media)
    }
}

/// Items of an album (Bot API).
pub const ALBUM_MIN: usize = 2;
pub const ALBUM_MAX: usize = 10;

/// `sendMediaGroup`: 2 to 10 photos and videos, or documents, or audio files, each with its
/// own caption, sent as that many messages sharing one `media_group_id`; the reply target
/// goes with the first. Every item is read and checked before any file is uploaded. Each
/// message is its own outbox entry, in order; answers the sent Messages.
pub(super) fn send_media_group(bot: &Sending, params: &Params) -> Result<Value, ApiError> {
    let chat_id = target::chat_id(params, "chat_id")?;
    let items = params.nested_items("media")?.ok_or_else(|| ApiError::bad_request("media is required"))?;
    if !(ALBUM_MIN..=ALBUM_MAX).contains(&items.len()) {
        return Err(ApiError::bad_request(format!("media must hold {ALBUM_MIN} to {ALBUM_MAX} items, got {}", items.len())));
    }
    let kinds = items
        .iter()
        .enumerate()
        .map(|(i, item)| album_kind(item, i))
        .collect::<Result<Vec<_>, _>>()?;
    check_album_mix(&kinds)?;
    let requests = items
        .iter()
        .zip(&kinds)
        .map(|(item, kind)| MediaRequest::read(bot, item, *kind, "media"))
        .collect::<Result<Vec<_>, _>>()?;
    let (reply_to, allow_without) = messages::reply_request(params, chat_id)?;
    let target = media_target(bot, chat_id)?;
    let reply_to_message_id = messages::reply_target(bot, chat_id, reply_to, allow_without)?;
    let requests = requests.into_iter().map(|r| r.fetched(bot)).collect::<Result<Vec<_>, _>>()?;
    let media = requests.into_iter().map(|r| r.into_media(bot)).collect::<Result<Vec<_>, _>>()?;

    // Telegram's ids are decimal strings of about 18 digits; SDKs take any string.
    let group_id = (crate::crypto::random_below(1 << 62) + (1 << 60)).to_string();
    let mut sent = Vec::with_capacity(media.len());
    for (i, m) in media.into_iter().enumerate() {
        let mut content = Content::new();
        content.set_media(m);
        content.media_group_id = group_id.clone();
        if i == 0 {
            content.reply_to_message_id = reply_to_message_id;
        }
        sent.push(messages::send_new_to(bot, &target, content)?);
    }
    Ok(Value::Array(sent))
}

/// An InputMedia's `type`: photo, video, document or audio (what an album may hold).
fn album_kind(item: &Params, i: usize) -> Result<MediaKind, ApiError> {
    input_media_kind(item, &format!("media[{i}]"), ALBUM_KINDS)
}

/// What an album may hold.
pub(super) const ALBUM_KINDS: &[MediaKind] = &[MediaKind::Photo, MediaKind::Video, MediaKind::Document, MediaKind::Audio];

/// An InputMedia's `type`, one of `allowed`.
pub(super) fn input_media_kind(item: &Params, at: &str, allowed: &[MediaKind]) -> Result<MediaKind, ApiError> {
    let kind = item.required_str("type")?;
    match MediaKind::from_name(&kind).filter(|k| allowed.contains(k)) {
        Some(k) => Ok(k),
        None => {
            let names: Vec<&str> = allowed.iter().map(|k| k.name()).collect();
            Err(ApiError::bad_request(format!("{at}.type {kind:?} is not one of {}", names.join(", "))))
        }
    }
}

/// The Bot API's rule: documents go only with documents, audio only with audio; photos and
/// videos mix.
pub(super) fn check_album_mix(kinds: &[MediaKind]) -> Result<(), ApiError> {
    for only in [MediaKind::Document, MediaKind::Audio] {
        if kinds.contains(&only) && kinds.iter().any(|k| *k != only) {
            return Err(ApiError::bad_request(format!(
                "media: an album of {}s can't hold other kinds (photos and videos mix; documents and audio don't)",
                only.name()
            )));
        }
    }
    Ok(())
}

/// A file part of this bot's request: encrypted and streamed to the platform as it is read
/// (the platform stores it when a method uses it: `upload`).
impl FileIntake for BotShared {
    fn take(&self, part: &mut dyn Read) -> Result<StreamedFile, FileError> {
        begin_upload(self.platform.files(), part).map(StreamedFile::pending).inspect_err(|e| {
            if !matches!(e, FileError::Crypto(FileCryptoError::TooLarge)) {
                log::warn!("bot @{}: streaming an uploaded file to the platform failed: {e}", self.username);
            }
        })
    }
}

/// The file an http(s) URL names (`media_from_urls` on), fetched by `url_media` and streamed
/// to the platform as it arrives, as a file part of the request is (`FileIntake`): a part
/// whose name is the URL's and whose type is what its bytes or the server said, for
/// [`upload`] to store. `at` names the parameter in errors. The log names the host only: a
/// URL's path or query may hold a secret.
pub(super) fn fetch_url(bot: &Sending, at: &str, url: &url::Url, kind: MediaKind) -> Result<UploadedFile, ApiError> {
    let host = url.host_str().unwrap_or_default();
    match url_media::fetch(&bot.delivery.media_from_urls, url, kind, |body| begin_upload(bot.port.files(), body)) {
        Ok(fetched) => {
            log::debug!("bot @{}: {at}: a {} fetched from {host}", bot.name, kind.name());
            Ok(UploadedFile {
                filename: fetched.file_name,
                content_type: fetched.mime_type,
                bytes: Vec::new(),
                streamed: Some(Arc::new(StreamedFile::pending(fetched.taken))),
            })
        }
        Err(Failure::Refused(refusal)) => {
            log::info!("bot @{}: {at}: the {} at {host} was refused: {refusal}", bot.name, kind.name());
            Err(refusal.to_api(at))
        }
        Err(Failure::Taking(e)) => Err(transfer_error(bot, "upload", e)),
    }
}

/// A file by URL as a message carries it: fetched, stored and described like an upload
/// (inline results by URL; the send methods go through [`MediaRequest`]).
pub(super) fn media_from_url(bot: &Sending, at: &str, url: &url::Url, kind: MediaKind) -> Result<Media, ApiError> {
    upload(bot, &fetch_url(bot, at, url, kind)?, kind)
}

/// Encrypts and uploads a file part; over 50 MiB is refused before anything is uploaded.
fn upload(bot: &Ctx, file: &UploadedFile, kind: MediaKind) -> Result<Media, ApiError> {
    if file.len() > MAX_PLAINTEXT_LEN {
        return Err(too_large(file.len()));
    }
    let uploaded = match &file.streamed {
        // Encrypted and sent while the request was read: the platform only has to keep it.
        Some(streamed) => streamed.store(),
        None => upload_encrypted(bot.port.files(), &file.bytes[..]),
    }
    .map_err(|e| transfer_error(bot, "upload", e))?;
    let mime_type = match file.content_type.as_deref().map(str::trim) {
        Some(t) if !t.is_empty() && !t.eq_ignore_ascii_case("application/octet-stream") => t.to_string(),
        _ => guess_mime(&file.filename, kind).to_string(),
    };
    Ok(Media { mime_type, file_name: file.filename.clone(), ..uploaded.to_media() })
}

fn too_large(len: u64) -> ApiError {
    ApiError::new(
        413,
        format!("Request Entity Too Large: the file has {len} bytes; files of up to {MAX_PLAINTEXT_LEN} bytes (50 MiB) are accepted"),
    )
}

/// What a failed transfer answers (`ApiError::file_transfer`), logged with the bot.
fn transfer_error(bot: &Ctx, what: &str, e: FileError) -> ApiError {
    log::warn!("bot @{}: file {what} failed: {e}", bot.name);
    ApiError::file_transfer(what, e)
}

/// The MIME type of a part sent without a useful one (aiogram sends octet-stream, telegraf
/// none), from its name, else the kind's usual type.
fn guess_mime(filename: &str, kind: MediaKind) -> &'static str {
    let ext = filename.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "m4a" => "audio/mp4",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "txt" => "text/plain",
        "pdf" => "application/pdf",
        "json" => "application/json",
        _ => match kind {
            MediaKind::Photo => "image/jpeg",
            MediaKind::Audio => "audio/mpeg",
            MediaKind::Video => "video/mp4",
            MediaKind::Voice => "audio/ogg",
            MediaKind::Animation | MediaKind::VideoNote => "video/mp4",
            MediaKind::Sticker => "image/webp",
            MediaKind::Document => "application/octet-stream",
        },
    }
}

/// `getFile`: the File object with the relative `file_path` the download URL takes.
pub(super) fn get_file(bot: &Ctx, params: &Params) -> Result<Value, ApiError> {
    let file_id = params.required_str("file_id")?;
    let record = bot.store.read(|c| files::by_id(c, file_id.trim())).map_err(store_error)?.ok_or_else(unknown_file_id)?;
    Ok(types::file_json(&record.file_id, &record.file_unique_id, record.media.size, &file_path(&record)))
}

/// `<kind's folder>/<file_id>/<name>`: the file_id finds the file; the name, reduced to safe
/// characters, is there for the SDKs' download helpers, which take it as the local file name.
pub fn file_path(record: &FileRecord) -> String {
    let kind = MediaKind::of(&record.media);
    let folder = match kind {
        MediaKind::Photo => "photos",
        MediaKind::Document => "documents",
        MediaKind::Audio => "music",
        MediaKind::Video => "videos",
        MediaKind::Voice => "voice",
        MediaKind::Animation => "animations",
        MediaKind::VideoNote => "video_notes",
        MediaKind::Sticker => "stickers",
    };
    format!("{folder}/{}/{}", record.file_id, safe_name(&record.media.file_name, kind))
}

/// A file name of letters, digits, `.`, `-` and `_` only (others become `_`), no leading dot,
/// at most 64 bytes; the kind's name when nothing is left.
fn safe_name(name: &str, kind: MediaKind) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .skip_while(|c| *c == '.')
        .take(64)
        .collect();
    if cleaned.trim_matches(|c| c == '_' || c == '.').is_empty() {
        kind.name().to_string()
    } else {
        cleaned
    }
}

/// The download of `GET /file/bot<token>/<file_path>`: the file_id is the path's second
/// segment. The ciphertext is fetched and verified before this returns; the plaintext is made
/// only while the response is written.
pub fn download(bot: &Ctx, file_path: &str) -> Result<Download, ApiError> {
    let file_id = file_path.split('/').filter(|s| !s.is_empty()).nth(1).unwrap_or_default();
    let record = match file_id {
        "" => None,
        id => bot.store.read(|c| files::by_id(c, id)).map_err(store_error)?,
    };
    let record = record.ok_or_else(|| ApiError::not_found("file not found: its file_id is unknown to this gateway"))?;
    let m = &record.media;
    let Some(source) = FileSource::of(m) else {
        return Err(ApiError::internal(format!("stored file {} is malformed", record.file_id)));
    };
    let verified = download_verified(bot.port.files(), &source, bot.store.directory())
        .map_err(|e| transfer_error(bot, "download", e))?;
    let content_type = if m.mime_type.is_empty() { "application/octet-stream".to_string() } else { m.mime_type.clone() };
    Ok(Download {
        content_type,
        file_name: safe_name(&m.file_name, MediaKind::of(m)),
        len: verified.len,
        write: Box::new(move |out| verified.write_plaintext(out).map(|_| ()).map_err(std::io::Error::other)),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{bad, bot, form, p, with_media_from_urls};
    use super::*;
    use crate::wire::e2e::media::Kind as E2eKind;
    use crate::gateway::botapi::params::UploadedFile;

    #[test]
    fn the_media_parameter_is_a_part_an_attachment_or_a_file_id_and_a_url_only_when_allowed() {
        let off = MediaFromUrls::default();
        let mut params = form(&[("photo", "attach://x1")]);
        let part = UploadedFile::in_memory("a.jpg", None, b"jpeg".to_vec());
        params.insert_file("x1", part.clone());
        assert_eq!(media_source(&params, "photo", &off).expect("attach"), Source::Upload(&part));
        let mut direct = Params::new();
        direct.insert_file("voice", part.clone());
        assert_eq!(media_source(&direct, "voice", &off).expect("direct part"), Source::Upload(&part));
        assert_eq!(media_source(&form(&[("document", "AbC-_1")]), "document", &off).expect("id"), Source::FileId("AbC-_1".into()));
        let e = bad(media_source(&form(&[("photo", "https://example.com/a.jpg")]), "photo", &off));
        assert_eq!(
            e,
            "Bad Request: photo: external URLs are not supported unless the gateway's operator sets \
             media_from_urls {\"enabled\": true} in its config; upload the file or send a file_id"
        );
        assert!(bad(media_source(&form(&[("photo", "HTTP://x")]), "photo", &off)).contains("external URLs"));
        assert!(bad(media_source(&form(&[("photo", "attach://missing")]), "photo", &off)).contains("names no file part"));
        assert!(bad(media_source(&Params::new(), "audio", &off)).contains("audio is required"));

        let on = MediaFromUrls { enabled: true, ..Default::default() };
        let url = url::Url::parse("https://example.com/a.jpg?k=1").expect("url");
        assert_eq!(media_source(&form(&[("photo", " https://example.com/a.jpg?k=1 ")]), "photo", &on).expect("a URL"), Source::Url("photo".into(), url));
        let e = bad(media_source(&form(&[("photo", "http://exa mple.com/")]), "photo", &on));
        assert!(e.starts_with("Bad Request: wrong file identifier/HTTP URL specified: photo: not a valid URL"), "{e}");
        // Switched on, other schemes are what they were.
        assert!(bad(media_source(&form(&[("photo", "file:///etc/passwd")]), "photo", &on)).contains("local file paths are not supported"));
        assert_eq!(media_source(&form(&[("document", "AbC-_1")]), "document", &on).expect("id"), Source::FileId("AbC-_1".into()));
    }

    #[test]
    fn a_file_by_url_is_refused_before_anything_reaches_the_platform() {
        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let bot = with_media_from_urls(bot, MediaFromUrls { enabled: true, ..Default::default() });
        let params = form(&[("photo", "http://127.0.0.1:9/cat.png")]);
        let request = MediaRequest::read(&bot.sending(), &params, MediaKind::Photo, "photo").expect("read");
        let e = bad(request.into_media(&bot.sending()));
        assert!(e.starts_with("Bad Request: failed to get HTTP URL content: photo: 127.0.0.1 is a loopback address"), "{e}");
        assert!(fake.calls_of("upload_file").is_empty(), "nothing was uploaded");
    }

    #[test]
    fn a_file_by_url_is_stored_and_served_like_an_upload() {
        use crate::gateway::api::url_media::tests::{Server, PNG};
        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let bot = with_media_from_urls(bot, MediaFromUrls { enabled: true, allow_hosts: vec!["localhost".into()], max_bytes: None });
        let server = Server::start();
        let params = form(&[("photo", server.url("localhost", "/cat.png").as_str())]);
        let media = MediaRequest::read(&bot.sending(), &params, MediaKind::Photo, "photo").expect("read").into_media(&bot.sending()).expect("sent");
        assert_eq!((media.mime_type.as_str(), media.file_name.as_str(), media.size), ("image/png", "cat.png", PNG.len() as u64));
        assert_eq!(fake.stored_files(), 1);
        let record = bot.store.write(move |c| files::issue(c, &media, 0)).expect("issued");
        assert_eq!(downloaded(&bot, &record).expect("download"), PNG);

        // An album fetches every item before it stores any: a refused item leaves nothing.
        let items = [(MediaKind::Document, "/cat.png"), (MediaKind::Photo, "/notes.txt")]
            .map(|(kind, path)| (kind, form(&[("media", server.url("localhost", path).as_str())])));
        let fetched: Result<Vec<_>, _> = items
            .iter()
            .map(|(kind, item)| MediaRequest::read(&bot.sending(), item, *kind, "media").expect("read").fetched(&bot.sending()))
            .collect();
        let e = bad(fetched.map(|_| ()));
        assert!(e.starts_with("Bad Request: wrong type of the web page content: media: the content is not a JPEG"), "{e}");
        assert_eq!(fake.stored_files(), 1, "the first item's upload was cancelled, not stored");
    }

    #[test]
    fn file_paths_are_relative_and_safe() {
        let record = |name: &str, kind: E2eKind| FileRecord {
            file_id: "ID".into(),
            file_unique_id: "U".into(),
            media: Media { file_name: name.into(), kind: kind.into(), ..Default::default() },
        };
        assert_eq!(file_path(&record("report 1.pdf", E2eKind::DOCUMENT)), "documents/ID/report_1.pdf");
        assert_eq!(file_path(&record("../../etc/passwd", E2eKind::PHOTO)), "photos/ID/_.._etc_passwd");
        assert_eq!(file_path(&record("", E2eKind::VOICE)), "voice/ID/voice");
        assert_eq!(file_path(&record("..", E2eKind::AUDIO)), "music/ID/audio");
        assert_eq!(file_path(&record("élan.mp4", E2eKind::VIDEO)), "videos/ID/_lan.mp4");
    }

    #[test]
    fn unknown_file_ids_are_refused_before_any_transfer() {
        let (_dir, bot) = bot();
        let e = bad(get_file(&bot.ctx(), &p(json!({"file_id": "nope"}))));
        assert!(e.contains("file_id is unknown"), "{e}");
        let e = download(&bot.ctx(), "documents/nope/a.txt").err().expect("unknown");
        assert_eq!(e.status, 404);
        assert!(download(&bot.ctx(), "").is_err());
    }

    /// A file sent by the bot: uploaded to the fake platform and issued a file_id.
    fn sent(bot: &BotShared, plaintext: &[u8]) -> FileRecord {
        let part = UploadedFile::in_memory("report.txt", None, plaintext.to_vec());
        let media = upload(&bot.ctx(), &part, MediaKind::Document).expect("upload");
        bot.store.write(move |c| files::issue(c, &media, 0)).expect("issue")
    }

    fn downloaded(bot: &BotShared, record: &FileRecord) -> Result<Vec<u8>, ApiError> {
        let download = download(&bot.ctx(), &file_path(record))?;
        let mut out = Vec::new();
        (download.write)(&mut out).expect("write");
        assert_eq!(download.len, out.len() as u64);
        Ok(out)
    }

    #[test]
    fn a_file_reaches_the_platform_encrypted_and_comes_back_verified() {
        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let plaintext: Vec<u8> = b"quarterly figures ".iter().copied().cycle().take(600_000).collect();
        let record = sent(&bot, &plaintext);
        assert_eq!(fake.calls_of("upload_file").len(), 1);
        let stored = fake.stored_file(&record.media.file_ref).expect("the platform keeps the file");
        assert!(stored.len() as u64 > plaintext.len() as u64, "ciphertext carries tags");
        assert!(!stored.windows(18).any(|w| w == b"quarterly figures "), "no plaintext reaches the platform");
        assert_eq!((record.media.mime_type.as_str(), record.media.size), ("text/plain", plaintext.len() as u64));
        assert_eq!(downloaded(&bot, &record).expect("download"), plaintext);
        let asked = fake.calls_of("download_file");
        assert_eq!(asked[0].request::<crate::wire::platform::DownloadFileRequest>().file_ref, record.media.file_ref);
    }

    #[test]
    fn a_file_the_platform_changed_or_cut_short_is_refused_before_any_plaintext() {
        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let record = sent(&bot, &[7u8; 300_000]);
        let file_ref = &record.media.file_ref;
        let honest = fake.stored_file(file_ref).expect("stored");
        let mut flipped = honest.clone();
        flipped[1000] ^= 1;
        for (what, bytes) in [("one bit flipped", flipped), ("cut short", honest[..honest.len() - 100].to_vec())] {
            fake.replace_file(file_ref, bytes);
            let e = downloaded(&bot, &record).expect_err(what);
            assert_eq!(e.status, 502, "{what}: {e}");
            assert!(e.description.contains("file download failed"), "{what}: {e}");
        }
        fake.replace_file(file_ref, honest);
        assert_eq!(downloaded(&bot, &record).expect("the honest bytes again"), vec![7u8; 300_000]);
    }

    #[test]
    fn a_streamed_part_is_kept_only_once_a_method_uses_it() {
        let (_dir, bot, fake) = crate::gateway::runtime::test_bot_on_fake(crate::gateway::config::DEFAULT_SEND_WAIT);
        let unused = bot.take(&mut &[1u8; 70_000][..]).expect("stream");
        drop(unused);
        let used = bot.take(&mut &[2u8; 70_000][..]).expect("stream");
        assert_eq!(fake.stored_files(), 0, "nothing is kept while the request is read");
        let first = used.store().expect("store");
        assert_eq!(used.store().expect("a part used twice"), first, "one file");
        assert_eq!((fake.stored_files(), fake.calls_of("upload_file").len()), (1, 2));
        assert_eq!(first.size, 70_000);
    }

    #[test]
    fn mime_types_come_from_the_part_or_the_name() {
        assert_eq!(guess_mime("x.JPG", MediaKind::Document), "image/jpeg");
        assert_eq!(guess_mime("voice", MediaKind::Voice), "audio/ogg");
        assert_eq!(guess_mime("data.bin", MediaKind::Document), "application/octet-stream");
    }
}
