//! The state_dir's record of the bots it has held, with their device ids (`held-bots.json`),
//! kept apart from the bots' databases: a database that lost its contents (truncated to
//! nothing, copied without its `-wal`, deleted) must not be taken for a new bot, which would
//! register a new device and drop the queued updates, sessions and groups without a word.
//! A bot this file names whose database opens empty is refused (`lost`) until the database is
//! restored or the bot's state is reset on purpose (`bot-gateway reset-state`).
//!
//! Written whole to a temporary file, synced and renamed into place: a crash leaves the old
//! record or the new one. A state_dir from before this file gets it at the next start.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The file's name in state_dir.
pub const FILE: &str = "held-bots.json";

/// A bot the state_dir held: the device it was on the platform, and since when (unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub device_id: u32,
    pub since: i64,
}

/// The record, as read at start.
#[derive(Debug)]
pub struct HeldBots {
    path: PathBuf,
    bots: BTreeMap<u64, Held>,
}

impl HeldBots {
    /// Reads the record of `state_dir` (empty when there is none yet). A file that cannot be
    /// read or parsed is an error naming it: the gateway does not guess what it held.
    pub fn load(state_dir: &Path) -> Result<HeldBots, String> {
        let path = state_dir.join(FILE);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HeldBots { path, bots: BTreeMap::new() }),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let bad = |why: &str| format!("{} is damaged ({why}); restore it from a backup of the state_dir, or delete it to record the bots again at this start", path.display());
        let value: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
        let mut bots = BTreeMap::new();
        for (id, held) in value["bots"].as_object().ok_or_else(|| bad("no \"bots\" object"))? {
            let id: u64 = id.parse().map_err(|_| bad("a bot id that is not a number"))?;
            let device_id = held["device_id"].as_u64().and_then(|d| u32::try_from(d).ok()).ok_or_else(|| bad("a bot without its device_id"))?;
            bots.insert(id, Held { device_id, since: held["since"].as_i64().unwrap_or(0) });
        }
        Ok(HeldBots { path, bots })
    }

    pub fn get(&self, compat_user_id: u64) -> Option<Held> {
        self.bots.get(&compat_user_id).copied()
    }

    /// Records that this state_dir holds `compat_user_id` as device `device_id` (written only
    /// when that is news).
    pub fn record(&mut self, compat_user_id: u64, device_id: u32, now: i64) -> io::Result<()> {
        if self.get(compat_user_id).is_some_and(|h| h.device_id == device_id) {
            return Ok(());
        }
        self.bots.insert(compat_user_id, Held { device_id, since: now });
        self.save()
    }

    /// Forgets `compat_user_id` (its state was reset on purpose).
    pub fn forget(&mut self, compat_user_id: u64) -> io::Result<()> {
        if self.bots.remove(&compat_user_id).is_some() {
            self.save()?;
        }
        Ok(())
    }

    fn save(&self) -> io::Result<()> {
        let bots: serde_json::Map<String, Value> =
            self.bots.iter().map(|(id, h)| (id.to_string(), json!({"device_id": h.device_id, "since": h.since}))).collect();
        let text = serde_json::to_string_pretty(&json!({ "bots": bots })).map_err(io::Error::other)?;
        write_atomically(&self.path, text.as_bytes())
    }
}

/// Writes `bytes` to `path` through a synced temporary file renamed into place, and syncs the
/// directory: a crash leaves either the old file or the new one.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("json.new");
    let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// What a held bot's database at `path` lost, if it lost everything: it is missing, empty, or
/// has no schema (a `.db` copied without its `-wal` by a release that left everything in the
/// log; `store::holds_no_schema` opens it read-only, so nothing is written). A database that
/// has a schema, or that does not open at all (which the store's open explains), is `None`.
pub fn lost(path: &Path, recovery_secret: &[u8; 32]) -> Option<String> {
    let size = match fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Some("is missing".into()),
        Err(_) => return None,
        Ok(m) => m.len(),
    };
    if size == 0 {
        return Some("is empty (0 bytes)".into());
    }
    if super::store::holds_no_schema(path, recovery_secret) {
        let wal = format!("{}-wal", path.display());
        return Some(format!("holds no tables ({size} bytes; a copy made without its {wal}?)"));
    }
    None
}

/// The sentence that refuses to start a held bot whose database lost everything.
pub fn refusal(path: &Path, held: Held, what: &str, config: &str, username: &str) -> String {
    format!(
        "its state database {} {what}, but this state_dir held this bot as device {} (recorded in {FILE}): its keys, \
         sessions, queued updates and groups are not there, and starting would register a new device without them. \
         Restore the database together with its -wal from where it was copied (or a backup), or, to start this bot \
         anew on purpose, run: bot-gateway reset-state {config} @{username} (it says what it throws away)",
        path.display(),
        held.device_id
    )
}

