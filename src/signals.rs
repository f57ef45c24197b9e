//! SIGINT/SIGTERM handling for the long-running programs, without an async runtime or a
//! signal handler: block the signals in the main thread before any other thread starts (so
//! every thread inherits the mask), then take them in the main thread with `sigwait`.

pub struct Blocked(libc::sigset_t);

/// Blocks SIGINT and SIGTERM in the calling thread (and threads it starts later).
pub fn block() -> Blocked {
    // SAFETY: plain libc calls on a zero-initialised, then sigemptyset-initialised set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            log::warn!("cannot block SIGINT/SIGTERM (error {rc}); they will kill the process abruptly");
        }
        Blocked(set)
    }
}

/// Waits for one of the blocked signals; returns its name.
pub fn wait(blocked: &Blocked) -> &'static str {
    loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: `blocked.0` is an initialised set; `sig` is a valid out pointer.
        let rc = unsafe { libc::sigwait(&blocked.0, &mut sig) };
        if rc == 0 {
            return if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
        }
        log::warn!("sigwait failed with error {rc}; waiting again");
    }
}
