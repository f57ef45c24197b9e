//! Per-file encryption for media: libsodium's `crypto_secretstream_xchacha20poly1305` with a
//! random key per file, and a 32-byte digest of the ciphertext: BLAKE3 for files encrypted now,
//! BLAKE2b-256 for files of earlier versions (still verified; see [`DigestAlgorithm`]).
//!
//! Format of an encrypted file (what the platform stores):
//!
//! ```text
//! header (24 bytes) || chunk 1 || ... || chunk n
//! chunk = secretstream(plaintext piece of CHUNK_LEN bytes) = CHUNK_LEN + 17 bytes
//! ```
//!
//! Every piece but the last is exactly `CHUNK_LEN` bytes of plaintext; the last one (possibly
//! short, empty only for an empty file) is tagged FINAL, so a stream cut at a chunk boundary is
//! detected. The header is part of the ciphertext and of its digest, so the key and the
//! digest are all a recipient needs (they travel inside the end-to-end message).
//!
//! Both directions stream: [`encrypt`] reads a `Read` and writes a `Write` one chunk at a time,
//! never holding the file in memory. [`Decryptor`] verifies every chunk, the FINAL tag and that
//! nothing follows it. It writes plaintext as it goes, so a caller that must not release any
//! plaintext before everything is verified decrypts into a private temporary file and hands it
//! out only when [`Decryptor::decrypt`] returned `Ok`. `e2e::file::download_verified` relies on
//! the digest instead: it covers every ciphertext byte, so after it and [`Decryptor::check_start`]
//! only the sender could make a later chunk fail, and the file is decrypted once, on its way out.
//!
//! Errors never carry key material or plaintext.

use std::fmt;
use std::io::{self, Read, Write};

use sodiumoxide::crypto::generichash;
use sodiumoxide::crypto::secretstream::xchacha20poly1305 as ss;

/// Plaintext bytes per chunk.
pub const CHUNK_LEN: usize = 64 * 1024;
/// Largest plaintext of one file (SPEC, Limits: one media file).
pub const MAX_PLAINTEXT_LEN: u64 = 50 * 1024 * 1024;
/// Bytes of the secretstream header that starts the ciphertext.
pub const HEADER_LEN: usize = ss::HEADERBYTES;
/// Bytes a chunk's ciphertext adds to its plaintext (tag byte + Poly1305 MAC).
pub const CHUNK_OVERHEAD: usize = ss::ABYTES;
/// Largest ciphertext of one file: what the platform accepts.
pub const MAX_CIPHERTEXT_LEN: u64 = ciphertext_len(MAX_PLAINTEXT_LEN);

/// The ciphertext length of a plaintext of `plaintext_len` bytes.
pub const fn ciphertext_len(plaintext_len: u64) -> u64 {
    let chunk = CHUNK_LEN as u64;
    let chunks = if plaintext_len == 0 { 1 } else { plaintext_len.div_ceil(chunk) };
    HEADER_LEN as u64 + plaintext_len + chunks * CHUNK_OVERHEAD as u64
}

/// The plaintext length of a well-formed ciphertext of `ciphertext_len` bytes; `None` when no
/// plaintext encrypts to that length (a truncated or padded file).
pub const fn plaintext_len(len: u64) -> Option<u64> {
    let (header, chunk, overhead) = (HEADER_LEN as u64, CHUNK_LEN as u64, CHUNK_OVERHEAD as u64);
    if len < header + overhead || len > MAX_CIPHERTEXT_LEN {
        return None;
    }
    let body = len - header;
    let chunks = body.div_ceil(chunk + overhead);
    let plaintext = body - chunks * overhead;
    if ciphertext_len(plaintext) == len {
        Some(plaintext)
    } else {
        None
    }
}

/// A file's secret key (32 random bytes). Never logged: `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct FileKey(pub [u8; 32]);

impl FileKey {
    /// A fresh random key.
    pub fn generate() -> FileKey {
        let ss::Key(bytes) = ss::gen_key();
        FileKey(bytes)
    }
}

impl fmt::Debug for FileKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FileKey(..)")
    }
}

/// What encrypting a file produced, besides the ciphertext written out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncryptedFile {
    pub key: FileKey,
    /// Of the whole ciphertext (header included).
    pub digest: FileDigest,
    pub plaintext_len: u64,
    pub ciphertext_len: u64,
}

