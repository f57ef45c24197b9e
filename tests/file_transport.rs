//! The encrypted file transport against a real `platform-server`: UploadFile and DownloadFile
//! through `e2e::file`, the platform's limit, and that a damaged or missing file yields an
//! error and no plaintext.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bot_gateway::crypto::file as file_crypto;
use bot_gateway::crypto::file::{
    CiphertextHash, DigestAlgorithm, FileCryptoError, FileDigest, FileKey, MAX_CIPHERTEXT_LEN, MAX_PLAINTEXT_LEN,
};
use bot_gateway::e2e::file::{download_verified, upload_encrypted, FileError, FileSource};
use bot_gateway::wire::platform as pb;
use bot_gateway::wire::{rpc, Credential, Platform};
use futures::SinkExt;
use grpcio::{RpcStatusCode, WriteFlags};
use support::PlatformServer;

struct Setup {
    dir: tempfile::TempDir,
    platform: PlatformServer,
    alice: bot_gateway::client::Profile,
    bob: bot_gateway::client::Profile,
}

fn setup() -> Setup {
    bot_gateway::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let platform = PlatformServer::start(&dir.path().join("platform"));
    let register = |name: &str| {
        bot_gateway::client::Profile::register(&platform.url, dir.path().join(name), name, name)
            .unwrap_or_else(|e| panic!("register {name}: {e}"))
    };
    let (alice, bob) = (register("alice"), register("bob"));
    std::fs::create_dir(dir.path().join("tmp")).expect("tmp dir");
    Setup { dir, platform, alice, bob }
}

impl Setup {
    fn files_dir(&self) -> PathBuf {
        self.platform.data_dir.join("files")
    }

