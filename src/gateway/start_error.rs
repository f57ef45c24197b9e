//! Why the gateway could not start, as a type: which step failed, for which bot or listener,
//! and a description that names the file, field or directory and the fix. `main` prints it on
//! one line and exits non-zero.

use std::fmt;
use std::net::SocketAddr;

#[derive(Debug)]
pub enum StartError {
    /// The command line does not say what to do (exit status 2): why, and what exists.
    Usage(String),
    /// `check-config` found problems (it printed them; exit status 1).
    CheckFailed,
    /// The config file: unreadable, not JSON, a wrong or missing field, a wrong mode.
    Config(super::config::ConfigError),
    /// The state directory: mode, owner, or the lock held by another gateway.
    StateDir(super::state_dir::StateDirError),
    /// One bot's state database: a wrong recovery secret, a newer schema, I/O (boxed: it is
    /// the largest case, and the others should not carry its size).
    Store { bot: String, why: Box<super::store::StoreOpenError> },
    /// The state_dir's record of the bots it held (`held_bots`) cannot be read.
    Held(String),
    /// A bot the state_dir held whose database lost everything: the sentence and the two
    /// ways on (`held_bots::refusal`).
    LostState { bot: String, why: String },
    /// Registering or resuming one bot's device on the platform (unreachable, refused).
    Registration { bot: String, why: super::registration::RegistrationError },
    /// A listener could not bind its address.
    Listen { field: &'static str, addr: SocketAddr, why: std::io::Error },
    /// A thread of a bot could not be started.
    Thread { bot: String, why: std::io::Error },
    /// `backup`, `restore` or `check-state` did not do all it was asked (what, and the fix).
    State(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Usage(why) => write!(f, "{why}"),
            StartError::CheckFailed => write!(f, "the config has problems (see above)"),
            StartError::Config(e) => write!(f, "{e}"),
            StartError::StateDir(why) => write!(f, "{why}"),
            StartError::Store { bot, why } => write!(f, "bot @{bot}: {why}"),
            StartError::Registration { bot, why } => write!(f, "bot @{bot}: {why}"),
            StartError::Held(why) => write!(f, "{why}"),
            StartError::LostState { bot, why } => write!(f, "bot @{bot}: {why}"),
            StartError::Listen { field, addr, why } => write!(f, "cannot listen on {field} {addr}: {why}"),
            StartError::Thread { bot, why } => write!(f, "bot @{bot}: cannot start a thread: {why}"),
            StartError::State(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for StartError {}
