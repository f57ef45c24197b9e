//! An in-memory platform for unit tests: each call is recorded, and answered by what the test
//! scripted for it: first a queued one-time answer, then a standing handler, else UNAVAILABLE
//! (as an unreachable platform would answer; the Inbox stream too).
//!
//! It holds no state of its own but files: a test plays the platform, honest or not, by its
//! answers. Uploaded files are kept (`stored_file`) and served back by reference; a test can
//! serve other bytes under a reference (`replace_file`) as a dishonest platform would.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use grpcio::RpcStatusCode;
use protobuf::Message;

use super::{refusal, unary_calls, InboxStream, PendingAck, PendingCheck, PlatformPort, Reply};
use crate::e2e::file::{ChunkStream, FileTransport, UploadCall};
use crate::wire::platform::*;

type Handler = Box<dyn Fn(&[u8]) -> Reply<Vec<u8>> + Send>;

/// One call the gateway made: the method's name and its encoded request.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: &'static str,
    pub request: Vec<u8>,
}

impl Call {
    /// The request, decoded as the test expects it.
    pub fn request<M: Message>(&self) -> M {
        M::parse_from_bytes(&self.request).expect("a recorded request decodes")
    }
}

#[derive(Default)]
pub struct FakePlatform {
    device_id: u32,
    calls: Mutex<Vec<Call>>,
    queued: Mutex<HashMap<&'static str, VecDeque<Reply<Vec<u8>>>>>,
    handlers: Mutex<HashMap<&'static str, Handler>>,
    /// Uploaded files (ciphertext) by reference.
    files: Files,
}

type Files = Arc<Mutex<HashMap<String, Vec<u8>>>>;

impl FakePlatform {
    pub fn new(device_id: u32) -> FakePlatform {
        FakePlatform { device_id, ..FakePlatform::default() }
    }

    /// The next call of `method` answers `answer` (answers queue in order).
    pub fn answer_once<M: Message>(&self, method: &'static str, answer: Reply<M>) {
        let encoded = answer.map(|m| m.write_to_bytes().expect("encode"));
        self.queued.lock().unwrap().entry(method).or_default().push_back(encoded);
    }

    /// Every call of `method` (with nothing queued) is answered by `handler`.
    pub fn answer_always<Q: Message, M: Message>(
        &self,
        method: &'static str,
        handler: impl Fn(Q) -> Reply<M> + Send + 'static,
    ) {
        let handler: Handler = Box::new(move |bytes| {
            let req = Q::parse_from_bytes(bytes).expect("request decodes");
            handler(req).map(|m| m.write_to_bytes().expect("encode"))
        });
        self.handlers.lock().unwrap().insert(method, handler);
    }

    /// Every `reserve_message_ids` is answered as an honest platform would: the ids `first`,
    /// `first + 1`, … in the request's order, dated `date`; a reservation whose client message
    /// id is `refused.0` is refused with the words `refused.1`.
    pub fn reserve_ids(&self, first: u64, date: i64, refused: Option<(&'static str, &'static str)>) {
        self.answer_always("reserve_message_ids", move |req: ReserveMessageIdsRequest| {
            let ids = req
                .reservations
                .iter()
                .enumerate()
                .map(|(n, r)| match refused {
                    Some((cmid, why)) if r.client_message_id == cmid => {
                        ReservedMessageId { client_message_id: cmid.into(), error: why.into(), ..Default::default() }
                    }
                    _ => ReservedMessageId {
                        client_message_id: r.client_message_id.clone(),
                        message_id: first + n as u64,
                        date,
                        ..Default::default()
                    },
                })
                .collect();
            Ok(ReserveMessageIdsResponse { ids, ..Default::default() })
        });
    }

