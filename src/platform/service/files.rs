//! UploadFile (client streaming) and DownloadFile (server streaming): the encrypted file
//! transport. The platform moves and stores ciphertext only; it sees sizes and which device
//! uploaded or downloaded, never a key or plaintext.
//!
//! Shape, like the Inbox stream: the completion-queue thread never touches the disk. Each
//! transfer gets one named thread (`file-up#<n>`, `file-dn#<n>`), at most `MAX_TRANSFERS` at
//! once, and a future on the completion queue (`ctx.spawn`) moves chunks between the gRPC call
//! and that thread through a bounded futures channel, so a slow disk slows the client down
//! (gRPC flow control) instead of filling memory.
//!
//! An upload is staged in a private temporary file and stored under a new random reference
//! only once it ended normally, its last chunk marked `last`, within the limit; anything else deletes it
//! (`store::StagedUpload`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use futures::channel::{mpsc, oneshot};
use futures::{SinkExt, StreamExt};
use grpcio::{ClientStreamingSink, RequestStream, RpcContext, RpcStatus, RpcStatusCode, ServerStreamingSink, WriteFlags};

use crate::crypto::file::{CHUNK_OVERHEAD, HEADER_LEN, MAX_CIPHERTEXT_LEN};
use crate::platform::call_threads::CallThreads;
use crate::platform::store::{DeviceAddr, Store};
use crate::wire::platform as pb;

/// Largest `FileChunk` accepted, in bytes.
pub const CHUNK_MAX: usize = 256 * 1024;
/// Bytes per `FileChunk` sent by a download: gRPC moves one message of a call at a time, so
/// fewer, larger messages move a file faster (clients accept up to 64 MiB per message).
pub const DOWNLOAD_CHUNK: usize = 1024 * 1024;
/// Transfers (uploads and downloads together) served at once; more are refused with
/// RESOURCE_EXHAUSTED, so threads and open files stay bounded.
pub const MAX_TRANSFERS: usize = 16;
/// Chunks buffered between a transfer's thread and its gRPC call.
const CHANNEL_BOUND: usize = 4;
/// The smallest valid ciphertext: the header and one (empty) FINAL chunk.
const MIN_CIPHERTEXT_LEN: u64 = (HEADER_LEN + CHUNK_OVERHEAD) as u64;

/// Counts running transfers; a slot is given back when its guard drops.
#[derive(Default)]
pub struct Transfers {
    running: AtomicUsize,
    numbered: AtomicU64,
}

/// One running transfer's place, held by its thread.
pub struct TransferSlot {
    transfers: Arc<Transfers>,
    pub number: u64,
}

impl Drop for TransferSlot {
    fn drop(&mut self) {
        self.transfers.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Transfers {
    fn try_acquire(self: &Arc<Self>) -> Option<TransferSlot> {
        let taken = self
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_TRANSFERS).then_some(n + 1))
            .is_ok();
        taken.then(|| TransferSlot { transfers: self.clone(), number: self.numbered.fetch_add(1, Ordering::Relaxed) + 1 })
    }
}

fn busy() -> RpcStatus {
    RpcStatus::with_message(RpcStatusCode::RESOURCE_EXHAUSTED, format!("too many file transfers (at most {MAX_TRANSFERS}); retry later"))
}

fn internal(what: &str) -> RpcStatus {
    RpcStatus::with_message(RpcStatusCode::INTERNAL, what.to_string())
}

// ── Upload ──

/// What the call's future hands the upload thread.
enum Piece {
    Data { data: Vec<u8>, last: bool },
    /// The client closed its stream normally: the upload is complete.
    End,
}

