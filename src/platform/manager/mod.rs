//! The built-in management bot (`@BotManager` by default): users create and manage their bots
//! in an end-to-end encrypted dialog with it (`/newbot`, `/mybots`, `/token`, `/disable`,
//! `/devices`, `/removedevice`).
//!
//! It is an ordinary end-to-end endpoint: a bot account with its own identity key, one device
//! with prekeys and Double Ratchet sessions, an inbox it acknowledges, and replies that go
//! through the platform's send path (a ciphertext per recipient device, idempotent client
//! message ids, stale-device handling). It runs in-process on the `manager-bot` thread, woken
//! by the same inbox notifications as the gRPC Inbox streams; it has no token, so nobody can
//! act as it over gRPC.
//!
//! # Plaintext
//! The platform is an endpoint of these dialogs only, so it sees their plaintext, and its state
//! `manager.db` holds some (scenario answers; replies and new tokens until sent, then zeroed by
//! `secure_delete`). A bot's identity secret is never among them: the owner's client draws it
//! and sends the public key with a proof (`e2e::bot_key`). `platform.db` stays ciphertext-only
//! for user dialogs, and keeps only the identity public key and a token digest of each bot
//! created here.
//!
//! - `commands`: the conversation (pure: text + user + scenario → replies + scenario + effect);
//!   the reply formats other programs parse are documented there.
//! - `replies`: the replies that carry data (lists, the final `/newbot` reply and its config).
//! - `directory`: what the conversation reads from the platform.
//! - `state`: `manager.db` (identity seed, e2e device state, cursor, scenarios, effects, outbox).
//! - `runner`: set-up, the thread's loop, receiving, effects, sending.

pub mod commands;
mod directory;
pub mod replies;
mod runner;
mod state;

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::error::{PlatformError, Result};
use super::inbox::{InboxHub, LocalInboxCloser};
use super::store::{DeviceAddr, Store};
use runner::{RunError, Runner};

pub use state::DB_FILE;

/// The management bot's username unless `--manager-username` says otherwise.
pub const DEFAULT_USERNAME: &str = "BotManager";
/// The management bot's display name.
pub const DEFAULT_DISPLAY_NAME: &str = "Bot Manager";

/// How the management bot presents itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerConfig {
    /// 3 to 32 of A-Z a-z 0-9 _; unique ignoring case.
    pub username: String,
    pub display_name: String,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig { username: DEFAULT_USERNAME.to_string(), display_name: DEFAULT_DISPLAY_NAME.to_string() }
    }
}

/// The running management bot. `stop` (or drop) ends its thread and waits for it.
pub struct ManagerBot {
    closer: LocalInboxCloser,
    thread: Option<JoinHandle<()>>,
    device: DeviceAddr,
    username: String,
}

fn run_error(e: RunError) -> PlatformError {
    match e {
        RunError::Platform(e) => e,
        other => PlatformError::Internal(format!("management bot: {other}")),
    }
}

impl ManagerBot {
    /// Sets the bot up in `data_dir` (account, device, prekeys; on the calling thread, so a
    /// problem such as a taken username fails the server start) and starts its thread.
    pub(in crate::platform) fn start(
        data_dir: &Path,
        store: Arc<Store>,
        hub: Arc<InboxHub>,
        config: &ManagerConfig,
        endpoint: Option<String>,
    ) -> Result<ManagerBot> {
        let runner = Runner::set_up(data_dir, store, hub.clone(), config, endpoint).map_err(run_error)?;
        let device = runner.device();
        let inbox = hub.subscribe_local(device);
        let closer = inbox.closer();
        let thread = std::thread::Builder::new()
            .name("manager-bot".into())
            .spawn(move || runner.run(inbox))
            .map_err(|e| PlatformError::Internal(format!("cannot start the management bot thread: {e}")))?;
        log::info!("management bot @{} runs as user {} device {}", config.username, device.user_id, device.device_id);
        Ok(ManagerBot { closer, thread: Some(thread), device, username: config.username.clone() })
    }

    /// The bot's account id.
    pub fn user_id(&self) -> u64 {
        self.device.user_id
    }

    /// The bot's device.
    pub fn device(&self) -> DeviceAddr {
        self.device
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    /// Stops the thread after the unit of work in progress and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.closer.close();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                log::error!("the management bot thread panicked");
            }
        }
    }
}

impl Drop for ManagerBot {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests;
