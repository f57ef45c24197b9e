//! What a failed gRPC call means, in one place for every caller of the platform: its status
//! code, whether the credential was refused, and one short line to put in an error or a log.

use grpcio::RpcStatusCode;

/// The status code of a failed call; `None` for a failure below gRPC (transport, codec).
pub fn code(e: &grpcio::Error) -> Option<RpcStatusCode> {
    match e {
        grpcio::Error::RpcFailure(s) => Some(s.code()),
        _ => None,
    }
}

/// How every refusal of a removed device's credential begins (its code is UNAUTHENTICATED,
/// like a revoked token's): the platform puts it first, the gateway looks for it. A revoked or
/// rotated token says "bot token revoked or unknown" instead.
pub const DEVICE_REMOVED: &str = "device removed:";

/// What a removed device's refusal also says when the device belongs to the bot's old
/// identity: its owner moved the bot to a new one (`/rekey`), which removed every device.
pub const IDENTITY_MOVED: &str = "(identity moved)";

/// How every refusal of a disabled bot's token begins (`@BotManager /disable`).
pub const BOT_DISABLED: &str = "bot disabled:";

/// The refusal of a token that is not the bot's current one: replaced by `/token`, or never
/// issued.
pub const TOKEN_REVOKED: &str = "bot token revoked or unknown";

/// The platform's refusal of a disabled bot's credential.
pub fn bot_disabled_message(bot_id: u64) -> String {
    format!("{BOT_DISABLED} bot {bot_id} was disabled by its owner via @BotManager /disable")
}

/// Why the platform refuses a bot's credential, as its message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `/removedevice` removed this runtime's device; the token still works elsewhere.
    DeviceRemoved,
    /// `/rekey` gave the bot a new identity and removed every device of the old one; this
    /// runtime goes on once restarted with the new secret (its state kept).
    IdentityMoved,
    /// `/disable`: the bot is disabled for good (it cannot get a new token).
    BotDisabled,
    /// The token is not the current one: `/token` replaced it (or it was never issued).
    TokenReplaced,
}

impl Refusal {
    /// Classifies a refusal's message (a `grpcio::Error`'s text or the status message).
    pub fn of(message: &str) -> Refusal {
        if message.contains(DEVICE_REMOVED) && message.contains(IDENTITY_MOVED) {
            Refusal::IdentityMoved
        } else if message.contains(DEVICE_REMOVED) {
            Refusal::DeviceRemoved
        } else if message.contains(BOT_DISABLED) {
            Refusal::BotDisabled
        } else {
            Refusal::TokenReplaced
        }
    }

    /// The name `/healthz` reports (`credential`).
    pub fn name(self) -> &'static str {
        match self {
            Refusal::DeviceRemoved => "device_removed",
            Refusal::IdentityMoved => "identity_moved",
            Refusal::BotDisabled => "bot_disabled",
            Refusal::TokenReplaced => "token_replaced",
        }
    }
}

/// The platform refused the call because this device was removed by the bot's owner
/// (`@BotManager /removedevice`), as opposed to a revoked token or a disabled bot.
pub fn is_device_removed(e: &grpcio::Error) -> bool {
    match e {
        grpcio::Error::RpcFailure(s) => {
            s.code() == RpcStatusCode::UNAUTHENTICATED && s.message().starts_with(DEVICE_REMOVED)
        }
        _ => false,
    }
}

/// The platform refused the credential (revoked or rotated token, disabled bot, removed
/// device).
pub fn is_unauthenticated(e: &grpcio::Error) -> bool {
    matches!(code(e), Some(RpcStatusCode::UNAUTHENTICATED | RpcStatusCode::PERMISSION_DENIED))
}

/// One short line: "UNAVAILABLE: failed to connect" (the code's name without its number).
pub fn text(e: &grpcio::Error) -> String {
    match e {
        grpcio::Error::RpcFailure(s) => {
            // The code prints as "14-UNAVAILABLE"; the name alone reads better.
            let code = format!("{:?}", s.code());
            let code = code.split_once('-').map(|(_, name)| name.to_string()).unwrap_or(code);
            if s.message().is_empty() {
                code
            } else {
                format!("{code}: {}", s.message())
            }
        }
        other => other.to_string(),
    }
    .replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use grpcio::{RpcStatus, RpcStatusCode};

    use super::*;

    #[test]
    fn codes_credential_refusals_and_text() {
        let refused = grpcio::Error::RpcFailure(RpcStatus::with_message(RpcStatusCode::UNAUTHENTICATED, "token revoked".into()));
        assert!(is_unauthenticated(&refused));
        assert_eq!(text(&refused), "UNAUTHENTICATED: token revoked");
        let down = grpcio::Error::RpcFailure(RpcStatus::new(RpcStatusCode::UNAVAILABLE));
        assert!(!is_unauthenticated(&down));
        assert_eq!((code(&down), text(&down)), (Some(RpcStatusCode::UNAVAILABLE), "UNAVAILABLE".to_string()));
        assert_eq!(code(&grpcio::Error::RemoteStopped), None);
        assert!(!is_device_removed(&refused));
        let removed = grpcio::Error::RpcFailure(RpcStatus::with_message(
            RpcStatusCode::UNAUTHENTICATED,
            format!("{DEVICE_REMOVED} device 3 of bot 7 was removed"),
        ));
        assert!(is_device_removed(&removed) && is_unauthenticated(&removed));
        assert_eq!(Refusal::of(&removed.to_string()), Refusal::DeviceRemoved);
        let moved = format!("{DEVICE_REMOVED} device 3 of bot 7 belongs to the bot's old identity {IDENTITY_MOVED}");
        assert_eq!(Refusal::of(&moved), Refusal::IdentityMoved);
        assert_eq!(Refusal::of(&bot_disabled_message(7)), Refusal::BotDisabled);
        assert_eq!(Refusal::of(TOKEN_REVOKED), Refusal::TokenReplaced);
    }
}