    /// The calls made so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The calls of one method so far.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.method == method).collect()
    }

    /// The bytes stored under `file_ref` (what reached the platform: ciphertext).
    pub fn stored_file(&self, file_ref: &str) -> Option<Vec<u8>> {
        self.files.lock().unwrap().get(file_ref).cloned()
    }

    /// How many files the platform keeps.
    pub fn stored_files(&self) -> usize {
        self.files.lock().unwrap().len()
    }

    /// From now on serves `bytes` for `file_ref`.
    pub fn replace_file(&self, file_ref: &str, bytes: Vec<u8>) {
        self.files.lock().unwrap().insert(file_ref.to_string(), bytes);
    }

    fn record<Q: Message>(&self, method: &'static str, req: &Q) -> Vec<u8> {
        let request = req.write_to_bytes().expect("encode request");
        self.calls.lock().unwrap().push(Call { method, request: request.clone() });
        request
    }

    fn call<Q: Message, M: Message>(&self, method: &'static str, req: &Q) -> Reply<M> {
        let request = self.record(method, req);
        let queued = self.queued.lock().unwrap().get_mut(method).and_then(|q| q.pop_front());
        let answer = match queued {
            Some(a) => a,
            None => match self.handlers.lock().unwrap().get(method) {
                Some(h) => h(&request),
                None => Err(refusal(RpcStatusCode::UNAVAILABLE, format!("fake platform: no answer for {method}"))),
            },
        };
        answer.map(|bytes| M::parse_from_bytes(&bytes).expect("decode answer"))
    }
}

macro_rules! fake_calls {
    ($($name:ident($req:ty) -> $resp:ty;)*) => {
        impl PlatformPort for FakePlatform {
            $(fn $name(&self, req: &$req) -> Reply<$resp> {
                self.call(stringify!($name), req)
            })*

            fn start_verify_credential(&self) -> PendingCheck {
                // Answered at once, recorded in the order sent, as the real port's would be.
                let answer = self.verify_credential(&VerifyCredentialRequest::new());
                Box::new(move || answer)
            }

            fn start_ack(&self, req: &AckRequest) -> PendingAck {
                let answer: Reply<AckResponse> = self.call("ack", req);
                Box::new(move || answer)
            }

            fn inbox(&self) -> Reply<InboxStream> {
                Err(refusal(RpcStatusCode::UNAVAILABLE, "fake platform: no Inbox stream"))
            }

            fn files(&self) -> &dyn FileTransport {
                self
            }

            fn device_id(&self) -> u32 {
                self.device_id
            }
        }
    };
}
unary_calls!(fake_calls);

/// Chunks served per download message (the real platform's size).
const DOWNLOAD_CHUNK: usize = 256 * 1024;

impl FileTransport for FakePlatform {
    fn upload_file(&self) -> Reply<Box<dyn UploadCall>> {
        self.record("upload_file", &FileChunk::new());
        Ok(Box::new(FakeUpload { files: Arc::clone(&self.files), data: Vec::new(), last: false, closed: false }))
    }

    fn download_file(&self, req: &DownloadFileRequest) -> Reply<ChunkStream> {
        self.record("download_file", req);
        let Some(bytes) = self.stored_file(&req.file_ref) else {
            return Err(refusal(RpcStatusCode::NOT_FOUND, "fake platform: no such file"));
        };
        let chunks: Vec<_> =
            bytes.chunks(DOWNLOAD_CHUNK).map(|data| Ok(FileChunk { data: data.to_vec(), ..Default::default() })).collect();
        Ok(Box::pin(futures::stream::iter(chunks)))
    }
}

/// An upload to the fake: stored under a new reference once closed after its last chunk.
struct FakeUpload {
    files: Files,
    data: Vec<u8>,
    last: bool,
    closed: bool,
}

impl UploadCall for FakeUpload {
    fn send(&mut self, chunk: FileChunk) -> Reply<()> {
        if self.last {
            return Err(refusal(RpcStatusCode::INVALID_ARGUMENT, "fake platform: a chunk after the last one"));
        }
        self.data.extend_from_slice(&chunk.data);
        self.last = chunk.last;
        Ok(())
    }

    fn close(&mut self) -> Reply<()> {
        self.closed = true;
        Ok(())
    }

    fn answer(self: Box<Self>) -> Reply<UploadFileResponse> {
        if !(self.closed && self.last) {
            return Err(refusal(RpcStatusCode::INVALID_ARGUMENT, "fake platform: the upload ended without its last chunk"));
        }
        let mut files = self.files.lock().unwrap();
        let file_ref = format!("{:064x}", files.len() + 1);
        let size = self.data.len() as u64;
        files.insert(file_ref.clone(), self.data);
        Ok(UploadFileResponse { file_ref, size, ..Default::default() })
    }
}