/// Serves one UploadFile call of an authenticated device.
pub fn upload(
    store: &Arc<Store>,
    transfers: &Arc<Transfers>,
    threads: &CallThreads,
    ctx: &RpcContext<'_>,
    addr: DeviceAddr,
    mut requests: RequestStream<pb::FileChunk>,
    sink: ClientStreamingSink<pb::UploadFileResponse>,
) {
    let (tx, rx) = mpsc::channel::<Piece>(CHANNEL_BOUND);
    let (done_tx, done_rx) = oneshot::channel::<Result<pb::UploadFileResponse, RpcStatus>>();
    let started = transfers.try_acquire().ok_or_else(busy).and_then(|slot| {
        let store = store.clone();
        threads
            .spawn(format!("file-up#{}", slot.number), move || {
                let outcome = receive(&store, addr, rx);
                drop(slot);
                let _ = done_tx.send(outcome);
            })
            .map_err(|e| {
                log::error!("cannot start an upload thread for device {} of user {}: {e}", addr.device_id, addr.user_id);
                busy()
            })
    });
    if let Err(status) = started {
        ctx.spawn(async move {
            let _ = sink.fail(status).await;
            drop(requests);
        });
        return;
    }
    ctx.spawn(async move {
        let mut tx = tx;
        loop {
            match requests.next().await {
                Some(Ok(chunk)) => {
                    // A closed channel: the thread refused the upload; its answer says why.
                    if tx.send(Piece::Data { data: chunk.data, last: chunk.last }).await.is_err() {
                        break;
                    }
                }
                // The client went away or the call broke: the thread drops the upload.
                Some(Err(e)) => {
                    log::debug!("upload from device {} of user {} broke: {e}", addr.device_id, addr.user_id);
                    break;
                }
                None => {
                    let _ = tx.send(Piece::End).await;
                    break;
                }
            }
        }
        drop(tx);
        let outcome = done_rx.await.unwrap_or_else(|_| Err(internal("upload thread ended without an answer")));
        let _ = match outcome {
            Ok(resp) => sink.success(resp).await,
            Err(status) => sink.fail(status).await,
        };
        // Dropped only now: dropping an unfinished request stream cancels the call, which
        // would hide the status just sent.
        drop(requests);
    });
}

/// The upload thread: stages what arrives, then stores it under a new reference.
fn receive(store: &Store, addr: DeviceAddr, mut rx: mpsc::Receiver<Piece>) -> Result<pb::UploadFileResponse, RpcStatus> {
    let who = format!("device {} of user {}", addr.device_id, addr.user_id);
    let mut staged = store.begin_upload().map_err(|e| e.to_status())?;
    let mut last_seen = false;
    loop {
        match futures::executor::block_on(rx.next()) {
            Some(Piece::Data { data, last }) => {
                if last_seen {
                    return Err(RpcStatus::with_message(
                        RpcStatusCode::INVALID_ARGUMENT,
                        "a file chunk after the one marked last".into(),
                    ));
                }
                last_seen = last;
                if data.len() > CHUNK_MAX {
                    return Err(RpcStatus::with_message(
                        RpcStatusCode::INVALID_ARGUMENT,
                        format!("a file chunk is at most {CHUNK_MAX} bytes"),
                    ));
                }
                if staged.len() + data.len() as u64 > MAX_CIPHERTEXT_LEN {
                    log::info!("upload from {who} refused: over {MAX_CIPHERTEXT_LEN} bytes");
                    return Err(RpcStatus::with_message(
                        RpcStatusCode::RESOURCE_EXHAUSTED,
                        format!("file is larger than the limit of {MAX_CIPHERTEXT_LEN} encrypted bytes"),
                    ));
                }
                staged.write(&data).map_err(|e| e.to_status())?;
            }
            Some(Piece::End) if last_seen => break,
            // Ended without its last chunk: cancelled (which gRPC may present as an end).
            Some(Piece::End) | None => {
                log::debug!("upload from {who} dropped: the stream broke off");
                return Err(RpcStatus::with_message(RpcStatusCode::CANCELLED, "upload did not complete".into()));
            }
        }
    }
    if staged.len() < MIN_CIPHERTEXT_LEN {
        return Err(RpcStatus::with_message(
            RpcStatusCode::INVALID_ARGUMENT,
            format!("an encrypted file is at least {MIN_CIPHERTEXT_LEN} bytes"),
        ));
    }
    let (file_ref, size) = store.commit_upload(staged, addr, crate::clock::unix_now()).map_err(|e| e.to_status())?;
    log::info!("stored a file of {size} bytes from {who}");
    Ok(pb::UploadFileResponse { file_ref, size, ..Default::default() })
}