    /// Where downloads put their temporary files.
    fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    fn stored_path(&self, file_ref: &str) -> PathBuf {
        self.files_dir().join(&file_ref[..2]).join(file_ref)
    }
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Waits (bounded) until nothing is left under `dir`; the platform drops a refused or broken
/// upload on its transfer thread, which may finish just after the call did.
fn assert_nothing_stored(dir: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = files_under(dir);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: the platform kept {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_u32;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect()
}

fn rpc_code(err: &FileError) -> Option<RpcStatusCode> {
    match err {
        FileError::Rpc(e) => rpc::code(e),
        _ => None,
    }
}

#[test]
fn five_mib_round_trip_through_the_platform_stores_ciphertext_only() {
    let s = setup();
    let plaintext = pattern(5 * 1024 * 1024 + 123);
    let up = upload_encrypted(s.alice.platform(), &plaintext[..]).expect("upload");
    assert_eq!(up.size, plaintext.len() as u64);
    assert_eq!(up.file_ref.len(), 64, "a 32-byte random reference in hex");

    // The platform holds the ciphertext, privately, and nothing of the plaintext.
    let stored = std::fs::read(s.stored_path(&up.file_ref)).expect("stored file");
    assert_eq!(stored.len() as u64, up.stored_size);
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(s.stored_path(&up.file_ref)).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let window = &plaintext[1_000_000..1_000_064];
    assert!(!stored.windows(window.len()).any(|w| w == window), "no plaintext on the platform's disk");

    // Another device (any registered one) downloads and verifies it.
    let got = download_verified(s.bob.platform(), &up.source(), &s.tmp()).expect("download");
    assert_eq!(got.len, plaintext.len() as u64);
    let mut back = Vec::new();
    let written = got.write_plaintext(&mut back).expect("decrypt on the way out");
    assert_eq!(written, plaintext.len() as u64);
    assert!(back == plaintext, "the downloaded plaintext is the uploaded one");
    assert!(files_under(&s.tmp()).is_empty(), "downloads leave no named temporary file");

    // Two uploads of the same bytes are two unrelated files.
    let again = upload_encrypted(s.alice.platform(), &plaintext[..1000]).expect("second upload");
    assert_ne!(again.file_ref, up.file_ref);
    assert_ne!(again.key, up.key);
}

#[test]
fn a_corrupted_stored_file_is_refused_and_yields_no_plaintext() {
    let s = setup();
    let plaintext = pattern(300 * 1024);
    let up = upload_encrypted(s.alice.platform(), &plaintext[..]).expect("upload");
    let path = s.stored_path(&up.file_ref);
    let mut stored = std::fs::read(&path).expect("stored");
    stored[200_000] ^= 0x01;
    std::fs::write(&path, &stored).expect("corrupt the stored file");

    let err = download_verified(s.bob.platform(), &up.source(), &s.tmp())
        .expect_err("a changed byte must be refused");
    // The chunk fails as it arrives (the digest would fail at the end).
    assert!(matches!(err, FileError::Crypto(FileCryptoError::NotAuthentic | FileCryptoError::DigestMismatch)), "{err}");
    assert!(files_under(&s.tmp()).is_empty(), "no plaintext file was produced");

    // A digest matching the damaged bytes means the sender itself made them (the digest comes
    // from its end-to-end message). The file is decrypted once, on its way out: the chunks
    // before the damaged one come out, then the decryption stops with an error, never a
    // byte of the damaged chunk, so the reader of an HTTP download sees a short body.
    let digest_of = |bytes: &[u8]| {
        let mut hash = CiphertextHash::new(up.digest.algorithm);
        hash.update(bytes);
        hash.finalize()
    };
    let verified = download_verified(s.bob.platform(), &FileSource { digest: digest_of(&stored), ..up.source() }, &s.tmp())
        .expect("the digest matches and the first chunk authenticates");
    let mut out = Vec::new();
    let err = verified.write_plaintext(&mut out).expect_err("a chunk that does not authenticate stops the decryption");
    assert!(matches!(err, FileError::Crypto(FileCryptoError::NotAuthentic)), "{err}");
    let good_chunks = (200_000 - file_crypto::HEADER_LEN) / (file_crypto::CHUNK_LEN + file_crypto::CHUNK_OVERHEAD);
    assert_eq!(out.len(), good_chunks * file_crypto::CHUNK_LEN, "only the chunks before the damaged one");
    assert!(out[..] == plaintext[..out.len()]);
    // A damaged first chunk is refused before anything is served, whatever the digest.
    let mut first = stored.clone();
    first[1000] ^= 0x01;
    std::fs::write(&path, &first).expect("damage the first chunk");
    let err = download_verified(s.bob.platform(), &FileSource { digest: digest_of(&first), ..up.source() }, &s.tmp())
        .expect_err("a first chunk that does not authenticate");
    assert!(matches!(err, FileError::Crypto(FileCryptoError::NotAuthentic)), "{err}");

    // A truncated stored file (its FINAL chunk gone) is refused too.
    let cut = &stored[..stored.len() - 1000];
    std::fs::write(&path, cut).expect("truncate");
    let err = download_verified(s.bob.platform(), &up.source(), &s.tmp()).expect_err("truncated");
    // The short last chunk fails as it arrives (or the digest at the end, or the platform).
    assert!(
        matches!(
            err,
            FileError::Crypto(FileCryptoError::NotAuthentic | FileCryptoError::Truncated | FileCryptoError::DigestMismatch)
        ) || rpc_code(&err) == Some(RpcStatusCode::DATA_LOSS),
        "{err}"
    );

    // The wrong key fails with the right digest.
    std::fs::write(&path, {
        let mut fixed = stored.clone();
        fixed[200_000] ^= 0x01;
        fixed
    })
    .expect("restore");
    let err = download_verified(s.bob.platform(), &FileSource { key: FileKey::generate(), ..up.source() }, &s.tmp())
        .expect_err("wrong key");
    assert!(matches!(err, FileError::Crypto(FileCryptoError::NotAuthentic)), "{err}");
    assert!(files_under(&s.tmp()).is_empty());
    download_verified(s.bob.platform(), &up.source(), &s.tmp()).expect("restored file verifies");
    let other = FileDigest { bytes: [0u8; 32], ..up.digest };
    let err = download_verified(s.bob.platform(), &FileSource { digest: other, ..up.source() }, &s.tmp())
        .expect_err("an intact file under another digest");
    assert!(matches!(err, FileError::Crypto(FileCryptoError::DigestMismatch)), "{err}");
    // The right bytes named as another algorithm's digest do not pass either.
    let renamed = FileDigest { algorithm: DigestAlgorithm::Blake2b256, ..up.digest };
    let err = download_verified(s.bob.platform(), &FileSource { digest: renamed, ..up.source() }, &s.tmp())
        .expect_err("the digest under another algorithm's name");
    assert!(matches!(err, FileError::Crypto(FileCryptoError::DigestMismatch)), "{err}");
}

/// Files sent by versions before BLAKE3 carry a BLAKE2b-256 digest (their messages have no
/// algorithm field): they still verify, and a wrong one still fails.
#[test]
fn a_file_of_an_earlier_version_with_a_blake2b_digest_still_verifies() {
    let s = setup();
    let plaintext = pattern(200 * 1024 + 7);
    let up = upload_encrypted(s.alice.platform(), &plaintext[..]).expect("upload");
    assert_eq!(up.digest.algorithm, DigestAlgorithm::Blake3, "new files get BLAKE3");
    let mut blake2b = CiphertextHash::new(DigestAlgorithm::Blake2b256);
    blake2b.update(&std::fs::read(s.stored_path(&up.file_ref)).expect("stored"));
    let old = FileSource { digest: blake2b.finalize(), ..up.source() };
    // What an earlier version's message decodes to: no algorithm field means BLAKE2b.
    let mut media = up.to_media();
    media.digest = old.digest.bytes.to_vec();
    media.digest_algorithm = Default::default();
    let decoded = FileSource::of(&media).expect("a known algorithm");
    assert_eq!(decoded.digest, old.digest);
    let got = download_verified(s.bob.platform(), &decoded, &s.tmp()).expect("an earlier version's file verifies");
    let mut back = Vec::new();
    got.write_plaintext(&mut back).expect("decrypt");
    assert!(back == plaintext);
    let mut wrong = decoded.clone();
    wrong.digest.bytes[31] ^= 1;
    let err = download_verified(s.bob.platform(), &wrong, &s.tmp()).expect_err("a wrong BLAKE2b digest");
    assert!(matches!(err, FileError::Crypto(FileCryptoError::DigestMismatch)), "{err}");
    // A digest algorithm from a newer version is not guessed at.
    media.digest_algorithm = protobuf::EnumOrUnknown::from_i32(77);
    assert!(FileSource::of(&media).is_none());
}

#[test]
fn a_missing_or_malformed_ref_is_refused() {
    let s = setup();
    let source = |file_ref: &str| FileSource {
        file_ref: file_ref.to_string(),
        key: FileKey::generate(),
        digest: FileDigest { algorithm: DigestAlgorithm::Blake3, bytes: [0; 32] },
    };
    let err = download_verified(s.alice.platform(), &source(&"0f".repeat(32)), &s.tmp()).expect_err("missing");
    assert_eq!(rpc_code(&err), Some(RpcStatusCode::NOT_FOUND), "{err}");
    let err = download_verified(s.alice.platform(), &source("../platform.db"), &s.tmp()).expect_err("malformed");
    assert_eq!(rpc_code(&err), Some(RpcStatusCode::INVALID_ARGUMENT), "{err}");
    assert!(files_under(&s.tmp()).is_empty());
}

#[test]
fn transfers_need_a_registered_device() {
    let s = setup();
    let up = upload_encrypted(s.alice.platform(), &b"hello"[..]).expect("upload");
    let anonymous = Platform::connect(&s.platform.url, Credential::Anonymous).expect("connect");
    let err = upload_encrypted(&anonymous, &b"hello"[..]).expect_err("anonymous upload");
    assert_eq!(rpc_code(&err), Some(RpcStatusCode::UNAUTHENTICATED), "{err}");
    let err = download_verified(&anonymous, &up.source(), &s.tmp()).expect_err("anonymous download");
    assert_eq!(rpc_code(&err), Some(RpcStatusCode::UNAUTHENTICATED), "{err}");
    assert_eq!(files_under(&s.files_dir()).len(), 1, "only the authorized upload is stored");
}

#[test]
fn an_oversized_upload_is_refused_and_leaves_nothing() {
    let s = setup();
    let platform = s.alice.platform();

    // Straight through gRPC, past the client's own check: one byte over the platform's limit.
    let (mut sink, receiver) = platform.client.upload_file(platform.opt_with_timeout(Some(Duration::from_secs(120)))).expect("call");
    let chunk = vec![0x5a; 256 * 1024];
    let mut sent = 0u64;
    while sent <= MAX_CIPHERTEXT_LEN {
        let n = (MAX_CIPHERTEXT_LEN + 1 - sent).min(chunk.len() as u64) as usize;
        let last = sent + n as u64 > MAX_CIPHERTEXT_LEN;
        let msg = pb::FileChunk { data: chunk[..n].to_vec(), last, ..Default::default() };
        if futures::executor::block_on(sink.send((msg, WriteFlags::default()))).is_err() {
            break; // the platform has already answered
        }
        sent += n as u64;
    }
    let _ = futures::executor::block_on(sink.close());
    let err = futures::executor::block_on(receiver).expect_err("over the limit");
    assert_eq!(rpc::code(&err), Some(RpcStatusCode::RESOURCE_EXHAUSTED), "{}", rpc::text(&err));
    assert_nothing_stored(&s.files_dir(), "an oversized upload");

    // Through the helper: refused before the platform stores anything.
    let err = upload_encrypted(platform, std::io::repeat(1).take(MAX_PLAINTEXT_LEN + 1)).expect_err("too large");
    assert!(matches!(err, FileError::Crypto(FileCryptoError::TooLarge)), "{err}");
    assert_nothing_stored(&s.files_dir(), "a plaintext over 50 MiB");

    // A broken upload (the client goes away before closing its stream) leaves nothing either.
    {
        let (mut sink, receiver) = platform.client.upload_file(platform.opt()).expect("call");
        let msg = pb::FileChunk { data: vec![1; 1000], ..Default::default() };
        futures::executor::block_on(sink.send((msg, WriteFlags::default()))).expect("send");
        drop(sink);
        drop(receiver);
    }
    assert_nothing_stored(&s.files_dir(), "a broken upload");

    // A stream closed without its chunk marked last is incomplete, however it ended.
    let (mut sink, receiver) = platform.client.upload_file(platform.opt()).expect("call");
    let msg = pb::FileChunk { data: vec![1; 1000], ..Default::default() };
    futures::executor::block_on(sink.send((msg, WriteFlags::default()))).expect("send");
    // The platform answers as soon as the stream ends, and the close may see that answer
    // (RpcFinished) before it completes: the answer is what is checked.
    let _ = futures::executor::block_on(sink.close());
    let err = futures::executor::block_on(receiver).expect_err("no last chunk");
    assert_eq!(rpc::code(&err), Some(RpcStatusCode::CANCELLED), "{}", rpc::text(&err));
    assert_nothing_stored(&s.files_dir(), "an upload without its last chunk");

    // The limit is exactly what a 50 MiB plaintext needs: such a file goes through.
    let up = upload_encrypted(platform, std::io::repeat(2).take(MAX_PLAINTEXT_LEN)).expect("a 50 MiB file");
    assert_eq!(up.stored_size, MAX_CIPHERTEXT_LEN);
    assert_eq!(files_under(&s.files_dir()), vec![s.stored_path(&up.file_ref)]);
}

/// A unary call that waits for the platform's database does not hold back a download in
/// progress on the same connection: unary handlers run on the platform's own workers, not on
/// the gRPC completion queue that moves the download's chunks. (Before, eight calls waiting
/// for the database lock held every completion-queue thread, and the download stopped until
/// the lock was released.)
#[test]
fn a_download_goes_on_while_unary_calls_wait_for_the_database() {
    let s = setup();
    let plaintext = pattern(16 * 1024 * 1024);
    let up = upload_encrypted(s.alice.platform(), &plaintext[..]).expect("upload");
    let p = s.bob.platform();
    let req = pb::DownloadFileRequest { file_ref: up.file_ref.clone(), ..Default::default() };
    let mut chunks = futures::executor::block_on_stream(p.client.download_file(&req, p.opt()).expect("download starts"));
    let mut received = chunks.next().expect("a first chunk").expect("chunk").data.len();

    // Another connection holds the database's write lock; eight writing calls on the
    // download's connection wait for it (the platform's busy timeout is 10 s).
    let db = rusqlite::Connection::open(s.platform.data_dir.join("platform.db")).expect("open platform.db");
    db.execute_batch("BEGIN IMMEDIATE").expect("take the write lock");
    let waiting: Vec<_> = (0..8)
        .map(|i| {
            let req = pb::AckRequest { seqs: vec![1_000_000 + i], ..Default::default() };
            // The generated client is synchronous only; its channel sends without waiting.
            p.client.client.unary_call_async(&bot_gateway::wire::platform_grpc::METHOD_PLATFORM_ACK, &req, p.opt()).expect("ack sent")
        })
        .collect();
    // Time for the calls to reach their handlers. Too short a pause can only let a platform
    // that runs handlers on its completion queues pass; it cannot fail a correct one.
    std::thread::sleep(Duration::from_millis(300));

    // The rest of the download arrives while the lock is still held.
    let deadline = Instant::now() + Duration::from_secs(5);
    for chunk in chunks {
        received += chunk.expect("chunk").data.len();
        assert!(Instant::now() < deadline, "the download stalled while unary calls waited for the database");
    }
    assert_eq!(received as u64, up.stored_size, "the whole file arrived");
    assert!(Instant::now() < deadline, "the download finished only after the wait");
    db.execute_batch("ROLLBACK").expect("release the lock");
    for call in waiting {
        futures::executor::block_on(call).expect("each waiting call is answered once the lock is free");
    }
}
