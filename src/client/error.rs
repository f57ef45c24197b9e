//! The client error type. Every message names what failed (which user, profile, call) in one
//! line, and never carries a key, a device secret or message text.

use std::fmt;
use std::path::PathBuf;

use crate::e2e::E2eError;

#[derive(Debug)]
pub enum ClientError {
    /// Reading or writing the profile directory.
    Io { what: String, source: std::io::Error },
    /// The profile database.
    Db(rusqlite::Error),
    /// The profile database could not be brought to this release's schema (or is from a newer one).
    Schema(crate::migrations::MigrationError),
    /// End-to-end state or crypto (a session, a certificate, a prekey).
    E2e { context: String, source: E2eError },
    /// A platform call failed.
    Rpc { call: &'static str, status: grpcio::Error },
    /// No account with this username.
    NoSuchUser(String),
    /// Registration refused because the username is taken.
    UsernameTaken(String),
    /// The profile directory holds no registered profile.
    NotRegistered(PathBuf),
    /// The profile directory already holds a registered profile.
    AlreadyRegistered { dir: PathBuf, username: String },
    /// The platform refused a message.
    Rejected { to: String, reason: String },
    /// The inbox stream broke or ended.
    InboxClosed(String),
    /// Uploading or downloading a file failed; `what` names the file or the message, never
    /// its key.
    File { what: String, source: crate::e2e::file::FileError },
    /// Anything else the caller did wrong or the platform answered unexpectedly.
    Invalid(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io { what, source } => write!(f, "{what}: {source}"),
            ClientError::Db(e) => write!(f, "profile database: {e}"),
            ClientError::Schema(e) => write!(f, "profile database: {e}"),
            ClientError::E2e { context, source } => write!(f, "{context}: {source}"),
            ClientError::Rpc { call, status } => write!(f, "platform call {call} failed: {}", crate::wire::rpc::text(status)),
            ClientError::NoSuchUser(name) => write!(f, "no user @{name} on the platform"),
            ClientError::UsernameTaken(name) => write!(f, "username @{name} is already taken"),
            ClientError::NotRegistered(dir) => {
                write!(f, "no registered profile in {} (run `e2e-chat --server URL --profile DIR register USERNAME` first)", dir.display())
            }
            ClientError::AlreadyRegistered { dir, username } => {
                write!(f, "profile {} is already registered as @{username}", dir.display())
            }
            ClientError::Rejected { to, reason } => write!(f, "the platform refused the message to @{to}: {reason}"),
            ClientError::InboxClosed(why) => write!(f, "inbox stream: {why}"),
            ClientError::File { what, source } => write!(f, "{what}: {source}"),
            ClientError::Invalid(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<crate::migrations::MigrationError> for ClientError {
    fn from(e: crate::migrations::MigrationError) -> Self {
        ClientError::Schema(e)
    }
}

impl From<rusqlite::Error> for ClientError {
    fn from(e: rusqlite::Error) -> Self {
        ClientError::Db(e)
    }
}

pub type Result<T> = std::result::Result<T, ClientError>;

/// Adds context to e2e errors.
pub(crate) trait E2eContext<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> E2eContext<T> for std::result::Result<T, E2eError> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| match source {
            E2eError::Db(e) => ClientError::Db(e),
            source => ClientError::E2e { context: context(), source },
        })
    }
}
