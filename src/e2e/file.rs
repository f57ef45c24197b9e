//! Encrypted files over the platform, for every sender and receiver of media (the gateway's
//! media methods and `e2e-chat`): [`upload_encrypted`] encrypts while uploading, and
//! [`download_verified`] releases plaintext only once everything has been verified.
//!
//! Here rather than in `client`, because the gateway needs it too and must not depend on the
//! user client; it is the one part of `e2e` that talks to the platform itself, because a file
//! is streamed, never held in memory, so the caller cannot hand bytes in and out the way it
//! does for envelopes. The key and the digest returned by an upload are what the end-to-end
//! message carries to the recipient.
//!
//! A download goes through two private temporary files, both unlinked as soon as they are
//! created (nothing is left behind, even after a crash): the ciphertext, hashed as it arrives
//! and checked against the digest when complete, and then the plaintext, written while every
//! chunk and the FINAL tag are verified. The caller gets the plaintext file only when all of
//! this succeeded; on any failure both files are gone and no plaintext was released.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use grpcio::WriteFlags;

use crate::crypto::file::{self as file_crypto, Decryptor, FileCryptoError, FileKey, CiphertextHash, MAX_CIPHERTEXT_LEN};
use crate::wire::connect::Platform;
use crate::wire::platform as pb;

/// Ciphertext bytes per `FileChunk` sent (the platform accepts up to 256 KiB).
const UPLOAD_CHUNK: usize = 256 * 1024;
/// Deadline of one transfer: 50 MiB over a slow link, not a stuck call for ever.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

/// A file stored on the platform, and what its recipients need to read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedFile {
    /// The platform's reference of the ciphertext.
    pub file_ref: String,
    pub key: FileKey,
    /// BLAKE2b-256 of the ciphertext.
    pub digest: [u8; 32],
    /// Plaintext bytes.
    pub size: u64,
    /// Ciphertext bytes stored on the platform.
    pub stored_size: u64,
}

/// A downloaded file whose ciphertext matched its digest and whose every chunk and final tag
/// authenticated. It holds the CIPHERTEXT (an unlinked private file): the plaintext never
/// touches disk, it is decrypted again on its way out (`write_plaintext`).
#[derive(Debug)]
pub struct VerifiedFile {
    ciphertext: File,
    key: FileKey,
    /// Plaintext bytes.
    pub len: u64,
}

impl VerifiedFile {
    /// Decrypts into `out` (an HTTP response, the user's file), chunk by chunk.
    pub fn write_plaintext(mut self, out: impl Write) -> Result<u64, FileError> {
        self.ciphertext.seek(SeekFrom::Start(0)).map_err(FileError::Io)?;
        Ok(Decryptor::new(&self.key).decrypt(BufReader::new(&mut self.ciphertext), out)?)
    }
}

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

/// Feeds ciphertext into the UploadFile call in `UPLOAD_CHUNK` pieces.
struct ChunkSender<'a> {
    sink: &'a mut grpcio::ClientCStreamSender<pb::FileChunk>,
    buf: Vec<u8>,
    /// The call refused a chunk: the platform has answered (its status is the real error).
    failed: bool,
}

impl ChunkSender<'_> {
    /// Sends what is buffered; `last` marks the upload's final chunk (sent even when empty).
    fn send_buffered(&mut self, last: bool) -> io::Result<()> {
        if self.buf.is_empty() && !last {
            return Ok(());
        }
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(UPLOAD_CHUNK));
        let chunk = pb::FileChunk { data, last, ..Default::default() };
        futures::executor::block_on(self.sink.send((chunk, WriteFlags::default()))).map_err(|e| {
            self.failed = true;
            io::Error::other(e)
        })
    }
}

impl Write for ChunkSender<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(UPLOAD_CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == UPLOAD_CHUNK {
            self.send_buffered(false)?;
        }
        Ok(n)
    }

    /// Keeps the buffer: only `send_buffered(true)`, once the ciphertext is complete, may
    /// send the final piece.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Encrypts `input` under a fresh key while streaming the ciphertext to the platform; returns
/// the reference, the key, the digest and the sizes. Over `crypto::file::MAX_PLAINTEXT_LEN`
/// fails with `TooLarge` and the platform keeps nothing.
pub fn upload_encrypted(platform: &Platform, input: impl Read) -> Result<UploadedFile, FileError> {
    upload_with(platform, |sender| file_crypto::encrypt(input, sender))
}

/// Uploads a ciphertext encrypted earlier (`crypto::file::encrypt` into a private temporary
/// file, e.g. while a request body was read), as `encrypted` describes it.
pub fn upload_ciphertext(
    platform: &Platform,
    mut ciphertext: impl Read,
    encrypted: &file_crypto::EncryptedFile,
) -> Result<UploadedFile, FileError> {
    upload_with(platform, |sender| {
        let copied = io::copy(&mut ciphertext, sender)?;
        if copied != encrypted.ciphertext_len {
            return Err(FileCryptoError::Io(io::Error::other(format!(
                "the ciphertext has {copied} bytes, {} were expected",
                encrypted.ciphertext_len
            ))));
        }
        Ok(encrypted.clone())
    })
}

