//! Calls sent and not yet answered. A caller that need not wait for an answer (an
//! acknowledgement: a lost one only means a redelivery, which is recognised) sends the call,
//! goes on, and reads the answer later. Dropping an unread answer would cancel its call, so a
//! [`Window`] reads the oldest when it is full and all of them when it is dropped.

use std::collections::VecDeque;

use grpcio::{CallOption, Method};

use super::connect::Platform;

/// A call sent and not yet answered: calling it waits for the platform's answer. (Dropping it
/// unanswered cancels the call.)
pub type Pending<T> = Box<dyn FnOnce() -> grpcio::Result<T> + Send>;

impl Platform {
    /// Sends a unary call without waiting for its answer.
    pub fn start<Req, Resp: Send + Unpin + 'static>(&self, method: &Method<Req, Resp>, req: &Req, opt: CallOption) -> Pending<Resp> {
        match self.client.client.unary_call_async(method, req, opt) {
            Ok(answer) => Box::new(move || futures::executor::block_on(answer)),
            Err(e) => Box::new(move || Err(e)),
        }
    }
}

/// At most `limit` calls in flight, whose answers only matter when they fail (then `what`
/// and the failure are logged at warn).
pub struct Window<T> {
    pending: VecDeque<Pending<T>>,
    limit: usize,
    what: String,
}

impl<T> Window<T> {
    pub fn new(limit: usize, what: impl Into<String>) -> Window<T> {
        Window { pending: VecDeque::with_capacity(limit), limit: limit.max(1), what: what.into() }
    }

    /// Keeps `call` in flight; first reads the oldest answer when `limit` are.
    pub fn push(&mut self, call: Pending<T>) {
        if self.pending.len() >= self.limit {
            self.read_oldest();
        }
        self.pending.push_back(call);
    }

    /// Reads every answer still in flight.
    pub fn drain(&mut self) {
        while !self.pending.is_empty() {
            self.read_oldest();
        }
    }

    fn read_oldest(&mut self) {
        if let Some(answer) = self.pending.pop_front() {
            if let Err(e) = answer() {
                log::warn!("{} failed: {}", self.what, super::rpc::text(&e));
            }
        }
    }
}

impl<T> Drop for Window<T> {
    fn drop(&mut self) {
        self.drain();
    }
}
