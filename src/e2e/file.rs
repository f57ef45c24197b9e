//! Encrypted files over the platform, for every sender and receiver of media (the gateway's
//! media methods and `e2e-chat`): [`begin_upload`] encrypts while uploading and
//! [`PendingUpload::commit`] has the platform store the file ([`upload_encrypted`] does both);
//! [`download_verified`] releases plaintext only once everything has been verified.
//!
//! Here rather than in `client`, because the gateway needs it too and must not depend on the
//! user client; it is the one part of `e2e` that talks to the platform itself (through a
//! [`FileTransport`]: the gRPC channel, or the gateway's fake platform in tests), because a
//! file is streamed, never held in memory, so the caller cannot hand bytes in and out the way
//! it does for envelopes. The key, the digest and its algorithm returned by an upload are what
//! the end-to-end message carries to the recipient ([`UploadedFile::to_media`],
//! [`FileSource::of`]).
//!
//! Each transfer overlaps its steps on two threads, joined before the call returns (scoped):
//! an upload encrypts on the caller's thread while `file-send#<n>` sends the chunks (gRPC takes
//! one message of a call at a time); serving a download decrypts on `file-dec#<n>` while the
//! caller writes. Bounded queues of 4 chunks sit between them. A download reuses its buffers:
//! each chunk received is read into the last one's, each written piece goes back to be
//! decrypted into (a buffer per chunk was a fresh mapping to fault in, `crate::memory`).
//!
//! A download keeps the ciphertext in a private temporary file, unlinked as soon as it is
//! created (nothing is left behind, even after a crash), checks the digest of every byte, the
//! length and the first chunk, and only then hands out a [`VerifiedFile`], which decrypts once
//! on its way out, every chunk verified: no plaintext touches disk, and nothing the platform
//! changed is released (see [`download_verified`]).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use futures::StreamExt;

use crate::crypto::file::{
    self as file_crypto, CiphertextHash, Decryptor, DigestAlgorithm, FileCryptoError, FileDigest, FileKey, MAX_CIPHERTEXT_LEN,
};
use crate::wire::e2e::media::DigestAlgorithm as WireDigestAlgorithm;
use crate::wire::e2e::media::Kind as WireMediaKind;
use crate::wire::e2e::Media;
use crate::wire::platform as pb;

use super::file_transport::reuse_chunk_buffer;
pub use super::file_transport::{ChunkStream, FileTransport, UploadCall, TRANSFER_TIMEOUT};

/// Ciphertext bytes per `FileChunk` sent (the platform accepts up to 256 KiB). Under the
/// gateway's mmap threshold, so that each chunk's buffer comes from the heap: at 256 KiB every
/// chunk was a fresh mapping, and a `sendDocument` of 50 MiB ran at 22-31% of secretstream
/// instead of 35-43% (`bench_files`).
const UPLOAD_CHUNK: usize = 112 * 1024;
const _: () = assert!(UPLOAD_CHUNK < crate::memory::MMAP_THRESHOLD);

/// A file stored on the platform, and what its recipients need to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedFile {
    /// The platform's reference of the ciphertext.
    pub file_ref: String,
    pub key: FileKey,
    /// Of the ciphertext.
    pub digest: FileDigest,
    /// Plaintext bytes.
    pub size: u64,
    /// Ciphertext bytes stored on the platform.
    pub stored_size: u64,
}

impl UploadedFile {
    /// A media message naming this file: reference, key, digest and its algorithm, size (the
    /// caller adds kind, type, name and the rest).
    pub fn to_media(&self) -> Media {
        Media {
            file_ref: self.file_ref.clone(),
            key: self.key.0.to_vec(),
            digest: self.digest.bytes.to_vec(),
            digest_algorithm: wire_algorithm(self.digest.algorithm).into(),
            size: self.size,
            ..Default::default()
        }
    }

