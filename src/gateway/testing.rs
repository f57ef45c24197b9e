//! The unit tests' bot: a real `BotShared` over a temporary store, on the fake platform.

use std::sync::Arc;

use super::runtime::BotShared;

/// A real bot (`@b_bot`, device 1) over a temporary store, on an in-memory platform that
/// answers nothing (every call UNAVAILABLE), whose sending methods wait `send_wait`: the unit
/// tests' bot (api methods, outbox).
pub fn test_bot(send_wait: std::time::Duration) -> (tempfile::TempDir, Arc<BotShared>) {
    let (dir, bot, _) = test_bot_on_fake(send_wait);
    (dir, bot)
}

/// `test_bot`, and the fake platform it calls, for the test to script and inspect.
pub fn test_bot_on_fake(
    send_wait: std::time::Duration,
) -> (tempfile::TempDir, Arc<BotShared>, Arc<crate::gateway::port::fake::FakePlatform>) {
    use crate::gateway::config::{BotConfig, Delivery};
    crate::crypto::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = format!("1:{}", "ab".repeat(32));
    let store = crate::gateway::store::Store::open(&dir.path().join("bot.db"), &[7u8; 32], &"cd".repeat(32), "b_bot").expect("store");
    let fake = Arc::new(crate::gateway::port::fake::FakePlatform::new(1));
    let config = BotConfig {
        bot_id_hex: "cd".repeat(32),
        token,
        recovery_secret: zeroize::Zeroizing::new([7u8; 32]),
        previous_recovery_secret: None,
        compat_user_id: 1,
        username: "b_bot".into(),
        first_name: "B".into(),
        accept_identity_changes: false,
    };
    let delivery = Delivery { send_wait, ..Delivery::default() };
    let bot = Arc::new(BotShared::new(&config, store, fake.clone()).with_delivery(delivery));
    (dir, bot, fake)
}

