//! The state directory: its permissions, the exclusive lock that keeps a second instance out,
//! and where each bot's database lives.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::{fmt, io};

/// Why a state_dir cannot be used: each case names the directory (or the file in it) and the fix.
#[derive(Debug)]
pub enum StateDirError {
    /// It is missing and could not be created (as the user `euid` the gateway runs as).
    Create { path: PathBuf, euid: u32, error: io::Error },
    /// It is missing and its nearest existing parent is not writable (`check-config`).
    Uncreatable { path: PathBuf, parent: PathBuf },
    /// Its metadata or the lock file could not be read or opened.
    Unusable { path: PathBuf, error: io::Error },
    /// Its entries could not be listed.
    Unlistable { path: PathBuf, error: io::Error },
    NotADirectory { path: PathBuf },
    /// It, or `file` in it, belongs to `owner`, not to the user `euid` the gateway runs as.
    ForeignOwner { state_dir: PathBuf, file: PathBuf, owner: u32, euid: u32 },
    /// Group or others may access it (`mode`), and it holds the bots' state.
    OpenToOthers { path: PathBuf, mode: u32 },
    NotWritable { path: PathBuf, error: io::Error },
    /// Another gateway holds the instance lock; `holder` is the pid it wrote, when readable.
    InUse { path: PathBuf, holder: Option<String> },
}

impl fmt::Display for StateDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateDirError::Create { path, euid, error } => write!(
                f,
                "cannot create state_dir {}: {error}; create it yourself, owned by uid {euid} with mode 0700",
                path.display()
            ),
            StateDirError::Uncreatable { path, parent } => write!(
                f,
                "state_dir {} does not exist and cannot be created: {} is not writable; create it: mkdir -m 700 {}",
                path.display(),
                parent.display(),
                path.display()
            ),
            StateDirError::Unusable { path, error } => write!(f, "cannot use state_dir {}: {error}", path.display()),
            StateDirError::Unlistable { path, error } => write!(f, "cannot list state_dir {}: {error}", path.display()),
            StateDirError::NotADirectory { path } => write!(f, "state_dir {} is not a directory", path.display()),
            StateDirError::ForeignOwner { state_dir, file, owner, euid } => {
                if file == state_dir {
                    write!(f, "state_dir {}", state_dir.display())?;
                } else {
                    write!(f, "{} in state_dir", file.display())?;
                }
                write!(
                    f,
                    " belongs to uid {owner}, but the gateway runs as uid {euid}; the state must belong to the user \
                     that runs the gateway: run chown -R {euid} {} (for a directory mounted into a container, \
                     on the host directory)",
                    state_dir.display()
                )
            }
            StateDirError::OpenToOthers { path, mode } => {
                let shown = path.display();
                write!(
                    f,
                    "state_dir {shown} is accessible by group or others (mode {mode:o}); run chmod 700 {shown} \
                     (for a directory mounted into a container, on the host directory)"
                )
            }
            StateDirError::NotWritable { path, error } => {
                write!(f, "state_dir {} is not writable ({error}); the gateway must write its state there", path.display())
            }
            StateDirError::InUse { path, holder } => {
                write!(f, "state_dir {} is in use by another bot-gateway instance", path.display())?;
                if let Some(pid) = holder {
                    write!(f, " (pid {pid})")?;
                }
                f.write_str("; one state_dir belongs to exactly one running gateway")
            }
        }
    }
}

impl std::error::Error for StateDirError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StateDirError::Create { error, .. }
            | StateDirError::Unusable { error, .. }
            | StateDirError::Unlistable { error, .. }
            | StateDirError::NotWritable { error, .. } => Some(error),
            _ => None,
        }
    }
}

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
    pub fn open(path: &Path) -> Result<StateDir, StateDirError> {
        // SAFETY: geteuid cannot fail and touches no memory.
        let euid = unsafe { libc::geteuid() };
        if !path.exists() {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(path).map_err(|error| {
                StateDirError::Create { path: path.to_path_buf(), euid, error }
            })?;
        }
        check_existing(path)?;
        let lock_path = path.join("gateway.lock");
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|error| StateDirError::Unusable { path: path.to_path_buf(), error })?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let mut holder = String::new();
            let _ = lock.read_to_string(&mut holder);
            let holder = Some(holder.trim()).filter(|h| !h.is_empty()).map(str::to_string);
            return Err(StateDirError::InUse { path: path.to_path_buf(), holder });
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
        bot_database_in(&self.path, compat_user_id)
    }
}

/// Where the database of bot `compat_user_id` lies in the state_dir `dir` (also without the
/// lock: `backup` and `check-state` read while a gateway runs).
pub fn bot_database_in(dir: &Path, compat_user_id: u64) -> PathBuf {
    dir.join(format!("bot-{compat_user_id}.db"))
}

