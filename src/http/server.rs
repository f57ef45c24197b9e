//! A listener: binds, accepts on one thread, hands each connection to a bounded pool of named
//! workers, and stops and joins them all.
//!
//! Threads: `<name>-acc` accepts; `<name>-<i>` serve connections. Names must fit Linux's 15
//! bytes, so `name` is at most 11 bytes.
//!
//! The pool: `Limits::warm_workers` start with the listener; when a connection finds none idle
//! and fewer than `Limits::workers` run, the accept thread starts one more; a worker beyond the
//! warm ones that has had no connection for `Limits::worker_idle_exit` ends. A gateway of a thousand bots
//! may run 999 workers at a time, but an idle one does not keep them.
//!
//! Hand-off: a zero-capacity channel, so a connection is only ever handed to a worker that is
//! waiting for one. When none is, the accept thread evicts the connection that has waited
//! longest on its client and hands the new one to the worker that frees; when nothing can be
//! evicted within a short wait, the new connection is answered 503 and closed. Connections and
//! threads are thus bounded by the worker count, whatever clients do.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError};

use crate::backoff::Backoff;

use super::conn::{self, Worker, MIN_STALL_TO_EVICT};
use super::request::Handler;
use super::socket::Conn;
use super::slots::Slots;
use super::{HttpError, Limits};

/// How long a new connection waits, once, when every worker is running a request and none can
/// be cut off (one may be finishing), before it is 503.
const BUSY_WAIT: Duration = Duration::from_millis(100);
/// How long a new connection may wait for the worker freed by an eviction (or free but not
/// back in recv yet) to take it, before it is 503.
const HANDOFF_WAIT: Duration = Duration::from_millis(500);
/// How often, while it waits, the accept thread looks again for a connection to evict.
const HANDOFF_STEP: Duration = Duration::from_millis(50);
/// After accept() fails (descriptors exhausted), wait this long, doubling, before trying again.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));
/// A listener that refused a connection within this window while every worker was running a
/// request is reported as not serving.
const BUSY_WINDOW: Duration = Duration::from_secs(5);

/// Whether a listener is serving, as `/healthz` reports it.
#[derive(Clone)]
pub struct Health {
    inner: Arc<HealthState>,
}

struct HealthState {
    workers: usize,
    /// Workers that ended by a panic outside a connection (each connection's own is caught).
    workers_died: AtomicUsize,
    accepting: AtomicBool,
    accept_failing: AtomicBool,
    last_busy_refusal: Mutex<Option<Instant>>,
    slots: Arc<Slots>,
}

/// A snapshot of [`Health`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    pub serving: bool,
    /// Why not serving, when it is not.
    pub problem: Option<&'static str>,
    pub connections: usize,
    pub workers: usize,
}

impl Health {
    pub fn report(&self) -> HealthReport {
        let s = &self.inner;
        let busy = s.last_busy_refusal.lock().map(|t| t.is_some_and(|t| t.elapsed() < BUSY_WINDOW)).unwrap_or(false);
        let problem = if !s.accepting.load(Ordering::SeqCst) {
            Some("not accepting connections")
        } else if s.accept_failing.load(Ordering::SeqCst) {
            Some("accepting connections fails (file descriptors exhausted?)")
        } else if s.workers_died.load(Ordering::SeqCst) > 0 {
            Some("a worker thread has died")
        } else if busy {
            Some("all workers busy: connections were refused")
        } else {
            None
        };
        HealthReport { serving: problem.is_none(), problem, connections: s.slots.occupied(), workers: s.workers }
    }
}

/// A running listener; [`Server::shutdown`] (or drop) stops and joins its threads.
pub struct Server {
    name: String,
    local_addr: SocketAddr,
    health: Health,
    stopping: Arc<AtomicBool>,
    wake: UnixStream,
    slots: Arc<Slots>,
    acceptor: Option<JoinHandle<()>>,
    pool: Arc<Pool>,
}

