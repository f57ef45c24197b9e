//! The reference platform server: accounts, devices and prekeys, device inboxes, and the
//! gRPC service over them. It only ever stores public keys, digests of secrets and ciphertext
//! of user dialogs.
//!
//! - `cli`: the `platform-server` program (serve, create-bot).
//! - `server`: `RunningServer`, a started gRPC server (also for in-process tests).
//! - `service`: the `Platform` gRPC service: request checks, then one store call; one file per
//!   area (accounts, devices, messaging) behind one unary-call path.
//! - `convert`: wire ↔ store conversions and key checks, shared by `service` and `manager`.
//! - `auth`: the caller's credential from call metadata.
//! - `inbox`: the Inbox stream (a feeder thread per stream, woken on commit).
//! - `store`: the SQLite database `platform.db`.
//! - `bots`: provisioning a bot (recovery secret, identity key, token).
//! - `rules`: usernames, display names, capabilities, token format.
//! - `manager`: the built-in management bot (`@BotManager`), an in-process E2E endpoint; the
//!   only dialogs whose plaintext the platform sees, kept in its own `manager.db`.

mod auth;
mod bots;
mod call_threads;
mod cli;
mod convert;
mod error;
mod inbox;
pub mod manager;
pub mod rules;
mod server;
mod service;
mod unary_workers;
pub mod store;

pub use bots::{provision_bot, provision_bot_with, BotCredentials, BotSecrets};
pub use cli::run_cli;
pub use error::{PlatformError, Result};
pub use manager::{ManagerBot, ManagerConfig};
pub use server::{RunningServer, ServerOptions};
pub use service::PlatformService;
pub use store::Store;
