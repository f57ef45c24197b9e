//! The Inbox stream: every unacknowledged entry of the caller's device in seq order, then new
//! ones as they commit, until the client goes away or a newer stream of the same device
//! replaces this one.
//!
//! Shape: per stream one named feeder thread (`inbox#<n>`, logged with its device) reads the device's inbox
//! through its own SQLite connection and pushes envelopes into a bounded futures channel; a
//! future spawned on the gRPC completion queue (`ctx.spawn`) forwards the channel into the
//! stream sink. The feeder sleeps on a condition variable that `InboxHub::notify` signals after
//! each committed send, and wakes when the stream is closed. No polling.
//!
//! In-process readers (the management bot) subscribe with `InboxHub::subscribe_local` and are
//! woken by the same `notify`, through a `LocalInbox`.
//!
//! Not this module's concern: authentication (done before `start`) and acknowledgement (Ack
//! deletes rows; a stream never resends what it already sent, a new stream resends everything
//! still unacknowledged).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use grpcio::{RpcStatus, RpcStatusCode, ServerStreamingSink, WriteFlags};

use super::call_threads::CallThreads;
use super::store::{self, DeviceAddr, InboxEntry, Store};
use crate::e2e::group::short_id;
use crate::wire::platform::{group_delivery, GroupDelivery, GroupType, InboxEnvelope, JoinRequest, MembershipChange};

/// Envelopes read from the database per query.
const READ_BATCH: usize = 64;
/// Envelopes buffered between the feeder thread and the gRPC sink.
const CHANNEL_BOUND: usize = 32;

type Item = std::result::Result<(InboxEnvelope, WriteFlags), grpcio::Error>;

/// Why a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseReason {
    /// A newer Inbox call of the same device took over.
    Replaced,
    /// The client cancelled or the connection broke.
    ClientGone,
    /// The server is stopping.
    Shutdown,
    /// The feeder could not read the inbox.
    StorageFailed,
    /// The account's token was replaced (`/token`).
    Revoked,
    /// The bot was disabled (`/disable`).
    Disabled,
    /// The bot's owner removed this device (`@BotManager /removedevice`).
    DeviceRemoved,
}

#[derive(Default)]
struct SignalState {
    /// New entries may have committed since the feeder last looked.
    dirty: bool,
    closed: Option<CloseReason>,
    /// The feeder's pending channel send, woken on close.
    waker: Option<Waker>,
}

/// Wakes one stream's feeder: new entries, or the end of the stream.
#[derive(Default)]
struct StreamSignal {
    state: Mutex<SignalState>,
    cv: Condvar,
}

impl StreamSignal {
    fn lock(&self) -> MutexGuard<'_, SignalState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn mark_dirty(&self) {
        self.lock().dirty = true;
        self.cv.notify_all();
    }

    /// Closes the stream; the first reason wins.
    fn close(&self, reason: CloseReason) {
        let waker = {
            let mut st = self.lock();
            st.closed.get_or_insert(reason);
            st.waker.take()
        };
        self.cv.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Blocks until there may be new entries (`Ok`) or the stream is closed (`Err`).
    fn wait_dirty(&self) -> std::result::Result<(), CloseReason> {
        self.wait_dirty_until(None).map(|_| ())
    }

    /// Like `wait_dirty`, but gives up at `deadline` (`Ok(false)`); `None` waits for ever.
    fn wait_dirty_until(&self, deadline: Option<Instant>) -> std::result::Result<bool, CloseReason> {
        let mut st = self.lock();
        loop {
            if let Some(reason) = st.closed {
                return Err(reason);
            }
            if st.dirty {
                st.dirty = false;
                return Ok(true);
            }
            st = match deadline {
                None => self.cv.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(false);
                    }
                    self.cv.wait_timeout(st, deadline - now).unwrap_or_else(|p| p.into_inner()).0
                }
            };
        }
    }

    fn final_reason(&self) -> Option<CloseReason> {
        self.lock().closed
    }
}

/// The live Inbox streams, one per device, and the in-process readers.
#[derive(Default)]
pub struct InboxHub {
    streams: Mutex<HashMap<DeviceAddr, Arc<StreamSignal>>>,
    /// In-process readers (kept apart so that a gRPC stream never replaces one).
    local: Mutex<HashMap<DeviceAddr, Arc<StreamSignal>>>,
}

/// How `LocalInbox::wait` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalWake {
    /// Entries may have been committed for the device (or this is the first wait).
    Notified,
    /// The timeout passed without a notification.
    TimedOut,
    /// The reader was closed (server shutdown, or replaced by a newer subscription).
    Closed,
}