/// Why encrypting or decrypting a file failed.
#[derive(Debug)]
pub enum FileCryptoError {
    /// Reading the input or writing the output failed.
    Io(io::Error),
    /// The plaintext is over `MAX_PLAINTEXT_LEN`.
    TooLarge,
    /// A chunk did not authenticate (changed, reordered, wrong key) or the header is invalid.
    NotAuthentic,
    /// The stream ended before its FINAL chunk.
    Truncated,
    /// Bytes follow the FINAL chunk.
    TrailingData,
    /// The ciphertext's digest is not the expected one.
    DigestMismatch,
}

impl fmt::Display for FileCryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileCryptoError::Io(e) => write!(f, "file I/O failed: {e}"),
            FileCryptoError::TooLarge => write!(f, "file is larger than {} MiB", MAX_PLAINTEXT_LEN >> 20),
            FileCryptoError::NotAuthentic => write!(f, "encrypted file is not authentic (changed, reordered or wrong key)"),
            FileCryptoError::Truncated => write!(f, "encrypted file is truncated (no final chunk)"),
            FileCryptoError::TrailingData => write!(f, "encrypted file has data after its final chunk"),
            FileCryptoError::DigestMismatch => write!(f, "encrypted file does not match its digest"),
        }
    }
}

impl std::error::Error for FileCryptoError {}

impl From<io::Error> for FileCryptoError {
    fn from(e: io::Error) -> Self {
        FileCryptoError::Io(e)
    }
}

pub type Result<T> = std::result::Result<T, FileCryptoError>;

/// Which hash a file's digest is (it travels beside the digest in the end-to-end message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestAlgorithm {
    /// libsodium's `crypto_generichash`, 32 bytes: files of versions before BLAKE3, verified
    /// still, never made any more. It ran at 40% of secretstream's speed and capped the file
    /// transport under its target.
    Blake2b256,
    /// BLAKE3 (the `blake3` crate, SIMD on x86_64 and aarch64), several times secretstream's
    /// speed: what every file gets now.
    Blake3,
}

/// A ciphertext's digest and the hash that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileDigest {
    pub algorithm: DigestAlgorithm,
    pub bytes: [u8; 32],
}

/// The ciphertext's digest, streaming, in the algorithm asked for. (One lives per transfer,
/// on its thread's stack: the size of libsodium's state does not matter.)
#[allow(clippy::large_enum_variant)]
pub enum CiphertextHash {
    Blake2b256(generichash::State),
    Blake3(Box<blake3::Hasher>),
}

impl Default for CiphertextHash {
    fn default() -> Self {
        Self::new(DigestAlgorithm::Blake3)
    }
}

