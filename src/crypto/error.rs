//! The crypto error type. Messages never carry key material or plaintext.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CryptoError {
    /// A signature (signed prekey, device certificate, proof) did not verify.
    BadSignature(&'static str),
    /// A key had the wrong length or was not a valid point.
    InvalidKey(&'static str),
    /// An envelope or stored state could not be decoded.
    Malformed(&'static str),
    /// Authentication failed: tampered header or body, wrong key, or wrong session.
    DecryptionFailed,
    /// The message key was already used or deleted: a replayed or very old message.
    DuplicateMessage,
    /// The sender skipped more messages than the session keeps keys for.
    TooManySkipped,
    /// A prekey message named a signed or one-time prekey we do not hold.
    UnknownPrekey(u32),
}

impl fmt::Display for CryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CryptoError::BadSignature(what) => write!(f, "bad signature on {what}"),
            CryptoError::InvalidKey(what) => write!(f, "invalid key: {what}"),
            CryptoError::Malformed(what) => write!(f, "malformed {what}"),
            CryptoError::DecryptionFailed => write!(f, "decryption failed (message not authentic)"),
            CryptoError::DuplicateMessage => write!(f, "duplicate or replayed message"),
            CryptoError::TooManySkipped => write!(f, "too many skipped messages"),
            CryptoError::UnknownPrekey(id) => write!(f, "unknown prekey {id}"),
        }
    }
}

impl std::error::Error for CryptoError {}

pub type Result<T> = std::result::Result<T, CryptoError>;