/// The workers: which slots have one running, and their handles (joined at stop, or when a
/// new worker takes the slot of one that ended).
struct Pool {
    name: String,
    rx: Receiver<TcpStream>,
    slots: Arc<Slots>,
    limits: Arc<Limits>,
    handler: Arc<dyn Handler>,
    health: Health,
    /// Per slot: the handle of the worker started there, and whether it still runs.
    state: Mutex<Vec<(Option<JoinHandle<()>>, bool)>>,
}

impl Pool {
    /// Starts a worker in a slot without one; false when every slot has one.
    fn grow(self: &Arc<Self>) -> io::Result<bool> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = state.iter().position(|(_, running)| !running) else {
            return Ok(false);
        };
        if let Some(ended) = state[slot].0.take() {
            let _ = ended.join();
        }
        let pool = Arc::clone(self);
        let label = format!("{}-{slot}", self.name);
        let handle = thread::Builder::new()
            .name(label.clone())
            .spawn(move || worker_loop(&label, slot, &pool))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: cannot start a worker: {e}", self.name)))?;
        state[slot] = (Some(handle), true);
        Ok(true)
    }

    /// Whether the worker in `slot`, idle for `worker_idle_exit`, ends: only beyond the warm
    /// ones. Decided under the lock `grow` takes, so the count never goes below them.
    fn may_end(&self, slot: usize) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.iter().filter(|(_, running)| *running).count() <= self.limits.warm_workers {
            return false;
        }
        state[slot].1 = false;
        true
    }

    /// Every handle, for the final join.
    fn take_handles(&self) -> Vec<JoinHandle<()>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.iter_mut().filter_map(|(handle, _)| handle.take()).collect()
    }
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and starts the accept thread and the workers.
    pub fn start(name: &str, addr: &str, limits: Limits, handler: Arc<dyn Handler>) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        Server::from_listener(name, listener, limits, handler)
    }

    /// Serves on an already bound listener.
    pub fn from_listener(
        name: &str,
        listener: TcpListener,
        limits: Limits,
        handler: Arc<dyn Handler>,
    ) -> io::Result<Server> {
        assert!(name.len() <= 11, "thread names must fit 15 bytes: {name:?} is too long");
        let workers = limits.workers.clamp(1, 999);
        let local_addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let (wake, wake_rx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        let slots = Arc::new(Slots::new(workers));
        let health = Health {
            inner: Arc::new(HealthState {
                workers,
                workers_died: AtomicUsize::new(0),
                accepting: AtomicBool::new(true),
                accept_failing: AtomicBool::new(false),
                last_busy_refusal: Mutex::new(None),
                slots: Arc::clone(&slots),
            }),
        };
        let stopping = Arc::new(AtomicBool::new(false));
        let (tx, rx) = bounded::<TcpStream>(0);
        let pool = Arc::new(Pool {
            name: name.to_string(),
            rx,
            slots: Arc::clone(&slots),
            limits: Arc::new(limits),
            handler: Arc::clone(&handler),
            health: health.clone(),
            state: Mutex::new((0..workers).map(|_| (None, false)).collect()),
        });
        let mut server = Server {
            name: name.to_string(),
            local_addr,
            health: health.clone(),
            stopping: Arc::clone(&stopping),
            wake,
            slots: Arc::clone(&slots),
            acceptor: None,
            pool: Arc::clone(&pool),
        };
        for _ in 0..workers.min(pool.limits.warm_workers.max(1)) {
            // On failure, dropping `server` stops the workers already started.
            pool.grow()?;
        }
        let acceptor =
            Acceptor { name: name.to_string(), listener, wake: wake_rx, tx, slots, health, stopping, handler, pool };
        server.acceptor = Some(
            thread::Builder::new()
                .name(format!("{name}-acc"))
                .spawn(move || acceptor.run())
                .map_err(|e| io::Error::new(e.kind(), format!("{name}: cannot start the accept thread: {e}")))?,
        );
        log::info!("{name}: listening on http://{local_addr} with up to {workers} workers");
        Ok(server)
    }
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// Stops accepting, wakes every worker waiting on a client, lets busy ones finish their
    /// request, and joins every thread.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = (&self.wake).write(&[1]);
        if let Some(acceptor) = self.acceptor.take() {
            if acceptor.join().is_err() {
                log::error!("{}: the accept thread panicked", self.name);
            }
        }
        // The accept thread (the only one that starts workers) has dropped the hand-off
        // sender: idle workers see it closed.
        self.slots.stop();
        for handle in self.pool.take_handles() {
            if handle.join().is_err() {
                log::error!("{}: a worker thread panicked", self.name);
            }
        }
        log::info!("{}: stopped", self.name);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.acceptor.is_some() || self.pool.state.lock().map(|s| s.iter().any(|(h, _)| h.is_some())).unwrap_or(false) {
            self.stop();
        }
    }
}

