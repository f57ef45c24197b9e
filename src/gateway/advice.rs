//! What the platform's refusal of a bot's credential means and what the operator does about
//! it, in one text for the log, `/healthz`, start-up errors and `check-config`.

use crate::wire::rpc;

/// What the platform's refusal of a bot's credential means and what to do, for the log,
/// `/healthz`, start-up errors and `check-config`.
pub fn refusal_advice(refusal: rpc::Refusal, username: &str, device_id: u32) -> String {
    match refusal {
        rpc::Refusal::TokenReplaced => format!(
            "the platform no longer accepts bot @{username}'s token: it was replaced (@BotManager /token @{username}) \
             or revoked. Put the current token (from /token @{username}) in bots[].token of the config and restart \
             the gateway; pending updates stay in state_dir"
        ),
        rpc::Refusal::BotDisabled => format!(
            "bot @{username} was disabled by its owner (@BotManager /disable @{username}): the platform refuses it for \
             good and a disabled bot cannot get a new token. Remove it from the config (or create a new bot with \
             /newbot) and restart the gateway"
        ),
        rpc::Refusal::DeviceRemoved => format!(
            "this runtime's device {device_id} was removed via @BotManager /removedevice; it receives nothing more. \
             Start it with a fresh state_dir to register a new device"
        ),
        rpc::Refusal::IdentityMoved => format!(
            "the bot has a new identity (its owner's @BotManager /rekey), and this runtime's device {device_id} \
             belonged to the old one. Restart the gateway with the config e2e-chat rekey wrote (the new \
             identity_recovery_secret_hex and bot_id_hex, the old secret as previous_identity_recovery_secret_hex): it \
             keeps its state and registers a device of the new identity"
        ),
    }
}