impl CiphertextHash {
    pub fn new(algorithm: DigestAlgorithm) -> CiphertextHash {
        match algorithm {
            DigestAlgorithm::Blake2b256 => CiphertextHash::Blake2b256(
                generichash::State::new(Some(32), None).expect("32 bytes is a valid BLAKE2b output length"),
            ),
            DigestAlgorithm::Blake3 => CiphertextHash::Blake3(Box::new(blake3::Hasher::new())),
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        match self {
            CiphertextHash::Blake2b256(state) => state.update(data).expect("an unfinalized state takes more data"),
            CiphertextHash::Blake3(hasher) => {
                hasher.update(data);
            }
        }
    }

    pub fn finalize(self) -> FileDigest {
        match self {
            CiphertextHash::Blake2b256(state) => {
                let digest = state.finalize().expect("a state is finalized once");
                let bytes = digest.as_ref().try_into().expect("32 bytes were asked for");
                FileDigest { algorithm: DigestAlgorithm::Blake2b256, bytes }
            }
            CiphertextHash::Blake3(hasher) => {
                FileDigest { algorithm: DigestAlgorithm::Blake3, bytes: *hasher.finalize().as_bytes() }
            }
        }
    }
}

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
pub(crate) fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Writes ciphertext through and hashes it on the way.
struct HashingWriter<W> {
    inner: W,
    hash: CiphertextHash,
    written: u64,
}

impl<W: Write> HashingWriter<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.hash.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// Encrypts `input` under a fresh random key into `output`, one chunk at a time, and returns
/// the key, the ciphertext's digest and the lengths. Fails with `TooLarge` as soon as the
/// input passes `MAX_PLAINTEXT_LEN` (the output then holds a partial ciphertext: discard it).
pub fn encrypt(mut input: impl Read, output: impl Write) -> Result<EncryptedFile> {
    encrypt_with_key(&mut input, output, FileKey::generate())
}

fn encrypt_with_key(input: &mut impl Read, output: impl Write, key: FileKey) -> Result<EncryptedFile> {
    let (mut stream, ss::Header(header)) =
        ss::Stream::init_push(&ss::Key(key.0)).map_err(|()| FileCryptoError::NotAuthentic)?;
    let mut out = HashingWriter { inner: output, hash: CiphertextHash::default(), written: 0 };
    out.put(&header)?;

    // Two buffers: a chunk is pushed only once the next read shows whether it is the last.
    let mut current = vec![0u8; CHUNK_LEN];
    let mut next = vec![0u8; CHUNK_LEN];
    let mut current_len = read_full(input, &mut current)?;
    let mut plaintext_len = current_len as u64;
    let mut sealed = Vec::with_capacity(CHUNK_LEN + CHUNK_OVERHEAD);
    loop {
        if plaintext_len > MAX_PLAINTEXT_LEN {
            return Err(FileCryptoError::TooLarge);
        }
        // A short read means the input ended; a full one needs a look at what follows.
        let next_len = if current_len < CHUNK_LEN { 0 } else { read_full(input, &mut next)? };
        let last = next_len == 0;
        let tag = if last { ss::Tag::Final } else { ss::Tag::Message };
        stream
            .push_to_vec(&current[..current_len], None, tag, &mut sealed)
            .map_err(|()| FileCryptoError::NotAuthentic)?;
        out.put(&sealed)?;
        if last {
            break;
        }
        std::mem::swap(&mut current, &mut next);
        current_len = next_len;
        plaintext_len += next_len as u64;
    }
    out.inner.flush()?;
    Ok(EncryptedFile { key, digest: out.hash.finalize(), plaintext_len, ciphertext_len: out.written })
}

/// The reference figure of benchmarks: libsodium's secretstream alone, pushing `data` in
/// `CHUNK_LEN` pieces under a fresh key, no digest and no I/O. Returns the ciphertext bytes.
pub fn secretstream_push_only(data: &[u8]) -> u64 {
    let key = FileKey::generate();
    let (mut stream, _) = ss::Stream::init_push(&ss::Key(key.0)).expect("a fresh key initializes a stream");
    let mut sealed = Vec::with_capacity(CHUNK_LEN + CHUNK_OVERHEAD);
    let mut total = HEADER_LEN as u64;
    let mut pieces = data.chunks(CHUNK_LEN).peekable();
    while let Some(piece) = pieces.next() {
        let tag = if pieces.peek().is_none() { ss::Tag::Final } else { ss::Tag::Message };
        stream.push_to_vec(piece, None, tag, &mut sealed).expect("push");
        total += sealed.len() as u64;
    }
    total
}

/// Verifies and decrypts one encrypted file.
pub struct Decryptor {
    key: FileKey,
}

impl Decryptor {
    pub fn new(key: &FileKey) -> Decryptor {
        Decryptor { key: key.clone() }
    }

    /// Decrypts `input` into `output`, verifying every chunk, the FINAL tag and the end of the
    /// input right after it; returns the plaintext length. On `Err`, `output` holds unverified
    /// plaintext and must be discarded.
    pub fn decrypt(&self, input: impl Read, mut output: impl Write) -> Result<u64> {
        // One buffer for every chunk: written out, then filled again.
        let len = self.decrypt_chunks(input, |plain| output.write_all(&plain).map(|()| plain))?;
        output.flush()?;
        Ok(len)
    }

    /// [`Decryptor::decrypt`] handing each chunk's plaintext to `each` as it is verified (a
    /// caller that passes it to another thread need not copy it). `each` returns the buffer
    /// the next chunk is decrypted into: one it is done with, so that a transfer does not
    /// allocate (and fault in) a buffer per chunk, or an empty one.
    pub fn decrypt_chunks(&self, input: impl Read, mut each: impl FnMut(Vec<u8>) -> io::Result<Vec<u8>>) -> Result<u64> {
        let mut pull = self.open(input)?;
        let mut buf = Vec::new();
        while let Some(plain) = pull.next_chunk(buf)? {
            buf = each(plain)?;
        }
        Ok(pull.plaintext_len)
    }