/// An in-process reader's wake-up handle for one device's inbox. Unsubscribes on drop.
pub struct LocalInbox {
    hub: Arc<InboxHub>,
    addr: DeviceAddr,
    signal: Arc<StreamSignal>,
}

impl LocalInbox {
    /// Blocks until the device's inbox may have new entries, the reader is closed, or
    /// `timeout` (when given) passes. The first call returns `Notified` at once.
    pub fn wait(&self, timeout: Option<Duration>) -> LocalWake {
        match self.signal.wait_dirty_until(timeout.map(|t| Instant::now() + t)) {
            Ok(true) => LocalWake::Notified,
            Ok(false) => LocalWake::TimedOut,
            Err(_) => LocalWake::Closed,
        }
    }

    /// Whether the reader has been closed (checked between units of work).
    pub fn is_closed(&self) -> bool {
        self.signal.final_reason().is_some()
    }

    /// A handle that closes this reader from another thread.
    pub fn closer(&self) -> LocalInboxCloser {
        LocalInboxCloser(self.signal.clone())
    }
}

impl Drop for LocalInbox {
    fn drop(&mut self) {
        let mut local = self.hub.lock_local();
        if local.get(&self.addr).is_some_and(|s| Arc::ptr_eq(s, &self.signal)) {
            local.remove(&self.addr);
        }
    }
}

/// Closes a `LocalInbox` (its `wait` returns `Closed`).
#[derive(Clone)]
pub struct LocalInboxCloser(Arc<StreamSignal>);

impl LocalInboxCloser {
    pub fn close(&self) {
        self.0.close(CloseReason::Shutdown);
    }
}

/// Who may be woken after a row for a whole group: the open streams and in-process readers.
impl store::Listening for InboxHub {
    fn count(&self) -> usize {
        self.lock().len() + self.lock_local().len()
    }

    fn devices(&self) -> Vec<DeviceAddr> {
        let mut devices: Vec<DeviceAddr> = self.lock().keys().copied().collect();
        devices.extend(self.lock_local().keys().copied());
        devices
    }
}

impl InboxHub {
    pub fn new() -> InboxHub {
        InboxHub::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<DeviceAddr, Arc<StreamSignal>>> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_local(&self) -> MutexGuard<'_, HashMap<DeviceAddr, Arc<StreamSignal>>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the streams and local readers of these devices that entries were committed for them.
    pub fn notify<'a>(&self, devices: impl IntoIterator<Item = &'a DeviceAddr>) {
        let devices: Vec<&DeviceAddr> = devices.into_iter().collect();
        {
            let streams = self.lock();
            for addr in &devices {
                if let Some(signal) = streams.get(*addr) {
                    signal.mark_dirty();
                }
            }
        }
        let local = self.lock_local();
        for addr in devices {
            if let Some(signal) = local.get(addr) {
                signal.mark_dirty();
            }
        }
    }

    /// Subscribes an in-process reader of `addr`'s inbox, closing an earlier one of the same
    /// device. It starts notified, so its owner reads what is already waiting.
    pub fn subscribe_local(self: &Arc<Self>, addr: DeviceAddr) -> LocalInbox {
        let signal = Arc::new(StreamSignal::default());
        signal.lock().dirty = true;
        if let Some(old) = self.lock_local().insert(addr, signal.clone()) {
            old.close(CloseReason::Replaced);
        }
        LocalInbox { hub: self.clone(), addr, signal }
    }

    /// How many streams are open.
    pub fn open_streams(&self) -> usize {
        self.lock().len()
    }

    /// Ends every stream and closes every local reader (server shutdown).
    pub fn close_all(&self) {
        for signal in self.lock().drain().map(|(_, s)| s) {
            signal.close(CloseReason::Shutdown);
        }
        for signal in self.lock_local().drain().map(|(_, s)| s) {
            signal.close(CloseReason::Shutdown);
        }
    }

    /// Ends every stream of `user_id`'s devices with UNAUTHENTICATED, so a running gateway
    /// learns at once that its bot's credential was revoked.
    pub fn revoke_account(&self, user_id: u64) {
        self.close_account(user_id, CloseReason::Revoked);
    }

    /// [`InboxHub::revoke_account`] of a disabled bot: the streams end saying so.
    pub fn disable_account(&self, user_id: u64) {
        self.close_account(user_id, CloseReason::Disabled);
    }