/// Resets one bot's state on purpose (`bot-gateway reset-state`): its database files are moved
/// aside (`<file>.reset-<unix time>`, kept for the operator to delete) and the record forgets
/// it, so the next start registers a new device. What was thrown away, for the operator.
pub fn reset(state: &super::state_dir::StateDir, compat_user_id: u64, username: &str, now: i64) -> Result<String, String> {
    let mut held = HeldBots::load(state.path())?;
    let db = state.bot_database(compat_user_id);
    let files: Vec<PathBuf> = ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| PathBuf::from(format!("{}{suffix}", db.display())))
        .filter(|f| f.exists())
        .collect();
    let device = held.get(compat_user_id).map(|h| h.device_id);
    if files.is_empty() && device.is_none() {
        return Ok(format!("bot @{username}: this state_dir holds no state of it; nothing to reset"));
    }
    let mut moved = Vec::new();
    for file in &files {
        let aside = PathBuf::from(format!("{}.reset-{now}", file.display()));
        fs::rename(file, &aside).map_err(|e| format!("cannot move {} aside: {e}", file.display()))?;
        moved.push(aside.display().to_string());
    }
    held.forget(compat_user_id).map_err(|e| format!("cannot update {}: {e}", held.path.display()))?;
    let device = device.map_or_else(|| "its device".to_string(), |d| format!("device {d}"));
    Ok(format!(
        "bot @{username}: reset. Thrown away from this gateway: {device} (its keys and sessions), the updates \
         queued for the bot, its message history, its groups' state and the file ids it issued; users' clients \
         will meet a new device at the next start, which registers one. The old files were moved aside, not \
         deleted: {}. Delete them once you are sure.",
        if moved.is_empty() { "none were left".to_string() } else { moved.join(", ") }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_survives_a_reload_and_forgets_on_purpose() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut held = HeldBots::load(dir.path()).expect("no file yet");
        assert_eq!(held.get(7), None);
        held.record(7, 3, 100).expect("record");
        held.record(8, 1, 100).expect("record");
        let mut again = HeldBots::load(dir.path()).expect("load");
        assert_eq!(again.get(7), Some(Held { device_id: 3, since: 100 }));
        again.forget(7).expect("forget");
        let last = HeldBots::load(dir.path()).expect("load");
        assert_eq!((last.get(7), last.get(8).map(|h| h.device_id)), (None, Some(1)));
        assert!(!dir.path().join("held-bots.json.new").exists(), "no temporary file left");
    }

    #[test]
    fn a_damaged_record_is_refused_with_its_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(FILE), "{\"bots\": 3}").expect("write");
        let e = HeldBots::load(dir.path()).expect_err("damaged");
        assert!(e.contains("held-bots.json is damaged") && e.contains("delete it"), "{e}");
    }

    #[test]
    fn missing_empty_and_schemaless_databases_are_lost_and_a_real_one_is_not() {
        crate::crypto::init();
        let dir = tempfile::tempdir().expect("tempdir");
        let (db, secret) = (dir.path().join("bot-1.db"), [9u8; 32]);
        assert_eq!(lost(&db, &secret).as_deref(), Some("is missing"));
        fs::write(&db, b"").expect("empty");
        assert_eq!(lost(&db, &secret).as_deref(), Some("is empty (0 bytes)"));
        // A keyed database in WAL mode with no tables: what a .db alone was after a start of
        // a release that never checkpointed.
        fs::remove_file(&db).expect("rm");
        let c = rusqlite::Connection::open(&db).expect("open");
        c.pragma_update(None, "key", format!("x'{}'", crate::crypto::hex_encode(&super::super::store::database_key(&secret)))).expect("key");
        c.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v); DROP TABLE t;").expect("one page");
        drop(c);
        let before = fs::read(&db).expect("read");
        assert!(lost(&db, &secret).expect("lost").contains("holds no tables"));
        assert_eq!(fs::read(&db).expect("read"), before, "looked at, not written");
        let store = super::super::store::Store::open(&dir.path().join("bot-2.db"), &secret, &"ab".repeat(32), "t").expect("a real one");
        drop(store);
        assert_eq!(lost(&dir.path().join("bot-2.db"), &secret), None);
        assert_eq!(lost(&dir.path().join("bot-2.db"), &[1u8; 32]), None, "a wrong key is the store's to explain");
    }
}
