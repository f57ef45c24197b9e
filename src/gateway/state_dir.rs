//! The state directory: its permissions, the exclusive lock that keeps a second instance out,
//! and where each bot's database lives.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An opened and locked state directory. The lock is released when this is dropped (or the
/// process dies: `flock` locks go with the file descriptor).
pub struct StateDir {
    path: PathBuf,
    _lock: File,
}

impl StateDir {
    /// Creates the directory (0700) if missing, refuses one that others can read, and takes the
    /// exclusive instance lock.
    pub fn open(path: &Path) -> Result<StateDir, String> {
        if !path.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| format!("cannot create state_dir {}: {e}", path.display()))?;
        }
        let meta = fs::metadata(path).map_err(|e| format!("cannot use state_dir {}: {e}", path.display()))?;
        if !meta.is_dir() {
            return Err(format!("state_dir {} is not a directory", path.display()));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "state_dir {} is accessible by group or others (mode {mode:o}); run chmod 700 {}",
                path.display(),
                path.display()
            ));
        }
        let lock_path = path.join("gateway.lock");
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| format!("cannot use state_dir {}: {e}", path.display()))?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let mut holder = String::new();
            let _ = lock.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(format!(
                "state_dir {} is in use by another bot-gateway instance{}; one state_dir belongs to exactly one running gateway",
                path.display(),
                if holder.is_empty() { String::new() } else { format!(" (pid {holder})") }
            ));
        }
        // Record our pid for the message above; the lock, not the content, is what counts.
        let _ = lock.set_len(0);
        let _ = lock.rewind();
        let _ = write!(lock, "{}", std::process::id());
        Ok(StateDir { path: path.to_path_buf(), _lock: lock })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The encrypted database of one bot.
    pub fn bot_database(&self, compat_user_id: u64) -> PathBuf {
        self.path.join(format!("bot-{compat_user_id}.db"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_instance_is_refused_and_modes_are_checked() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("state");
        let first = StateDir::open(&dir).expect("first instance");
        assert_eq!(fs::metadata(&dir).expect("meta").permissions().mode() & 0o777, 0o700);
        let err = StateDir::open(&dir).err().expect("second instance refused");
        assert!(err.contains("in use by another bot-gateway instance"), "{err}");
        drop(first);
        StateDir::open(&dir).expect("lock released on drop");

        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        let err = StateDir::open(&dir).err().expect("open dir refused");
        assert!(err.contains("chmod 700"), "{err}");
    }
}
