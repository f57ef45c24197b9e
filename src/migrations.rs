//! Numbered schema migrations, the one mechanism behind every SQLite database of the package:
//! a bot's state database (`gateway::store`), `platform.db` (`platform::store`), `manager.db`
//! (`platform::manager::state`) and an `e2e-chat` profile (`client::profile`).
//!
//! A database's schema version is SQLite's `PRAGMA user_version`. Each database declares an
//! ordered list of [`Step`]s; step `n` brings the database from version `n - 1` to `n`. At open,
//! [`migrate`] runs the steps the file has not had yet, each in its own `BEGIN IMMEDIATE`
//! transaction together with the version bump: a step is applied completely and counted, or not
//! at all, and the next open resumes with the step that failed.
//!
//! Version 1 of every database is the schema of the release before versioning, which never set
//! `user_version` (except `platform.db`, already at 1). Step 1 is exactly that release's SQL,
//! which it ran at every open: `CREATE ... IF NOT EXISTS` and `INSERT OR IGNORE` only. So a
//! database at version 0 that already has tables, an unversioned version 1, is adopted by running
//! step 1 over it: existing tables and rows are left as they are, anything missing (a table
//! added late in that release, like the gateway's `queue_stats`) is created, and the file is
//! marked version 1. Step 1 must therefore never change; steps from 2 on run only on a database
//! at the version before them and need no `IF NOT EXISTS`.
//!
//! A new file (version 0, no tables) gets every step in one transaction: it has nothing to
//! resume, and a thousand bots starting for the first time each create one.
//!
//! A file whose version is newer than the newest step is refused, never opened: the program
//! does not know what the newer release stored, and writing to it could lose a user's data.
//!
//! A database in WAL mode runs its migrations, ours and openmls' storage crate's, inside
//! [`without_syncs`]: their commits do not wait for the disk. A process crash loses no committed
//! step; a power failure may lose the last ones, which the next open runs again, and the first
//! synced commit after them takes them to disk (the log is written in order). Each commit of a
//! new bot's database waited for an fsync: about half of opening one (docs/decisions.md).

use std::fmt;

use rusqlite::{Connection, Transaction, TransactionBehavior};

/// One numbered migration: the SQL texts run in order, in one transaction with setting
/// `user_version` to `version`. Several texts let a database include tables defined by a shared
/// module (the `e2e` tables).
#[derive(Clone, Copy)]
pub struct Step {
    pub version: u32,
    pub sql: &'static [&'static str],
}

/// What [`migrate`] did to a database that opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The version found: 0 for a new (or unversioned) file.
    pub from: u32,
    /// The version now, the newest this program knows.
    pub to: u32,
    /// The file was an unversioned version 1 (tables, but no version), now marked version 1.
    pub adopted: bool,
}

#[derive(Debug)]
pub enum MigrationError {
    /// The file was written by a newer release: `found` is above `known`, the newest step here.
    Newer { file: String, found: u32, known: u32 },
    /// Step `version` failed and was rolled back with its transaction; the file stays at
    /// `kept` (`version - 1`, or 0 for a new file, whose steps share one transaction).
    Step { file: String, version: u32, kept: u32, source: rusqlite::Error },
    /// Reading the version, or beginning or committing a step's transaction, failed.
    Db { file: String, source: rusqlite::Error },
}

impl fmt::Display for MigrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigrationError::Newer { file, found, known } => write!(
                f,
                "{file} has schema version {found}, but this program knows versions up to {known}: it was written \
                 by a newer release. Run that release (or a later one), or restore a copy of the file from before \
                 the upgrade; this program leaves the file untouched"
            ),
            MigrationError::Step { file, version, kept, source } => write!(
                f,
                "{file}: migrating to schema version {version} failed and was rolled back (the file stays at \
                 version {kept}): {source}"
            ),
            MigrationError::Db { file, source } => write!(f, "{file}: reading or updating the schema version: {source}"),
        }
    }
}

impl std::error::Error for MigrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MigrationError::Newer { .. } => None,
            MigrationError::Step { source, .. } | MigrationError::Db { source, .. } => Some(source),
        }
    }
}

/// The newest version `steps` lead to.
pub fn latest(steps: &[Step]) -> u32 {
    steps.last().map_or(0, |s| s.version)
}