// ── Download ──

/// What the download thread hands the call's future.
enum Outgoing {
    Chunk(pb::FileChunk),
    Failed(RpcStatus),
}

/// Serves one DownloadFile call of an authenticated device.
pub fn download(
    store: &Arc<Store>,
    transfers: &Arc<Transfers>,
    threads: &CallThreads,
    ctx: &RpcContext<'_>,
    addr: DeviceAddr,
    req: pb::DownloadFileRequest,
    mut sink: ServerStreamingSink<pb::FileChunk>,
) {
    // One indexed lookup, like a unary handler; the reading happens on the thread.
    let opened = store.open_file(&req.file_ref).map_err(|e| e.to_status());
    let (tx, mut rx) = mpsc::channel::<Outgoing>(CHANNEL_BOUND);
    let started = opened.and_then(|(file, size)| {
        let slot = transfers.try_acquire().ok_or_else(busy)?;
        log::debug!("device {} of user {} downloads a file of {size} bytes", addr.device_id, addr.user_id);
        threads
            .spawn(format!("file-dn#{}", slot.number), move || {
                send_file(file, size, tx);
                drop(slot);
            })
            .map_err(|e| {
                log::error!("cannot start a download thread for device {} of user {}: {e}", addr.device_id, addr.user_id);
                busy()
            })
    });
    if let Err(status) = started {
        ctx.spawn(async move {
            let _ = sink.fail(status).await;
        });
        return;
    }
    ctx.spawn(async move {
        while let Some(item) = rx.next().await {
            match item {
                Outgoing::Chunk(chunk) => {
                    if let Err(e) = sink.send((chunk, WriteFlags::default())).await {
                        // The client went away; dropping `rx` ends the thread.
                        log::debug!("download by device {} of user {} ended: {e}", addr.device_id, addr.user_id);
                        return;
                    }
                }
                Outgoing::Failed(status) => {
                    let _ = sink.fail(status).await;
                    return;
                }
            }
        }
        let _ = sink.close().await;
    });
}

/// The download thread: the stored ciphertext in chunks of `DOWNLOAD_CHUNK`; a file whose
/// length is not the recorded one ends the call with DATA_LOSS.
fn send_file(file: std::fs::File, size: u64, mut tx: mpsc::Sender<Outgoing>) {
    use std::io::Read;
    let mut file = file;
    let mut sent = 0u64;
    loop {
        let mut buf = Vec::with_capacity(DOWNLOAD_CHUNK);
        let n = match (&mut file).take(DOWNLOAD_CHUNK as u64).read_to_end(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                log::error!("platform file store: reading a stored file: {e}");
                let _ = futures::executor::block_on(tx.send(Outgoing::Failed(internal("cannot read the file"))));
                return;
            }
        };
        if n == 0 {
            break;
        }
        sent += n as u64;
        if sent > size {
            break;
        }
        let chunk = pb::FileChunk { data: buf, ..Default::default() };
        if futures::executor::block_on(tx.send(Outgoing::Chunk(chunk))).is_err() {
            return; // the call ended
        }
    }
    if sent != size {
        log::error!("platform file store: a stored file has {sent} bytes, {size} recorded");
        let status = RpcStatus::with_message(RpcStatusCode::DATA_LOSS, "stored file is damaged".into());
        let _ = futures::executor::block_on(tx.send(Outgoing::Failed(status)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_slots_are_bounded_and_given_back() {
        let transfers = Arc::new(Transfers::default());
        let slots: Vec<TransferSlot> = (0..MAX_TRANSFERS).map(|_| transfers.try_acquire().expect("a slot")).collect();
        assert!(transfers.try_acquire().is_none(), "no slot beyond the bound");
        let numbers: std::collections::BTreeSet<u64> = slots.iter().map(|s| s.number).collect();
        assert_eq!(numbers.len(), MAX_TRANSFERS, "each transfer has its own thread number");
        drop(slots);
        assert!(transfers.try_acquire().is_some(), "dropping a slot gives it back");
    }
}
