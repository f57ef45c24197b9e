//! What each worker is waiting for, so that the accept thread can evict the connection that
//! has waited longest on its client when a new one needs a worker, and shutdown can wake every
//! worker blocked on a client.
//!
//! Each slot keeps a duplicate of its connection's socket; `shutdown(Both)` on it makes the
//! worker's blocked read return at once (end of stream), on Linux and macOS alike.

use std::net::{Shutdown, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The phase of a worker's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No connection.
    Free,
    /// Between requests, waiting for the next one (keep-alive), or lingering before close.
    Idle,
    /// Reading a request head.
    Head,
    /// The handler is reading the body.
    Body,
    /// The handler is working.
    Busy,
    /// The response is being written.
    Write,
}

struct Slot {
    phase: Phase,
    /// When the client last made progress (or the phase began).
    since: Instant,
    /// Trusted answers on this connection (`Response::served`: a valid token): a kept-alive
    /// connection of a client that has been served is cut off only after all others.
    served: u32,
    /// Cut off and not yet given up by its worker: that worker is about to be free.
    evicted: bool,
    socket: Option<TcpStream>,
}

/// A request head arrives in one packet from any real client; one still arriving this long
/// after it began is evictable however it drips (a body gets `min_stall` without progress).
pub const HEAD_AGE_TO_EVICT: Duration = Duration::from_millis(50);
/// A response whose client has taken none of it for this long (it stopped reading) is
/// evictable; any taken bytes count as progress.
pub const WRITE_STALL_TO_EVICT: Duration = Duration::from_secs(1);

pub struct Slots {
    inner: Mutex<Inner>,
}

