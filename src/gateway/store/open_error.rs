//! Why a bot's state database could not be opened: each case names the file (or the bot it
//! belongs to) so the gateway's start-up line says what to fix.

use std::fmt;
use std::path::PathBuf;

use super::StoreError;
use crate::crypto::mls::MlsError;
use crate::migrations::MigrationError;

#[derive(Debug)]
pub enum StoreOpenError {
    /// The file cannot be opened or read, for a reason `Fault` cannot tell.
    Open { path: PathBuf, error: StoreError },
    /// The file is unreadable, no database, under another key, or damaged (`fault`).
    Fault(super::fault::Fault),
    /// Setting the connection's pragmas failed.
    Configure { path: PathBuf, error: rusqlite::Error },
    /// Our schema could not be migrated (or the file is from a newer release); names the file.
    Schema(MigrationError),
    /// openmls' own tables could not be migrated.
    MlsStorage { path: PathBuf, error: MlsError },
    /// A new database, built whole beside its place (`Store::open`), could not be put there.
    Build { path: PathBuf, error: std::io::Error },
    /// Reading or writing which bot the database belongs to.
    Owner(rusqlite::Error),
    /// The database belongs to bot `existing`, not to `expected`.
    OtherBot { path: PathBuf, existing: String, expected: String },
    /// The writer thread could not be started.
    Writer(std::io::Error),
    /// Moving the database to the key of the bot's new recovery secret failed (`rekey`); the
    /// database is as it was, under the previous secret.
    Rekey { path: PathBuf, error: StoreError },
}

impl fmt::Display for StoreOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreOpenError::Open { path, error } => write!(
                f,
                "cannot open state database {}: {error}",
                path.display()
            ),
            StoreOpenError::Fault(fault) => write!(f, "{fault}"),
            StoreOpenError::Configure { path, error } => {
                write!(f, "cannot configure state database {}: {error}", path.display())
            }
            StoreOpenError::Schema(e) => write!(f, "{e}"),
            StoreOpenError::MlsStorage { path, error } if error.to_string().contains("already exists") => write!(
                f,
                "state database {}: openmls' storage tables are there without the record of their migrations ({error}). \
                 A release before 0.46 was stopped in the middle of this bot's first start, or the database's -wal was cut \
                 short and SQLite went back to an earlier state. Restore the database together with its -wal from a \
                 backup; if this bot never ran from this state_dir, reset it: bot-gateway reset-state CONFIG @BOT",
                path.display()
            ),
            StoreOpenError::MlsStorage { path, error } => write!(f, "state database {}: {error}", path.display()),
            StoreOpenError::Build { path, error } => {
                write!(f, "cannot put the new state database {} in place: {error}", path.display())
            }
            StoreOpenError::Owner(e) => write!(f, "{e}"),
            StoreOpenError::OtherBot { path, existing, expected } => write!(
                f,
                "state database {} belongs to bot {existing}, not to {expected}; use the state_dir of this bot",
                path.display()
            ),
            StoreOpenError::Writer(e) => write!(f, "cannot start store writer: {e}"),
            StoreOpenError::Rekey { path, error } => write!(
                f,
                "cannot re-encrypt state database {} under the new identity_recovery_secret_hex: {error} (it is unchanged, \
                 under previous_identity_recovery_secret_hex)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StoreOpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreOpenError::Open { error, .. } => Some(error),
            StoreOpenError::Configure { error, .. } | StoreOpenError::Owner(error) => Some(error),
            StoreOpenError::Schema(e) => Some(e),
            StoreOpenError::MlsStorage { error, .. } => Some(error),
            StoreOpenError::OtherBot { .. } => None,
            StoreOpenError::Fault(fault) => Some(fault),
            StoreOpenError::Writer(e) | StoreOpenError::Build { error: e, .. } => Some(e),
            StoreOpenError::Rekey { error, .. } => Some(error),
        }
    }
}
