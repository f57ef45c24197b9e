//! The platform server's error type and its mapping to gRPC status codes.
//!
//! Messages name the user, device or field concerned, never a secret, key or ciphertext.

use std::fmt;

use grpcio::{RpcStatus, RpcStatusCode};

/// Why a platform operation failed; each variant is one gRPC status code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlatformError {
    /// Missing, malformed, unknown or revoked credential.
    Unauthenticated(String),
    /// A valid caller that may not do this (e.g. an identity proof for another bot).
    PermissionDenied(String),
    /// A request field is malformed or out of range.
    InvalidArgument(String),
    /// The named user or device does not exist.
    NotFound(String),
    /// A username is taken.
    AlreadyExists(String),
    /// The request is valid but the state refuses it (an inline session already chosen or
    /// expired).
    FailedPrecondition(String),
    /// Storage failed; details are logged where it happened.
    Internal(String),
}

/// Result of platform operations.
pub type Result<T> = std::result::Result<T, PlatformError>;

impl PlatformError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> RpcStatusCode {
        match self {
            PlatformError::Unauthenticated(_) => RpcStatusCode::UNAUTHENTICATED,
            PlatformError::PermissionDenied(_) => RpcStatusCode::PERMISSION_DENIED,
            PlatformError::InvalidArgument(_) => RpcStatusCode::INVALID_ARGUMENT,
            PlatformError::NotFound(_) => RpcStatusCode::NOT_FOUND,
            PlatformError::AlreadyExists(_) => RpcStatusCode::ALREADY_EXISTS,
            PlatformError::FailedPrecondition(_) => RpcStatusCode::FAILED_PRECONDITION,
            PlatformError::Internal(_) => RpcStatusCode::INTERNAL,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            PlatformError::Unauthenticated(m)
            | PlatformError::PermissionDenied(m)
            | PlatformError::InvalidArgument(m)
            | PlatformError::NotFound(m)
            | PlatformError::AlreadyExists(m)
            | PlatformError::FailedPrecondition(m)
            | PlatformError::Internal(m) => m,
        }
    }

    /// The status sent to the caller.
    pub fn to_status(&self) -> RpcStatus {
        RpcStatus::with_message(self.code(), self.message().to_string())
    }
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            PlatformError::Unauthenticated(_) => "unauthenticated",
            PlatformError::PermissionDenied(_) => "permission denied",
            PlatformError::InvalidArgument(_) => "invalid argument",
            PlatformError::NotFound(_) => "not found",
            PlatformError::AlreadyExists(_) => "already exists",
            PlatformError::FailedPrecondition(_) => "refused",
            PlatformError::Internal(_) => "internal error",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl std::error::Error for PlatformError {}

/// Wraps a storage error with what was being done; logs it, because the caller only sees a
/// generic message.
pub(crate) fn db_error(context: &str) -> impl FnOnce(rusqlite::Error) -> PlatformError + '_ {
    move |e| {
        log::error!("platform storage: {context}: {e}");
        PlatformError::Internal(format!("storage error while {context}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_variants() {
        let cases = [
            (PlatformError::Unauthenticated("x".into()), RpcStatusCode::UNAUTHENTICATED),
            (PlatformError::PermissionDenied("x".into()), RpcStatusCode::PERMISSION_DENIED),
            (PlatformError::InvalidArgument("x".into()), RpcStatusCode::INVALID_ARGUMENT),
            (PlatformError::NotFound("x".into()), RpcStatusCode::NOT_FOUND),
            (PlatformError::AlreadyExists("x".into()), RpcStatusCode::ALREADY_EXISTS),
            (PlatformError::Internal("x".into()), RpcStatusCode::INTERNAL),
        ];
        for (err, code) in cases {
            assert_eq!(err.code(), code);
            assert_eq!(err.to_status().message(), "x");
        }
    }
}
