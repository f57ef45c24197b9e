//! Files in a dialog (photos, documents, audio, video, voice, animations, video notes,
//! stickers), alone or as an album: sending one streams it through
//! `e2e::file::upload_encrypted` (never whole in memory) and sends a `Media` content that
//! carries the reference, key and digest; downloading one verifies the whole ciphertext
//! before a plaintext byte is written, then writes `OUT.part` (0600) and renames it to `OUT`
//! only once it is complete. Plaintext touches disk only at the path the person chose.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::error::{ClientError, Result};
use super::history;
use super::group::SentGroupMessage;
use super::message::{GroupId, MediaInfo, MediaKind, SentMessage};
use super::profile::Profile;
use crate::crypto::file::MAX_PLAINTEXT_LEN;
use crate::e2e::file::{download_verified, upload_encrypted, FileSource, VerifiedFile};
use crate::wire::e2e::{Content, Media, Text};
use crate::wire::platform::Profile as PeerProfile;

/// The largest file a profile sends (plaintext bytes): the platform's limit, checked before
/// anything is uploaded.
pub const MAX_FILE_SIZE: u64 = MAX_PLAINTEXT_LEN;
/// Files in one album, as the Bot API's sendMediaGroup allows.
pub const ALBUM_MIN: usize = 2;
pub const ALBUM_MAX: usize = 10;

impl Profile {
    /// Sends the file at `path` to `peer` as `kind` (`None`: guessed from the extension, see
    /// [`guess_kind`]) with an optional plain-text caption.
    pub fn send_file(&self, peer: &str, path: &Path, kind: Option<MediaKind>, caption: &str) -> Result<SentMessage> {
        let peer = self.file_peer(peer)?;
        let mut content = Content::new();
        content.set_media(self.upload_media(path, kind, caption)?);
        self.send_content(&peer, &content)
    }

    /// Sends 2 to 10 files to `peer` as one album: each its own message, all with one
    /// `media_group_id`; the caption goes with the first, as clients show an album's caption.
    /// Every file is checked and uploaded before the first message is sent.
    pub fn send_album(&self, peer: &str, paths: &[PathBuf], kind: Option<MediaKind>, caption: &str) -> Result<Vec<SentMessage>> {
        if !(ALBUM_MIN..=ALBUM_MAX).contains(&paths.len()) {
            return Err(ClientError::Invalid(format!("an album has {ALBUM_MIN} to {ALBUM_MAX} files, not {}", paths.len())));
        }
        let peer = self.file_peer(peer)?;
        let media = paths
            .iter()
            .enumerate()
            .map(|(i, path)| self.upload_media(path, kind, if i == 0 { caption } else { "" }))
            .collect::<Result<Vec<_>>>()?;
        let group_id = crate::crypto::hex_encode(&crate::crypto::random_bytes::<8>());
        media
            .into_iter()
            .map(|m| {
                let mut content = Content::new();
                content.set_media(m);
                content.media_group_id = group_id.clone();
                self.send_content(&peer, &content)
            })
            .collect()
    }

    /// Sends the file at `path` into `group`, its key inside the MLS application message as in
    /// a dialog: every member can fetch and open it.
    pub fn send_group_file(&self, group: &GroupId, path: &Path, kind: Option<MediaKind>, caption: &str) -> Result<SentGroupMessage> {
        let mut content = Content::new();
        content.set_media(self.upload_media(path, kind, caption)?);
        self.send_group_content(group, &content)
    }

    /// Downloads the file of group message `message_id`, as [`Profile::download`] does.
    pub fn download_group(&self, group: &GroupId, message_id: u64, out: &Path) -> Result<u64> {
        let content = history::load(&self.conn, history::group_peer(&group.0), message_id)?
            .ok_or_else(|| ClientError::Invalid(format!("no message {message_id} of group {group} is known to this profile")))?;
        self.download_content(&content, &format!("message {message_id} of group {group}"), out)
    }

    /// The peer a file goes to; an unknown one is refused before any upload.
    fn file_peer(&self, peer: &str) -> Result<PeerProfile> {
        let peer = self.lookup(peer)?;
        if peer.user_id == self.user_id() {
            return Err(ClientError::Invalid("cannot send a message to yourself".to_string()));
        }
        Ok(peer)
    }

