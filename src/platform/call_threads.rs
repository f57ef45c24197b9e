//! The threads the platform starts for streaming calls: the Inbox feeders (`inbox#<n>`) and
//! the file transfers (`file-up#<n>`, `file-dn#<n>`). Each is spawned here, and all are joined
//! when the server stops: by then every call was cancelled, so a feeder's signal is closed and
//! a transfer's channel is gone, and each thread ends by itself.

use std::io;
use std::sync::Mutex;
use std::thread::{Builder, JoinHandle};

/// The running call threads (finished ones are joined whenever a new one starts, so the list
/// holds at most the live ones: a feeder per connected device, 16 transfers).
#[derive(Default)]
pub struct CallThreads {
    handles: Mutex<Vec<JoinHandle<()>>>,
}

impl CallThreads {
    /// Starts `run` on a thread named `name`.
    pub fn spawn(&self, name: String, run: impl FnOnce() + Send + 'static) -> io::Result<()> {
        let handle = Builder::new().name(name).spawn(run)?;
        let mut handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        let (done, live): (Vec<_>, Vec<_>) = std::mem::take(&mut *handles).into_iter().partition(|h| h.is_finished());
        *handles = live;
        handles.push(handle);
        drop(handles);
        done.into_iter().for_each(join);
        Ok(())
    }

    /// Joins every call thread (after the server cancelled every call).
    pub fn join_all(&self) {
        let handles = std::mem::take(&mut *self.handles.lock().unwrap_or_else(|e| e.into_inner()));
        handles.into_iter().for_each(join);
    }
}

fn join(handle: JoinHandle<()>) {
    let name = handle.thread().name().unwrap_or("a call thread").to_string();
    if handle.join().is_err() {
        log::error!("platform thread {name} panicked");
    }
}
