//! The state directory: its permissions, the exclusive lock that keeps a second instance out,
//! and where each bot's database lives.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An opened and locked state directory. The lock is released when this is dropped (or the
/// process dies: `flock` locks go with the file descriptor).
pub struct StateDir {
    path: PathBuf,
    _lock: File,
}

impl StateDir {
    /// Creates the directory (0700) if missing, refuses one that others can read or that
    /// belongs to another user (a mounted directory in a container, say), and takes the
    /// exclusive instance lock.
    pub fn open(path: &Path) -> Result<StateDir, String> {
        // SAFETY: geteuid cannot fail and touches no memory.
        let euid = unsafe { libc::geteuid() };
        if !path.exists() {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(path).map_err(|e| {
                format!(
                    "cannot create state_dir {}: {e}; create it yourself, owned by uid {euid} with mode 0700",
                    path.display()
                )
            })?;
        }
        let meta = fs::metadata(path).map_err(|e| format!("cannot use state_dir {}: {e}", path.display()))?;
        if !meta.is_dir() {
            return Err(format!("state_dir {} is not a directory", path.display()));
        }
        if let Some(problem) = owner_problem(path, path, meta.uid(), euid) {
            return Err(problem);
        }
        if euid == 0 && meta.uid() != 0 {
            log::warn!(
                "state_dir {} belongs to uid {} but the gateway runs as root: what it creates there will belong to root",
                path.display(),
                meta.uid()
            );
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "state_dir {} is accessible by group or others (mode {mode:o}); run chmod 700 {} \
                 (for a directory mounted into a container, on the host directory)",
                path.display(),
                path.display()
            ));
        }
        // A file left by a run under another user (root, say) would fail later with a bare
        // "permission denied": name it now.
        let entries = fs::read_dir(path).map_err(|e| format!("cannot list state_dir {}: {e}", path.display()))?;
        for entry in entries.flatten() {
            if let Ok(m) = entry.metadata() {
                if let Some(problem) = owner_problem(path, &entry.path(), m.uid(), euid) {
                    return Err(problem);
                }
            }
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

/// Why `file` (the state directory or a file in it) cannot be used by `euid`: it belongs to
/// another user. Root may use anything.
fn owner_problem(state_dir: &Path, file: &Path, owner: u32, euid: u32) -> Option<String> {
    if owner == euid || euid == 0 {
        return None;
    }
    let what = if file == state_dir {
        format!("state_dir {}", state_dir.display())
    } else {
        format!("{} in state_dir", file.display())
    };
    Some(format!(
        "{what} belongs to uid {owner}, but the gateway runs as uid {euid}; the state must belong to the user \
         that runs the gateway: run chown -R {euid} {} (for a directory mounted into a container, \
         on the host directory)",
        state_dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_dir_of_another_user_is_refused_with_the_fix() {
        let dir = Path::new("/state");
        let err = owner_problem(dir, dir, 0, 65532).expect("refused");
        assert!(err.starts_with("state_dir /state belongs to uid 0, but the gateway runs as uid 65532"), "{err}");
        assert!(err.contains("chown -R 65532 /state"), "{err}");
        let err = owner_problem(dir, &dir.join("bot-7.db"), 0, 65532).expect("a foreign file refused");
        assert!(err.starts_with("/state/bot-7.db in state_dir belongs to uid 0"), "{err}");
        assert_eq!(owner_problem(dir, dir, 65532, 65532), None);
        assert_eq!(owner_problem(dir, dir, 1000, 0), None, "root may use any directory");
    }

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