    /// Checks, encrypts and uploads the file at `path`: the `Media` that names it.
    fn upload_media(&self, path: &Path, kind: Option<MediaKind>, caption: &str) -> Result<Media> {
        let shown = path.display();
        let io_err = |what: &str| {
            let what = format!("{what} {shown}");
            move |source| ClientError::Io { what, source }
        };
        self.outside_profile(path, "sent")?;
        let mut file = File::open(path).map_err(io_err("opening"))?;
        let meta = file.metadata().map_err(io_err("reading"))?;
        if !meta.is_file() {
            return Err(ClientError::Invalid(format!("{shown} is not a regular file")));
        }
        if meta.len() > MAX_FILE_SIZE {
            return Err(ClientError::Invalid(format!(
                "{shown} is {} bytes; files up to {} MiB can be sent",
                meta.len(),
                MAX_FILE_SIZE / (1024 * 1024)
            )));
        }
        let kind = kind.unwrap_or_else(|| guess_kind(path));
        let (width, height) = if matches!(kind, MediaKind::Photo | MediaKind::Sticker) {
            image_size(&mut file).map_err(io_err("reading"))?
        } else {
            (0, 0)
        };

        let uploaded = upload_encrypted(&self.platform, BufReader::new(file))
            .map_err(|source| ClientError::File { what: format!("uploading {shown}"), source })?;
        let mut media = uploaded.to_media();
        media.kind = kind.to_wire().into();
        media.mime_type = guess_mime(path).to_string();
        media.file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        media.width = width;
        media.height = height;
        if !caption.is_empty() {
            let mut t = Text::new();
            t.text = caption.to_string();
            media.caption = protobuf::MessageField::some(t);
        }
        Ok(media)
    }

    /// Downloads the file of message `message_id` that `peer` sent, verifies it whole, and
    /// only then writes it to `out` (through `out.part`, renamed on success). Returns the
    /// plaintext size. On any failure `out` is untouched and no `.part` is left.
    pub fn download(&self, peer: &str, message_id: u64, out: &Path) -> Result<u64> {
        let peer = self.lookup(peer)?;
        let name = peer.username.as_str();
        let content = history::load(&self.conn, peer.user_id, message_id)?
            .ok_or_else(|| ClientError::Invalid(format!("no message {message_id} from @{name} is known to this profile")))?;
        self.download_content(&content, &format!("message {message_id} from @{name}"), out)
    }

    /// The file of remembered message `message_id` of conversation `peer_key` (a dialog's
    /// peer user id, or `history::group_peer` of a group), received or sent by us: fetched and
    /// checked whole, ready to be decrypted with every chunk verified
    /// (`VerifiedFile::write_plaintext`); with what the message says of it. No plaintext exists
    /// until it is written.
    pub fn verified_file(&self, peer_key: u64, message_id: u64) -> Result<(MediaInfo, VerifiedFile)> {
        let received = history::load(&self.conn, peer_key, message_id)?;
        let content = match received {
            Some(content) => Some(content),
            None => history::load_sent(&self.conn, peer_key, message_id)?,
        }
        .ok_or_else(|| ClientError::Invalid(format!("no message {message_id} of this conversation is known to this profile")))?;
        let verified = self.fetch_verified(&content, &format!("message {message_id}"))?;
        Ok((MediaInfo::from_wire(content.media()), verified))
    }

    /// The ciphertext of a remembered message's file (`message`: which, for errors), fetched
    /// into the private profile directory, unlinked, and checked whole against its digest.
    fn fetch_verified(&self, content: &Content, message: &str) -> Result<VerifiedFile> {
        if !content.has_media() {
            return Err(ClientError::Invalid(format!("{message} carries no file")));
        }
        let what = || format!("the file of {message}");
        let source = FileSource::of(content.media()).ok_or_else(|| {
            ClientError::Invalid(format!("{} has a damaged key or digest, or a digest this version does not know", what()))
        })?;
        download_verified(&self.platform, &source, self.dir())
            .map_err(|source| ClientError::File { what: format!("downloading {}", what()), source })
    }

    /// The file of a remembered message (`message`: which, for errors), checked whole, then
    /// decrypted (every chunk verified) into `out.part`, renamed to `out` only when all was.
    fn download_content(&self, content: &Content, message: &str, out: &Path) -> Result<u64> {
        self.outside_profile(out, "written")?;
        let what = || format!("the file of {message}");
        let verified = self.fetch_verified(content, message)?;

        let part = part_path(out);
        let written = write_part(&part, |f| {
            verified
                .write_plaintext(f)
                .map_err(|e| io::Error::other(format!("decrypting: {e}")))
        })
        .and_then(|n| fs::rename(&part, out).map(|()| n));
        match written {
            Ok(n) => Ok(n),
            Err(source) => {
                let _ = fs::remove_file(&part);
                Err(ClientError::Io { what: format!("writing {} to {}", what(), out.display()), source })
            }
        }
    }
}

