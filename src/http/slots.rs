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
    /// The handler is working, or the response is being written.
    Busy,
}

struct Slot {
    phase: Phase,
    /// When the client last made progress (or the phase began).
    since: Instant,
    /// Requests answered on this connection: a kept-alive connection of a client that has
    /// been served is cut off only after those that never completed a request.
    served: u32,
    socket: Option<TcpStream>,
}

pub struct Slots {
    inner: Mutex<Inner>,
}

struct Inner {
    slots: Vec<Slot>,
    stopping: bool,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        let slots = (0..n).map(|_| Slot { phase: Phase::Free, since: Instant::now(), served: 0, socket: None }).collect();
        Slots { inner: Mutex::new(Inner { slots, stopping: false }) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave a slot half-updated (plain assignments).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Worker `i` took a connection (`socket` is a duplicate of it).
    pub fn occupy(&self, i: usize, socket: Option<TcpStream>) {
        let mut g = self.lock();
        g.slots[i] = Slot { phase: Phase::Busy, since: Instant::now(), served: 0, socket };
    }

    /// Worker `i` is done with its connection.
    pub fn release(&self, i: usize) {
        let mut g = self.lock();
        g.slots[i] = Slot { phase: Phase::Free, since: Instant::now(), served: 0, socket: None };
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

    /// Worker `i` answered a request on its connection.
    pub fn served(&self, i: usize) {
        let mut g = self.lock();
        g.slots[i].served = g.slots[i].served.saturating_add(1);
    }

    /// Connections being served.
    pub fn occupied(&self) -> usize {
        self.lock().slots.iter().filter(|s| s.phase != Phase::Free).count()
    }

    /// Cuts off the connection that has waited longest on its client: any idle one, or one
    /// whose head or body has not progressed for `min_stall`. Connections that never
    /// completed a request (an empty connection, a stalled head or body) go first, and only
    /// then kept-alive connections of clients that were served, so a crowd of stalled clients
    /// does not push out a bot's pooled connection. True if one was cut.
    pub fn evict_stalest(&self, min_stall: Duration) -> bool {
        let mut g = self.lock();
        let now = Instant::now();
        let victim = g
            .slots
            .iter_mut()
            .filter(|s| s.socket.is_some())
            .filter(|s| match s.phase {
                Phase::Idle => true,
                Phase::Head | Phase::Body => now.duration_since(s.since) >= min_stall,
                Phase::Free | Phase::Busy => false,
            })
            .min_by_key(|s| (s.served > 0, s.since));
        match victim {
            Some(s) => {
                if let Some(socket) = s.socket.take() {
                    let _ = socket.shutdown(Shutdown::Both);
                }
                true
            }
            None => false,
        }
    }

    /// Stops keep-alive and wakes every worker waiting on a client; busy workers finish their
    /// request and then close.
    pub fn stop(&self) {
        let mut g = self.lock();
        g.stopping = true;
        for s in g.slots.iter_mut().filter(|s| matches!(s.phase, Phase::Idle | Phase::Head | Phase::Body)) {
            if let Some(socket) = s.socket.take() {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}
