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
        let opt = self.opt_with_timeout(Some(TRANSFER_TIMEOUT));
        Ok(Box::pin(self.client.client.server_streaming(&DOWNLOAD_FILE, req, opt)?))
    }
}

/// `DownloadFile` as the generated stub has it, but each chunk is read into the buffer the
/// last chunk read on this thread handed back ([`reuse_chunk_buffer`]). Chunks are 1 MiB: a
/// fresh buffer for each is a fresh mapping under the gateway's fixed mmap threshold
/// (`crate::memory`), faulted in page by page and unmapped again, chunk after chunk.
const DOWNLOAD_FILE: grpcio::Method<pb::DownloadFileRequest, pb::FileChunk> = grpcio::Method {
    resp_mar: grpcio::Marshaller { ser: grpcio::pb_ser, de: chunk_into_spare },
    ..crate::wire::platform_grpc::METHOD_PLATFORM_DOWNLOAD_FILE
};

thread_local! {
    /// The buffer of the last chunk this thread was done with, for the next one to fill.
    static SPARE_CHUNK: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Hands a chunk's buffer back, for the next chunk read on this thread (the reader's thread:
/// grpcio decodes a message in the thread that polls the stream). An empty one lets the
/// kept buffer go, as a download ends.
pub fn reuse_chunk_buffer(buf: Vec<u8>) {
    SPARE_CHUNK.with(|spare| spare.set(buf));
}

fn chunk_into_spare(mut reader: grpcio::MessageReader) -> grpcio::Result<pb::FileChunk> {
    let spare = SPARE_CHUNK.with(|spare| spare.take());
    Ok(decode_chunk(&mut protobuf::CodedInputStream::from_buf_read(&mut reader), spare)?)
}

/// Decodes a `FileChunk` as its generated `merge_from` does, its bytes into `buf` (emptied
/// first, its allocation kept when large enough).
fn decode_chunk(input: &mut protobuf::CodedInputStream<'_>, buf: Vec<u8>) -> protobuf::Result<pb::FileChunk> {
    let mut chunk = pb::FileChunk { data: buf, ..Default::default() };
    chunk.data.clear();
    while let Some(tag) = input.read_raw_tag_or_eof()? {
        match tag {
            // Field 1 (`data`, length-delimited) and field 2 (`last`, varint).
            10 => input.read_bytes_into(&mut chunk.data)?,
            16 => chunk.last = input.read_bool()?,
            tag => protobuf::rt::read_unknown_or_skip_group(tag, input, chunk.special_fields.mut_unknown_fields())?,
        }
    }
    Ok(chunk)
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

#[cfg(test)]
mod tests {
    use protobuf::{Message, MessageFull};

    use super::*;

    #[test]
    fn a_chunk_decodes_as_the_generated_code_decodes_it_into_the_buffer_handed_back() {
        // The hand-written decoder knows two fields: one added to the message must be added here.
        let fields: Vec<(String, i32)> = pb::FileChunk::descriptor().fields().map(|f| (f.name().to_string(), f.number())).collect();
        assert_eq!(fields, [("data".to_string(), 1), ("last".to_string(), 2)]);

        let mut sent = pb::FileChunk { data: (0..200_000u32).map(|i| i as u8).collect(), last: true, ..Default::default() };
        sent.special_fields.mut_unknown_fields().add_varint(9, 7);
        let bytes = sent.write_to_bytes().expect("encode");
        let generated = pb::FileChunk::parse_from_bytes(&bytes).expect("generated decoder");

        let spare = Vec::with_capacity(256 * 1024);
        let at = spare.as_ptr();
        let got = decode_chunk(&mut protobuf::CodedInputStream::from_bytes(&bytes), spare).expect("decode");
        assert_eq!(got, generated, "the same message, unknown field kept");
        assert_eq!(got.data.as_ptr(), at, "read into the buffer handed back, not a new one");

        // A chunk without data leaves none of the last one's bytes behind.
        let empty = pb::FileChunk { last: true, ..Default::default() }.write_to_bytes().expect("encode");
        let got = decode_chunk(&mut protobuf::CodedInputStream::from_bytes(&empty), got.data).expect("decode");
        assert!(got.data.is_empty() && got.last);
        assert!(decode_chunk(&mut protobuf::CodedInputStream::from_bytes(&bytes[..100]), Vec::new()).is_err(), "a truncated chunk");
    }
}
