//! The files this gateway knows (received from users or sent by the bot) and the `file_id`s
//! it issued for them. A `file_id` is random and opaque: it is neither the platform's
//! reference nor the key, so a leaked id reveals nothing and is useful only to this gateway.
//! One id per platform file: the same file seen twice (forwarded, copied, sent again by id)
//! keeps its id.

use protobuf::Message as _;
use rusqlite::{params, Connection, OptionalExtension};

use super::{Result, StoreError};
use crate::wire::e2e::content::Body;
use crate::wire::e2e::{Content, Media};

/// A file as the Bot API sees it.
#[derive(Debug, Clone)]
pub struct FileRecord {
    pub file_id: String,
    /// Stable per file content: hex of the first 8 bytes of the ciphertext's digest.
    pub file_unique_id: String,
    /// The file's fields, caption cleared.
    pub media: Media,
}

/// `file_unique_id` of a file with this ciphertext digest.
pub fn unique_id(digest: &[u8]) -> String {
    crate::crypto::hex_encode(&digest[..digest.len().min(8)])
}

/// The file's record, issuing a new `file_id` when this platform file was never seen.
pub fn issue(conn: &Connection, media: &Media, now: i64) -> Result<FileRecord> {
    if let Some(known) = by_ref(conn, &media.file_ref)? {
        return Ok(known);
    }
    if media.file_ref.is_empty() || crate::e2e::file::FileSource::of(media).is_none() {
        return Err(StoreError::Refused(
            "a file needs a reference, a 32-byte key and a 32-byte digest in a known algorithm".into(),
        ));
    }
    let mut stored = media.clone();
    stored.caption = Default::default();
    let bytes = stored.write_to_bytes().map_err(|e| StoreError::Corrupt(format!("encode file: {e}")))?;
    let file_id = crate::crypto::base64url_encode(&crate::crypto::random_bytes::<16>());
    conn.prepare_cached("INSERT INTO files (file_id, file_ref, media, created_at) VALUES (?1, ?2, ?3, ?4)")?.execute(params![file_id, media.file_ref, bytes, now])?;
    Ok(FileRecord { file_unique_id: unique_id(&stored.digest), file_id, media: stored })
}

/// Issues a `file_id` for the file a message carries, if it carries one and none was issued:
/// before its update is built, which names it.
pub fn issue_carried(conn: &Connection, content: &Content, now: i64) -> Result<()> {
    if let Some(Body::Media(media)) = &content.body {
        issue(conn, media, now)?;
    }
    Ok(())
}

/// The record of an issued `file_id`.
pub fn by_id(conn: &Connection, file_id: &str) -> Result<Option<FileRecord>> {
    let row: Option<(String, Vec<u8>)> = conn.prepare_cached("SELECT file_id, media FROM files WHERE file_id = ?1")?.query_row(params![file_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    row.map(decode).transpose()
}

/// The record of a platform file, if an id was issued for it.
pub fn by_ref(conn: &Connection, file_ref: &str) -> Result<Option<FileRecord>> {
    let row: Option<(String, Vec<u8>)> = conn.prepare_cached("SELECT file_id, media FROM files WHERE file_ref = ?1")?.query_row(params![file_ref], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    row.map(decode).transpose()
}

fn decode((file_id, bytes): (String, Vec<u8>)) -> Result<FileRecord> {
    let media = Media::parse_from_bytes(&bytes).map_err(|e| StoreError::Corrupt(format!("stored file {file_id}: {e}")))?;
    Ok(FileRecord { file_unique_id: unique_id(&media.digest), file_id, media })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::e2e::Text;

    #[test]
    fn one_opaque_id_per_platform_file() {
        crate::crypto::init();
        let c = Connection::open_in_memory().expect("db");
        crate::migrations::migrate(&c, super::super::schema::STEPS).expect("schema");
        let media = Media {
            file_ref: "ref-1".into(),
            key: vec![7; 32],
            digest: (0u8..32).collect(),
            size: 5,
            file_name: "a.txt".into(),
            caption: protobuf::MessageField::some(Text { text: "secret caption".into(), ..Default::default() }),
            ..Default::default()
        };
        let first = issue(&c, &media, 1).expect("issue");
        assert_eq!(first.file_id.len(), 22, "16 random bytes in base64url");
        assert!(!first.file_id.contains("ref-1"));
        assert_eq!(first.file_unique_id, "0001020304050607");
        assert!(first.media.caption.is_none(), "captions belong to messages, not files");
        assert_eq!(issue(&c, &media, 2).expect("again").file_id, first.file_id);
        let found = by_id(&c, &first.file_id).expect("read").expect("known");
        assert_eq!((found.media.key, found.media.size), (vec![7; 32], 5));
        assert!(by_id(&c, "nope").expect("read").is_none());
        let other = Media { file_ref: "ref-2".into(), ..media.clone() };
        assert_ne!(issue(&c, &other, 3).expect("issue").file_id, first.file_id);
        assert!(issue(&c, &Media { file_ref: "ref-3".into(), key: vec![], ..media }, 4).is_err());
    }
}