    fn close_account(&self, user_id: u64, reason: CloseReason) {
        let closed: Vec<Arc<StreamSignal>> =
            self.lock().iter().filter(|(a, _)| a.user_id == user_id).map(|(_, s)| s.clone()).collect();
        for signal in closed {
            signal.close(reason);
        }
    }

    /// Ends the Inbox stream of a removed device with UNAUTHENTICATED and the device-removed
    /// wording (`store::device_removed_message`), so its gateway learns why and stops.
    pub fn remove_device(&self, addr: DeviceAddr) {
        let signal = self.lock().get(&addr).cloned();
        if let Some(signal) = signal {
            signal.close(CloseReason::DeviceRemoved);
        }
    }

    /// Whether `addr` holds an open Inbox stream now: what "connected" and "live" mean.
    pub fn is_connected(&self, addr: DeviceAddr) -> bool {
        self.lock().contains_key(&addr)
    }

    /// Registers a new stream of `addr`, ending the previous one.
    fn register(&self, addr: DeviceAddr) -> Arc<StreamSignal> {
        let signal = Arc::new(StreamSignal::default());
        signal.lock().dirty = true;
        if let Some(old) = self.lock().insert(addr, signal.clone()) {
            old.close(CloseReason::Replaced);
        }
        signal
    }

    fn unregister(&self, addr: DeviceAddr, signal: &Arc<StreamSignal>) {
        let mut streams = self.lock();
        if streams.get(&addr).is_some_and(|s| Arc::ptr_eq(s, signal)) {
            streams.remove(&addr);
        }
    }
}

/// Numbers the feeder threads (`inbox#<n>`).
static STREAMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Serves one Inbox call of an authenticated device.
pub fn start(
    hub: &Arc<InboxHub>,
    store: &Arc<Store>,
    threads: &CallThreads,
    ctx: &grpcio::RpcContext<'_>,
    addr: DeviceAddr,
    mut sink: ServerStreamingSink<InboxEnvelope>,
) {
    let (tx, mut rx) = mpsc::channel::<Item>(CHANNEL_BOUND);
    let signal = hub.register(addr);

    let feeder = {
        let (store, signal) = (store.clone(), signal.clone());
        // `inbox:<user>:<device>` would be cut to 15 bytes by Linux (user ids have 16 digits):
        // a stream number fits, and the log says whose stream it is.
        let name = format!("inbox#{}", STREAMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        log::debug!("{name} feeds device {} of user {}", addr.device_id, addr.user_id);
        threads.spawn(name, move || feed(&store, addr, &signal, tx))
    };
    if let Err(e) = feeder {
        log::error!("cannot start an inbox thread for device {} of user {}: {e}", addr.device_id, addr.user_id);
        hub.unregister(addr, &signal);
        let status = RpcStatus::with_message(RpcStatusCode::RESOURCE_EXHAUSTED, "cannot start an inbox stream".into());
        ctx.spawn(async move {
            let _ = sink.fail(status).await;
        });
        return;
    }
    log::info!("inbox stream opened for device {} of user {}", addr.device_id, addr.user_id);

    store.device_seen(addr, crate::clock::unix_now(), true);
    let (hub, store) = (hub.clone(), store.clone());
    ctx.spawn(async move {
        use futures::SinkExt;
        // Lets gRPC coalesce envelopes that are ready together into fewer writes.
        sink.enhance_batch(true);
        let forwarded = sink.send_all(&mut rx).await;
        let reason = match forwarded {
            // The feeder ended the channel: say why.
            Ok(()) => {
                let reason = signal.final_reason();
                let status = match reason {
                    Some(CloseReason::Replaced) => Some(RpcStatus::with_message(
                        RpcStatusCode::ABORTED,
                        "replaced by a newer Inbox stream of this device".into(),
                    )),
                    Some(CloseReason::Shutdown) => {
                        Some(RpcStatus::with_message(RpcStatusCode::UNAVAILABLE, "platform server is stopping".into()))
                    }
                    Some(CloseReason::Revoked) => Some(RpcStatus::with_message(
                        RpcStatusCode::UNAUTHENTICATED,
                        crate::wire::rpc::TOKEN_REVOKED.into(),
                    )),
                    Some(CloseReason::Disabled) => Some(RpcStatus::with_message(
                        RpcStatusCode::UNAUTHENTICATED,
                        crate::wire::rpc::bot_disabled_message(addr.user_id),
                    )),
                    Some(CloseReason::DeviceRemoved) => Some(RpcStatus::with_message(
                        RpcStatusCode::UNAUTHENTICATED,
                        store.removal_message(addr).unwrap_or_else(|_| store::device_removed_message(addr.user_id, addr.device_id)),
                    )),
                    Some(CloseReason::StorageFailed) => {
                        Some(RpcStatus::with_message(RpcStatusCode::INTERNAL, "cannot read the inbox".into()))
                    }
                    Some(CloseReason::ClientGone) | None => None,
                };
                let _ = match status {
                    Some(status) => sink.fail(status).await,
                    None => sink.close().await,
                };
                reason.unwrap_or(CloseReason::ClientGone)
            }
            Err(e) => {
                log::debug!("inbox stream of device {} of user {} ended: {e}", addr.device_id, addr.user_id);
                CloseReason::ClientGone
            }
        };
        signal.close(CloseReason::ClientGone);
        hub.unregister(addr, &signal);
        // Held until now: the last moment it was seen.
        if reason != CloseReason::DeviceRemoved {
            store.device_seen(addr, crate::clock::unix_now(), true);
        }
        log::info!("inbox stream closed for device {} of user {} ({reason:?})", addr.device_id, addr.user_id);
    });
}

/// The feeder thread: drains the inbox past what this stream sent, then sleeps until notified.
fn feed(store: &Store, addr: DeviceAddr, signal: &StreamSignal, mut tx: mpsc::Sender<Item>) {
    let conn = match store.open_reader() {
        Ok(c) => c,
        Err(e) => {
            log::error!("inbox of device {} of user {}: {e}", addr.device_id, addr.user_id);
            signal.close(CloseReason::StorageFailed);
            return;
        }
    };
    let mut last_sent = 0u64;
    'stream: while signal.wait_dirty().is_ok() {
        loop {
            let entries = match store::read_inbox(&conn, addr, last_sent, READ_BATCH) {
                Ok(entries) => entries,
                Err(e) => {
                    log::error!("inbox of device {} of user {}: {e}", addr.device_id, addr.user_id);
                    signal.close(CloseReason::StorageFailed);
                    break 'stream;
                }
            };
            let full = entries.len() == READ_BATCH;
            for entry in entries {
                last_sent = entry.seq;
                if !send_item(&mut tx, Ok((envelope(entry), WriteFlags::default())), signal) {
                    break 'stream;
                }
            }
            if !full {
                break;
            }
        }
    }
    // Dropping `tx` ends the channel; the forwarding future then closes the call.
}

