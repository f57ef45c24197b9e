//! The platform's two file calls as a transfer (`e2e::file`) uses them: a chunked upload and a
//! chunked download. `wire::Platform`, the gRPC channel the gateway and the user client hold,
//! is the real transport; the gateway's fake platform (`gateway::port::fake`) keeps files in
//! memory, so unit tests drive the media methods without a server and can play a platform that
//! serves other bytes.
//!
//! A call answers as gRPC does: a refusal is a status, read by `wire::rpc` either way.

use std::pin::Pin;
use std::time::Duration;

use futures::SinkExt;
use grpcio::WriteFlags;

use crate::wire::connect::Platform;
use crate::wire::platform as pb;

/// Deadline of one transfer: 50 MiB over a slow link, not a stuck call for ever.
pub const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

/// A download's chunks, in order, until the platform ends the stream (or the call fails).
pub type ChunkStream = Pin<Box<dyn futures::Stream<Item = grpcio::Result<pb::FileChunk>> + Send>>;

/// Where files are uploaded to and downloaded from.
pub trait FileTransport: Sync {
    /// Opens an upload call.
    fn upload_file(&self) -> grpcio::Result<Box<dyn UploadCall>>;

    /// Opens the download of the file `req` names.
    fn download_file(&self, req: &pb::DownloadFileRequest) -> grpcio::Result<ChunkStream>;
}

/// One upload call: chunks in, one answer out. Dropped before [`UploadCall::close`], the call
/// is cancelled and the platform keeps nothing.
pub trait UploadCall: Send {
    /// Sends one chunk. An error means the call has ended: [`UploadCall::answer`] says why.
    fn send(&mut self, chunk: pb::FileChunk) -> grpcio::Result<()>;

    /// Ends the stream of chunks: the platform stores the file.
    fn close(&mut self) -> grpcio::Result<()>;

    /// The platform's answer: after `close`, the stored file's reference and size; after a
    /// failed `send`, the status that ended the call.
    fn answer(self: Box<Self>) -> grpcio::Result<pb::UploadFileResponse>;
}

impl FileTransport for Platform {
    fn upload_file(&self) -> grpcio::Result<Box<dyn UploadCall>> {
        let (sink, receiver) = self.client.upload_file(self.opt_with_timeout(Some(TRANSFER_TIMEOUT)))?;
        Ok(Box::new(GrpcUpload { sink, receiver }))
    }

    fn download_file(&self, req: &pb::DownloadFileRequest) -> grpcio::Result<ChunkStream> {
        Ok(Box::pin(self.client.download_file(req, self.opt_with_timeout(Some(TRANSFER_TIMEOUT)))?))
    }
}

/// An upload over gRPC: a client-streaming call (it takes one message at a time).
struct GrpcUpload {
    sink: grpcio::ClientCStreamSender<pb::FileChunk>,
    receiver: grpcio::ClientCStreamReceiver<pb::UploadFileResponse>,
}

impl UploadCall for GrpcUpload {
    fn send(&mut self, chunk: pb::FileChunk) -> grpcio::Result<()> {
        futures::executor::block_on(self.sink.send((chunk, WriteFlags::default())))
    }

    fn close(&mut self) -> grpcio::Result<()> {
        futures::executor::block_on(self.sink.close())
    }

    fn answer(self: Box<Self>) -> grpcio::Result<pb::UploadFileResponse> {
        // The sink lives until the answer is in: dropping an unclosed one would cancel the call
        // and hide the platform's status behind CANCELLED.
        let GrpcUpload { sink, receiver } = *self;
        let answer = futures::executor::block_on(receiver);
        drop(sink);
        answer
    }
}