/// The schema version of the database on `conn`.
pub fn version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Runs `migrate` with `synchronous = NORMAL` when the database is in WAL mode, and restores
/// the setting it had after, whatever `migrate` returned (see the module's comment). In any
/// other journal mode NORMAL could leave a corrupt file after a power failure, so `migrate`
/// runs as the database is set. `db_error` turns a failed pragma into the caller's error: a
/// setting that could not be restored must fail the open, or every later commit would skip
/// its sync.
pub fn without_syncs<T, E>(
    conn: &mut Connection,
    migrate: impl FnOnce(&mut Connection) -> Result<T, E>,
    db_error: impl Fn(rusqlite::Error) -> E,
) -> Result<T, E> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).map_err(&db_error)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return migrate(conn);
    }
    let synchronous: i64 = conn.query_row("PRAGMA synchronous", [], |r| r.get(0)).map_err(&db_error)?;
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(&db_error)?;
    let migrated = migrate(conn);
    conn.pragma_update(None, "synchronous", synchronous).map_err(&db_error)?;
    migrated
}

/// Why [`build_whole`] did not put a new database in place.
#[derive(Debug)]
pub enum BuildError<E> {
    /// `build` failed: its own error.
    Build(E),
    /// Checkpointing the new file, or putting it in place.
    Io { path: std::path::PathBuf, error: std::io::Error },
}

/// A new database is built whole at `<path>.new` and renamed into place: a first start is all
/// or nothing. openmls' storage migrations commit each table apart from the record of it, and a
/// file left between the two never opened again; a crash now leaves at most a `.new` file,
/// which the next build throws away (nothing in it was ever used). `build` opens the file it is
/// given, configures and migrates it and fills it; the connection it returns is checkpointed
/// (with `synchronous = FULL` the checkpoint syncs the file: it is on disk before the rename)
/// and closed, and the directory is synced after the rename. No descriptor of a database file is
/// opened outside SQLite ("How To Corrupt" 2.2). Used by every database of the package.
pub fn build_whole<E>(path: &std::path::Path, build: impl FnOnce(&std::path::Path) -> Result<Connection, E>) -> Result<(), BuildError<E>> {
    use std::path::PathBuf;
    let new = PathBuf::from(format!("{}.new", path.display()));
    let io = |error: std::io::Error| BuildError::Io { path: path.to_path_buf(), error };
    for suffix in ["", "-wal", "-shm"] {
        match std::fs::remove_file(format!("{}{suffix}", new.display())) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
            _ => {}
        }
    }
    {
        let conn = build(&new).map_err(BuildError::Build)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(|e| io(std::io::Error::other(e)))?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(|e| io(std::io::Error::other(e)))?;
    }
    // Closed, the last connection: its -wal and -shm went with it.
    std::fs::rename(&new, path).map_err(io)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    }
    Ok(())
}

/// Brings the database on `conn` to the newest version of `steps` (numbered 1, 2, … in order),
/// or refuses a file newer than that. Safe against another process migrating the same file at
/// the same time: each step re-reads the version inside its write transaction.
pub fn migrate(conn: &Connection, steps: &[Step]) -> Result<Migrated, MigrationError> {
    // A programming error, caught by the first test that opens the database.
    assert!(
        steps.iter().zip(1..).all(|(s, n)| s.version == n),
        "schema steps must be numbered 1, 2, ... in order"
    );
    let file = describe(conn);
    let db = |source| MigrationError::Db { file: file.clone(), source };
    let known = latest(steps);
    let from = version(conn).map_err(db)?;
    if from > known {
        return Err(MigrationError::Newer { file, found: from, known });
    }
    let adopted = from == 0 && has_tables(conn).map_err(db)?;
    if adopted {
        log::info!("{file} has no schema version: adopting it as version 1, the schema of the release before versions");
    }
    let mut at = from;
    while at < known {
        let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate).map_err(db)?;
        at = version(&tx).map_err(db)?;
        if at > known {
            return Err(MigrationError::Newer { file, found: at, known });
        }
        // A new file has nothing to resume: every step goes in this one transaction.
        let last = if at == 0 && !has_tables(&tx).map_err(db)? { steps.len() } else { at as usize + 1 };
        // None: another process brought the file to the newest version meanwhile.
        let Some(pending) = steps.get(at as usize..last) else { break };
        for step in pending {
            let step_failed = |source| MigrationError::Step { file: file.clone(), version: step.version, kept: at, source };
            for sql in step.sql {
                tx.execute_batch(sql).map_err(step_failed)?;
            }
            tx.pragma_update(None, "user_version", step.version).map_err(step_failed)?;
        }
        tx.commit().map_err(db)?;
        at = last as u32;
    }
    if from != 0 && from < known {
        log::info!("{file}: schema upgraded from version {from} to {known}");
    }
    Ok(Migrated { from, to: known, adopted })
}