/// One UploadFile call fed by `write` (which returns what it wrote); the platform's answer is
/// checked against the ciphertext's length.
fn upload_with(
    platform: &Platform,
    write: impl FnOnce(&mut ChunkSender<'_>) -> Result<file_crypto::EncryptedFile, FileCryptoError>,
) -> Result<UploadedFile, FileError> {
    let (mut sink, receiver) = platform.client.upload_file(platform.opt_with_timeout(Some(TRANSFER_TIMEOUT)))?;
    let mut sender = ChunkSender { sink: &mut sink, buf: Vec::with_capacity(UPLOAD_CHUNK), failed: false };
    let encrypted = write(&mut sender)
        .and_then(|encrypted| sender.send_buffered(true).map(|()| encrypted).map_err(FileCryptoError::Io));
    match encrypted {
        Ok(encrypted) => {
            futures::executor::block_on(sink.close())?;
            let resp = futures::executor::block_on(receiver)?;
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
        Err(e) => {
            let platform_answered = sender.failed;
            if platform_answered {
                // The call ended on the platform's side: its status says why.
                if let Err(status) = futures::executor::block_on(receiver) {
                    return Err(FileError::Rpc(status));
                }
            }
            // Dropping the unclosed sink cancels the call, so the platform stores nothing.
            drop(sink);
            Err(FileError::Crypto(e))
        }
    }
}

/// Downloads `file_ref` into an unlinked private file in `tmp_dir`, checks the ciphertext
/// against `digest`, and verifies every chunk and the FINAL tag with `key` (decrypting into
/// nothing); only then is the file returned, to be decrypted on its way out. Any failure
/// (platform error, broken stream, wrong digest, a chunk that does not authenticate, a missing
/// FINAL chunk) returns an error, and no plaintext byte has been produced.
pub fn download_verified(
    platform: &Platform,
    file_ref: &str,
    key: &FileKey,
    digest: &[u8; 32],
    tmp_dir: &Path,
) -> Result<VerifiedFile, FileError> {
    let req = pb::DownloadFileRequest { file_ref: file_ref.to_string(), ..Default::default() };
    let mut stream = platform.client.download_file(&req, platform.opt_with_timeout(Some(TRANSFER_TIMEOUT)))?;

    let ciphertext = unlinked_private_file(tmp_dir)?;
    // One pass over the stream: each chunk is kept (ciphertext), hashed, and verified by
    // decrypting into nothing; the digest is checked at the end.
    let mut tee = StreamTee {
        stream: &mut stream,
        file: BufWriter::new(ciphertext),
        hash: CiphertextHash::new(),
        pending: Vec::new(),
        at: 0,
        received: 0,
        failed: None,
    };
    let verified = Decryptor::new(key).decrypt(&mut tee, io::sink());
    if let Some(e) = tee.failed.take() {
        return Err(e);
    }
    let len = verified?;
    // Bytes after the FINAL chunk that the decryptor did not read still count, and fail it.
    io::copy(&mut tee, &mut io::sink()).map_err(FileError::Io)?;
    if let Some(e) = tee.failed.take() {
        return Err(e);
    }
    let StreamTee { file, hash, .. } = tee;
    let ciphertext = file.into_inner().map_err(|e| FileError::Io(e.into_error()))?;
    file_crypto::check_digest(&hash.finalize(), digest)?;
    Ok(VerifiedFile { ciphertext, key: key.clone(), len })
}

/// Reads the platform's download stream as bytes, keeping a copy of everything read in the
/// temporary file and in the digest. A transport failure is kept in `failed` (and read as an
/// I/O error), so the caller reports the platform's error rather than a decryption one.
struct StreamTee<'a, S> {
    stream: &'a mut S,
    file: BufWriter<File>,
    hash: CiphertextHash,
    pending: Vec<u8>,
    at: usize,
    received: u64,
    failed: Option<FileError>,
}

impl<S> Read for StreamTee<'_, S>
where
    S: futures::Stream<Item = grpcio::Result<pb::FileChunk>> + Unpin,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.pending.len() {
            match futures::executor::block_on(self.stream.next()) {
                None => return Ok(0),
                Some(Err(e)) => {
                    self.failed = Some(e.into());
                    return Err(io::Error::other("the platform's download stream failed"));
                }
                Some(Ok(chunk)) => {
                    self.received += chunk.data.len() as u64;
                    if self.received > MAX_CIPHERTEXT_LEN {
                        self.failed = Some(FileError::Crypto(FileCryptoError::TooLarge));
                        return Err(io::Error::other("the download is larger than any file"));
                    }
                    self.hash.update(&chunk.data);
                    if let Err(e) = self.file.write_all(&chunk.data) {
                        self.failed = Some(FileError::Io(e));
                        return Err(io::Error::other("cannot keep the download"));
                    }
                    self.pending = chunk.data;
                    self.at = 0;
                }
            }
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_files_leave_no_name_behind() {
        let dir = tempfile::tempdir().expect("dir");
        let mut f = unlinked_private_file(dir.path()).expect("create");
        f.write_all(b"x").expect("write");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }
}