    /// Authenticates the header and the first chunk only, decrypting into nothing: a wrong key
    /// fails here, before anything is served. The rest authenticates as it is decrypted.
    pub fn check_start(&self, input: impl Read) -> Result<()> {
        self.open(input)?.next_chunk(Vec::new()).map(|_| ())
    }

    fn open<R: Read>(&self, mut input: R) -> Result<Pull<R>> {
        let mut header = [0u8; HEADER_LEN];
        if read_full(&mut input, &mut header)? < HEADER_LEN {
            return Err(FileCryptoError::Truncated);
        }
        let stream = ss::Stream::init_pull(&ss::Header(header), &ss::Key(self.key.0)).map_err(|()| FileCryptoError::NotAuthentic)?;
        Ok(Pull { input, stream, chunk: vec![0u8; CHUNK_LEN + CHUNK_OVERHEAD], plaintext_len: 0, done: false })
    }
}

/// A ciphertext being decrypted one chunk at a time.
struct Pull<R> {
    input: R,
    stream: ss::Stream<ss::Pull>,
    chunk: Vec<u8>,
    plaintext_len: u64,
    done: bool,
}

impl<R: Read> Pull<R> {
    /// The next chunk's plaintext, verified, in `plain` (emptied first); `None` after the
    /// FINAL chunk, once nothing follows it.
    fn next_chunk(&mut self, mut plain: Vec<u8>) -> Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        let n = read_full(&mut self.input, &mut self.chunk)?;
        if n == 0 {
            return Err(FileCryptoError::Truncated);
        }
        let tag = self.stream.pull_to_vec(&self.chunk[..n], None, &mut plain).map_err(|()| FileCryptoError::NotAuthentic)?;
        self.plaintext_len += plain.len() as u64;
        if self.plaintext_len > MAX_PLAINTEXT_LEN {
            return Err(FileCryptoError::TooLarge);
        }
        let is_final = tag == ss::Tag::Final;
        // Only the last chunk may be short, and it must be the FINAL one.
        if !is_final && (n < self.chunk.len() || tag != ss::Tag::Message) {
            return Err(if tag == ss::Tag::Message { FileCryptoError::Truncated } else { FileCryptoError::NotAuthentic });
        }
        if is_final {
            let mut probe = [0u8; 1];
            if read_full(&mut self.input, &mut probe)? != 0 {
                return Err(FileCryptoError::TrailingData);
            }
            self.done = true;
        }
        Ok(Some(plain))
    }
}