    /// Where the file is and how to check it, as a recipient learns it from the message.
    pub fn source(&self) -> FileSource {
        FileSource { file_ref: self.file_ref.clone(), key: self.key.clone(), digest: self.digest }
    }
}

/// The kinds of file a media message carries, named as the Bot API names them: one enum for
/// the gateway's updates and send methods and for `e2e-chat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaKind {
    Photo,
    Document,
    Audio,
    Video,
    Voice,
    Animation,
    VideoNote,
    Sticker,
}

impl MediaKind {
    pub const ALL: [MediaKind; 8] = [
        MediaKind::Photo,
        MediaKind::Document,
        MediaKind::Audio,
        MediaKind::Video,
        MediaKind::Voice,
        MediaKind::Animation,
        MediaKind::VideoNote,
        MediaKind::Sticker,
    ];

    /// "photo", "document", ...: the Bot API's Message field and send parameter, and
    /// `e2e-chat send-file --as` values.
    pub fn name(self) -> &'static str {
        match self {
            MediaKind::Photo => "photo",
            MediaKind::Document => "document",
            MediaKind::Audio => "audio",
            MediaKind::Video => "video",
            MediaKind::Voice => "voice",
            MediaKind::Animation => "animation",
            MediaKind::VideoNote => "video_note",
            MediaKind::Sticker => "sticker",
        }
    }

    pub fn from_name(name: &str) -> Option<MediaKind> {
        MediaKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind a media message says (an unknown value, from a newer sender: a document).
    pub fn of(media: &Media) -> MediaKind {
        match media.kind.enum_value_or_default() {
            WireMediaKind::PHOTO => MediaKind::Photo,
            WireMediaKind::DOCUMENT => MediaKind::Document,
            WireMediaKind::AUDIO => MediaKind::Audio,
            WireMediaKind::VIDEO => MediaKind::Video,
            WireMediaKind::VOICE => MediaKind::Voice,
            WireMediaKind::ANIMATION => MediaKind::Animation,
            WireMediaKind::VIDEO_NOTE => MediaKind::VideoNote,
            WireMediaKind::STICKER => MediaKind::Sticker,
        }
    }

    pub fn to_wire(self) -> WireMediaKind {
        match self {
            MediaKind::Photo => WireMediaKind::PHOTO,
            MediaKind::Document => WireMediaKind::DOCUMENT,
            MediaKind::Audio => WireMediaKind::AUDIO,
            MediaKind::Video => WireMediaKind::VIDEO,
            MediaKind::Voice => WireMediaKind::VOICE,
            MediaKind::Animation => WireMediaKind::ANIMATION,
            MediaKind::VideoNote => WireMediaKind::VIDEO_NOTE,
            MediaKind::Sticker => WireMediaKind::STICKER,
        }
    }
}

fn wire_algorithm(algorithm: DigestAlgorithm) -> WireDigestAlgorithm {
    match algorithm {
        DigestAlgorithm::Blake2b256 => WireDigestAlgorithm::BLAKE2B_256,
        DigestAlgorithm::Blake3 => WireDigestAlgorithm::BLAKE3,
    }
}

/// Where a media message's file is and how to check it: what [`download_verified`] needs.
#[derive(Debug, Clone)]
pub struct FileSource {
    pub file_ref: String,
    pub key: FileKey,
    pub digest: FileDigest,
}

impl FileSource {
    /// The file of `media`; `None` when its key or digest is not 32 bytes or its digest
    /// algorithm is one this version does not know (a newer sender's).
    pub fn of(media: &Media) -> Option<FileSource> {
        let algorithm = match media.digest_algorithm.enum_value() {
            Ok(WireDigestAlgorithm::BLAKE2B_256) => DigestAlgorithm::Blake2b256,
            Ok(WireDigestAlgorithm::BLAKE3) => DigestAlgorithm::Blake3,
            Err(_) => return None,
        };
        Some(FileSource {
            file_ref: media.file_ref.clone(),
            key: FileKey(media.key.as_slice().try_into().ok()?),
            digest: FileDigest { algorithm, bytes: media.digest.as_slice().try_into().ok()? },
        })
    }
}

