//! A wake-up for a thread that re-reads everything when it wakes (`out/<n>`, the webhook).

use std::sync::{Arc, OnceLock};

use crossbeam_channel::{bounded, Receiver, Sender};


/// A wake-up for a thread that re-reads everything when it wakes: one pending wake-up is
/// enough, so waking never blocks.
pub struct Wake {
    tx: Sender<()>,
    rx: Receiver<()>,
    /// The on-demand thread a wake-up starts, if the woken thread is one (`out/<n>`).
    starts: OnceLock<Arc<crate::demand::Demand>>,
}

impl Wake {
    pub(crate) fn new() -> Wake {
        let (tx, rx) = bounded(1);
        Wake { tx, rx, starts: OnceLock::new() }
    }

    pub fn wake(&self) {
        if let Err(e) = self.try_wake() {
            log::error!("cannot start a thread: {e}");
        }
    }

    /// [`Wake::wake`], saying when the thread to start could not be started.
    pub fn try_wake(&self) -> std::io::Result<()> {
        let _ = self.tx.try_send(());
        match self.starts.get() {
            Some(demand) => demand.start(),
            None => Ok(()),
        }
    }

    /// From now on a wake-up also starts `demand`'s thread when none runs.
    pub fn starts(&self, demand: Arc<crate::demand::Demand>) {
        let _ = self.starts.set(demand);
    }

    /// What the woken thread waits on.
    pub fn receiver(&self) -> &Receiver<()> {
        &self.rx
    }
}