/// Checks that `actual` (a digest computed while receiving, in `expected`'s algorithm) is
/// `expected`.
pub fn check_digest(actual: &FileDigest, expected: &FileDigest) -> Result<()> {
    if actual.algorithm == expected.algorithm && super::constant_time_eq(&actual.bytes, &expected.bytes) {
        Ok(())
    } else {
        Err(FileCryptoError::DigestMismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plaintext(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + i / 7) as u8).collect()
    }

    fn seal(data: &[u8]) -> (EncryptedFile, Vec<u8>) {
        crate::crypto::init();
        let mut ct = Vec::new();
        let enc = encrypt(data, &mut ct).expect("encrypt");
        (enc, ct)
    }

    fn open(enc: &EncryptedFile, ct: &[u8]) -> Result<Vec<u8>> {
        let mut hash = CiphertextHash::new(enc.digest.algorithm);
        hash.update(ct);
        check_digest(&hash.finalize(), &enc.digest)?;
        let mut out = Vec::new();
        let n = Decryptor::new(&enc.key).decrypt(ct, &mut out)?;
        assert_eq!(n as usize, out.len());
        Ok(out)
    }

    #[test]
    fn the_plaintext_length_follows_from_the_ciphertext_length_alone() {
        let c = CHUNK_LEN as u64;
        for p in [0, 1, c - 1, c, c + 1, 3 * c, 3 * c + 7, MAX_PLAINTEXT_LEN] {
            assert_eq!(plaintext_len(ciphertext_len(p)), Some(p), "{p}");
            let seal_len = seal(&plaintext(p.min(4 * c) as usize)).1.len() as u64;
            assert_eq!(plaintext_len(seal_len), Some(p.min(4 * c)), "sealed {p}");
        }
        // Lengths no plaintext encrypts to: a chunk cut short of its overhead, the header
        // alone, one byte too many, and more than the largest file.
        for bad in [0, HEADER_LEN as u64, ciphertext_len(c) + 1, ciphertext_len(c) + CHUNK_OVERHEAD as u64, MAX_CIPHERTEXT_LEN + 1] {
            assert_eq!(plaintext_len(bad), None, "{bad}");
        }
    }

    #[test]
    fn round_trips_every_boundary_size() {
        for len in [0, 1, CHUNK_LEN - 1, CHUNK_LEN, CHUNK_LEN + 1, 2 * CHUNK_LEN, 3 * 1024 * 1024 + 5] {
            let data = plaintext(len);
            let (enc, ct) = seal(&data);
            assert_eq!(enc.plaintext_len, len as u64);
            assert_eq!(enc.ciphertext_len, ct.len() as u64);
            assert_eq!(ciphertext_len(len as u64), ct.len() as u64, "length formula for {len}");
            let mut h = CiphertextHash::default();
            h.update(&ct);
            assert_eq!(h.finalize(), enc.digest, "digest of the ciphertext for {len}");
            assert_eq!(open(&enc, &ct).expect("decrypt"), data, "round trip of {len} bytes");
        }
    }

    #[test]
    fn each_chunk_is_decrypted_into_the_buffer_the_last_one_was_handed_back_in() {
        let data = plaintext(3 * CHUNK_LEN + 5);
        let (enc, ct) = seal(&data);
        let (mut out, mut buffers) = (Vec::new(), Vec::new());
        let n = Decryptor::new(&enc.key)
            .decrypt_chunks(&ct[..], |piece| {
                out.extend_from_slice(&piece);
                buffers.push(piece.as_ptr());
                Ok(piece)
            })
            .expect("decrypt");
        assert_eq!((n as usize, out), (data.len(), data));
        assert_eq!(buffers.len(), 4);
        assert!(buffers.iter().all(|&b| b == buffers[0]), "one buffer for every chunk");
    }

    #[test]
    fn every_file_gets_its_own_key() {
        let (a, ct_a) = seal(b"same");
        let (b, ct_b) = seal(b"same");
        assert_ne!(a.key, b.key);
        assert_ne!(ct_a, ct_b);
        assert_eq!(format!("{:?}", a.key), "FileKey(..)", "the key never reaches a log");
    }

    #[test]
    fn new_files_get_blake3_and_blake2b_still_verifies() {
        crate::crypto::init();
        let digest = |algorithm| {
            let mut h = CiphertextHash::new(algorithm);
            h.update(b"ab");
            h.update(b"c");
            h.finalize()
        };
        // The published test vectors of "abc".
        let blake3 = digest(DigestAlgorithm::Blake3);
        assert_eq!(crate::crypto::hex_encode(&blake3.bytes), "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85");
        let blake2b = digest(DigestAlgorithm::Blake2b256);
        assert_eq!(crate::crypto::hex_encode(&blake2b.bytes), "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319");
        assert_eq!(seal(b"x").0.digest.algorithm, DigestAlgorithm::Blake3);
        // The same bytes under the other algorithm's name do not pass.
        let renamed = FileDigest { algorithm: DigestAlgorithm::Blake2b256, bytes: blake3.bytes };
        assert!(matches!(check_digest(&blake3, &renamed), Err(FileCryptoError::DigestMismatch)));
        check_digest(&blake2b, &blake2b).expect("an earlier version's digest verifies");
    }

    #[test]
    fn a_changed_byte_fails_in_header_body_and_final_chunk() {
        let data = plaintext(2 * CHUNK_LEN + 10);
        let (enc, ct) = seal(&data);
        for at in [0, HEADER_LEN + 5, HEADER_LEN + CHUNK_LEN + CHUNK_OVERHEAD + 3, ct.len() - 1] {
            let mut bad = ct.clone();
            bad[at] ^= 0x40;
            let mut out = Vec::new();
            let err = Decryptor::new(&enc.key).decrypt(&bad[..], &mut out).expect_err("a changed byte must fail");
            assert!(matches!(err, FileCryptoError::NotAuthentic), "byte {at}: {err}");
            assert!(matches!(open(&enc, &bad), Err(FileCryptoError::DigestMismatch)), "the digest catches it first");
        }
    }

    #[test]
    fn a_wrong_key_fails() {
        let (_, ct) = seal(&plaintext(100));
        let err = Decryptor::new(&FileKey::generate()).decrypt(&ct[..], Vec::new()).expect_err("wrong key");
        assert!(matches!(err, FileCryptoError::NotAuthentic));
    }

    #[test]
    fn a_truncated_stream_fails() {
        let data = plaintext(2 * CHUNK_LEN + 10);
        let (enc, ct) = seal(&data);
        let chunk = CHUNK_LEN + CHUNK_OVERHEAD;
        // Cut at a chunk boundary (no FINAL chunk), inside a chunk, inside the header, and empty.
        for cut in [HEADER_LEN + 2 * chunk, HEADER_LEN + chunk, HEADER_LEN + chunk + 100, ct.len() - 1, HEADER_LEN, 10, 0] {
            let err = Decryptor::new(&enc.key).decrypt(&ct[..cut], Vec::new()).expect_err("truncated");
            assert!(
                matches!(err, FileCryptoError::Truncated | FileCryptoError::NotAuthentic),
                "cut at {cut}: {err}"
            );
        }
        // A whole-chunk cut is reported as what it is.
        let err = Decryptor::new(&enc.key).decrypt(&ct[..HEADER_LEN + chunk], Vec::new()).expect_err("truncated");
        assert!(matches!(err, FileCryptoError::Truncated), "{err}");
    }

    #[test]
    fn reordered_chunks_fail() {
        let data = plaintext(3 * CHUNK_LEN);
        let (enc, ct) = seal(&data);
        let chunk = CHUNK_LEN + CHUNK_OVERHEAD;
        let mut swapped = ct[..HEADER_LEN].to_vec();
        swapped.extend_from_slice(&ct[HEADER_LEN + chunk..HEADER_LEN + 2 * chunk]);
        swapped.extend_from_slice(&ct[HEADER_LEN..HEADER_LEN + chunk]);
        swapped.extend_from_slice(&ct[HEADER_LEN + 2 * chunk..]);
        assert_eq!(swapped.len(), ct.len());
        let err = Decryptor::new(&enc.key).decrypt(&swapped[..], Vec::new()).expect_err("reordered");
        assert!(matches!(err, FileCryptoError::NotAuthentic), "{err}");
        // A chunk repeated in place of another fails too.
        let mut repeated = ct.clone();
        repeated.copy_within(HEADER_LEN..HEADER_LEN + chunk, HEADER_LEN + chunk);
        let err = Decryptor::new(&enc.key).decrypt(&repeated[..], Vec::new()).expect_err("repeated");
        assert!(matches!(err, FileCryptoError::NotAuthentic), "{err}");
    }

    #[test]
    fn trailing_bytes_after_final_fail() {
        for len in [0, 10, CHUNK_LEN] {
            let (enc, mut ct) = seal(&plaintext(len));
            ct.push(0);
            let err = Decryptor::new(&enc.key).decrypt(&ct[..], Vec::new()).expect_err("trailing");
            // After a short FINAL chunk the extra byte is read as part of it, so it no longer
            // authenticates; after a full one it is seen as what it is.
            if len == CHUNK_LEN {
                assert!(matches!(err, FileCryptoError::TrailingData), "{len}: {err}");
            } else {
                assert!(matches!(err, FileCryptoError::NotAuthentic), "{len}: {err}");
            }
        }
    }

    #[test]
    fn a_wrong_digest_fails() {
        let (mut enc, ct) = seal(&plaintext(1000));
        enc.digest.bytes[0] ^= 1;
        assert!(matches!(open(&enc, &ct), Err(FileCryptoError::DigestMismatch)));
    }

    #[test]
    fn plaintext_over_the_limit_is_refused() {
        crate::crypto::init();
        let input = io::repeat(7).take(MAX_PLAINTEXT_LEN + 1);
        let err = encrypt(input, io::sink()).expect_err("over the limit");
        assert!(matches!(err, FileCryptoError::TooLarge));
        // Exactly the limit is accepted and has the advertised maximal ciphertext length.
        let enc = encrypt(io::repeat(7).take(MAX_PLAINTEXT_LEN), io::sink()).expect("at the limit");
        assert_eq!(enc.ciphertext_len, MAX_CIPHERTEXT_LEN);
    }
}