/// A downloaded file whose ciphertext matched its digest and whose first chunk authenticated
/// ([`download_verified`]). It holds the CIPHERTEXT (an unlinked private file): the plaintext
/// never touches disk, it is decrypted once, on its way out (`write_plaintext`), every chunk
/// and the FINAL tag verified as it goes.
#[derive(Debug)]
pub struct VerifiedFile {
    ciphertext: File,
    key: FileKey,
    /// Plaintext bytes.
    pub len: u64,
}

impl VerifiedFile {
    /// Decrypts into `out` (an HTTP response, the user's file), chunk by chunk: a scoped
    /// thread decrypts while this one writes what it decrypted, so decrypting and writing
    /// overlap. If `out` fails, the decryption stops.
    pub fn write_plaintext(mut self, mut out: impl Write) -> Result<u64, FileError> {
        self.ciphertext.seek(SeekFrom::Start(0)).map_err(FileError::Io)?;
        let (pieces, decrypted) = crossbeam_channel::bounded::<Vec<u8>>(DECRYPT_QUEUE);
        // Written pieces go back to be decrypted into again: no buffer per chunk.
        let (written_tx, written_rx) = crossbeam_channel::bounded::<Vec<u8>>(DECRYPT_QUEUE);
        let number = TRANSFERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let VerifiedFile { ciphertext, key, len: expected } = self;
        std::thread::scope(|scope| {
            let decryptor = std::thread::Builder::new()
                .name(format!("file-dec#{number}"))
                .spawn_scoped(scope, move || {
                    // A closed queue: the writer hung up (its error is the one reported).
                    let hung_up = |_| io::Error::other("the plaintext's reader went away");
                    Decryptor::new(&key).decrypt_chunks(BufReader::new(ciphertext), |piece| {
                        pieces.send(piece).map_err(hung_up)?;
                        Ok(written_rx.try_recv().unwrap_or_default())
                    })
                })
                .map_err(FileError::Io)?;
            let mut written = Ok(());
            for piece in &decrypted {
                written = out.write_all(&piece);
                if written.is_err() {
                    break;
                }
                let _ = written_tx.try_send(piece);
            }
            // Hanging up makes the decryptor's next write fail: it stops.
            drop(decrypted);
            let decrypted = decryptor.join().unwrap_or_else(|_| Err(FileCryptoError::Io(io::Error::other("the decryptor panicked"))));
            written.and_then(|()| out.flush()).map_err(FileError::Io)?;
            match decrypted? {
                n if n == expected => Ok(n),
                // The length follows from the ciphertext's, so this cannot happen to a file
                // that decrypted; said anyway rather than served short without a word.
                _ => Err(FileError::Crypto(FileCryptoError::Truncated)),
            }
        })
    }
}

/// Decrypted pieces queued between the decrypting thread and the writing one.
const DECRYPT_QUEUE: usize = 4;

/// Why a file transfer failed. Never carries a key or plaintext.
#[derive(Debug)]
pub enum FileError {
    /// Encrypting, or verifying what was downloaded, failed (not authentic, truncated, wrong
    /// digest, too large, local I/O).
    Crypto(FileCryptoError),
    /// The platform refused or the call broke (see `wire::rpc`).
    Rpc(grpcio::Error),
    /// A temporary file could not be created or used.
    Io(io::Error),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Crypto(e) => write!(f, "{e}"),
            FileError::Rpc(e) => write!(f, "platform: {}", crate::wire::rpc::text(e)),
            FileError::Io(e) => write!(f, "temporary file: {e}"),
        }
    }
}

impl std::error::Error for FileError {}

impl From<FileCryptoError> for FileError {
    fn from(e: FileCryptoError) -> Self {
        FileError::Crypto(e)
    }
}