/// Sends one item, waiting for room; false when the stream closed or the receiver is gone.
fn send_item(tx: &mut mpsc::Sender<Item>, item: Item, signal: &StreamSignal) -> bool {
    let mut item = Some(item);
    futures::executor::block_on(futures::future::poll_fn(|cx| {
        {
            let mut st = signal.lock();
            if st.closed.is_some() {
                return Poll::Ready(false);
            }
            st.waker = Some(cx.waker().clone());
        }
        match tx.poll_ready(cx) {
            Poll::Ready(Ok(())) => {
                let item = item.take().expect("an item is sent once");
                Poll::Ready(tx.start_send(item).is_ok())
            }
            Poll::Ready(Err(_)) => Poll::Ready(false),
            Poll::Pending => Poll::Pending,
        }
    }))
}

fn envelope(e: InboxEntry) -> InboxEnvelope {
    InboxEnvelope {
        seq: e.seq,
        sender_user_id: e.sender.user_id,
        sender_device_id: e.sender.device_id,
        sender_username: e.sender_username,
        sender_display_name: e.sender_display_name,
        sender_is_bot: e.sender_is_bot,
        message_id: e.message_id,
        date: e.date,
        ciphertext: e.ciphertext,
        client_message_id: e.client_message_id,
        group: e.group.map(|g| group_delivery(g, e.message_id)).into(),
        ..Default::default()
    }
}

