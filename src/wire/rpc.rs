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
    }
}