impl From<grpcio::Error> for FileError {
    fn from(e: grpcio::Error) -> Self {
        FileError::Rpc(e)
    }
}

/// Chunks queued between the thread that encrypts and the upload's sending thread, so the
/// encryption of the next chunks overlaps the sending of earlier ones (gRPC takes one message
/// at a time): at most this many times `UPLOAD_CHUNK` bytes in memory.
const SEND_QUEUE: usize = 4;

/// Numbers the helper threads of transfers (`file-send#<n>`, `file-dec#<n>`).
static TRANSFERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Cuts ciphertext into `UPLOAD_CHUNK` pieces and queues them for the sending thread.
struct ChunkSender {
    queue: crossbeam_channel::Sender<Vec<u8>>,
    buf: Vec<u8>,
}

impl Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(UPLOAD_CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == UPLOAD_CHUNK {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(UPLOAD_CHUNK));
            // Closed: the sending thread stopped because the call failed (it says why).
            self.queue.send(full).map_err(|_| io::Error::other("the upload call failed"))?;
        }
        Ok(n)
    }

    /// Keeps the buffer: the final piece is sent by `PendingUpload::commit`, marked last.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The sending thread: each queued piece as one chunk of the call, until the queue closes;
/// stops at the first refusal (the platform has answered, and its status is the real error).
fn send_queued(call: &mut dyn UploadCall, queue: crossbeam_channel::Receiver<Vec<u8>>) -> grpcio::Result<()> {
    for data in queue {
        call.send(pb::FileChunk { data, last: false, ..Default::default() })?;
    }
    Ok(())
}

/// Encrypts `input` under a fresh key while streaming the ciphertext to the platform; returns
/// the reference, the key, the digest and the sizes. Over `crypto::file::MAX_PLAINTEXT_LEN`
/// fails with `TooLarge` and the platform keeps nothing.
pub fn upload_encrypted(platform: &dyn FileTransport, input: impl Read) -> Result<UploadedFile, FileError> {
    begin_upload(platform, input)?.commit()
}

/// An upload sent to the platform as it was encrypted, all but its final piece: the platform
/// stores it only once [`PendingUpload::commit`] sends that piece; dropped instead, the call
/// is cancelled and the platform keeps nothing. The gateway streams a request's file part
/// this way while it reads the body, so encrypting, sending and storing overlap, and commits
/// it when a method uses the part.
pub struct PendingUpload {
    call: Box<dyn UploadCall>,
    /// The final piece of ciphertext (fewer than `UPLOAD_CHUNK` bytes, maybe none).
    rest: Vec<u8>,
    pub encrypted: file_crypto::EncryptedFile,
}

/// Encrypts `input` under a fresh key while streaming all of the ciphertext but its final
/// piece to the platform. Over `MAX_PLAINTEXT_LEN` fails with `TooLarge` (the call is
/// cancelled); a platform refusal fails with its status.
pub fn begin_upload(platform: &dyn FileTransport, input: impl Read) -> Result<PendingUpload, FileError> {
    let mut call = platform.upload_file()?;
    let (queue, queued) = crossbeam_channel::bounded(SEND_QUEUE);
    let mut chunks = ChunkSender { queue, buf: Vec::with_capacity(UPLOAD_CHUNK) };
    let number = TRANSFERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    // This thread encrypts; a scoped one sends, and is joined before the scope ends.
    let (encrypted, sent, rest) = std::thread::scope(|scope| {
        let sender = std::thread::Builder::new()
            .name(format!("file-send#{number}"))
            .spawn_scoped(scope, || send_queued(call.as_mut(), queued))
            .map_err(FileError::Io)?;
        let encrypted = file_crypto::encrypt(input, &mut chunks);
        let ChunkSender { queue, buf: rest } = chunks;
        drop(queue); // the sending thread ends once it sent what is queued
        let sent = sender.join().unwrap_or_else(|_| Err(grpcio::Error::RpcFinished(None)));
        Ok::<_, FileError>((encrypted, sent, rest))
    })?;
    match (encrypted, sent) {
        (Ok(encrypted), Ok(())) => Ok(PendingUpload { call, rest, encrypted }),
        // The call ended on the platform's side: its status says why.
        (_, Err(e)) => Err(FileError::Rpc(call.answer().err().unwrap_or(e))),
        // Dropping the unclosed call cancels it, so the platform stores nothing.
        (Err(e), Ok(())) => {
            drop(call);
            Err(FileError::Crypto(e))
        }
    }
}