fn describe(conn: &Connection) -> String {
    match conn.path() {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => "in-memory database".to_string(),
    }
}

fn has_tables(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table')", [], |r| r.get(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEPS: &[Step] = &[
        Step { version: 1, sql: &["CREATE TABLE IF NOT EXISTS a (x INTEGER); INSERT INTO a VALUES (1);"] },
        Step { version: 2, sql: &["CREATE TABLE b (y TEXT);", "INSERT INTO b SELECT 'from a ' || x FROM a;"] },
        Step { version: 3, sql: &["ALTER TABLE b ADD COLUMN z INTEGER NOT NULL DEFAULT 7;"] },
    ];

    fn count(conn: &Connection, table: &str) -> i64 {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).expect("count")
    }

    #[test]
    fn a_new_database_gets_every_step_in_order_and_a_second_open_none() {
        let conn = Connection::open_in_memory().expect("db");
        let m = migrate(&conn, STEPS).expect("migrate");
        assert_eq!(m, Migrated { from: 0, to: 3, adopted: false });
        assert_eq!(version(&conn).expect("version"), 3);
        // Step 2 saw step 1's row, step 3 saw step 2's table.
        let (y, z): (String, i64) = conn.query_row("SELECT y, z FROM b", [], |r| Ok((r.get(0)?, r.get(1)?))).expect("row");
        assert_eq!((y.as_str(), z), ("from a 1", 7));
        // Each step ran exactly once: reopening runs nothing (step 1 would add a second row).
        assert_eq!(migrate(&conn, STEPS).expect("again"), Migrated { from: 3, to: 3, adopted: false });
        assert_eq!((count(&conn, "a"), count(&conn, "b")), (1, 1));
    }

    #[test]
    fn an_older_database_gets_only_the_steps_it_lacks() {
        let conn = Connection::open_in_memory().expect("db");
        migrate(&conn, &STEPS[..1]).expect("the older program");
        conn.execute("INSERT INTO a VALUES (2)", []).expect("data of the older program");
        assert_eq!(migrate(&conn, STEPS).expect("upgrade"), Migrated { from: 1, to: 3, adopted: false });
        assert_eq!(count(&conn, "a"), 2, "step 1 did not run again");
        assert_eq!(count(&conn, "b"), 2, "step 2 saw the older program's data");
    }

    #[test]
    fn an_unversioned_database_with_the_first_schema_is_adopted_as_version_1() {
        let conn = Connection::open_in_memory().expect("db");
        conn.execute_batch("CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (5);").expect("unversioned");
        let m = migrate(&conn, STEPS).expect("adopt");
        assert_eq!(m, Migrated { from: 0, to: 3, adopted: true });
        // Step 1's IF NOT EXISTS left the table and its row; its INSERT is the only addition.
        let xs: Vec<i64> =
            conn.prepare("SELECT x FROM a ORDER BY x").expect("q").query_map([], |r| r.get(0)).expect("rows").map(|r| r.expect("x")).collect();
        assert_eq!(xs, vec![1, 5]);
    }

    #[test]
    fn a_failed_step_leaves_nothing_behind_and_the_next_open_resumes_there() {
        let conn = Connection::open_in_memory().expect("db");
        migrate(&conn, &STEPS[..1]).expect("the older program");
        let broken: &[Step] = &[
            STEPS[0],
            Step { version: 2, sql: &["CREATE TABLE b (y TEXT);", "INSERT INTO b VALUES ('half');", "INSERT INTO missing VALUES (1);"] },
        ];
        let e = migrate(&conn, broken).expect_err("step 2 fails");
        assert!(matches!(e, MigrationError::Step { version: 2, .. }), "{e:?}");
        assert!(e.to_string().contains("stays at version 1"), "{e}");
        assert_eq!(version(&conn).expect("version"), 1, "step 1 stays committed");
        let b: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE name = 'b'", [], |r| r.get(0))
            .expect("schema");
        assert_eq!(b, 0, "nothing of step 2 is left, not even its first statements");
        // The fixed program resumes at step 2.
        assert_eq!(migrate(&conn, STEPS).expect("resume"), Migrated { from: 1, to: 3, adopted: false });
        assert_eq!((count(&conn, "a"), count(&conn, "b")), (1, 1));
    }

    #[test]
    fn a_new_database_whose_step_fails_is_left_empty() {
        let conn = Connection::open_in_memory().expect("db");
        let broken: &[Step] = &[STEPS[0], STEPS[1], Step { version: 3, sql: &["INSERT INTO missing VALUES (1);"] }];
        let e = migrate(&conn, broken).expect_err("step 3 fails");
        assert!(matches!(e, MigrationError::Step { version: 3, kept: 0, .. }), "{e:?}");
        assert!(e.to_string().contains("stays at version 0"), "{e}");
        // Steps 1 and 2 shared the failed step's transaction: the file is as new.
        assert_eq!(version(&conn).expect("version"), 0);
        assert!(!has_tables(&conn).expect("schema"), "steps 1 and 2 went with step 3");
        assert_eq!(migrate(&conn, STEPS).expect("the fixed program"), Migrated { from: 0, to: 3, adopted: false });
        assert_eq!((count(&conn, "a"), count(&conn, "b")), (1, 1));
    }

    #[test]
    fn migrations_skip_the_syncs_and_restore_the_setting_after() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let synchronous = |c: &Connection| -> i64 { c.query_row("PRAGMA synchronous", [], |r| r.get(0)).expect("pragma") };
        let mut wal = Connection::open(tmp.path().join("wal.db")).expect("db");
        wal.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;").expect("wal");
        let during = without_syncs(&mut wal, |c| Ok::<_, rusqlite::Error>(synchronous(c)), |e| e).expect("run");
        assert_eq!((during, synchronous(&wal)), (1, 2), "NORMAL while migrating, FULL again after");
        // Restored after a failure too.
        let failed = without_syncs(&mut wal, |c| migrate(c, &[Step { version: 1, sql: &["INSERT INTO missing VALUES (1);"] }]), |e| {
            MigrationError::Db { file: "wal.db".into(), source: e }
        });
        assert!(failed.is_err());
        assert_eq!(synchronous(&wal), 2);
        // A rollback journal keeps its setting: NORMAL could corrupt it at a power failure.
        let mut rollback = Connection::open(tmp.path().join("rollback.db")).expect("db");
        rollback.execute_batch("PRAGMA journal_mode = TRUNCATE; PRAGMA synchronous = FULL;").expect("truncate");
        let during = without_syncs(&mut rollback, |c| Ok::<_, rusqlite::Error>(synchronous(c)), |e| e).expect("run");
        assert_eq!(during, 2);
    }

    #[test]
    fn a_newer_database_is_refused_with_the_file_and_both_versions() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("future.db");
        let conn = Connection::open(&path).expect("db");
        migrate(&conn, STEPS).expect("migrate");
        conn.pragma_update(None, "user_version", 9).expect("a later release");
        let e = migrate(&conn, &STEPS[..2]).expect_err("refused");
        assert!(matches!(e, MigrationError::Newer { found: 9, known: 2, .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("version 9") && text.contains("up to 2"), "{text}");
        assert_eq!(version(&conn).expect("version"), 9, "untouched");
    }

    #[test]
    fn a_build_that_stops_half_way_leaves_nothing_in_place_and_the_next_builds_whole() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("new.db");
        let half = build_whole(&path, |new| {
            let conn = Connection::open(new)?;
            conn.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE a (x); INSERT INTO a VALUES (1);")?;
            Err::<Connection, rusqlite::Error>(rusqlite::Error::InvalidQuery) // the process dies here
        });
        assert!(matches!(half, Err(BuildError::Build(_))));
        assert!(!path.exists(), "nothing in place");
        assert!(tmp.path().join("new.db.new").exists(), "the half-built file stays beside it");
        build_whole(&path, |new| {
            let mut conn = Connection::open(new)?;
            conn.execute_batch("PRAGMA journal_mode = WAL;")?;
            migrate(&mut conn, STEPS).map_err(|_| rusqlite::Error::InvalidQuery)?;
            Ok::<_, rusqlite::Error>(conn)
        })
        .map_err(|e| format!("{e:?}"))
        .expect("built");
        let conn = Connection::open(&path).expect("open");
        assert_eq!(version(&conn).expect("version"), latest(STEPS));
        assert!(!tmp.path().join("new.db.new").exists(), "the leftover was thrown away");
        assert_eq!(std::fs::metadata(tmp.path().join("new.db-wal")).map(|m| m.len()).unwrap_or(0), 0, "checkpointed before the rename");
    }
}
