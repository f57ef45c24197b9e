//! An in-memory platform for unit tests: each call is recorded, and answered by what the test
//! scripted for it: first a queued one-time answer, then a standing handler, else UNAVAILABLE
//! (as an unreachable platform would answer; the Inbox stream too). File transfers are refused
//! (UNIMPLEMENTED): the fake holds no files.
//!
//! It holds no state of its own: a test plays the platform, honest or not, by its answers.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use grpcio::RpcStatusCode;
use protobuf::Message;

use super::{refusal, unary_calls, InboxStream, PlatformPort, Reply};
use crate::wire::platform::*;
use crate::wire::Platform;

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
}

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

    /// The calls made so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    /// The calls of one method so far.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.method == method).collect()
    }

    fn call<Q: Message, M: Message>(&self, method: &'static str, req: &Q) -> Reply<M> {
        let request = req.write_to_bytes().expect("encode request");
        self.calls.lock().unwrap().push(Call { method, request: request.clone() });
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

            fn inbox(&self) -> Reply<InboxStream> {
                Err(refusal(RpcStatusCode::UNAVAILABLE, "fake platform: no Inbox stream"))
            }

            fn file_transfers(&self) -> Reply<&Platform> {
                Err(refusal(RpcStatusCode::UNIMPLEMENTED, "fake platform: no file transfers"))
            }

            fn device_id(&self) -> u32 {
                self.device_id
            }
        }
    };
}
unary_calls!(fake_calls);