struct Inner {
    slots: Vec<Slot>,
    stopping: bool,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        let slots = (0..n).map(|_| Slot { phase: Phase::Free, since: Instant::now(), served: 0, evicted: false, socket: None }).collect();
        Slots { inner: Mutex::new(Inner { slots, stopping: false }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave a slot half-updated (plain assignments).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Worker `i` took a connection (`socket` is a duplicate of it).
    pub fn occupy(&self, i: usize, socket: Option<TcpStream>) {
        let mut g = self.lock();
        g.slots[i] = Slot { phase: Phase::Busy, since: Instant::now(), served: 0, evicted: false, socket };
    }

    /// Worker `i` is done with its connection.
    pub fn release(&self, i: usize) {
        let mut g = self.lock();
        g.slots[i] = Slot { phase: Phase::Free, since: Instant::now(), served: 0, evicted: false, socket: None };
    }

    /// Enters `phase`. False once the server is stopping and `phase` waits on the client: the
    /// connection should then be closed instead.
    pub fn enter(&self, i: usize, phase: Phase) -> bool {
        let mut g = self.lock();
        if g.stopping && phase == Phase::Idle {
            return false;
        }
        let s = &mut g.slots[i];
        s.phase = phase;
        s.since = Instant::now();
        true
    }

    /// The client of worker `i` made progress.
    pub fn touch(&self, i: usize) {
        self.lock().slots[i].since = Instant::now();
    }

    /// Whether worker `i`'s connection has had a trusted answer.
    pub fn is_served(&self, i: usize) -> bool {
        self.lock().slots[i].served > 0
    }

    /// Worker `i` gave a trusted answer on its connection (`Response::served`).
    pub fn served(&self, i: usize) {
        let mut g = self.lock();
        g.slots[i].served = g.slots[i].served.saturating_add(1);
    }

    /// Whether a worker has no connection (it is about to wait for one, if not waiting yet).
    pub fn any_free(&self) -> bool {
        self.lock().slots.iter().any(|s| s.phase == Phase::Free)
    }

    /// Connections being served.
    pub fn occupied(&self) -> usize {
        self.lock().slots.iter().filter(|s| s.phase != Phase::Free).count()
    }

    /// Cuts off the connection that has waited longest on its client: any idle one, one whose
    /// head began `min_stall` ago or more (a head is not renewed by its bytes), or one whose
    /// body has not progressed for `min_stall`. Connections that never
    /// completed a request (an empty connection, a stalled head or body) go first, and only
    /// then kept-alive connections of clients that were served, so a crowd of stalled clients
    /// does not push out a bot's pooled connection. True if one was cut.
    /// While a connection cut off earlier has not been given up by its worker yet, nothing
    /// more is cut: that worker is about to take the new connection (a slow machine must not
    /// turn one newcomer into several evictions).
    pub fn evict_stalest(&self, min_stall: Duration) -> bool {
        let mut g = self.lock();
        if g.slots.iter().any(|s| s.evicted) {
            return true;
        }
        let now = Instant::now();
        let evictable = |s: &Slot| match s.phase {
            Phase::Idle => true,
            Phase::Head => now.duration_since(s.since) >= min_stall.min(HEAD_AGE_TO_EVICT),
            Phase::Body => now.duration_since(s.since) >= min_stall,
            Phase::Write => now.duration_since(s.since) >= WRITE_STALL_TO_EVICT,
            Phase::Free | Phase::Busy => false,
        };
        // A served connection is cut only when no connection that never was served holds a
        // worker it will give up (a head or body still short of its minimum counts: the accept
        // thread waits for it), so clients without a token never cost a bot its pooled
        // connection.
        let unserved_waiting = g
            .slots
            .iter()
            .any(|s| s.socket.is_some() && s.served == 0 && matches!(s.phase, Phase::Head | Phase::Body));
        let victim = g
            .slots
            .iter_mut()
            .filter(|s| s.socket.is_some() && evictable(s))
            .filter(|s| s.served == 0 || !unserved_waiting)
            .min_by_key(|s| (s.served > 0, s.since));
        match victim {
            Some(s) => {
                if let Some(socket) = s.socket.take() {
                    let _ = socket.shutdown(Shutdown::Both);
                }
                s.evicted = true;
                true
            }
            None => false,
        }
    }

    /// How soon a connection whose head, body or answer is not evictable yet will be (the accept
    /// thread waits that long for it, rather than refusing a newcomer); None when no worker is
    /// reading a head or a body.
    pub fn soonest_evictable(&self, min_stall: Duration) -> Option<Duration> {
        let g = self.lock();
        let now = Instant::now();
        g.slots
            .iter()
            .filter(|s| s.socket.is_some())
            .filter_map(|s| match s.phase {
                Phase::Head => Some(min_stall.min(HEAD_AGE_TO_EVICT)),
                Phase::Body => Some(min_stall),
                Phase::Write => Some(WRITE_STALL_TO_EVICT),
                _ => None,
            }.map(|limit| limit.saturating_sub(now.duration_since(s.since))))
            .min()
    }

    /// Whether every worker is running a handler or writing an answer: real load, not clients
    /// holding connections (which `/healthz` does not count as the listener's problem).
    pub fn all_serving(&self) -> bool {
        self.lock().slots.iter().all(|s| matches!(s.phase, Phase::Busy | Phase::Write))
    }

    /// Stops keep-alive and wakes every worker waiting on a client; busy workers finish their
    /// request and then close.
    pub fn stop(&self) {
        let mut g = self.lock();
        g.stopping = true;
        // A worker writing an answer finishes it (a long poll answered at shutdown is one).
        for s in g.slots.iter_mut().filter(|s| matches!(s.phase, Phase::Idle | Phase::Head | Phase::Body)) {
            if let Some(socket) = s.socket.take() {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;

    fn socket_pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        (c, l.accept().expect("accept").0)
    }

    #[test]
    fn one_eviction_at_a_time_and_never_served_connections_first() {
        let slots = Slots::new(3);
        let pairs: Vec<_> = (0..3).map(|_| socket_pair()).collect();
        for (i, (_, server)) in pairs.iter().enumerate() {
            slots.occupy(i, server.try_clone().ok());
            slots.enter(i, Phase::Idle);
        }
        // Slot 0 served a request long ago; slots 1 and 2 never completed one.
        slots.served(0);
        assert!(slots.evict_stalest(Duration::ZERO));
        let cut = |i: usize| slots.lock().slots[i].evicted;
        assert_eq!((cut(0), cut(1), cut(2)), (false, true, false), "the oldest never-served one goes first");
        // Until its worker gives it up, asking again cuts nothing more.
        assert!(slots.evict_stalest(Duration::ZERO));
        assert_eq!((cut(0), cut(2)), (false, false));
        slots.release(1);
        assert!(slots.evict_stalest(Duration::ZERO));
        assert_eq!((cut(0), cut(2)), (false, true));
        slots.release(2);
        assert!(slots.evict_stalest(Duration::ZERO));
        assert!(cut(0), "a served client's connection is cut when nothing else can be");
    }

    #[test]
    fn a_served_connection_is_not_cut_while_an_unserved_head_will_give_its_worker_up() {
        let slots = Slots::new(2);
        let pairs: Vec<_> = (0..2).map(|_| socket_pair()).collect();
        for (i, (_, server)) in pairs.iter().enumerate() {
            slots.occupy(i, server.try_clone().ok());
        }
        // Slot 0: a bot's pooled connection, idle; slot 1: a head that began just now.
        slots.served(0);
        slots.enter(0, Phase::Idle);
        slots.enter(1, Phase::Head);
        assert!(!slots.evict_stalest(Duration::from_millis(200)), "wait for the head instead");
        let wait = slots.soonest_evictable(Duration::from_millis(200)).expect("the head will be evictable");
        assert!(wait <= HEAD_AGE_TO_EVICT);
        std::thread::sleep(HEAD_AGE_TO_EVICT + Duration::from_millis(10));
        assert!(slots.evict_stalest(Duration::from_millis(200)));
        let cut = |i: usize| slots.lock().slots[i].evicted;
        assert_eq!((cut(0), cut(1)), (false, true), "the head goes, the pooled connection stays");
    }
}
