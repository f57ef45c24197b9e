//! The client error type. Every message names what failed (which user, profile, call) in one
//! line, and never carries a key, a device secret or message text; except where the text is
//! the answer to the user's own command (a button's label, @BotManager's refusal line).

use std::fmt;
use std::path::PathBuf;

use grpcio::RpcStatusCode;

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
    /// Another process of this profile reads its inbox now (`reader`): `holder` is its pid
    /// and command, as it recorded them.
    InboxBusy { holder: Option<String> },
    /// Uploading or downloading a file failed; `what` names the file or the message, never
    /// its key.
    File { what: String, source: crate::e2e::file::FileError },
    /// The platform serves another account identity key for a peer than the one this profile
    /// pinned: nothing is sent to them, and nothing from a new device of theirs is shown (the
    /// inbox stops at it, unacknowledged), until the person accepts it (`e2e-chat trust`).
    IdentityChanged { username: String, user_id: u64 },
    /// The platform answers a name with another account than the one this profile met under
    /// it (`was`): nothing is sent to either until the person accepts it (`e2e-chat trust`).
    NameRebound { name: String, was: u64, now: u64 },
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
            ClientError::Rpc { call, status } => write!(f, "{}", rpc_sentence(call, status)),
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
            ClientError::InboxBusy { holder } => write!(
                f,
                "another e2e-chat reads this profile's inbox now ({}), and the platform gives a device one inbox \
                 stream: what arrives is shown there. Stop it (Ctrl-C, or /quit in chat mode) to read here, or use it",
                holder.as_deref().unwrap_or("a process that did not say which")
            ),
            ClientError::File { what, source } => write!(f, "{what}: {source}"),
            ClientError::IdentityChanged { username, user_id } => write!(
                f,
                "SECURITY WARNING: the platform now serves another identity key for @{username} (user {user_id}) than the \
                 one this profile pinned when it first met them; nothing is sent to them and nothing from them is shown. Compare it with `e2e-chat verify \
                 @{username}`; if the change is expected (a new account key), accept it with `e2e-chat trust @{username}`"
            ),
            ClientError::NameRebound { name, was, now } => write!(
                f,
                "SECURITY WARNING: the platform now says @{name} is user {now}, but this profile met @{name} as user {was}: \
                 another account, with keys of its own. Nothing is sent. If you expect it (the old account is gone and \
                 the name went to someone else), compare `e2e-chat verify @{name}` with them, then accept it with \
                 `e2e-chat trust @{name}`"
            ),
            ClientError::Invalid(what) => write!(f, "{what}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl ClientError {
    /// The platform could not be reached or did not answer: the same call may succeed later
    /// (a queued message waits for it). Refusals, and everything local, are not transient.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Rpc { status, .. } => matches!(
                crate::wire::rpc::code(status),
                None | Some(RpcStatusCode::UNAVAILABLE | RpcStatusCode::DEADLINE_EXCEEDED | RpcStatusCode::CANCELLED)
            ),
            _ => false,
        }
    }
}

/// A failed platform call as a sentence a person reads: the platform's own words for a
/// refusal ("@alice is already a member of this group"), plain words for a platform that cannot
/// be reached; the call's name and the status code only for what is neither.
/// The error of a failed platform call `call`, for `map_err`.
pub(super) fn rpc(call: &'static str) -> impl Fn(grpcio::Error) -> ClientError {
    move |status| ClientError::Rpc { call, status }
}

fn rpc_sentence(call: &str, status: &grpcio::Error) -> String {
    let message = match status {
        grpcio::Error::RpcFailure(s) => s.message().replace('\n', " "),
        _ => String::new(),
    };
    match crate::wire::rpc::code(status) {
        None | Some(RpcStatusCode::UNAVAILABLE) => "the platform cannot be reached right now".to_string(),
        Some(RpcStatusCode::DEADLINE_EXCEEDED) => "the platform did not answer in time".to_string(),
        Some(RpcStatusCode::UNAUTHENTICATED) => {
            format!("the platform no longer accepts this device{}", if message.is_empty() { String::new() } else { format!(": {message}") })
        }
        Some(
            RpcStatusCode::ALREADY_EXISTS
            | RpcStatusCode::NOT_FOUND
            | RpcStatusCode::PERMISSION_DENIED
            | RpcStatusCode::FAILED_PRECONDITION
            | RpcStatusCode::INVALID_ARGUMENT
            | RpcStatusCode::RESOURCE_EXHAUSTED
            | RpcStatusCode::OUT_OF_RANGE,
        ) if !message.is_empty() => message,
        Some(_) => format!("the platform failed to answer {call}: {}", crate::wire::rpc::text(status)),
    }
}

impl From<crate::wire::Invalid> for ClientError {
    fn from(e: crate::wire::Invalid) -> Self {
        ClientError::Invalid(e.0)
    }
}

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

#[cfg(test)]
mod tests {
    use grpcio::{RpcStatus, RpcStatusCode};

    use super::*;

    fn rpc(code: RpcStatusCode, message: &str) -> ClientError {
        ClientError::Rpc { call: "AddGroupMember", status: grpcio::Error::RpcFailure(RpcStatus::with_message(code, message.into())) }
    }

    #[test]
    fn platform_errors_read_as_sentences() {
        let taken = rpc(RpcStatusCode::ALREADY_EXISTS, "@alice is already a member of this group");
        assert_eq!(taken.to_string(), "@alice is already a member of this group");
        assert!(!taken.is_transient());
        let down = rpc(RpcStatusCode::UNAVAILABLE, "failed to connect to all addresses; last error: ipv4:127.0.0.1:7001");
        assert_eq!(down.to_string(), "the platform cannot be reached right now");
        assert!(down.is_transient());
        let slow = rpc(RpcStatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded");
        assert_eq!(slow.to_string(), "the platform did not answer in time");
        assert!(slow.is_transient());
        let cut = ClientError::Rpc { call: "SendMessages", status: grpcio::Error::RemoteStopped };
        assert!(cut.is_transient());
        let odd = rpc(RpcStatusCode::INTERNAL, "boom");
        assert_eq!(odd.to_string(), "the platform failed to answer AddGroupMember: INTERNAL: boom");
        for e in [&taken, &down, &slow, &odd] {
            assert!(!e.to_string().contains("RpcFailure"), "{e}");
        }
    }
}