impl PendingUpload {
    /// Sends the final piece and waits for the platform to store the file; its answer is
    /// checked against the ciphertext's length.
    pub fn commit(self) -> Result<UploadedFile, FileError> {
        let PendingUpload { mut call, rest, encrypted } = self;
        if let Err(e) = call.send(pb::FileChunk { data: rest, last: true, ..Default::default() }) {
            // Refused: the platform has answered, and its status is the real error.
            return Err(FileError::Rpc(call.answer().err().unwrap_or(e)));
        }
        call.close()?;
        let resp = call.answer()?;
        if resp.size != encrypted.ciphertext_len {
            return Err(FileError::Crypto(FileCryptoError::Io(io::Error::other(format!(
                "the platform stored {} bytes of a {}-byte upload",
                resp.size, encrypted.ciphertext_len
            )))));
        }
        Ok(UploadedFile {
            file_ref: resp.file_ref,
            key: encrypted.key,
            digest: encrypted.digest,
            size: encrypted.plaintext_len,
            stored_size: encrypted.ciphertext_len,
        })
    }
}

/// Downloads the file of `source` into an unlinked private file in `tmp_dir`, checks the
/// ciphertext against its digest, that its length is a well-formed ciphertext's, and that its
/// header and first chunk authenticate with its key; only then is the file returned, to be
/// decrypted once on its way out. The digest (from the end-to-end message) covers every byte of
/// the ciphertext, so what the platform or the disk changed is refused here, before any
/// plaintext is produced, and a wrong key fails at the first chunk. A later chunk that fails
/// can only come from the sender itself (it encrypted and hashed the file): `write_plaintext`
/// then stops with an error part way.
pub fn download_verified(platform: &dyn FileTransport, source: &FileSource, tmp_dir: &Path) -> Result<VerifiedFile, FileError> {
    let FileSource { file_ref, key, digest } = source;
    let req = pb::DownloadFileRequest { file_ref: file_ref.clone(), ..Default::default() };
    let mut stream = platform.download_file(&req)?;
    let received = receive(&mut stream, unlinked_private_file(tmp_dir)?, digest.algorithm);
    // The chunks' buffer goes with the download, whatever its end.
    reuse_chunk_buffer(Vec::new());
    let (mut ciphertext, actual, received) = received?;
    file_crypto::check_digest(&actual, digest)?;
    let len = file_crypto::plaintext_len(received).ok_or(FileError::Crypto(FileCryptoError::Truncated))?;
    ciphertext.seek(SeekFrom::Start(0)).map_err(FileError::Io)?;
    Decryptor::new(key).check_start(BufReader::new(&mut ciphertext))?;
    Ok(VerifiedFile { ciphertext, key: key.clone(), len })
}

/// The whole stream into `file`, hashed on the way: (file, digest, bytes received).
fn receive(stream: &mut ChunkStream, file: File, algorithm: DigestAlgorithm) -> Result<(File, FileDigest, u64), FileError> {
    let mut file = BufWriter::new(file);
    let mut hash = CiphertextHash::new(algorithm);
    let mut received = 0u64;
    while let Some(chunk) = futures::executor::block_on(stream.next()) {
        let data = chunk.map_err(FileError::Rpc)?.data;
        received += data.len() as u64;
        if received > MAX_CIPHERTEXT_LEN {
            return Err(FileError::Crypto(FileCryptoError::TooLarge));
        }
        hash.update(&data);
        file.write_all(&data).map_err(FileError::Io)?;
        reuse_chunk_buffer(data);
    }
    let file = file.into_inner().map_err(|e| FileError::Io(e.into_error()))?;
    Ok((file, hash.finalize(), received))
}