/// The stored group columns as a GroupDelivery: the `change` blob is a MembershipChange, or
/// for JOIN_REQUEST a JoinRequest; a DELETED delivery names the deleted message by the row's
/// message id.
fn group_delivery(g: store::GroupEntry, message_id: u64) -> GroupDelivery {
    use protobuf::Enum as _;
    let kind = group_delivery::Kind::from_i32(g.kind).unwrap_or_default();
    fn decode<M: protobuf::Message>(bytes: Option<Vec<u8>>, what: &str, group_id: &[u8]) -> Option<M> {
        bytes.and_then(|bytes| match M::parse_from_bytes(&bytes) {
            Ok(m) => Some(m),
            Err(e) => {
                log::error!("a stored {what} of group {} does not decode: {e}", short_id(group_id));
                None
            }
        })
    }
    let (change, join_request) = match kind {
        group_delivery::Kind::JOIN_REQUEST => (None, decode::<JoinRequest>(g.change, "join request", &g.group_id)),
        _ => (decode::<MembershipChange>(g.change, "membership change", &g.group_id), None),
    };
    GroupDelivery {
        kind: kind.into(),
        group_seq: g.group_seq,
        epoch: g.epoch,
        title: g.title,
        type_: GroupType::from_i32(g.group_type).unwrap_or_default().into(),
        change: change.into(),
        join_request: join_request.into(),
        deleted_message_id: if kind == group_delivery::Kind::DELETED { message_id } else { 0 },
        group_id: g.group_id,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_wakes_on_dirty_and_close() {
        let signal = Arc::new(StreamSignal::default());
        signal.mark_dirty();
        assert_eq!(signal.wait_dirty(), Ok(()));
        let s2 = signal.clone();
        let waiter =
            std::thread::Builder::new().name("test-waiter".into()).spawn(move || s2.wait_dirty()).expect("spawn");
        signal.close(CloseReason::Replaced);
        signal.close(CloseReason::ClientGone);
        assert_eq!(waiter.join().expect("join"), Err(CloseReason::Replaced), "first reason wins");
    }

    #[test]
    fn a_new_stream_replaces_the_old_one() {
        let hub = InboxHub::new();
        let addr = DeviceAddr { user_id: 1, device_id: 1 };
        let first = hub.register(addr);
        let second = hub.register(addr);
        assert_eq!(first.final_reason(), Some(CloseReason::Replaced));
        assert_eq!(second.final_reason(), None);
        hub.unregister(addr, &first);
        assert_eq!(hub.open_streams(), 1, "unregistering the old stream keeps the new one");
        assert!(hub.is_connected(addr));
        hub.remove_device(DeviceAddr { user_id: 1, device_id: 2 });
        assert_eq!(second.final_reason(), None, "another device's removal leaves it open");
        hub.remove_device(addr);
        assert_eq!(second.final_reason(), Some(CloseReason::DeviceRemoved));
        hub.close_all();
        assert!(!hub.is_connected(addr));
        assert_eq!(hub.open_streams(), 0);
    }

    #[test]
    fn local_readers_are_notified_timed_out_and_closed() {
        let hub = Arc::new(InboxHub::new());
        let addr = DeviceAddr { user_id: 5, device_id: 1 };
        let local = hub.subscribe_local(addr);
        assert_eq!(local.wait(Some(Duration::from_millis(1))), LocalWake::Notified, "starts notified");
        assert_eq!(local.wait(Some(Duration::from_millis(20))), LocalWake::TimedOut);
        hub.notify(&[DeviceAddr { user_id: 5, device_id: 2 }]);
        assert_eq!(local.wait(Some(Duration::from_millis(20))), LocalWake::TimedOut, "another device");
        hub.notify(&[addr]);
        assert_eq!(local.wait(None), LocalWake::Notified);
        assert_eq!(hub.open_streams(), 0, "a local reader is not a stream");
        let closer = local.closer();
        let waiter = std::thread::Builder::new()
            .name("test-local-waiter".into())
            .spawn(move || {
                let wake = local.wait(None);
                (wake, local.is_closed())
            })
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(20));
        closer.close();
        assert_eq!(waiter.join().expect("join"), (LocalWake::Closed, true));
        assert!(hub.lock_local().is_empty(), "dropping the reader unsubscribes it");
        let again = hub.subscribe_local(addr);
        hub.close_all();
        assert_eq!(again.wait(None), LocalWake::Closed);
    }

    #[test]
    fn send_item_stops_when_closed_while_full() {
        let (mut tx, _rx) = mpsc::channel::<Item>(0);
        let signal = Arc::new(StreamSignal::default());
        let item = || Ok((InboxEnvelope::default(), WriteFlags::default()));
        // A zero-bound channel takes one item per sender, then blocks.
        assert!(send_item(&mut tx, item(), &signal));
        let s2 = signal.clone();
        let closer = std::thread::Builder::new()
            .name("test-closer".into())
            .spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                s2.close(CloseReason::Replaced);
            })
            .expect("spawn");
        assert!(!send_item(&mut tx, item(), &signal), "close must unblock a full send");
        closer.join().expect("join");
    }
}
