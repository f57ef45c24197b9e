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
    }
}