fn worker_loop(label: &str, slot: usize, pool: &Pool) {
    // Counts a worker that dies outside a connection, so /healthz sees it.
    struct Died<'a>(&'a AtomicUsize);
    impl Drop for Died<'_> {
        fn drop(&mut self) {
            if thread::panicking() {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let _died = Died(&pool.health.inner.workers_died);
    let (slots, limits) = (&*pool.slots, &*pool.limits);
    let mut buffer = vec![0u8; limits.max_head_bytes];
    let worker = Worker { label, slot, slots, limits, handler: &*pool.handler };
    loop {
        let stream = match pool.rx.recv_timeout(limits.worker_idle_exit) {
            Ok(stream) => stream,
            Err(RecvTimeoutError::Timeout) if pool.may_end(slot) => return,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        slots.occupy(slot, stream.try_clone().ok());
        let mut conn = Conn::new(stream, std::mem::take(&mut buffer));
        if catch_unwind(AssertUnwindSafe(|| conn::serve(&mut conn, &worker))).is_err() {
            log::error!("{label}: serving a connection panicked; the worker goes on");
        }
        buffer = conn.into_buffer();
        slots.release(slot);
    }
}

struct Acceptor {
    name: String,
    listener: TcpListener,
    wake: UnixStream,
    tx: Sender<TcpStream>,
    slots: Arc<Slots>,
    health: Health,
    stopping: Arc<AtomicBool>,
    handler: Arc<dyn Handler>,
    pool: Arc<Pool>,
}

impl Acceptor {
    fn run(self) {
        let health = &self.health.inner;
        // A descriptor held in reserve: when accept() fails for lack of descriptors, it is
        // released to accept and close one waiting connection, so that client is refused at
        // once instead of hanging in the backlog.
        let mut reserve = std::fs::File::open("/dev/null").ok();
        let mut backoff = Backoff::new(ACCEPT_BACKOFF.0, ACCEPT_BACKOFF.1);
        let mut failing = false;
        while !self.stopping.load(Ordering::SeqCst) {
            self.wait(failing.then(|| backoff.next_delay()));
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            match self.listener.accept() {
                Ok((stream, _)) => {
                    failing = false;
                    backoff.reset();
                    if health.accept_failing.swap(false, Ordering::SeqCst) {
                        log::info!("{}: accepting connections again", self.name);
                    }
                    self.dispatch(stream);
                }
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    if !health.accept_failing.swap(true, Ordering::SeqCst) {
                        log::error!("{}: accepting a connection failed: {e}; retrying with a backoff", self.name);
                    }
                    if reserve.take().is_some() {
                        if let Ok((stream, _)) = self.listener.accept() {
                            drop(stream);
                        }
                        reserve = std::fs::File::open("/dev/null").ok();
                    }
                    failing = true;
                }
            }
        }
        health.accepting.store(false, Ordering::SeqCst);
    }

    /// Blocks until the listener is readable, the server is stopping, or `timeout` passes.
    fn wait(&self, timeout: Option<Duration>) {
        let mut fds = [
            libc::pollfd { fd: self.listener.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // During a backoff only the wake-up counts: the listener stays readable.
        let (watch, ms) = match timeout {
            Some(d) => (&mut fds[1..], i32::try_from(d.as_millis()).unwrap_or(i32::MAX)),
            None => (&mut fds[..], -1),
        };
        // SAFETY: `watch` is a valid array of pollfd for the duration of the call.
        unsafe { libc::poll(watch.as_mut_ptr(), watch.len() as libc::nfds_t, ms) };
    }

    fn dispatch(&self, stream: TcpStream) {
        // Accepted sockets inherit O_NONBLOCK from the listener on macOS and the BSDs.
        if stream.set_nonblocking(false).is_err() {
            return;
        }
        let _ = stream.set_nodelay(true);
        let mut stream = match self.tx.try_send(stream) {
            Ok(()) => return,
            Err(TrySendError::Disconnected(_)) => return,
            Err(TrySendError::Full(stream)) => stream,
        };
        // No worker waiting: one more, while the pool may grow, takes it as soon as it runs.
        match self.pool.grow() {
            Ok(true) => {
                stream = match self.tx.send_timeout(stream, HANDOFF_WAIT) {
                    Ok(()) | Err(SendTimeoutError::Disconnected(_)) => return,
                    Err(SendTimeoutError::Timeout(stream)) => stream,
                };
            }
            Ok(false) => {}
            Err(e) => log::error!("{e}"),
        }
        // No idle worker: cut off the stalest waiting connection and hand this one to the
        // worker that frees. When nothing can be cut off, the answer is 503 at once: the
        // accept thread never waits on a connection it cannot place, or the ones behind it
        // would wait in the backlog unanswered.
        let deadline = Instant::now() + HANDOFF_WAIT;
        let mut waited_for_busy = false;
        loop {
            // A worker that is free but not back in recv() yet (a loaded machine schedules it
            // late) takes the connection in a moment: nobody is cut off for it. A head or body
            // about to pass its minimum is worth its few milliseconds; nothing else is.
            let step = if self.slots.any_free() || self.slots.evict_stalest(MIN_STALL_TO_EVICT) {
                HANDOFF_STEP
            } else {
                match self.slots.soonest_evictable(MIN_STALL_TO_EVICT) {
                    Some(wait) => wait.max(Duration::from_millis(1)),
                    // Every worker is running a request: one may be just finishing (writing
                    // its last bytes, about to be free), so wait once, briefly.
                    None if !waited_for_busy => {
                        waited_for_busy = true;
                        BUSY_WAIT
                    }
                    None => return self.refuse_busy(stream),
                }
            };
            let step = deadline.saturating_duration_since(Instant::now()).min(step);
            stream = match self.tx.send_timeout(stream, step) {
                Ok(()) | Err(SendTimeoutError::Disconnected(_)) => return,
                Err(SendTimeoutError::Timeout(stream)) => stream,
            };
            if Instant::now() >= deadline {
                return self.refuse_busy(stream);
            }
        }
    }

    /// 503 to a connection no worker can take; never blocks the accept thread for long.
    fn refuse_busy(&self, mut stream: TcpStream) {
        // Only refusals under real load make the listener unhealthy: clients that hold
        // connections (slow heads, idle ones) are cut off, not a sign that more workers or a
        // restart are needed.
        let load = self.slots.all_serving();
        if let Some(mut t) = self.health.inner.last_busy_refusal.lock().ok().filter(|_| load) {
            if t.is_none_or(|t| t.elapsed() >= BUSY_WINDOW) {
                log::warn!("{}: all workers busy; refusing connections with 503", self.name);
            }
            *t = Some(Instant::now());
        }
        let response = self
            .handler
            .error(&HttpError::new(503, "Service Unavailable: too many connections, retry later"))
            .with_header("Retry-After", "1");
        let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
        let _ = response.write_to(&mut stream, true, true);
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
}

#[cfg(test)]
mod tests;