impl Profile {
    /// Refuses a path inside the profile directory: its database must only ever be opened by
    /// SQLite (a descriptor of it opened and closed elsewhere in this process drops SQLite's
    /// locks: "How To Corrupt An SQLite Database File", 2.2), a download must not replace it, and
    /// sending it would hand a peer this device's secrets.
    fn outside_profile(&self, path: &Path, what: &str) -> Result<()> {
        // A path that does not exist yet (a download's target) is judged by its directory.
        let resolved = match path.canonicalize() {
            Ok(p) => p,
            Err(_) => {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                let name = path.file_name().unwrap_or_default();
                parent.canonicalize().map(|p| p.join(name)).unwrap_or_else(|_| path.to_path_buf())
            }
        };
        let profile = self.dir().canonicalize().unwrap_or_else(|_| self.dir().to_path_buf());
        if resolved.starts_with(&profile) {
            return Err(ClientError::Invalid(format!(
                "{} is inside the profile directory {}: a file there is never {what}",
                path.display(),
                self.dir().display()
            )));
        }
        Ok(())
    }
}

/// `OUT.part`, beside `OUT`.
fn part_path(out: &Path) -> PathBuf {
    let mut s = OsString::from(out.as_os_str());
    s.push(".part");
    PathBuf::from(s)
}

/// Writes a fresh private (0600) file at `part` with `fill`, synced to disk.
fn write_part(part: &Path, fill: impl FnOnce(&mut BufWriter<&File>) -> io::Result<u64>) -> io::Result<u64> {
    // A `.part` from an earlier, interrupted run is replaced, never appended to or reused
    // with its old permissions.
    match fs::remove_file(part) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(part)?;
    let mut w = BufWriter::new(&file);
    let n = fill(&mut w)?;
    w.flush()?;
    drop(w);
    file.sync_all()?;
    Ok(n)
}

/// The lower-case extension of `path`, if any.
fn extension(path: &Path) -> String {
    path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default()
}

/// The kind a file is sent as without `--as`: images are photos, .ogg/.oga voice, .mp3/.m4a
/// audio, .mp4 video, anything else a document.
pub fn guess_kind(path: &Path) -> MediaKind {
    match extension(path).as_str() {
        "png" | "jpg" | "jpeg" | "gif" | "webp" => MediaKind::Photo,
        "ogg" | "oga" => MediaKind::Voice,
        "mp3" | "m4a" => MediaKind::Audio,
        "mp4" => MediaKind::Video,
        _ => MediaKind::Document,
    }
}

/// The MIME type of a file by its extension; `application/octet-stream` when unknown.
pub fn guess_mime(path: &Path) -> &'static str {
    match extension(path).as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ogg" | "oga" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "mp4" => "video/mp4",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "csv" => "text/csv",
        "json" => "application/json",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

/// Width and height of a PNG or GIF read from its first bytes (0, 0 for anything else: other
/// formats would need a real decoder); leaves `file` at its start.
fn image_size(file: &mut File) -> io::Result<(u32, u32)> {
    let mut head = [0u8; 24];
    let n = crate::crypto::file::read_full(file, &mut head)?;
    file.seek(SeekFrom::Start(0))?;
    Ok(image_size_from_header(&head[..n]))
}

fn image_size_from_header(h: &[u8]) -> (u32, u32) {
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if h.len() >= 24 && h.starts_with(b"\x89PNG\r\n\x1a\n") && &h[12..16] == b"IHDR" {
        return (be(&h[16..20]), be(&h[20..24]));
    }
    if h.len() >= 10 && (h.starts_with(b"GIF87a") || h.starts_with(b"GIF89a")) {
        let le = |b: &[u8]| u32::from(u16::from_le_bytes([b[0], b[1]]));
        return (le(&h[6..8]), le(&h[8..10]));
    }
    (0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_types_come_from_the_extension() {
        let k = |p: &str| guess_kind(Path::new(p));
        assert_eq!(k("a/report.PNG"), MediaKind::Photo);
        assert_eq!(k("x.jpeg"), MediaKind::Photo);
        assert_eq!(k("note.oga"), MediaKind::Voice);
        assert_eq!(k("song.m4a"), MediaKind::Audio);
        assert_eq!(k("clip.mp4"), MediaKind::Video);
        assert_eq!(k("report.pdf"), MediaKind::Document);
        assert_eq!(k("Makefile"), MediaKind::Document);
        assert_eq!(guess_mime(Path::new("x.JPG")), "image/jpeg");
        assert_eq!(guess_mime(Path::new("x.mp3")), "audio/mpeg");
        assert_eq!(guess_mime(Path::new("x")), "application/octet-stream");
    }

    #[test]
    fn png_and_gif_sizes_are_read_from_the_header() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        assert_eq!(image_size_from_header(&png), (640, 480));
        assert_eq!(image_size_from_header(b"GIF89a\x20\x03\x58\x02"), (800, 600));
        assert_eq!(image_size_from_header(b"\xff\xd8\xff\xe0"), (0, 0), "JPEG: unknown");
        assert_eq!(image_size_from_header(&png[..20]), (0, 0), "cut short");
    }

    #[test]
    fn the_part_file_sits_beside_the_output() {
        assert_eq!(part_path(Path::new("/tmp/out.png")), PathBuf::from("/tmp/out.png.part"));
    }
}