/// A new private (0600) file in `dir` with no name left: it disappears when closed.
pub fn unlinked_private_file(dir: &Path) -> Result<File, FileError> {
    let name = format!(".file-{}.tmp", crate::crypto::hex_encode(&crate::crypto::random_bytes::<16>()));
    let path = dir.join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| FileError::Io(io::Error::new(e.kind(), format!("creating a file in {}: {e}", dir.display()))))?;
    std::fs::remove_file(&path).map_err(FileError::Io)?;
    Ok(file)
}

/// The platform's references of the files a content carries, wherever a `Media` sits in it (a
/// message's, an edit's new one, an inline result's): a sender names them when it sends
/// (`OutgoingMessage.file_refs`), and the platform sweeps its uploads that none named.
/// Walks the message by reflection, so a kind of content added later is covered too.
pub fn refs_in(content: &crate::wire::e2e::Content) -> Vec<String> {
    fn walk(m: &dyn protobuf::MessageDyn, refs: &mut Vec<String>) {
        use protobuf::reflect::{ReflectValueRef, RuntimeFieldType};
        if let Some(media) = m.downcast_ref::<Media>() {
            if !media.file_ref.is_empty() && !refs.contains(&media.file_ref) {
                refs.push(media.file_ref.clone());
            }
        }
        for field in m.descriptor_dyn().fields() {
            match field.runtime_field_type() {
                RuntimeFieldType::Singular(_) => {
                    if let Some(ReflectValueRef::Message(sub)) = field.get_singular(m) {
                        walk(&*sub, refs);
                    }
                }
                RuntimeFieldType::Repeated(_) => {
                    for v in field.get_repeated(m) {
                        if let ReflectValueRef::Message(sub) = v {
                            walk(&*sub, refs);
                        }
                    }
                }
                RuntimeFieldType::Map(..) => {}
            }
        }
    }
    let mut refs = Vec::new();
    walk(content, &mut refs);
    refs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_a_content_carries_are_found_wherever_they_sit() {
        use crate::wire::e2e::{content::Body, Content, Edit, InlineArticle, InlineResults};
        let media = |r: &str| Media { file_ref: r.into(), ..Default::default() };
        let text = Content { body: Some(Body::Text(Default::default())), ..Default::default() };
        assert!(refs_in(&text).is_empty());
        let photo = Content { body: Some(Body::Media(media("aa"))), ..Default::default() };
        assert_eq!(refs_in(&photo), ["aa"]);
        let edit = Content {
            body: Some(Body::Edit(Edit { content: protobuf::MessageField::some(photo.clone()), ..Default::default() })),
            ..Default::default()
        };
        assert_eq!(refs_in(&edit), ["aa"], "an edit's new media");
        let results = InlineResults {
            results: vec![
                InlineArticle { media: protobuf::MessageField::some(media("bb")), ..Default::default() },
                InlineArticle::default(),
                InlineArticle { media: protobuf::MessageField::some(media("cc")), ..Default::default() },
            ],
            ..Default::default()
        };
        let inline = Content { body: Some(Body::InlineResults(results)), ..Default::default() };
        assert_eq!(refs_in(&inline), ["bb", "cc"], "inline results' files");
    }

    #[test]
    fn temporary_files_leave_no_name_behind() {
        let dir = tempfile::tempdir().expect("dir");
        let mut f = unlinked_private_file(dir.path()).expect("create");
        f.write_all(b"x").expect("write");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }
}