/// The rules for an existing state_dir, shared by `serve` and `check-config`: a directory,
/// owned (with everything in it) by the user the gateway runs as (root may use anything, and
/// is warned), mode 0700 (nobody else may read the bot's state), and writable (a read-only
/// mount fails here, not at the first commit).
pub fn check_existing(path: &Path) -> Result<(), StateDirError> {
    let shown = path.display();
    let meta = fs::metadata(path).map_err(|error| StateDirError::Unusable { path: path.to_path_buf(), error })?;
    if !meta.is_dir() {
        return Err(StateDirError::NotADirectory { path: path.to_path_buf() });
    }
    // SAFETY: geteuid has no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if let Some(problem) = owner_problem(path, path, meta.uid(), euid) {
        return Err(problem);
    }
    if euid == 0 && meta.uid() != 0 {
        log::warn!(
            "state_dir {shown} belongs to uid {} but the gateway runs as root: what it creates there will belong to root",
            meta.uid()
        );
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(StateDirError::OpenToOthers { path: path.to_path_buf(), mode });
    }
    // A file left by a run under another user (root, say) would fail later with a bare
    // "permission denied": name it now.
    let entries = fs::read_dir(path).map_err(|error| StateDirError::Unlistable { path: path.to_path_buf(), error })?;
    for entry in entries.flatten() {
        if let Ok(m) = entry.metadata() {
            if let Some(problem) = owner_problem(path, &entry.path(), m.uid(), euid) {
                return Err(problem);
            }
        }
    }
    if !accessible(path, libc::W_OK | libc::X_OK) {
        return Err(StateDirError::NotWritable { path: path.to_path_buf(), error: io::Error::last_os_error() });
    }
    Ok(())
}

/// What `check-config` says of a state_dir without creating or locking anything: `Ok` with a
/// note and whether a running gateway holds it now, or the problem and its fix.
pub fn check(path: &Path) -> Result<(String, bool), StateDirError> {
    if !path.exists() {
        let parent = path.ancestors().skip(1).find(|p| p.exists()).unwrap_or(Path::new("/"));
        if !accessible(parent, libc::W_OK | libc::X_OK) {
            return Err(StateDirError::Uncreatable { path: path.to_path_buf(), parent: parent.to_path_buf() });
        }
        return Ok((format!("state_dir {} does not exist yet; serve creates it (mode 0700)", path.display()), false));
    }
    check_existing(path)?;
    let lock_path = path.join("gateway.lock");
    let Ok(lock) = File::open(&lock_path) else {
        return Ok((format!("state_dir {} is usable", path.display()), false));
    };
    // SAFETY: flock on a descriptor we own; dropping the file releases a lock we took.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let holder = fs::read_to_string(&lock_path).unwrap_or_default();
        return Ok((
            format!(
                "state_dir {} is usable, and in use now by a running bot-gateway (pid {}): a second instance \
                 would be refused",
                path.display(),
                holder.trim()
            ),
            true,
        ));
    }
    Ok((format!("state_dir {} is usable", path.display()), false))
}

fn accessible(path: &Path, how: libc::c_int) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: a NUL-terminated path we own; access only reads it.
    unsafe { libc::access(c.as_ptr(), how) == 0 }
}

/// Why `file` (the state directory or a file in it) cannot be used by `euid`: it belongs to
/// another user. Root may use anything.
fn owner_problem(state_dir: &Path, file: &Path, owner: u32, euid: u32) -> Option<StateDirError> {
    if owner == euid || euid == 0 {
        return None;
    }
    Some(StateDirError::ForeignOwner { state_dir: state_dir.to_path_buf(), file: file.to_path_buf(), owner, euid })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_dir_of_another_user_is_refused_with_the_fix() {
        let dir = Path::new("/state");
        let err = owner_problem(dir, dir, 0, 65532).expect("refused").to_string();
        assert!(err.starts_with("state_dir /state belongs to uid 0, but the gateway runs as uid 65532"), "{err}");
        assert!(err.contains("chown -R 65532 /state"), "{err}");
        let err = owner_problem(dir, &dir.join("bot-7.db"), 0, 65532).expect("a foreign file refused").to_string();
        assert!(err.starts_with("/state/bot-7.db in state_dir belongs to uid 0"), "{err}");
        assert!(owner_problem(dir, dir, 65532, 65532).is_none());
        assert!(owner_problem(dir, dir, 1000, 0).is_none(), "root may use any directory");
    }

    #[test]
    fn second_instance_is_refused_and_modes_are_checked() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("state");
        let first = StateDir::open(&dir).expect("first instance");
        assert_eq!(fs::metadata(&dir).expect("meta").permissions().mode() & 0o777, 0o700);
        let err = StateDir::open(&dir).err().expect("second instance refused").to_string();
        assert!(err.contains("in use by another bot-gateway instance"), "{err}");
        drop(first);
        StateDir::open(&dir).expect("lock released on drop");

        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
        let err = StateDir::open(&dir).err().expect("open dir refused").to_string();
        assert!(err.contains("chmod 700"), "{err}");
        assert!(check(&dir).expect_err("check-config says the same").to_string().contains("chmod 700"));
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).expect("chmod");
        assert!(check(&dir).expect("usable").0.ends_with("is usable"));
        let held = StateDir::open(&dir).expect("open");
        let (note, in_use) = check(&dir).expect("usable");
        assert!(in_use && note.contains("in use now by a running bot-gateway"), "{note}");
        drop(held);
        assert!(check(&tmp.path().join("new/state")).expect("creatable").0.contains("does not exist yet"));
        let file = tmp.path().join("file");
        fs::write(&file, b"").expect("file");
        assert!(check(&file).expect_err("not a dir").to_string().contains("not a directory"));
    }
}
